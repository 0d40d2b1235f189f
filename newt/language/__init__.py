"""The kernel language, `import newt.language as nl` (Triton's `tl` with another letter).

These functions are *names*, not implementations. Inside a `@newt.jit` kernel the compiler's
frontend resolves each call to one of them and builds IR (newt/frontend/); under
NEWT_INTERPRET=1 the interpreter runs the kernel with these names bound to torch implementations
(newt/interpreter/). Called from ordinary Python they raise, so a stray call is a clear error.

Every function is registered in BUILTINS by name; both implementations must cover that table
(tests/test_docs.py checks every name is documented). Docstrings here are the user reference
(docs/language.md is generated from them). The package's other files hold more names of `nl`
(movement.py: joins, gathers, sorts; scans.py: combine functions; lowlevel.py: assume, inline
PTX) and the namespaces `nl.math` (math.py) and `newt.language.extra.libdevice` (extra/).
"""
from __future__ import annotations

import enum
import functools

from ..dtypes import (  # noqa: F401  (re-exported as nl.float32 etc.)
    dtype, pointer_type, int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
    float16, bfloat16, float32, float64, float8e4nv, float8e5,
)

from .params import documented  # noqa: E402

bool_ = int1
BUILTINS: dict[str, object] = {}


class constexpr:
    """Annotation for compile-time parameters (`BLOCK: nl.constexpr`), and the wrapper type of
    compile-time values: arithmetic on constexprs is evaluated by the compiler."""

    def __init__(self, value=None):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self):
        return f"constexpr[{self.value!r}]"


class tensor:
    """The type of block and scalar values inside a kernel (for isinstance checks and docs).

    Methods available inside kernels: `x.to(dtype, bitcast=False)`, `x.reshape(*shape)`,
    `x.trans(*dims)`, `x.permute(*dims)`, `x.expand_dims(axis)`, `x.broadcast_to(*shape)`,
    `x.sum/max/min/argmax/argmin(axis=None, keep_dims=False)`, `x.cumsum(axis=0)`,
    `x.cumprod(axis=0)`, `x.split()`, `x.sort(dim)`, `x.flip(dim)`, `x.reduce(axis, fn)`,
    `x.T` (2-D transpose), `x.shape`, `x.dtype`, indexing with `None` and `:` (`x[:, None]`), and every Python
    arithmetic, comparison, bitwise and shift operator.
    """


def builtin(fn):
    """Register `fn` as a kernel builtin; calling it outside a kernel raises."""

    @functools.wraps(fn)
    def outside_kernel(*args, **kwargs):
        raise RuntimeError(
            f"nl.{fn.__name__}() can only be called inside a @newt.jit kernel "
            f"(set NEWT_INTERPRET=1 to run kernels on the CPU)")

    outside_kernel.__newt_builtin__ = fn.__name__
    outside_kernel.__doc__ = documented(fn)     # + a line per parameter (params.py)
    BUILTINS[fn.__name__] = outside_kernel
    return outside_kernel


builtin.__doc__ = documented(builtin)


# ----------------------------------------------------------------------------- program model

@builtin
def program_id(axis):
    """Index of the current program along grid `axis` (0, 1 or 2), an int32 scalar."""


@builtin
def num_programs(axis):
    """Number of programs along grid `axis`, an int32 scalar."""


# ----------------------------------------------------------------------------- creation

@builtin
def arange(start, end):
    """Block [start, start+1, ..., end-1] of int32. `end - start` must be a power of two and both
    must be constexpr."""


@builtin
def full(shape, value, dtype):
    """Block of `shape` (constexpr ints) filled with scalar `value`, of element type `dtype`."""


@builtin
def zeros(shape, dtype):
    """Block of `shape` filled with zeros of `dtype`."""


@builtin
def zeros_like(input):
    """Zeros with the shape and dtype of `input`."""


@builtin
def full_like(input, value):
    """`value` with the shape and dtype of `input`."""


@builtin
def cast(input, dtype, fp_downcast_rounding=None, bitcast=False):
    """Convert `input` to `dtype` (`bitcast=True` reinterprets the bits; widths must match); a
    narrower float rounds to nearest even, or toward zero with `fp_downcast_rounding="rtz"`."""


# ----------------------------------------------------------------------------- memory

@builtin
def load(pointer, mask=None, other=None, boundary_check=(), padding_option="", cache_modifier="",
         eviction_policy="", volatile=False):
    """Load a block (or scalar) from global memory at `pointer`. Where `mask` is false nothing is
    read and the result is `other` (0 if not given). Contiguous, aligned, unmasked 16-byte groups
    are read with one vector instruction (checked at run time). `pointer` may be a block pointer
    (`nl.make_block_ptr`), loaded with `boundary_check` and `padding_option` instead of a mask."""


@builtin
def store(pointer, value, mask=None, boundary_check=(), cache_modifier="", eviction_policy=""):
    """Store `value` (broadcast to the pointer block's shape, cast to the pointee type) at `pointer`
    where `mask` is true. `pointer` may be a block pointer (`nl.make_block_ptr`), stored with
    `boundary_check` instead of a mask."""


def _atomic_doc(name, what):
    return (f"Atomically {what} at `pointer` where `mask` is true; returns the old values. "
            f"`sem` is 'acq_rel' (default), 'acquire', 'release' or 'relaxed'; `scope` is "
            f"'gpu' (default), 'cta' or 'sys'.")


@builtin
def atomic_add(pointer, val, mask=None, sem=None, scope=None):
    pass


@builtin
def atomic_max(pointer, val, mask=None, sem=None, scope=None):
    pass


@builtin
def atomic_min(pointer, val, mask=None, sem=None, scope=None):
    pass


@builtin
def atomic_xchg(pointer, val, mask=None, sem=None, scope=None):
    pass


@builtin
def atomic_cas(pointer, cmp, val, sem=None, scope=None):
    """Atomically: `old = *pointer; if old == cmp: *pointer = val`; returns `old`. The values
    are compared as bits, as PTX's atom.cas does: -0.0 does not match 0.0, a NaN matches the
    same NaN. `sem` and `scope` as for the other atomics."""


@builtin
def atomic_and(pointer, val, mask=None, sem=None, scope=None):
    pass


@builtin
def atomic_or(pointer, val, mask=None, sem=None, scope=None):
    pass


@builtin
def atomic_xor(pointer, val, mask=None, sem=None, scope=None):
    pass


for _n, _w in (("atomic_add", "add `val`"), ("atomic_max", "take the max with `val`"),
               ("atomic_min", "take the min with `val`"), ("atomic_xchg", "write `val`"),
               ("atomic_and", "and `val`"), ("atomic_or", "or `val`"), ("atomic_xor", "xor `val`")):
    BUILTINS[_n].__doc__ = documented(BUILTINS[_n], _atomic_doc(_n, _w))

# ----------------------------------------------------------------------------- shape manipulation


@builtin
def reshape(input, *shape, can_reorder=False):
    """Same elements, new shape (row-major order). Adding or removing size-1 dims moves no data."""


@builtin
def view(input, *shape):
    """Alias of reshape with can_reorder=True."""


@builtin
def expand_dims(input, axis):
    """Insert a size-1 dimension at `axis` (an int or a sequence of ints)."""


@builtin
def broadcast_to(input, *shape):
    """Broadcast `input` to `shape` with numpy rules."""


@builtin
def broadcast(input, other):
    """Broadcast two blocks against each other; returns both."""


@builtin
def trans(input, *dims):
    """Transpose (2-D: swap the axes; with `dims`: permute). A transposed load read only by
    `nl.dot` moves no data: it is compiled as the load of the transposed block."""


@builtin
def permute(input, *dims):
    """Permute the axes of `input`."""


# ----------------------------------------------------------------------------- math

@builtin
def where(condition, x, y):
    """Elementwise `x if condition else y`, broadcasting all three."""


class PropagateNan(enum.Enum):
    """The `propagate_nan` argument of maximum / minimum / clamp (Triton's names): `NONE` (the
    default) lets a number win over NaN (fmax), `ALL` makes NaN win (NaN if either is NaN)."""
    NONE = 0x0000
    ALL = 0xFFFF


@builtin
def maximum(x, y, propagate_nan=None):
    """Elementwise maximum (NaN as `propagate_nan` says)."""


@builtin
def minimum(x, y, propagate_nan=None):
    """Elementwise minimum (NaN as `propagate_nan` says)."""


@builtin
def clamp(x, min, max, propagate_nan=None):
    """`minimum(maximum(x, min), max)`."""


@builtin
def fma(x, y, z):
    """Fused multiply-add `x * y + z` with one rounding."""


@builtin
def cdiv(x, div):
    """Ceiling division `(x + div - 1) // div` (also usable on the host)."""


@builtin
def abs(x):
    """Elementwise absolute value."""


def _math(name, what):
    def fn(x):
        pass
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {what}. Integer inputs are computed in fp32; fp16/bf16 in fp32 and rounded back."
    return builtin(fn)


exp = _math("exp", "e**x (fp32: `ex2.approx` of x * log2(e), as Triton)")
exp2 = _math("exp2", "2**x (fp32: one `ex2.approx.ftz`, as Triton: results below 2**-126 are 0)")
log = _math("log", "natural logarithm")
log2 = _math("log2", "base-2 logarithm")
sqrt = _math("sqrt", "square root (fp32: sqrt.approx.ftz, as Triton)")
sqrt_rn = _math("sqrt_rn", "square root, correctly rounded")
rsqrt = _math("rsqrt", "1 / sqrt(x)")
sin = _math("sin", "sine")
cos = _math("cos", "cosine")
tanh = _math("tanh", "hyperbolic tangent")
erf = _math("erf", "error function")
sigmoid = _math("sigmoid", "1 / (1 + exp(-x))")
floor = _math("floor", "floor")
ceil = _math("ceil", "ceiling")


@builtin
def div_rn(x, y):
    """Division rounded to nearest (IEEE)."""


@builtin
def umulhi(x, y):
    """High N bits of the 2N-bit product of two N-bit integers (32 or 64 bits), the operands
    read as unsigned (as Triton computes it for signed types too)."""


# ----------------------------------------------------------------------------- reductions, scans

@builtin
def sum(input, axis=None, keep_dims=False, dtype=None):
    """Sum over `axis` (all axes if None). Integers narrower than 32 bits accumulate in int32,
    fp16/bf16 in fp32 and the result is cast back, as in Triton."""


@builtin
def max(input, axis=None, return_indices=False, keep_dims=False):
    """Maximum over `axis`. With `return_indices=True` also returns the argmax."""


@builtin
def min(input, axis=None, return_indices=False, keep_dims=False):
    """Minimum over `axis`. With `return_indices=True` also returns the argmin."""


@builtin
def argmax(input, axis, keep_dims=False):
    """Index of the maximum along `axis` (the smallest index among ties), int32."""


@builtin
def argmin(input, axis, keep_dims=False):
    """Index of the minimum along `axis` (the smallest index among ties), int32."""


@builtin
def cumsum(input, axis=0, reverse=False):
    """Inclusive prefix sum along `axis`."""


# ----------------------------------------------------------------------------- matmul

@builtin
def dot(input, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=float32):
    """Matrix product of two 2-D blocks [M, K] @ [K, N], plus `acc` if given. fp16/bf16 inputs
    accumulate in fp32; fp32 inputs use tf32 tensor cores unless input_precision="ieee";
    int8 inputs accumulate in int32; fp8 inputs (any pair of the two formats) accumulate in
    fp32, on sm_90a with 8-bit wgmma when B is contiguous along K (the tensor cores' own fp8
    accumulation, Triton's default there: `max_num_imprecise_acc` is accepted and not used;
    `acc += nl.dot(a, b)` in a loop sums each step's products apart and adds them to acc in
    fp32, since Triton leaves that form unfused). M, N >= 16 and K >= 16 (powers of two)."""


# ----------------------------------------------------------------------------- compiler hints, debugging

@builtin
def multiple_of(input, values):
    """Hint: every element of `input` is a multiple of `values`. Returns `input`."""


@builtin
def max_contiguous(input, values):
    """Hint: `input` holds runs of `values` consecutive integers. Returns `input`."""


@builtin
def max_constancy(input, values):
    """Hint: `input` holds runs of `values` equal values. Returns `input`."""


@builtin
def static_assert(cond, msg=""):
    """Compile-time assertion on a constexpr condition."""


@builtin
def static_print(*values):
    """Print constexpr values (and the types of others) at compile time."""


@builtin
def device_print(prefix, *args, hex=False):
    """printf from the GPU: one line per element, with the program id and the element index."""


@builtin
def device_assert(cond, msg=""):
    """Trap the kernel with `msg` where `cond` is false (a Python `assert` becomes this)."""


@builtin
def debug_barrier():
    """Synchronize all threads of the program (__syncthreads)."""


# ----------------------------------------------------------------------------- loops

class range:
    """`for i in nl.range(start, stop, step, num_stages=None)`: a device loop (like Python's range).
    `num_stages` overrides the kernel's pipelining depth for loads in this loop. Triton's
    scheduling hints are accepted and do not change the generated code (none changes what a
    loop computes): `flatten` (Triton pipelines the loop nest, e.g. a persistent kernel's tile
    loop and its K loop, as one loop), `warp_specialize` (Triton splits the loop's loads and
    dots between producer and consumer warps), `disallow_acc_multi_buffer` (Triton then keeps
    one copy of a dot accumulator in tensor memory) and `loop_unroll_factor`."""

    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None,
                 disallow_acc_multi_buffer=False, flatten=False, warp_specialize=False):
        if arg2 is None:
            arg1, arg2 = 0, arg1
        self.start, self.end, self.step = arg1, arg2, 1 if step is None else step
        self.num_stages = num_stages

    def __iter__(self):
        raise RuntimeError("nl.range can only be iterated inside a @newt.jit kernel")


class static_range:
    """`for i in nl.static_range(start, stop, step)`: unrolled at compile time; bounds are constexpr."""

    def __init__(self, arg1, arg2=None, step=None):
        if arg2 is None:
            arg1, arg2 = 0, arg1
        self.start, self.end, self.step = arg1, arg2, 1 if step is None else step

    def __iter__(self):
        raise RuntimeError("nl.static_range can only be iterated inside a @newt.jit kernel")


BUILTINS["range"] = range
BUILTINS["static_range"] = static_range


# tensor descriptors and block pointers live in their own file; they are part of this namespace
from .blocks import (  # noqa: E402,F401
    advance, load_tensor_descriptor, make_block_ptr, make_tensor_descriptor,
    store_tensor_descriptor, tensor_descriptor)

# ----------------------------------------------------------------------------- namespaces
# (imported last: they refer to the functions above)
from . import extra, lowlevel, movement, rng, scans  # noqa: E402,F401
from .lowlevel import assume, fdiv, inline_asm_elementwise  # noqa: E402,F401
from .rng import (pair_uniform_to_normal, rand, rand4x, randint, randint4x,  # noqa: E402,F401
                  randn, randn4x, uint_to_uniform_float)
from .movement import (cat, flip, gather, histogram, interleave, join, ravel,  # noqa: E402,F401
                       sort, split, swizzle2d, topk)
from .scans import (associative_scan, cumprod, map_elementwise, reduce,  # noqa: E402,F401
                    reduce_or, softmax, xor_sum)

TRITON_MAX_TENSOR_NUMEL = 1048576   # (Triton's constant, for code that checks block sizes)
from . import math  # noqa: E402,F401  (last: it refers to the names above)
