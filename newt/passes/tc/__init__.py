"""The tensor-core passes (the "wing"): dots on tensor cores, their operand rings, TMA boxes,
the epilogue's TMA store and the persistent loop. Each is one named entry of
newt/passes/__init__.py's PASSES; their decisions are the schedule objects of
newt/ir/schedule.py and the layouts of newt/ir/layouts.py, which codegen/tc/ prints."""
