/* A stand-in for libcuda.so.1 in tests of nimble-run's CUDA paths on
 * machines without a GPU (test/cuda/cuda-driver.test): the few driver entry
 * points vm/CudaDriver.cpp resolves, with the outcomes a real driver gives
 * on such machines, chosen by environment variables:
 *   FAKE_CUDA_INIT=<n>     what cuInit returns (default 0, success; 100 is
 *                          CUDA_ERROR_NO_DEVICE, a driver without a GPU)
 *   FAKE_CUDA_DEVICES=<n>  the device count (default 0)
 * Every other call fails with CUDA_ERROR_NOT_SUPPORTED (801): nothing here
 * pretends to run code. */
#include <stdlib.h>

static int envInt(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

int cuInit(unsigned flags) { (void)flags; return envInt("FAKE_CUDA_INIT", 0); }

int cuGetErrorName(int r, const char **name) {
  switch (r) {
  case 100: *name = "CUDA_ERROR_NO_DEVICE"; return 0;
  case 801: *name = "CUDA_ERROR_NOT_SUPPORTED"; return 0;
  default: return 1;
  }
}

int cuDeviceGetCount(int *n) { *n = envInt("FAKE_CUDA_DEVICES", 0); return 0; }
int cuDeviceGet(int *d, int ordinal) { *d = ordinal; return 0; }
int cuDeviceGetName(char *name, int len, int d) { (void)name; (void)len; (void)d; return 801; }
int cuDevicePrimaryCtxRetain(void **ctx, int d) { (void)ctx; (void)d; return 801; }
int cuCtxSetCurrent(void *ctx) { (void)ctx; return 801; }
int cuModuleLoadData(void **m, const void *image) { (void)m; (void)image; return 801; }
int cuModuleGetFunction(void **f, void *m, const char *name) { (void)f; (void)m; (void)name; return 801; }
