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
//   auto       (default) where both native code and library can run a
//              kernel, a fixed rule on the call's shapes (below); else as
//              `library`
//   tune       as auto, but by measurement instead of the rule
//
// `tune` follows the paper's dispatch (seed 000, §3.4: kernels tuned per
// shape bucket, the fastest chosen at run time, where the program runs,
// since a .nbc built on one CPU may run on another): at the first call of a
// kernel whose input shapes fall in a new bucket (each dimension rounded up
// to a power of two), each candidate runs once untimed and then three times
// timed on the actual inputs, alternating with the other, and the faster (by
// its fastest run) serves every later call in the bucket. It was the
// default until issue 52: where the two are close (BERT's attention
// products, a GEMM of a few rows) timing noise decided, so one process chose
// differently from the next and BERT-base's outputs differed in the last
// bits from run to run. `auto` decides without a clock, by
// LibraryKernels::ruleChoosesLibrary (oneDNN for a product of at least two
// rows with constant weights, or with a computed right-hand side whose
// per-batch product has at least 2^19 multiply-adds; native code for the
// rest, matrix-vector products above all): the same program, shapes and
// binaries make the same choices in every process, so the outputs are the
// same bits from run to run on one machine and thread count
// (docs/nimble-run.md, "Reproducibility"). The rule's measurements are in
// LibraryKernels.h.
//
// Decisions can be saved and loaded (--tuning=FILE): a stored decision is
// used as is, never re-measured, by `tune` and `auto` alike; `tune` adds
// what it measured and the file is written back. Measuring once on a
// machine and loading the file afterwards is the reproducible form of
// tuning.
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

enum class KernelMode : uint8_t { Reference, Native, Library, Auto, Tune };
/// What ran a kernel call: the three host implementations, or the CUDA
/// device (vm/cuda/CudaRuntime.h; never chosen by the dispatcher or --tuning).
enum class KernelImpl : uint8_t { Reference, Native, Library, Cuda };
constexpr unsigned kNumKernelImpls = 4;

const char *kernelImplName(KernelImpl i);
/// "reference", "native", "library", "auto", "tune"; false for anything else.
bool parseKernelMode(const std::string &s, KernelMode &m);

/// Reads a whole file with stdio (a failed allocation throws bad_alloc
/// instead of becoming a read error, as it would inside an iostream).
bool readTextFile(const std::string &path, std::string &text, std::string &error);

/// Decisions of `tune` (and stored ones, which `auto` also obeys):
/// (kernel name, shape bucket) -> implementation.
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
  /// Per kernel, --kernels=auto or tune: the input types of the last call and the
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
