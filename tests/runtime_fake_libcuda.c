/* A stand-in for libcuda.so.1 so that the launch path (argument packing, grids, shared memory
 * opt-in, contexts, error names) is testable on machines without a GPU. It records what the last
 * cuLaunchKernel received; tests read the fake_* globals through ctypes. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int CUresult;
uint64_t fake_last_params[64];
int fake_nparams = 0;             /* how many 8-byte parameter slots to record */
unsigned fake_last_grid[3], fake_last_block[3], fake_last_shared;
void *fake_last_stream;
void *fake_last_func;
int fake_launches = 0, fake_modules_loaded = 0, fake_sync_result = 0, fake_launch_result = 0;
int fake_dyn_shared_set = -1;
int fake_max_grid_x = 2147483647;
int fake_device_count = 1;
int fake_distinct_names = 0;      /* 1: device i is named "Fake GPU i" (another kind per device) */
int fake_check_context = 0;       /* 1: a launch, or a function attribute read or set, of a
                                     function of another context than the current one fails
                                     (CUDA_ERROR_INVALID_CONTEXT) */
void *fake_last_ctx;              /* the context current at the last launch / synchronize */
void *fake_sync_ctx;
static void *current_ctx = 0;
static void *ctx_stack[16];
static int ctx_depth = 0;
static void *loaded_in[4096];     /* module number -> the context it was loaded into */
static char func_names[16][128];
static void *func_ctx[16];
static int n_funcs = 0;

CUresult cuInit(unsigned flags) { (void)flags; return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuGetErrorName(CUresult r, const char **s) {
    switch (r) {
    case 0: *s = "CUDA_SUCCESS"; return 0;
    case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
    case 201: *s = "CUDA_ERROR_INVALID_CONTEXT"; return 0;
    case 700: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; return 0;
    case 710: *s = "CUDA_ERROR_ASSERT"; return 0;
    default: *s = "CUDA_ERROR_UNKNOWN"; return 0;
    }
}
CUresult cuGetErrorString(CUresult r, const char **s) { (void)r; *s = "fake driver error"; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = fake_device_count; return 0; }
CUresult cuDeviceGetName(char *name, int len, int dev) {
    if (fake_distinct_names) snprintf(name, len, "Fake GPU %d", dev);
    else snprintf(name, len, "Fake GPU");
    return 0;
}
CUresult cuDeviceGet(int *d, int i) { *d = i; return 0; }
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
    (void)dev;
    switch (attr) {
    case 1: *v = 1024; break;                 /* max threads per block */
    case 5: *v = fake_max_grid_x; break;
    case 6: case 7: *v = 65535; break;
    case 8: *v = 49152; break;
    case 10: *v = 32; break;                  /* warp size */
    case 12: *v = 65536; break;               /* registers per block */
    case 13: *v = 1980000; break;             /* clock rate, kHz */
    case 16: *v = 132; break;
    case 39: *v = 2048; break;                /* threads per multiprocessor */
    case 75: *v = 9; break;
    case 76: *v = 0; break;
    case 97: *v = 232448; break;
    default: *v = 0;
    }
    return 0;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) { *ctx = (void *)(uintptr_t)(0x1000 + dev); return 0; }
CUresult cuCtxGetCurrent(void **ctx) { *ctx = current_ctx; return 0; }
CUresult cuCtxSetCurrent(void *ctx) { current_ctx = ctx; return 0; }
CUresult cuCtxPushCurrent_v2(void *ctx) {
    if (ctx_depth < 16) ctx_stack[ctx_depth++] = current_ctx;
    current_ctx = ctx;
    return 0;
}
CUresult cuCtxPopCurrent_v2(void **ctx) {
    if (ctx) *ctx = current_ctx;
    current_ctx = ctx_depth ? ctx_stack[--ctx_depth] : 0;
    return 0;
}
CUresult cuCtxSynchronize(void) { fake_sync_ctx = current_ctx; return fake_sync_result; }
CUresult cuStreamSynchronize(void *s) { (void)s; return fake_sync_result; }
CUresult cuModuleLoadData(void **m, const void *image) {
    if (memcmp(image, "\x7f" "ELF", 4) != 0) return 200;   /* CUDA_ERROR_INVALID_IMAGE */
    *m = (void *)(uintptr_t)(0x2000 + ++fake_modules_loaded);
    loaded_in[fake_modules_loaded % 4096] = current_ctx;
    return 0;
}
CUresult cuModuleUnload(void *m) { (void)m; return 0; }
CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    if (n_funcs >= 16) n_funcs = 0;
    strncpy(func_names[n_funcs], name, 127);
    func_ctx[n_funcs] = loaded_in[((uintptr_t)m - 0x2000) % 4096];
    *f = func_names[n_funcs++];
    return 0;
}
static int other_context(void *f) {
    return fake_check_context && func_ctx[((char (*)[128])f - func_names) % 16] != current_ctx;
}
CUresult cuFuncGetAttribute(int *v, int attr, void *f) {
    if (other_context(f)) return 201;
    *v = attr == 4 ? 32 : 0;
    return 0;
}
CUresult cuFuncSetAttribute(void *f, int attr, int v) {
    if (other_context(f)) return 201;
    if (attr == 8) fake_dyn_shared_set = v;
    return 0;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, void *stream, void **params, void **extra) {
    (void)extra;
    if (fake_launch_result) return fake_launch_result;
    if (other_context(f)) return 201;
    fake_last_func = f; fake_last_ctx = current_ctx;
    fake_last_grid[0] = gx; fake_last_grid[1] = gy; fake_last_grid[2] = gz;
    fake_last_block[0] = bx; fake_last_block[1] = by; fake_last_block[2] = bz;
    fake_last_shared = shared; fake_last_stream = stream;
    for (int i = 0; i < fake_nparams && i < 64 && params[i]; i++) memcpy(&fake_last_params[i], params[i], 8);
    fake_launches++;
    return 0;
}
/* Same layout as CUDA's CUlaunchConfig (cuda.h); test_runtime_launch checks the offsets against
 * the real header when one is installed. */
typedef struct {
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void *hStream;
    void *attrs;
    unsigned numAttrs;
} FakeLaunchConfig;

CUresult cuLaunchKernelEx(const FakeLaunchConfig *c, void *f, void **params, void **extra) {
    if (c->attrs != 0 || c->numAttrs != 0) return 1;
    return cuLaunchKernel(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                          c->blockDimZ, c->sharedMemBytes, c->hStream, params, extra);
}

CUresult cuTensorMapEncodeTiled(void *tm, int dt, unsigned rank, void *addr, const uint64_t *dims,
                                const uint64_t *strides, const unsigned *box, const unsigned *es,
                                int il, int sw, int l2, int oob) {
    (void)dt; (void)rank; (void)addr; (void)dims; (void)strides; (void)box; (void)es;
    (void)il; (void)sw; (void)l2; (void)oob;
    memset(tm, 0xab, 128);
    return 0;
}
