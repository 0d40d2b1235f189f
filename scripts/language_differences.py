"""The differences from Triton and from Helion that docs/language.md lists, as Markdown
(scripts/gen_language_docs.py pastes them in). Each line was checked against the code named in
it; keep them short and plain, and regenerate the docs after an edit."""

TRITON_DIFFERENCES = """\
- **Integer `//` and `%` truncate toward zero**, as in C and as in Triton (not Python's floor
  rule): `-7 // 2 == -3`, `-7 % 2 == -1` inside a kernel. `//` on floats is an error
  ([newt/frontend/semantic.py](../newt/frontend/semantic.py)). Signed `+`, `-`, `*`, `<<`,
  negation and `nl.abs` wrap on overflow (`nl.abs` of the minimum is the minimum), as in
  torch and the interpreter ([newt/codegen/elementwise.py](../newt/codegen/elementwise.py)).
  One difference from Triton's compiled kernels: there `nl.abs(x) % d` of the int32 minimum
  comes out positive on the H200 (ptxas takes `abs.s32` as non-negative); newt's is negative,
  as `torch.fmod(torch.abs(x), d)` is.
- **fp16 and bf16 values live in fp32 registers**, so a NaN that passes through a register
  comes out as the canonical NaN (bits 0x7FFF), not with the payload it had in memory; Triton
  keeps 16-bit registers and the bits. Arithmetic is unchanged (every NaN is a NaN), but a
  stored NaN and `x.to(nl.int16, bitcast=True)` of a NaN are 0x7FFF, and `nl.atomic_cas` on
  16-bit floats compares and writes the canonical NaN: a NaN compare value matches only 0x7FFF
  in memory, and a NaN read comes back as 0x7FFF. The interpreter does the same (`to_storage`
  in [newt/interpreter/values.py](../newt/interpreter/values.py), `_register_nan` in
  [newt/interpreter/memory.py](../newt/interpreter/memory.py)).
- **Python integer constants that do not fit their type wrap** (two's complement) where Triton
  raises an overflow error; a constant that does not fit 64 bits is an error
  (`_wrap_int` in [newt/frontend/semantic.py](../newt/frontend/semantic.py)).
- **Loop temporaries are not loop-carried**: a variable that exists before the loop, that the
  body writes before reading, and that nothing after the loop reads is local to the body, so
  the body may give it another type (`x = 0` before the loop, `x = nl.load(...)` inside)
  where Triton would reject the type change of a carried value
  ([newt/frontend/control.py](../newt/frontend/control.py)). A carried variable must keep its
  type, as in Triton.
- **`break` and `continue` are not supported**: a `CompilationError` at the line. `return`
  inside a loop is an error too. A @jit helper may `return` inside runtime `if`s (its value is
  yielded by the `if`, as a kernel's early `return` ends the program) when every path through
  them returns, or falls off the end of the function; a path that would go on after an
  enclosing `if` is an error (Triton accepts it) ([newt/frontend/control.py](../newt/frontend/control.py)).
- **Tensor descriptors and block pointers are pointer blocks and masks**, not TMA descriptors
  made on the device: `nl.make_tensor_descriptor`, `nl.make_block_ptr` / `nl.advance` and
  `boundary_check` / `padding_option` are lowered in the frontend to the form a user would write
  by hand ([newt/descriptors.py](../newt/descriptors.py)), so every target computes the same
  result and the tensor-core path treats them as that pointer form (on sm_90a it turns a
  matmul's loads into TMA boxes where it does for the pointer form). So newt needs no scratch
  memory for them (`newt.set_allocator` is accepted and unused), a descriptor's last stride
  need not be 1, and `order` is ignored. A host `TensorDescriptor` argument is its base
  pointer plus one int per size and stride (specialized like int arguments); a parameter that
  took a descriptor at a kernel's first launch must keep taking descriptors of that rank.
- **`nl.max` / `nl.min` keep the input type** (exact in any type); `argmax` / `argmin` return
  int32 and the first index among ties; max/min reductions ignore NaN like `nl.maximum` /
  `nl.minimum` (Triton's `maxnum` rule: NaN only when every element is NaN, whatever the
  order of NaN and +-inf and however the block is laid out), and `argmax` / `argmin` never
  pick a NaN over a number (Triton's depend on the reduction order there)
  ([newt/codegen/reduce.py](../newt/codegen/reduce.py)).
- **`nl.sum` of bool or of unsigned ints narrower than 32 bits accumulates in uint32**, of signed
  ones in int32, and returns that type (Triton's rule); fp16/bf16 sums accumulate in fp32 and
  are cast back to the input type.
- **`num_ctas` is accepted and each program runs as one CTA**: Triton spreads one program's
  block over a cluster of `num_ctas` CTAs, which changes its speed, not its results; newt does
  not launch clusters. The launch options `maxnreg`, `enable_fp_fusion`, `debug` and
  `extern_libs` are accepted and ignored (newt's libdevice names are CUDA's own math functions, so no library is
  linked) ([newt/jit_host.py](../newt/jit_host.py)).
- **The profiler `newt.profiler` times scopes, and kernels launched through `.run`**: proton's
  calls (`start`, `activate`, `deactivate`, `finalize`, `scope`) with CUDA events around each
  scope, a flat table per scope name and its own `.hatchet` JSON, which `newt.profiler.viewer`
  reads ([newt/profiler/](../newt/profiler/__init__.py)). With `hook="triton"`, each launch
  through an autotuner, `@heuristics` or `kernel.run` is recorded under the name and metrics its
  `launch_metadata` gives, timed by events around the launch (not CUPTI); a direct
  `kernel[grid](...)` launch is not (that path does only lookups; put it in a scope)
  ([newt/profiler/kernels.py](../newt/profiler/kernels.py)).
- **`nl.cumsum` of fp16/bf16 accumulates in fp32 and returns the input type**: Triton promotes
  bf16 to fp32 and returns fp32, and adds fp16 in fp16 (each partial sum rounded to fp16,
  several ulp off over long rows); newt rounds each prefix sum once
  ([newt/frontend/reductions.py](../newt/frontend/reductions.py)).
- **Integer division by -1 wraps**: `MIN // -1 == MIN` and `MIN % -1 == 0`, on the GPU and in
  the interpreter (a CPU division would trap); `x // 0` is -1 (all ones) and `x % 0` is `x`
  (Triton leaves both undefined; these are RISC-V's rules, under which
  `x == (x // y) * y + x % y` always holds) ([newt/codegen/header.py](../newt/codegen/header.py)).
- **`fp_downcast_rounding="rtz"` works for every float narrowing** (fp64, fp32, fp16, bf16 to
  any narrower float, fp8 included): the value rounded to nearest, stepped one unit toward zero
  where it lies farther out, so a value beyond the range gives the largest finite one; Triton
  lowers the mode for some of these conversions only
  ([newt/frontend/downcast.py](../newt/frontend/downcast.py)).
- **Chained comparisons are accepted**: `lo < x <= hi` means `(lo < x) and (x <= hi)` with `x`
  evaluated once, elementwise on blocks (as `and` is), in the interpreter and compiled; Triton
  rejects them ([newt/frontend/expressions.py](../newt/frontend/expressions.py)).
- **Shifts by an amount outside `[0, width)` are defined** as PTX's `shl` / `shr` define them
  (the amount read as unsigned and clamped to the width): `x << 40` of an int32 is 0 and
  `x >> 40` is 0 or -1 by the sign, on the GPU and in the interpreter; Triton leaves them
  undefined (LLVM poison) ([newt/codegen/header.py](../newt/codegen/header.py)).
- **Float -> integer conversions outside the target's range are defined** (Triton's
  `fptosi` / `fptoui` make them poison): truncated toward zero, saturated to 32 or 64 bits,
  NaN 0 (2^63's bits at 64 bits), as the GPU's `cvt.rzi` gives; 8- and 16-bit results are the
  low bits of the 32-bit one. A Python float that becomes an integer constant
  (`nl.full(.., 3e9, nl.int32)`, a stored number, a load's `other`) converts by the same rule
  (`float_to_int` in [newt/dtypes.py](../newt/dtypes.py)).
- **A Python float argument beyond fp32's range is a `LaunchError`** naming the argument
  (Triton rounds it to inf); `float("inf")` passes.
- **fp32 `/` and `nl.sqrt` round as Triton's do**, not as IEEE: `div.full.f32` (at most 2 ulp)
  and `sqrt.approx.ftz.f32` (denormal inputs give 0), the instructions Triton emits, so results
  match Triton's; `nl.div_rn` and `nl.sqrt_rn` are correctly rounded. fp16/bf16 `/` and
  `nl.sqrt` are correctly rounded (IEEE in fp32, then rounded), fp64 ones IEEE. The interpreter
  computes every one of them correctly rounded
  ([newt/codegen/elementwise.py](../newt/codegen/elementwise.py)).
- **`None` passed to any parameter is the constexpr `None`** (as in Triton), so
  `if bias_ptr is not None:` is decided at compile time, in the interpreter and on the GPU.
- **`cache_modifier`, `eviction_policy` and `volatile`** are checked (an unknown value is an
  error) and recorded on the IR, but code generation ignores them; the `sem` and `scope` of
  atomics are honoured ([newt/codegen/atomics.py](../newt/codegen/atomics.py)).
- **`nl.dot` needs M, N and K >= 16** and 2-D blocks of one dtype; `input_precision` /
  `allow_tf32` select "tf32" (the default for fp32 inputs, as in Triton), "tf32x3" or "ieee".
- **A dot whose M tile does not split into 16-row strips over the warps** (M not a multiple
  of 16 * num_warps: 64 rows at 8 warps, 32 at 4, 16 at 2) spreads the warps along N as well,
  as Triton does: the fewest column slices whose warps each get 16-row strips (wgmma on
  sm_90a where a slice has whole warpgroups, such as M = 64 at 8 warps; mma.sync otherwise). Where N does not cut into slices of a multiple of 16
  columns it runs on the FMA units, many times slower, with the same results; the printed
  IR's `dot_plan` says which (`mma:f16[64x128x64] wgmma n-split=2 (...)`, or
  `fma:fma[...] (...)`). Row reductions of such an accumulator (attention's row max and sum)
  and a P operand taken from it go through shared memory instead of staying in registers
  ([newt/ir/schedule.py](../newt/ir/schedule.py) `plan_dot`,
  [newt/ir/layouts.py](../newt/ir/layouts.py) `AccLayout`).
- **A dot operand loaded without a mask along its contiguous axis reads rows of at most the
  row stride on sm_90a**, and a dot's result stored without a mask writes rows of at most the
  row stride: the tiles move by TMA, and the map's extent on that axis is the row stride (the
  driver's maps have rows that do not overlap). A pointer block that reaches past the row
  stride into the next row without a mask (a view whose rows overlap, such as a sliding
  window) reads zeros there and does not write there, where Triton reads and writes the
  memory; a mask on that axis makes its bound the extent instead
  ([newt/passes/tc/dot_tma.py](../newt/passes/tc/dot_tma.py),
  [store_tma.py](../newt/passes/tc/store_tma.py)).
- **Missing Triton names**: of Triton's `tl` namespace, `dot_scaled`, `philox` /
  `philox_impl` (the raw four-counter generator; `nl.randint4x` gives its stream for one
  offset), `bitonic_merge`, `target_info`, the fp8 formats `float8e4b15`, `float8e4b8` and
  `float8e5b16`, and the type objects `void`, `block_type`, `tuple`, `slice`, `const`,
  `constexpr_type`, `tensor_descriptor_type`, `pi32_t` and `condition` do not exist: only the
  names listed on this page do.
- **libdevice** (`newt.language.extra.libdevice`, also `extra.cuda.libdevice`, and `nl.math`
  holding both Triton's `tl.math` names and every libdevice function) is generated from one
  table of CUDA math functions and intrinsics
  ([newt/language/extra/cuda/libdevice.py](../newt/language/extra/cuda/libdevice.py)).
  Where Triton rejects them, fp16 / bf16 arguments are computed in fp32 and rounded back to
  their type, and integer arguments of float functions are converted to fp32; `rcp64h` is the
  correctly rounded reciprocal; `pow(x, int)` is `pow(x, (float)n)`. The interpreter computes
  each function with torch, and rounds the `_rz` / `_rd` / `_ru` forms of fp64 results to
  nearest.
- **`nl.reduce` / `nl.associative_scan`** need a `@newt.jit` combine function (as Triton);
  they combine through shared memory in log2(n) steps (a Hillis-Steele scan; a reduction is a
  tree), so floating-point results may round differently from Triton's order
  ([newt/codegen/scan_fn.py](../newt/codegen/scan_fn.py)). `nl.cumprod` of bf16
  returns fp32, as Triton's. `nl.map_elementwise` accepts `pack` and passes one element per
  call; the interpreter calls the scalar function once per element.
- **`nl.sort` / `nl.topk`** order NaN above every number (torch's order); **`nl.gather`** with
  an index outside the axis gives 0 and **`nl.histogram`** does not count values outside
  `[0, num_bins)` (both undefined in Triton); sort, topk, flip, gather, split and histogram
  move data through shared memory ([newt/frontend/movement.py](../newt/frontend/movement.py)).
- **`nl.inline_asm_elementwise`** supports `pack=1` only (one element per asm statement); the
  interpreter cannot run PTX and raises a `CompilationError` naming the call.
- **`nl.assume`** compiles to nothing (no `__builtin_assume`), and the interpreter ignores it.
- **Python's `min`, `max`, `print` in a kernel** are `nl.minimum`, `nl.maximum` (elementwise on
  blocks: `max(x, 0.0)` is a ReLU) and `nl.device_print` (the leading strings are the prefix),
  as in Triton; `max(x)` of one block is an error (use `nl.max(x, axis)`).
- **`nl.range` options**: `num_stages` sets the ring depth of a loop's dot operands
  ([newt/passes/tc/dot_pipeline.py](../newt/passes/tc/dot_pipeline.py)); `loop_unroll_factor`,
  `disallow_acc_multi_buffer`, `flatten` and `warp_specialize` are accepted and ignored.
- **Register limit of wide blocks**: at 32 elements per thread (a 64x32 block with 2 warps, a
  128x64 one with 8), a kernel that loads three or more fp64/int64 blocks of the full tile keeps
  192+ registers of data live, and with its other values it may pass the 255 registers a
  thread has: ptxas then spills to local memory (results stay right, the kernel is slower), on
  sm_80 and sm_90a alike. newt does not reorder loads to shorten live ranges; more warps or
  smaller blocks avoid it (the fuzzer checks spills on both archs below that footprint,
  [tests/test_fuzz.py](../tests/test_fuzz.py)).
- **Kernels are compiled to CUDA C++ and built with NVRTC**, not through MLIR/LLVM: the
  generated source is readable (`NEWT_DEBUG=1` prints the IR after passes, each op under its
  Python line, and the CUDA C++ with its Python lines as comments; `NEWT_DUMP=dir` writes every
  stage, [newt/debug_dump.py](../newt/debug_dump.py)).
- **Under `torch.compile` a launch is the custom op `newt::launch`**, where dynamo traces
  Triton's launches natively: every tensor argument is declared written (the op cannot know
  which ones a kernel stores into), so the compiler keeps each launch where it is; an
  `@newt.autotune` kernel tunes inside the op, so its grid must be a tuple or a function
  defined outside the compiled function ([newt/torch_ops.py](../newt/torch_ops.py)).
- **Scalar accesses keep program order between a program's threads**: a scalar store or
  atomic runs on thread 0 and a scalar load on every thread, so where one of them and another
  thread's access to the same tensor could pass each other (`if nl.load(flag) == 0:
  nl.store(flag, 1)`) newt places a barrier
  ([newt/passes/thread_order.py](../newt/passes/thread_order.py)); Triton leaves that to a
  `tl.debug_barrier()` in the source.
- **fp64 -> fp16 / bf16 / fp8, and 32- and 64-bit integers -> bf16, round once** (through fp32
  rounded to odd, [newt/codegen/header.py](../newt/codegen/header.py)), as a direct `cvt.rn`
  does, in the generated code and the interpreter; torch's CPU `.to()` rounds fp64 twice
  (through fp32), so it differs from newt on values a hair off a 16-bit tie.
- **An argument given both positionally and by keyword** is Python's `TypeError` on the
  compiled path (`k() got multiple values for argument 'BLOCK'`, as with a Triton kernel),
  raised before any newt code runs; the interpreter binds the arguments itself and raises a
  `LaunchError` naming the launching line.
- **The interpreter refuses objects that have only `data_ptr()` and a dtype** (it cannot know
  their size): it takes torch tensors and DLPack objects; the compiled path takes all three,
  as Triton does ([newt/tensor_like.py](../newt/tensor_like.py)).
- **A launch runs on its tensors' device**, where Triton's runs on torch's current device (so
  tensors elsewhere need `with torch.cuda.device(...)` there): the module, the stream (torch's
  current stream of that device) and the driver context follow the tensors, and torch's current
  device is left alone; tensors on two devices are a `LaunchError` naming them
  ([newt/runtime/specialize.py](../newt/runtime/specialize.py),
  [newt/runtime/launch.py](../newt/runtime/launch.py)).
- **`@newt.autotune` keys its winners by the GPU's name too, and times on the arguments'
  GPU**: Triton's key (the `key` arguments and every tensor's dtype) plus the name of the GPU
  the tensors live on, so GPUs of two kinds in one process tune apart (a config that wins on
  one may be slow, or not fit, on the other); the configs are timed with that GPU as torch's
  current device, whichever device is current at the call
  ([newt/autotune.py](../newt/autotune.py)).
"""

HELION_DIFFERENCES = """\
- **One port step**: `import deuteron.language as hl` and `import deuteron as dt` (for
  `dt.kernel`, `dt.Config`) replace `helion.language` and `helion`. The `hl.*` names that exist
  mean what Helion's mean; the rest of this list is what still differs. Helion's other module
  paths exist too: `deuteron.cdiv`, `deuteron.next_power_of_2`, `deuteron.jit`, `deuteron.exc`
  (its warning classes, for `ignore_warnings=`), `deuteron.runtime`,
  `deuteron.autotuner.search_algorithms` (named, never run: `autotuner_fn` is not called), and
  `deuteron._testing` (the public `deuteron.testing`: `run_example`, `DEVICE`, `HALF_DTYPE`,
  `LONG_INT_TYPE`, `code_and_output`). `run_example` checks as Helion's does, times with
  `newt.testing.do_bench` and skips timing without a GPU (kernels then run on the
  interpreter). `scripts/run_helion_examples.py` runs a folder of Helion programs with only
  their imports rewritten.
- **Missing `hl.*` names**: `hl.signal` / `hl.wait`, `hl.atomic_cas`,
  `hl.cumprod`, `hl.subscript`, `hl.inline_asm_elementwise`, `hl.inline_triton` /
  `hl.triton_kernel`, `hl.device_print`, `hl.breakpoint`, `hl.StackTensor`, `hl.JaggedTensor`.
  `hl.constexpr` is an annotation only (host numbers are baked into the kernel anyway);
  `hl.specialize` returns its argument as an int. `hl.vtile` is `hl.jagged_tile`.
- **`hl.reduce(combine_fn, x, dim, other, keep_dims)`** reduces over a full slice ':', an
  inner loop's tile (each iteration its own tile) or a size-1 axis; over the launch grid's
  tile it is refused unless one tile covers the dim (each program would reduce only its own
  tile), and over a jagged tile it is refused (use `torch.sum` / `amax` ..., which skip each
  row's lanes past its length). `dim=None` reduces one dim at a time, the last first. The
  oracle runs the combine function itself (pairwise, in a tree), not a sum, so a wrong
  combine or `other` shows there too. As in `hl.associative_scan`, a combine function of
  several operands may take them unpacked or as two tuples.
- **`if` on kernel values takes a scalar** (a loaded scalar, `tile.begin`, a comparison of
  them: one value per program), traced into a newt `if` / `else`; both sides run once while
  tracing (the kernel function is rewritten to let them: [deuteron/rewrite.py](../deuteron/rewrite.py)),
  and a name assigned on only one side, and not defined before, cannot be used after the `if`.
  An `if ...: ...; continue` in a tile loop becomes an if / else holding the rest of the loop
  body; an `if` whose sides hold `break` or `return` is not rewritten (its test must be a host
  value). For a per-element choice use `torch.where` or `extra_mask=`. `hl.static_range` is a
  plain Python range.
- **`while` on a kernel value** (a scalar, as for `if`) becomes a newt `while`: its body is
  traced once, the names it updates are carried, and the test is computed before the loop and
  again at the end of the body. A `break` in it (under `if`s, also on kernel values) sets a
  flag that fails the next test, and the rest of the body runs only on the sides that go on;
  the test itself is still computed once more after a break (keep it safe to compute: a
  comparison of a counter, not a load past the end). A `while` holding `return` or `else` is
  not rewritten (its test must then be a host value, which loops in Python while tracing),
  nor one whose `break` sits in a `with` or `try`; a `break` under an `if` on a kernel value
  out of a host-test `while` is refused; a test that reduces over the launch grid's tile is
  refused (each program would test only its own tile, the oracle the whole dim).
- **`hl.jagged_tile(lengths)`**: the loop runs to the largest length among the rows a program
  holds, and loads, stores and reductions that involve the jagged tile and the lengths' rows are
  masked per row (a load past a row's length reads 0; a mean over a jagged tile is refused:
  sum and divide by the lengths). The oracle runs the launch grid's tile loops one row at a
  time, so its jagged loops have one length each; `hl.jagged_tile` must take lengths over the
  launch grid's tiles.
- **A tile pinned with `block_size=1` is an index**, as an `hl.grid` index is: indexing with it
  drops that dim, and arithmetic on it is integer arithmetic on its position.
- **Tile attributes in the oracle**: the oracle runs each tile of a tuned size as the whole
  range of its loop, so there `.block_size` is the range's length and `.id` is 0 (as in
  Helion's ref mode); a tile of a pinned `block_size` runs in tiles of that size, so an `if` on
  `.begin` / `.id` sees each tile as the kernel does; an
  index (`hl.grid`, `block_size=1`) is an int carrying `.begin`, `.end`, `.index`, `.id`. In the
  oracle these are host ints: `t.end * 1.0`, not `t.end.float()`.
- **`hl.register_block_size`** is an int in host code: this run's config value (when only
  tracing, the power of two nearest 64 within the range; in the oracle, whose tiles are whole
  dims, the top of the range). Tiles given it as `block_size=` share one tuned size, and as a
  size (`hl.zeros([tile_m, bs])`) it lines up with those tiles.
- **`hl.register_tunable(name, fragment)` is not searched**: the kernel runs with
  `dt.Config(name=value)` when a config sets it, else the fragment's default
  (`deuteron.autotuner.PowerOfTwoFragment`, `IntegerFragment`, `EnumFragment`,
  `BooleanFragment`).
- **`hl.rand(shape, seed=)`** draws Philox numbers (Triton's stream) at each element's position
  in the untiled shape, so every tiling and the oracle draw the same numbers; the seed is a host
  int, passed to the kernel as an argument (a new seed compiles nothing). It is not torch's
  generator.
- **`torch.rand_like` / `torch.randn_like` / `torch.rand` / `torch.randn` in a tile loop**
  draw the same Philox stream at each element's position in the value's untiled shape, keyed
  by a seed drawn from torch's default CPU generator once per call (Helion draws one seed per
  random op from the tensors' device generator): `torch.manual_seed(s)` repeats a call, every
  call draws new numbers, and the oracle draws the kernel's numbers (eager torch's own stream
  would differ, so the oracle could not check the kernel). Inside a loop whose programs or
  iterations would all repeat one draw (an `hl.grid` index, a pinned block size smaller than
  its dim, a value lacking an open loop's tile dim) they raise `TraceError` (Helion repeats
  the draw); use `hl.rand` with a seed that differs per index there.
- **Atomics** (`hl.atomic_add`, `_max`, `_min`, `_and`, `_or`, `_xor`, `_xchg`) are relaxed
  and return None (Helion returns the old values); `sem` is accepted and ignored.
- **A reduction or matmul over a dim of the launch grid** (each program holds one tile of it)
  raises `TraceError` unless only `hl.atomic_add` consumes it (split-K) or a pinned block size
  covers the dim: the kernel would otherwise keep one tile's part where the oracle has the whole.
- **Batched matmuls** (`torch.bmm`, `torch.baddbmm`, `@` of 3-D tiles) run one batch element
  per program: the batch tile's block size is pinned to 1.
- **`hl.cumsum` / `torch.cumsum` run along a whole dim** (a full slice `:`), never along a tile
  of the grid or of a loop (each program holds one tile of those). **`hl.associative_scan`**
  runs along a whole dim or the launch grid's tile, where each program scans its own tile: that
  result may reach only `hl.atomic_add` (Helion's segmented reduction). A reverse scan needs a
  whole dim without padding (a power-of-two extent), never an inner loop's tile. The combine
  function is traced once on scalars and printed as a `@newt.jit` function; the oracle scans in
  log2(n) steps, so float results may round differently.
- **Reshapes keep the tile dims** (a tile of the grid or of a loop has no layout beyond its
  block): `.reshape` / `.view` may split or merge whole dims (full slices `:`) between them,
  each of a power-of-two size (`[tm, 64] -> [tm, 2, 32]`), and add or drop size-1 axes;
  `hl.split` / `hl.join` take and make a last whole dim of 2. `.transpose` and `.permute`
  reorder dims; `.expand` / `.expand_as` broadcast.
- **Matmul precision**: an fp8 matmul yields fp32 (the kernel's dot; torch has no fp8 matmul),
  and `torch.addmm(acc_fp32, x_fp16, y_fp16)`, `torch.baddbmm` and fp8 products run in the
  accumulator's precision in the oracle too (eager torch would refuse the mixed dtypes).
- **`%` and `//` inside a deuteron kernel round like torch** (toward minus infinity), unlike
  newt kernels, because the eager oracle is plain torch and the two must agree.
- **Mixed dtypes promote as in torch**: where Triton's rule (newt's) differs, fp16 with bf16
  (fp16 in Triton, fp32 in torch) and bf16 with an integer tile (fp32 in Triton, bf16 in
  torch), the generated source casts the tiles to torch's dtype first
  (`_as_torch_promotes` in [deuteron/ops.py](../deuteron/ops.py)).
- **The oracle is built in**: every candidate config runs on cloned inputs and is rejected if it
  disagrees with `k.ref(...)` (the same function run as eager PyTorch) before it is timed.
- **Efforts are `none`, `quick` (<= 32 configs, no new batch after 20 s) and `full` (<= 120
  configs, 300 s)**; there is one search, a random sample (plus known-good tilings for
  matmul-shaped kernels) followed by a local pattern search and a final re-timing of the best
  three ([deuteron/autotune/search.py](../deuteron/autotune/search.py)), where Helion offers
  several search algorithms. `DEUTERON_AUTOTUNE_EFFORT` sets the effort of kernels that do not
  set one, `DEUTERON_PRINT_OUTPUT_CODE=1` prints every generated kernel, `DEUTERON_QUIET=1`
  drops the progress bar (the summary line stays); Helion's `HELION_*` variables are not read.
- **`dt.Config` tunes `block_sizes`, `num_warps`, `num_stages` and `group_size`** (Helion's
  `l2_groupings=[g]` sets `group_size`); Helion's other keys (`indexing`, `pid_type`,
  `loop_orders`, `range_*`, ...) are accepted, printed and have no effect
  ([deuteron/config.py](../deuteron/config.py)).
- **`reduction_split=S` splits a long summing device loop over S programs per tile**, a knob
  Helion does not have: a grid of few programs over a long `acc = acc + ...` loop (m=16 rows of
  2**20) would leave most SMs idle. The loop's range is cut into S shares of whole blocks, each
  program writes its fp32 partial accumulators to a workspace, and a second kernel sums them in
  a fixed order (deterministic, no atomics) and runs the code after the loop. The search space
  offers it only where the loop qualifies ([deuteron/split.py](../deuteron/split.py)).
- **Kernel settings**: `config`, `configs`, `autotune_effort`, `static_shapes` (default False:
  shapes are bucketed by powers of two), `use_default_config`, `print_output_code` and
  `autotune_log_level` (0: quiet) act; Helion's other settings (`ignore_warnings`,
  `index_dtype`, `dot_precision`, `autotune_*`, ...) are accepted and have no effect
  ([deuteron/settings.py](../deuteron/settings.py)); unknown ones raise `TypeError`.
- **A first call inside a CUDA graph capture raises** (tracing, compiling and tuning cannot be
  captured): call the kernel once outside the capture; later calls replay into the graph.
- **The generated code is newt source** (one `@newt.jit` kernel per top-level tile loop),
  readable with `k.to_newt_source(*args)`, not Triton source.
- **Under `torch.compile` a call is the custom op `deuteron::call`**, its outputs shaped by
  running `k.ref` on fake tensors; a kernel that stores into one of its arguments traces as
  `deuteron::call_inplace` and may then return only its arguments, not new tensors
  ([deuteron/torch_ops.py](../deuteron/torch_ops.py)).
- **A call that would autotune inside a CUDA graph capture raises `CaptureError`** ("warm it
  up first") before any GPU work; warmed kernels and pinned configs capture
  ([deuteron/capture.py](../deuteron/capture.py)).
"""
