"""sm_80/sm_89 dot path: ldmatrix + mma.sync from swizzled shared memory, cp.async ring.

Where it sits: codegen (the Ampere/Ada half of `nl.dot`; it also runs on Hopper, compiled for
sm_90). `matmul_source(cfg)` produces a standalone CUDA C++ matmul kernel, like
`wgmma.matmul_source`, from the same staging pieces (`dot_tiles`).

Instructions per kind (every instruction's K spans exactly 32 bytes = two 16-byte chunks):
    f16, bf16 -> fp32   mma.sync.m16n8k16     A: ldmatrix.x4     B: ldmatrix.x4.trans (MN-major)
    tf32      -> fp32   mma.sync.m16n8k8      A: ldmatrix.x4     B: ldmatrix.x4 (K-major, gathered)
    s8        -> s32    mma.sync.m16n8k32     A: ldmatrix.x4     B: ldmatrix.x4 (K-major, gathered)
(ldmatrix on 32-bit or 8-bit data is still a b16 8x8 load: the per-lane pieces it returns are
exactly the tf32 / s8 fragments, see the PTX ISA's fragment tables.)

Schedule, D = num_stages - 1 tiles in flight ("consume first", one barrier per k-step):

    for kt in 0 .. KT + D - 1:
        if kt >= D: wait for tile kt-D (cp.async.wait_group D-1); barrier;
                    consume stage (kt-D) % S: per k-step, ldmatrix the NEXT step's fragments
                    into the other register buffer, then mma the current one
        if kt < KT: start copying tile kt into stage kt % S
                    (free: it held tile kt-S, consumed at kt-1, before this barrier)
"""
from __future__ import annotations

import dataclasses

from .dot_ptx import MMA_SYNC_HELPERS, PRELUDE, mma_sync_instr
from .dot_tiles import (ELEM_U, Operand, grouped_pid_src, load_tile_src,
                        store_tile_src, vec_ok_src)

KINDS = {"f16": 2, "bf16": 2, "tf32": 4, "s8": 1}
OUT_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "s32": 4}


@dataclasses.dataclass(frozen=True)
class MmaConfig:
    kind: str = "f16"
    out: str = "f16"
    bm: int = 128
    bn: int = 128
    bk: int = 64
    warps_m: int = 2
    warps_n: int = 4
    num_stages: int = 3
    group_m: int = 8

    @property
    def esize(self):
        return KINDS[self.kind]

    @property
    def kinst(self):       # K per instruction: 32 bytes of K
        return 32 // self.esize

    @property
    def num_warps(self):
        return self.warps_m * self.warps_n

    @property
    def b_kmajor(self):    # ldmatrix.trans exists only for 16-bit elements
        return self.esize != 2

    @property
    def name(self):
        return (f"newt_mma_{self.kind}_{self.out}_{self.bm}x{self.bn}x{self.bk}"
                f"_w{self.warps_m}x{self.warps_n}_s{self.num_stages}")

    @property
    def stage_bytes(self):
        return (self.bm + self.bn) * self.bk * self.esize

    @property
    def shared_bytes(self):
        c_tile = self.bm * (self.bn * OUT_BYTES[self.out] + 16)
        return max(self.num_stages * self.stage_bytes, c_tile) + 128

    def check(self):
        assert self.num_stages >= 2
        assert self.bm % (16 * self.warps_m) == 0 and self.bn % (16 * self.warps_n) == 0
        assert (self.bk * self.esize) % 32 == 0
        assert (self.bk * self.esize) % 128 == 0 or self.bk * self.esize < 128
        if not self.b_kmajor:
            assert (self.bn * self.esize) % 128 == 0


def matmul_source(cfg: MmaConfig) -> str:
    """Same kernel signature and launch rules as `wgmma.matmul_source`."""
    cfg.check()
    es, nt, S = cfg.esize, 32 * cfg.num_warps, cfg.num_stages
    bm, bn, bk = cfg.bm, cfg.bn, cfg.bk
    D = S - 1
    u, osz = ELEM_U[es], OUT_BYTES[cfg.out]
    ou = ELEM_U[osz]
    wm, wn = bm // cfg.warps_m, bn // cfg.warps_n
    mt, nt8 = wm // 16, wn // 8
    ksteps = bk * es // 32
    acc_t = "int" if cfg.kind == "s8" else "float"
    a_op = Operand("a", bm, bk, es)
    b_op = Operand("b", bn, bk, es, gather=True) if cfg.b_kmajor else Operand("b", bk, bn, es)
    a_bytes = a_op.nbytes
    pitch = bn * osz + 16
    # chunk placement inside a stage (panels of 128-byte rows; see dot_tiles)
    a_rows_panel = bm * 128
    b_rows_panel = (bn if cfg.b_kmajor else bk) * 128

    def place(row, chunk, panel_bytes, row_chunks):
        if row_chunks >= 8:
            return (f"(({chunk}) / 8) * {panel_bytes}u + (newt_u32)({row}) * 128u + "
                    f"(newt_u32)(((({chunk}) % 8) ^ (({row}) & 7)) * 16)")
        # rows shorter than 128 bytes: a 128-byte line holds 8/row_chunks rows
        per = 8 // row_chunks
        return (f"(newt_u32)({row}) * {row_chunks * 16}u + "
                f"(newt_u32)((({chunk}) ^ ((({row}) / {per}) & {row_chunks - 1})) * 16)")

    a_rc = bk * es // 16
    b_rc = a_rc if cfg.b_kmajor else bn * es // 16
    if a_rc < 8:
        raise NotImplementedError("mma path stages 128-byte rows (BK * esize >= 128)")

    a_addr = place("wrow + mi * 16 + (lane % 8) + ((lane / 8) & 1) * 8", "ks * 2 + (lane / 16)",
                   a_rows_panel, a_rc)
    if cfg.b_kmajor:
        b_addr = place("wcol + nj * 16 + (lane % 8) + (lane / 16) * 8",
                       "ks * 2 + ((lane / 8) & 1)", b_rows_panel, b_rc)
        b_ld = "newt_ldmatrix_x4"
    else:
        b_addr = place("ks * 16 + (lane % 8) + ((lane / 8) & 1) * 8",
                       "(wcol + nj * 16) / 8 + (lane / 16)", b_rows_panel, b_rc)
        b_ld = "newt_ldmatrix_x4_trans"

    if cfg.b_kmajor:
        b_issue = f"newt_load_b_issue(B, n0, kt * {bk}, N, K, sbn, sbk, breg);"
        b_commit = f"newt_load_b_commit(ring + (newt_u32)(kt % {S}) * {cfg.stage_bytes}u + {a_bytes}u, breg);"
        b_regs = f"uint4 breg[{b_op.chunks // nt}];"
        b_async = ""
    else:
        b_issue, b_commit, b_regs = "", "", ""
        b_async = (f"newt_load_b(ring + (newt_u32)(kt % {S}) * {cfg.stage_bytes}u + {a_bytes}u, "
                   f"B, kt * {bk}, n0, K, N, sbk, sbn, vec_b);")

    pack = {"f16": "newt_pack_f16", "bf16": "newt_pack_bf16"}.get(cfg.out)
    if pack:
        c_store = f"*(newt_u32*)(ct + r * {pitch} + c * 2) = {pack}(v0, v1);"
    elif cfg.out == "s32":
        c_store = f"*(int2*)(ct + r * {pitch} + c * 4) = make_int2(v0, v1);"
    else:
        c_store = f"*(float2*)(ct + r * {pitch} + c * 4) = make_float2(v0, v1);"

    body = f"""
extern "C" __global__ void __launch_bounds__({nt})
{cfg.name}(const {u}* __restrict__ A, const {u}* __restrict__ B, {ou}* __restrict__ C,
           int M, int N, int K, long long sam, long long sak, long long sbk, long long sbn,
           long long scm, long long scn) {{
  extern __shared__ __align__(128) unsigned char smem[];
  const newt_u32 ring = newt_smem_addr(smem);
  {grouped_pid_src(bm, bn, cfg.group_m)}
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wrow = (warp / {cfg.warps_n}) * {wm}, wcol = (warp % {cfg.warps_n}) * {wn};
  const int KT = (K + {bk - 1}) / {bk};
  const bool vec_a = {vec_ok_src(a_op, "A", "sam", "sak")};
  const bool vec_b = {vec_ok_src(b_op, "B", "sbk", "sbn")};
  {acc_t} acc[{mt}][{nt8}][4];
  #pragma unroll
  for (int i = 0; i < {mt}; ++i)
    #pragma unroll
    for (int j = 0; j < {nt8}; ++j)
      #pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0;
  newt_u32 fa[2][{mt}][4], fb[2][{nt8}][2];
  {b_regs}

  for (int kt = 0; kt < KT + {D}; ++kt) {{
    if (kt < KT) {{ {b_issue} }}
    if (kt >= {D}) {{
      newt_cp_async_wait<{D - 1}>();
      __syncthreads();
      const newt_u32 sa = ring + (newt_u32)((kt - {D}) % {S}) * {cfg.stage_bytes}u;
      const newt_u32 sb = sa + {a_bytes}u;
      // fragments of k-step kk into buffer kk & 1 (double-buffered: step kk+1 loads while
      // step kk multiplies)
      #define NEWT_LOAD_FRAGS(KS) {{ const int ks = (KS); \\
        _Pragma("unroll") for (int mi = 0; mi < {mt}; ++mi) \\
          newt_ldmatrix_x4(sa + {a_addr}, fa[ks & 1][mi]); \\
        _Pragma("unroll") for (int nj = 0; nj < {nt8 // 2}; ++nj) {{ \\
          newt_u32 t4[4]; {b_ld}(sb + {b_addr}, t4); \\
          fb[ks & 1][2 * nj][0] = t4[0]; fb[ks & 1][2 * nj][1] = t4[1]; \\
          fb[ks & 1][2 * nj + 1][0] = t4[2]; fb[ks & 1][2 * nj + 1][1] = t4[3]; }} }}
      NEWT_LOAD_FRAGS(0)
      #pragma unroll
      for (int kk = 0; kk < {ksteps}; ++kk) {{
        if (kk + 1 < {ksteps}) {{ NEWT_LOAD_FRAGS(kk + 1) }}
        #pragma unroll
        for (int i = 0; i < {mt}; ++i)
          #pragma unroll
          for (int j = 0; j < {nt8}; ++j)
            newt_mma_{cfg.kind}(acc[i][j], fa[kk & 1][i], fb[kk & 1][j]);
      }}
      #undef NEWT_LOAD_FRAGS
    }}
    if (kt < KT) {{
      newt_load_a(ring + (newt_u32)(kt % {S}) * {cfg.stage_bytes}u, A, m0, kt * {bk}, M, K,
                  sam, sak, vec_a);
      {b_async}
      {b_commit}
    }}
    newt_cp_async_commit();
  }}
  newt_cp_async_wait<0>();
  __syncthreads();

  // epilogue: m16n8 C fragments -> row-major staged tile -> coalesced masked stores
  unsigned char* ct = smem;
  #pragma unroll
  for (int i = 0; i < {mt}; ++i)
    #pragma unroll
    for (int j = 0; j < {nt8}; ++j)
      #pragma unroll
      for (int h = 0; h < 2; ++h) {{
        int r = wrow + i * 16 + lane / 4 + h * 8, c = wcol + j * 8 + (lane % 4) * 2;
        {acc_t} v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
        {c_store}
      }}
  __syncthreads();
  newt_store_c(ct, C, m0, n0, M, N, scm, scn);
}}
"""
    parts = [PRELUDE, MMA_SYNC_HELPERS, mma_sync_instr(cfg.kind),
             load_tile_src(a_op, nt, "newt_load_a"), load_tile_src(b_op, nt, "newt_load_b"),
             store_tile_src(bm, bn, osz, pitch, nt, "newt_store_c"), body]
    return "\n".join(parts)
