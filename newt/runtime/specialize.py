"""The launch slow path: a specialization key seen for the first time.

Sits between jit.py's fast path (which only looks keys up) and the caches/compiler. Consumes the
call's arguments; checks everything the fast path trusts the key for (CUDA tensors on one device,
constexprs with compile-time values, num_warps, supported dtypes); produces the compile inputs
(signature, constexprs, specialization, options), then a KernelBinary from the disk cache or,
only on a disk miss, from compiler.compile, and finally a Launcher on the device.

The compiler is imported here and only on a disk miss, so a warm process never loads the
frontend or codegen.
"""
from __future__ import annotations

import os

from .. import options
from ..errors import LaunchError
from . import cache, descriptor_args


def bind(jf, args, kwargs):
    """(arguments by name with defaults applied, num_warps, num_stages)."""
    kw = dict(kwargs)
    # a kernel parameter named num_warps / num_stages is also that option (as in Triton)
    opts = {o: kw.pop(o) for o in ("num_warps", "num_stages") if o in kw and o not in jf.arg_names}
    try:
        ba = jf.signature.bind(*args, **kw)
    except TypeError as e:
        raise jf._signature_error(e) from None
    ba.apply_defaults()
    num_warps = opts.get("num_warps", ba.arguments.get("num_warps", 4))
    num_stages = opts.get("num_stages", ba.arguments.get("num_stages", 3))
    num_warps, num_stages = (getattr(v, "value", v) for v in (num_warps, num_stages))
    if not (isinstance(num_warps, int) and 1 <= num_warps <= 32
            and num_warps & (num_warps - 1) == 0):
        raise LaunchError(f"kernel {jf.__name__}: num_warps must be a power of two from 1 to 32, "
                          f"got {num_warps!r}")
    if not (isinstance(num_stages, int) and 1 <= num_stages <= 8):
        raise LaunchError(f"kernel {jf.__name__}: num_stages must be an int from 1 to 8, got "
                          f"{num_stages!r}")
    return dict(ba.arguments), num_warps, num_stages


def specialize(jf, arguments: dict, *, allow_cpu: bool = False):
    """(signature, constexprs, specialization, device index or None) of bound arguments.

    signature maps each runtime parameter to its Triton spelling ("*fp32", "i32", "fp32", "i1");
    specialization maps it to dict(divisible_by_16, equal_to_1, large)."""
    import torch

    from .. import dtypes
    from ..arg_kinds import classify as _classify
    from ..language import constexpr
    name = jf.__name__
    signature, constexprs, spec, devices = {}, {}, {}, {}
    for p, v in arguments.items():
        if isinstance(v, constexpr) and v.value is None:
            v = None
        if v is None and p not in jf.constexpr_names:
            # As in Triton (and the interpreter): None is a compile-time value whatever the
            # annotation, so `if bias_ptr is not None:` is decided at compile time.
            constexprs[p] = None
            continue
        if p in jf.constexpr_names:
            if isinstance(v, constexpr):
                v = v.value
            if isinstance(v, torch.Tensor):
                raise LaunchError(f"kernel {name}: parameter '{p}' is a constexpr and needs a "
                                  "compile-time value (int, float, bool, dtype, ...), got a tensor")
            try:
                hash(v)
            except TypeError:
                raise LaunchError(f"kernel {name}: constexpr '{p}' must be hashable, got "
                                  f"{type(v).__name__}") from None
            constexprs[p] = v
            continue
        if descriptor_args.is_descriptor(v):
            descriptor_args.specialize(name, p, v, signature, spec, devices, allow_cpu)
            continue
        dns = p in jf.do_not_specialize
        kp, _ = _classify(v, dns)
        if isinstance(v, torch.Tensor) or isinstance(kp[0], torch.dtype):
            # a tensor, or an object standing for one (newt/tensor_like.py): the key part has
            # the same layout (dtype, device index, aligned, large)
            device = v.device if isinstance(v, torch.Tensor) else \
                torch.device("cpu") if kp[1] < 0 else torch.device("cuda", kp[1])
            what = "a tensor" if isinstance(v, torch.Tensor) else f"a {type(v).__name__}"
            if device.type != "cuda" and not allow_cpu:
                raise LaunchError(
                    f"kernel {name}: argument '{p}' is {what} on {device}; newt kernels run "
                    "on CUDA tensors. To run this kernel on the CPU, set NEWT_INTERPRET=1 (the "
                    "interpreter).")
            devices.setdefault(device, p)
            try:
                dt = dtypes.from_torch(kp[0])
            except (KeyError, ValueError, TypeError):
                raise LaunchError(f"kernel {name}: argument '{p}' has dtype {kp[0]}, which "
                                  "newt does not support") from None
            signature[p] = "*" + dt.short
            spec[p] = dict(divisible_by_16=bool(kp[2]) if not dns else False,
                           equal_to_1=False, large=bool(kp[3]) if not dns else False)
        elif kp[0] in ("i1", "i32", "i64", "u64", "fp32"):
            signature[p] = kp[0]
            ints = kp[0] in ("i32", "i64", "u64") and not dns
            spec[p] = dict(divisible_by_16=bool(kp[2]) if ints else False,
                           equal_to_1=bool(kp[1]) if ints else False, large=False)
        else:
            raise LaunchError(f"kernel {name}: argument '{p}' has type {type(v).__name__} "
                              f"({kp[1] if len(kp) > 1 else ''}); pass a tensor, int, float "
                              "or bool")
    if len(devices) > 1:
        where = ", ".join(f"'{p}' on {d}" for d, p in devices.items())
        raise LaunchError(f"kernel {name}: all tensors must be on one device, got {where}")
    dev = next(iter(devices), None)
    return signature, constexprs, spec, (dev.index if dev is not None else None)


def get_binary(jf, signature, constexprs, spec, *, arch, num_warps, num_stages, compile_fn=None):
    """The KernelBinary of one specialization: disk cache first, compiler on a miss.
    `compile_fn` replaces compiler.compile (tests)."""
    disk = cache.disk_cache()
    debug = bool(options.flags.debug or jf.debug)
    key = cache.cache_key(jf.source_key(), signature, constexprs, spec, arch, num_warps,
                          num_stages, debug)
    kb = disk.load(key)
    if kb is not None and not (debug or os.environ.get("NEWT_DUMP")):
        return kb
    from .. import debug_dump   # NEWT_DEBUG / NEWT_DUMP: a hit shows the stages it stored
    if kb is not None and debug_dump.replay(kb.meta, debug):
        return kb
    if compile_fn is None:
        from .. import compiler
        compile_fn = compiler.compile
    ck = compile_fn(jf, signature, constexprs, arch=arch, num_warps=num_warps,
                    num_stages=num_stages, specialization=spec)
    kb = cache.KernelBinary.from_compiled(ck)
    if getattr(ck, "stages", None):    # shown by the compiler; kept for warm-cache runs
        kb.meta[debug_dump.META_KEY] = ck.stages
    kb.meta["asm_key"] = cache.digest(key, "asm")    # where a handle's `.asm` finds the text
    disk.store(key, kb)
    disk.store_json(kb.meta["asm_key"], kb.asm)
    return kb


def resolve(jf, key, args, kwargs):
    """Launcher for a key the fast path has not seen."""
    from . import driver
    from .launch import Launcher
    arguments, num_warps, num_stages = bind(jf, args, kwargs)
    signature, constexprs, spec, dev_index = specialize(jf, arguments)
    if dev_index is None:
        dev_index = driver.current_device_index()
    device = driver.Device.get(dev_index)
    kb = get_binary(jf, signature, constexprs, spec, arch=device.arch, num_warps=num_warps,
                    num_stages=num_stages)
    # loaded, and its function's attributes read and set, in the tensors' device's context,
    # whichever device the caller has current
    return driver.run_in_context(dev_index, lambda: Launcher(kb, device, jf.runtime_positions))
