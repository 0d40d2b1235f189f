"""sm_90a dot path: wgmma.mma_async from swizzled shared memory, pipelined with a cp.async ring.

Where it sits: codegen (the Hopper half of `nl.dot`). `matmul_source(cfg)` produces a complete,
standalone CUDA C++ matmul kernel C = A @ B (+ grouped program ordering, masked tails, any
strides); the same pieces (`dot_ptx`, `dot_tiles`) are what the compiler's dot lowering emits
inside a user's kernel. The standalone form exists so the tensor-core path can be compiled,
measured and tested on its own (benchmarks/matmul_proto.py, tests/test_dot_codegen.py).

Schedule (one CTA = `num_warps/4` warpgroups, each owning BM/WG rows of the BM x BN tile):

    for kt in 0 .. KT + D - 1:                 D = num_stages - 2 (tiles in flight ahead)
        if kt >= D: wait for tile kt-D (cp.async.wait_group D-1), fence.proxy.async, barrier
        if kt < KT: start copying tile kt into stage kt % S        (the user's own loads)
        if kt >= D: wgmma over stage (kt-D) % S; commit; wgmma.wait_group 1

"Consume the tile started D iterations ago" is the deferred-consumption ring: the copies of
iteration kt use only addresses of iteration kt. Why D = S-2 and not S-1: wgmma reads shared
memory asynchronously; after `wait_group 1` only the group before the newest is known finished,
and the barrier of iteration kt proves it for every warp only up to iteration kt-2. Stage
kt % S last held tile kt-S, consumed at iteration kt-S+D = kt-2: free. Accumulators stay in
registers (the m64nNk16 fragment, see `AccLayout` in newt/passes/dot.py); the epilogue stages them through shared
memory for 16-byte coalesced stores.

Options (off by default until a GPU run measures them; the CPU emulator of
tests/test_dot_tma.py checks both against torch):
  tma=True          operand tiles arrive as TMA boxes (newt/codegen/tma.py) completing on a
                    "full" mbarrier per stage; warps release a stage on an "empty" mbarrier once
                    their wgmma reading it retired, so the K loop has no CTA barrier and one
                    thread issues all copies. The kernel then takes two CUtensorMap parameters
                    (newt/runtime/tensormap.py builds and caches them); operands must have
                    16-byte aligned rows (tensormap.can_map), others take the cp.async kernel.
  epilogue="regs"   results go to global memory straight from the accumulator fragment (pairs
                    of columns per thread), without the staged tile and its two barriers.
"""
from __future__ import annotations

import dataclasses

from .dot_ptx import PRELUDE, WGMMA_HELPERS, wgmma_instr
from .dot_tiles import (ELEM_U, Operand, grouped_pid_src, load_tile_src,
                        store_tile_src, vec_ok_src)
from ..ir.schedule import tile_boxes
from .tma import TMA_HELPERS

KINDS = {  # input kind -> (element bytes, k per instruction)
    "f16": (2, 16), "bf16": (2, 16), "tf32": (4, 8),
}
OUT_BYTES = {"f16": 2, "bf16": 2, "f32": 4}


@dataclasses.dataclass(frozen=True)
class WgmmaConfig:
    kind: str = "f16"          # input kind: f16 | bf16 | tf32
    out: str = "f16"           # output element: f16 | bf16 | f32
    bm: int = 128
    bn: int = 256
    bk: int = 64
    num_warps: int = 8         # 4 per warpgroup; warpgroups split BM
    num_stages: int = 4
    group_m: int = 8
    swap_lbo_sbo: bool = False  # debugging aid for the MN-major descriptor
    late_loads: bool = False    # issue the tensor-core work before this iteration's copies
    tma: bool = False           # operand tiles by TMA boxes + mbarriers (see tma.py)
    epilogue: str = "smem"      # "smem": staged, 16-byte stores; "regs": from the fragment

    @property
    def esize(self):
        return KINDS[self.kind][0]

    @property
    def kinst(self):
        return KINDS[self.kind][1]

    @property
    def n_wg(self):
        return self.num_warps // 4

    @property
    def b_kmajor(self):
        # wgmma takes MN-major (transposed) B only for 16-bit inputs; tf32 B is staged K-major.
        return self.kind == "tf32"

    @property
    def name(self):
        return (f"newt_wgmma_{self.kind}_{self.out}_{self.bm}x{self.bn}x{self.bk}"
                f"_w{self.num_warps}_s{self.num_stages}" + ("_swap" if self.swap_lbo_sbo else "")
                + ("_late" if self.late_loads else "") + ("_tma" if self.tma else "")
                + ("_regs" if self.epilogue == "regs" else ""))

    def check(self):
        assert self.num_warps % 4 == 0 and self.num_stages >= 3
        assert self.bm % (64 * self.n_wg) == 0, "each warpgroup needs whole m64 sub-tiles"
        assert self.bn % 8 == 0 and 8 <= self.bn <= 256
        assert (self.bk * self.esize) % 128 == 0, "BK must fill 128-byte rows"
        if not self.b_kmajor:
            assert (self.bn * self.esize) % 128 == 0, "MN-major B needs 128-byte panels"
        assert self.epilogue in ("smem", "regs")
        assert not (self.tma and self.b_kmajor), "TMA cannot transpose B into K-major (tf32)"
        assert not (self.tma and self.late_loads)

    @property
    def stage_bytes(self):
        return (self.bm + self.bn) * self.bk * self.esize

    @property
    def barrier_offset(self):
        """Byte offset of the TMA variant's mbarriers (full[S], then empty[S]) in the
        aligned shared memory: after the ring and the epilogue's staged tile."""
        c_tile = self.bm * (self.bn * OUT_BYTES[self.out] + 16) if self.epilogue == "smem" else 0
        return -(-max(self.num_stages * self.stage_bytes, c_tile) // 16) * 16

    @property
    def shared_bytes(self):
        bars = 16 * self.num_stages if self.tma else 0
        return self.barrier_offset + bars + 1024   # + alignment slack


def matmul_source(cfg: WgmmaConfig) -> str:
    """Standalone kernel `extern "C" __global__ void <cfg.name>(A, B, C, M, N, K, sam, sak,
    sbk, sbn, scm, scn)`; grid = cdiv(M,BM)*cdiv(N,BN), block = 32*num_warps,
    dynamic shared memory = cfg.shared_bytes."""
    cfg.check()
    es, ki, nt = cfg.esize, cfg.kinst, 32 * cfg.num_warps
    bm, bn, bk, S = cfg.bm, cfg.bn, cfg.bk, cfg.num_stages
    D = S - 2
    u = ELEM_U[es]
    osz = OUT_BYTES[cfg.out]
    ou = ELEM_U[osz]
    a_op = Operand("a", bm, bk, es)
    if cfg.b_kmajor:
        b_op = Operand("b", bn, bk, es, gather=True)
    else:
        b_op = Operand("b", bk, bn, es)
    msub = bm // cfg.n_wg // 64        # m64 instructions per warpgroup per k-step
    nacc = bn // 2                     # accumulator registers per m64 sub-tile
    pitch = bn * osz + 16              # epilogue staging row pitch (16-byte pad: no conflicts)
    a_bytes = a_op.nbytes
    lbo, sbo = (bk * 128, 1024) if not cfg.swap_lbo_sbo else (1024, bk * 128)

    parts = [PRELUDE, WGMMA_HELPERS, wgmma_instr(cfg.kind, bn, not cfg.b_kmajor, "newt_wgmma"),
             load_tile_src(a_op, nt, "newt_load_a"),
             load_tile_src(b_op, nt, "newt_load_b"),
             store_tile_src(bm, bn, osz, pitch, nt, "newt_store_c")]

    # descriptors of k-step kk (elements kk*ki .. +ki) for this warpgroup's sub-tile ms
    a_desc = ("newt_wgmma_desc(stage + (newt_u32)((kk * {ki} * {es}) / 128) * {ap}u + "
              "(newt_u32)(wg_row + ms * 64) * 128u + (newt_u32)((kk * {ki} * {es}) % 128), 16, 1024)"
              ).format(ki=ki, es=es, ap=bm * 128)
    if cfg.b_kmajor:
        b_desc = ("newt_wgmma_desc(stage + {ab}u + (newt_u32)((kk * {ki} * {es}) / 128) * {bp}u"
                  " + (newt_u32)((kk * {ki} * {es}) % 128), 16, 1024)"
                  ).format(ab=a_bytes, ki=ki, es=es, bp=bn * 128)
    else:
        b_desc = ("newt_wgmma_desc(stage + {ab}u + (newt_u32)(kk * {ki}) * 128u, {lbo}, {sbo})"
                  ).format(ab=a_bytes, ki=ki, lbo=lbo, sbo=sbo)

    if cfg.b_kmajor:
        b_issue = ("newt_load_b_issue(B, n0, kt * {bk}, N, K, sbn, sbk, breg);"
                   .format(bk=bk))
        b_commit = "newt_load_b_commit(ring + (newt_u32)(kt % {S}) * {sb}u + {ab}u, breg);".format(
            S=S, sb=cfg.stage_bytes, ab=a_bytes)
        b_regs = f"uint4 breg[{b_op.chunks // nt}];"
    else:
        b_issue = ("newt_load_b(ring + (newt_u32)(kt % {S}) * {sb}u + {ab}u, B, kt * {bk}, n0, "
                   "K, N, sbk, sbn, vec_b);").format(S=S, sb=cfg.stage_bytes, ab=a_bytes, bk=bk)
        b_commit, b_regs = "", ""

    pack = {"f16": "newt_pack_f16", "bf16": "newt_pack_bf16"}.get(cfg.out)
    if pack:
        c_store = (f"*(newt_u32*)(ct + r * {pitch} + c * 2) = {pack}(acc[ms][4*i+h*2], "
                   "acc[ms][4*i+h*2+1]);")
    else:
        c_store = (f"*(float2*)(ct + r * {pitch} + c * 4) = make_float2(acc[ms][4*i+h*2], "
                   "acc[ms][4*i+h*2+1]);")

    # this iteration's copies (stage kt % S: free, see the module docstring); with late_loads
    # they go after the wgmma issue, which reads another stage, so the tensor cores start first
    late = cfg.late_loads and not cfg.b_kmajor
    copies = f"""if (kt < KT) {{
      newt_load_a(ring + (newt_u32)(kt % {S}) * {cfg.stage_bytes}u, A, m0, kt * {bk}, M, K,
                  sam, sak, vec_a);
      {b_issue}
    }}
    newt_cp_async_commit();"""
    acc_zero = f"""float acc[{msub}][{nacc}];
  #pragma unroll
  for (int ms = 0; ms < {msub}; ++ms)
    #pragma unroll
    for (int i = 0; i < {nacc}; ++i) acc[ms][i] = 0.f;"""
    issue = f"""newt_wgmma_fence();
      #pragma unroll
      for (int kk = 0; kk < {bk // ki}; ++kk) {{
        #pragma unroll
        for (int ms = 0; ms < {msub}; ++ms)
          newt_wgmma(acc[ms], {a_desc}, {b_desc}, 1);
      }}
      newt_wgmma_commit();"""
    if cfg.tma:
        parts.append(TMA_HELPERS)
        params = (", const __grid_constant__ newt_tmap tma_a, "
                  "const __grid_constant__ newt_tmap tma_b")
        main = _tma_loop(cfg, issue, a_bytes)
    else:
        params = ""
        main = f"""const bool vec_a = {vec_ok_src(a_op, "A", "sam", "sak")};
  const bool vec_b = {vec_ok_src(b_op, "B", "sbk", "sbn")};
  {b_regs}
  for (int kt = 0; kt < KT + {D}; ++kt) {{
    if (kt >= {D}) {{
      newt_cp_async_wait<{D - 1}>();
      newt_fence_proxy_async();
      __syncthreads();
    }}
    {copies if not late else ""}
    if (kt >= {D}) {{
      const newt_u32 stage = ring + (newt_u32)((kt - {D}) % {S}) * {cfg.stage_bytes}u;
      {issue}
    }}
    {copies if late else ""}
    if (kt < KT) {{ {b_commit} }}
    if (kt >= {D}) newt_wgmma_wait<1>();
  }}
  newt_wgmma_wait<0>();
  newt_cp_async_wait<0>();"""
    if cfg.epilogue == "regs":
        epilogue = _regs_epilogue(cfg)
    else:
        # the async proxy's reads of the ring are over before the staged tile reuses it
        epilogue = f"""newt_fence_proxy_async();
  __syncthreads();
  // accumulator fragment -> row-major staged tile -> coalesced masked stores
  unsigned char* ct = smem;
  #pragma unroll
  for (int ms = 0; ms < {msub}; ++ms)
    #pragma unroll
    for (int i = 0; i < {bn // 8}; ++i)
      #pragma unroll
      for (int h = 0; h < 2; ++h) {{
        int r = wg_row + ms * 64 + warp_in_wg * 16 + lane / 4 + h * 8;
        int c = i * 8 + (lane % 4) * 2;
        {c_store}
      }}
  __syncthreads();
  newt_store_c(ct, C, m0, n0, M, N, scm, scn);"""
    parts.append(f"""
extern "C" __global__ void __launch_bounds__({nt}, 1)
{cfg.name}(const {u}* __restrict__ A, const {u}* __restrict__ B, {ou}* __restrict__ C,
           int M, int N, int K, long long sam, long long sak, long long sbk, long long sbn,
           long long scm, long long scn{params}) {{
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = (unsigned char*)(((unsigned long long)smem_raw + 1023) & ~1023ull);
  const newt_u32 ring = newt_smem_addr(smem);
  {grouped_pid_src(bm, bn, cfg.group_m)}
  const int wg = threadIdx.x / 128;
  const int wg_row = wg * {bm // cfg.n_wg};
  const int lane = threadIdx.x % 32, warp_in_wg = (threadIdx.x / 32) % 4;
  const int KT = (K + {bk - 1}) / {bk};
  {acc_zero}
  {main}
  {epilogue}
}}
""")
    return "\n".join(parts)


def _tma_loop(cfg: WgmmaConfig, issue: str, a_bytes: int) -> str:
    """The main loop with TMA boxes and mbarriers. Per stage s: full[s] (1 arrival + the
    stage's bytes) and empty[s] (one arrival per warp once its wgmma reading s retired).

        kt < KT, thread 0:  wait empty[kt % S] (tile kt-S retired by every warp); arm full;
                            issue the boxes of tile kt
        kt >= D:            c = kt - D: wait full[c % S]; wgmma; commit; wait_group 1 (the
                            group of tile c-1 is retired); each warp arrives on empty[(c-1) % S]

    D = S - 2 as in the cp.async ring: thread 0 waits at iteration kt for arrivals made at
    iteration kt-1, which every warp (its own included) has passed, so nothing waits on
    itself; no CTA barrier is left in the loop."""
    S, D, bm, bn, bk, es = cfg.num_stages, cfg.num_stages - 2, cfg.bm, cfg.bn, cfg.bk, cfg.esize
    box_a, offs_a = tile_boxes(bm, bk, es)
    box_b, offs_b = tile_boxes(bk, bn, es)
    assert box_a.nbytes * len(offs_a) + box_b.nbytes * len(offs_b) == cfg.stage_bytes
    loads = [f"newt_tma_load_2d(st + {o}u, &tma_a, kt * {bk} + {i}, m0, fb);" for i, o in offs_a]
    loads += [f"newt_tma_load_2d(st + {a_bytes + o}u, &tma_b, n0 + {i}, kt * {bk}, fb);"
              for i, o in offs_b]
    nl = "\n      "
    return f"""const newt_u32 full = ring + {cfg.barrier_offset}u, empty = full + {8 * S}u;
  if (threadIdx.x == 0) {{
    for (int s = 0; s < {S}; ++s) {{
      newt_mbar_init(full + 8 * s, 1);
      newt_mbar_init(empty + 8 * s, {cfg.num_warps});
    }}
    newt_fence_mbar_init();
  }}
  __syncthreads();
  for (int kt = 0; kt < KT + {D}; ++kt) {{
    if (threadIdx.x == 0 && kt < KT) {{
      const int s = kt % {S};
      if (kt >= {S}) newt_mbar_wait(empty + 8 * s, ((kt / {S}) - 1) & 1);
      const newt_u32 fb = full + 8 * s, st = ring + (newt_u32)s * {cfg.stage_bytes}u;
      newt_mbar_expect_tx(fb, {cfg.stage_bytes}u);
      {nl.join(loads)}
    }}
    __syncwarp();   // warp 0 converged again before the .aligned wgmma instructions
    if (kt >= {D}) {{
      const int c = kt - {D};
      newt_mbar_wait(full + 8 * (c % {S}), (c / {S}) & 1);
      const newt_u32 stage = ring + (newt_u32)(c % {S}) * {cfg.stage_bytes}u;
      {issue}
      newt_wgmma_wait<1>();
      __syncwarp();
      if (c >= 1 && lane == 0) newt_mbar_arrive(empty + 8 * ((c - 1) % {S}));
    }}
  }}
  newt_wgmma_wait<0>();
  __syncthreads();   // every warp is past its last wgmma before the ring is reused"""


def _regs_epilogue(cfg: WgmmaConfig) -> str:
    """Stores straight from the accumulator fragment: each thread writes its pairs of
    consecutive columns (4 bytes in 16-bit, 8 in fp32) where they are contiguous and aligned,
    element by element otherwise. No shared memory, no barrier."""
    osz = OUT_BYTES[cfg.out]
    ou = ELEM_U[osz]
    pack = {"f16": "newt_pack_f16", "bf16": "newt_pack_bf16"}.get(cfg.out)
    if pack:
        pair = f"*(newt_u32*)p = {pack}(x0, x1);"
        st0, st1 = (f"p[0] = (newt_u16){pack}(x0, x0);", f"p[scn] = (newt_u16){pack}(x1, x1);")
    else:
        pair = "*(float2*)p = make_float2(x0, x1);"
        st0, st1 = "*(float*)&p[0] = x0;", "*(float*)&p[scn] = x1;"
    return f"""// fragment -> global: rows lane/4 (+8), columns 2*(lane%4) (+1) of each 8-column block
  const bool vec_c = scn == 1 && (scm % 2) == 0 && (((unsigned long long)C) % {2 * osz}) == 0;
  #pragma unroll
  for (int ms = 0; ms < {cfg.bm // cfg.n_wg // 64}; ++ms)
    #pragma unroll
    for (int h = 0; h < 2; ++h) {{
      const int r = m0 + wg_row + ms * 64 + warp_in_wg * 16 + lane / 4 + h * 8;
      if (r >= M) continue;
      {ou}* row = C + (long long)r * scm;
      #pragma unroll
      for (int i = 0; i < {cfg.bn // 8}; ++i) {{
        const int c = n0 + i * 8 + (lane % 4) * 2;
        const float x0 = acc[ms][4 * i + 2 * h], x1 = acc[ms][4 * i + 2 * h + 1];
        {ou}* p = row + (long long)c * scn;
        if (vec_c && c + 1 < N) {{ {pair} }}
        else {{
          if (c < N) {st0}
          if (c + 1 < N) {st1}
        }}
      }}
    }}"""
