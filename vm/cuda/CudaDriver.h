//===- CudaDriver.h - The CUDA driver API, loaded with dlopen at first use -*- C++ -*-===//
//
// nimble-run must start, and run CPU programs, on machines without CUDA, and
// the runtime never links CUDA (ARCHITECTURE.md): the driver (libcuda.so.1)
// is opened with dlopen the first time a program needs a device, and the few
// entry points used are declared here as function-pointer types (the driver
// API's C ABI: CUresult is an int, handles are pointers, device pointers are
// 64-bit integers), so no CUDA header is needed to build.
//
// Every failure is one line naming what is missing: the driver library, an
// entry point, initialisation (with the driver's error name), a device. The
// environment variable NIMBLE_CUDA_DRIVER replaces the library's name (the
// tests point it at the toolkit's stub, which loads but has no device).
//
// cuBLAS (libcublas.so.13, .12 or .11; NIMBLE_CUBLAS_LIBRARY replaces the
// name) is opened the same way, only by a program whose kernel table has a
// cuBLAS entry.
//
// Status: written against the documented signatures (checked against the
// toolkit's headers by test/cuda/cuda-abi.test); on the machines this was
// built on there is no GPU, so the calls have run against the fake driver and
// fake cuBLAS of test/cuda only (docs/codegen.md#cuda).
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_CUDADRIVER_H
#define NIMBLE_VM_CUDADRIVER_H

#include "vm/cuda/CudaApi.h"
#include "vm/format/Executable.h"

#include <cstdint>
#include <string>
#include <vector>

namespace nimble::vm::cuda {

/// The driver entry points this runtime uses (cuda.h names, _v2 ABI where the
/// driver exports one).
struct Driver {
  PFN_cuInit init = nullptr;
  PFN_cuGetErrorName getErrorName = nullptr;
  PFN_cuDeviceGetCount deviceGetCount = nullptr;
  PFN_cuDeviceGet deviceGet = nullptr;
  PFN_cuDeviceGetName deviceGetName = nullptr;
  PFN_cuDevicePrimaryCtxRetain primaryCtxRetain = nullptr;
  PFN_cuCtxSetCurrent ctxSetCurrent = nullptr;
  PFN_cuCtxSynchronize ctxSynchronize = nullptr;
  PFN_cuModuleLoadData moduleLoadData = nullptr;
  PFN_cuModuleGetFunction moduleGetFunction = nullptr;
  PFN_cuMemAlloc memAlloc = nullptr;
  PFN_cuMemFree memFree = nullptr;
  PFN_cuMemcpyHtoDAsync memcpyHtoDAsync = nullptr;
  PFN_cuMemcpyDtoH memcpyDtoH = nullptr;
  PFN_cuMemcpyDtoDAsync memcpyDtoDAsync = nullptr;
  PFN_cuLaunchKernel launchKernel = nullptr;
  std::string path; // the library that was opened

  /// "CUDA_ERROR_NO_DEVICE (100)", or the bare number when the driver
  /// cannot name it.
  std::string errorName(CUresult r) const;
};

/// Opens the driver (once per process; later calls return the first
/// outcome). Returns null with `error` naming what is missing.
const Driver *loadDriver(std::string &error);

/// A device of the driver, its primary context current on this thread.
struct Device {
  int ordinal = 0;
  CUdevice handle = 0;
  CUcontext context = nullptr;
  std::string name;
};

/// Opens device `ordinal` (cuda:N). `error` names what is missing: the
/// driver, any device, or that device.
bool openDevice(int ordinal, Device &out, std::string &error);

/// Loads the cuda-code section's module on the current context (the cubin
/// when there is one, else the PTX for the driver to compile) and resolves
/// every generated entry into `functions` (indexed like code.entries; null
/// for cuBLAS entries). `error` carries the driver's error name.
bool loadModule(const CudaCode &code, CUmodule &module, std::vector<CUfunction> &functions,
                std::string &error);

/// The cuBLAS entry points the runtime calls.
struct Cublas {
  PFN_cublasCreate create = nullptr;
  PFN_cublasDestroy destroy = nullptr;
  PFN_cublasSetStream setStream = nullptr;
  PFN_cublasGetStatusName getStatusName = nullptr; // optional (cuBLAS >= 11.4)
  PFN_cublasSgemm sgemm = nullptr;
  PFN_cublasSgemmStridedBatched sgemmStridedBatched = nullptr;
  std::string path;

  /// "CUBLAS_STATUS_NOT_SUPPORTED (15)", or the bare number.
  std::string statusName(cublasStatus s) const;
};

/// Opens cuBLAS (once per process). Returns null with `error` naming what is
/// missing: the library (every name tried) or an entry point.
const Cublas *loadCublas(std::string &error);

} // namespace nimble::vm::cuda

#endif // NIMBLE_VM_CUDADRIVER_H
