"""dt_attention: fused attention forward (non-causal) as a deuteron tile function.

The online softmax of FlashAttention written over tiles: for each (batch*head, tile of query
rows) program, loop over tiles of keys, keep a running max `m_i`, a running denominator `l_i`
and an fp32 accumulator rescaled as the max grows. As in the Triton tutorial, the scale is
folded with log2(e) so that exp2 replaces exp (one multiply-add and one MUFU.EX2 per score). `q @ k.T` and `p @ v` become `nl.dot`s (the
second fused into the accumulator); the batch*head dim is a tile pinned to block_size=1, which
indexes like an int. Padded key lanes are masked to -inf before the max and to 0 before the
sums and the second dot, all by deuteron. `static_shapes=True` compiles one kernel per exact
shape: the sizes are constants, and where the tiles divide them (N = 4096 keys in tiles of
64, head_dim 64 in one tile) newt proves those masks true and drops them
(newt/passes/masks.py), as the hand-written kernel's EVEN_N does.

    python examples/dt_attention.py [--small] [--bench]

--bench (GPU): fp16 B=4 H=32 N=4096 D=64: cold autotune time and TFLOP/s against torch SDPA.
"""
import math
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import deuteron as dt  # noqa: E402
import newt  # noqa: E402


@dt.kernel(static_shapes=True)
def attention(q, k, v):
    """q, k, v: [batch*heads, seq, head_dim]."""
    out = torch.empty_like(q)
    qk_scale = 1.44269504 / math.sqrt(q.shape[2])   # log2(e) / sqrt(d): exp(x) = exp2(x log2 e)
    for bh, tile_m in dt.tile([q.shape[0], q.shape[1]], block_size=[1, None]):
        q_blk = q[bh, tile_m, :]
        m_i = dt.full([tile_m], float("-inf"), dtype=dt.float32)
        l_i = dt.zeros([tile_m], dtype=dt.float32)
        acc = dt.zeros([tile_m, q.shape[2]], dtype=dt.float32)
        for tile_n in dt.tile(k.shape[1]):
            s = (q_blk @ k[bh, tile_n, :].T).float() * qk_scale
            m_new = torch.maximum(m_i, s.amax(dim=1))
            alpha = torch.exp2(m_i - m_new)
            p = torch.exp2(s - m_new[:, None])
            l_i = l_i * alpha + p.sum(dim=1)
            acc = acc * alpha[:, None] + p.to(v.dtype) @ v[bh, tile_n, :]
            m_i = m_new
        out[bh, tile_m, :] = (acc / l_i[:, None]).to(out.dtype)
    return out


def reference(q, k, v):
    s = (q.float() @ k.float().transpose(1, 2)) / math.sqrt(q.shape[2])
    return (torch.softmax(s, dim=-1) @ v.float()).to(q.dtype)


def setup_device() -> str:
    if torch.cuda.is_available() and not newt.options.flags.interpret:
        return "cuda"
    newt.options.flags.interpret = True
    print("note: no CUDA device: running on the CPU interpreter (NEWT_INTERPRET=1), small sizes")
    return "cpu"


def check(device, small=True):
    dtype = torch.float16 if device == "cuda" else torch.float32
    shapes = [(2, 37, 16), (3, 50, 32)]
    if device == "cuda" and not small:
        shapes += [(8, 1000, 64), (4, 2048, 128)]
    for bh, n, d in shapes:
        q, k, v = (torch.randn(bh, n, d, device=device, dtype=dtype) for _ in range(3))
        torch.testing.assert_close(attention(q, k, v).float(), reference(q, k, v).float(),
                                   rtol=2e-2, atol=2e-2,
                                   msg=lambda s: f"dt attention {bh}x{n}x{d}: {s}")


def bench():
    from newt.testing import do_bench
    os.environ["DEUTERON_CACHE_DIR"] = tempfile.mkdtemp(prefix="dt-cache-")
    B, H, N, D = 4, 32, 4096, 64
    q, k, v = (torch.randn(B * H, N, D, device="cuda", dtype=torch.float16) for _ in range(3))
    t0 = time.perf_counter()
    cfg = attention.autotune((q, k, v), effort="quick")
    tune_s = time.perf_counter() - t0
    flops = 4 * B * H * N * N * D
    ms_dt = do_bench(lambda: attention(q, k, v), return_mode="median")
    q4, k4, v4 = (t.view(B, H, N, D) for t in (q, k, v))
    ms_sdpa = do_bench(lambda: torch.nn.functional.scaled_dot_product_attention(q4, k4, v4),
                       return_mode="median")
    print(f"attention fp16 B={B} H={H} N={N} D={D}: tune {tune_s:.1f} s, deuteron "
          f"{flops / ms_dt * 1e-9:.0f} TFLOP/s, SDPA {flops / ms_sdpa * 1e-9:.0f} TFLOP/s; {cfg}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    device = setup_device()
    dtype = torch.float16 if device == "cuda" else torch.float32
    q, k, v = (torch.randn(2, 37, 16, device=device, dtype=dtype) for _ in range(3))
    print(attention.to_newt_source(q, k, v))
    check(device, small="--small" in argv)
    print("deuteron attention matches torch")
    if "--bench" in argv and device == "cuda":
        bench()


if __name__ == "__main__":
    main()
