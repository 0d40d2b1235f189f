"""The hl.* port (`import deuteron.language as hl`), each form traced, lowered and run on the
interpreter, and run by the oracle, against torch: gathers and scatters, hl.tile(begin, end)
with bounds the kernel loaded, hl.grid arithmetic, tile attributes, hl.register_block_size,
hl.register_tunable, the oracle's mixed-dtype addmm, softmax / GELU / reshape, hl.load /
hl.store with extra_mask, atomics, hl.rand, partial slices, `w[None, :]` on a 1-D tensor,
Helion's Config and kernel options. Fresh random data, NaN-poisoned outputs, odd sizes."""
import pytest
import torch
import torch.nn.functional as F

import deuteron as dt
import deuteron.language as hl
from deuteron.autotuner import PowerOfTwoFragment


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))


def _nan(*shape, dtype=torch.float32):
    return torch.full(shape, float("nan"), dtype=dtype)


def _both(k, args, want, **tol):
    """Kernel and oracle each agree with torch (on fresh NaN-poisoned outputs)."""
    got_ref = k.ref(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    torch.testing.assert_close(got_ref, want, **tol)
    torch.testing.assert_close(k(*args), want, **tol)


@dt.kernel
def gather_rows(idx, table, out):
    for tm, tn in hl.tile([idx.shape[0], table.shape[1]]):
        rows = idx[tm]
        out[tm, tn] = table[rows, tn] * 2.0
    return out


def test_gather_with_a_loaded_index():
    idx, table = torch.randint(0, 50, (37,)), torch.randn(50, 23)
    _both(gather_rows, (idx, table, _nan(37, 23)), table[idx] * 2)


@dt.kernel
def segment_sum(x, offsets):
    out = torch.full((offsets.shape[0] - 1, x.shape[1]), float("nan"))
    for b, tn in hl.tile([offsets.shape[0] - 1, x.shape[1]], block_size=[1, None]):
        start, end = offsets[b], offsets[b + 1]
        acc = hl.zeros([tn])
        for tk in hl.tile(start, end):
            acc = acc + x[tk, tn].sum(0)
        out[b, tn] = acc
    return out


def test_tile_between_loaded_offsets():
    offs = torch.tensor([0, 3, 3, 10, 17, 40])
    x = torch.randn(40, 9)
    want = torch.stack([x[offs[i]:offs[i + 1]].sum(0) for i in range(5)])
    _both(segment_sum, (x, offs), want)
    assert "range(start, end, BLOCK_SIZE" in segment_sum.to_newt_source(x, offs)


@dt.kernel
def grid_rows(x):
    out = torch.full((x.shape[0] - 1, x.shape[1]), float("nan"))
    for i in hl.grid(x.shape[0] - 1):
        for tn in hl.tile(x.shape[1]):
            out[i, tn] = x[i + 1, tn] - x[i, tn] + i * 0.5
    return out


def test_grid_index_arithmetic():
    x = torch.randn(11, 29)
    want = x[1:] - x[:-1] + torch.arange(10)[:, None] * 0.5
    _both(grid_rows, (x,), want)


@dt.kernel
def offset_tiles(x):
    out = torch.full_like(x, float("nan"))
    for t in hl.tile(3, x.shape[0]):
        out[t] = x[t] + t.index.float()
    for t in hl.tile(0, 3):
        out[t] = x[t] * 0.0 + t.end * 1.0
    return out


def test_tile_with_a_begin_and_the_end_attribute():
    x = torch.randn(53)
    want = x + torch.arange(53)
    want[:3] = 3.0      # one tile covers 0:3 in the oracle; its end is 3 in any tiling of 0:3
    torch.testing.assert_close(offset_tiles.ref(x.clone()), want)
    out = offset_tiles.run((x,), {}, dt.Config(block_sizes=[16, 4]))
    torch.testing.assert_close(out, want)


@dt.kernel
def tile_attrs(x):
    out = torch.full_like(x, float("nan"))
    for t in hl.tile(x.shape[0]):
        out[t] = x[t] + (t.begin + t.block_size * 0) * 1.0 + t.id * 0.0
    return out


def test_tile_begin_in_the_kernel():
    x = torch.randn(100)
    out = tile_attrs.run((x,), {}, dt.Config(block_sizes=[16]))
    torch.testing.assert_close(out, x + (torch.arange(100) // 16 * 16).float())


@dt.kernel
def block_registered(x):
    bs = hl.register_block_size(16, 64)
    out = torch.full((x.shape[0], 4), float("nan"))
    for t in hl.tile(x.shape[0], block_size=bs):
        acc = hl.zeros([t, 4])
        out[t, :] = acc + x[t, None] * float(bs) / bs
    return out


def test_register_block_size():
    x = torch.randn(101)
    want = x[:, None].expand(101, 4)
    torch.testing.assert_close(block_registered(x), want)
    assert len(block_registered.trace(x).tunable) == 1
    for b in (16, 32):
        torch.testing.assert_close(block_registered.run((x,), {}, dt.Config(block_sizes=[b])), want)


@dt.kernel
def tunable_scale(x):
    out = torch.full_like(x, float("nan"))
    k = hl.register_tunable("unroll", PowerOfTwoFragment(1, 8, 2))
    for t in hl.tile(x.shape[0]):
        out[t] = x[t] * k
    return out


def test_register_tunable_reads_the_config():
    x = torch.randn(77)
    torch.testing.assert_close(tunable_scale(x), x * 2)
    torch.testing.assert_close(tunable_scale.run((x,), {}, dt.Config(block_sizes=[32], unroll=4)),
                               x * 4)


def test_register_tunable_is_searched():
    """The search space holds the fragment's choices (the default in the default config) and
    the pattern search steps through them: with a timer that favours unroll=8, the search ends
    there, and each config it tried computed its own unroll's result (the oracle agrees)."""
    from deuteron.autotune import search as dsearch
    from deuteron.autotune.space import Space
    x = torch.randn(77)
    sp = Space(tunable_scale.trace(x))
    assert sp.knobs == {"unroll": ([1, 2, 4, 8], 2)}
    assert sp.default().tunable("unroll", None) == 2
    stepped = {c.tunable("unroll", None) for c in sp.neighbors(sp.default())}
    assert {1, 4} <= stepped
    assert {c.tunable("unroll", None) for c in sp.sample(__import__("random").Random(0), 20)} \
        == {1, 2, 4, 8}

    def evaluate(cfgs):
        return {c: dsearch.Result("ok", 10.0 - c.tunable("unroll", 0) - c.num_warps / 100)
                for c in cfgs}
    best, _ = dsearch.search(sp, evaluate, "quick", seed=3)
    assert best.tunable("unroll", None) == 8
    torch.testing.assert_close(tunable_scale.run((x,), {}, best), x * 8)


def test_fragment_choices():
    from deuteron.autotuner import (BooleanFragment, EnumFragment, IntegerFragment,
                                    fragment_choices)
    assert fragment_choices(PowerOfTwoFragment(16, 512, 64)) == [16, 32, 64, 128, 256, 512]
    assert fragment_choices(IntegerFragment(1, 5, 3)) == [1, 2, 3, 4, 5]
    wide = fragment_choices(IntegerFragment(1, 1000, 7))
    assert len(wide) <= 17 and 1 in wide and 1000 in wide and 7 in wide
    assert fragment_choices(EnumFragment(("a", "b"))) == ["a", "b"]
    assert fragment_choices(BooleanFragment()) == [False, True]
    assert fragment_choices(5) == [5]


@dt.kernel
def split_k_barrier(a, b):
    """Split-K in two loops with hl.barrier between them: partial products per K slice, then
    their sum (deterministic, unlike the atomic form); the slice count is a tunable."""
    m, k = a.shape
    n = b.shape[1]
    split = hl.register_tunable("split_k", PowerOfTwoFragment(1, 8, 2))
    bk = 1 << max(0, (-(-k // split) - 1).bit_length())     # K per slice: a power of two
    slices = -(-k // bk)
    part = torch.full((slices, m, n), float("nan"), dtype=torch.float32)
    out = torch.full((m, n), float("nan"), dtype=torch.float32)
    for tm, tn, ks in hl.tile([m, n, k], block_size=[None, None, bk]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for tk in hl.tile(ks.begin, ks.end):
            acc = acc + a[tm, tk] @ b[tk, tn]
        part[ks.id, tm, tn] = acc
    hl.barrier()
    for tm, tn in hl.tile([m, n]):
        acc = hl.zeros([tm, tn], dtype=torch.float32)
        for i in hl.static_range(slices):
            acc = acc + part[i, tm, tn]
        out[tm, tn] = acc
    return out


def test_split_k_with_barrier_and_tunable():
    a, b = torch.randn(37, 101), torch.randn(101, 29)
    want = a @ b
    for split in (1, 2, 4):
        cfg = dt.Config(block_sizes=[16] * len(split_k_barrier.trace(a, b).tunable),
                        split_k=split)
        torch.testing.assert_close(split_k_barrier.run((a, b), {}, cfg), want,
                                   rtol=1e-4, atol=1e-4)


@dt.kernel
def barrier_inside(x):
    out = torch.empty_like(x)
    for t in hl.tile(x.shape[0]):
        hl.barrier()
        out[t] = x[t]
    return out


def test_barrier_inside_a_loop_is_an_error():
    with pytest.raises(dt.TraceError, match="between two hl.tile loops"):
        barrier_inside(torch.randn(10))


@dt.kernel
def mixed_addmm(x, y, out):
    for tm, tn in hl.tile([x.shape[0], y.shape[1]]):
        acc = hl.zeros([tm, tn])
        for tk in hl.tile(x.shape[1]):
            acc = torch.addmm(acc, x[tm, tk], y[tk, tn])
        out[tm, tn] = acc
    return out


@dt.kernel
def hl_dot(x, y, out):
    for tm, tn in hl.tile([x.shape[0], y.shape[1]]):
        acc = hl.zeros([tm, tn])
        for tk in hl.tile(x.shape[1]):
            acc = hl.dot(x[tm, tk], y[tk, tn], acc=acc)
        out[tm, tn] = acc
    return out


@pytest.mark.parametrize("k", [mixed_addmm, hl_dot])
def test_fp16_matmul_into_fp32_runs_in_the_oracle(k):
    x, y = torch.randn(33, 40).half(), torch.randn(40, 17).half()
    _both(k, (x, y, _nan(33, 17)), x.float() @ y.float(), rtol=1e-3, atol=1e-3)


@dt.kernel
def mixed_baddbmm(a, b, out):
    for tb, tm, tn in hl.tile([a.shape[0], a.shape[1], b.shape[2]]):
        acc = hl.zeros([tb, tm, tn])
        for tk in hl.tile(a.shape[2]):
            acc = torch.baddbmm(acc, a[tb, tm, tk], b[tb, tk, tn])
        out[tb, tm, tn] = acc
    return out


@pytest.mark.parametrize("k,batched", [(mixed_addmm, False), (mixed_baddbmm, True)])
def test_fp16_products_added_to_fp32_are_not_rounded_to_fp16(k, batched):
    """Each k-step's product joins the fp32 accumulator unrounded: rounded to fp16 (the
    operands' dtype) first, the error grows by about 1e-3 of each partial sum. Four k-steps
    of large partials, compared against fp64 with a tolerance the rounding would exceed."""
    torch.manual_seed(3)
    x = (torch.randn(2, 19, 61) * 4).half()
    y = (torch.randn(2, 61, 23) * 4).half()
    out = _nan(2, 19, 23)
    if not batched:
        x, y, out = x[0], y[0], out[0]
    cfg = dt.Config(block_sizes=[1, 16, 16, 16] if batched else [16, 16, 16])
    assert ".to(nl.float16)" not in k.to_newt_source(x, y, out)
    got = k.run((x, y, out), {}, cfg)
    want = x.double() @ y.double()
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(k.ref(x, y, _nan(*out.shape)).double(), want, rtol=1e-5, atol=1e-4)


def test_oracle_fp8_matmul_accumulates_in_fp32():
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("no fp8 in this torch")

    @dt.kernel
    def fp8_mm(x, y):
        out = torch.empty(x.shape[0], y.shape[1])
        for tm in hl.tile(x.shape[0]):
            out[tm, :] = torch.matmul(x[tm, :], y)
        return out
    x = torch.randn(9, 16).to(torch.float8_e4m3fn)
    y = torch.randn(16, 5).to(torch.float8_e4m3fn)
    torch.testing.assert_close(fp8_mm.ref(x, y), x.float() @ y.float())


@dt.kernel
def row_ops(x, w, out):
    for tm in hl.tile(x.shape[0]):
        v = x[tm, :] * w[None, :]
        out[tm, :] = torch.softmax(v, dim=-1) + F.gelu(v) + F.gelu(v, approximate="tanh") \
            + v.softmax(1).reshape(v.shape[0], -1)
    return out


def test_softmax_gelu_reshape_and_a_new_axis_on_a_1d_tensor():
    x, w = torch.randn(13, 37), torch.randn(37)
    v = x * w
    want = torch.softmax(v, -1) + F.gelu(v) + F.gelu(v, approximate="tanh") + v.softmax(1)
    _both(row_ops, (x, w, _nan(13, 37)), want)


@dt.kernel
def masked_copy(x, n, out):
    for t in hl.tile(x.shape[0]):
        v = hl.load(x, [t], extra_mask=t.index < n)
        hl.store(out, [t], v + 1.0, extra_mask=t.index % 2 == 0)
    return out


def test_load_and_store_with_extra_mask():
    x, out = torch.randn(100), torch.randn(100)
    i = torch.arange(100)
    want = torch.where(i % 2 == 0, torch.where(i < 41, x, 0.0) + 1.0, out)
    _both(masked_copy, (x, 41, out.clone()), want)


@dt.kernel
def split_k(x, y):
    out = torch.zeros(x.shape[0], y.shape[1])
    for tm, tn, tk in hl.tile([x.shape[0], y.shape[1], x.shape[1]]):
        hl.atomic_add(out, [tm, tn], x[tm, tk] @ y[tk, tn])
    return out


def test_split_k_with_atomic_add():
    x, y = torch.randn(33, 70), torch.randn(70, 17)
    _both(split_k, (x, y), x @ y, rtol=1e-4, atol=1e-4)
    out = split_k.run((x, y), {}, dt.Config(block_sizes=[16, 16, 16]))
    torch.testing.assert_close(out, x @ y, rtol=1e-4, atol=1e-4)


@dt.kernel
def scatter_add(idx, src, out):
    for t in hl.tile(idx.shape[0]):
        hl.atomic_add(out, [idx[t]], src[t])
        hl.atomic_max(out, [idx[t] * 0 + 7], src[t])
    return out


def test_scatter_atomics_with_repeated_indices():
    idx, src = torch.randint(0, 7, (90,)), torch.randn(90)
    out = torch.randn(8)
    want = out.clone().index_add_(0, idx, src)
    want[7] = torch.maximum(want[7], src.max())
    _both(scatter_add, (idx, src, out.clone()), want)


@dt.kernel
def dropout(x, p):
    out = torch.full_like(x, float("nan"))
    for tm, tn in hl.tile([x.shape[0], x.shape[1]]):
        keep = hl.rand([tm, tn], seed=1234) > p
        out[tm, tn] = torch.where(keep, x[tm, tn] / (1 - p), 0.0)
    return out


def test_rand_draws_the_oracles_numbers_in_any_tiling():
    x = torch.randn(37, 29)
    want = dropout.ref(x, 0.3)
    assert 0.2 < (want == 0).float().mean() < 0.4
    for cfg in ([8, 8], [16, 32]):
        torch.testing.assert_close(dropout.run((x, 0.3), {}, dt.Config(block_sizes=cfg)), want)


@dt.kernel
def partial_slice(x, out):
    for t in hl.tile(x.shape[0]):
        out[t, :] = x[t, 3:8] + hl.arange(5).to(torch.float32) + hl.static_range(2)[1]
    return out


def test_partial_slices_arange_static_range():
    x = torch.randn(20, 10)
    _both(partial_slice, (x, _nan(20, 5)), x[:, 3:8] + torch.arange(5) + 1)


def test_helion_config_and_kernel_options():
    cfg = dt.Config(block_sizes=[32, 64], num_warps=8, num_stages=2, l2_groupings=[4],
                    indexing="pointer", pid_type="flat", my_knob=3)
    assert cfg.group_size == 4 and cfg.tunable("my_knob", 0) == 3
    assert dict(cfg.ignored) == {"indexing": "pointer", "pid_type": "flat"}
    assert dt.Config.from_dict(cfg.to_dict()).tunables == cfg.tunables

    @dt.kernel(config=dt.Config(block_sizes=[16]), static_shapes=True, print_output_code=False,
               ignore_warnings=[], index_dtype=torch.int32, autotune_log_level=0)
    def twice(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.shape[0]):
            out[t] = x[t] * 2
        return out
    x = torch.randn(45)
    torch.testing.assert_close(twice(x), x * 2)
    with pytest.raises(TypeError, match="no_such_option"):
        dt.kernel(no_such_option=1)(lambda x: x)


@dt.kernel
def plus_half(x):
    out = torch.full_like(x, float("nan"))
    for t in hl.tile(x.shape[0]):
        out[t] = x[t] + 0.5
    return out


def test_effort_from_the_environment(monkeypatch):
    x = torch.randn(33)
    assert plus_half.default_effort((x,)) == "none"          # the interpreter's default
    monkeypatch.setenv("DEUTERON_AUTOTUNE_EFFORT", "full")
    assert plus_half.default_effort((x,)) == "full"
    monkeypatch.setenv("DEUTERON_AUTOTUNE_EFFORT", "fast")
    with pytest.raises(ValueError, match="DEUTERON_AUTOTUNE_EFFORT"):
        plus_half.default_effort((x,))
    assert dt.kernel(use_default_config=True)(plus_half.fn).autotune_effort == "none"


def test_print_output_code_from_the_environment(monkeypatch, capsys):
    monkeypatch.setenv("DEUTERON_PRINT_OUTPUT_CODE", "1")
    k = dt.kernel(plus_half.fn)
    x = torch.randn(35)
    torch.testing.assert_close(k(x), x + 0.5)
    out = capsys.readouterr().out
    assert "# [deuteron] generated kernel plus_half_kernel" in out and "@newt.jit" in out


@pytest.mark.parametrize("how", ["env", "setting"])
def test_quiet_keeps_the_summary_line(monkeypatch, capsys, how):
    cfgs = [dt.Config(block_sizes=[16]), dt.Config(block_sizes=[32])]
    if how == "env":
        monkeypatch.setenv("DEUTERON_QUIET", "1")
        k = dt.kernel(configs=cfgs)(plus_half.fn)
    else:
        k = dt.kernel(configs=cfgs, autotune_log_level=0)(plus_half.fn)
    x = torch.randn(37)
    k.autotune((x,), effort="quick", timer=lambda fn: (fn(), 1.0)[1])
    got = capsys.readouterr()
    assert "[deuteron] plus_half: 2 configs tried" in got.out
    assert "configs" not in got.err               # no progress bar


@dt.kernel
def bmm(a, b):
    out = torch.full((a.shape[0], a.shape[1], b.shape[2]), float("nan"), dtype=a.dtype)
    for tb, tm, tn in hl.tile([a.shape[0], a.shape[1], b.shape[2]]):
        acc = hl.zeros([tb, tm, tn])
        for tk in hl.tile(a.shape[2]):
            acc = torch.baddbmm(acc, a[tb, tm, tk], b[tb, tk, tn])
        out[tb, tm, tn] = acc.to(a.dtype)
    return out


def test_batched_matmul_of_3d_tiles():
    a, b = torch.randn(3, 33, 20).half(), torch.randn(3, 20, 17).half()
    _both(bmm, (a, b), torch.bmm(a.float(), b.float()).half(), rtol=2e-2, atol=2e-2)


@dt.kernel
def scores(q, k):
    out = torch.full((q.shape[0], q.shape[1], k.shape[1]), float("nan"))
    for tb, tm, tn in hl.tile([q.shape[0], q.shape[1], k.shape[1]]):
        out[tb, tm, tn] = torch.bmm(q[tb, tm, :], k[tb, tn, :].transpose(1, 2)).float()
    return out


def test_transpose_1_2_into_bmm():
    q, k = torch.randn(2, 19, 16).half(), torch.randn(2, 21, 16).half()
    _both(scores, (q, k), q.float() @ k.float().transpose(1, 2), rtol=2e-2, atol=2e-2)


@dt.kernel
def col_extremes(x):
    out = torch.full((x.shape[1],), float("nan"))
    for tn in hl.tile(x.shape[1]):
        v = x[:, tn]
        out[tn] = torch.amax(v, dim=0) + torch.amin(v, dim=0)
    return out


def test_torch_amax_over_dim_0_reduces_dim_0_only():
    """torch.amax(v, dim=0) once reduced every dim (`dim or None`)."""
    x = torch.randn(23, 41)
    _both(col_extremes, (x,), x.amax(0) + x.amin(0))


@dt.kernel
def prefix_sums(x, out):
    for tm in hl.tile(x.shape[0]):
        v = x[tm, :]
        out[tm, :] = torch.cumsum(v, dim=1) + hl.cumsum(v * 2.0 + 1.0, 1, reverse=True)
    return out


def test_cumsum_forward_and_reverse_over_a_row():
    x = torch.randn(13, 37)
    want = x.cumsum(1) + (x * 2.0 + 1.0).flip(1).cumsum(1).flip(1)
    _both(prefix_sums, (x, _nan(13, 37)), want, rtol=1e-4, atol=1e-4)


@dt.kernel
def int_cumsum(x):
    out = torch.full(x.shape, -1, dtype=torch.int64)
    for tm in hl.tile(x.shape[0]):
        out[tm, :] = x[tm, :].cumsum(1)
    return out


def test_cumsum_of_ints_is_int64_like_torch():
    x = torch.randint(-5, 5, (9, 21), dtype=torch.int32)
    _both(int_cumsum, (x,), x.cumsum(1))


def test_cumsum_over_a_grid_tile_is_refused():
    @dt.kernel
    def bad(x):
        out = torch.empty_like(x)
        for t in hl.tile(x.shape[0]):
            out[t] = torch.cumsum(x[t], 0)
        return out
    with pytest.raises(dt.TraceError, match="whole dim"):
        bad(torch.randn(20))
