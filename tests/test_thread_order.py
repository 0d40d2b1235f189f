"""Program order between the threads of a compiled program (passes/thread_order.py): a scalar
store or atomic (thread 0) and the other threads' loads of the same tensor are separated by a
barrier, so the compiled program computes what the interpreter does. Checked on the IR, on the
CPU emulation of the generated code (threads really race there), the interpreter and the GPU."""
import pytest
import torch

import newt
import newt.language as nl
from lang_helpers import where  # noqa: F401  (fixture: interp, emu, cuda)


@newt.jit
def first_writer_kernel(flag_ptr, out_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    if nl.load(flag_ptr) == 0:     # every thread reads the flag ...
        nl.store(flag_ptr, 7)      # ... that thread 0 then sets
        nl.store(out_ptr + offs, offs + 1)
    else:
        nl.store(out_ptr + offs, -offs)


@newt.jit
def counter_rows_kernel(count_ptr, out_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    for i in range(n):
        v = nl.load(count_ptr)               # reads what thread 0 wrote one iteration ago
        nl.store(out_ptr + i * BLOCK + offs, v * 1000 + offs)
        nl.store(count_ptr, v + 3)


@newt.jit
def unrelated_kernel(x_ptr, out_ptr, sum_ptr, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(x_ptr + offs)
    s = nl.load(sum_ptr + 1)
    nl.store(out_ptr + offs, x + s)
    nl.store(sum_ptr, nl.sum(x, axis=0))     # sum_ptr was read: a barrier; x_ptr, out_ptr: none


def _barriers(kernel, signature, constexprs):
    k = newt.compile(kernel, signature, constexprs, arch="sm_90a", num_warps=4)
    return [line.strip() for line in k.ir.splitlines() if line.strip().startswith("barrier")]


def test_barriers_only_where_a_scalar_access_meets_the_same_tensor():
    sig = {"flag_ptr": "*i32", "out_ptr": "*i32"}
    assert _barriers(first_writer_kernel, sig, {"BLOCK": 256}) == ["barrier {why='thread order'}"]
    sig = {"count_ptr": "*i32", "out_ptr": "*i32", "n": "i32"}
    # the load at the top of the loop meets the store at the bottom of the previous iteration
    assert len(_barriers(counter_rows_kernel, sig, {"BLOCK": 256})) == 2
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "sum_ptr": "*fp32"}
    assert len(_barriers(unrelated_kernel, sig, {"BLOCK": 256})) == 1


def test_first_writer_sees_one_flag(where):
    flag = where.t(torch.zeros(1, dtype=torch.int32))
    out = where.t(torch.full((512,), -99, dtype=torch.int32))
    where(first_writer_kernel, (1,), flag, out, BLOCK=512)
    assert int(flag.item()) == 7
    assert torch.equal(out.cpu(), torch.arange(512, dtype=torch.int32) + 1)


@pytest.mark.parametrize("n", [1, 5])
def test_loop_reads_the_previous_iterations_scalar_store(where, n):
    start = int(torch.randint(1, 50, ()))
    count = where.t(torch.tensor([start], dtype=torch.int32))
    out = where.t(torch.full((n, 256), -1, dtype=torch.int32))
    where(counter_rows_kernel, (1,), count, out, n, BLOCK=256)
    ref = (start + 3 * torch.arange(n, dtype=torch.int32))[:, None] * 1000 + torch.arange(256)
    assert torch.equal(out.cpu(), ref.to(torch.int32))
    assert int(count.item()) == start + 3 * n
