// Compiled (syntax only) by test/cuda/cuda-abi.test against the CUDA
// toolkit's headers: every function-pointer type of vm/cuda/CudaApi.h, which the
// runtime declares itself so that it builds without CUDA, has the ABI of the
// header's declaration of the symbol it is resolved from (CudaDriver.cpp's
// dlsym names): the same number of parameters and, for the result and each
// parameter, the same size and the same kind (pointer, integer or enum,
// floating point). A mismatch fails to compile, naming the symbol.
#include <cublas_api.h>
#include <cuda.h>

#include <type_traits>

#include "vm/cuda/CudaApi.h"

namespace {

template <class T> constexpr int kind() {
  if constexpr (std::is_void_v<T>) return 0;
  else if constexpr (std::is_pointer_v<T>) return 1;
  else if constexpr (std::is_floating_point_v<T>) return 2;
  else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) return 3;
  else return 4;
}
template <class T> constexpr size_t size() {
  if constexpr (std::is_void_v<T>) return 0;
  else return sizeof(T);
}
template <class A, class B> constexpr bool same() { return kind<A>() == kind<B>() && size<A>() == size<B>(); }

template <class RA, class... PA, class RB, class... PB>
constexpr bool sameAbi(RA (*)(PA...), RB (*)(PB...)) {
  if constexpr (sizeof...(PA) != sizeof...(PB)) return false;
  else return same<RA, RB>() && (same<PA, PB>() && ...);
}

using namespace nimble::vm::cuda;
#define CHECK(symbol, type) static_assert(sameAbi(&::symbol, type{}), #symbol " does not match " #type)

CHECK(cuInit, PFN_cuInit);
CHECK(cuGetErrorName, PFN_cuGetErrorName);
CHECK(cuDeviceGetCount, PFN_cuDeviceGetCount);
CHECK(cuDeviceGet, PFN_cuDeviceGet);
CHECK(cuDeviceGetName, PFN_cuDeviceGetName);
CHECK(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain);
CHECK(cuCtxSetCurrent, PFN_cuCtxSetCurrent);
CHECK(cuCtxSynchronize, PFN_cuCtxSynchronize);
CHECK(cuModuleLoadData, PFN_cuModuleLoadData);
CHECK(cuModuleGetFunction, PFN_cuModuleGetFunction);
CHECK(cuMemAlloc_v2, PFN_cuMemAlloc);
CHECK(cuMemFree_v2, PFN_cuMemFree);
CHECK(cuMemcpyHtoDAsync_v2, PFN_cuMemcpyHtoDAsync);
CHECK(cuMemcpyDtoH_v2, PFN_cuMemcpyDtoH);
CHECK(cuMemcpyDtoDAsync_v2, PFN_cuMemcpyDtoDAsync);
CHECK(cuLaunchKernel, PFN_cuLaunchKernel);
CHECK(cublasCreate_v2, PFN_cublasCreate);
CHECK(cublasDestroy_v2, PFN_cublasDestroy);
CHECK(cublasSetStream_v2, PFN_cublasSetStream);
CHECK(cublasGetStatusName, PFN_cublasGetStatusName);
CHECK(cublasSgemm_v2, PFN_cublasSgemm);
CHECK(cublasSgemmStridedBatched, PFN_cublasSgemmStridedBatched);

// The constants the runtime passes by value.
static_assert(kCublasOpN == CUBLAS_OP_N && kCublasOpT == CUBLAS_OP_T);
static_assert(sizeof(CUdeviceptr) == sizeof(::CUdeviceptr));

} // namespace
