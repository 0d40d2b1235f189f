"""Helion's tunable fragments, for `hl.register_tunable(name, fragment)`: each has a default,
which a kernel runs with unless its config sets `name` (the search does not explore them)."""
from __future__ import annotations


class PowerOfTwoFragment:
    def __init__(self, low=1, high=1024, default_val=None):
        self.low, self.high, self.default_val = low, high, default_val

    def default(self):
        return self.default_val if self.default_val is not None else self.low


class IntegerFragment(PowerOfTwoFragment):
    pass


class EnumFragment:
    def __init__(self, choices=()):
        self.choices = tuple(choices)

    def default(self):
        return self.choices[0]


class BooleanFragment:
    def default(self):
        return False
