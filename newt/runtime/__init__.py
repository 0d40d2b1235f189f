"""The runtime: NVRTC (nvrtc.py), the CUDA driver (driver.py), the kernel caches (cache.py), the
launch slow path (specialize.py) and fast path (launch.py). Submodules load on first use."""


def synchronize(device_index=None):
    """Wait for the GPU; a kernel failure (device assert, illegal address) raises
    newt.DriverError naming the last newt kernel launched, with debugging hints."""
    from .driver import synchronize as _sync
    _sync(device_index)


def __getattr__(name):
    # `newt.runtime.driver.active` as Triton's programs spell it: submodules on first use
    if name in ("driver", "active", "cache", "nvrtc", "launch", "specialize", "allocation"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
