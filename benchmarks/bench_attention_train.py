"""Attention for training: forward (saving the logsumexp) and backward rows, newt vs Triton (the
same kernel source, `nl` -> `tl`) vs torch SDPA, fp16, D = 64 and 128, causal and not,
N = 1024 / 4096 / 16384, in one process.

The kernels are examples/08_attention_training.py's (its forward reuses the key loop of
examples/06_fused_attention.py); the Triton twins are every kernel's source with nothing but
the module names swapped, launched by the same `forward()` / `backward()` with the same grids,
constexprs and num_warps. Sizes follow FlashAttention-3's benchmarks: B * N = 16384 tokens and
H = 2048 / D heads, so every row has at least 16k query rows. TFLOP/s as FA3 counts them:
forward 4 * B * H * N^2 * D, backward 2.5 times that, both halved for causal. SDPA's backward
row times torch.autograd.grad through SDPA (its backward kernels only: the forward is run once
outside the timing).

Before anything is timed, every provider's forward output and gradients (into NaN-poisoned
buffers) are compared with SDPA computed in fp32 (atol 2e-2); a provider that fails is
reported, not timed. The registers and spills of each newt kernel are printed with its row.

    python benchmarks/bench_attention_train.py [--quick]   # --quick: N = 1024 and 4096, ~90 s
"""
from __future__ import annotations

import functools
import os
import sys

import torch

import common
from newt.testing import do_bench

_median = functools.partial(do_bench, return_mode="median")
NAN = float("nan")
ATOL = 2e-2
TOKENS = 16384       # B * N
HIDDEN = 2048        # H * D


def example():
    return common.load_file(os.path.join(common.ROOT, "examples", "08_attention_training.py"),
                            "newt_example_08_attention_training")


def triton_kernels():
    """(forward, preprocess, backward) Triton twins of the example's kernels, one module."""
    ex = example()
    mod = common.triton_module("attn_train", ex.KERNELS, "benchmarks/bench_attention_train.py")
    return mod._attn_fwd_train, mod._attn_bwd_preprocess, mod._attn_bwd


def sizes(quick=False, tiny=False):
    """[(B, H, N, D)]: FA3's token count per row, fewer sequence lengths with --quick; `tiny`
    is for the interpreter (tests)."""
    if tiny:
        return [(1, 2, 40, 16)]
    out = []
    for N in ((1024, 4096) if quick else (1024, 4096, 16384)):
        for D in (64, 128):
            out.append((max(1, TOKENS // N), HIDDEN // D, N, D))
    return out


def flops(B, H, N, D, causal, bwd):
    f = 4.0 * B * H * N * N * D * (0.5 if causal else 1.0)
    return f * 2.5 if bwd else f


def reference(q, k, v, do, causal):
    """(o, dq, dk, dv) of SDPA in fp32: the values every provider is checked against."""
    leaves = [t.detach().float().requires_grad_() for t in (q, k, v)]
    o = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)
    grads = torch.autograd.grad(o, leaves, do.float())
    return [o.detach()] + list(grads)


def _err(got, want):
    return float((got.float() - want).abs().max())


def registers(ex, q, k, v, o, lse, do, causal, sm_scale, cfg=None):
    """'registers r/spilled bytes s' of newt's forward, backward and preprocess binaries for
    these arguments (compiled or loaded from the cache, not launched)."""
    try:
        B, H, N, D = q.shape
        fcfg = dict(cfg or ex.fwd_example.config_for(D, causal))
        fwd = ex._attn_fwd_train.warmup(
            q, k, v, sm_scale, lse, o, *q.stride(), *k.stride(), *v.stride(), *o.stride(), H, N,
            HEAD_DIM=D, STAGE=3 if causal else 1, EVEN_N=N % fcfg["BLOCK_M"] == 0, **fcfg)
        bcfg = ex.bwd_config_for(D)
        bwd = ex._attn_bwd.warmup(q, k, v, sm_scale, do, q, k, v, lse, lse, *q.stride(), H, N,
                                  HEAD_DIM=D, CAUSAL=causal, **bcfg)
        pre = ex._attn_bwd_preprocess.warmup(o, do, lse, *o.stride(), H, N, HEAD_DIM=D,
                                             BLOCK_M=ex.PRE_ELEMENTS // D, num_warps=4)
        return {"fwd": f"fwd {fwd.n_regs}r/{fwd.n_spills}s",
                "bwd": f"bwd {bwd.n_regs}r/{bwd.n_spills}s, preprocess "
                       f"{pre.n_regs}r/{pre.n_spills}s"}
    except Exception as exc:  # noqa: BLE001 - reporting only
        return {"fwd": f"? ({type(exc).__name__})", "bwd": f"? ({type(exc).__name__})"}


def _time(fn, bench, sync):
    fn()
    sync()
    return bench(fn), None


def measure(shapes, dev="cuda", bench=_median, providers=None, sync=torch.cuda.synchronize,
            fwd_config=None, bwd_config=None, show_registers=True):
    """Check then time forward and backward of every shape, causal and not; returns rows
    (run_all.py's format). `providers` maps a name to (forward, preprocess, backward) kernels
    (default: newt, and the Triton twins when triton imports)."""
    ex = example()
    errors = {}
    if providers is None:
        providers = {"newt": (ex._attn_fwd_train, ex._attn_bwd_preprocess, ex._attn_bwd)}
        if common.have_triton():
            try:
                providers["triton"] = triton_kernels()
            except Exception as exc:  # noqa: BLE001 - report and go on
                errors["triton"] = f"twin kernels failed: {type(exc).__name__}: {exc}"
    rows = []
    for (B, H, N, D) in shapes:
        for causal in (False, True):
            case = f"fp16 B={B} H={H} N={N} D={D}{' causal' if causal else ''}"
            gen = torch.Generator(device=dev).manual_seed(N + D + causal)
            q, k, v, do = (torch.randn(B, H, N, D, device=dev, dtype=torch.float16,
                                       generator=gen) for _ in range(4))
            sm_scale = D ** -0.5
            want = reference(q, k, v, do, causal)
            fwd_row = dict(bench="attention_train", workload=f"attention fwd {case}",
                           unit="TFLOP/s", higher_is_better=True, newt=None, triton=None,
                           torch=None, errors=dict(errors), target_ratio=1.0)
            bwd_row = dict(fwd_row, workload=f"attention bwd {case}", errors=dict(errors))
            fwd_calls, bwd_calls = {}, {}
            for p, (fk, pk, bk) in providers.items():
                try:
                    o, lse = ex.forward(q, k, v, causal, sm_scale, fwd_config, kernel=fk)
                    sync()
                    if not _err(o, want[0]) <= ATOL:   # NaN fails too
                        raise AssertionError(f"forward max error {_err(o, want[0]):.3e}")
                    fwd_calls[p] = (lambda fk=fk: ex.forward(q, k, v, causal, sm_scale,
                                                             fwd_config, kernel=fk))
                except Exception as exc:  # noqa: BLE001 - report and go on
                    fwd_row["errors"][p] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    bwd_row["errors"][p] = "forward failed"
                    continue
                try:
                    out = [torch.full_like(q, NAN) for _ in range(3)]
                    ex.backward(q, k, v, o, lse, do, causal, sm_scale, bwd_config,
                                kernels=(pk, bk), out=out)
                    sync()
                    errs = [_err(g, w) for g, w in zip(out, want[1:])]
                    if not all(e <= ATOL for e in errs):
                        raise AssertionError("max errors dq {:.3e} dk {:.3e} dv {:.3e}"
                                             .format(*errs))
                    bwd_calls[p] = (lambda pk=pk, bk=bk, o=o, lse=lse, out=out: ex.backward(
                        q, k, v, o, lse, do, causal, sm_scale, bwd_config, kernels=(pk, bk),
                        out=out))
                except Exception as exc:  # noqa: BLE001 - report and go on
                    bwd_row["errors"][p] = f"{type(exc).__name__}: {str(exc)[:300]}"
            fwd_calls["torch"] = lambda: torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=causal)
            leaves = [t.detach().requires_grad_() for t in (q, k, v)]
            o_t = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)
            bwd_calls["torch"] = lambda: torch.autograd.grad(o_t, leaves, do, retain_graph=True)
            if show_registers and "newt" in fwd_calls:
                o, lse = ex.forward(q, k, v, causal, sm_scale, fwd_config)
                regs = registers(ex, q, k, v, o, lse, do, causal, sm_scale, fwd_config)
                fwd_row["newt_registers"], bwd_row["newt_registers"] = regs["fwd"], regs["bwd"]
            for row, calls, bwd in ((fwd_row, fwd_calls, False), (bwd_row, bwd_calls, True)):
                ms, notes = common.timed_in_rounds(calls, lambda fn: _time(fn, bench, sync))
                row["errors"].update(notes)
                for p, t in ms.items():
                    row[p] = flops(B, H, N, D, causal, bwd) / (t * 1e-3) / 1e12
                rows.append(row)
                print(format_row(row), flush=True)
            del q, k, v, do, want, fwd_calls, bwd_calls, leaves, o_t
            if dev == "cuda":
                torch.cuda.empty_cache()
    return rows


def format_row(r):
    vals = "  ".join(f"{p} {r[p]:7.1f}" if r[p] else f"{p} {'-':>7}"
                     for p in ("newt", "triton", "torch"))
    ratios = "  ".join(f"newt/{p} {r['newt'] / r[p]:.2f}x" for p in ("triton", "torch")
                       if r["newt"] and r[p])
    regs = f"  [{r['newt_registers']}]" if r.get("newt_registers") else ""
    errs = "".join(f"\n    {p}: {e}" for p, e in r["errors"].items())
    return f"{r['workload']:50s} {vals}  {ratios}{regs}{errs}"


def run(out_dir=None, quick=False):
    """Rows for run_all.py (see its docstring for the row format)."""
    return measure(sizes(quick))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not torch.cuda.is_available():
        print("bench_attention_train: needs a CUDA device")
        return []
    print(f"{'workload':50s} TFLOP/s (FA3 count)")
    rows = run(quick="--quick" in argv)
    print("\nsummary")
    for r in rows:
        print(format_row(r))
    return rows


if __name__ == "__main__":
    main()
