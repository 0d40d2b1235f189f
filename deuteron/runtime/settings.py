"""`deuteron.runtime.settings` (Helion's `helion.runtime.settings`): programs written for
several Helion backends ask which one runs (`_get_backend() == "pallas"`) and pick a kernel
variant; deuteron's backend is newt, which is none of Helion's, so such a program takes its
default (Triton) path. The kernel settings themselves are deuteron/settings.py."""
from __future__ import annotations


def get_backend() -> str:
    return "newt"


_get_backend = get_backend   # the spelling Helion's examples import
