# Lab script, measured on commit 60057ea: it patches the library's internals of that commit
# (check it out to rerun it); not run by the test suite.
"""Experiments on the H200: the memory-bound rows' kernels rewritten by hand, timed against
newt's own kernels and Triton in one process (each variant checked first against torch, with
a NaN-poisoned output, on the benchmark shape and on odd ones). A place to try a codegen idea
for these rows before building it into the passes, as matmul_variants.py is for the matmul.

    PYTHONPATH=. [ROUNDS=7] python benchmarks/memory_variants.py

The softmax (fp32 32768x4096, one row per program, 8 warps, the TARGETS workload) reads
4,040-4,080 GB/s, where newt and Triton tie. The variants:
  p8, p4    persistent: 8 or 4 CTAs per SM, each looping over rows b, b + gridDim.x, ...
            (Triton's semantics let programs run in any order, so a compiler may do this)
  f4        p4, with the next row's loads issued before the current row's reductions
  copy      the row copied, no arithmetic: the ceiling of this access pattern
  bulk      the row loaded by the copy engine into shared memory (one cp.async.bulk per row,
            completing on an mbarrier), read from there; stored as usual
  bulk2     bulk, and the result staged in shared memory and stored by one cp.async.bulk
  bcopy     bulk2 with no arithmetic
  hand      the same algorithm as newt's kernel, written by hand (each group's address
            computed from its column); acc1 / acc4 / tree: a thread's own elements reduced
            by 1, 4 or 16 (a tree) accumulators instead of 2; dyn / dyntree: the reduction
            buffer in dynamic shared memory, as newt's arena
  imm       hand, with every group's address one base plus an immediate offset, as newt's
            codegen/memory.py can form it for a block contiguous as a whole (immtree: the tree)
  gensrc    newt's generated kernel (not specialized: run-time alignment tests), launched as
            the probes are; gennoimm: the same with the immediate-offset form off
  specimm   newt's generated kernel specialized as the JIT specializes the benchmark's
            launch (pointers and ints divisible by 16), its proven groups static, with
            immediate offsets (the JIT's form before passes/accesses.py); specnoimm: the
            same, form off
  tested    specimm with every group's run-time test and scalar path kept (the groups'
            static form off: the other facts of the specialization stay); testednoimm:
            the same, form off (the JIT's softmax under passes/accesses.py's rule)
  ldtested, sttested (and ...noimm): tested for the loads or the stores only; ldnoimm,
            stnoimm: specimm with the form off for one access kind
  newt16w   newt's kernel at 16 warps (deuteron's tuner picks it)
The layernorm row (fp16, 8 warps) gets the same twelve forms of newt's kernel, named ln...
(lnimm is the JIT's layernorm under the rule); the vector add (n = 2^27, 4 warps)
grid-stride persistent forms add-p4/8/16, one program per CTA with (add-imm) and without
(add) the form, and newt's kernel in the four specialized forms (addimm, addnoimm,
addtested, addtestednoimm: the JIT's add under the rule). The kernels other than
newt's own are its generated helpers (the softmax's header) with a hand-written body.

Measured on the H200, 2026-12-02 13:48-15:01 UTC, five calls, 5-7 interleaved rounds, GB/s
(docs/results/2026-12-02-1445-h200.md):
- Persistence loses 5%: p8 / p4 / f4 3,825-3,847 against newt's 4,040-4,065; the prefetch
  adds nothing. The persistent vector add loses 4% (4,099-4,149 against 4,308-4,330).
- The row copy reads what the softmax reads (copy 4,036-4,066, bcopy 4,054-4,068): the
  softmax's arithmetic is hidden. torch's flat copy: 4,105-4,131.
- The hand-written kernel reads 4,094-4,111 in every call, Triton 4,050-4,085, newt
  4,040-4,065; the reduction's shape (acc1 / acc4 / tree) and the buffer's kind (dyn) move
  it by under 0.3%. Its gain is in the access form: with immediate offsets (imm, immtree) it
  reads 4,071-4,088. newt's own kernel: gensrc 4,069-4,086, gennoimm 4,094-4,110, and
  specialized as the JIT runs it specimm 4,059-4,066, specnoimm 4,073-4,080. So the
  unspecialized kernel (a run-time test and a branch per group) without immediate offsets
  is the fast one; newt's JIT kernel has neither. bulk (copy-engine loads) reads as hand;
  bulk2 (bulk stores too) reads as the copy.
- The vector add: add 4,309-4,327, add-imm 4,308-4,331: the form does not matter there.
- The layernorm the other way: lnimm 4,037, lnnoimm 4,018, lngen 3,559, lngennoimm 3,471
  (15:01; newt 4,016, Triton 3,958). No one form is faster for every kernel.
Measured 2026-12-02 15:45 and 16:17 UTC (7 rounds each; newt was still specimm then):
- softmax: tested 4,087 / 4,081, testednoimm 4,105 / 4,104 against specimm 4,063 / 4,064
  (Triton 4,082 / 4,082). One access kind at a time (16:17): ldtestednoimm 4,090,
  sttestednoimm 4,089, ldtested 4,076, sttested 4,067, ldnoimm 4,057, stnoimm 4,074: the
  loads and the stores each give half, and only tested and indexed together.
- layernorm: lntested 3,706 / 3,683 against lnimm 4,037 / 4,011 (47 registers against 40:
  5 CTAs per SM instead of 6); its stores alone tested cost nothing (lnsttested 4,002) and
  gain nothing either.
- vector add: every form 4,305-4,312 (Triton 4,311 / 4,311).
passes/accesses.py took the rule from these rows: masked groups of 32-bit or wider elements
tested and indexed, narrower ones static with immediate offsets.
"""
from __future__ import annotations

import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

import common  # noqa: E402
import newt  # noqa: E402
from newt.runtime import driver, nvrtc  # noqa: E402
from newt.testing import do_bench  # noqa: E402

BODY = r"""
#define T (NW * 32)
#define PER (BLOCK / T)
#define G (PER / 4)

// IMM 1: each group's address as one base plus an immediate offset, as newt generates it
// (IMM 0: the address computed from the column per group)
NT_INLINE void load_row(const float* row, int n_cols, int tid, u32 (&r)[PER]) {
  const u32 other = __float_as_uint(-__int_as_float(0x7f800000));
  const float* base = row + tid * 4;
  #pragma unroll
  for (int g = 0; g < G; ++g) {
    const int c = g * T * 4 + tid * 4;
    const float* p = IMM ? base + g * T * 4 : row + c;
    if ((((u64)p & 15) == 0) & (c + 3 < n_cols)) {
      nt_ld4(p, r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3]);
    } else {
      #pragma unroll
      for (int e = 0; e < 4; ++e) r[4 * g + e] = nt_ldp32(p + e, c + e < n_cols, other);
    }
  }
}

NT_INLINE void store_row(float* row, int n_cols, int tid, const u32 (&r)[PER]) {
  float* base = row + tid * 4;
  #pragma unroll
  for (int g = 0; g < G; ++g) {
    const int c = g * T * 4 + tid * 4;
    float* p = IMM ? base + g * T * 4 : row + c;
    if ((((u64)p & 15) == 0) & (c + 3 < n_cols)) {
      nt_st4(p, r[4 * g], r[4 * g + 1], r[4 * g + 2], r[4 * g + 3]);
    } else {
      #pragma unroll
      for (int e = 0; e < 4; ++e) nt_stp32(p + e, c + e < n_cols, r[4 * g + e]);
    }
  }
}

// A thread's own elements reduced with ACC independent accumulators (ACC = 1: a chain of
// PER - 1 dependent operations; PER: a tree, as newt generates it, log2(PER) deep). Values,
// not an array reduced in place: an array would stay in local memory.
template <int N> struct Tree {
  static __device__ __forceinline__ float max(const float* v) {
    return fmaxf(Tree<N / 2>::max(v), Tree<N / 2>::max(v + N / 2)); }
  static __device__ __forceinline__ float sum(const float* v) {
    return Tree<N / 2>::sum(v) + Tree<N / 2>::sum(v + N / 2); }
};
template <> struct Tree<1> {
  static __device__ __forceinline__ float max(const float* v) { return v[0]; }
  static __device__ __forceinline__ float sum(const float* v) { return v[0]; }
};

NT_INLINE float row_max(const u32 (&r)[PER]) {
  float v[PER];
  #pragma unroll
  for (int s = 0; s < PER; ++s) v[s] = __uint_as_float(r[s]);
#if ACC == PER
  return Tree<PER>::max(v);
#else
  float a[ACC];
  #pragma unroll
  for (int k = 0; k < ACC; ++k) a[k] = v[k];
  #pragma unroll
  for (int s = ACC; s < PER; s += ACC) {
    #pragma unroll
    for (int k = 0; k < ACC; ++k) a[k] = fmaxf(a[k], v[s + k]);
  }
  return Tree<ACC>::max(a);
#endif
}

NT_INLINE float row_sum(const float (&v)[PER]) {
#if ACC == PER
  return Tree<PER>::sum(v);
#else
  float a[ACC];
  #pragma unroll
  for (int k = 0; k < ACC; ++k) a[k] = v[k];
  #pragma unroll
  for (int s = ACC; s < PER; s += ACC) {
    #pragma unroll
    for (int k = 0; k < ACC; ++k) a[k] += v[s + k];
  }
  return Tree<ACC>::sum(a);
#endif
}

NT_INLINE void softmax_row(u32 (&r)[PER], float* rb, int lane, int warp) {
#if !COPY
  float t0 = row_max(r);
  #pragma unroll
  for (int k = 0; k < 5; ++k) t0 = fmaxf(t0, __shfl_xor_sync(0xffffffffu, t0, 16 >> k));
  if (lane == 0) rb[warp] = t0;
  __syncthreads();
  float m = rb[0];
  #pragma unroll
  for (int w = 1; w < NW; ++w) m = fmaxf(m, rb[w]);
  float num[PER];
  #pragma unroll
  for (int s = 0; s < PER; ++s) num[s] = nt_exp(__uint_as_float(r[s]) - m);
  t0 = row_sum(num);
  #pragma unroll
  for (int k = 0; k < 5; ++k) t0 += __shfl_xor_sync(0xffffffffu, t0, 16 >> k);
  if (lane == 0) rb[NW + warp] = t0;
  __syncthreads();
  float d = rb[NW];
  #pragma unroll
  for (int w = 1; w < NW; ++w) d = d + rb[NW + w];
  #pragma unroll
  for (int s = 0; s < PER; ++s) r[s] = __float_as_uint(nt_fdiv(num[s], d));
#endif
}

extern "C" __global__ void __launch_bounds__(T, MINB) probe_kernel(
    float* out, const float* in, i32 in_stride, i32 out_stride, i32 n_cols, i32 n_prog) {
#if DYN   // the reduction buffer in dynamic shared memory, as newt's arena
  extern __shared__ __align__(16) unsigned char nt_smem[];
  float* rb = (float*)nt_smem;
#else
  __shared__ float rb[2 * NW];
#endif
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  u32 cur[PER];
#if PREFETCH
  i32 row = (i32)blockIdx.x;
  load_row(in + (i32)((u32)row * (u32)in_stride), n_cols, tid, cur);
  for (; row < n_prog; row += (i32)gridDim.x) {
    u32 nxt[PER];
    const i32 nrow = row + (i32)gridDim.x;
    if (nrow < n_prog) load_row(in + (i32)((u32)nrow * (u32)in_stride), n_cols, tid, nxt);
    softmax_row(cur, rb, lane, warp);
    store_row(out + (i32)((u32)row * (u32)out_stride), n_cols, tid, cur);
    #pragma unroll
    for (int s = 0; s < PER; ++s) cur[s] = nxt[s];
  }
#elif PERSIST
  for (i32 row = (i32)blockIdx.x; row < n_prog; row += (i32)gridDim.x) {
    load_row(in + (i32)((u32)row * (u32)in_stride), n_cols, tid, cur);
    softmax_row(cur, rb, lane, warp);
    store_row(out + (i32)((u32)row * (u32)out_stride), n_cols, tid, cur);
  }
#else
  const i32 row = (i32)blockIdx.x;   // one row per CTA, as generated
  load_row(in + (i32)((u32)row * (u32)in_stride), n_cols, tid, cur);
  softmax_row(cur, rb, lane, warp);
  store_row(out + (i32)((u32)row * (u32)out_stride), n_cols, tid, cur);
#endif
}

// the row moved by the copy engine (cp.async.bulk, one instruction per row): BULK 1 loads it
// into shared memory and each thread reads its elements there; BULK 2 also stages the result
// in shared memory and stores it with one cp.async.bulk (full 16-byte-aligned rows only: the
// probe's checks use n_cols = 4096)
NT_INLINE u32 nt_sa(const void* p) { return (u32)__cvta_generic_to_shared(p); }

extern "C" __global__ void __launch_bounds__(T, MINB) bulk_kernel(
    float* out, const float* in, i32 in_stride, i32 out_stride, i32 n_cols, i32 n_prog) {
  extern __shared__ __align__(128) unsigned char nt_smem[];
  __shared__ float rb[2 * NW];
  __shared__ __align__(8) unsigned long long bar;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float* row_s = (float*)nt_smem;
  const i32 row = (i32)blockIdx.x;
  const u32 nbytes = (u32)BLOCK * 4u;
  if (tid == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(nt_sa(&bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}"
                 :: "r"(nt_sa(&bar)), "r"(nbytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1], %2, [%3];"
                 :: "r"(nt_sa(row_s)), "l"(in + (i32)((u32)row * (u32)in_stride)),
                 "r"(nbytes), "r"(nt_sa(&bar)) : "memory");
  }
  __syncthreads();   // the barrier's init is seen before anyone waits on it
  asm volatile("{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n"
               "@!p bra W;\n}" :: "r"(nt_sa(&bar)) : "memory");
  u32 cur[PER];
  #pragma unroll
  for (int g = 0; g < G; ++g) {
    const uint4 v = *(const uint4*)(row_s + g * T * 4 + tid * 4);
    cur[4 * g] = v.x; cur[4 * g + 1] = v.y; cur[4 * g + 2] = v.z; cur[4 * g + 3] = v.w;
  }
  softmax_row(cur, rb, lane, warp);
  float* orow = out + (i32)((u32)row * (u32)out_stride);
#if BULK == 1
  store_row(orow, n_cols, tid, cur);
#else
  #pragma unroll
  for (int g = 0; g < G; ++g)
    *(uint4*)(row_s + g * T * 4 + tid * 4) = make_uint4(cur[4 * g], cur[4 * g + 1],
                                                        cur[4 * g + 2], cur[4 * g + 3]);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (tid == 0) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 :: "l"(orow), "r"(nt_sa(row_s)), "r"(nbytes) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  }
#endif
}

// the vector add: a grid-stride loop over BLOCK-element programs (PERSIST 1), or one program
// per CTA (n < 2^31)
NT_INLINE void add_block(const float* x, const float* y, float* out, i32 b, i32 n, int tid) {
  u32 a[PER], c[PER];
  load_row(x + b, n - b, tid, a);
  load_row(y + b, n - b, tid, c);
  #pragma unroll
  for (int s = 0; s < PER; ++s)
    a[s] = __float_as_uint(__uint_as_float(a[s]) + __uint_as_float(c[s]));
  store_row(out + b, n - b, tid, a);
}

extern "C" __global__ void __launch_bounds__(T, MINB) add_probe(
    const float* x, const float* y, float* out, i32 n) {
#if PERSIST
  for (i32 b = (i32)blockIdx.x * BLOCK; b < n; b += (i32)gridDim.x * BLOCK)
    add_block(x, y, out, b, n, threadIdx.x);
#else
  add_block(x, y, out, (i32)blockIdx.x * BLOCK, n, threadIdx.x);
#endif
}
"""

# (name, warps, CTAs per SM for the grid (0: one CTA per program), minBlocks, prefetch, copy).
# With the prefetch a thread holds two rows: 58 registers, so 4 CTAs per SM (6 would spill).
SOFTMAX = [("hand", 8, 0, 7, 0, 0), ("p8", 8, 8, 8, 0, 0), ("p4", 8, 4, 4, 0, 0),
           ("f4", 8, 4, 4, 1, 0), ("copy", 8, 0, 7, 0, 1)]
# the hand body with ACC accumulators per thread (2 above)
ACCS = [("acc1", 1), ("acc4", 4), ("tree", 16)]
DYNS = [("dyn", 2), ("dyntree", 16)]   # ... with the buffer in dynamic shared memory
IMMS = [("imm", 2), ("immtree", 16)]   # ... with immediate-offset addresses
# (name, BULK, COPY): one CTA per row, 16 KB of dynamic shared memory
BULK = [("bulk", 1, 0), ("bulk2", 2, 0), ("bcopy", 2, 1)]
# (name, warps, CTAs per SM (0: one per program), minBlocks, IMM)
ADD = [("add-p8", 4, 8, 8, 0), ("add-p16", 4, 16, 16, 0), ("add-p4", 4, 4, 4, 0),
       ("add", 4, 0, 1, 0), ("add-imm", 4, 0, 1, 1)]


def generated(imm=True, spec: bool = False, key: str = "softmax", static=True):
    """newt's CompiledKernel of an example's AOT entry (key: common.EXAMPLES; the softmax's
    is the TARGETS launch, 8 warps), with passes/accesses.py's forms forced. imm: every
    access's groups address from one base plus immediate offsets (True) or from their own
    index math (False). spec: specialized as the JIT specializes the benchmark's launch
    (pointers and ints divisible by 16: no run-time alignment test, no scalar path). static:
    the groups the facts prove are one predicated vector access (True) or keep the run-time
    test and the scalar path (False). imm and static also take "load" or "store" (False for
    that access kind only, True for the other) or None (the pass's own rule: the JIT's
    kernel)."""
    from newt import compiler
    from newt.passes import accesses
    ex = common.example(key)
    a = ex.AOT[0]

    def force(v, on, off):
        return {k: None if v is None else on if v is True or v not in (False, k) else off
                for k in ("load", "store")}
    accesses.ADDRESSES.update(force(imm, "offsets", "index"))
    accesses.GROUPS.update(force(static, "static", "tested"))
    try:
        return compiler.compile(a["fn"], a["signature"], a["constexprs"], arch="sm_90a",
                                num_warps=a.get("num_warps", 8), specialization={
                                    p: {"divisible_by_16": True}
                                    for p, t in a["signature"].items() if t != "fp32"
                                } if spec else None)
    finally:
        accesses.ADDRESSES.update(load=None, store=None)
        accesses.GROUPS.update(load=None, store=None)


def header() -> str:
    """newt's generated helpers (everything before the kernel) of the softmax example."""
    return generated().source.split('extern "C"')[0]


def build(head, entry, warps, block, per_sm, minb, prefetch=0, copy=0, bulk=0, acc=2, dyn=0,
          imm=0, source=None):
    """NVRTC's result for one variant (no GPU needed): the hand-written body under these
    settings, or `source` (a CompiledKernel of newt's)."""
    defs = "".join(f"#define {k} {v}\n" for k, v in dict(
        NW=warps, BLOCK=block, MINB=minb, PREFETCH=prefetch, COPY=copy,
        PERSIST=int(per_sm > 0), BULK=bulk, ACC=acc, DYN=dyn, IMM=imm).items())
    return nvrtc.compile_cuda(source.source if source else head + defs + BODY, entry, "sm_90a")


def variants(head) -> tuple:
    """The softmax, layernorm and vector add variants: three lists of (name, Probe's
    positional arguments after the name, its keyword arguments)."""
    sm = [(n, ("probe_kernel", w, 4096, k, mb, pf, cp), {}) for n, w, k, mb, pf, cp in SOFTMAX]
    sm += [(n, ("bulk_kernel", 8, 4096, 0, 7, 0, cp, b), {}) for n, b, cp in BULK]
    sm += [(n, ("probe_kernel", 8, 4096, 0, 7), dict(acc=a)) for n, a in ACCS]
    sm += [(n, ("probe_kernel", 8, 4096, 0, 7), dict(acc=a, dyn=1)) for n, a in DYNS]
    sm += [(n, ("probe_kernel", 8, 4096, 0, 7), dict(acc=a, imm=1)) for n, a in IMMS]
    # newt's generated kernel itself, launched as the probes are (the launch path's share)
    # (name, immediate offsets, specialized, static groups)
    # the last six: one access kind's switch off ("load" / "store"), the other kind's kept
    forms = (("imm", True, 1, True), ("noimm", False, 1, True), ("gen", True, 0, True),
             ("gennoimm", False, 0, True), ("tested", True, 1, False),
             ("testednoimm", False, 1, False), ("ldtested", True, 1, "load"),
             ("sttested", True, 1, "store"), ("ldtestednoimm", "load", 1, "load"),
             ("sttestednoimm", "store", 1, "store"), ("ldnoimm", "load", 1, True),
             ("stnoimm", "store", 1, True))
    names = {"imm": "specimm", "noimm": "specnoimm", "gen": "gensrc"}
    for n, imm, spec, static in forms:
        sm.append((names.get(n, n), ("softmax_kernel", 8, 4096, 0, 7), dict(
            source=generated(imm=imm, spec=bool(spec), static=static), spec=bool(spec))))
    ln = [("ln" + n, ("layernorm_fwd_kernel", 8, 4096, 0, 1), dict(source=generated(
              imm=imm, spec=bool(spec), static=static, key="layernorm"), spec=bool(spec)))
          for n, imm, spec, static in forms]
    ad = [(n, ("add_probe", w, 1024, k, mb), dict(imm=i)) for n, w, k, mb, i in ADD]
    ad += [("add" + n, ("add_kernel", 4, 1024, 0, 1), dict(source=generated(
               imm=imm, spec=True, static=static, key="add"), spec=True))
           for n, imm, spec, static in forms[:6] if spec]
    return sm, ln, ad


class Probe:
    """One compiled variant, launched through cuLaunchKernel. The argument array is built per
    call: its host time hides under the L2 flush that do_bench launches before each call."""

    def __init__(self, head, name, entry, warps, block, per_sm, minb, prefetch=0, copy=0,
                 bulk=0, acc=2, dyn=0, imm=0, source=None, spec=False):
        self.spec = spec    # specialized as the benchmark's launch: checked on its shape only
        res = build(head, entry, warps, block, per_sm, minb, prefetch, copy, bulk, acc, dyn, imm,
                    source)
        rep = res.report
        self.name, self.regs, self.spills = name, rep.get("n_regs"), rep.get("n_spills")
        dev = driver.Device.get(torch.cuda.current_device())
        self.kernel = driver.Module(dev, res.cubin, entry).get_kernel(entry)
        self.threads, self.per_sm = warps * 32, per_sm
        self.shared = block * 4 if bulk else 2 * warps * 4 if dyn else 0
        if source is not None:
            self.shared = source.shared_bytes
        if self.shared:
            self.kernel.set_dynamic_shared(self.shared)
        self.sms = torch.cuda.get_device_properties(0).multi_processor_count

    def __call__(self, n_prog, *args):
        """args: (ctypes value, ...) in parameter order."""
        grid = n_prog if not self.per_sm else min(n_prog, self.per_sm * self.sms)
        vals = list(args)
        ptrs = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
        stream = torch.cuda.current_stream().cuda_stream
        cu = driver.lib()
        res = cu.cuLaunchKernel(self.kernel.handle, grid, 1, 1, self.threads, 1, 1, self.shared,
                                stream, ptrs, None)
        driver.check(res, "cuLaunchKernel", self.name)


def softmax_call(p, x, out):
    m, n = x.shape
    args = (ctypes.c_void_p(out.data_ptr()), ctypes.c_void_p(x.data_ptr()),
            ctypes.c_int32(x.stride(0)), ctypes.c_int32(out.stride(0)), ctypes.c_int32(n),
            ctypes.c_int32(m))
    return lambda: p(m, *args)


def add_call(p, x, y, out):
    n = out.numel()
    args = (ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()),
            ctypes.c_void_p(out.data_ptr()), ctypes.c_int32(n))
    return lambda: p(newt.cdiv(n, 1024), *args)


def table(title: str, calls: dict, nbytes: int, rounds: int):
    """Time `calls` in interleaved rounds (do_bench medians) and print GB/s per variant."""
    med, notes = common.timed_in_rounds(calls, lambda fn: (do_bench(fn, return_mode="median"), None), rounds)
    print(f"{title}, GB/s (median of {rounds} interleaved rounds)")
    for name, ms in med.items():
        print(f"  {name:10s} {common.gbps(nbytes, ms):7.0f}")
    for name, note in notes.items():
        print("  note", name, note)


def main():
    rounds = int(os.environ.get("ROUNDS", "5"))
    head = header()
    sm, ln, ad = ([Probe(head, n, *a, **kw) for n, a, kw in group] for group in variants(head))
    ln = {p.name: p for p in ln}
    for p in sm + list(ln.values()) + ad:
        print(f"{p.name:8s} {p.regs} registers, {p.spills} spills")
    nk, tk = common.newt_kernel("softmax"), None
    if common.have_triton():
        tk = common.kernels("triton")["softmax"]
    # checks: the benchmark shape and an odd one
    for m, n in ((1823, 4001), (1823, 4096), (32768, 4096)):
        x = torch.randn(m, n, device="cuda") * 4
        ref = torch.softmax(x, dim=1)
        for p in sm:
            if (p.shared > 64 or p.spec) and n != 4096:
                continue
            out = torch.full_like(x, float("nan"))
            softmax_call(p, x, out)()
            want = x if p.name in ("copy", "bcopy") else ref
            torch.testing.assert_close(out, want, msg=f"{p.name} {m}x{n}")
    for n in (1000003, 1 << 27):
        x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        for p in ad:
            if p.spec and n % 16:
                continue   # specialized as the benchmark's launch: n divisible by 16
            out = torch.full_like(x, float("nan"))
            add_call(p, x, y, out)()
            torch.testing.assert_close(out, x + y, msg=f"{p.name} {n}")
    torch.cuda.synchronize()
    print("checks passed")

    m, n = 32768, 4096
    x = torch.randn(m, n, device="cuda")
    out = torch.empty_like(x)
    calls = {"newt": lambda: common.launch_softmax(nk, x, out)}
    if tk is not None:
        calls["triton"] = lambda: common.launch_softmax(tk, x, out)
    calls["newt16w"] = lambda: nk[(m,)](out, x, x.stride(0), out.stride(0), n, BLOCK_SIZE=n,
                                        num_warps=16)
    calls.update({p.name: softmax_call(p, x, out) for p in sm})
    calls["torch.copy"] = lambda: out.copy_(x)
    table(f"softmax fp32 {m}x{n}", calls, 2 * m * n * 4, rounds)

    # layernorm fp16 32768x4096, 8 warps: newt's specialized kernel with and without the
    # immediate-offset addresses, next to newt's JIT launch and Triton
    xl = torch.randn(m, n, device="cuda", dtype=torch.float16)
    wl = torch.randn(n, device="cuda", dtype=torch.float16)
    bl = torch.randn(n, device="cuda", dtype=torch.float16)
    yl = torch.empty_like(xl)
    mean = torch.empty(m, device="cuda")
    rstd = torch.empty(m, device="cuda")

    def ln_call(p):
        vp = ctypes.c_void_p
        args = (vp(xl.data_ptr()), vp(yl.data_ptr()), vp(wl.data_ptr()), vp(bl.data_ptr()),
                vp(mean.data_ptr()), vp(rstd.data_ptr()), ctypes.c_int32(xl.stride(0)),
                ctypes.c_int32(n), ctypes.c_float(1e-5))
        return lambda: p(m, *args)

    ref = torch.nn.functional.layer_norm(xl, (n,), wl, bl, 1e-5)
    for p in ln.values():
        yl.fill_(float("nan"))
        ln_call(p)()
        torch.testing.assert_close(yl, ref, atol=2e-2, rtol=1e-2, msg=p.name)
    lk = common.newt_kernel("layernorm")
    calls = {"newt": lambda: common.launch_layernorm(lk, xl, wl, bl, yl, mean, rstd)}
    if common.have_triton():
        tl_ = common.kernels("triton")["layernorm"]
        calls["triton"] = lambda: common.launch_layernorm(tl_, xl, wl, bl, yl, mean, rstd)
    calls.update({k_: ln_call(p) for k_, p in ln.items()})
    table(f"layernorm fp16 {m}x{n}", calls, 2 * m * n * 2, rounds)

    na = 1 << 27
    xa, ya = torch.randn(na, device="cuda"), torch.randn(na, device="cuda")
    oa = torch.empty_like(xa)
    ak = common.newt_kernel("add")
    calls = {"newt": lambda: common.launch_add(ak, xa, ya, oa)}
    if common.have_triton():
        ta = common.kernels("triton")["add"]
        calls["triton"] = lambda: common.launch_add(ta, xa, ya, oa)
    calls.update({p.name: add_call(p, xa, ya, oa) for p in ad})
    table("vector add fp32 n=2^27", calls, 3 * na * 4, rounds)


if __name__ == "__main__":
    main()
