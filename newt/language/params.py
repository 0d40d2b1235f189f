"""The parameters of every `nl.*` function, one line each: appended to the functions' docstrings
by language.py (so `help(nl.load)` and docs/language.md explain every argument), kept here so
that language.py's docstrings stay one short paragraph each. tests/test_debug_output.py checks
that every parameter of every nl function is listed.
"""
from __future__ import annotations

_X = "a block or scalar (int or float); ints and bools count as fp32 in float math"
_INPUT = "the block to work on"
_AXIS = ("the axis to reduce over: an int (negative counts from the end) or None for all "
         "axes at once (the result is then a scalar)")
_KEEP = "keep the reduced axis as size 1 (so the result broadcasts against `input`)"
_POINTER = ("a pointer or a block of pointers (a pointer argument plus a block of offsets, "
            "e.g. `x_ptr + offs`)")
_MASK = ("an i1 block broadcastable to the pointer block: elements where it is false are not "
         "touched (None: every element)")
_SEM = ("memory ordering: 'acq_rel' (the default, None), 'acquire', 'release' or 'relaxed' "
        "(PTX's .sem)")
_SCOPE = ("which threads the ordering is with: 'gpu' (the default, None), 'cta' (the block) "
          "or 'sys' (also the host and other GPUs)")
_VAL = "the value(s) to combine with memory: a block of the pointer block's shape, or a scalar"
_CACHE = ("PTX cache operator: '' (the default), '.ca', '.cg', '.cv', '.cs', '.wb' or '.wt'")
_EVICT = ("L2 eviction hint: '' / 'evict_normal', 'evict_first' (streamed data) or "
          "'evict_last' (data read again soon)")
_BOUNDARY = "block-pointer bounds (Triton's make_block_ptr): not supported, must be left empty"
_SEED = "an int32 scalar: the Philox key; the same seed and offset give the same numbers"
_OFFSET = ("an int32 block or scalar: the counter; give each element its own offset "
           "(e.g. `base + nl.arange(0, BLOCK)`) for independent numbers")
_ROUNDS = "Philox rounds (a constexpr); 10, as Triton's default"
_NAN = ("`nl.PropagateNan.NONE` or None (the default: a NaN operand loses to a number, "
        "fmaxf / fminf) or `nl.PropagateNan.ALL` (a NaN operand wins)")
_DTYPE = "an nl dtype (nl.float32, nl.int64, ...)"
_SHAPE = "the block shape: constexpr ints, as separate arguments or one tuple/list"
_HINT_VALUES = "an int (constexpr) or a tuple of ints, one per dimension of `input`"

PARAMS: dict[str, dict[str, str]] = {
    "program_id": {"axis": "grid axis: 0, 1 or 2 (a constexpr)"},
    "num_programs": {"axis": "grid axis: 0, 1 or 2 (a constexpr)"},
    "arange": {"start": "first value (a constexpr int)",
               "end": "one past the last value (a constexpr int); end - start must be a "
                      "power of two"},
    "full": {"shape": _SHAPE, "value": "the scalar to fill with (converted to `dtype`)",
             "dtype": _DTYPE},
    "zeros": {"shape": _SHAPE, "dtype": _DTYPE},
    "full_like": {"input": "the block whose shape and dtype the result takes",
                  "value": "the scalar to fill with"},
    "zeros_like": {"input": "the block whose shape and dtype the result takes"},
    "cast": {"input": _INPUT, "dtype": "the target nl dtype",
             "fp_downcast_rounding": '"rtne" (default) or "rtz", for a float narrowed to a '
                                     'smaller float',
             "bitcast": "reinterpret the bits instead of converting the value (the two dtypes "
                        "must have the same width)"},
    "load": {"pointer": _POINTER,
             "mask": "an i1 block broadcastable to the pointer block: where false, nothing is "
                     "read (None: read every element)",
             "other": "the value of the masked-off elements (a scalar or block; needs `mask`; "
                      "None: 0)",
             "boundary_check": _BOUNDARY, "padding_option": _BOUNDARY,
             "cache_modifier": _CACHE, "eviction_policy": _EVICT,
             "volatile": "read memory every time (ld.volatile): for data another program or "
                         "the host changes while the kernel runs"},
    "store": {"pointer": _POINTER,
              "value": "the block or scalar to write (broadcast to the pointer block's shape, "
                       "converted to the pointee dtype)",
              "mask": _MASK, "boundary_check": _BOUNDARY, "cache_modifier": _CACHE,
              "eviction_policy": _EVICT},
    "atomic_cas": {"pointer": _POINTER, "cmp": "the expected old value(s)",
                   "val": "the value(s) written where memory equals `cmp`", "sem": _SEM,
                   "scope": _SCOPE},
    "broadcast": {"input": "the first block", "other": "the second block"},
    "broadcast_to": {"input": _INPUT, "shape": _SHAPE},
    "reshape": {"input": _INPUT, "shape": _SHAPE,
                "can_reorder": "allow any element order in the result (accepted; newt keeps "
                               "row-major order either way)"},
    "view": {"input": _INPUT, "shape": _SHAPE},
    "expand_dims": {"input": _INPUT, "axis": "where the new size-1 axis goes (an int or a "
                                              "sequence of ints)"},
    "permute": {"input": _INPUT, "dims": "the new order of the axes (ints)"},
    "trans": {"input": _INPUT, "dims": "the new order of the axes (none: swap the two axes "
                                       "of a 2-D block)"},
    "where": {"condition": "an i1 block or scalar", "x": "the value where it is true",
              "y": "the value where it is false"},
    "sum": {"input": _INPUT, "axis": _AXIS, "keep_dims": _KEEP,
            "dtype": "the accumulation and result dtype (None: the input's, with integers "
                     "narrower than 32 bits widened)"},
    "max": {"input": _INPUT, "axis": _AXIS,
            "return_indices": "also return the index of the maximum (the smallest among ties)",
            "keep_dims": _KEEP},
    "min": {"input": _INPUT, "axis": _AXIS,
            "return_indices": "also return the index of the minimum (the smallest among ties)",
            "keep_dims": _KEEP},
    "argmax": {"input": _INPUT, "axis": "the axis to search along (an int)",
               "keep_dims": _KEEP},
    "argmin": {"input": _INPUT, "axis": "the axis to search along (an int)",
               "keep_dims": _KEEP},
    "cumsum": {"input": _INPUT, "axis": "the axis to scan along (an int)",
               "reverse": "scan from the end: each element gets the sum of itself and the "
                          "elements after it"},
    "dot": {"input": "the [M, K] block", "other": "the [K, N] block",
            "acc": "an [M, N] block added to the product (None: zeros)",
            "input_precision": "fp32 inputs only: 'tf32' (the default: tensor cores), "
                               "'tf32x3' or 'ieee' (exact fp32 products)",
            "allow_tf32": "the older spelling: False means input_precision='ieee'",
            "max_num_imprecise_acc": "accepted for Triton compatibility and not used",
            "out_dtype": "the accumulator dtype for fp16/bf16 inputs: nl.float32 (the "
                         "default), nl.float16 or nl.bfloat16"},
    "multiple_of": {"input": _INPUT, "values": _HINT_VALUES},
    "max_contiguous": {"input": _INPUT, "values": _HINT_VALUES},
    "max_constancy": {"input": _INPUT, "values": _HINT_VALUES},
    "debug_barrier": {},
    "device_print": {"prefix": "a string printed before the values",
                     "args": "the blocks or scalars to print",
                     "hex": "print integers in hexadecimal"},
    "device_assert": {"cond": "an i1 block or scalar that must be true",
                      "msg": "the message printed where it is false"},
    "static_assert": {"cond": "a constexpr condition", "msg": "the error message"},
    "static_print": {"values": "the values to print"},
    "cdiv": {"x": "the dividend (int)", "div": "the divisor (int)"},
    "clamp": {"x": _X, "min": "the lower bound", "max": "the upper bound",
              "propagate_nan": _NAN},
    "maximum": {"x": _X, "y": _X, "propagate_nan": _NAN},
    "minimum": {"x": _X, "y": _X, "propagate_nan": _NAN},
    "fma": {"x": _X, "y": _X, "z": "the addend"},
    "div_rn": {"x": "the dividend", "y": "the divisor"},
    "umulhi": {"x": "an int32, uint32, int64 or uint64 block or scalar",
               "y": "the same dtype as `x`"},
    "builtin": {"fn": "the function to register"},
}
for _name in ("atomic_add", "atomic_and", "atomic_max", "atomic_min", "atomic_or",
              "atomic_xchg", "atomic_xor"):
    PARAMS[_name] = {"pointer": _POINTER, "val": _VAL, "mask": _MASK, "sem": _SEM,
                     "scope": _SCOPE}
for _name in ("rand", "randn", "randint", "randint4x", "rand4x", "randn4x"):
    PARAMS[_name] = {"seed": _SEED, "offset": _OFFSET, "n_rounds": _ROUNDS}
PARAMS["uint_to_uniform_float"] = {"x": "a block or scalar of random bits (32- or 64-bit ints)"}
PARAMS["pair_uniform_to_normal"] = {"u1": "uniform floats in [0, 1)",
                                    "u2": "uniform floats in [0, 1), the same shape"}


def documented(fn, doc: str | None = None) -> str:
    """`fn`'s docstring (or `doc`) with its parameters listed (unchanged when none are known)."""
    import inspect
    table = PARAMS.get(fn.__name__)
    if table is None and list(inspect.signature(fn).parameters) == ["x"]:
        table = {"x": _X}     # the elementwise math functions
    doc = (fn.__doc__ if doc is None else doc) or ""
    if not table or "\nParameters:" in doc:
        return doc
    width = max(len(n) for n in table)
    lines = [f"    {n.ljust(width)}  {t}" for n, t in table.items()]
    return doc.rstrip() + "\n\nParameters:\n" + "\n".join(lines)

