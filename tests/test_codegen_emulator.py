"""Runs generated CUDA C++ on the CPU: a check of codegen semantics that needs no GPU.

The kernel source newt generates (passes + codegen, exactly as compile() produces it) is built
with the host C++ compiler against a small emulation header: one OS thread per CUDA thread,
std::barrier for __syncthreads, a per-warp exchange buffer for __shfl_xor_sync, a shared
array for the dynamic shared memory, and C++ versions of the few helpers newt writes in PTX
(header.PTX_HELPERS, atomics). Blocks run one after another. Results are compared with torch
(and, in the op-suite mode below, with the interpreter).

Op-suite mode: `python -m pytest -p test_codegen_emulator tests/test_ops_*.py -k interp` runs
every op-suite kernel through the interpreter and through emulated generated code and fails
when they differ (set NEWT_EMULATE=1 to enable the hook).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import pytest
import torch

import newt
import newt.language as nl
from newt import dtypes as D
from newt.options import Options

HAS_CXX = shutil.which("g++") is not None
pytestmark = pytest.mark.skipif(not HAS_CXX, reason="no host C++ compiler")

EMU_PRELUDE = r"""
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __align__(n) __attribute__((aligned(n)))
struct nt_dim3 { unsigned x, y, z; };
static thread_local nt_dim3 threadIdx;
static nt_dim3 blockIdx, gridDim;
alignas(16) unsigned char nt_smem[1 << 18];
static pthread_barrier_t nt_bar;
struct nt_warp { pthread_barrier_t bar; unsigned long long slot[32]; };
static nt_warp nt_warps[32];
static pthread_mutex_t nt_mu = PTHREAD_MUTEX_INITIALIZER;
static int nt_failed;
static void __syncthreads() { pthread_barrier_wait(&nt_bar); }
template <class T> static T __shfl_xor_sync(unsigned, T v, int m) {
  int t = threadIdx.x; nt_warp& w = nt_warps[t / 32];
  unsigned long long b = 0; memcpy(&b, &v, sizeof(T)); w.slot[t % 32] = b;
  pthread_barrier_wait(&w.bar);
  unsigned long long o = w.slot[(t % 32) ^ m];
  pthread_barrier_wait(&w.bar);
  T r; memcpy(&r, &o, sizeof(T)); return r;
}
template <class T> static T __shfl_up_sync(unsigned, T v, int m) {
  int t = threadIdx.x; nt_warp& w = nt_warps[t / 32];
  unsigned long long b = 0; memcpy(&b, &v, sizeof(T)); w.slot[t % 32] = b;
  pthread_barrier_wait(&w.bar);
  unsigned long long o = w.slot[t % 32 >= m ? t % 32 - m : t % 32];
  pthread_barrier_wait(&w.bar);
  T r; memcpy(&r, &o, sizeof(T)); return r;
}
static void __assertfail(const char* msg, const char* file, unsigned line, const char* fn, size_t) {
  pthread_mutex_lock(&nt_mu); nt_failed = 1;
  fprintf(stderr, "%s:%u: %s: Assertion `%s` failed.\n", file, line, fn, msg);
  pthread_mutex_unlock(&nt_mu);
}
template <class A, class B> static A nt_bits(B b) { A a; memcpy(&a, &b, sizeof(A)); return a; }
static float __uint_as_float(unsigned x) { return nt_bits<float>(x); }
static unsigned __float_as_uint(float x) { return nt_bits<unsigned>(x); }
static float __int_as_float(int x) { return nt_bits<float>(x); }
static int __float_as_int(float x) { return nt_bits<int>(x); }
static double __longlong_as_double(long long x) { return nt_bits<double>(x); }
static long long __double_as_longlong(double x) { return nt_bits<long long>(x); }
static unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64); }
static int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static int atomicAdd(int* p, int v) {   // shared-memory counters (nl.histogram)
  pthread_mutex_lock(&nt_mu); int old = *p; *p = old + v; pthread_mutex_unlock(&nt_mu); return old; }
static float __fsqrt_rn(float x) { return sqrtf(x); }
// a few CUDA math intrinsics of libdevice (tests/test_lang_libdevice.py), to nearest
static float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678f); }
static double normcdf(double x) { return 0.5 * erfc(-x * 0.7071067811865476); }
static float sinpif(float x) { return sinf(3.14159265358979f * x); }
static double sinpi(double x) { return sin(3.141592653589793 * x); }
static float norm3df(float a, float b, float c) { return sqrtf(a * a + b * b + c * c); }
static double norm3d(double a, double b, double c) { return sqrt(a * a + b * b + c * c); }
static float __frcp_rn(float x) { return 1.0f / x; }
static double __drcp_rn(double x) { return 1.0 / x; }
static float __saturatef(float x) { return x > 0.f ? (x < 1.f ? x : 1.f) : 0.f; }
static float __fadd_rn(float a, float b) { return a + b; }
static double __dadd_rn(double a, double b) { return a + b; }
static float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static int __float2int_rd(float x) { return (int)floorf(x); }
// cvt.rzi: truncation, saturating to the range, NaN -> 0 (2^63's bits for 64-bit results,
// as the GPU gives them; a C cast is undefined outside the range)
template <class I, class F> static I nt_emu_f2i(F x) {
  const I lo = (I)0 < (I)-1 ? (I)0 : (I)((unsigned long long)1 << (sizeof(I) * 8 - 1));
  const I hi = (I)~lo;
  return x != x ? (sizeof(I) == 8 ? (I)lo | (I)((unsigned long long)1 << 63) : (I)0) : x <= (F)lo ? lo : x >= (F)hi ? hi : (I)x; }
static int __float2int_rz(float x) { return nt_emu_f2i<int>(x); }
static unsigned __float2uint_rz(float x) { return nt_emu_f2i<unsigned>(x); }
static long long __float2ll_rz(float x) { return nt_emu_f2i<long long>(x); }
static unsigned long long __float2ull_rz(float x) { return nt_emu_f2i<unsigned long long>(x); }
static int __double2int_rz(double x) { return nt_emu_f2i<int>(x); }
static unsigned __double2uint_rz(double x) { return nt_emu_f2i<unsigned>(x); }
static long long __double2ll_rz(double x) { return nt_emu_f2i<long long>(x); }
static unsigned long long __double2ull_rz(double x) { return nt_emu_f2i<unsigned long long>(x); }
static int __double2int_rd(double x) { return (int)floor(x); }
static float __int2float_rn(int x) { return (float)x; }
static int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static int __popc(unsigned x) { return __builtin_popcount(x); }
static int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static int __ffs(int x) { return __builtin_ffs(x); }
static unsigned __brev(unsigned x) { unsigned r = 0; for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i); return r; }
static int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
static unsigned __sad(int a, int b, unsigned c) { return (unsigned)(a > b ? (long long)a - b : (long long)b - a) + c; }
static double __dsqrt_rn(double x) { return sqrt(x); }
static float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static double rsqrt(double x) { return 1.0 / sqrt(x); }
"""

EMU_HELPERS = r"""
template <class T> static T nt_div(T a, T b) {
  if (b == 0) return (T)-1;
  if ((T)-1 < (T)0 && b == (T)-1) return (T)(0ull - (unsigned long long)a);
  return a / b; }
template <class T> static T nt_mod(T a, T b) {
  if (b == 0) return a;
  if ((T)-1 < (T)0 && b == (T)-1) return (T)0;
  return a % b; }
NT_INLINE float nt_h2f(u16 h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }
// cvt.rn.f16.f32 / cvt.rn.bf16.f32 write the canonical NaN, 0x7FFF, for every NaN
NT_INLINE u16 nt_f2h(float f) {
  if (f != f) return 0x7fff;
  _Float16 h = (_Float16)f; u16 b; memcpy(&b, &h, 2); return b; }
NT_INLINE u16 nt_f2b(float f) {
  u32 x = nt_bits<u32>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  return (u16)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16); }
NT_INLINE float nt_exp2(float x) { float y = exp2f(x); return fabsf(y) < 1.17549435e-38f ? 0.f : y; }
NT_INLINE float nt_ex2_full(float x) { return exp2f(x); }
NT_INLINE float nt_fdiv(float a, float b) { return a / b; }
NT_INLINE float nt_sqrt(float x) { return fabsf(x) < 1.17549435e-38f ? 0.f * x : sqrtf(x); }
NT_INLINE void nt_ld4(const void* p, u32& a, u32& b, u32& c, u32& d) {
  const u32* q = (const u32*)p; a = q[0]; b = q[1]; c = q[2]; d = q[3]; }
NT_INLINE void nt_ld2(const void* p, u32& a, u32& b) { const u32* q = (const u32*)p; a = q[0]; b = q[1]; }
NT_INLINE void nt_ld1(const void* p, u32& a) { a = *(const u32*)p; }
NT_INLINE void nt_st4(void* p, u32 a, u32 b, u32 c, u32 d) {
  u32* q = (u32*)p; q[0] = a; q[1] = b; q[2] = c; q[3] = d; }
NT_INLINE void nt_st2(void* p, u32 a, u32 b) { u32* q = (u32*)p; q[0] = a; q[1] = b; }
NT_INLINE void nt_st1(void* p, u32 a) { *(u32*)p = a; }
NT_INLINE void nt_st4p(void* p, bool m, u32 a, u32 b, u32 c, u32 d) { if (m) nt_st4(p, a, b, c, d); }
NT_INLINE void nt_st2p(void* p, bool m, u32 a, u32 b) { if (m) nt_st2(p, a, b); }
NT_INLINE void nt_st1p(void* p, bool m, u32 a) { if (m) nt_st1(p, a); }
NT_INLINE u16 nt_ldp8(const void* p, bool m, u16 o) { return m ? *(const u8*)p : o; }
NT_INLINE u16 nt_ldp16(const void* p, bool m, u16 o) { return m ? *(const u16*)p : o; }
NT_INLINE u32 nt_ldp32(const void* p, bool m, u32 o) { return m ? *(const u32*)p : o; }
NT_INLINE u64 nt_ldp64(const void* p, bool m, u64 o) { return m ? *(const u64*)p : o; }
NT_INLINE void nt_stp8(void* p, bool m, u16 v) { if (m) *(u8*)p = (u8)v; }
NT_INLINE void nt_stp16(void* p, bool m, u16 v) { if (m) *(u16*)p = v; }
NT_INLINE void nt_stp32(void* p, bool m, u32 v) { if (m) *(u32*)p = v; }
NT_INLINE void nt_stp64(void* p, bool m, u64 v) { if (m) *(u64*)p = v; }
"""


def _emu_atomic_function(em, kind, dt, sem, scope):
    """CPU stand-in for codegen.atomics.atomic_function: the same read-modify-write under a lock."""
    from newt.codegen.elementwise import binary_expr
    from newt.codegen.emitter import reg_type, storage_type
    from newt.codegen.memory import load_conv, store_conv
    name = f"nt_atom_{kind}_{dt.short}"
    if name in em.helpers:
        return name
    rt, st = reg_type(dt), storage_type(dt)
    new = {"add": binary_expr("add", dt, "old", "v"), "max": "(v > old ? v : old)",
           "min": "(v < old ? v : old)", "xchg": "v", "cas": "(old == cmp ? v : old)"}.get(kind)
    if new is None:
        new = binary_expr(kind, dt, "old", "v")
    args = f"{st}* p, {rt} cmp, {rt} v" if kind == "cas" else f"{st}* p, {rt} v"
    em.helpers[name] = (f"NT_INLINE {rt} {name}({args}) {{ pthread_mutex_lock(&nt_mu);\n"
                        f"  {rt} old = {load_conv(dt, '*p')}; *p = {store_conv(dt, new)};\n"
                        f"  pthread_mutex_unlock(&nt_mu); return old; }}")
    return name


def _emu_red_function(em, red, dt, scope):
    """CPU stand-in for codegen.atomics.red_function: red.n adds under the lock."""
    from newt.codegen.elementwise import binary_expr
    from newt.codegen.emitter import reg_type, storage_type
    from newt.codegen.memory import load_conv, store_conv
    name = f"nt_red_add_v{red.n}_{red.ptx}"
    if name not in em.helpers:
        args = ", ".join(f"{reg_type(dt)} v{i}" for i in range(red.n))
        adds = " ".join(f"{{ {reg_type(dt)} old = {load_conv(dt, f'p[{i}]')}; "
                        f"p[{i}] = {store_conv(dt, binary_expr('add', dt, 'old', f'v{i}'))}; }}"
                        for i in range(red.n))
        em.helpers[name] = (f"NT_INLINE void {name}({storage_type(dt)}* p, {args}) {{ "
                            f"pthread_mutex_lock(&nt_mu);\n  {adds}\n  "
                            "pthread_mutex_unlock(&nt_mu); }")
    return name


def _emu_fence_function(em, scope):
    em.helpers.setdefault("nt_emu_fence", "NT_INLINE void nt_emu_fence() {}")
    return "nt_emu_fence"


_CTYPES = {"fp32": ctypes.c_float, "fp64": ctypes.c_double, "i1": ctypes.c_bool,
           "i32": ctypes.c_int32, "i64": ctypes.c_int64, "u64": ctypes.c_uint64,
           "i8": ctypes.c_int8, "i16": ctypes.c_int16, "u8": ctypes.c_uint8,
           "u16": ctypes.c_uint16, "u32": ctypes.c_uint32}
_LIBS: dict = {}
_DIR = tempfile.mkdtemp(prefix="newt-emu-")


def build(jitfn, signature, constexprs, spec, num_warps):
    """(ctypes library, runtime params) of the kernel's generated code, built for the CPU."""
    from newt.codegen import atomics, generate
    from newt.codegen.emitter import reg_type
    from newt.codegen.header import HEADER, PORTABLE, TYPES
    from newt.compiler import _apply_specialization
    from newt.frontend import build_ir
    from newt.passes import run_passes
    sig = {k: D.from_signature(v) if isinstance(v, str) and not v.startswith("tensordesc") else v
           for k, v in signature.items()}    # a host descriptor: frontend/descriptors.py
    fn = build_ir(jitfn.fn, sig, dict(constexprs), spec)
    _apply_specialization(fn, spec)
    opts = Options(arch="sm_90a", num_warps=num_warps)
    run_passes(fn, opts)
    saved = atomics.atomic_function, atomics.red_function, atomics.fence_function
    atomics.atomic_function = _emu_atomic_function
    atomics.red_function, atomics.fence_function = _emu_red_function, _emu_fence_function
    try:
        source, name = generate(fn, opts)
    finally:
        atomics.atomic_function, atomics.red_function, atomics.fence_function = saved
    assert source.startswith(HEADER)
    params = [p for p in fn.params if p.name not in fn.attrs["equal_to_1"]]
    body = source[len(HEADER):]
    maps = list(fn.attrs.get("tma_maps", ()))
    persist = "persistent" in fn.attrs    # the grid, a hidden last parameter (launch.py)
    unpack = ", ".join([f"*({reg_type(p.dtype)}*)args[{i}]" for i, p in enumerate(params)]
                       + [f"*(newt_tmap*)args[{len(params) + k}]" for k in range(len(maps))]
                       + [f"*(i32*)args[{len(params) + len(maps)}]"] * persist)
    T = opts.num_threads
    launcher = f"""
static void** nt_args;
static void* nt_thread(void* t) {{
  threadIdx = {{(unsigned)(size_t)t, 0, 0}};
  void** args = nt_args; (void)args;
  {name}({unpack});
  return 0;
}}
extern "C" int nt_launch(void** args, int gx, int gy, int gz) {{
  gridDim = {{(unsigned)gx, (unsigned)gy, (unsigned)gz}};
  nt_args = args; nt_failed = 0;
  pthread_barrier_init(&nt_bar, 0, {T});
  for (int w = 0; w < {T // 32}; ++w) pthread_barrier_init(&nt_warps[w].bar, 0, 32);
  pthread_t ts[{T}];
  for (int z = 0; z < gz; ++z) for (int y = 0; y < gy; ++y) for (int x = 0; x < gx; ++x) {{
    blockIdx = {{(unsigned)x, (unsigned)y, (unsigned)z}};
    for (int t = 0; t < {T}; ++t) pthread_create(&ts[t], 0, nt_thread, (void*)(size_t)t);
    for (int t = 0; t < {T}; ++t) pthread_join(ts[t], 0);
  }}
  pthread_barrier_destroy(&nt_bar);
  for (int w = 0; w < {T // 32}; ++w) pthread_barrier_destroy(&nt_warps[w].bar);
  return nt_failed;
}}
"""
    full = (TYPES.replace("static __device__ __forceinline__", "static inline") + EMU_PRELUDE
            + EMU_HELPERS + PORTABLE + body + launcher)
    key = hashlib.sha256(full.encode()).hexdigest()[:20]
    if key not in _LIBS:
        src = os.path.join(_DIR, key + ".cpp")
        lib = os.path.join(_DIR, key + ".so")
        with open(src, "w") as f:
            f.write(full)
        r = subprocess.run(["g++", "-std=c++20", "-O0", "-shared", "-fPIC", "-pthread", "-w",
                            "-o", lib, src], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"emulation build failed:\n{r.stderr[:4000]}\n--- source: {src}")
        _LIBS[key] = ctypes.CDLL(lib)
    build.last_maps = maps    # the TMA map recipes of the last build (emulate() encodes them)
    build.last_persistent = persist
    build.last_source = source   # the generated CUDA C++ (before the emulator's swaps)
    build.last_fn = fn           # the IR after the passes
    return _LIBS[key], params


EMU_SMS = 3    # a persistent kernel's CTAs (passes/tc/persistent.py): several programs each


def _descriptor_part(arguments, pname):
    """The value of parameter `pname`, one size or stride of a TensorDescriptor argument
    (newt/descriptors.py names them)."""
    from newt.descriptors import part_names
    for name, v in arguments.items():
        if hasattr(v, "block_shape"):
            parts = part_names(name, len(v.shape))
            if pname in parts:
                return (list(v.shape) + list(v.strides))[parts.index(pname)]
    raise KeyError(pname)


def emulate(jitfn, grid, *args, num_warps=4, **kwargs):
    """Launch `jitfn` on CPU tensors through its generated CUDA C++ (like kernel[grid](...))."""
    from newt.runtime import specialize as S
    arguments, nw, _ = S.bind(jitfn, args, dict(kwargs, num_warps=num_warps))
    sig, cx, spec, _ = S.specialize(jitfn, arguments, allow_cpu=True)
    lib, params = build(jitfn, sig, cx, spec, nw)
    if callable(grid):
        grid = grid(dict(arguments))
    grid = tuple(grid) + (1,) * (3 - len(grid))
    holders = []
    for p in params:
        v = arguments.get(p.name)
        if p.name not in arguments:    # a size or stride of a host TensorDescriptor argument
            v = _descriptor_part(arguments, p.name)
        elif hasattr(v, "block_shape"):
            v = v.base                 # the descriptor's base pointer
        if isinstance(v, torch.Tensor):
            holders.append(ctypes.c_void_p(v.data_ptr()))
        else:
            holders.append(_CTYPES[sig[p.name]](v))
    ptrs = [ctypes.cast(ctypes.pointer(h), ctypes.c_void_p).value for h in holders]
    if build.last_maps:
        # TMA maps as the launcher builds them (runtime/tensormap.py), with the model encoder of
        # tests/test_dot_tma.py standing in for the driver
        from test_dot_tma import model_encode

        from newt.runtime.tensormap import TensorMaps, recipe_builder
        vals = [h.value for h in holders]
        slot_of = {p.index: i for i, p in enumerate(params)}
        maps = recipe_builder(build.last_maps, slot_of, TensorMaps(model_encode))
        ptrs += maps(vals)     # (`maps` keeps the encoded maps alive through the launch)
    if build.last_persistent:   # as the launcher does, with EMU_SMS SMs: CTAs loop
        gx = ctypes.c_int32(grid[0])
        holders.append(gx)
        ptrs.append(ctypes.addressof(gx))
        grid = (min(grid[0], EMU_SMS),) + grid[1:]
    argv = (ctypes.c_void_p * max(1, len(ptrs)))(*ptrs)
    if lib.nt_launch(argv, *grid):
        raise AssertionError(f"device assert failed in {jitfn.__name__}")


# ----------------------------------------------------------------------------- kernels

@newt.jit
def _softmax2d(out_ptr, in_ptr, n_rows, n_cols, ROWS: nl.constexpr, BLOCK: nl.constexpr):
    rows = nl.program_id(0) * ROWS + nl.arange(0, ROWS)
    cols = nl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * n_cols + cols[None, :]
    x = nl.load(in_ptr + offs, mask=mask, other=-float("inf"))
    x = x - nl.max(x, axis=1)[:, None]
    num = nl.exp(x)
    nl.store(out_ptr + offs, num / nl.sum(num, axis=1)[:, None], mask=mask)


@newt.jit
def _colsum(out_ptr, in_ptr, n_rows, n_cols, ROWS: nl.constexpr, BLOCK: nl.constexpr):
    rows = nl.arange(0, ROWS)
    cols = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = nl.load(in_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    nl.store(out_ptr + cols, nl.sum(x, axis=0), mask=cols < n_cols)


@newt.jit
def _argmax_rows(out_ptr, in_ptr, n_cols, BLOCK: nl.constexpr):
    row = nl.program_id(0)
    cols = nl.arange(0, BLOCK)
    x = nl.load(in_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    nl.store(out_ptr + row, nl.argmax(x, axis=0))


@newt.jit
def _cumsum_loop(out_ptr, in_ptr, n, BLOCK: nl.constexpr):
    carry = nl.zeros([1], dtype=nl.float32)
    for start in range(0, n, BLOCK):
        offs = start + nl.arange(0, BLOCK)
        x = nl.load(in_ptr + offs, mask=offs < n, other=0.0)
        c = nl.cumsum(x, axis=0) + nl.sum(carry, axis=0)
        nl.store(out_ptr + offs, c, mask=offs < n)
        carry = nl.zeros([1], dtype=nl.float32) + nl.sum(x, axis=0) + nl.sum(carry, axis=0)


@newt.jit
def _histogram(out_ptr, in_ptr, n, BLOCK: nl.constexpr):
    offs = nl.program_id(0) * BLOCK + nl.arange(0, BLOCK)
    v = nl.load(in_ptr + offs, mask=offs < n, other=0)
    nl.atomic_add(out_ptr + v, 1, mask=offs < n)


@pytest.mark.parametrize("num_warps", [1, 4])
@pytest.mark.parametrize("shape,ROWS,BLOCK", [((7, 37), 4, 64), ((5, 300), 2, 512),
                                             ((9, 3), 16, 4)])
def test_softmax_2d_blocks(num_warps, shape, ROWS, BLOCK):
    x = torch.randn(shape) * 3
    out = torch.full_like(x, float("nan"))
    emulate(_softmax2d, (newt.cdiv(shape[0], ROWS),), out, x, shape[0], shape[1], ROWS=ROWS,
            BLOCK=BLOCK, num_warps=num_warps)
    torch.testing.assert_close(out, torch.softmax(x, 1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,ROWS,BLOCK", [((13, 37), 16, 8), ((3, 129), 4, 128)])
def test_column_sums_axis0(shape, ROWS, BLOCK):
    x = torch.randn(shape)
    out = torch.full((shape[1],), float("nan"))
    emulate(_colsum, (newt.cdiv(shape[1], BLOCK),), out, x, shape[0], shape[1], ROWS=ROWS,
            BLOCK=BLOCK)
    torch.testing.assert_close(out, x.sum(0), rtol=1e-5, atol=1e-5)


def test_argmax_ties_take_the_first_index():
    x = torch.randint(0, 5, (6, 300)).float()
    out = torch.full((6,), -1, dtype=torch.int32)
    emulate(_argmax_rows, (6,), out, x, 300, BLOCK=512)
    ref = torch.tensor([int((r == r.max()).nonzero()[0]) for r in x], dtype=torch.int32)
    assert torch.equal(out, ref)


def test_cumsum_with_loop_carried_block():
    x = torch.randn(1000)
    out = torch.full_like(x, float("nan"))
    emulate(_cumsum_loop, (1,), out, x, 1000, BLOCK=256)
    torch.testing.assert_close(out, torch.cumsum(x, 0), rtol=1e-4, atol=1e-4)


@newt.jit
def _cumsum_1d(out_ptr, in_ptr, n, BLOCK: nl.constexpr):
    offs = nl.arange(0, BLOCK)
    x = nl.load(in_ptr + offs, mask=offs < n, other=0)
    nl.store(out_ptr + offs, nl.cumsum(x, axis=0), mask=offs < n)


@pytest.mark.parametrize("num_warps", [1, 4])
@pytest.mark.parametrize("BLOCK", [2048, 128])
def test_warp_shuffle_scan(num_warps, BLOCK):
    x = torch.randint(-100, 100, (BLOCK - 5,), dtype=torch.int32)
    out = torch.full_like(x, -7)
    emulate(_cumsum_1d, (1,), out, x, BLOCK - 5, BLOCK=BLOCK, num_warps=num_warps)
    assert torch.equal(out, torch.cumsum(x, 0).int())


def test_atomic_add_histogram_counts_each_element_once():
    v = torch.randint(0, 10, (77,), dtype=torch.int32)
    out = torch.zeros(10, dtype=torch.int32)
    emulate(_histogram, (3,), out, v, 77, BLOCK=32)   # 32 elements < 128 threads: invalid slots
    assert torch.equal(out, torch.bincount(v, minlength=10).int())


# ----------------------------------------------------------------------------- op-suite mode

def pytest_configure(config):
    """With NEWT_EMULATE=1 (as a plugin: -p test_codegen_emulator), every interpreter launch is
    also run through emulated generated code and the tensors are compared."""
    if os.environ.get("NEWT_EMULATE") != "1":
        return
    import newt.interpreter as interp
    orig = interp.launch

    def both(jitfn, grid, args, kwargs):
        kw = dict(kwargs)
        nw = kw.pop("num_warps", 4)
        kw.pop("num_stages", None)
        clones = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        kclones = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        result = orig(jitfn, grid, args, kwargs)
        try:
            emulate(jitfn, grid, *clones, num_warps=nw, **kclones)
        except newt.CompilationError as e:
            if "not supported yet" in str(e):
                return result
            raise
        for a, c in list(zip(args, clones)) + [(kwargs[k], kclones[k]) for k in kclones]:
            if isinstance(a, torch.Tensor) and a.dtype.is_floating_point:
                # 16-bit results: one ulp (2**-8 for bf16), since the emulated fp32 math (exp2f,
                # ...) and the interpreter's torch may round the last fp32 bit differently and
                # land on either side of a 16-bit rounding boundary
                t = 8e-3 if a.dtype in (torch.float16, torch.bfloat16) else 2e-3
                torch.testing.assert_close(c, a, rtol=t, atol=t, equal_nan=True,
                                           msg=lambda m: f"emulated {jitfn.__name__}: {m}")
            elif isinstance(a, torch.Tensor):
                assert torch.equal(c, a), f"emulated {jitfn.__name__}: {c} != {a}"
        return result

    interp.launch = both
