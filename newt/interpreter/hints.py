"""The hint and debugging functions of newt.language on interpreter values: hints return their
input, static_assert / static_print act at "compile time" (on constexprs), device_print and
device_assert act per program (part of the `nl` namespace launch.py assembles, through ops.py).
"""
from __future__ import annotations

from ..errors import CompilationError
from . import context
from .values import Tensor, to_tensor, unwrap


def multiple_of(input, values):
    return input


def max_contiguous(input, values):
    return input


def max_constancy(input, values):
    return input


def static_assert(cond, msg=""):
    from .ops import user_loc   # (late: ops imports this module)
    cond = unwrap(cond)
    if isinstance(cond, Tensor):
        raise CompilationError("static_assert needs a constexpr condition (use device_assert "
                               "for runtime values)", user_loc())
    if not cond:
        raise CompilationError(f"static_assert failed: {unwrap(msg)}", user_loc())


def static_print(*values):
    print(*(unwrap(v) for v in values))


def device_print(prefix, *args, hex=False):
    pid = context.current.pid
    for a in args:
        t = to_tensor(a)
        flat = t.data.reshape(-1).tolist()
        for i, v in enumerate(flat):
            v = f"0x{v & ((1 << t.dtype.bits) - 1):x}" if hex and isinstance(v, int) else v
            idx = f" idx ({i})" if t.data.dim() else ""
            print(f"pid ({pid[0]}, {pid[1]}, {pid[2]}){idx} {prefix}{v}")


def device_assert(cond, msg=""):
    c = to_tensor(cond)
    if not bool((c.data != 0).all()):
        raise AssertionError(unwrap(msg) or "device_assert failed")


def debug_barrier():
    pass
