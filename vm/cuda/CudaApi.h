/*===- CudaApi.h - The CUDA driver and cuBLAS entry points nimble-run uses -*- C++ -*-===//
 *
 * nimble-run never links CUDA (ARCHITECTURE.md): the driver (libcuda.so.1)
 * and cuBLAS are opened with dlopen at first use, and the entry points used
 * are declared here as function-pointer types over the C ABI of cuda.h and
 * cublas_api.h: results and enums are ints, handles are pointers, device
 * pointers are 64-bit integers. No CUDA header is needed to build the
 * runtime; test/cuda/cuda-abi.test compiles Inputs/cuda_abi_check.cpp against
 * the toolkit's headers (when present) and checks every type below against
 * the header's declaration, parameter by parameter.
 *
 * The header has no other dependency, so that the check can include it alone.
 *
 *===----------------------------------------------------------------------===*/
#ifndef NIMBLE_VM_CUDAAPI_H
#define NIMBLE_VM_CUDAAPI_H

#include <cstddef>
#include <cstdint>

namespace nimble::vm::cuda {

using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUmodule = void *;
using CUfunction = void *;
using CUstream = void *;
using CUdeviceptr = unsigned long long; // cuda.h: CUdeviceptr_v2

// The driver (cuda.h names; the _v2 symbol where cuda.h #defines the plain
// name to it).
using PFN_cuInit = CUresult (*)(unsigned flags);
using PFN_cuGetErrorName = CUresult (*)(CUresult, const char **);
using PFN_cuDeviceGetCount = CUresult (*)(int *);
using PFN_cuDeviceGet = CUresult (*)(CUdevice *, int);
using PFN_cuDeviceGetName = CUresult (*)(char *, int, CUdevice);
using PFN_cuDevicePrimaryCtxRetain = CUresult (*)(CUcontext *, CUdevice);
using PFN_cuCtxSetCurrent = CUresult (*)(CUcontext);
using PFN_cuCtxSynchronize = CUresult (*)();
using PFN_cuModuleLoadData = CUresult (*)(CUmodule *, const void *);
using PFN_cuModuleGetFunction = CUresult (*)(CUfunction *, CUmodule, const char *);
using PFN_cuMemAlloc = CUresult (*)(CUdeviceptr *, size_t);                       // cuMemAlloc_v2
using PFN_cuMemFree = CUresult (*)(CUdeviceptr);                                  // cuMemFree_v2
using PFN_cuMemcpyHtoDAsync = CUresult (*)(CUdeviceptr, const void *, size_t, CUstream); // cuMemcpyHtoDAsync_v2
using PFN_cuMemcpyDtoH = CUresult (*)(void *, CUdeviceptr, size_t);               // cuMemcpyDtoH_v2
using PFN_cuMemcpyDtoDAsync = CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream); // cuMemcpyDtoDAsync_v2
using PFN_cuLaunchKernel = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, unsigned, CUstream, void **, void **);

// cuBLAS (cublas_api.h; cublasStatus_t and cublasOperation_t are ints).
using cublasHandle = void *;
using cublasStatus = int;
constexpr int kCublasOpN = 0, kCublasOpT = 1;
using PFN_cublasCreate = cublasStatus (*)(cublasHandle *);         // cublasCreate_v2
using PFN_cublasDestroy = cublasStatus (*)(cublasHandle);          // cublasDestroy_v2
using PFN_cublasSetStream = cublasStatus (*)(cublasHandle, CUstream); // cublasSetStream_v2
using PFN_cublasGetStatusName = const char *(*)(cublasStatus);
using PFN_cublasSgemm = cublasStatus (*)(cublasHandle, int, int, int, int, int, const float *, const float *,
                                         int, const float *, int, const float *, float *, int); // cublasSgemm_v2
using PFN_cublasSgemmStridedBatched = cublasStatus (*)(cublasHandle, int, int, int, int, int, const float *,
                                                       const float *, int, long long, const float *, int,
                                                       long long, const float *, float *, int, long long, int);

} // namespace nimble::vm::cuda

#endif // NIMBLE_VM_CUDAAPI_H
