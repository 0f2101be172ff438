//===- CudaDriver.cpp - dlopen of the CUDA driver, devices, the module ------===//

#include "vm/cuda/CudaDriver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace nimble::vm::cuda {

namespace {

constexpr const char *kDriverLibrary = "libcuda.so.1";

template <typename F>
bool resolve(void *lib, const char *name, F &fn, const std::string &path, std::string &error,
             const char *what = "the CUDA driver") {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) error = std::string(what) + " " + path + " has no " + name;
  return fn != nullptr;
}

bool loadOnce(Driver &d, std::string &error) {
  const char *env = std::getenv("NIMBLE_CUDA_DRIVER");
  d.path = env && *env ? env : kDriverLibrary;
  void *lib = dlopen(d.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    error = "cannot load the CUDA driver (" + std::string(why ? why : d.path) + ")";
    return false;
  }
  if (!resolve(lib, "cuInit", d.init, d.path, error) ||
      !resolve(lib, "cuGetErrorName", d.getErrorName, d.path, error) ||
      !resolve(lib, "cuDeviceGetCount", d.deviceGetCount, d.path, error) ||
      !resolve(lib, "cuDeviceGet", d.deviceGet, d.path, error) ||
      !resolve(lib, "cuDeviceGetName", d.deviceGetName, d.path, error) ||
      !resolve(lib, "cuDevicePrimaryCtxRetain", d.primaryCtxRetain, d.path, error) ||
      !resolve(lib, "cuCtxSetCurrent", d.ctxSetCurrent, d.path, error) ||
      !resolve(lib, "cuCtxSynchronize", d.ctxSynchronize, d.path, error) ||
      !resolve(lib, "cuModuleLoadData", d.moduleLoadData, d.path, error) ||
      !resolve(lib, "cuModuleGetFunction", d.moduleGetFunction, d.path, error) ||
      !resolve(lib, "cuMemAlloc_v2", d.memAlloc, d.path, error) ||
      !resolve(lib, "cuMemFree_v2", d.memFree, d.path, error) ||
      !resolve(lib, "cuMemcpyHtoDAsync_v2", d.memcpyHtoDAsync, d.path, error) ||
      !resolve(lib, "cuMemcpyDtoH_v2", d.memcpyDtoH, d.path, error) ||
      !resolve(lib, "cuMemcpyDtoDAsync_v2", d.memcpyDtoDAsync, d.path, error) ||
      !resolve(lib, "cuLaunchKernel", d.launchKernel, d.path, error))
    return false;
  if (CUresult r = d.init(0); r != 0) {
    error = "the CUDA driver " + d.path + " failed to initialise: " + d.errorName(r);
    return false;
  }
  return true;
}

} // namespace

std::string Driver::errorName(CUresult r) const {
  const char *name = nullptr;
  if (getErrorName && getErrorName(r, &name) == 0 && name) return std::string(name) + " (" + std::to_string(r) + ")";
  // The toolkit's stub library names nothing; 34 is the one it returns.
  if (r == 34) return "CUDA_ERROR_STUB_LIBRARY (34): a stub, not a driver";
  return "CUDA error " + std::to_string(r);
}

namespace {

/// A library opened once per process by `load`; later calls get the first
/// outcome (the library, or its error).
template <class Library, bool (*Load)(Library &, std::string &)> const Library *openOnce(std::string &error) {
  static Library lib;
  static std::string firstError;
  static bool ok = false;
  static std::once_flag once;
  std::call_once(once, [] { ok = Load(lib, firstError); });
  if (!ok) {
    error = firstError;
    return nullptr;
  }
  return &lib;
}

} // namespace

const Driver *loadDriver(std::string &error) { return openOnce<Driver, loadOnce>(error); }

bool openDevice(int ordinal, Device &out, std::string &error) {
  const Driver *d = loadDriver(error);
  if (!d) return false;
  int count = 0;
  if (CUresult r = d->deviceGetCount(&count); r != 0) {
    error = "cannot count CUDA devices: " + d->errorName(r);
    return false;
  }
  if (count == 0) {
    error = "no CUDA device (the driver " + d->path + " sees none)";
    return false;
  }
  if (ordinal < 0 || ordinal >= count) {
    error = "no CUDA device cuda:" + std::to_string(ordinal) + " (the driver sees " + std::to_string(count) +
            ": cuda:0.." + "cuda:" + std::to_string(count - 1) + ")";
    return false;
  }
  out.ordinal = ordinal;
  CUresult r = d->deviceGet(&out.handle, ordinal);
  if (r == 0) {
    char name[256] = {};
    if (d->deviceGetName(name, sizeof name - 1, out.handle) == 0) out.name = name;
    r = d->primaryCtxRetain(&out.context, out.handle);
  }
  if (r == 0) r = d->ctxSetCurrent(out.context);
  if (r != 0) {
    error = "cannot open CUDA device cuda:" + std::to_string(ordinal) + ": " + d->errorName(r);
    return false;
  }
  return true;
}

bool loadModule(const CudaCode &code, CUmodule &module, std::vector<CUfunction> &functions,
                std::string &error) {
  const Driver *d = loadDriver(error);
  if (!d) return false;
  // The cubin when ptxas made one; else the PTX (NUL-terminated), which the
  // driver JIT-compiles for the device.
  std::string ptx = code.ptx;
  const void *image = code.cubin.empty() ? static_cast<const void *>(ptx.c_str()) : code.cubin.data();
  if (CUresult r = d->moduleLoadData(&module, image); r != 0) {
    error = std::string("the CUDA driver cannot load the ") + (code.cubin.empty() ? "PTX" : "cubin") + " for " +
            code.arch + ": " + d->errorName(r);
    return false;
  }
  functions.assign(code.entries.size(), nullptr);
  for (size_t i = 0; i < code.entries.size(); ++i) {
    const CudaCode::Entry &en = code.entries[i];
    if (en.kind != CudaCode::Kind::Generated) continue;
    if (CUresult r = d->moduleGetFunction(&functions[i], module, en.symbol.c_str()); r != 0 || !functions[i]) {
      error = "the CUDA module has no kernel '" + en.symbol + "': " + d->errorName(r);
      return false;
    }
  }
  return true;
}

namespace {

bool loadCublasOnce(Cublas &b, std::string &error) {
  const char *env = std::getenv("NIMBLE_CUBLAS_LIBRARY");
  std::vector<std::string> names;
  if (env && *env) names = {env};
  else names = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"};
  void *lib = nullptr;
  std::string tried;
  for (const std::string &n : names) {
    lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      b.path = n;
      break;
    }
    const char *why = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(why ? why : n);
  }
  if (!lib) {
    error = "cannot load cuBLAS (" + tried + ")";
    return false;
  }
  const char *what = "cuBLAS";
  if (!resolve(lib, "cublasCreate_v2", b.create, b.path, error, what) ||
      !resolve(lib, "cublasDestroy_v2", b.destroy, b.path, error, what) ||
      !resolve(lib, "cublasSetStream_v2", b.setStream, b.path, error, what) ||
      !resolve(lib, "cublasSgemm_v2", b.sgemm, b.path, error, what) ||
      !resolve(lib, "cublasSgemmStridedBatched", b.sgemmStridedBatched, b.path, error, what))
    return false;
  b.getStatusName = reinterpret_cast<PFN_cublasGetStatusName>(dlsym(lib, "cublasGetStatusName"));
  return true;
}

} // namespace

std::string Cublas::statusName(cublasStatus s) const {
  const char *name = getStatusName ? getStatusName(s) : nullptr;
  if (name && *name) return std::string(name) + " (" + std::to_string(s) + ")";
  return "cuBLAS status " + std::to_string(s);
}

const Cublas *loadCublas(std::string &error) { return openOnce<Cublas, loadCublasOnce>(error); }

} // namespace nimble::vm::cuda
