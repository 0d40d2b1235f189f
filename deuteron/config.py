"""`dt.Config`: one point of the autotuner's search space, spelled as Helion spells it.

Consumed by kernel.py (`bind` reads block sizes, warps, stages, group size) and by language.py
(`hl.register_tunable` reads its value by name); produced by the autotuner (autotune/space.py)
and stored in its disk cache as a dict (`to_dict` / `from_dict`).

Helion's own config keys are accepted: `l2_groupings=[g]` is deuteron's `group_size`; keys of
Helion's code generator that deuteron's does not have (`indexing`, `pid_type`, `loop_orders`,
`range_*`, ...) are kept in the config, printed, and have no effect (HELION_ONLY_KEYS). Any other
keyword is the value of a `hl.register_tunable` of that name, except `reduction_split`: the
number of programs a long summing device loop is split over (split.py; 1, the default, keeps
one kernel).
"""
from __future__ import annotations

import dataclasses

HELION_ONLY_KEYS = frozenset({
    "indexing", "pid_type", "loop_orders", "flatten_loops", "reduction_loops",
    "range_unroll_factors", "range_warp_specializes", "range_num_stages", "range_multi_buffers",
    "range_flattens", "static_ranges", "load_eviction_policies", "load_cache_modifiers",
    "store_cache_modifiers", "num_sm_multiplier", "maxnreg", "num_threads", "use_yz_grid",
    "l2_grouping", "advanced_controls_file",
})


def _frozen(v):
    return tuple(_frozen(x) for x in v) if isinstance(v, (list, tuple)) else v


@dataclasses.dataclass(frozen=True, init=False)
class Config:
    """One point of the search space. `block_sizes` lists the tile size of every tunable
    `hl.tile` dimension (and every `hl.register_block_size`) in the order the kernel meets them;
    `group_size` is the program ordering of kernels with a matmul (GROUP_SIZE_M of the tutorial
    kernel; Helion's `l2_groupings=[g]`). `reduction_split=S` spreads a long summing device
    loop over S programs per tile (deuteron/split.py). Other keywords: see the module docstring."""
    block_sizes: tuple = ()
    num_warps: int = 4
    num_stages: int = 3
    group_size: int = 8
    tunables: tuple = ()       # sorted (name, value): hl.register_tunable values
    ignored: tuple = ()        # sorted (name, value): Helion-only keys, no effect here

    def __init__(self, block_sizes=(), num_warps=4, num_stages=3, group_size=8, tunables=(),
                 ignored=(), *, l2_groupings=None, **options):
        if l2_groupings:
            group_size = int(list(l2_groupings)[0])
        tun, ign = dict(tunables), dict(ignored)
        for k, v in options.items():
            (ign if k in HELION_ONLY_KEYS else tun)[k] = _frozen(v)
        set_ = object.__setattr__
        set_(self, "block_sizes", tuple(int(b) for b in (block_sizes or ())))
        set_(self, "num_warps", int(num_warps))
        set_(self, "num_stages", int(num_stages))
        set_(self, "group_size", int(group_size))
        set_(self, "tunables", tuple(sorted(tun.items())))
        set_(self, "ignored", tuple(sorted(ign.items())))

    def tunable(self, name, default):
        return dict(self.tunables).get(name, default)

    def __str__(self):
        extra = "".join(f", {k}={v!r}" for k, v in self.tunables + self.ignored)
        return (f"dt.Config(block_sizes={list(self.block_sizes)}, num_warps={self.num_warps}, "
                f"num_stages={self.num_stages}, group_size={self.group_size}{extra})")

    def to_dict(self):
        return {"block_sizes": list(self.block_sizes), "num_warps": self.num_warps,
                "num_stages": self.num_stages, "group_size": self.group_size,
                "tunables": [list(t) for t in self.tunables]}

    @classmethod
    def from_dict(cls, d):
        return cls(block_sizes=tuple(d["block_sizes"]), num_warps=int(d["num_warps"]),
                   num_stages=int(d["num_stages"]), group_size=int(d.get("group_size", 8)),
                   tunables=tuple((k, _frozen(v)) for k, v in d.get("tunables", [])))
