"""nl.join / split / interleave / x.split() / x.T / flip / gather / sort / topk / histogram /
assume, Python's min / max / print on blocks, nl.range options and nl.inline_asm_elementwise,
against torch on the interpreter, the CPU emulation of the generated code and the GPU (odd
sizes under masks); the kernels compiled with NVRTC for sm_80 and sm_90a."""
import pytest
import torch

import newt
import newt.language as nl
from lang_helpers import NVRTC_ARCHS, nan_like, nvrtc, where  # noqa: F401


@newt.jit
def join_kernel(x_ptr, y_ptr, j_ptr, i_ptr, a_ptr, b_ptr, t_ptr, s_ptr, M, N,
                BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    x = nl.load(x_ptr + offs, mask=mask)
    y = nl.load(y_ptr + offs, mask=mask)
    j = nl.join(x, y)                                             # [BM, BN, 2]
    nl.store(j_ptr + offs[:, :, None] * 2 + nl.arange(0, 2)[None, None, :], j,
             mask=mask[:, :, None])
    il = nl.interleave(x, y)                                      # [BM, 2*BN]
    c2 = nl.arange(0, 2 * BN)
    nl.store(i_ptr + rm[:, None] * 2 * N + c2[None, :], il,
             mask=(rm[:, None] < M) & (c2[None, :] < 2 * N))
    a, b = j.split()
    nl.store(a_ptr + offs, b * 2.0 + a, mask=mask)                # x + 2y
    p, q = nl.split(nl.join(x, 1.5))                              # a scalar joined
    nl.store(b_ptr + offs, p - q, mask=mask)
    nl.store(t_ptr + rn[:, None] * M + rm[None, :], x.T, mask=mask.T)
    u, v = nl.split(nl.join(nl.sum(x), nl.max(y)))                # 1-D split: scalars
    nl.store(s_ptr, u)
    nl.store(s_ptr + 1, v)


def test_join_split_interleave_transpose(where):
    M, N = 5, 7
    x, y = torch.randn(M, N), torch.randn(M, N)
    outs = [nan_like(s, device=where.device) for s in
            [(M, N, 2), (M, 2 * N), (M, N), (M, N), (N, M), (2,)]]
    where(join_kernel, (1,), where.t(x), where.t(y), *outs, M, N, BM=8, BN=8)
    j, il, a, b, t, s = [o.cpu() for o in outs]
    assert torch.equal(j, torch.stack([x, y], -1))
    assert torch.equal(il, torch.stack([x, y], -1).reshape(M, 2 * N))
    torch.testing.assert_close(a, x + 2 * y)
    torch.testing.assert_close(b, x - 1.5)
    assert torch.equal(t, x.T)
    torch.testing.assert_close(s, torch.stack([x.sum(), y.max()]), rtol=1e-5, atol=1e-5)


@newt.jit
def gather_kernel(x_ptr, i_ptr, g_ptr, f_ptr, M, N, AXIS: nl.constexpr, BM: nl.constexpr,
                  BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    x = nl.load(x_ptr + offs, mask=mask, other=0.0)
    idx = nl.load(i_ptr + offs, mask=mask, other=0)
    nl.store(g_ptr + offs, nl.gather(x, idx, AXIS), mask=mask)
    nl.store(f_ptr + offs, nl.flip(x, AXIS), mask=mask)


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_and_flip(where, axis):
    M, N, BM, BN = 6, 16, 8, 16
    x = torch.randn(M, N)
    idx = torch.randint(0, M if axis == 0 else N, (M, N), dtype=torch.int32)
    g, f = nan_like((M, N), device=where.device), nan_like((M, N), device=where.device)
    where(gather_kernel, (1,), where.t(x), where.t(idx), g, f, M, N, AXIS=axis, BM=BM, BN=BN)
    assert torch.equal(g.cpu(), torch.gather(x, axis, idx.long()))
    xp = torch.zeros(BM, BN)
    xp[:M, :N] = x
    assert torch.equal(f.cpu(), xp.flip(axis)[:M, :N])


@newt.jit
def sort_kernel(x_ptr, s_ptr, d_ptr, t_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr,
                K: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    x = nl.load(x_ptr + offs, mask=mask, other=float("inf"))
    nl.store(s_ptr + offs, nl.sort(x), mask=mask)
    xm = nl.where(mask, x, -float("inf"))
    nl.store(d_ptr + offs, xm.sort(1, descending=True), mask=mask)
    rk = nl.arange(0, K)
    nl.store(t_ptr + rm[:, None] * K + rk[None, :], nl.topk(xm, K),
             mask=(rm[:, None] < M) & (rk[None, :] < K))


@pytest.mark.parametrize("dt", [torch.float32, torch.float16], ids=str)
def test_sort_topk(where, dt):
    M, N, BM, BN, K = 3, 27, 4, 32, 4
    x = torch.randn(M, N).to(dt)
    x[1, 4] = float("nan")
    outs = [nan_like(s, dt, where.device) for s in [(M, N), (M, N), (M, K)]]
    where(sort_kernel, (1,), where.t(x), *outs, M, N, BM=BM, BN=BN, K=K)
    s, d, t = [o.cpu() for o in outs]
    xp = torch.full((M, BN), float("inf"), dtype=dt)     # the pads sort with the row (NaN last)
    xp[:, :N] = x
    torch.testing.assert_close(s, torch.sort(xp, 1)[0][:, :N], equal_nan=True)
    torch.testing.assert_close(d, torch.sort(x, 1, descending=True)[0], equal_nan=True)
    torch.testing.assert_close(t, torch.topk(x.float(), K)[0].to(dt), equal_nan=True)


@newt.jit
def int_sort_kernel(x_ptr, s_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=2 ** 31 - 1)
    nl.store(s_ptr + offs, nl.sort(x, 0), mask=offs < n)


def test_sort_ints_1d(where):
    n = 300
    x = torch.randint(-2 ** 31, 2 ** 31 - 1, (n,), dtype=torch.int32)
    out = torch.full((n,), 77, dtype=torch.int32, device=where.device)
    where(int_sort_kernel, (1,), where.t(x), out, n, BLOCK=512)
    assert torch.equal(out.cpu(), torch.sort(x)[0])


@newt.jit
def hist_kernel(x_ptr, h_ptr, n, NB: nl.constexpr, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n, other=0)
    h = nl.histogram(x, NB, mask=offs < n)
    nl.atomic_add(h_ptr + nl.arange(0, NB), h)


def test_histogram(where):
    n, NB = 1000, 64
    x = torch.randint(-8, NB + 8, (n,), dtype=torch.int32)       # some out of range
    h = torch.zeros(NB, dtype=torch.int32, device=where.device)
    where(hist_kernel, (newt.cdiv(n, 256),), where.t(x), h, n, NB=NB, BLOCK=256)
    keep = x[(x >= 0) & (x < NB)]
    assert torch.equal(h.cpu(), torch.bincount(keep.long(), minlength=NB).int())


@newt.jit
def python_builtins_kernel(x_ptr, o_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    nl.assume(n > 0)
    x = nl.load(x_ptr + offs, mask=offs < n)
    r = max(x, 0.0) + min(x, -0.5, 0.25)
    for i in nl.range(0, 2, num_stages=2, loop_unroll_factor=2, disallow_acc_multi_buffer=True,
                      flatten=True, warp_specialize=False):
        r += i
    for j in nl.static_range(3):
        r += j
    nl.store(o_ptr + offs, r, mask=offs < n)


def test_python_min_max_assume_and_range_options(where):
    n = 77
    x = torch.randn(n)
    out = nan_like((n,), device=where.device)
    where(python_builtins_kernel, (1,), where.t(x), out, n, BLOCK=128)
    ref = x.clamp(min=0) + torch.minimum(x, torch.tensor(-0.5)) + 1 + 3
    torch.testing.assert_close(out.cpu(), ref)


@newt.jit
def umulhi_kernel(x_ptr, y_ptr, o_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n)
    y = nl.load(y_ptr + offs, mask=offs < n)
    nl.store(o_ptr + offs, nl.umulhi(x, y), mask=offs < n)


def test_umulhi_int32_is_the_unsigned_high_half(where):
    n = 61
    x = torch.randint(-2 ** 31, 2 ** 31 - 1, (n,), dtype=torch.int32)
    y = torch.randint(-2 ** 31, 2 ** 31 - 1, (n,), dtype=torch.int32)
    out = torch.full((n,), 77, dtype=torch.int32, device=where.device)
    where(umulhi_kernel, (1,), where.t(x), where.t(y), out, n, BLOCK=64)
    m = (1 << 32) - 1
    hi = [((a & m) * (b & m)) >> 32 for a, b in zip(x.tolist(), y.tolist())]
    assert torch.equal(out.cpu(), torch.tensor([(h + 2 ** 31) % 2 ** 32 - 2 ** 31 for h in hi],
                                               dtype=torch.int32))


@newt.jit
def print_kernel(x_ptr, BLOCK: nl.constexpr):
    x = nl.load(x_ptr + nl.arange(0, BLOCK))
    print("x =", x)
    print("block", BLOCK)


def test_python_print_is_device_print(capfd):
    newt.options.flags.interpret = True
    try:
        print_kernel[(1,)](torch.arange(4, dtype=torch.float32), BLOCK=4)
    finally:
        newt.options.flags.interpret = False
    out = capfd.readouterr().out
    assert "x = 3.0" in out and "block 4" in out
    k = newt.compile(print_kernel, {"x_ptr": "*fp32"}, {"BLOCK": 4}, arch="sm_80")
    assert "printf(" in k.source and "x = " in k.source


@newt.jit
def asm_kernel(x_ptr, y_ptr, o_ptr, p_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    m = offs < n
    x = nl.load(x_ptr + offs, mask=m)
    y = nl.load(y_ptr + offs, mask=m)
    s = nl.inline_asm_elementwise("shl.b32 $0, $1, 3;", "=r,r", [x], dtype=nl.int32,
                                  is_pure=True, pack=1)
    a, b = nl.inline_asm_elementwise("add.f32 $0, $2, $3;\n\tsub.s32 $1, $4, 1;",
                                     "=f,=r,f,f,r", [y, 1.5, x], dtype=(nl.float32, nl.int32),
                                     is_pure=False, pack=1)
    nl.store(o_ptr + offs, s + b, mask=m)
    nl.store(p_ptr + offs, a, mask=m)


def test_inline_asm(target, device):
    n = 45
    x = torch.randint(-1000, 1000, (n,), dtype=torch.int32)
    y = torch.randn(n)
    o = torch.full((n,), 77, dtype=torch.int32, device=device)
    p = nan_like((n,), device=device)
    if target == "interp":
        with pytest.raises(newt.CompilationError, match="interpreter cannot"):
            asm_kernel[(1,)](x, y, o, p, n, BLOCK=64)
        return
    asm_kernel[(1,)](x.to(device), y.to(device), o, p, n, BLOCK=64)
    assert torch.equal(o.cpu(), x * 8 + x - 1)
    torch.testing.assert_close(p.cpu(), y + 1.5)


@newt.jit
def asm_packed_kernel(x_ptr, o_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs, mask=offs < n)
    # four int8 per register: and + shift of each byte (Triton's packed form)
    y = nl.inline_asm_elementwise("and.b32 $0, $1, 0x1F1F1F1F;\n\tshl.b32 $0, $0, 3;", "=r,r",
                                  [x], dtype=nl.int8, is_pure=True, pack=4)
    nl.store(o_ptr + offs, y, mask=offs < n)


def test_inline_asm_packed(target, device):
    n = 99
    x = torch.randint(-128, 128, (n,), dtype=torch.int8)
    o = torch.full((n,), 77, dtype=torch.int8, device=device)
    if target == "interp":
        return      # (the interpreter's error is tested above)
    asm_packed_kernel[(1,)](x.to(device), o, n, BLOCK=128)
    assert torch.equal(o.cpu(), ((x.int() & 0x1F) << 3).to(torch.int8))


def test_inline_asm_errors():
    @newt.jit
    def k(x_ptr, B: nl.constexpr):
        x = nl.load(x_ptr + nl.arange(0, B))
        y = nl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=nl.int32,
                                      is_pure=True, pack=4)
        nl.store(x_ptr + nl.arange(0, B), y)

    with pytest.raises(newt.CompilationError, match="at most 8 bits"):
        newt.compile(k, {"x_ptr": "*i32"}, {"B": 16})


@pytest.mark.parametrize("arch", NVRTC_ARCHS)
def test_kernels_compile(arch):
    f = "*fp32"
    nvrtc(join_kernel, {"x_ptr": f, "y_ptr": f, "j_ptr": f, "i_ptr": f, "a_ptr": f, "b_ptr": f,
                        "t_ptr": f, "s_ptr": f, "M": "i32", "N": "i32"}, {"BM": 16, "BN": 32}, arch)
    nvrtc(gather_kernel, {"x_ptr": f, "i_ptr": "*i32", "g_ptr": f, "f_ptr": f, "M": "i32",
                          "N": "i32"}, {"AXIS": 1, "BM": 16, "BN": 64}, arch)
    nvrtc(sort_kernel, {"x_ptr": "*fp16", "s_ptr": "*fp16", "d_ptr": "*fp16", "t_ptr": "*fp16",
                        "M": "i32", "N": "i32"}, {"BM": 4, "BN": 128, "K": 8}, arch)
    nvrtc(hist_kernel, {"x_ptr": "*i32", "h_ptr": "*i32", "n": "i32"}, {"NB": 64, "BLOCK": 256},
          arch)
    k = nvrtc(asm_kernel, {"x_ptr": "*i32", "y_ptr": f, "o_ptr": "*i32", "p_ptr": f, "n": "i32"},
              {"BLOCK": 256}, arch)
    assert 'asm("shl.b32 %0, %1, 3;"' in k.source
    k = nvrtc(asm_packed_kernel, {"x_ptr": "*i8", "o_ptr": "*i8", "n": "i32"}, {"BLOCK": 128},
              arch)
    assert "0x1F1F1F1F" in k.source


@newt.jit
def dot_split_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: nl.constexpr, BN: nl.constexpr,
                     BK: nl.constexpr):
    # the epilogue of Triton's persistent-matmul tutorial: the accumulator split in halves
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    rk = nl.arange(0, BK)
    nl.assume(K > 0)
    acc = nl.zeros([BM, BN], dtype=nl.float32)
    for k0 in range(0, K, BK):
        a = nl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :])
        b = nl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :])
        acc = nl.dot(a, b, acc)
    acc0, acc1 = nl.split(nl.permute(nl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1)))
    h = nl.arange(0, BN // 2)
    nl.store(c_ptr + rm[:, None] * N + h[None, :], acc0.to(nl.float16))
    nl.store(c_ptr + rm[:, None] * N + (BN // 2 + h)[None, :], acc1.to(nl.float16))


@pytest.mark.parametrize("arch", NVRTC_ARCHS)
def test_split_of_a_dot_accumulator_emulated(monkeypatch, arch):
    """The generated code for sm_80 (mma.sync) and sm_90a (wgmma) run on the CPU with the
    instruction models of tests/emu_dot.py, as tests/test_dot_emulated.py does."""
    import test_codegen_emulator as E
    from emu_dot import emulated_source

    import newt.codegen as C
    from newt.options import Options
    orig = C.generate

    def generate(fn, opts):
        src, name = orig(fn, opts)
        return emulated_source(src), name

    monkeypatch.setattr(C, "generate", generate)
    monkeypatch.setattr(E, "Options", lambda arch=None, num_warps=4, _a=arch:
                        Options(arch=_a, num_warps=num_warps, num_stages=2))
    M = N = K = 64
    a, b = torch.randn(M, K).half(), torch.randn(K, N).half()
    c = nan_like((M, N), torch.float16)
    E.emulate(dot_split_kernel, (1,), a, b, c, M, N, K, BM=64, BN=64, BK=32)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


@newt.jit
def misc_kernel(x_ptr, i_ptr, r_ptr, xs_ptr, si_ptr, sj_ptr, d_ptr, e_ptr, M, N, GROUP,
                BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    x = nl.load(x_ptr + offs, mask=mask, other=1.0)
    iv = nl.load(i_ptr + offs, mask=mask, other=0)
    nl.store(r_ptr + nl.arange(0, BM * BN), nl.ravel(x))
    nl.store(xs_ptr + rm, nl.xor_sum(iv, 1), mask=rm < M)
    si, sj = nl.swizzle2d(rm[:, None] + 0 * rn[None, :], rn[None, :] + 0 * rm[:, None], M, N,
                          GROUP)
    nl.store(si_ptr + offs, si, mask=mask)
    nl.store(sj_ptr + offs, sj, mask=mask)
    y = x + 2.0
    nl.store(d_ptr + offs, nl.fdiv(x, y), mask=mask)
    nl.store(e_ptr + offs, nl.math.fdiv(x, y, ieee_rounding=True), mask=mask)


def test_ravel_xor_sum_swizzle2d_fdiv(where):
    M, N, BM, BN, G = 7, 5, 8, 8, 3
    x = torch.rand(M, N) + 0.5
    iv = torch.randint(-2 ** 31, 2 ** 31 - 1, (M, N), dtype=torch.int32)
    outs = [nan_like((BM * BN,)), torch.full((M,), 7, dtype=torch.int32),
            torch.full((M, N), -1, dtype=torch.int32), torch.full((M, N), -1, dtype=torch.int32),
            nan_like((M, N)), nan_like((M, N))]
    outs = [where.t(o) for o in outs]
    where(misc_kernel, (1,), where.t(x), where.t(iv), *outs, M, N, G, BM=BM, BN=BN)
    r, xs, si, sj, d, e = [o.cpu() for o in outs]
    xp = torch.ones(BM, BN)
    xp[:M, :N] = x
    assert torch.equal(r, xp.reshape(-1))
    ref = iv[:, 0].clone()
    for c in range(1, N):
        ref ^= iv[:, c]
    assert torch.equal(xs, ref)
    # grouped order: the linear index walks groups of G rows column by column
    order = [(i, j) for g in range(0, M, G) for j in range(N) for i in range(g, min(g + G, M))]
    got = [(int(si[i, j]), int(sj[i, j])) for i in range(M) for j in range(N)]
    assert got == order
    torch.testing.assert_close(d, x / (x + 2))
    assert torch.equal(e, x / (x + 2))


@newt.jit
def cat_softmax_kernel(x_ptr, y_ptr, c_ptr, s_ptr, M, N, BM: nl.constexpr, BN: nl.constexpr):
    rm = nl.arange(0, BM)
    rn = nl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    x = nl.load(x_ptr + offs, mask=mask, other=-float("inf"))
    y = nl.load(y_ptr + offs, mask=mask, other=0.0)
    r2 = nl.arange(0, 2 * BM)
    nl.store(c_ptr + r2[:, None] * BN + rn[None, :], nl.cat(x, y, can_reorder=True))
    nl.store(s_ptr + offs, nl.softmax(x, 1), mask=mask)


def test_cat_softmax(where):
    M, N, BM, BN = 3, 5, 4, 8
    x, y = torch.randn(M, N), torch.randn(M, N)
    c, s = nan_like((2 * BM, BN), device=where.device), nan_like((M, N), device=where.device)
    where(cat_softmax_kernel, (1,), where.t(x), where.t(y), c, s, M, N, BM=BM, BN=BN)
    xp, yp = torch.full((BM, BN), -float("inf")), torch.zeros(BM, BN)
    xp[:M, :N], yp[:M, :N] = x, y
    assert torch.equal(c.cpu(), torch.cat([xp, yp], 0))
    torch.testing.assert_close(s.cpu(), torch.softmax(x, 1))


@newt.jit
def add3_fn(a, b):
    return a + b


@newt.jit
def blocks3d_kernel(x_ptr, i_ptr, s_ptr, g_ptr, c_ptr, r_ptr, f_ptr, A: nl.constexpr,
                    B: nl.constexpr, C: nl.constexpr, AX: nl.constexpr):
    ra = nl.arange(0, A)[:, None, None]
    rb = nl.arange(0, B)[None, :, None]
    rc = nl.arange(0, C)[None, None, :]
    offs = ra * B * C + rb * C + rc
    x = nl.load(x_ptr + offs)
    idx = nl.load(i_ptr + offs)
    nl.store(s_ptr + offs, nl.sort(x, AX, descending=True))
    nl.store(g_ptr + offs, nl.gather(x, idx, AX))
    nl.store(c_ptr + offs, nl.associative_scan(x, AX, add3_fn, reverse=True))
    nl.store(f_ptr + offs, nl.flip(x, AX))
    nl.store(r_ptr + offs, x - nl.reduce(x, AX, add3_fn, keep_dims=True))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_3d_blocks_along_every_axis(where, axis):
    A, B, C = 2, 8, 4
    x = torch.randn(A, B, C)
    idx = torch.randint(0, x.shape[axis], (A, B, C), dtype=torch.int32)
    outs = [nan_like((A, B, C), device=where.device) for _ in range(5)]
    where(blocks3d_kernel, (1,), where.t(x), where.t(idx), *outs, A=A, B=B, C=C, AX=axis,
          num_warps=2)
    s, g, c, r, f = [o.cpu() for o in outs]
    assert torch.equal(s, torch.sort(x, axis, descending=True)[0])
    assert torch.equal(g, torch.gather(x, axis, idx.long()))
    torch.testing.assert_close(c, x.flip(axis).cumsum(axis).flip(axis), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(r, x - x.sum(axis, keepdim=True), rtol=1e-5, atol=1e-5)
    assert torch.equal(f, x.flip(axis))
