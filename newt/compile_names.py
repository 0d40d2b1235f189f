"""Names under which torch.compile's traced code refers to launchable objects.

torch_ops.py (newt's and deuteron's) turns a launch into a custom op whose arguments must be
constants or tensors; the kernel itself travels as a registry key made at trace time by a
function dynamo runs for real (`torch.compiler.assume_constant_result`). Such a function may
take only values dynamo can hand over as constants: some torch releases (2.11) refuse any user
object there. So every launchable object (a @jit function, an @autotune / @heuristics wrapper,
a deuteron kernel) gets a name string when it is created, kept as a plain attribute
(`compile_name`) that traced code reads as a constant, and this weak registry turns the name
back into the object at trace and run time. Nothing here is on a launch's path.
"""
from __future__ import annotations

import itertools
import weakref

_OBJECTS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_COUNT = itertools.count()


def assign(obj, name: str) -> str:
    """A fresh name for `obj` (its function's name and a serial number)."""
    key = f"{name}#{next(_COUNT)}"
    _OBJECTS[key] = obj
    return key


def lookup(key: str):
    """The object a name was given to (it lives as long as the program holds it)."""
    return _OBJECTS[key]
