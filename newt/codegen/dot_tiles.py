"""Operand staging and epilogue pieces shared by the mma.sync and wgmma matmul generators.

Where it sits: codegen, below `mma.py` and `wgmma.py`. Consumes a `TileConfig` (tile sizes,
element sizes, thread count, which operands are K-major); produces CUDA C++ snippets:

  load_tile_src(...)   copy one operand tile (global -> one stage of the shared-memory ring).
                       Each thread owns fixed 16-byte chunks. Per chunk, at run time:
                         all elements in bounds, consecutive and 16-byte aligned -> cp.async 16
                         consecutive and aligned but the tail is out of bounds -> cp.async with
                             src-size < 16 (the hardware zero-fills the rest)
                         nothing in bounds -> nothing read; zeros stored
                         otherwise (odd strides, transposed operands) -> element-wise gather
                       A "gather" operand (tf32 B, stored K-major) is always gathered, in two
                       phases: global loads into registers first, shared stores later, so that
                       the load latency hides behind the tensor-core work issued in between.
  store_tile_src(...)  the epilogue: accumulators (already converted, staged in shared memory in
                       row-major order) -> global, 16-byte stores where the run-time check allows.

Shared-memory tile format (both paths): rows of 128 bytes ("panels" of 128 / esize elements
along the contiguous dimension); 16-byte chunk c of row r sits at r*128 + ((c ^ (r % 8)) * 16).
That is the XOR swizzle that keeps ldmatrix conflict-free and is wgmma's 128-byte swizzle mode.
A tile wider than one panel is a sequence of panels, each rows*128 bytes.
"""
from __future__ import annotations

import dataclasses

ELEM_U = {1: "unsigned char", 2: "newt_u16", 4: "newt_u32"}


@dataclasses.dataclass(frozen=True)
class Operand:
    """One operand tile as it is staged: `rows` x `cols` elements, `cols` being the dimension
    that is contiguous in shared memory (K for a K-major operand, M or N for an MN-major one)."""
    name: str          # "a" | "b"
    rows: int
    cols: int
    esize: int         # bytes per element
    gather: bool = False   # two-phase register-staged gather (chunk runs along a strided dim)

    @property
    def vec(self) -> int:           # elements per 16-byte chunk
        return 16 // self.esize

    @property
    def row_chunks(self) -> int:
        return self.cols // self.vec

    @property
    def chunks(self) -> int:
        return self.rows * self.row_chunks

    @property
    def panel_cols(self) -> int:    # elements per 128-byte panel row
        return 128 // self.esize

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.esize


def load_tile_src(op: Operand, nthreads: int, fn: str) -> str:
    """A device function `fn(smem_stage_addr, base, row0, col0, nrows, ncols, srow, scol,
    [regs])` copying tile rows [row0, row0+rows) x cols [col0, col0+cols) of the global operand
    `base[row*srow + col*scol]` (bounds nrows x ncols) into the swizzled stage.

    For a gather operand, two functions: `fn_issue(... , uint4* regs)` loads into registers and
    `fn_commit(smem_stage_addr, regs)` stores them."""
    assert op.chunks % nthreads == 0, (op, nthreads)
    per = op.chunks // nthreads
    u = ELEM_U[op.esize]
    rc = op.row_chunks
    panel_chunks = 128 // 16
    panel_bytes = op.rows * 128

    def place(rexpr, cexpr):
        return (f"(({cexpr}) / {panel_chunks}) * {panel_bytes}u + "
                f"(newt_u32)({rexpr}) * 128u + "
                f"(newt_u32)(((({cexpr}) % {panel_chunks}) ^ (({rexpr}) & 7)) * 16)")

    if op.gather:
        # thread -> row fastest, so one warp's loads of one element index are coalesced along
        # the strided operand's contiguous dimension (the rows here), and stores hit 8 rows.
        return f"""
NEWT_DEV void {fn}_issue(const {u}* base, int row0, int col0, int nrows, int ncols,
                          long long srow, long long scol, uint4* regs) {{
  #pragma unroll
  for (int j = 0; j < {per}; ++j) {{
    int c = threadIdx.x + j * {nthreads};
    int r = c % {op.rows}, cc = c / {op.rows};
    int gr = row0 + r, gc = col0 + cc * {op.vec};
    union {{ uint4 v; {u} e[{op.vec}]; }} t;
    const {u}* p = base + (long long)gr * srow + (long long)gc * scol;
    #pragma unroll
    for (int e = 0; e < {op.vec}; ++e)
      t.e[e] = (gr < nrows && gc + e < ncols) ? p[e * scol] : ({u})0;
    regs[j] = t.v;
  }}
}}
NEWT_DEV void {fn}_commit(newt_u32 stage, const uint4* regs) {{
  #pragma unroll
  for (int j = 0; j < {per}; ++j) {{
    int c = threadIdx.x + j * {nthreads};
    int r = c % {op.rows}, cc = c / {op.rows};
    newt_st_shared_v4(stage + {place('r', 'cc')}, regs[j]);
  }}
}}
"""
    rs = nthreads // rc if nthreads % rc == 0 else 0     # rows between a thread's chunks
    assert rs and rs % 8 == 0, f"chunk map needs whole rows per thread step: {op}, {nthreads}"
    # Each thread owns column chunk `cc` of rows r0, r0+RS, r0+2RS, ...: with RS a multiple of 8
    # the swizzle term (row & 7) is the same for all of them, so every destination is dst0 plus
    # a constant and every source is p0 plus j * (RS * srow): a couple of instructions a chunk.
    return f"""
NEWT_DEV void {fn}(newt_u32 stage, const {u}* base, int row0, int col0, int nrows, int ncols,
                    long long srow, long long scol, bool vec_ok) {{
  const int r0 = threadIdx.x / {rc}, cc = threadIdx.x % {rc};
  const newt_u32 dst0 = stage + {place('r0', 'cc')};
  const {u}* p0 = base + (long long)(row0 + r0) * srow + (long long)(col0 + cc * {op.vec}) * scol;
  const long long pstep = {rs}ll * srow;
  if (vec_ok && row0 + {op.rows} <= nrows && col0 + {op.cols} <= ncols) {{
    // interior tile, contiguous and aligned rows: one 16-byte cp.async per chunk
    #pragma unroll
    for (int j = 0; j < {per}; ++j) newt_cp_async16(dst0 + j * {rs * 128}u, p0 + j * pstep, 16);
    return;
  }}
  #pragma unroll
  for (int j = 0; j < {per}; ++j) {{
    const newt_u32 dst = dst0 + j * {rs * 128}u;
    const {u}* p = p0 + j * pstep;
    int gr = row0 + r0 + j * {rs}, gc = col0 + cc * {op.vec};
    int nvalid = gr < nrows ? min(max(ncols - gc, 0), {op.vec}) : 0;
    if (scol == 1 && (((unsigned long long)p) & 15) == 0 && nvalid > 0) {{
      newt_cp_async16(dst, p, nvalid * {op.esize});
    }} else if (nvalid == 0) {{
      newt_st_shared_v4(dst, make_uint4(0, 0, 0, 0));
    }} else {{
      union {{ uint4 v; {u} e[{op.vec}]; }} t;
      #pragma unroll
      for (int e = 0; e < {op.vec}; ++e) t.e[e] = e < nvalid ? p[e * scol] : ({u})0;
      newt_st_shared_v4(dst, t.v);
    }}
  }}
}}
"""


def vec_ok_src(op: Operand, base: str, srow: str, scol: str) -> str:
    """C expression: the operand's rows are contiguous and every chunk start 16-byte aligned
    (tile column offsets are multiples of the chunk width), so interior tiles take the fast
    path. Computed once per kernel."""
    return (f"({scol} == 1 && (((unsigned long long){base}) & 15) == 0 && "
            f"({srow} % {op.vec}) == 0)")


def store_tile_src(rows: int, cols: int, osize: int, pitch: int, nthreads: int, fn: str) -> str:
    """Device function `fn(smem_tile_addr_generic, out, row0, col0, nrows, ncols, srow, scol)`:
    a row-major staged tile (row pitch `pitch` bytes) -> global, masked, 16 bytes at a time where
    the columns are consecutive, aligned and in bounds."""
    u = ELEM_U[osize]
    vec = 16 // osize
    rc = cols // vec
    nchunks = rows * rc
    per = (nchunks + nthreads - 1) // nthreads
    return f"""
NEWT_DEV void {fn}(const unsigned char* tile, {u}* out, int row0, int col0, int nrows,
                    int ncols, long long srow, long long scol) {{
  #pragma unroll 4
  for (int j = 0; j < {per}; ++j) {{
    int c = threadIdx.x + j * {nthreads};
    if ({nchunks % nthreads != 0 and 'c >= ' + str(nchunks) or 'false'}) break;
    int r = c / {rc}, cc = c % {rc};
    int gr = row0 + r, gc = col0 + cc * {vec};
    if (gr >= nrows) continue;
    uint4 v = *(const uint4*)(tile + r * {pitch} + cc * 16);
    {u}* p = out + (long long)gr * srow + (long long)gc * scol;
    if (scol == 1 && gc + {vec} <= ncols && (((unsigned long long)p) & 15) == 0) {{
      *(uint4*)p = v;
    }} else {{
      union {{ uint4 v; {u} e[{vec}]; }} t; t.v = v;
      #pragma unroll
      for (int e = 0; e < {vec}; ++e) if (gc + e < ncols) p[e * scol] = t.e[e];
    }}
  }}
}}
"""


def grouped_pid_src(bm: int, bn: int, group_m: int) -> str:
    """Program id -> (pid_m, pid_n) with GROUP_M-row super-grouping (the Triton tutorial's L2
    friendly ordering), as statements defining `m0`, `n0`."""
    return f"""
  int num_pid_m = (M + {bm - 1}) / {bm}, num_pid_n = (N + {bn - 1}) / {bn};
  int pid = blockIdx.x;
  int in_group = {group_m} * num_pid_n;
  int first_m = (pid / in_group) * {group_m};
  int gsize = min(num_pid_m - first_m, {group_m});
  int pid_m = first_m + (pid % in_group) % gsize;
  int pid_n = (pid % in_group) / gsize;
  int m0 = pid_m * {bm}, n0 = pid_n * {bn};
"""
