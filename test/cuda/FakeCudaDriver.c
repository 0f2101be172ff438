/* A stand-in for libcuda.so.1 in tests of nimble-run's CUDA paths on
 * machines without a GPU (test/cuda/cuda-driver.test, cuda-runtime.test):
 * the driver entry points vm/cuda/CudaDriver.cpp resolves, chosen by environment
 * variables:
 *   FAKE_CUDA_INIT=<n>     what cuInit returns (default 0, success; 100 is
 *                          CUDA_ERROR_NO_DEVICE, a driver without a GPU)
 *   FAKE_CUDA_DEVICES=<n>  the device count (default 0)
 *   FAKE_CUDA_CONTEXT=1    contexts open and the calls below work; without
 *                          it every other call fails with
 *                          CUDA_ERROR_NOT_SUPPORTED (801), as on a machine
 *                          whose driver cannot use its device
 * With FAKE_CUDA_CONTEXT=1, "device memory" is host memory (cuMemAlloc is
 * malloc), so copies and the fake cuBLAS (FakeCublas.c) compute real values.
 * Every device pointer a call receives is checked against the live
 * allocations; a bad one fails the call with CUDA_ERROR_INVALID_VALUE (1)
 * and a "bad ..." line in the trace. Launches run NO code (there is nothing
 * to run PTX on): cuLaunchKernel checks and decodes the kernel's buffer
 * descriptors (vm/KernelABI.h's layout) and writes one line per launch to
 *   FAKE_CUDA_TRACE=<file> (appended), with
 *   FAKE_CUDA_FAIL_KERNEL=<entry>  the launches of that entry store 1 to
 *                                  their status word (a kernel that failed)
 *   FAKE_CUDA_MEMORY=<bytes>       cuMemAlloc fails with
 *                                  CUDA_ERROR_OUT_OF_MEMORY (2) past this
 *                                  many live bytes
 *   FAKE_CUDA_NO_KERNEL=<entry>    cuModuleGetFunction does not find it */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int envInt(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}
static int working(void) { return envInt("FAKE_CUDA_CONTEXT", 0) == 1; }

static void trace(const char *fmt, const char *a, const char *b) {
  const char *path = getenv("FAKE_CUDA_TRACE");
  if (!path || !*path) return;
  FILE *f = fopen(path, "a");
  if (!f) return;
  fprintf(f, fmt, a, b);
  fclose(f);
}

/* ---- memory ---------------------------------------------------------- */
struct Block {
  uintptr_t p;
  size_t size;
};
static struct Block *blocks;
static size_t numBlocks, capBlocks, liveBytes;

/* Is [p, p + n) inside one live allocation? */
static int inside(uintptr_t p, size_t n) {
  for (size_t i = 0; i < numBlocks; ++i)
    if (p >= blocks[i].p && p - blocks[i].p <= blocks[i].size && n <= blocks[i].size - (p - blocks[i].p)) return 1;
  return 0;
}

int cuMemAlloc_v2(unsigned long long *dptr, size_t size) {
  if (!working()) return 801;
  if (size == 0) return 1; /* the driver refuses empty allocations */
  const char *limit = getenv("FAKE_CUDA_MEMORY");
  if (limit && *limit && liveBytes + size > (size_t)strtoull(limit, NULL, 10)) return 2;
  void *p = malloc(size);
  if (!p) return 2;
  memset(p, 0xA5, size); /* device memory starts with garbage */
  if (numBlocks == capBlocks) {
    capBlocks = capBlocks ? 2 * capBlocks : 64;
    blocks = realloc(blocks, capBlocks * sizeof *blocks);
  }
  blocks[numBlocks].p = (uintptr_t)p;
  blocks[numBlocks].size = size;
  ++numBlocks;
  liveBytes += size;
  *dptr = (unsigned long long)(uintptr_t)p;
  return 0;
}

int cuMemFree_v2(unsigned long long d) {
  for (size_t i = 0; i < numBlocks; ++i)
    if (blocks[i].p == (uintptr_t)d) {
      free((void *)blocks[i].p);
      liveBytes -= blocks[i].size;
      blocks[i] = blocks[--numBlocks];
      return 0;
    }
  trace("bad free%s%s\n", "", "");
  return 1;
}

int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src, size_t n, void *stream) {
  (void)stream;
  if (!working()) return 801;
  if (!inside((uintptr_t)dst, n)) {
    trace("bad copy to the device%s%s\n", "", "");
    return 1;
  }
  memcpy((void *)(uintptr_t)dst, src, n);
  return 0;
}

int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n) {
  if (!working()) return 801;
  if (!inside((uintptr_t)src, n)) {
    trace("bad copy to the host%s%s\n", "", "");
    return 1;
  }
  memcpy(dst, (const void *)(uintptr_t)src, n);
  return 0;
}

int cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, size_t n, void *stream) {
  (void)stream;
  if (!working()) return 801;
  if (!inside((uintptr_t)dst, n) || !inside((uintptr_t)src, n)) {
    trace("bad device-to-device copy%s%s\n", "", "");
    return 1;
  }
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return 0;
}

/* ---- driver, devices, modules ----------------------------------------- */
int cuInit(unsigned flags) { (void)flags; return envInt("FAKE_CUDA_INIT", 0); }

int cuGetErrorName(int r, const char **name) {
  switch (r) {
  case 1: *name = "CUDA_ERROR_INVALID_VALUE"; return 0;
  case 2: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
  case 100: *name = "CUDA_ERROR_NO_DEVICE"; return 0;
  case 500: *name = "CUDA_ERROR_NOT_FOUND"; return 0;
  case 801: *name = "CUDA_ERROR_NOT_SUPPORTED"; return 0;
  default: return 1;
  }
}

int cuDeviceGetCount(int *n) { *n = envInt("FAKE_CUDA_DEVICES", 0); return 0; }
int cuDeviceGet(int *d, int ordinal) { *d = ordinal; return 0; }
int cuDeviceGetName(char *name, int len, int d) {
  (void)d;
  if (!working()) return 801;
  snprintf(name, (size_t)len, "Fake CUDA device");
  return 0;
}
static int theContext;
int cuDevicePrimaryCtxRetain(void **ctx, int d) {
  (void)d;
  if (!working()) return 801;
  *ctx = &theContext;
  return 0;
}
int cuCtxSetCurrent(void *ctx) { return working() && ctx == &theContext ? 0 : 801; }
int cuCtxSynchronize(void) { return working() ? 0 : 801; }

static int theModule;
int cuModuleLoadData(void **m, const void *image) {
  if (!working()) return 801;
  const char *img = image;
  trace("module %s%s\n", memcmp(img, "\177ELF", 4) == 0 ? "cubin" : strstr(img, ".version") ? "ptx" : "unknown", "");
  *m = &theModule;
  return 0;
}

struct Function {
  char name[256];
  struct Function *next; /* every function stays listed (and reachable) */
};
static struct Function *functions;
int cuModuleGetFunction(void **f, void *m, const char *name) {
  if (!working()) return 801;
  const char *missing = getenv("FAKE_CUDA_NO_KERNEL");
  if (m != &theModule || (missing && strcmp(missing, name) == 0)) return 500;
  struct Function *fn = calloc(1, sizeof *fn);
  snprintf(fn->name, sizeof fn->name, "%s", name);
  fn->next = functions;
  functions = fn;
  *f = fn;
  return 0;
}

/* ---- launches ----------------------------------------------------------- */
/* vm/KernelABI.h's nimble_buffer, 32 bytes. */
struct Buffer {
  uint64_t data, shape, strides;
  int32_t rank, dtype;
};
static const int dtypeBytes[] = {4, 2, 2, 8, 1, 1, 4, 8};
static const char *dtypeNames[] = {"f32", "f16", "bf16", "f64", "i1", "i8", "i32", "i64"};

int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **params, void **extra) {
  (void)stream;
  if (!working()) return 801;
  const struct Function *fn = f;
  if (!fn || !params || extra || gx == 0 || gy == 0 || gz == 0 || bx == 0 || bx * by * bz > 1024) return 1;
  uint64_t bufs = *(const uint64_t *)params[0];
  int32_t n = *(const int32_t *)params[1];
  uint64_t status = *(const uint64_t *)params[2];
  char line[4096];
  int len = snprintf(line, sizeof line, "launch %s grid=%ux%ux%u block=%ux%ux%u shared=%u bufs=%d", fn->name, gx, gy,
                     gz, bx, by, bz, shared, n);
  int ok = n >= 0 && inside(bufs, (size_t)n * sizeof(struct Buffer)) && inside(status, sizeof(int32_t));
  for (int32_t i = 0; ok && i < n && len < (int)sizeof line - 200; ++i) {
    struct Buffer b;
    memcpy(&b, (const void *)(uintptr_t)(bufs + (uint64_t)i * sizeof b), sizeof b);
    if (b.rank < 0 || b.rank > 64 || b.dtype < 0 || b.dtype > 7 || !inside(b.shape, (size_t)b.rank * 8) ||
        !inside(b.strides, (size_t)b.rank * 8)) {
      ok = 0;
      break;
    }
    const int64_t *shape = (const int64_t *)(uintptr_t)b.shape, *strides = (const int64_t *)(uintptr_t)b.strides;
    int64_t elems = 1, expect = 1;
    len += snprintf(line + len, sizeof line - (size_t)len, " [%s ", dtypeNames[b.dtype]);
    for (int32_t d = b.rank; d-- > 0;) {
      if (strides[d] != expect) ok = 0; /* dense row-major */
      expect *= shape[d];
    }
    for (int32_t d = 0; d < b.rank; ++d) {
      elems *= shape[d];
      len += snprintf(line + len, sizeof line - (size_t)len, "%s%lld", d ? "x" : "", (long long)shape[d]);
    }
    if (b.rank == 0) len += snprintf(line + len, sizeof line - (size_t)len, "scalar");
    /* A null data pointer: a value the kernel computes itself (an
     * intermediate of a fused group), which the runtime describes but does
     * not allocate. */
    if (b.data != 0 && elems > 0 && !inside(b.data, (size_t)elems * (size_t)dtypeBytes[b.dtype])) ok = 0;
    len += snprintf(line + len, sizeof line - (size_t)len, "%s%s]", b.data ? "" : " null", ok ? "" : " BAD");
  }
  trace("%s%s\n", line, ok ? "" : " bad arguments");
  if (!ok) return 1;
  const char *fail = getenv("FAKE_CUDA_FAIL_KERNEL");
  if (fail && strcmp(fail, fn->name) == 0) *(int32_t *)(uintptr_t)status = 1;
  return 0;
}
