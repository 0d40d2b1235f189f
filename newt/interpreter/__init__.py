"""The interpreter: the executable spec of the kernel language (DESIGN.md, principle 4).

`launch(jitfn, grid, args, kwargs)` runs a @newt.jit kernel on CPU torch tensors, one program at
a time, with Triton's semantics; newt/jit.py calls it under NEWT_INTERPRET=1.

    check.py    the acceptance check shared with the compiler: the frontend builds the IR of
                each specialization once, so both paths reject the same programs at one line
    rewrite.py  `and` / `or` / `not` and loop-carried Python numbers as the frontend means them
    launch.py   arguments, grid, rebinding the kernel's globals, the program loop; a kernel
                line that raises gives a newt.KernelError naming it
    values.py   the value type (torch tensor + dtype), promotion, arithmetic, casts
    rounding.py casts to fp16 / bf16 / fp8 that round once (through fp32 rounded to odd)
    ops.py      language functions: creation, math, shapes, reductions, dot, debugging
    intdiv.py   integer `//` and `%` as the generated code defines them (MIN // -1, x // 0)
    memory.py   pointers, load/store with masks and bounds checks, atomics
    philox.py   rand/randn/randint: Triton's Philox4x32 stream
    libdevice.py  libdevice functions (newt.language.extra.libdevice) with torch
    extras.py   nl.math / nl.extra namespaces; Python's min / max / print inside kernels
    context.py  the current program id and source locations for errors

Where the interpreter is more defined than the GPU (say so when comparing):
  - programs run sequentially (x fastest), so races and atomics ordering never show;
  - a spin on memory no program can change any more (a lock held by a program that has ended,
    a flag a later program would set) raises an error naming the line after SPIN_LIMIT
    unchanged tries (memory.py), where the GPU would hang;
  - a masked load without `other` gives 0 (undefined on the GPU);
  - an unmasked access outside its tensor raises OutOfBoundsError (an IndexError) instead of
    reading garbage (except through a pointer made from an integer address, which it cannot
    tie to a tensor: such accesses are unchecked, as on the GPU);
  - nl.dot multiplies exactly (fp64, rounded once): tf32 is not emulated;
  - fp16/bf16 sums and cumsums accumulate in fp32; integer x // 0 is -1, x % 0 is x;
  - float->int casts saturate (NaN -> 0, 2^63's bits at 64 bits) as the GPU's cvt.rzi does,
    to 32 bits for 8- and 16-bit results, which keep the low bits, as the generated code does;
    Triton calls them undefined;
  - nl.inline_asm_elementwise cannot run (PTX): a kernel calling it raises a CompilationError;
  - nl.reduce / associative_scan / cumprod combine sequentially (the GPU combines in a tree).
"""
from .launch import launch  # noqa: F401
