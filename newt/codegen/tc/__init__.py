"""Codegen of the tensor-core ops (the "wing"): mma.sync / wgmma, the operand rings (cp.async
and TMA), the accumulator's epilogue and the persistent loop. Each op reads the schedule the
passes recorded (newt/ir/schedule.py) and its layouts (newt/ir/layouts.py); nothing here
imports newt/passes. The handlers are listed in codegen/__init__.py's `register` call."""
