"""deuteron on the CPU: tracing, the generated newt source, the eager oracle, and the generated
kernels run on the newt interpreter against torch (odd shapes, poisoned outputs)."""
import math
import sys

import pytest
import torch

import deuteron as dt
from deuteron.kernel import exec_source
from deuteron.lower import lower

import newt


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


@dt.kernel
def matmul(x, y, out):
    for tile_m, tile_n in dt.tile([x.shape[0], y.shape[1]]):
        acc = dt.zeros([tile_m, tile_n], dtype=dt.float32)
        for tile_k in dt.tile(x.shape[1]):
            acc += x[tile_m, tile_k] @ y[tile_k, tile_n]
        out[tile_m, tile_n] = acc


@dt.kernel
def softmax(x):
    out = torch.empty_like(x)
    for tile_m in dt.tile(x.shape[0]):
        row = x[tile_m, :]
        num = torch.exp(row - row.amax(dim=1, keepdim=True))
        out[tile_m, :] = num / num.sum(dim=1, keepdim=True)
    return out


@dt.kernel
def layernorm(x, w, b, eps: float = 1e-5):
    out = torch.empty_like(x)
    for tile_m in dt.tile(x.shape[0]):
        row = x[tile_m, :].float()
        mean = row.mean(dim=-1, keepdim=True)
        xc = row - mean
        var = (xc * xc).mean(dim=-1, keepdim=True)
        out[tile_m, :] = (xc * torch.rsqrt(var + eps) * w[:].float() + b[:].float()).to(x.dtype)
    return out


@dt.kernel
def gated(x, bias):
    out = torch.empty_like(x)
    for tile_m, tile_n in dt.tile([x.shape[0], x.shape[1]]):
        v = x[tile_m, tile_n] + bias[tile_n]
        out[tile_m, tile_n] = torch.where(v > 0, torch.sigmoid(v) * 2.0, torch.relu(-v) - 1.5)
    return out


@dt.kernel
def row_stats(x, out_sum, out_max):
    """Inner tile loops that reduce (no dot): sums need no mask, maxes need -inf lanes."""
    for tile_m in dt.tile(x.shape[0]):
        s = dt.zeros([tile_m], dtype=dt.float32)
        m = dt.full([tile_m], float("-inf"), dtype=dt.float32)
        for tile_k in dt.tile(x.shape[1]):
            blk = x[tile_m, tile_k]
            s = s + blk.sum(dim=1)
            m = torch.maximum(m, blk.amax(dim=1))
        out_sum[tile_m] = s
        out_max[tile_m] = m


def _run(k, *args, config=None):
    """Run a kernel on the newt interpreter (CPU tensors), pinned to `config` if given."""
    if config is None:
        return k(*args)
    return k.run(args, {}, config)


def _poisoned(*shape, dtype=torch.float32):
    return torch.full(shape, float("nan"), dtype=dtype)


# ----------------------------------------------------------------------------- generated source

def test_matmul_source_is_the_tutorial_kernel():
    x, y = torch.randn(37, 29, dtype=torch.float16), torch.randn(29, 45, dtype=torch.float16)
    src = matmul.to_newt_source(x, y, torch.empty(37, 45, dtype=torch.float16))
    for piece in ("@newt.jit", "def matmul_kernel(", "BLOCK_SIZE_M: nl.constexpr",
                  "BLOCK_SIZE_N: nl.constexpr", "BLOCK_SIZE_K: nl.constexpr",
                  "GROUP_SIZE_M: nl.constexpr", "pid = nl.program_id(0)",
                  "offs_m = pid_m * BLOCK_SIZE_M + nl.arange(0, BLOCK_SIZE_M)",
                  "for start_k in range(0, K, BLOCK_SIZE_K):",
                  "acc = nl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=nl.float32)",
                  "acc = nl.dot(x_tile, y_tile, acc)",
                  "x_ptrs = x_ptr + (offs_m % M)[:, None] * stride_x0 + "
                  "nl.arange(0, BLOCK_SIZE_K)[None, :] * stride_x1",
                  "x_tile = nl.load(x_ptrs, mask=mask_k[None, :], other=0.0)",
                  "x_ptrs += BLOCK_SIZE_K * stride_x1", "y_ptrs += BLOCK_SIZE_K * stride_y0",
                  "out_ptrs = out_ptr + offs_m[:, None] * stride_out0 + offs_n[None, :] * stride_out1",
                  "nl.store(out_ptrs, acc, mask=mask_m[:, None] & mask_n[None, :])"):
        assert piece in src, f"missing {piece!r} in\n{src}"
    compile(src, "<test>", "exec")
    assert max(len(line) for line in src.splitlines()) <= 104, src


def test_long_loads_and_stores_name_their_pointers_and_masks():
    x = torch.randn(5, 1500, dtype=torch.float16)
    src = layernorm.to_newt_source(x, torch.randn(1500, dtype=torch.float16),
                                   torch.randn(1500, dtype=torch.float16))
    assert "x_ptrs = x_ptr + offs_m[:, None] * stride_x0 + offs_n[None, :] * stride_x1" in src
    assert "out_mask = mask_m[:, None] & mask_n[None, :]" in src
    assert "nl.store(out_ptrs, out_tile, mask=out_mask)" in src
    assert "w_tile = nl.load(w_ptr + offs_n * stride_w0, mask=mask_n, other=0.0)" in src


def test_softmax_source_masks_reductions_with_identities():
    src = softmax.to_newt_source(torch.randn(5, 1500))
    assert 'nl.max(nl.where(mask_n[None, :], row, float("-inf")), axis=1, keep_dims=True)' in src
    assert "nl.sum(nl.where(mask_n[None, :], num, 0.0), axis=1, keep_dims=True)" in src
    assert "offs_n = nl.arange(0, BLOCK_SIZE_N)" in src and "nl.dot" not in src


def test_layernorm_source_masks_only_where_padding_is_not_zero():
    x = torch.randn(5, 1500, dtype=torch.float16)
    src = layernorm.to_newt_source(x, torch.randn(1500, dtype=torch.float16),
                                   torch.randn(1500, dtype=torch.float16))
    assert "mean = nl.sum(row, axis=1, keep_dims=True) / N" in src      # loads pad with 0
    assert "nl.sum(nl.where(mask_n[None, :], xc * xc, 0.0), axis=1, keep_dims=True) / N" in src
    assert "w_tile = nl.load(w_ptr + offs_n * stride_w0, mask=mask_n, other=0.0)" in src


def test_generated_source_execs_into_a_newt_kernel():
    x = torch.randn(5, 100)
    prog = softmax.trace(x).programs[0]
    low = lower(prog)
    jf = exec_source(low.source, low.name)
    assert isinstance(jf, newt.JITFunction)
    import inspect
    assert inspect.getsource(jf.fn) == low.source      # linecache serves the frontend


def test_config_prints_as_code():
    cfg = dt.Config(block_sizes=[64, 128, 32], num_warps=8, num_stages=4, group_size=8)
    assert str(cfg) == "dt.Config(block_sizes=[64, 128, 32], num_warps=8, num_stages=4, group_size=8)"
    assert eval(str(cfg), {"dt": dt}) == cfg


# ----------------------------------------------------------------------------- the oracle

def test_ref_is_eager_pytorch():
    x, y = torch.randn(37, 29), torch.randn(29, 45)
    out = _poisoned(37, 45)
    matmul.ref(x, y, out)
    torch.testing.assert_close(out, x @ y)
    s = torch.randn(6, 300)
    torch.testing.assert_close(softmax.ref(s), torch.softmax(s, -1))
    xb, b = torch.randn(9, 33), torch.randn(33)
    v = xb + b
    torch.testing.assert_close(gated.ref(xb, b),
                               torch.where(v > 0, torch.sigmoid(v) * 2, torch.relu(-v) - 1.5))


# ----------------------------------------------------------------------------- interpreter runs

@pytest.mark.parametrize("blocks", [(16, 16, 16), (32, 16, 32), (16, 64, 16)])
def test_matmul_on_interpreter_odd_shapes(blocks):
    x, y = torch.randn(37, 29), torch.randn(29, 45)
    out = _poisoned(37, 45)
    _run(matmul, x, y, out, config=dt.Config(block_sizes=blocks, num_warps=4, num_stages=2,
                                              group_size=2))
    torch.testing.assert_close(out, x @ y, rtol=1e-4, atol=1e-4)


@dt.kernel
def matmul_bt(x, y, out):
    """x @ y.T with y stored [N, K]: the transposed tile is read in place (attention's q @ k.T)."""
    for tile_m, tile_n in dt.tile([x.shape[0], y.shape[0]]):
        acc = dt.zeros([tile_m, tile_n], dtype=dt.float32)
        for tile_k in dt.tile(x.shape[1]):
            acc += x[tile_m, tile_k] @ y[tile_n, tile_k].T
        out[tile_m, tile_n] = acc


def test_transposed_tile_is_loaded_transposed():
    """`y[tile_n, tile_k].T` becomes a load of the [K, N] tile (strides swapped, mask
    transposed), with no nl.trans between the load and the dot; odd shapes match torch."""
    x, y = torch.randn(37, 29), torch.randn(45, 29)
    out = _poisoned(37, 45)
    src = matmul_bt.to_newt_source(x, y, out)
    assert "nl.trans(" not in src
    assert "nl.arange(0, BLOCK_SIZE_K)[:, None] * stride_y1" in src, src
    for blocks in [(16, 16, 16), (32, 16, 32), (16, 64, 16)]:
        out = _poisoned(37, 45)
        _run(matmul_bt, x, y, out, config=dt.Config(block_sizes=blocks, num_warps=4,
                                                     num_stages=2, group_size=2))
        torch.testing.assert_close(out, x @ y.T, rtol=1e-4, atol=1e-4)


def test_matmul_fp16_default_config():
    x = torch.randn(40, 70, dtype=torch.float16)
    y = torch.randn(70, 24, dtype=torch.float16)
    out = _poisoned(40, 24, dtype=torch.float16)
    matmul(x, y, out)
    torch.testing.assert_close(out.float(), x.float() @ y.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("rows", [1, 2])
def test_softmax_on_interpreter(rows):
    x = torch.randn(7, 1500) * 3 - 5      # all-negative rows would expose a missing -inf mask
    got = _run(softmax, x, config=dt.Config(block_sizes=[rows], num_warps=4))
    torch.testing.assert_close(got, torch.softmax(x, -1))


def test_layernorm_rows_of_1500_no_mask_in_user_code():
    x = torch.randn(5, 1500, dtype=torch.float16) * 2 + 1
    w, b = torch.randn(1500, dtype=torch.float16), torch.randn(1500, dtype=torch.float16)
    got = layernorm(x, w, b)
    want = torch.nn.functional.layer_norm(x.float(), (1500,), w.float(), b.float(), 1e-5)
    torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2)


def test_elementwise_broadcast_where_on_interpreter():
    x, b = torch.randn(19, 70), torch.randn(70)
    got = _run(gated, x, b, config=dt.Config(block_sizes=[4, 32]))
    v = x + b
    torch.testing.assert_close(got, torch.where(v > 0, torch.sigmoid(v) * 2, torch.relu(-v) - 1.5))


def test_inner_loop_reductions_are_masked_right():
    x = -torch.rand(11, 50) - 0.5                   # negative: padded zeros would win a max
    s, m = _poisoned(11), _poisoned(11)
    _run(row_stats, x, s, m, config=dt.Config(block_sizes=[4, 16]))
    torch.testing.assert_close(s, x.sum(1))
    torch.testing.assert_close(m, x.amax(1))
    src = row_stats.to_newt_source(x, s, m)
    assert 'nl.max(nl.where(mask_k[None, :], blk, float("-inf")), axis=1)' in src
    assert "nl.sum(blk, axis=1)" in src


@dt.kernel
def scale_rows(x, scale, out):
    for tile_m in dt.tile(x.shape[0], block_size=8):
        v = x[tile_m, :] * scale[tile_m][:, None]
        out[tile_m, :] = v - v.mean(dim=1)[:, None] + x[tile_m, 0][:, None]


def test_pinned_block_size_int_index_and_keepdim_false():
    x, scale = torch.randn(21, 37), torch.randn(21)
    out = _poisoned(21, 37)
    scale_rows(x, scale, out)
    v = x * scale[:, None]
    torch.testing.assert_close(out, v - v.mean(1, keepdim=True) + x[:, :1])
    src = scale_rows.to_newt_source(x, scale, out)
    assert "x_ptr + offs_m * stride_x0" in src   # x[tile_m, 0]: the int index folds away


@dt.kernel
def two_loops(x):
    """Two outer tile loops: two kernels, launched in order."""
    y = torch.empty_like(x)
    z = torch.empty_like(x)
    for t in dt.tile(x.shape[0]):
        y[t] = x[t] * 2.0
    for t in dt.tile(x.shape[0]):
        z[t] = y[t] + 1.0
    return z


def test_two_tile_loops_make_two_kernels():
    x = torch.randn(333)
    torch.testing.assert_close(two_loops(x), x * 2 + 1)
    assert two_loops.to_newt_source(x).count("@newt.jit") == 2


# ----------------------------------------------------------------------------- NVRTC, no GPU

def _nvrtc_or_skip():
    try:
        from newt.runtime import nvrtc
        nvrtc.version()
    except Exception as e:   # no NVRTC on this machine
        pytest.skip(f"NVRTC unavailable: {e}")


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name", ["softmax", "layernorm", "gated", "matmul"])
def test_generated_kernels_compile_with_nvrtc(name, arch):
    _nvrtc_or_skip()
    h = torch.float16
    args = {
        "softmax": (torch.randn(64, 4096),),
        "layernorm": (torch.randn(64, 1500, dtype=h), torch.randn(1500, dtype=h),
                      torch.randn(1500, dtype=h)),
        "gated": (torch.randn(64, 100), torch.randn(100)),
        "matmul": (torch.randn(512, 512, dtype=h), torch.randn(512, 512, dtype=h),
                   torch.empty(512, 512, dtype=h)),
    }[name]
    kernel = globals()[name]
    # matmul at a mid-size config: register use of big dot tiles is the compiler's business
    config = dt.Config([64, 64, 32], num_warps=4, num_stages=3) if name == "matmul" else None
    for ck in kernel.compile(*args, config=config, arch=arch):
        assert ck.cubin and ck.n_spills == 0, ck.log


# ----------------------------------------------------------------------------- the fast path

def test_second_call_replays_without_tracing(monkeypatch):
    K = sys.modules["deuteron.split"]        # where a launch lowers its program (bind_program)
    x = torch.randn(7, 300)
    torch.testing.assert_close(softmax(x), torch.softmax(x, -1))     # traces, records a plan
    x2 = torch.randn(7, 300) * 2                                       # same metadata
    monkeypatch.setattr(K, "lower", lambda *a: (_ for _ in ()).throw(AssertionError("traced")))
    got = softmax(x2)                                                  # new output from host code
    torch.testing.assert_close(got, torch.softmax(x2, -1))
    a, b = torch.randn(37, 29), torch.randn(29, 45)
    with pytest.raises(AssertionError, match="traced"):                # other shapes: trace again
        matmul(a, b, _poisoned(37, 45))
    monkeypatch.undo()
    out = _poisoned(37, 45)
    matmul(a, b, out)
    out2 = _poisoned(37, 45)
    monkeypatch.setattr(K, "lower", lambda *a: (_ for _ in ()).throw(AssertionError("traced")))
    matmul(a * 3, b, out2)                                             # explicit out argument
    torch.testing.assert_close(out2, (a * 3) @ b, rtol=1e-4, atol=1e-4)


@dt.kernel
def host_dependent(x, n: int):
    out = torch.empty(n, dtype=x.dtype)
    for t in dt.tile(n):
        out[t] = x[t] + 1.0
    return out


def test_replay_guard_falls_back_to_tracing():
    x = torch.randn(50)
    torch.testing.assert_close(host_dependent(x, 20), x[:20] + 1)
    torch.testing.assert_close(host_dependent(x, 20), x[:20] + 1)     # replayed
    torch.testing.assert_close(host_dependent(x, 30), x[:30] + 1)     # new key: traced


@dt.kernel
def logsumexp(x):
    """Online log-sum-exp: `m` is replaced by `m_new` while the old `m` is still needed."""
    out = torch.empty(x.shape[0], dtype=x.dtype)
    for tile_m in dt.tile(x.shape[0]):
        m = dt.full([tile_m], float("-inf"), dtype=dt.float32)
        s = dt.zeros([tile_m], dtype=dt.float32)
        for tile_k in dt.tile(x.shape[1]):
            blk = x[tile_m, tile_k]
            m_new = torch.maximum(m, blk.amax(dim=1))
            s = s * torch.exp(m - m_new) + torch.exp(blk - m_new[:, None]).sum(dim=1)
            m = m_new
        out[tile_m] = m + torch.log(s)
    return out


def test_loop_carried_values_read_after_update():
    x = torch.randn(13, 100) * 5
    src = logsumexp.to_newt_source(x)
    assert "m_next = nl.maximum(m, " in src and "m = m_next" in src
    got = _run(logsumexp, x, config=dt.Config(block_sizes=[4, 32]))
    torch.testing.assert_close(got, torch.logsumexp(x, dim=1))


@dt.kernel
def linear_relu(x, w, bias):
    """torch.addmm into the accumulator, a bias, relu and a cast back to the input dtype."""
    out = torch.empty(x.shape[0], w.shape[1], dtype=x.dtype)
    for tile_m, tile_n in dt.tile([x.shape[0], w.shape[1]]):
        acc = dt.zeros([tile_m, tile_n], dtype=dt.float32)
        for tile_k in dt.tile(x.shape[1]):
            acc = torch.addmm(acc, x[tile_m, tile_k], w[tile_k, tile_n])
        out[tile_m, tile_n] = torch.relu(acc + bias[tile_n].float()).to(x.dtype)
    return out


def test_addmm_fuses_into_the_accumulator():
    x, w = torch.randn(33, 40), torch.randn(40, 18)
    b = torch.randn(18)
    src = linear_relu.to_newt_source(x, w, b)
    assert "acc = nl.dot(x_tile, w_tile, acc" in src
    got = _run(linear_relu, x, w, b, config=dt.Config([16, 16, 16]))
    torch.testing.assert_close(got, torch.relu(x @ w + b), rtol=1e-4, atol=1e-4)


def test_static_shapes_make_extents_constexpr():
    k = dt.kernel(softmax.fn, static_shapes=True)
    x = torch.randn(6, 300)
    src = k.to_newt_source(x)
    assert "M: nl.constexpr" in src and "N: nl.constexpr" in src
    torch.testing.assert_close(k(x), torch.softmax(x, -1))
    a = dcache_key(k, (x,))
    b = dcache_key(k, (torch.randn(7, 300),))
    assert a != b                                   # exact shapes, not buckets


def dcache_key(k, args):
    from deuteron.autotune import cache
    return cache.make_key(k, args, {})


@dt.kernel
def grid3(x, y):
    """A 3-D grid over int32 data: exact integer results, y broadcast along the middle dim."""
    out = torch.empty_like(x)
    for ta, tb, tc in dt.tile([x.shape[0], x.shape[1], x.shape[2]]):
        v = x[ta, tb, tc]
        w = y[ta, tc]
        out[ta, tb, tc] = torch.where(v > w[:, None, :], v * 3 - w[:, None, :], v % 7)
    return out


def test_three_dim_grid_integers_exact():
    x = torch.randint(-50, 50, (5, 6, 7), dtype=torch.int32)
    y = torch.randint(-50, 50, (5, 7), dtype=torch.int32)
    got = _run(grid3, x, y, config=dt.Config([2, 4, 4]))
    w = y[:, None, :]
    assert torch.equal(got, torch.where(x > w, x * 3 - w, x % 7))
    assert "pid_tc = pid % num_pid_tc" in grid3.to_newt_source(x, y)


@dt.kernel
def bf16_scale(x, s: float):
    out = torch.empty_like(x)
    for t in dt.tile(x.shape[0]):
        out[t] = (x[t].float() * s).to(torch.bfloat16)
    return out


def test_bf16_roundtrip():
    x = torch.randn(1000, dtype=torch.bfloat16)
    got = _run(bf16_scale, x, 0.3, config=dt.Config([128]))
    assert torch.equal(got, (x.float() * 0.3).to(torch.bfloat16))


@dt.kernel
def divmod_k(a, b):
    q = torch.empty_like(a)
    r = torch.empty_like(a)
    for t in dt.tile(a.shape[0]):
        q[t] = a[t] // b[t]
        r[t] = a[t] % b[t]
    return q, r


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32])
def test_floor_division_and_modulo_follow_torch(dtype):
    a = torch.randint(-40, 40, (200,)).to(dtype)
    b = torch.randint(1, 9, (200,)).to(dtype) * torch.where(torch.rand(200) < 0.5, -1, 1).to(dtype)
    q, r = _run(divmod_k, a, b, config=dt.Config([64]))
    torch.testing.assert_close(q, a // b)
    torch.testing.assert_close(r, a % b)


@dt.kernel
def colsum_of_product(x, y, out):
    """One tile of 64 rows covers M = 40: the padded rows must stay 0 for the column sums."""
    for tile_m, tile_n in dt.tile([x.shape[0], y.shape[1]], block_size=[64, None]):
        acc = dt.zeros([tile_m, tile_n], dtype=dt.float32)
        for tile_k in dt.tile(x.shape[1]):
            acc += x[tile_m, tile_k] @ y[tile_k, tile_n]
        out[tile_n] = acc.sum(dim=0)


def test_rows_read_wrapped_only_where_nothing_reduces_over_them():
    x, y = torch.randn(40, 30) + 1, torch.randn(30, 20)
    out = _poisoned(20)
    src = colsum_of_product.to_newt_source(x, y, out)
    assert "offs_m % M" not in src and "offs_n % N" in src
    _run(colsum_of_product, x, y, out, config=dt.Config([16, 16]))
    torch.testing.assert_close(out, (x @ y).sum(0), rtol=1e-4, atol=1e-3)


def test_strided_views_use_their_strides():
    xt = torch.randn(29, 37).T                     # a transposed view: strides (1, 37)
    y = torch.randn(45, 29)[:, ::1].T              # another view
    out = _poisoned(37, 90)[:, ::2]                # a strided output
    _run(matmul, xt, y, out, config=dt.Config([16, 16, 16]))
    torch.testing.assert_close(out, xt @ y, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["logsumexp", "divmod_k", "grid3", "attention"])
def test_more_generated_kernels_compile_with_nvrtc(name):
    _nvrtc_or_skip()
    if name == "attention":
        import importlib.util
        import os
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "examples", "dt_attention.py")
        spec = importlib.util.spec_from_file_location("dt_example_attention_nvrtc", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        qkv = [torch.randn(4, 256, 64, dtype=torch.float16) for _ in range(3)]
        cks = mod.attention.compile(*qkv, config=dt.Config([64, 64]))
    else:
        args = {"logsumexp": (torch.randn(13, 100),),
                "divmod_k": (torch.randn(100), torch.randn(100)),
                "grid3": (torch.randint(1, 5, (5, 6, 7), dtype=torch.int32),
                          torch.randint(1, 5, (5, 7), dtype=torch.int32))}[name]
        cks = globals()[name].compile(*args)
    assert all(ck.cubin for ck in cks)


def test_compile_specializes_as_a_launch_would():
    """Kernel.compile gives the code a launch with the same arguments would run: a stride equal
    to 1 is a constant, not a parameter (the loads can then take 16-byte vectors), and a
    non-contiguous input keeps its stride as a parameter."""
    x = torch.randn(64, 1500)
    (ck,) = softmax.compile(x, arch="sm_90a")
    names = {p.name for p in ck.params}
    assert "stride_x1" not in names and "stride_x0" in names, names
    (ck,) = softmax.compile(x.t().contiguous().t(), arch="sm_90a")
    assert "stride_x1" in {p.name for p in ck.params}
