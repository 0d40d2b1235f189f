"""The user-facing API of deuteron, item by item as the issue lists it, on the newt interpreter:
kernel options (config=, configs=, autotune_effort=, static_shapes=), dt.tile forms, indexing with
tiles / ints / full slices, reductions with dim and keepdim, matmul forms into an accumulator,
host code before and after the tile loops, the kernel object's methods, the cache key, the
progress bar and the summary line. Every numeric check compares with torch on fresh random data,
outputs poisoned first, odd sizes."""
import dataclasses
import io
import re

import pytest
import torch

import deuteron as dt
from deuteron.autotune import bench
from deuteron.autotune import cache as dcache


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DEUTERON_CACHE_DIR", str(tmp_path / "dt-cache"))
    return tmp_path / "dt-cache"


def _nan(*shape, dtype=torch.float32):
    return torch.full(shape, float("nan"), dtype=dtype)


# ----------------------------------------------------------------------------- dt.tile forms

@dt.kernel
def add_1d(x, y):
    out = torch.empty_like(x)
    for t in dt.tile(x.shape[0]):
        out[t] = x[t] + y[t]
    return out


@dt.kernel
def add_2d(x, y):
    out = torch.empty_like(x)
    for tm, tn in dt.tile([x.shape[0], x.shape[1]]):
        out[tm, tn] = x[tm, tn] * y[tm, tn] - 0.5
    return out


@dt.kernel
def add_pinned(x, y):
    out = torch.empty_like(x)
    for t in dt.tile(x.shape[0], block_size=64):
        out[t] = x[t] - y[t]
    return out


@dt.kernel
def add_pinned_2d(x):
    out = torch.empty_like(x)
    for tm, tn in dt.tile([x.shape[0], x.shape[1]], block_size=[8, None]):
        out[tm, tn] = x[tm, tn] * 2.0
    return out


def test_tile_of_an_int():
    x, y = torch.randn(1001), torch.randn(1001)
    torch.testing.assert_close(add_1d(x, y), x + y)
    assert "BLOCK_SIZE_T: nl.constexpr" in add_1d.to_newt_source(x, y)


def test_tile_of_a_list():
    x, y = torch.randn(37, 51), torch.randn(37, 51)
    torch.testing.assert_close(add_2d.run((x, y), {}, dt.Config([4, 16])), x * y - 0.5)
    torch.testing.assert_close(add_2d(x, y), x * y - 0.5)


def test_tile_block_size_pins_the_size():
    x, y = torch.randn(333), torch.randn(333)
    torch.testing.assert_close(add_pinned(x, y), x - y)
    src = add_pinned.to_newt_source(x, y)
    assert "BLOCK_SIZE_T: nl.constexpr" in src           # still a constexpr, just not tuned
    assert add_pinned.trace(x, y).tunable == []           # nothing left to tune
    tr = add_pinned_2d.trace(torch.randn(9, 10))
    assert [d.var for d in tr.tunable] == ["tn"]          # only the unpinned dim is tuned
    x2 = torch.randn(19, 23)
    torch.testing.assert_close(add_pinned_2d.run((x2,), {}, dt.Config([8])), x2 * 2)


def test_bad_block_size_is_a_trace_error():
    @dt.kernel
    def k(x):
        out = torch.empty_like(x)
        for t in dt.tile(x.shape[0], block_size=48):
            out[t] = x[t]
        return out
    with pytest.raises(dt.TraceError, match="power of two"):
        k.to_newt_source(torch.randn(10))


# ----------------------------------------------------------------------------- indexing

@dt.kernel
def mixed_index(x, out):
    """x[b, tile, :] with an int, a tile and a full slice; out gets a column per row tile."""
    for tm in dt.tile(x.shape[1]):
        row = x[1, tm, :]
        out[tm, :] = row * 2.0 + x[-1, tm, 3][:, None]


def test_indexing_with_ints_tiles_and_full_slices():
    x = torch.randn(3, 21, 13)
    out = _nan(21, 13)
    mixed_index.run((x, out), {}, dt.Config([4]))
    torch.testing.assert_close(out, x[1] * 2 + x[-1, :, 3:4])
    out2 = _nan(21, 13)
    mixed_index(x, out2)
    torch.testing.assert_close(out2, x[1] * 2 + x[-1, :, 3:4])


# ----------------------------------------------------------------------------- math and reductions

@dt.kernel
def math_names(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.shape[0]):
        v = x[t]
        a = dt.exp(v * 0.1) + dt.sigmoid(v) - dt.tanh(v) + dt.relu(v) + dt.abs(v)
        b = dt.rsqrt(dt.abs(v) + 1.0) + dt.sqrt(dt.abs(v)) + dt.log(dt.abs(v) + 2.0)
        c = dt.where(v > 0, dt.maximum(v, v * 0.5), dt.minimum(v, -v)) + dt.clamp(v, -1.0, 1.0)
        d = dt.exp2(v * 0.5) + dt.log2(dt.abs(v) + 1.0) + v.exp2() - torch.log2(v * v + 3.0)
        out[t] = a + b + c + d + torch.sin(v) * torch.cos(v) + torch.erf(v) + torch.floor(v)
    return out


def test_dt_math_names_and_torch_functions():
    x = torch.randn(517) * 3
    got = math_names(x)
    v = x
    want = (torch.exp(v * 0.1) + torch.sigmoid(v) - torch.tanh(v) + torch.relu(v) + v.abs()
            + torch.rsqrt(v.abs() + 1) + v.abs().sqrt() + torch.log(v.abs() + 2)
            + torch.where(v > 0, torch.maximum(v, v * 0.5), torch.minimum(v, -v))
            + v.clamp(-1, 1) + torch.exp2(v * 0.5) + torch.log2(v.abs() + 1) + torch.exp2(v)
            - torch.log2(v * v + 3) + torch.sin(v) * torch.cos(v) + torch.erf(v) + torch.floor(v))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@dt.kernel
def reductions(x, s0, s1, mx, mn, me, me_k):
    for tm in dt.tile(x.shape[0]):
        r = x[tm, :]
        s0[tm] = r.sum(dim=1)
        s1[tm, :] = r - r.sum(dim=-1, keepdim=True)
        mx[tm] = r.amax(dim=1)
        mn[tm] = torch.amin(r, dim=1)
        me[tm] = r.mean(dim=1)
        me_k[tm, :] = r / torch.mean(r, dim=1, keepdim=True)


@pytest.mark.parametrize("cols", [1, 7, 100])
def test_reductions_with_dim_and_keepdim(cols):
    m = 13
    x = torch.randn(m, cols) - 2.0          # negative rows: a padded 0 would win the max
    outs = [_nan(m), _nan(m, cols), _nan(m), _nan(m), _nan(m), _nan(m, cols)]
    reductions.run((x, *outs), {}, dt.Config([2]))
    s0, s1, mx, mn, me, me_k = outs
    torch.testing.assert_close(s0, x.sum(1))
    torch.testing.assert_close(s1, x - x.sum(1, keepdim=True))
    torch.testing.assert_close(mx, x.amax(1))
    torch.testing.assert_close(mn, x.amin(1))
    torch.testing.assert_close(me, x.mean(1))
    torch.testing.assert_close(me_k, x / x.mean(1, keepdim=True))


@dt.kernel
def col_reduce(x):
    """A reduction over the first axis of a tile, keepdim on a 2-D grid tile."""
    out = torch.empty(x.shape[1], dtype=torch.float32)
    for tn in dt.tile(x.shape[1]):
        col = x[:, tn].float()
        out[tn] = (col - col.mean(dim=0, keepdim=True)).amax(dim=0)
    return out


def test_reduction_over_axis_zero_with_mean():
    x = torch.randn(45, 33, dtype=torch.float16)
    got = col_reduce.run((x,), {}, dt.Config([8]))
    xf = x.float()
    torch.testing.assert_close(got, (xf - xf.mean(0, keepdim=True)).amax(0))


# ----------------------------------------------------------------------------- matmul forms

@dt.kernel
def mm_forms(x, y, bias):
    out = torch.empty(x.shape[0], y.shape[1], dtype=x.dtype)
    for tm, tn in dt.tile([x.shape[0], y.shape[1]]):
        acc = dt.full([tm, tn], 0.0, dtype=dt.float32)
        for tk in dt.tile(x.shape[1]):
            a, b = x[tm, tk], y[tk, tn]
            acc = torch.addmm(acc, a, b)
            acc += torch.matmul(a, b)
            acc = acc + a @ b
        out[tm, tn] = (acc + bias[tn].float()).to(x.dtype)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_at_matmul_and_addmm_into_an_accumulator(dtype):
    x, y = torch.randn(35, 41).to(dtype), torch.randn(41, 19).to(dtype)
    b = torch.randn(19).to(dtype)
    src = mm_forms.to_newt_source(x, y, b)
    assert src.count("nl.dot(") == 3 and "acc = nl.dot(" in src
    got = mm_forms.run((x, y, b), {}, dt.Config([16, 16, 16], num_warps=4, num_stages=2))
    want = (3 * (x.float() @ y.float()) + b.float()).to(dtype)
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol * 3)


# ----------------------------------------------------------------------------- host code

@dt.kernel
def host_before_after(x, scale: float):
    n = x.shape[0]
    y = x.reshape(n, -1)                         # host code before: a view
    tmp = torch.empty_like(y)
    for tm, tn in dt.tile([y.shape[0], y.shape[1]]):
        tmp[tm, tn] = y[tm, tn] * scale
    total = tmp.sum()                             # host code after: eager torch on the output
    return tmp.reshape(x.shape), total


def test_host_code_before_and_after_the_tile_loops():
    x = torch.randn(6, 5, 7)
    for _ in range(2):                            # traced, then replayed
        out, total = host_before_after(x, 1.5)
        torch.testing.assert_close(out, x * 1.5)
        torch.testing.assert_close(total, (x * 1.5).sum())


@dt.kernel
def explicit_out(x, out):
    for t in dt.tile(x.shape[0]):
        out[t] = torch.sigmoid(x[t])


def test_explicit_out_argument():
    x = torch.randn(999)
    out = _nan(999)
    assert explicit_out(x, out) is None
    torch.testing.assert_close(out, torch.sigmoid(x))
    ref_out = _nan(999)
    explicit_out.ref(x, ref_out)
    torch.testing.assert_close(ref_out, torch.sigmoid(x))


# ----------------------------------------------------------------------------- kernel options

def test_config_pins_one_config(monkeypatch):
    k = dt.kernel(config=dt.Config([32]))(add_1d.fn)
    monkeypatch.setattr(bench, "tune", lambda *a, **kw: pytest.fail("tuned despite config="))
    x, y = torch.randn(100), torch.randn(100)
    torch.testing.assert_close(k(x, y), x + y)
    assert k.config_for((x, y)) == dt.Config([32])


def test_configs_lists_the_candidates():
    cands = [dt.Config([16], 1), dt.Config([64], 2), dt.Config([256], 4)]
    k = dt.kernel(configs=cands, autotune_effort="quick")(add_1d.fn)
    x, y = torch.randn(300), torch.randn(300)
    cfg = k.autotune((x, y), timer=lambda fn: 1.0, progress=False)
    assert cfg in cands and set(k.last_results) == set(cands)
    one = dt.kernel(configs=[dt.Config([128], 2)])(add_1d.fn)     # one candidate: no tuning
    torch.testing.assert_close(one(x, y), x + y)
    assert one.config_for((x, y)) == dt.Config([128], 2)


def test_autotune_effort_option():
    with pytest.raises(ValueError, match="autotune_effort"):
        dt.kernel(autotune_effort="fast")(add_1d.fn)
    x, y = torch.randn(50), torch.randn(50)
    k = dt.kernel(autotune_effort="none")(add_1d.fn)
    assert k.default_effort((x, y)) == "none"
    k.autotune((x, y), progress=False)
    assert "autotune_effort='none'" in k.last_summary
    q = dt.kernel(autotune_effort="quick")(add_1d.fn)
    assert q.default_effort((x, y)) == "quick"
    with pytest.raises(ValueError, match="effort"):
        q.autotune((x, y), effort="extreme")


def test_static_shapes_option():
    k = dt.kernel(static_shapes=True)(add_2d.fn)
    x, y = torch.randn(9, 31), torch.randn(9, 31)
    src = k.to_newt_source(x, y)
    assert re.search(r"\bTM: nl.constexpr", src) and re.search(r"\bTN: nl.constexpr", src)
    torch.testing.assert_close(k(x, y), x * y - 0.5)
    a = dcache.make_key(k, (x, y), {})
    b = dcache.make_key(k, (torch.randn(10, 31), torch.randn(10, 31)), {})
    assert a["args"][0][1] == [9, 31] and a != b
    assert dcache.make_key(add_2d, (x, y), {})["args"][0][1] == [16, 32]


# ----------------------------------------------------------------------------- the kernel object

def test_config_prints_as_code_to_pin():
    cfg = dt.Config(block_sizes=[64, 32], num_warps=2, num_stages=1, group_size=4)
    text = str(cfg)
    assert text == "dt.Config(block_sizes=[64, 32], num_warps=2, num_stages=1, group_size=4)"
    pinned = dt.kernel(config=eval(text, {"dt": dt}))(add_2d.fn)
    x, y = torch.randn(70, 33), torch.randn(70, 33)
    torch.testing.assert_close(pinned(x, y), x * y - 0.5)
    assert dataclasses.replace(cfg) == eval(text, {"dt": dt})


def _examples_matmul():
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "examples", "dt_matmul.py")
    spec = importlib.util.spec_from_file_location("dt_api_example_matmul", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.matmul


def test_to_newt_source_every_tile_size_a_constexpr():
    mm = _examples_matmul()
    x, y = torch.randn(37, 29), torch.randn(29, 45)
    src = mm.to_newt_source(x, y, torch.empty(37, 45))
    head = src.split("):", 1)[0]
    for name in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M"):
        assert f"{name}: nl.constexpr" in head
    body = src.split("):", 1)[1]
    assert not re.search(r"\b(16|32|64|128|256)\b", body), body     # no baked block sizes
    assert "mask" not in mm.fn.__code__.co_names


# ----------------------------------------------------------------------------- cache, progress

def test_cache_key_fields(monkeypatch, _cache):
    x, y = torch.randn(37, 51), torch.randn(37, 51)
    key = dcache.make_key(add_2d, (x, y), {})
    import newt
    assert key["source"] == add_2d.source_hash and len(key["source"]) >= 16
    assert key["args"][0] == ["tensor", [64, 64], "float32"]
    assert key["gpu"] == "cpu-interpreter" and key["newt"] == newt.__version__
    assert dcache.cache_dir() == str(_cache)
    assert dcache.path_of(key).startswith(str(_cache))
    monkeypatch.setattr(dt.kernel(add_2d.fn), "source_hash", "x")
    other = dt.kernel(add_1d.fn)
    assert dcache.make_key(other, (x, y), {})["source"] != key["source"]
    assert dcache.make_key(add_2d, (x.half(), y.half()), {}) != key


def test_progress_bar_and_one_summary_line(capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "tqdm", None)     # the plain-text bar
    cands = [dt.Config([16], 1), dt.Config([32], 1), dt.Config([64], 2)]
    k = dt.kernel(configs=cands)(add_1d.fn)
    x, y = torch.randn(200), torch.randn(200)
    times = iter([3.0, 1.0, 2.0] + [1.0, 2.0, 3.0])   # the search, then the final round
    k.autotune((x, y), effort="quick", timer=lambda fn: next(times))
    cap = capsys.readouterr()
    assert "configs" in cap.err and "3/3" in cap.err                 # the progress counter
    lines = [ln for ln in cap.out.splitlines() if ln.strip()]
    assert len(lines) == 1, cap.out
    line = lines[0]
    assert line.startswith("[deuteron] add_1d: 3 configs tried, 0 rejected (wrong result), "
                           "0 failed to compile or launch")
    assert "best 1.0000 ms with dt.Config(block_sizes=[32]" in line


def test_progress_class_counts_without_tqdm(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "tqdm", None)
    buf = io.StringIO()
    monkeypatch.setattr("sys.stderr", buf)
    p = bench.Progress(4, "[deuteron] tuning k")
    p.update()
    p.update()
    p.close()
    assert "2/4 configs" in buf.getvalue()


def test_tolerance_table_is_stated():
    from deuteron.autotune.space import tolerance
    assert tolerance(torch.float32) == (1e-4, 1e-4)
    assert tolerance(torch.float32, tf32=True) == (2e-2, 2e-2)
    assert tolerance(torch.float16) == tolerance(torch.bfloat16) == (2e-2, 2e-2)
    assert tolerance(torch.float64) == (1e-7, 1e-7)
    assert tolerance(torch.int32) == tolerance(torch.bool) == (0.0, 0.0)
    doc = dt.Kernel.autotune.__doc__ + dt.Kernel.__doc__
    for text in ("fp32 1e-4", "fp16/bf16 2e-2", "fp64 1e-7", "exact"):
        assert text in doc, text


@dt.kernel
def int_sums(x):
    total = torch.empty(x.shape[0], dtype=torch.int64)
    positive = torch.empty(x.shape[0], dtype=torch.int64)
    for tm in dt.tile(x.shape[0]):
        r = x[tm, :]
        total[tm] = r.sum(dim=1)
        positive[tm] = (r > 0).sum(dim=1)
    return total, positive


def test_integer_sums_accumulate_in_int64_as_torch_does():
    x = torch.randint(-128, 127, (7, 301), dtype=torch.int8)      # int8 sums would overflow
    total, positive = int_sums.run((x,), {}, dt.Config([2]))
    assert torch.equal(total, x.sum(1)) and torch.equal(positive, (x > 0).sum(1))
    assert "nl.sum(r.to(nl.int64), axis=1)" in int_sums.to_newt_source(x)


@dt.kernel
def mixed_add(x, y):
    out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    for t in dt.tile(x.shape[0]):
        out[t] = x[t] + y[t]
    return out


@pytest.mark.parametrize("dx,dy", [(torch.float16, torch.bfloat16), (torch.bfloat16, torch.int32),
                                   (torch.int8, torch.bfloat16), (torch.float16, torch.float32)])
def test_mixed_dtypes_compute_as_torch_promotes(dx, dy):
    """Where Triton's promotion (newt's) and PyTorch's part ways, deuteron casts both tiles to
    PyTorch's common dtype first, so the kernel computes what the oracle computes: fp16 + bf16
    in fp32 (Triton: fp16), bf16 + int in bf16 (Triton: fp32)."""
    def rand(d):
        return torch.randint(-20, 20, (203,), dtype=d) if not d.is_floating_point \
            else torch.randn(203).to(d)
    x, y = rand(dx), rand(dy)
    out = mixed_add.run((x, y), {}, dt.Config([64]))
    torch.testing.assert_close(out, mixed_add.ref(x, y), rtol=0, atol=0)
    # a cast only where the two promotions differ, and only of the tile not already in
    # torch's dtype (fp16 + fp32 is fp32 for both: no cast)
    want = 0 if torch.float32 in (dx, dy) else sum(d != torch.result_type(x, y) for d in (dx, dy))
    assert mixed_add.to_newt_source(x, y).count(".to(nl.") == want


@dt.kernel
def row_softmax(x):
    out = torch.empty_like(x)
    for tm in dt.tile(x.shape[0]):
        r = x[tm, :]
        e = torch.exp(r - r.amax(dim=1, keepdim=True))
        out[tm, :] = e / e.sum(dim=1, keepdim=True)
    return out


@pytest.mark.parametrize("shape", [(0, 5), (1, 1), (3, 1), (1, 17)])
def test_empty_and_single_element_extents(shape):
    x = torch.randn(*shape)
    got = row_softmax(x)
    assert got.shape == x.shape
    torch.testing.assert_close(got, torch.softmax(x, 1))


def test_source_hash_covers_helper_functions(tmp_path):
    import importlib.util
    body = '''
import torch
import deuteron as dt

@dt.kernel
def k(x):
    out = torch.empty_like(x)
    for t in dt.tile(x.shape[0]):
        out[t] = scale(x[t])
    return out

def scale(v):          # defined below the kernel: still part of its hash
    return v * {factor}
'''
    hashes = []
    for i, factor in enumerate(("2.0", "3.0")):
        path = tmp_path / f"helper_mod_{i}.py"
        path.write_text(body.format(factor=factor))
        spec = importlib.util.spec_from_file_location(f"helper_mod_{i}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        x = torch.randn(50)
        torch.testing.assert_close(mod.k(x), x * float(factor))
        hashes.append(mod.k.source_hash)
    assert hashes[0] != hashes[1]
