# Lab script, measured on commit 60057ea: it patches the library's internals of that commit
# (check it out to rerun it); not run by the test suite.
"""Experiments on the H200: the tutorial matmul's generated code, hand-transformed, timed
against itself, Triton and cuBLAS in one process (each variant checked first on odd shapes with
NaN-poisoned outputs). A place to try a codegen idea before building it into the passes.

    PYTHONPATH=. [VARIANTS=base,mc] [L2PROM=3] [ROUNDS=5] [CFGS=128x256x64x8x4,...] \
        [SIZES=fp16:2048,bf16:8192] \
        python benchmarks/matmul_variants.py

Variants (source transforms of newt's CUDA C++ for matmul_kernel, VARIANTS picks them):
  base    the generated code (persistent where passes/persistent.py applies)
  nopersist the generated code with the persistent pass off; every variant below transforms
          this non-persistent form, except plag2
  cpasync the TMA pass off: the cp.async wgmma ring (all threads copy, as Triton's pointer
          loads do), non-persistent
  panels  the generated code with passes/store_tma.py's PIPELINE_PANELS: thread 0 stores
          each C panel as soon as it is written (measured below: off)
  lanes   probe: the producer's boxes issued by lanes 0..n-1 of warp 0, one each (2026-12-02
          at 2048: s3 +1-5%; s4 -1-2% at 11:12, +0-2% at 12:41)
  plead   probe: lanes for the prologue's copies only (the first num_stages - 1 stages), the
          steady state's boxes by thread 0 as generated (2026-12-02 12:41: s3 +1-4%, s4 level)
  bfirst  probe: the producer issues B's boxes before A's (2026-12-02 11:12: s4 level)
  l2pf    probe: the persistent kernel's CTAs prefetch their shares of A's and B's boxes into
          L2 (cp.async.bulk.prefetch.tensor) after their first copies, when both operands fit
          in half of L2 (2048^3 only)
  noA, noB2  speed probes, wrong results: the persistent kernel without A's TMA copy, or
          without the second half of B's (128x256 tiles), the same wgmmas (_probe)
  plag2   the persistent kernel with S - 2 copies in flight instead of S - 1 (RingPlan.defer):
          thread 0 refills the stage released one k-step earlier, so it never waits for this
          k-step's slowest warp (the handshake suspected at 128x128x64 s4, one CTA per SM,
          9-15% behind Triton on 2026-12-02; not measured yet)
  drain1  the ring's drain keeps one wgmma group in flight (wait<1>) instead of none
  lag2    a 4-stage ring consumes the tile copied two iterations before, not three: the copy of
          iteration i reuses a stage released one iteration earlier
  cl      cluster launch (pairs of CTAs) with multicast off: the cost of the pairing alone
  mc      clusters of two CTAs (pids 2c, 2c+1); when both CTAs of a pair read the same B tile
          (same column base, checked at run time through distributed shared memory), each
          copies half of its B boxes by TMA multicast into both CTAs' stages, and the stages'
          empty barriers count both CTAs' warps; otherwise each copies its own
  mclag2  mc + lag2
  mccta   mc with the remote arrive at the default semantics (.release.cta, as CUTLASS's
          cluster barrier arrives) instead of .release.cluster
  dgroup  the drain's last num_stages - 1 tiles in one wgmma commit group, one wait at the end
  wait2   two wgmma groups in flight per warpgroup (wait_group 2, each stage released two
          k-steps later, the ring one tile shallower: lag2); for 32-deep k-steps
  hoistwu the warp-uniform warp index computed once at the start, not per k-step (hoist_wu)
  persist the TMA path as a persistent kernel, its ring running across a CTA's tiles, the
          epilogue overlapped with the next tile's first copies (benchmarks/persist_variant.py)
  bigsmem the generated code launched with persist's dynamic shared memory (its cost alone)
  perthread the store_tma pass off: the epilogue's tile read back from padded rows into
          per-thread 16-byte stores, as before the pass (measured first as `tmastore`, a hand
          transformation of the generated code into TMA stores, 2026-12-01 22:00 UTC: below)
L2PROM sets the tensor maps' L2 promotion (0 none, 2 128-byte, 3 256-byte: newt's default) for
the whole run; the variants p0..p3 compare promotions in one process (VARIANTS=p2,p3).

Measured 2026-12-01 19:19-19:30 UTC, best of 128x256x64 s4/s3 and 256x128x64 s4, TFLOP/s
(fp16 2048 / 4096 / 8192; Triton in the same process):
  base 587 / 657 / 640, Triton 592 / 645 / 643
  drain1 472 / 531 / 528: ptxas serializes every wgmma of the kernel (C7515), -20%
  lag2 585 / 639 / 639; cl 570 / 631 / 632 (the pairing alone costs 1-3%)
  mc 406 / 459 / 475, mclag2 402 / 465 / 483: 28-32% slower (128x128 tiles: half the
    speed); correct on every check shape. The cause is the remote arrive's .release.cluster:
  mccta (19:41, 3 rounds) 561 / 603 / 629 (bf16 2048 / 8192: 584 / 659) against base 588 /
    642 / 633 (601 / 671), Triton 584 / 621 / 613 (615 / 657): level with base at 8192 with 3
    stages (629 / 628, bf16 659 / 658), 1-6% behind elsewhere, the cluster launch's own 1-3%
    included. Halving B's L2 reads does not pay for the pairing here.
  dgroup 596 / 631 / 627 against base 596 / 634 / 640: no gain
  L2 promotion, three processes: 256-byte 595 / 646 / 639 (bf16 2048 / 8192: 609 / 670),
    128-byte 593 / 639 / 633 (603 / 664), none 591 / 643 / 639 (597 / 670): 256-byte is
    ahead in all five rows by 0.3-1.1% (across processes). In one process (19:45, VARIANTS=p2,p3,
    7 interleaved rounds): 256-byte 598 / 626 / 633 (606 / 670) against 128-byte 595 / 626 /
    633 (601 / 661), Triton 591 / 619 / 631 (617 / 656): level or ahead by up to 1.4%. It became
    the default (newt/runtime/tensormap.py)
  tmastore (22:00 UTC, 5 rounds, best of 128x256x64 s4/s3, 256x128x64 s4, 128x128x64 s3): fp16
    2048 / 4096 / 8192 601 / 631 / 642 against base 591 / 638 / 637, Triton 604 / 626 / 629;
    bf16 2048 / 8192 622 / 665 against 603 / 657, Triton 615 / 657. It became the store_tma
    pass (newt/passes/store_tma.py), with the epilogue's activation computed in the fragment
Measured 2026-12-01 23:48 and 2026-12-02 00:10 UTC (SIZES=fp16:2048,bf16:2048,...):
  hoistwu (7 rounds, best of 128x256x64 s4/s3; fp16 2048, bf16 2048 / 8192) 595 / 620 / 674
    against base 599 / 621 / 668, Triton 608 / 624 / 684: no gain
  BK = 32 configs (128x256x32 s6/s8, 256x128x32 s8) run 15-20% below BK = 64 for newt at every
    size (fp16 2048: 485-536 against 596; Triton 559-595 against 603)
  wait2 (5 rounds) at 128x256x32 s8 / s6: fp16 2048 504 / 482 against base 499 / 484, bf16
    2048 496 / 489 against 494 / 491, fp16 8192 517 / 500 against 524 / 513 (Triton 581-616):
    the queue depth is not what slows the 32-deep k-step; at 128x256x64 s4 level (603 / 614 /
    627 against 605 / 606 / 632)
Measured 2026-12-02 02:12-02:37 UTC (the persistent kernel as `base`; TFLOP/s):
  plag2 (5 rounds): 128x128x64 s4 fp16 2048 421 against base 479, 8192 476 against 493; at
    128x256x64 s4 597 / 599 / 661 against 589 / 610 / 668 (fp16 2048, bf16 2048, fp16 8192):
    the handshake is not what holds the one-CTA 128x128 ring back; one copy fewer in flight
    costs more
  nopersist at 128x128x64 s4: 509 / 509 / 523 against base 479 / 476 / 493 (Triton 548 /
    551 / 565); at 128x256 s3 596 / 601 / 614 against 579 / 572 / 626
  cpasync: 70% of base everywhere (421 / 430 / 445 at 128x256 s4): newt's cp.async wgmma
    ring (two CTA barriers per k-step) is no alternative to the TMA ring
  noA / noB2 (3 rounds, probes): fp16 8192 783 / 789 against 633 at 128x256 s4, 637 against
    488 at 128x128 s4 (noA); fp16 2048 640 / 624 against 599. With a third fewer bytes per
    k-step arriving by TMA, the same wgmmas run 24% faster at 8192: the k-loop waits for data.
    Nsight Compute at 2048 (ncu_compare.py, NCU_CLOCKS=none) agrees: the consumers' hottest
    stall is the full-barrier wait (41% of samples at 128x256), 71% tensor-pipe use.
  A by the warps' own cp.async, B by TMA (02:37, 3 rounds; a change to codegen/persistent.py,
    built, measured and not kept: each warp copies the 16-row slices of A its wgmmas read,
    completes them on the stage's full barrier through cp.async.wait_group, a proxy fence and an
    arrive; correct on the emulator and on the H200's checks): 20-25% slower everywhere, fp16
    2048 / 4096 / 8192 478 / 521 / 501 against 603 / 670 / 648, bf16 2048 / 8192 475 / 526
    against 605 / 683. With one arrival per warp (lane 0, after __syncwarp; 03:00, 3 rounds,
    the four-config sweep) still 20-25% slower: fp16 2048 / 4096 / 8192 462 / 506 / 487
    against 591 / 643 / 646, bf16 471 / 520 / 507 against 605 / 665 / 671 (Triton fp16 589 /
    630 / 643, bf16 613 / 673 / 669). Not the 256 arrivals on one barrier word, then; the
    per-thread copy, wait and fence cost more than the bytes they take off TMA.
Measured 2026-12-02 05:55-06:04 UTC (128x256x64 s4 and s3; TFLOP/s):
  panels (3 rounds, all six rows): level at 2048 (fp16 603 against base 611, bf16 626 against
    625), slower at 4096 / 8192 (fp16 630 / 617 against 656 / 653, bf16 675 / 647 against 686
    / 669): PIPELINE_PANELS stays off
  l2pf (5 rounds, then 11): s3 gains 3-5% at 2048 (fp16 584 / 582 against 556 / 568, bf16 599
    / 597 against 568 / 566), its two copies in flight waiting on HBM after the flush; the s4
    winner does not (fp16 597 / 593 against 583 / 591, bf16 614 / 600 against 610 / 609).
    fp16 4096, where the probe does nothing (the operands are 64 MB), read 639 against 654 in
    the same run: differences of 2% between runs of these rows are noise. Not kept.
  event_gap.py (CUPTI kernel durations in the same loop as the events, fp16 / bf16 2048):
    newt's 128x256 s4 kernel runs 25.15 / 24.61 us, Triton's best (s3) 25.25 / 24.67 and its
    s4 25.47 / 24.80; the events read 28.88 / 27.73 against Triton's best 28.90 / 27.71. The
    ~3.4 us around every kernel is the launch's latency on the GPU (launch_latency.py: an
    empty kernel of the same grid, 3.4 us after the flush whatever its parameter bytes (64 or
    448) and shared memory (0 to 211 KB)). At 2048 the two compilers' kernels are level.
"""
from __future__ import annotations

import ctypes
import os
import re
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from bench_matmul import launch  # noqa: E402  (the benchmark's launch of the tutorial kernel)
import torch  # noqa: E402

import newt  # noqa: E402
import newt.codegen  # noqa: E402
from newt.runtime import launch as nlaunch  # noqa: E402
from persist_variant import PERSIST_SHARED, persist  # noqa: E402

HELPERS = r"""
NEWT_DEV newt_u32 nt_cl_rank() { newt_u32 r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
NEWT_DEV newt_u32 nt_cl_n() { newt_u32 r; asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r)); return r; }
NEWT_DEV newt_u32 nt_mapa(newt_u32 a, newt_u32 rank) {
  newt_u32 r; asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank)); return r; }
NEWT_DEV newt_u32 nt_ld_cluster(newt_u32 a) {
  newt_u32 r; asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(r) : "r"(a) : "memory"); return r; }
NEWT_DEV void nt_arrive_remote(newt_u32 a) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(a) : "memory"); }
NEWT_DEV void nt_arrive_remote_cta(newt_u32 a) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" :: "r"(a) : "memory"); }
NEWT_DEV void nt_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory"); }
NEWT_DEV void nt_tma_load_2d_mc(newt_u32 dst, const newt_tmap* map, int c0, int c1, newt_u32 bar, unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3}], [%4], %5;\n"
               :: "r"(dst), "l"((newt_u64)map), "r"(c0), "r"(c1), "r"(bar), "h"(mask) : "memory"); }
"""


def _probe(src, drop):
    """Speed probe (wrong results: the CHECK lines report it): thread 0 skips the TMA copies
    whose call matches `drop` and expects that many fewer bytes, so each k-step moves fewer
    bytes by TMA while the wgmmas stay the same. A jump in speed says TMA-delivered bytes cap
    the k-loop."""
    if "&nt_tmap1" not in src:
        return src          # the cp.async ring (rows not 16-byte aligned): unchanged
    out, cut = [], 0
    for line in src.split("\n"):
        if "newt_tma_load_2d(st" in line and re.search(drop, line):
            cut += 1
            continue
        out.append(line)
    if not cut:
        return src          # a tile without such a copy (noB2 on 128-wide tiles): unchanged
    src = "\n".join(out)
    box = {"&nt_tmap0": 16384, "&nt_tmap1": 8192}[re.search(r"&nt_tmap\d", drop).group(0)]
    per = box * cut // src.count("newt_mbar_expect_tx(fb, ")
    return re.sub(r"newt_mbar_expect_tx\(fb, (\d+)u\)",
                  lambda m: f"newt_mbar_expect_tx(fb, {int(m.group(1)) - per}u)", src)


def drain1(src):
    # the drain loop's per-iteration wait<0> (the one followed by the loop's closing brace and
    # the final wait<0>)
    new, n = re.subn(r"newt_wgmma_wait<0>\(\);\n  }\n  newt_wgmma_wait<0>\(\);",
                     "newt_wgmma_wait<1>();\n  }\n  newt_wgmma_wait<0>();", src)
    assert n == 1, "drain not found"
    return new


def mc(src):
    if "&nt_tmap1" not in src:
        return src          # the cp.async ring (rows not 16-byte aligned): unchanged
    src = src.replace('extern "C" __global__', HELPERS + '\nextern "C" __global__', 1)
    # barrier init: exchange B's column base first, decide, init with the right count
    m = re.search(r"  if \(tid == 0\) \{ for \(int s = 0; s < (\d+); \+\+s\) \{ newt_mbar_init\((.*?), 1\); "
                  r"newt_mbar_init\((.*?), 8\); \} newt_fence_mbar_init\(\); \}\n  __syncthreads\(\);\n", src)
    assert m, "init not found"
    nst, full, empty = m.group(1), m.group(2), m.group(3)
    bvar = re.search(r"&nt_tmap1, \(int\)(v_\d+) \+ 0,", src).group(1)
    init = (
        "  __shared__ newt_u32 nt_xchg;\n"
        "  const newt_u32 nt_rank = nt_cl_rank(), nt_ncl = nt_cl_n();\n"
        f"  if (tid == 0) nt_xchg = (newt_u32){bvar};\n"
        "  nt_cluster_sync();\n"
        f"  const bool nt_mc = nt_ncl == 2 && nt_ld_cluster(nt_mapa(newt_smem_addr(&nt_xchg), nt_rank ^ 1)) == (newt_u32){bvar};\n"
        f"  if (tid == 0) {{ for (int s = 0; s < {nst}; ++s) {{ newt_mbar_init({full}, 1); "
        f"newt_mbar_init({empty}, nt_mc ? 16 : 8); }} newt_fence_mbar_init(); }}\n"
        "  nt_cluster_sync();\n")
    src = src[:m.start()] + init + src[m.end():]
    # consumer release: also arrive on the partner's empty barrier
    m = re.search(r"if \(c >= 1 && lane == 0\) newt_mbar_arrive\((.*)\);\n", src)
    assert m
    e = m.group(1)
    src = src[:m.start()] + (f"if (c >= 1 && lane == 0) {{ const newt_u32 nt_e = {e}; newt_mbar_arrive(nt_e); "
                             "if (nt_mc) nt_arrive_remote(nt_mapa(nt_e, nt_rank ^ 1)); }\n") + src[m.end():]
    # producer: B boxes split between the pair, multicast
    boxes = re.findall(r"      newt_tma_load_2d\(st \+ \d+u, &nt_tmap1, .*\);\n", src)
    assert boxes and len(boxes) % 2 == 0, boxes
    half = len(boxes) // 2
    block = "".join(boxes)
    mcb = []
    for i, b in enumerate(boxes):
        call = b.strip().replace("newt_tma_load_2d(", "nt_tma_load_2d_mc(").replace(", fb);", ", fb, 3);")
        mcb.append(f"        if (nt_rank == {i // half}u) {call}\n")
    new = ("      if (!nt_mc) {\n" + "".join("  " + b for b in boxes) + "      } else {\n"
           + "".join(mcb) + "      }\n")
    src = src.replace(block, new, 1)
    # the end: no CTA leaves while its partner may still arrive on its barriers
    assert src.rstrip().endswith("}")
    src = src.rstrip()[:-1] + "  nt_cluster_sync();\n}\n"
    return src


def l2pf(src):
    """Probe: after its first copies, each CTA prefetches its share of A's and B's boxes into L2
    (cp.async.bulk.prefetch.tensor, box j = blockIdx.x + i * gridDim.x, numbered k-step first
    so that the next k-steps are asked for first), when both operands fit in a half of L2
    (2048^3: 16 MB); the copies then hit L2 instead of HBM after the flush."""
    if "&nt_tmap1" not in src or "nt_grid" not in src:
        return src
    sig = re.search(r'extern "C" __global__ .*?\((.*?)\) \{', src).group(1)
    names = {re.sub(r"_\d+$", "", n.split()[-1]): n.split()[-1] for n in sig.split(", ")}
    M, N, K = names["M"], names["N"], names["K"]
    helper = (
        "NEWT_DEV void nt_pf_2d(const newt_tmap* map, int c0, int c1) {\n"
        '  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];"\n'
        '               :: "l"((newt_u64)map), "r"(c0), "r"(c1) : "memory");\n}\n')
    src = src.replace('extern "C" __global__', helper + 'extern "C" __global__', 1)
    bm = int(re.search(r"newt_tma_load_2d\(st \+ (\d+)u, &nt_tmap1", src).group(1)) // 128
    code = (
        f"  if (tid == 0 && 2ll * ((long long){M} * {K} + (long long){K} * {N}) <= (24ll << 20)) {{\n"
        f"    const int nm = ({M} + {bm - 1}) / {bm}, nk = ({K} + 63) / 64, nn = ({N} + 63) / 64;\n"
        "    for (int j = (int)blockIdx.x + 3 * nm; j < nk * nm; j += (int)gridDim.x)\n"
        f"      nt_pf_2d(&nt_tmap0, (j / nm) * 64, (j % nm) * {bm});\n"
        "    for (int j = (int)blockIdx.x + 3 * nn; j < nk * nn; j += (int)gridDim.x)\n"
        "      nt_pf_2d(&nt_tmap1, (j % nn) * 64, (j / nn) * 64);\n"
        "  }\n")
    # after the prologue's first copies: the k-steps needed first are asked for first
    k = src.index("  for (i32 nt_pid = ")
    return src[:k] + code + src[k:]


def _producer_blocks(src):
    """(start, end) of each copy block of the persistent kernel's producer: from its expect_tx
    line through its last box."""
    lines = src.split("\n")
    out, i = [], 0
    while i < len(lines):
        if "newt_mbar_expect_tx(fb, " in lines[i]:
            j = i + 1
            while j < len(lines) and "newt_tma_load_2d(st + " in lines[j]:
                j += 1
            out.append((i, j))
            i = j
        else:
            i += 1
    return lines, out


def lanes(src, blocks_to=None):
    """Probe: the producer's boxes issued by lanes 0..n-1 of warp 0, one box each, instead of
    all n by thread 0 (lane 0 still arms the barrier and waits for the last store; the lanes
    meet after that wait, so no box lands in a stage the store still reads). Does issuing a
    stage's boxes one after another delay their arrival? `blocks_to`: only the first that many
    copy blocks (1: the prologue's, `plead`)."""
    if "nt_steps" not in src or "&nt_tmap1" not in src:
        return src
    lines, blocks = _producer_blocks(src)
    n = {j - i - 1 for i, j in blocks}
    assert len(n) == 1, n
    n = n.pop()
    guard = "if (tid == 0 && nt_g < nt_steps)"
    wait = "if (nt_pending && s == nt_free_slot) { newt_bulk_wait_read(); nt_pending = false; }"
    assert len(re.findall(re.escape(guard), src)) == len(blocks)
    assert src.count(wait) == len(blocks)
    blocks = blocks[:blocks_to]
    for i, j in blocks:
        lines[i] = lines[i].replace("newt_mbar_expect_tx(", "if (lane == 0) newt_mbar_expect_tx(")
        for k in range(i + 1, j):
            lines[k] = lines[k].replace("newt_tma_load_2d(", f"if (lane == {k - i - 1}) newt_tma_load_2d(")
        # the block's guard and its wait for the last store: the nearest ones above it
        g = max(k for k in range(i) if guard in lines[k])
        lines[g] = lines[g].replace(guard, f"if (tid < {n} && nt_g < nt_steps)")
        w = max(k for k in range(g, i) if wait in lines[k])
        lines[w] = lines[w].replace(wait, wait + f" __syncwarp({hex((1 << n) - 1)}u);")
    return "\n".join(lines)


def bfirst(src):
    """Probe: the producer issues B's boxes before A's (the larger part of a 128x256 stage
    first)."""
    if "nt_steps" not in src or "&nt_tmap1" not in src:
        return src
    lines, blocks = _producer_blocks(src)
    for i, j in blocks:
        body = lines[i + 1:j]
        lines[i + 1:j] = [ln for ln in body if "&nt_tmap1" in ln] + \
            [ln for ln in body if "&nt_tmap1" not in ln]
    return "\n".join(lines)


def lag2(src):
    """Consume the tile copied two iterations ago instead of num_stages - 1 (rings of 4+
    stages): the copy of iteration i then reuses a stage released one iteration earlier, so the
    issuing thread does not wait for this iteration's slowest warp."""
    m = re.search(r"if \((ring_it\d+) >= (\d+)\) \{\n      const int c = \1 - \2;", src)
    if not m or int(m.group(2)) < 3:
        return src
    it, lag = m.group(1), int(m.group(2))
    src = src.replace(m.group(0), f"if ({it} >= {lag - 1}) {{\n      const int c = {it} - {lag - 1};")
    m2 = re.search(rf"\((ring_n\d+) - 1\) - {lag} \+ 1", src)
    assert m2, "drain not found"
    return src.replace(m2.group(0), f"({m2.group(1)} - 1) - {lag - 1} + 1")


def drain_group(src):
    """the last lag stages: all their wgmmas in one commit group (one wait at the end), when
    the loop ran at least lag times; the old drain otherwise"""
    m = re.search(r"  for \(int ring_c = max\(\((ring_n\d+) - 1\) - (\d+) \+ 1, 0\); ring_c <= \(\1 - 1\); \+\+ring_c\) \{\n(.*?)\n    newt_wgmma_commit\(\);\n    newt_wgmma_wait<0>\(\);\n  \}\n", src, re.S)
    if not m:
        return src
    n, lag, body = m.group(1), int(m.group(2)), m.group(3)
    steps = "".join(f"    {{\n    const int ring_c = {n} - {lag - j};\n{body}\n    }}\n" for j in range(lag))
    new = (f"  if ({n} >= {lag}) {{\n{steps}    newt_wgmma_commit();\n    newt_wgmma_wait<0>();\n  }} else {{\n"
           + src[m.start():m.end()] + "  }\n")
    return src[:m.start()] + new + src[m.end():]


def wait2(src):
    """Two wgmma groups in flight instead of one: each k-step waits with wait_group 2 and
    releases the stage of the tile two k-steps back; the ring consumes one tile sooner (lag2)
    so that the stage a copy reuses is still released in the same iteration. For short k-steps
    (BK = 32: two wgmma per warpgroup per stage), whose one queued group does not cover the
    barrier handshake between stages."""
    new = lag2(src)
    if new == src:
        return src
    new, n = re.subn(r"newt_wgmma_wait<1>\(\);\n(\s*)__syncwarp\(\);\n(\s*)"
                     r"if \(c >= 1 && lane == 0\) newt_mbar_arrive\((.*?)\(\(c - 1\) % (\d+)\)\);",
                     r"newt_wgmma_wait<2>();\n\1__syncwarp();\n\2if (c >= 2 && lane == 0) "
                     r"newt_mbar_arrive(\3((c - 2) % \4));", new)
    assert n == 1, "release not found"
    return new


def hoist_wu(src):
    """the warp index as a warp-uniform value (a shuffle) computed once at the kernel's start
    instead of in every k-step's descriptor: the shuffle and its move to a uniform register
    leave the path between a stage's barrier wait and its first wgmma"""
    k = src.index('extern "C" __global__')
    pre, body = src[:k], src[k:]
    if "newt_warp_uniform()" not in body:
        return src
    head = "  (void)lane; (void)warp;\n"
    assert head in body
    body = body.replace("newt_warp_uniform()", "nt_wu")
    return pre + body.replace(head, head + "  const int nt_wu = newt_warp_uniform();\n", 1)


def mccta(src):
    """mc with the remote release at the default (.release.cta) semantics, as CUTLASS's
    cluster barrier arrives, instead of .release.cluster"""
    return mc(src).replace("nt_arrive_remote(nt_mapa", "nt_arrive_remote_cta(nt_mapa")


def cl(src):
    return mc(src).replace("const bool nt_mc = nt_ncl == 2 && ", "const bool nt_mc = false && ")


ALL = {"base": lambda s: s, "drain1": drain1, "lag2": lag2, "cl": cl, "mc": mc,
       "mclag2": lambda s: mc(lag2(s)), "dgroup": drain_group, "mccta": mccta,
       "perthread": lambda s: s, "hoistwu": hoist_wu,
       "wait2": wait2, "persist": persist, "bigsmem": lambda s: s, "nopersist": lambda s: s,
       "plag2": lambda s: s, "cpasync": lambda s: s, "panels": lambda s: s, "l2pf": l2pf,
       "lanes": lanes, "plead": lambda s: lanes(s, 1), "bfirst": bfirst,
       "noA": lambda s: _probe(s, r"&nt_tmap0,"),
       "noB2": lambda s: _probe(s, r"&nt_tmap1, \(int\)nt_co3 \+ (128|192),")}
# pN: the generated code, its tensor maps built with L2 promotion N (an A/B of promotions in
# one process: each such variant gets its own copies of the operands, so its own maps)
ALL.update({f"p{n}": ALL["base"] for n in range(4)})
VARIANTS = {v: ALL[v] for v in os.environ.get("VARIANTS", "base,dgroup").split(",")}
CLUSTER = {"cl", "mc", "mclag2", "mccta"}
CURRENT = ["base"]
_generate = None     # newt's own codegen, taken by install() (not at import: a test may have
#                      swapped it for an emulator's by then)


def generate(fn, options):
    src, name = _generate(fn, options)
    if name == "matmul_kernel":
        src = ALL[CURRENT[0]](src)
    return src, name


# cluster launch: a CUlaunchAttribute (id 4 = CLUSTER_DIMENSION, value (2, 1, 1)) in the config
_ATTR = ctypes.create_string_buffer(72)
struct.pack_into("<I4xIII", _ATTR, 0, 4, 2, 1, 1)
_ATTR_ADDR = ctypes.addressof(_ATTR)
_init = None


def _launcher_init(self, binary, device, positions):
    _init(self, binary, device, positions)
    if binary.meta["name"] == "matmul_kernel" and CURRENT[0] in CLUSTER:
        pack = self.pack

        def pk(buf, off, *a):
            pack(buf, off, *a)
            if a[0] % 2 == 0:     # an odd grid launches without clusters (nt_cl_n() == 1)
                struct.pack_into("<QI", buf, 40, _ATTR_ADDR, 1)
        self.pack = pk
        f = list(self.fast)
        f[0] = pk
        self.fast = tuple(f)
    if (binary.meta["name"] == "matmul_kernel" and CURRENT[0] == "persist"
            and len(binary.meta.get("tma_maps") or ()) == 3):   # A, B and C maps: persistent
        _persistent_launch(self, device)
    if binary.meta["name"] == "matmul_kernel" and CURRENT[0] == "bigsmem":
        _persistent_launch(self, device, clamp=False)


def _persistent_launch(self, device, clamp=True):
    """one CTA per SM at most, and the shared memory of the epilogue's own boxes"""
    import torch
    nsm = torch.cuda.get_device_properties(device.index).multi_processor_count if clamp else 1 << 31
    self.shared += PERSIST_SHARED
    self.kernel.set_dynamic_shared(self.shared)
    pack, shared = self.pack, self.shared

    def pk(buf, off, gx, gy, gz, bx, by, bz, _shared, *a):
        pack(buf, off, min(gx, nsm), gy, gz, bx, by, bz, shared, *a)
    self.pack = pk
    f = list(self.fast)
    f[0], f[3] = pk, shared
    self.fast = tuple(f)


_CMAPS: dict = {}


def _persistent_pass(fn, options):
    """passes/persistent.py for `base` only: the other variants transform (or are) the
    non-persistent kernel (`nopersist`: the pass off)."""
    from newt.passes import persistent
    persistent._ON[0] = CURRENT[0] in PERSISTENT
    fn = persistent.plan_persistent(fn, options) or fn
    plan = fn.attrs.get("persistent")
    if CURRENT[0] == "plag2" and plan is not None and plan.ring.stages >= 3:
        plan.ring.defer = plan.ring.stages - 2
    return fn


PERSISTENT = {"base", "plag2", "noA", "noB2", "panels"}


def _store_pass(fn, options):
    """passes/store_tma.py, except for the variant `perthread`; `panels` turns on its
    PIPELINE_PANELS."""
    from newt.passes import store_tma
    store_tma.PIPELINE_PANELS[0] = CURRENT[0] == "panels"
    return fn if CURRENT[0] == "perthread" else store_tma.plan_store_tma(fn, options)


def _tma_plan(*args):
    """passes/dot_tma.py's decision, except for the variant `cpasync`: its rings stay on
    cp.async (every thread copies, one CTA barrier per k-step, as Triton's pointer loads)."""
    if CURRENT[0] != "cpasync":
        return _plan_tma(*args)


def install():
    """Route newt's codegen through the variant transforms and cluster launches (this process
    only: called by main, never on import)."""
    global _plan_tma, _generate, _init
    from newt.passes import dot_tma
    if dot_tma.plan_tma is not _tma_plan:    # (idempotent: tests install twice)
        _plan_tma, dot_tma.plan_tma = dot_tma.plan_tma, _tma_plan
    if newt.codegen.generate is not generate:
        _generate, newt.codegen.generate = newt.codegen.generate, generate
    if nlaunch.Launcher.__init__ is not _launcher_init:
        _init, nlaunch.Launcher.__init__ = nlaunch.Launcher.__init__, _launcher_init
    import newt.passes as P
    P.PASSES = tuple((n, {"store_tma": _store_pass, "persistent": _persistent_pass}.get(n, p))
                     for n, p in P.PASSES)
    if "L2PROM" in os.environ:   # tensor maps' L2 promotion (0 none, 1 64B, 2 128B, 3 256B)
        from newt.runtime import tensormap
        tensormap.L2_PROMOTION = int(os.environ["L2PROM"])

SIZES = [(torch.float16, 2048), (torch.float16, 4096), (torch.float16, 8192), (torch.bfloat16, 8192),
         (torch.bfloat16, 2048)]
if os.environ.get("SIZES"):   # e.g. SIZES=fp16:2048,bf16:2048
    _DT = {"fp16": torch.float16, "bf16": torch.bfloat16}
    SIZES = [(_DT[d], int(n)) for d, n in (x.split(":") for x in os.environ["SIZES"].split(","))]
CFGS = [(128, 256, 64, 8, 4), (128, 256, 64, 8, 3), (256, 128, 64, 8, 4)]
# CFGS=128x128x64x8x3,... replaces the sweep (the same for every variant and Triton)
if os.environ.get("CFGS"):
    CFGS = [tuple(int(x) for x in c.split("x")) for c in os.environ["CFGS"].split(",")]
# (M, N, K, dtypes): TMA-able strides; partial tiles; 129x520 has an odd grid at 256x128 (no
# cluster) and pairs that straddle pid_n; 4224x2560 ends with a one-row group (pairs differ)
CHECK = [(1008, 1520, 784, "h"), (1008, 1520, 112, "h"), (129, 520, 200, "h"), (4224, 2560, 512, "h"), (2048, 2048, 2048, "hb")]


def _promotion(v):
    """Set the L2 promotion the tensor maps built next get, for variant v."""
    from newt.runtime import tensormap
    if not hasattr(_promotion, "default"):
        _promotion.default = tensormap.L2_PROMOTION
        tensormap.default_maps().capacity = 1 << 20     # no map rebuilt under another setting
    tensormap.L2_PROMOTION = int(v[1]) if re.fullmatch(r"p\d", v) else _promotion.default


def main():
    install()
    root, mods = common.variant_examples("05_matmul", VARIANTS, CURRENT, _promotion)
    kernels = {}
    for v, m in mods.items():
        common.use_variant(root, CURRENT, v)
        _promotion(v)
        k = kernels[v] = m.matmul_kernel
        for cfg in CFGS:
            for (M, N, K, dts) in CHECK:
                for dt in [{"h": torch.float16, "b": torch.bfloat16}[x] for x in dts]:
                    a = torch.randn(M, K, device="cuda").to(dt)
                    b = torch.randn(K, N, device="cuda").to(dt)
                    c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
                    try:
                        launch(k, a, b, c, cfg)
                        torch.cuda.synchronize()
                    except Exception as e:  # noqa: BLE001
                        print(f"{v} {cfg} {M}x{N}x{K} FAILED to launch: {str(e)[:300]}", flush=True)
                        raise
                    ref = a.double() @ b.double()
                    err = float((c.double() - ref).norm() / ref.norm())
                    ok = bool(torch.isfinite(c).all()) and err < 1e-2
                    if not ok:
                        print(f"CHECK FAIL {v} {cfg} {dt} {M}x{N}x{K}: err {err}", flush=True)
        print(f"variant {v} checked", flush=True)
    tk = common.triton_twin(next(iter(kernels.values())))
    import triton.testing
    results = {}
    for dt, n in SIZES:
        a = torch.randn(n, n, device="cuda").to(dt)
        b = torch.randn(n, n, device="cuda").to(dt)
        c = torch.empty(n, n, device="cuda", dtype=dt)
        calls = {}
        for v, k in list(kernels.items()) + [("triton", tk)]:
            av, bv = (a.clone(), b.clone()) if re.fullmatch(r"p\d", v) else (a, b)
            _promotion(v)
            for cfg in CFGS:
                common.use_variant(root, CURRENT, v if v != "triton" else "base")
                fn = (lambda k=k, cfg=cfg, av=av, bv=bv: launch(k, av, bv, c, cfg))
                fn()
                calls[(v, cfg)] = fn
        calls[("cublas", None)] = lambda: torch.matmul(a, b)
        torch.cuda.synchronize()
        ms, _ = common.timed_in_rounds(
            calls, lambda fn: (triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"), None),
            rounds=int(os.environ.get("ROUNDS", 5)))
        flop = 2.0 * n ** 3
        for key, t in ms.items():
            results[(str(dt)[6:], n) + key] = flop / t / 1e9
    print(f"\n== matmul_variants L2PROM={os.environ.get('L2PROM', 3)} {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} {torch.cuda.get_device_name()}")
    names = list(VARIANTS) + ["triton"]
    print(f"{'dtype':9} {'n':>5} {'config':22} " + " ".join(f"{x:>7}" for x in names) + "  cublas")
    for dt, n in SIZES:
        d = str(dt)[6:]
        for cfg in CFGS:
            row = [results.get((d, n, v, cfg), float("nan")) for v in names]
            print(f"{d:9} {n:5d} {str(cfg):22} " + " ".join(f"{x:7.0f}" for x in row)
                  + f"  {results[(d, n, 'cublas', None)]:6.0f}")
        best = [max(results.get((d, n, v, cfg), 0) for cfg in CFGS) for v in names]
        print(f"{d:9} {n:5d} {'best':22} " + " ".join(f"{x:7.0f}" for x in best)
              + "   vs triton: " + " ".join(f"{x / best[-1]:.3f}" for x in best[:-1]), flush=True)


if __name__ == "__main__":
    main()
