"""The pictures in docs/: the benchmark plot is drawn from the measured table of
docs/benchmarks.md (scripts/plot_benchmarks.py), and every image in docs/img is referenced."""
import glob
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import plot_benchmarks  # noqa: E402


def test_the_measured_table_parses():
    with open(os.path.join(ROOT, "docs", "benchmarks.md")) as f:
        header, rows = plot_benchmarks.read_table(f.read())
    assert header.startswith("Measured ")
    assert len(rows) >= 10
    for r in rows:
        assert r["unit"] and float(r["newt"]) > 0, r
        assert r["r1"].endswith("x") and r["r2"].endswith("x"), r
    assert any(r["workload"].startswith("matmul tf32 8192") for r in rows)


def test_time_rows_are_turned_round():
    fast = {"unit": "us", "newt": "5", "triton": "10", "torch": "6", "r1": "0.5x", "r2": "0.5x"}
    assert plot_benchmarks.speedups(fast) == {"Triton": 2.0, "torch": 6 / 5}
    rate = {"unit": "GB/s", "newt": "300", "triton": "200", "torch": "-", "r1": "1.5x",
            "r2": "1.4x"}
    assert plot_benchmarks.speedups(rate) == {"Triton": pytest.approx(1.45)}


def test_plot_draws(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plot.png"
    plot_benchmarks.main(["--out", str(out)])
    assert out.stat().st_size > 10_000


def test_every_image_is_referenced():
    text = ""
    for md in glob.glob(os.path.join(ROOT, "**", "*.md"), recursive=True):
        with open(md) as f:
            text += f.read()
    for img in glob.glob(os.path.join(ROOT, "docs", "img", "*")):
        assert f"img/{os.path.basename(img)}" in text, f"{img} is not referenced by any page"


def test_diagram_labels_fit_their_boxes():
    import make_diagrams as md
    # swizzle.svg: a bank label per 40-pixel column; gpu_model.svg: the block's title in its
    # 330-pixel box
    assert max(md.text_width(f"{4 * p}-{4 * p + 3}", 9) for p in range(8)) < 38
    assert 'font-size="7"' not in md.swizzle()
    title = "one block = one program (here 4 warps)"
    assert f">{title}<" in md.gpu_model() and md.text_width(title, 11, bold=True) < 310
