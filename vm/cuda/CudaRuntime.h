//===- CudaRuntime.h - Executing a program's device part on a CUDA device -*- C++ -*-===//
//
// The device half of the paper's heterogeneous execution (seed 000 §3.3 and
// appendix B: shape functions and control on the CPU, tensors and kernels on
// the device, `device_copy` between them, placed by the compiler's
// place-devices pass). One DeviceRuntime per process and device:
//
//   memory    a pool per device over cuMemAlloc (the CPU pool's size
//             classes, vm/support/Allocator.h): a freed block waits on its class's
//             list; a failed cuMemAlloc first returns the cached blocks to
//             the driver and retries once, then is an out-of-memory error.
//   copies    device_copy both ways. Host to device is asynchronous (the
//             driver stages pageable memory before returning); device to
//             host waits for the device and checks the kernels launched
//             before it.
//   launches  a generated kernel (the cuda-code section's entry) gets its
//             buffer descriptors (vm/KernelABI.h's layout, every pointer a
//             device pointer) in a ring of device memory and a status word
//             of its own; grid: one block of 256 threads, or ceil(n / 256)
//             blocks for an entry marked multi-block (n: the output's element
//             count; the kernels loop over the grid, so any grid is correct).
//   cuBLAS    a lone f32 matmul / batch_matmul runs cublasSgemm /
//             cublasSgemmStridedBatched (row-major operands as the transposed
//             column-major product); broadcast batch dimensions that are not
//             all-or-nothing run one cublasSgemm per matrix.
//
// Everything runs on the legacy default stream, in program order, so a block
// the pool hands out again is only touched after the work that used it. A
// kernel's failure (its status word) is found at the next synchronisation (a
// copy to the host, the ring or the status words running out, the end of the
// run) and reported at the instruction that launched it; a driver or cuBLAS
// error is reported at once.
//
// Status: no GPU was available where this was written. The calls run against
// test/cuda's fake driver and fake cuBLAS (host memory, launches traced and
// their descriptors checked, GEMMs computed), which checks the marshalling,
// the copies, the GEMM mapping, the errors; nothing here has run on a device.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_CUDARUNTIME_H
#define NIMBLE_VM_CUDARUNTIME_H

#include "vm/support/Allocator.h"
#include "vm/cuda/CudaDriver.h"
#include "vm/Kernel.h"
#include "vm/Object.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace nimble::vm::cuda {

/// The instruction that launched a kernel: where its failure is reported.
struct LaunchSite {
  uint32_t kernel = 0, func = 0, pc = 0;
  bool set = false; // an out-parameter that names a failed launch
};

struct DeviceStats {
  uint64_t launches = 0, cublasCalls = 0, hostFallbacks = 0;
  uint64_t stagedOperands = 0; // host operands of device kernels (uploaded constants included)
  uint64_t bytesToDevice = 0, bytesToHost = 0, synchronizations = 0;
};

class DeviceRuntime {
public:
  /// Opens device `ordinal`, loads `exe`'s cuda-code module and, when its
  /// table has a cuBLAS entry, cuBLAS. Null with `error` naming what is
  /// missing.
  static std::unique_ptr<DeviceRuntime> open(const Executable &exe, int ordinal, std::string &error);
  ~DeviceRuntime();
  DeviceRuntime(const DeviceRuntime &) = delete;
  DeviceRuntime &operator=(const DeviceRuntime &) = delete;

  const Device &device() const { return device_; }
  Allocator &allocator();
  /// Kernel `k` has device code (a generated entry or a cuBLAS call).
  bool runsOnDevice(uint32_t k) const;

  /// A new tensor on `to` holding `src`'s elements (src on its own device).
  /// When the error is an earlier launch's failure (found by the
  /// synchronisation a copy to the host makes), `*earlier` names it.
  Status copy(const Tensor &src, vm::Device to, TensorRef &out, LaunchSite *earlier);
  /// Copies `src` into `dst`'s memory (same dtype and element count).
  Status copyInto(const Tensor &src, Tensor &dst, LaunchSite *earlier);
  /// A kernel without device code ran on the host (counted for --profile).
  void noteHostFallback() { ++stats_.hostFallbacks; }
  /// Runs kernel `k` on the device (host operands are uploaded for the
  /// call; constants once). `*earlier` as for copy(). `*declined`: the
  /// members' shape functions did not accept the operands (or a shape
  /// depends on a value the kernel computes): nothing ran, and the caller
  /// runs the kernel on the host, whose reference path words any error.
  Status launch(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs,
                const LaunchSite &site, LaunchSite *earlier, bool *declined);
  /// Waits for the device and checks every launch since the last check. On
  /// a kernel's failure, `*failed` names its launch.
  Status synchronize(LaunchSite *failed);

  const DeviceStats &stats() const { return stats_; }

private:
  DeviceRuntime() = default;
  Status launchOnDevice(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs,
                        const LaunchSite &site, LaunchSite *earlier, bool *declined);
  Status gemm(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs);
  Status driverError(const char *what, CUresult r) const;
  Status zero(CUdeviceptr p, size_t bytes);

  const Executable *exe_ = nullptr;
  const Driver *drv_ = nullptr;
  const Cublas *blas_ = nullptr;
  cublasHandle blasHandle_ = nullptr;
  Device device_;
  CUmodule module_ = nullptr;
  std::vector<int> entryOf_;            // kernel -> index into exe.cuda.entries, -1: none
  std::vector<CUfunction> functions_;   // by entry
  std::unique_ptr<Allocator> pool_;
  // Launch arguments: a ring of device memory, and a status word per launch.
  CUdeviceptr ring_ = 0;
  size_t ringSize_ = 0, ringUsed_ = 0;
  CUdeviceptr status_ = 0;
  std::vector<LaunchSite> pending_; // launches whose status word is not yet read
  std::vector<uint8_t> block_;      // the host side of one launch's arguments
  // Constants uploaded at their first use by a device kernel, by address
  // and size in the executable's (read-only) data.
  struct ConstantKey {
    const void *data;
    size_t bytes;
    bool operator<(const ConstantKey &o) const { return data != o.data ? data < o.data : bytes < o.bytes; }
  };
  struct CachedConstant {
    TensorRef device;
    Ref<Storage> host; // kept alive: its address stays these bytes'
  };
  std::map<ConstantKey, CachedConstant> constants_;
  DeviceStats stats_;
};

} // namespace nimble::vm::cuda

#endif // NIMBLE_VM_CUDARUNTIME_H
