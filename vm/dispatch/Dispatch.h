//===- Dispatch.h - Choosing a kernel's implementation per shape ---*- C++ -*-===//
//
// A kernel has up to three implementations: the reference kernels
// (vm/kernels, always), the generated native code of the .nbc
// (vm/dispatch/NativeKernels.h) and oneDNN (vm/dispatch/LibraryKernels.h, dense kernels). The
// dispatcher picks one per call (nimble-run --kernels):
//
//   reference  always the reference kernels (native code is never mapped)
//   native     native code where the .nbc has it, else the reference
//   library    oneDNN where it runs the kernel, else native, else reference
//   auto       (default) by measurement, where more than one of native and
//              library can run a kernel; else as `library`
//
// `auto` follows the paper's dispatch (seed 000, §3.4: kernels tuned per
// shape bucket, the fastest chosen at run time). Tuning happens at run time,
// not in nimblec, because a .nbc built on one machine runs on others (Zen 3,
// Zen 4, Xeon differ in what wins): at the first call of a kernel whose input
// shapes fall in a new bucket (each dimension rounded up to a power of two),
// each candidate runs once untimed and then three times timed on the actual
// inputs, alternating with the other, and the faster (by its fastest run)
// serves every later call in the bucket. Decisions can be saved
// and loaded (--tuning=FILE), which makes dispatch deterministic: a stored
// decision is used as is, never re-measured.
//
// Whatever implementation runs, a failure falls back to the reference
// kernel, which checks and words every error exactly.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_DISPATCH_H
#define NIMBLE_VM_DISPATCH_H

#include "vm/format/Executable.h"
#include "vm/Kernel.h"
#include "vm/dispatch/NativeKernels.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace nimble::vm {

class NativeKernels;
class LibraryKernels;

enum class KernelMode : uint8_t { Reference, Native, Library, Auto };
/// What ran a kernel call: the three host implementations, or the CUDA
/// device (vm/cuda/CudaRuntime.h; never chosen by the dispatcher or --tuning).
enum class KernelImpl : uint8_t { Reference, Native, Library, Cuda };
constexpr unsigned kNumKernelImpls = 4;

const char *kernelImplName(KernelImpl i);
/// "reference", "native", "library", "auto"; false for anything else.
bool parseKernelMode(const std::string &s, KernelMode &m);

/// Reads a whole file with stdio (a failed allocation throws bad_alloc
/// instead of becoming a read error, as it would inside an iostream).
bool readTextFile(const std::string &path, std::string &text, std::string &error);

/// Decisions of `auto`: (kernel name, shape bucket) -> implementation.
/// Thread-safe: the VMs of several threads running one program may share
/// one table (tools/driver/Runtime.h), so each bucket is measured once.
class TuningTable {
public:
  /// Reads a table written by save(). On a malformed line returns false with
  /// `error` = "FILE:LINE: <what>".
  bool load(const std::string &path, std::string &error);
  /// Writes every decision (to a temporary file, then renamed over `path`).
  bool save(const std::string &path, std::string &error) const;
  bool lookup(const std::string &kernel, const std::string &bucket, KernelImpl &impl) const;
  void set(const std::string &kernel, const std::string &bucket, KernelImpl impl);
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return decisions_.size();
  }
  /// Decisions made by measurement in this process (not loaded).
  size_t measured() const {
    std::lock_guard<std::mutex> lock(mu_);
    return measured_;
  }
  void noteMeasured() {
    std::lock_guard<std::mutex> lock(mu_);
    ++measured_;
  }

private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, KernelImpl> decisions_;
  size_t measured_ = 0;
};

/// The bucket of a call's input shapes: every dimension rounded up to a power
/// of two, e.g. "128x1024,1024x768".
std::string shapeBucket(const std::vector<Tensor *> &ins);

class KernelDispatcher {
public:
  KernelDispatcher(const Executable &exe, KernelMode mode, const NativeKernels *native,
                   LibraryKernels *library, TuningTable *tuning);

  /// Runs kernel `k`; `*ran` receives the implementation that produced the
  /// outputs.
  Status run(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs,
             KernelContext &ctx, size_t *failedMember, KernelImpl *ran);

private:
  /// Runs one implementation; false when it declined the call.
  bool runImpl(KernelImpl impl, uint32_t k, const std::vector<Tensor *> &ins,
               const std::vector<Tensor *> &outs, KernelContext &ctx, size_t *failedMember,
               Status &st);
  KernelImpl tune(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs,
                  KernelContext &ctx, bool *outputsWritten);

  const Executable &exe_;
  KernelMode mode_;
  const NativeKernels *native_;
  LibraryKernels *library_;
  TuningTable *tuning_;
  std::vector<NativeCallMemo> memos_; // per kernel (vm/dispatch/NativeKernels.h)
  /// Per kernel, --kernels=auto: the input types of the last call and the
  /// implementation chosen for them, so that a call with the same shapes
  /// (every call of a loop or a recursion) finds its choice without building
  /// its bucket's name and searching the table.
  struct LastChoice {
    std::vector<int64_t> key; // inputKey (vm/dispatch/NativeKernels.h)
    KernelImpl impl = KernelImpl::Reference;
    bool valid = false;
  };
  std::vector<LastChoice> last_;
};

} // namespace nimble::vm

#endif // NIMBLE_VM_DISPATCH_H
