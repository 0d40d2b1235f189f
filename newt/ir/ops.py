"""The opcode table: every op the frontend may emit, with its exact semantics.

Notation: S = ScalarType, B = BlockType. "elementwise" ops take operands of one identical type
(all S or all B of the same shape) unless stated; the result has that shape.

| opcode        | operands                         | attrs                                   | result / meaning |
|---------------|----------------------------------|-----------------------------------------|------------------|
| constant      | -                                | value (python number), dtype in type    | S |
| program_id    | -                                | axis                                    | S i32: blockIdx.{x,y,z} |
| num_programs  | -                                | axis                                    | S i32: gridDim.{x,y,z} |
| arange        | -                                | start, end                              | B i32 [end-start] |
| splat         | x: S                             | -                                       | B: every element = x |
| broadcast     | x: B                             | -                                       | B of result shape, same rank; dims of size 1 repeat |
| reshape       | x: B                             | -                                       | B, same numel, row-major order kept |
| permute       | x: B                             | order (tuple)                           | B, result dim i = x dim order[i] |
| cast          | x                                | bitcast (bool), fp_rounding ("rtne")    | x converted to the result dtype (C semantics for float->int: truncation; to int1: != 0) |
| binary        | a, b (elementwise)               | op                                      | see BINARY_OPS |
| unary         | x                                | op                                      | see UNARY_OPS |
| select        | cond: i1, x, y (elementwise)     | -                                       | cond ? x : y |
| fma           | x, y, z (elementwise, float)     | -                                       | x*y+z, one rounding |
| addptr        | ptr, offset (elementwise)        | -                                       | ptr + offset elements |
| load          | ptr [, mask [, other]]           | has_mask, has_other, cache, evict, volatile | value; masked-off elements read nothing and give other (0 if absent) |
| store         | ptr, value [, mask]              | has_mask, cache, evict                  | - |
| atomic        | ptr, val [, mask]  or ptr, cmp, val (cas) | kind (add,max,min,xchg,and,or,xor,cas), sem, scope, has_mask | old value |
| reduce        | x: B                             | kind (sum,max,min,argmax,argmin), axis  | B with `axis` removed, or S when x is 1-D. argmax/argmin give i32 (first index among ties); max/min ignore nothing (NaN propagates as in Triton's fmax? no: uses > comparisons) |
| scan          | x: B                             | kind (sum), axis, reverse               | B, inclusive prefix |
| dot           | a: B[M,K], b: B[K,N], acc: B[M,N] | input_precision ("tf32","ieee"), out_dtype | acc + a @ b |
| for           | lb, ub, step: S int, *init       | num_stages (or None)                    | results = final carried values; region 0 args: (iv, *carried), ends with yield |
| while         | *init                            | -                                       | region 0 (cond): args carried, ends with `condition(c: S i1)`; region 1 (body): args carried, ends with yield |
| if            | cond: S i1                       | -                                       | region 0 (then), region 1 (else), each ends with yield of the results |
| yield         | *values                          | -                                       | terminator |
| condition     | c: S i1                          | -                                       | terminator of a while's cond region |
| return        | -                                | -                                       | leave the kernel (uniform: the whole program returns) |
| assert        | cond (S or B of i1)              | msg, file, line, func                   | device assert; traps where cond is false |
| print         | *values                          | prefix, hex                             | device printf |
| barrier       | -                                | -                                       | __syncthreads |
| philox        | seed: S u32/u64, offset: B u32   | n_rounds                                | 4 results, B u32 each (Philox4x32) |
| convert_layout | x: B                            | movement (set by passes)                | x in another register layout (inserted by the layout pass, never by the frontend) |
| libdevice     | *args (elementwise, one shape)   | fn, cfunc                               | the CUDA math function `cfunc` of the args, per element (language/extra/cuda/libdevice.py) |
| gather        | src: B, index: B int             | axis                                    | B of index's shape: src with the `axis` coordinate replaced by index's element |
| sort          | x: B                             | axis, descending                        | B, x sorted along `axis` |
| scan_fn       | *xs: B (one shape)               | axis, reverse, reduce, combine (CombineFn) | len(xs) results: the inclusive scan with the user's combine function, or (reduce) the reduction, `axis` removed |
| map_fn        | *args (elementwise, one shape)   | fn (CombineFn)                          | the user's scalar function per element, one result per value it returns |
| histogram     | x: B int 1-D [, mask]            | num_bins, has_mask                      | B i32 [num_bins]: counts of x == bin where mask |
| inline_asm    | *args (elementwise, one shape)   | asm, constraints, pure                  | one result per output constraint: the PTX `asm` per element |
"""

BINARY_OPS = {
    # arithmetic (operands and result share one dtype)
    "add", "sub", "mul",
    "div",        # float true division (the frontend casts ints to fp32 first, as Triton does)
    "idiv",       # integer division, truncating toward zero (C / Triton semantics, not Python's)
    "mod",        # C remainder: ints `%` (sign of dividend), floats fmod
    "and", "or", "xor", "shl", "shr",   # shr is arithmetic for signed, logical for unsigned
    "maximum", "minimum",
    "umulhi",
    # comparisons: result dtype int1
    "eq", "ne", "lt", "le", "gt", "ge",
}
COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}

UNARY_OPS = {
    "neg", "not",      # not: logical not of an int1 (bool) value
    "invert",          # bitwise ~ on ints
    "abs",
    # float math (the frontend casts ints to fp32; fp16/bf16 are computed in fp32 by codegen)
    "exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "tanh", "erf",
    "sigmoid", "floor", "ceil",
}

REDUCE_KINDS = {"sum", "max", "min", "argmax", "argmin"}
ATOMIC_KINDS = {"add", "max", "min", "xchg", "and", "or", "xor", "cas"}

OPCODES = {
    "constant", "program_id", "num_programs", "arange", "splat", "broadcast", "reshape",
    "permute", "cast", "binary", "unary", "select", "fma", "addptr", "load", "store", "atomic",
    "reduce", "scan", "dot", "for", "while", "if", "yield", "condition", "return", "assert",
    "print", "barrier", "philox", "convert_layout",
    "libdevice", "gather", "sort", "scan_fn", "histogram", "inline_asm", "map_fn",
}
TERMINATORS = {"yield", "condition", "return"}

# Opcodes the tensor-core passes create (never the frontend). The verifier knows them, so that
# it can run after the passes; their decisions live in attrs (newt/ir/schedule.py objects).
#
# | opcode            | created by                | operands / meaning |
# |-------------------|---------------------------|--------------------|
# | dot_ring_load     | passes/tc/dot.py          | a load feeding a ring dot: its tile is copied into the ring (attrs ring, ring_role) |
# | dot_ring_drain    | passes/tc/dot_pipeline.py | - : the ring's last tiles consumed after its loop (attrs dot) |
# | dot_acc_out       | passes/tc/dot.py, dot_pipeline.py | acc: the accumulator leaves the fragment layout (attrs dot_plan, ring, tma_store) |
# | dot_async_wait    | passes/tc/dot_loads.py    | - : wait for a ring's copies / a deferred wgmma |
# | dot_tile_load     | passes/tc/dot_loads.py    | a load (ptr [, mask [, other]]) copied straight into a dot's tile (attrs tile) |
# | dot_tile_prefetch | passes/tc/dot_loads.py    | - : the tiles of the loop's first iterations copied ahead (attrs loads, loop) |
# | dot_stage_a       | passes/tc/dot_rows.py     | a: a loop-invariant A tile staged once (attrs tile, dot_plan) |
# | dot_row_reduce    | passes/tc/dot_rows.py     | x: a row reduction of a fragment (a renamed reduce), result in AccRowLayout |
# | dot_row_bcast     | passes/tc/dot_rows.py, fragment_epilogue.py | row: a row vector read in the fragment layout |
# | dot_acc_cols      | passes/tc/fragment_split.py | acc: a column slice of a fragment, held in its registers (attrs cols) |
# | dot_frag_icomp    | passes/tc/fragment_epilogue.py | x: index math recomputed in the fragment layout |
# | tma_store         | passes/tc/store_tma.py    | ptr, value [, mask]: the epilogue's store by TMA boxes (attrs tma_store) |
PASS_OPCODES = {
    "dot_ring_load", "dot_ring_drain", "dot_acc_out", "dot_async_wait", "dot_tile_load",
    "dot_tile_prefetch", "dot_stage_a", "dot_row_reduce", "dot_row_bcast", "dot_frag_icomp",
    "dot_acc_cols", "tma_store",
}
