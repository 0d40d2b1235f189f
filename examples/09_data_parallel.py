"""09: a data-parallel training step under torch.distributed, with a newt kernel and a deuteron
kernel in the forward pass.

    torchrun --nproc-per-node 2 examples/09_data_parallel.py     # one process per GPU, NCCL
    torchrun --nproc-per-node 2 examples/09_data_parallel.py --small    # a quick correctness run
    python examples/09_data_parallel.py                          # one process

The model: `rms_norm(bias_silu(x @ w1, b1)) @ w2`, with a mean-squared-error loss. `bias_silu` is
a newt kernel (bias add and SiLU fused, one pass over the hidden activations) and `rms_norm` a
deuteron kernel (one row per tile); each sits in a torch.autograd.Function whose backward is
written with torch ops. newt has no distribution layer: each process owns one GPU
(`torch.cuda.set_device(local_rank)`), its kernels launch on that GPU's current stream, and
DistributedDataParallel averages the gradients over the ranks with NCCL. Without a GPU every
process runs on the CPU interpreter and the ranks talk over gloo (the reduced form CI runs).

Rank 0 then checks the result against a single-process step on the whole batch (the same
initial weights): the updated weights must agree to tolerance. It prints the per-step time of
the data-parallel step (each rank's share of the batch) and of the single-process step.
NVLink SHARP (multicast) is kept off: NCCL_NVLS_ENABLE=0 unless already set.
"""
import os
import sys
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

import deuteron as dt  # noqa: E402
import newt  # noqa: E402
import newt.language as nl  # noqa: E402


# ----------------------------------------------------------------------------- the kernels

@newt.jit
def bias_silu_kernel(h_ptr, b_ptr, out_ptr, n_cols, numel, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = offs < numel
    z = nl.load(h_ptr + offs, mask=mask) + nl.load(b_ptr + offs % n_cols, mask=mask)
    nl.store(out_ptr + offs, z * nl.sigmoid(z), mask=mask)


@dt.kernel(config=dt.Config(block_sizes=[2]))    # pinned: every rank runs the same code
def rms_norm(x, eps: float = 1e-6):
    out = torch.empty_like(x)
    for tile_m in dt.tile(x.shape[0]):
        row = x[tile_m, :]
        out[tile_m, :] = row * torch.rsqrt((row * row).mean(dim=-1, keepdim=True) + eps)
    return out


def _rms_norm_torch(x, eps=1e-6):
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps)


class BiasSiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, b):
        h = h.contiguous()
        out = torch.empty_like(h)
        bias_silu_kernel[(newt.cdiv(h.numel(), 1024),)](h, b, out, h.shape[1], h.numel(),
                                                         BLOCK=1024)
        ctx.save_for_backward(h, b)
        return out

    @staticmethod
    def backward(ctx, g):
        h, b = ctx.saved_tensors
        z = h + b
        s = torch.sigmoid(z)
        dz = g * s * (1 + z * (1 - s))
        return dz, dz.sum(dim=0)


class RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return rms_norm(x.contiguous())

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            return torch.autograd.grad(_rms_norm_torch(x), x, g)[0]


class Model(torch.nn.Module):
    def __init__(self, d_in, d_hidden, d_out):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(d_in, d_hidden) / d_in ** 0.5)
        self.b1 = torch.nn.Parameter(torch.randn(d_hidden) * 0.1)
        self.w2 = torch.nn.Parameter(torch.randn(d_hidden, d_out) / d_hidden ** 0.5)

    def forward(self, x):
        return RMSNorm.apply(BiasSiLU.apply(x @ self.w1, self.b1)) @ self.w2


def reference_forward(model, x):
    """The same model in plain torch ops: checks the kernels themselves."""
    z = x @ model.w1 + model.b1
    return _rms_norm_torch(z * torch.sigmoid(z)) @ model.w2


# ----------------------------------------------------------------------------- one step

def sgd_step(model, x, y, lr):
    loss = torch.nn.functional.mse_loss(model(x), y)
    model.zero_grad(set_to_none=True)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
    return loss.detach()


def timed_steps(model, x, y, lr, steps, device):
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        sgd_step(model, x, y, lr)
    sync()
    return (time.perf_counter() - t0) / steps


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    small = "--small" in argv
    cuda = torch.cuda.is_available() and not newt.options.flags.interpret
    if not cuda:
        newt.options.flags.interpret = True
    if "RANK" not in os.environ:    # plain `python`: a world of one process
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=os.environ.get("MASTER_PORT", "29531"))
    local = int(os.environ["LOCAL_RANK"])
    if cuda:
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo", device_id=device if cuda else None)
    rank, world = dist.get_rank(), dist.get_world_size()

    d_in, d_hidden, d_out = (16, 64, 8) if small or not cuda else (1024, 1024, 1024)
    per_rank = 6 if small or not cuda else 4096       # rows per rank: the global batch grows
    steps, lr = (1, 0.05) if small or not cuda else (20, 0.01)
    torch.manual_seed(0)                               # the same weights and data on every rank
    model = Model(d_in, d_hidden, d_out).to(device)
    x = torch.randn(per_rank * world, d_in, device=device)
    y = torch.randn(per_rank * world, d_out, device=device)
    single = Model(d_in, d_hidden, d_out).to(device)
    single.load_state_dict(model.state_dict())

    with torch.no_grad():   # the kernels against plain torch, before any step
        torch.testing.assert_close(model(x), reference_forward(model, x), rtol=1e-4, atol=1e-4)

    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local] if cuda else None)
    shard = slice(rank * per_rank, (rank + 1) * per_rank)
    loss = sgd_step(ddp, x[shard], y[shard], lr)       # gradients averaged by DDP over ranks
    sgd_step(single, x, y, lr)                         # one process, the whole batch
    for (name, p), q in zip(model.named_parameters(), single.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-4,
                                   msg=lambda m, name=name: f"rank {rank}: {name}: {m}")
    line = (f"data parallel: {world} process(es) on {device.type}, step matches the "
            f"single-process step (loss {loss.item():.4f})")
    if cuda and not small:
        t_dp = timed_steps(ddp, x[shard], y[shard], lr, steps, device)
        t_one = timed_steps(single, x, y, lr, steps, device)
        times = [None] * world
        dist.all_gather_object(times, (t_dp, t_one))
        line += "\n" + "\n".join(
            f"  rank {r}: {dp * 1e3:.2f} ms per data-parallel step ({per_rank} rows), "
            f"{one * 1e3:.2f} ms per single-process step ({per_rank * world} rows)"
            for r, (dp, one) in enumerate(times))
    if rank == 0:
        print(line)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
