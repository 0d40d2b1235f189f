"""Host-side TMA tensor maps (CUtensorMap) for newt's sm_90a kernels, built once and looked up.

Where it sits: runtime, next to the launch path. A kernel that loads tiles with
cp.async.bulk.tensor (the TMA rings of newt/passes/tc/dot_tma.py and ring_tma.py, the epilogue
stores of passes/tc/store_tma.py) takes one 128-byte map per operand as a `__grid_constant__`
parameter. The map encodes the global address, the 2-D shape, the row stride, the box and the
swizzle; the box and swizzle come from newt/ir/schedule.py's `tile_boxes`, the same function
the kernel's copies are generated from, so both sides agree.

Encoding goes through the driver (cuTensorMapEncodeTiled, a few microseconds), so maps are
cached by (address, dtype, shape, row stride, box): a launch with the same tensors is a dict
lookup. The cache is bounded (least recently built first out): a training loop that allocates
fresh tensors every step does not grow it without limit. One cache serves every device: a map
is 128 bytes of host data describing the buffer, and under CUDA's unified addressing an
address names one buffer on one device, so the key needs no device index.

TMA's requirements (CUDA driver API, cuTensorMapEncodeTiled): the global address 16-byte
aligned, the innermost dimension contiguous (element stride 1), the other strides multiples of
16 bytes and below 2^40, dimensions below 2^32, box sides 1..256 with a 16-byte multiple row.
`can_map` tests them; a kernel whose operands fail it must take the cp.async path.
"""
from __future__ import annotations

import collections
import ctypes

from ..ir.schedule import DTYPE_CODE, TmaBox

# CU_TENSOR_MAP_L2_PROMOTION_L2_256B: a box row that misses L2 brings the 256-byte sector
# pair around it. A tile's rows are 128 bytes (the swizzle span), so the other half is the next
# k-step's slice of the same rows (A) or the box beside it (B): an L2 prefetch of data the
# ring asks for next. Measured on the H200 (2026-12-01, tutorial matmul, best of three configs,
# fp16 2048/4096/8192, bf16 2048/8192, both in one process, 7 interleaved rounds): 598/626/633/
# 670/606 TFLOP/s against 595/626/633/661/601 with 128-byte promotion: level or ahead (<= 1.4%).
L2_PROMOTION = 3
OOB_FILL_ZERO = 0          # CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: out-of-bounds elements read 0
ESIZE = {"u8": 1, "u16": 2, "u32": 4, "f16": 2, "bf16": 2, "f32": 4, "tf32": 4}


def can_map(address: int, esize: int, rows: int, cols: int, row_stride: int,
            col_stride: int) -> bool:
    """A rows x cols matrix at `address` (strides in elements) can be read by TMA boxes."""
    rs = row_stride * esize
    return (address % 16 == 0 and col_stride == 1 and rs % 16 == 0 and 0 < rs < 2 ** 40
            and 0 < rows < 2 ** 32 and 0 < cols < 2 ** 32)


class TensorMaps:
    """Cache of encoded maps. `encode` has driver.encode_tensor_map_tiled's signature (tests
    pass a model encoder; by default the driver is called)."""

    def __init__(self, encode=None, capacity: int = 512):
        self._encode = encode
        self._maps: collections.OrderedDict = collections.OrderedDict()
        self.capacity = capacity
        self.built = 0            # encodes done (tests: a repeated launch builds nothing)

    def matrix(self, address: int, kind: str, rows: int, cols: int, row_stride: int,
               box: TmaBox, outer=()):
        """The map of a rows x cols row-major matrix (row_stride elements apart) read in
        `box`-sized boxes; `outer`: a tuple of (extent, stride in elements) of further
        dimensions (a head, a batch), read one index at a time."""
        return self._entry(address, kind, rows, cols, row_stride, box, outer)[0]

    def address(self, address: int, kind: str, rows: int, cols: int, row_stride: int,
                box: TmaBox, outer=()) -> int:
        """matrix()'s map as the host address a kernel parameter slot points at."""
        return self._entry(address, kind, rows, cols, row_stride, box, outer)[1]

    def _entry(self, address, kind, rows, cols, row_stride, box, outer=()):
        key = (address, kind, rows, cols, row_stride, box, outer)
        e = self._maps.get(key)
        if e is not None:
            return e
        esize = ESIZE[kind]
        if not can_map(address, esize, rows, cols, row_stride, 1) or not all(
                0 < n < 2 ** 32 and 0 < (st * esize) < 2 ** 40 and (st * esize) % 16 == 0
                for n, st in outer):
            raise ValueError(f"TMA cannot read this {rows}x{cols} {kind} matrix (address "
                             f"{address:#x}, row stride {row_stride} elements"
                             + (f", outer dimensions {list(outer)}" if outer else "")
                             + "): the address and the strides in bytes must be positive "
                             "multiples of 16")
        assert box.esize == esize, (box, kind)
        encode = self._encode
        if encode is None:
            from .driver import encode_tensor_map_tiled as encode
        rank = 2 + len(outer)
        m = encode(DTYPE_CODE[kind], rank, address, [cols, rows] + [n for n, _ in outer],
                   [row_stride * esize] + [st * esize for _, st in outer],
                   [box.inner, box.outer] + [1] * len(outer), [1] * rank, 0,
                   box.swizzle_code, L2_PROMOTION, OOB_FILL_ZERO)
        self.built += 1
        e = self._maps[key] = (m, map_address(m))
        if len(self._maps) > self.capacity:
            self._maps.popitem(last=False)
        return e

    def __len__(self):
        return len(self._maps)


def _source(src, vals):
    """A recipe's launch-time value: ("const", v) or ("param", slot, name) read from vals."""
    return src[1] if src[0] == "const" else vals[src[1]]


def recipe_builder(recipes, slot_of, maps: TensorMaps | None = None):
    """For a kernel's TMA recipes (passes/tc/dot_tma.py, passes/tc/ring_tma.py and passes/tc/store_tma.py,
    fn.attrs["tma_maps"]), a function of the launch's packed values (in runtime-parameter
    order) returning the host address of each recipe's map. `slot_of` maps a Python parameter
    index to its position in those values. A launch with the same tensors and sizes as an
    earlier one finds its maps in the cache. (A map an evicted entry held is only read by the
    launch that follows its lookup.)"""
    def loc(x):
        x = list(x)
        if x[0] == "param":
            x[1] = slot_of[x[1]]
        return tuple(x)

    plans = []
    for r in recipes:
        box = TmaBox(r["box_inner"], r["box_outer"], r["esize"], r["swizzle"])
        outer = tuple((loc(o["extent"]), loc(o["stride"])) for o in r.get("outer", ()))
        plans.append((slot_of[r["ptr"]], r["kind"], loc(r["rows"]), loc(r["cols"]),
                      loc(r["row_stride"]), box, outer,
                      tuple(loc(p) for p in r.get("positive", ())), r.get("ptr_name", "?"),
                      bool(r.get("optional"))))

    from ..errors import LaunchError

    def build(vals):
        m = maps if maps is not None else default_maps()
        out = []
        for slot, kind, rows, cols, stride, box, outer, positive, name, optional in plans:
            for p in positive:          # passes/tc/ring_tma.py: an offset index's divisor
                if _source(p, vals) < 1:
                    raise LaunchError(f"argument '{p[2]}' is {_source(p, vals)}: the TMA copies "
                                      f"of '{name}' divide by it and need it >= 1")
            if outer:                   # (the matmul's 2-D maps skip this per launch)
                outer = tuple((max(1, _source(e, vals)), _source(st, vals)) for e, st in outer)
            try:
                # an empty extent reads nothing (no iteration runs): any valid map will do
                out.append(m.address(vals[slot], kind, max(1, _source(rows, vals)),
                                     max(1, _source(cols, vals)), _source(stride, vals), box,
                                     outer))
            except ValueError as e:
                if not optional:
                    raise LaunchError(f"argument '{name}': {e}") from None
                # passes/tc/store_tma.py: the kernel tests the arguments before it reads this map
                # and stores without it when they fail; any valid map fills the slot
                out.append(m.address(vals[slot], kind, 1, box.inner, box.inner, box, outer))
        return out
    return build


def map_address(m) -> int:
    """Host address of a map's 128 bytes (what a kernel parameter pointer points at)."""
    return ctypes.addressof(m)


_DEFAULT = None


def default_maps() -> TensorMaps:
    """The process-wide cache the launchers use."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = TensorMaps()
    return _DEFAULT
