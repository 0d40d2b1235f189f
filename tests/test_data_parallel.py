"""examples/09_data_parallel.py in its reduced form: two processes under torchrun, on the CPU
interpreter, talking over gloo; each checks its kernels against torch and the DDP step against a
single-process step on the whole batch. (The NCCL form needs two GPUs: tests/test_multi_gpu.py
names the command.)"""
import os
import socket
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not (torch.distributed.is_available()
                         and torch.distributed.is_gloo_available()),
                    reason="torch.distributed with gloo is unavailable")
def test_two_cpu_ranks_match_one_process(tmp_path):
    env = dict(os.environ, NEWT_INTERPRET="1", PYTHONPATH=ROOT,
               NEWT_CACHE_DIR=str(tmp_path / "newt"), DEUTERON_CACHE_DIR=str(tmp_path / "dt"),
               CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                        "--master-port", str(_free_port()),
                        os.path.join(ROOT, "examples", "09_data_parallel.py"), "--small"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "2 process(es) on cpu, step matches the single-process step" in r.stdout
