"""Helion's tunable fragments, for `hl.register_tunable(name, fragment)`.

Each fragment has a default (what a kernel runs with when its config does not set `name`) and
the list of values the autotuner explores (`choices`): the search (autotune/space.py) samples
them with the block sizes and steps to neighbouring values in its pattern search, like a block
size. A wide integer range is thinned to at most MAX_CHOICES evenly spread values, so that one
fragment cannot swamp a search that has a budget of a few dozen configs.
"""
from __future__ import annotations

MAX_CHOICES = 16


class PowerOfTwoFragment:
    """Powers of two in [low, high]."""

    def __init__(self, low=1, high=1024, default_val=None):
        self.low, self.high, self.default_val = int(low), int(high), default_val

    def default(self):
        return self.default_val if self.default_val is not None else self.low

    def choices(self):
        out, b = [], 1
        while b <= self.high:
            if b >= self.low:
                out.append(b)
            b *= 2
        return _with_default(out, self.default())


class IntegerFragment(PowerOfTwoFragment):
    """Every integer in [low, high] (thinned to MAX_CHOICES evenly spread values)."""

    def choices(self):
        n = self.high - self.low + 1
        if n <= MAX_CHOICES:
            out = list(range(self.low, self.high + 1))
        else:
            out = sorted({self.low + round(i * (n - 1) / (MAX_CHOICES - 1))
                          for i in range(MAX_CHOICES)})
        return _with_default(out, self.default())


class EnumFragment:
    """One of the given values, the first by default."""

    def __init__(self, choices=()):
        self.values = tuple(choices)
        if not self.values:
            raise ValueError("EnumFragment needs at least one choice")

    def default(self):
        return self.values[0]

    def choices(self):
        return list(self.values)


class BooleanFragment:
    """False (the default) or True."""

    def default(self):
        return False

    def choices(self):
        return [False, True]


def _with_default(values, default):
    # the default is always a point of the search (it is where the search starts)
    return sorted(set(values) | {default}) if default is not None else values


def fragment_choices(fragment) -> list:
    """The values the search explores for a fragment: its `choices()`, or its default alone for
    a plain value given in place of a fragment (Helion accepts a constant)."""
    ch = getattr(fragment, "choices", None)
    if callable(ch):
        return list(ch())
    return [fragment_default(fragment)]


def fragment_default(fragment):
    d = getattr(fragment, "default", None)
    return d() if callable(d) else fragment


class PatternSearch:
    """Helion's search classes are named in `search_algorithms` for programs that pick one in
    an `autotuner_fn`. deuteron has one search (autotune/search.py: a sampled start, then a
    pattern search), sized by autotune_effort, and never calls autotuner_fn, so a program can
    name this class but not run it."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("deuteron runs its own search (autotune/search.py); choose "
                                  "its budget with autotune_effort= or "
                                  "DEUTERON_AUTOTUNE_EFFORT instead of an autotuner_fn")


search_algorithms = {"PatternSearch": PatternSearch}


class LocalAutotuneCache:
    """Helion's on-disk cache around a search, which an `autotuner_fn` returns. deuteron caches
    every tuned config on disk itself (autotune/cache.py) and does not call autotuner_fn; this
    only holds the search it wraps."""

    def __init__(self, autotuner):
        self.autotuner = autotuner
