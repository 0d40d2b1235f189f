"""benchmarks/ncu_compare.py reads Nsight Compute's text and CSV pages: checked here on small
pages written in the formats `ncu --page details` and `--page source --print-source sass --csv`
print (no GPU, no ncu)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import ncu_compare as nc  # noqa: E402

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)",'
          '"Warp Stall Sampling (Not-issued Samples)","Instructions Executed",'
          '"stall_barrier","stall_wait","stall_barrier (Not Issued)"')


def _details(durations):
    out = []
    for i, d in enumerate(durations):
        out += [f"  k_{i} (32, 128, 1)x(256, 1, 1), Context 1, Stream 7, Device 0, CC 9.0",
                "    Section: GPU Speed Of Light Throughput",
                "    Duration                         ms         " + d,
                "    Memory Throughput                 %        44.59",
                "    Registers Per Thread             register/thread             112",
                "    Executed Instructions                           inst  618,496,000",
                "    Memory Throughput                          Tbyte/s         4.05"]
    return "\n".join(out)


def _sass(samples):
    parts = []
    for wait, barrier in samples:
        parts.append('"Kernel Name","k",\n' + HEADER + "\n"
                     f'"0x7f00a0","  HGMMA.64x64x16.F32 R24","{wait + 1}","{wait}","2097152",'
                     f'"0","{wait}","0"\n'
                     f'"0x7f00b0","  BAR.SYNC.DEFER_BLOCKING 0x0","{barrier}","{barrier}","2097152",'
                     f'"{barrier}","0","{barrier}"\n')
    return "".join(parts)


def test_details_one_dict_per_launch_first_metric_kept():
    d = nc.details_metrics(_details(["1.70", "1.69", "1.62", "1.61"]))
    assert [x["Duration"] for x in d] == ["1.70 ms", "1.69 ms", "1.62 ms", "1.61 ms"]
    assert d[0]["Memory Throughput"] == "44.59 %"   # the first of the two
    assert d[0]["Registers Per Thread"] == "112 register/thread"
    assert d[0]["Executed Instructions"] == "618,496,000 inst"


def test_sass_samples_and_stall_totals():
    s = nc.sass_samples(_sass([(10, 5), (11, 6), (20, 2), (21, 3)]))
    assert len(s) == 4
    assert s[1]["stalls"] == {"barrier": 6, "wait": 11}     # "(Not Issued)" columns not added
    assert s[1]["rows"][0] == ("0x7f00a0", "HGMMA.64x64x16.F32 R24", 12, 2097152)


def test_report_compares_the_second_launch_of_each():
    text = nc.report(nc.details_metrics(_details(["1.70", "1.69", "1.62", "1.61"])),
                     nc.sass_samples(_sass([(10, 5), (11, 6), (20, 2), (21, 3)])), hot=1)
    lines = text.splitlines()
    dur = next(x for x in lines if x.startswith("Duration"))
    assert dur.split()[1:] == ["1.69", "ms", "1.61", "ms"]
    wait = next(x for x in lines if x.strip().startswith("wait"))
    assert wait.split()[1:] == [f"{11 / 17 * 100:.1f}%", f"{21 / 24 * 100:.1f}%"]
    assert "HGMMA.64x64x16.F32 R24" in text.split("hottest instructions, triton")[1]
