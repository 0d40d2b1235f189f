"""The interpreter's join / split / interleave / cat / ravel / flip / gather / sort / topk /
histogram / swizzle2d, and assume / fdiv / inline_asm_elementwise (newt/language/movement.py,
lowlevel.py), on torch tensors.
ops.py re-exports them into the namespace kernels see."""
from __future__ import annotations

import builtins

import torch

from .. import dtypes as D
from ..errors import CompilationError
from . import ops
from .ops import constexpr_int as _constexpr_int, user_loc as _loc
from .values import Tensor, to_tensor, unwrap


# ----------------------------------------------------------------------------- data movement

def _dim(x: Tensor, dim):
    return x.data.dim() - 1 if unwrap(dim) is None else _constexpr_int(dim, "dim") % x.data.dim()


def join(a, b):
    a, b = to_tensor(a), to_tensor(b)
    if a.dtype is not b.dtype:
        raise TypeError(f"join: the two blocks must have one dtype, got {a.dtype.name} and "
                        f"{b.dtype.name}")
    x, y = torch.broadcast_tensors(a.data, b.data)
    return Tensor(torch.stack([x, y], -1), a.dtype)


def split(a):
    a = to_tensor(a)
    if a.data.dim() == 0 or a.shape[-1] != 2:
        raise CompilationError(f"split needs a block whose last dim is 2, got shape "
                               f"{list(a.shape)}", _loc())
    return Tensor(a.data[..., 0], a.dtype), Tensor(a.data[..., 1], a.dtype)


def interleave(a, b):
    j = join(a, b)
    if j.data.dim() == 1:
        return j
    return Tensor(j.data.reshape(*j.shape[:-2], j.shape[-2] * 2), j.dtype)


def flip(x, dim=None):
    x = to_tensor(x)
    return Tensor(x.data.flip(_dim(x, dim)), x.dtype)


def gather(src, index, axis):
    """Triton's gather; an index outside the axis gives 0 (as the compiled code)."""
    s, i = to_tensor(src), to_tensor(index)
    ax = _constexpr_int(axis, "axis") % builtins.max(s.data.dim(), 1)
    n = s.shape[ax]
    ok = (i.data >= 0) & (i.data < n)
    idx = torch.where(ok, i.data, torch.zeros_like(i.data)).long()
    if i.data.dim() == 0:
        v = s.data[idx]
    else:
        v = torch.gather(s.data, ax, idx)
    return Tensor(torch.where(ok, v, torch.zeros_like(v)), s.dtype)


def sort(x, dim=None, descending=False):
    """torch.sort's order: NaN above every number."""
    x = to_tensor(x)
    d = _dim(x, dim)
    key = x.data ^ (-2 ** 63) if x.dtype is D.uint64 else x.data   # uint64: unsigned order
    _, order = torch.sort(key, stable=True, dim=d, descending=bool(unwrap(descending)))
    return Tensor(torch.gather(x.data, d, order), x.dtype)


def topk(x, k, dim=None):
    x = to_tensor(x)
    d = _dim(x, dim)
    k = _constexpr_int(k, "topk k")
    s = sort(x, d, True)
    return Tensor(s.data.narrow(d, 0, k), x.dtype)


def histogram(input, num_bins, mask=None):
    x = to_tensor(input)
    nb = _constexpr_int(num_bins, "num_bins")
    v = x.data.reshape(-1)
    keep = (v >= 0) & (v < nb)
    if mask is not None:
        m = to_tensor(mask).data
        keep &= (m if m.dtype == torch.bool else m != 0).expand(x.shape).reshape(-1)
    return Tensor(torch.bincount(v[keep], minlength=nb)[:nb].to(torch.int64), D.int32)


def cat(input, other, can_reorder=False):
    a, b = to_tensor(input), to_tensor(other)
    if a.data.dim() == 0 or a.shape != b.shape:
        raise CompilationError(f"cat needs two blocks of one shape, got {list(a.shape)} and "
                               f"{list(b.shape)}", _loc())
    return Tensor(torch.cat([a.data, b.data], 0), a.dtype)


def ravel(x, can_reorder=False):
    x = to_tensor(x)
    return Tensor(x.data.reshape(-1), x.dtype)


def swizzle2d(i, j, size_i, size_j, size_g):
    lin = i * size_j + j
    per_group = size_g * size_j
    first = (lin // per_group) * size_g
    rows = ops.minimum(size_i - first, size_g)
    within = lin % per_group
    return first + within % rows, within // rows


def fdiv(x, y, ieee_rounding=False):
    return ops.div_rn(x, y) if unwrap(ieee_rounding) else to_tensor(x) / y


def assume(cond):
    return None


def inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack):
    raise CompilationError("nl.inline_asm_elementwise runs PTX, which the interpreter cannot "
                           "execute: run this kernel compiled (unset NEWT_INTERPRET)", _loc())
