"""Seeded dropout, Triton-tutorial form: out = where(rand(seed, offset) > p, x / (1 - p), 0).

The mask is never stored: each element's keep/drop decision comes from `nl.rand(seed, offsets)`,
Philox4x32 keyed by the seed and counted by the element's offset, so the same seed rebuilds the
same mask anywhere (a backward pass, another kernel) and a different seed draws a fresh one. The
stream is Triton's, bit for bit, on the GPU and on the CPU interpreter.

    python examples/07_dropout.py [--small]   # checks itself (GPU, or the CPU interpreter)
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

import newt  # noqa: E402
import newt.language as nl  # noqa: E402
from newt.testing import run_example  # noqa: E402


@newt.jit
def seeded_dropout_kernel(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: nl.constexpr):
    pid = nl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + nl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = nl.load(x_ptr + offsets, mask=mask)
    random = nl.rand(seed, offsets)
    x_keep = random > p
    output = nl.where(x_keep, x / (1 - p), 0.0)
    nl.store(output_ptr + offsets, output, mask=mask)


def seeded_dropout(x, p, seed, block=1024):
    assert x.is_contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    seeded_dropout_kernel[(newt.cdiv(n, block),)](x, out, n, p, seed, BLOCK_SIZE=block)
    return out


def check(device, small=True):
    """Kept fraction ~ 1 - p, kept values scaled by 1/(1-p), seeds reproduce / differ."""
    n = 5003 if small else 1_000_003
    x = torch.randn(n, device=device)
    x[x == 0] = 1.0  # a kept zero would look dropped
    for p in (0.1, 0.5, 0.8):
        out = seeded_dropout(x, p, seed=123)
        kept = out != 0
        frac = kept.float().mean().item()
        # 6 binomial standard deviations: a false alarm is out of the question
        tol = 6 * (p * (1 - p) / n) ** 0.5
        assert abs(frac - (1 - p)) <= tol, f"p={p}: kept {frac:.4f}, expected {1 - p:.4f}"
        torch.testing.assert_close(out[kept], x[kept] / (1 - p), rtol=1e-6, atol=1e-6)
        same = seeded_dropout(x, p, seed=123)
        assert torch.equal(same, out), "the same seed must give the same mask"
        other = seeded_dropout(x, p, seed=124)
        differ = ((other != 0) != kept).float().mean().item()
        assert differ > p * (1 - p), f"seed 124 mask too close to seed 123 ({differ:.4f})"
        print(f"p={p}: kept {frac:.4f} (expected {1 - p:.2f}), same seed equal, "
              f"other seed differs in {differ:.1%} of elements")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    torch.manual_seed(0)
    run_example(argv, check, lambda _: "07_dropout: all checks passed")


if __name__ == "__main__":
    main()
