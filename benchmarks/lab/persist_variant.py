# Lab script, measured on commit 60057ea: it patches the library's internals of that commit
# (check it out to rerun it); not run by the test suite.
"""matmul_variants.py's `persist`: the tutorial matmul's generated code (sm_90a, TMA ring)
turned into a persistent kernel whose ring runs across the tiles of one CTA.

The launch is clamped to one CTA per SM; CTA b computes tiles b, b + grid, b + 2 grid, ... (the
user's program ids, mapped by the kernel's own grouped ordering). Loads are numbered over the
CTA's whole sequence of k-steps, so the copies of a tile's first num_stages - 1 k-steps are in
flight while the previous tile's epilogue runs; the epilogue stages its C tile in the ring
stage the last k-step freed plus a small region of its own, and its TMA store is waited on
only before that stage is filled again. The question it answers: how much of the gap to
cuBLAS at 8192 is the prologue and epilogue that a non-persistent CTA cannot overlap.
"""
from __future__ import annotations

import re

# the launch's extra dynamic shared memory: the epilogue's boxes beyond the freed stage (at most
# one 32 KB box of a 256-row tile) after the barriers' 1 KB
PERSIST_SHARED = 33 * 1024


def _one(pattern, text, flags=0):
    m = re.search(pattern, text, flags)
    assert m, f"persist: pattern not found: {pattern[:60]}"
    return m


def persist_parts(src):
    """(source, extra shared bytes) of the persistent form, or (src, 0) when the kernel has
    no TMA ring (the cp.async path is left as it is)."""
    if "&nt_tmap1" not in src or "newt_tma_store_2d" not in src:
        return src, 0
    k = src.index('extern "C" __global__')
    pre, body = src[:k], src[k:]
    sig_end = body.index("{\n") + 2
    sig, body = body[:sig_end], body[sig_end:]
    K = _one(r"i32 (K_\d+)", sig).group(1)
    pid_m = _one(r"i32 (pid_\d+) = \(i32\)blockIdx\.x;\n", body)
    head = body[:pid_m.start()]
    pid = pid_m.group(1)
    arr = _one(r"\n  \w+\*? \w+\[\d+\];\n", body[pid_m.end():])
    pid_block = body[pid_m.end():pid_m.end() + arr.start() + 1]
    cons = _one(r"(      newt_mbar_wait\((.*?) \+ 8u \* \(c % (\d+)\), \(c / \3\) & 1\);\n"
                r"      newt_wgmma_fence\(\);\n.*?      newt_wgmma_commit\(\);\n)", body, re.S)
    consume, full, S = cons.group(1), cons.group(2), int(cons.group(3))
    empty = _one(r"if \(c >= 1 && lane == 0\) newt_mbar_arrive\((.*?) \+ 8u \* "
                 r"\(\(c - 1\) % \d+\)\);", body).group(1)
    prod = _one(r"      const u32 fb = .*?;\n      const u32 st = (.*?)\(u32\)s \* (\d+)u;\n"
                r"      newt_mbar_expect_tx\(fb, (\d+)u\);\n((?:      newt_tma_load_2d\(.*\);\n)+)",
                body)
    base, stage, tx, loads = prod.group(1), int(prod.group(2)), prod.group(3), prod.group(4)
    BK = int(_one(r"ring_it\d+ \* (\d+)\)", loads).group(1))
    loads = re.sub(r"ring_it\d+", "nt_pk", loads)
    acc = _one(r"&(accumulator_\d+)\[0\]", consume).group(1)
    nacc = int(_one(rf"float {acc}\[(\d+)\];", body).group(1))
    init = _one(r"  if \(tid == 0\) \{ for \(int s = 0; s < \d+; \+\+s\) \{ newt_mbar_init.*\n",
                body).group(0)
    epi = _one(r"  newt_wgmma_wait<0>\(\);\n  #pragma unroll\n"
               r"  for \(int s = 0; s < \d+; \+\+s\) \{\n    newt_pin\(", body)
    epilogue = body[epi.start():body.rstrip().rindex("}")]
    # the producer's copy of the program-id arithmetic, every name suffixed _p
    names = re.findall(r"i32 (\w+) = ", pid_block)
    ren = lambda t: re.sub(r"\b(" + "|".join(map(re.escape, names + [pid])) + r")\b", r"\1_p", t)
    pid_block_p, loads_p = ren(pid_block), ren(loads)
    # the C tile's boxes: the freed stage first, then the region after the barriers
    box = int(_one(r"tile8 \+ \(u32\)\(\(c\) / \d+\) \* (\d+)u", epilogue).group(1))
    nbox = len(re.findall(r"newt_tma_store_2d\(", epilogue))
    nfree = min(stage // box, nbox)
    extra = max(0, (nbox - nfree) * box)
    assert extra + 1024 <= PERSIST_SHARED, (extra, box, nbox)
    boxdef = (f"#define NT_BOX(j) ((j) < {nfree} ? nt_free + (u32)(j) * {box}u : "
              f"nt_extra + (u32)((j) - {nfree}) * {box}u)\n")
    epilogue = re.sub(r"tile8 \+ \(u32\)\(\(c\) / (\d+)\) \* \d+u", r"NT_BOX((c) / \1)", epilogue)
    epilogue = re.sub(r"st \+ \(u32\)\(\(c\) / (\d+)\) \* \d+u", r"st + (NT_BOX((c) / \1) - tile8)",
                      epilogue)
    epilogue = re.sub(r"tile8 \+ (\d+)u\);", lambda m: f"NT_BOX({int(m.group(1)) // box}));",
                      epilogue)
    # the fallback's per-element copy reads the boxes: done before the freed stage is refilled
    fb = _one(r"\n(\s*)\}\n\s*$", epilogue)
    epilogue = epilogue[:fb.start()] + f"\n{fb.group(1)}  __syncthreads();" + epilogue[fb.start():]
    n_wait = epilogue.count("newt_bulk_wait_read();")
    assert n_wait == 1, n_wait
    epilogue = epilogue.replace("newt_bulk_wait_read();", "nt_pending = true;")
    # before the epilogue writes its boxes: the previous tile's store has read them
    epilogue = epilogue.replace(
        "  newt_fence_proxy_async();\n  __syncthreads();\n",
        "  if (tid == 0 && nt_pending) { newt_bulk_wait_read(); nt_pending = false; }\n"
        "  newt_fence_proxy_async();\n  __syncthreads();\n", 1)
    epilogue = "\n".join("  " + ln if ln else ln for ln in epilogue.split("\n"))
    # the producer's tile coordinates: recomputed when its k-step wraps to a new tile only
    coords = list(dict.fromkeys(re.findall(r"\(int\)(\w+_p)\b", loads_p)))
    for i, v in enumerate(coords):
        loads_p = re.sub(rf"\(int\){v}\b", f"nt_co{i}", loads_p)

    def issue(ind):
        lines = [
            "if (tid == 0 && nt_g < nt_steps) {",
            "  if (nt_pk == 0) {",
            f"    const i32 {pid}_p = (i32)blockIdx.x + nt_pti * (i32)gridDim.x;",
            *["    " + ln.strip() for ln in pid_block_p.strip("\n").split("\n")],
            *[f"    nt_co{i} = (int){v};" for i, v in enumerate(coords)],
            "  }",
            f"  const int s = nt_g % {S};",
            f"  if (nt_g >= {S}) newt_mbar_wait({empty} + 8u * s, ((nt_g / {S}) - 1) & 1);",
            "  if (nt_pending && s == nt_free_slot) { newt_bulk_wait_read(); nt_pending = false; }",
            f"  const u32 fb = {full} + 8u * s;",
            f"  const u32 st = {base}(u32)s * {stage}u;",
            f"  newt_mbar_expect_tx(fb, {tx}u);",
            *["  " + ln.strip() for ln in loads_p.strip("\n").split("\n")],
            "  if (++nt_pk == nt_nk) { nt_pk = 0; ++nt_pti; }",
            "}",
            "++nt_g;"]
        return "".join(ind + ln + "\n" for ln in lines)

    npm = _one(r"i32 (num_pid_m_\d+) = ", pid_block).group(1)
    npn = _one(r"i32 (num_pid_n_\d+) = ", pid_block).group(1)
    kernel = (
        sig + head
        + "  extern __shared__ __align__(16) unsigned char nt_dot_smem[];\n"
        + init + "  __syncthreads();\n"
        + f"  const u32 nt_extra = {full} + 1024u;\n"
        + f"  const int nt_nk = ({K} + {BK - 1}) / {BK};\n"
        + f"  i32 nt_total;\n  {{\n    const i32 {pid} = 0;\n"
        + "\n".join("  " + ln for ln in pid_block.rstrip("\n").split("\n")) + "\n"
        + f"    nt_total = {npm} * {npn};\n  }}\n"
        + "  const int nt_mine = nt_total > (int)blockIdx.x ? (nt_total - (int)blockIdx.x"
        " + (int)gridDim.x - 1) / (int)gridDim.x : 0;\n"
        + "  const int nt_steps = nt_mine * nt_nk;\n"
        + "  int nt_g = 0, c = 0, nt_free_slot = -1, nt_pti = 0, nt_pk = 0;\n"
        + "  bool nt_pending = false;\n"
        + "".join(f"  int nt_co{i} = 0;\n" for i in range(len(coords)))
        + f"  for (int nt_i = 0; nt_i < {S - 1}; ++nt_i) {{\n" + issue("    ") + "  }\n"
        + f"  float {acc}[{nacc}];\n"
        + f"  for (i32 {pid} = (i32)blockIdx.x; {pid} < nt_total; {pid} += (i32)gridDim.x) {{\n"
        + "\n".join("  " + ln for ln in pid_block.rstrip("\n").split("\n")) + "\n"
        + f"    #pragma unroll\n    for (int s = 0; s < {nacc}; ++s) {acc}[s] = 0.0f;\n"
        + "    for (int nt_k = 0; nt_k < nt_nk; ++nt_k, ++c) {\n"
        + consume
        + "      newt_wgmma_wait<1>();\n      __syncwarp();\n"
        + f"      if (nt_k >= 1 && lane == 0) newt_mbar_arrive({empty} + 8u * ((c - 1) % {S}));\n"
        + issue("      ")
        + "      __syncwarp();\n    }\n"
        + "    newt_wgmma_wait<0>();\n"
        + f"    if (nt_nk > 0 && lane == 0) newt_mbar_arrive({empty} + 8u * ((c - 1) % {S}));\n"
        + f"    nt_free_slot = nt_nk > 0 ? (c - 1) % {S} : -1;\n"
        + f"    const u32 nt_free = {base}(u32)(nt_free_slot < 0 ? 0 : nt_free_slot) * {stage}u;\n"
        + "  {\n" + epilogue + "\n  }\n"
        + "  }\n"
        + "  if (tid == 0 && nt_pending) newt_bulk_wait_read();\n}\n")
    return pre + boxdef + kernel, extra + 1024


def persist(src):
    return persist_parts(src)[0]
