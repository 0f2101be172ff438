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
// Status: opening the driver and the device, and loading the cuda-code
// module, are written against the driver API's documented signatures; on the
// machines this was built on there is no GPU, so only the failure paths have
// run (test/vm/cuda-driver.test). Device execution (the device allocator,
// copies, launches, cuBLAS) is not part of this runtime yet: docs/codegen.md.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_CUDADRIVER_H
#define NIMBLE_VM_CUDADRIVER_H

#include "vm/Executable.h"

#include <cstdint>
#include <string>

namespace nimble::vm::cuda {

using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;

/// The driver entry points this runtime uses (cuda.h names, _v2 ABI where the
/// driver exports one).
struct Driver {
  CUresult (*init)(unsigned flags) = nullptr;                           // cuInit
  CUresult (*getErrorName)(CUresult, const char **) = nullptr;          // cuGetErrorName
  CUresult (*deviceGetCount)(int *) = nullptr;                          // cuDeviceGetCount
  CUresult (*deviceGet)(CUdevice *, int) = nullptr;                     // cuDeviceGet
  CUresult (*deviceGetName)(char *, int, CUdevice) = nullptr;           // cuDeviceGetName
  CUresult (*primaryCtxRetain)(CUcontext *, CUdevice) = nullptr;        // cuDevicePrimaryCtxRetain
  CUresult (*ctxSetCurrent)(CUcontext) = nullptr;                       // cuCtxSetCurrent
  CUresult (*moduleLoadData)(CUmodule *, const void *) = nullptr;       // cuModuleLoadData
  CUresult (*moduleGetFunction)(CUfunction *, CUmodule, const char *) = nullptr; // cuModuleGetFunction
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
/// every generated entry. `error` carries the driver's error name.
bool loadModule(const CudaCode &code, CUmodule &module, std::string &error);

} // namespace nimble::vm::cuda

#endif // NIMBLE_VM_CUDADRIVER_H
