"""The disk cache of tuned configs: what lets a second process launch with no tuning at all.

Key: the kernel's source hash, the shape bucket of every tensor argument (next power of two per
dim, exact shapes under static_shapes), dtypes, other arguments' types, the GPU name, the newt and
deuteron versions, the fp32 matmul precision, the candidate list of a kernel given `configs=`,
and (added by Kernel.cache_key) the number of tunable tile dims its trace has. One JSON file per key under DEUTERON_CACHE_DIR
(default: ~/.cache/deuteron, or $XDG_CACHE_HOME/deuteron). Writes are atomic (temporary file +
os.replace); an entry that fails to parse or holds another key is ignored and rewritten.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile

import torch

from ..ir import next_pow2
from ..config import Config


def cache_dir() -> str:
    d = os.environ.get("DEUTERON_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "deuteron")


def _gpu_name(device) -> str:
    if device is not None and device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu-interpreter"


def _arg_key(a, static):
    if isinstance(a, torch.Tensor):
        shape = list(a.shape) if static else [next_pow2(s) for s in a.shape]
        return ["tensor", shape, str(a.dtype).replace("torch.", "")]
    if isinstance(a, bool) or a is None or isinstance(a, str):
        return [type(a).__name__, a]
    if isinstance(a, int):
        return ["int", a if static else next_pow2(a)]
    return [type(a).__name__]


def make_key(kernel, args, kwargs) -> dict:
    import newt
    from .. import __version__
    device = None
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor):
            device = a.device
            break
    return {
        "kernel": kernel.fn.__qualname__,
        "source": kernel.source_hash,
        "args": [_arg_key(a, kernel.static_shapes) for a in args],
        "kwargs": {k: _arg_key(v, kernel.static_shapes) for k, v in sorted(kwargs.items())},
        "gpu": _gpu_name(device),
        "newt": getattr(newt, "__version__", "?"),
        "deuteron": __version__,
        "fp32_matmul": torch.get_float32_matmul_precision(),
        # a kernel restricted to `configs=` must not share its winner with an unrestricted one
        "configs": (hashlib.sha256(repr(sorted(str(c) for c in kernel.configs)).encode()).hexdigest()[:16]
                    if kernel.configs else None),
    }


def key_string(key: dict) -> str:
    return json.dumps(key, sort_keys=True)


def path_of(key: dict) -> str:
    digest = hashlib.sha256(key_string(key).encode()).hexdigest()[:32]
    return os.path.join(cache_dir(), f"{key['kernel'].replace('<', '').replace('>', '')}-{digest}.json")


def load(key: dict) -> Config | None:
    """The cached config for `key`, or None (missing, unreadable, corrupt or another key)."""
    try:
        with open(path_of(key)) as f:
            entry = json.load(f)
        if entry.get("key") != json.loads(key_string(key)):
            return None
        return Config.from_dict(entry["config"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(key: dict, config: Config, summary: str | None = None) -> bool:
    path = path_of(key)
    entry = {"key": json.loads(key_string(key)), "config": config.to_dict(), "summary": summary}
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(entry, f, indent=1)
        os.replace(tmp, path)
        return True
    except OSError:
        return False
