"""Replacing a frozen schedule object (newt/ir/schedule.py) by a changed copy wherever the IR
holds it.

Where it sits: a helper of the tensor-core passes. The plans are frozen so that nothing after
the passes (codegen in particular) can change a decision; a pass that refines one (dot_tma.py
adds a ring's TMA boxes, or why it has none) records a new object, and every op that held the
old one holds the new one.
"""
from __future__ import annotations

import dataclasses


def replace_fact(fn, old, **changes):
    """A copy of `old` with `changes`, put in place of `old` in every op's attrs; returns it."""
    new = dataclasses.replace(old, **changes)
    for op in fn.walk():
        for k, v in op.attrs.items():
            if v is old:
                op.attrs[k] = new
    for k, v in fn.attrs.items():
        if v is old:
            fn.attrs[k] = new
    return new
