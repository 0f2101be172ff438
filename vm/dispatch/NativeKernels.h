//===- NativeKernels.h - Mapping and calling a .nbc's native kernels -*- C++ -*-===//
//
// The runtime half of kernel objects (docs/codegen.md, docs/VM.md): the
// shared object of an executable's native-code section is written to an
// anonymous memory file (memfd_create) and mapped with dlopen, so nothing is
// left on disk; its symbols are resolved against the kernel table once, at
// load. Native code is trusted code, like a shared library: the verifier has
// checked the table (indices, names, sizes), this loader checks what the
// object claims (ELF class and machine, every symbol present) and that this
// CPU has every feature the code was compiled for. When any of that fails the
// program still runs, on the reference kernels, after one line saying why.
// `--kernels=reference` never maps the object at all.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_NATIVEKERNELS_H
#define NIMBLE_VM_NATIVEKERNELS_H

#include "ir/ShapeFns.h"
#include "vm/format/Executable.h"
#include "vm/Kernel.h"
#include "vm/KernelABI.h"
#include "vm/format/NativeSignature.h"

#include <string>
#include <vector>

namespace nimble::vm {

class NativeKernels {
public:
  NativeKernels() = default;
  NativeKernels(const NativeKernels &) = delete;
  NativeKernels &operator=(const NativeKernels &) = delete;
  ~NativeKernels();

  /// Maps exe.native. Returns false with a one-line reason when the code
  /// cannot be used here (the caller then runs reference kernels); true (with
  /// nothing mapped) when the executable has no native code.
  bool load(const Executable &exe, std::string &reason);
  /// The native entry of kernel `k`, or null.
  nimble_kernel_fn get(uint32_t k) const { return k < fns_.size() ? fns_[k] : nullptr; }
  /// The gather-fused entry of batched variant `k` (NIMBLE_GATHER_SUFFIX),
  /// or null: an optional symbol of the object.
  nimble_kernel_fn getGathered(uint32_t k) const { return k < gatherFns_.size() ? gatherFns_[k] : nullptr; }
  size_t count() const;
  /// What kernel `k`'s native entry was compiled for (NativeSignature.h),
  /// or null when it has none.
  const NativeSignature *signature(uint32_t k) const {
    return k < sigIndex_.size() && sigIndex_[k] >= 0 ? &sigs_[static_cast<size_t>(sigIndex_[k])] : nullptr;
  }

private:
  /// Reads the object's signature section and compares every entry with
  /// the kernel table; false with a reason on the first mismatch.
  bool checkSignatures(const Executable &exe, std::string &reason);

  void *handle_ = nullptr;
  std::vector<NativeSignature> sigs_;
  std::vector<int32_t> sigIndex_; // per kernel: its entry in sigs_, or -1
  /// The memfd the object was mapped from, open while it is loaded: dlopen
  /// knows objects by path (/proc/self/fd/N), so a second executable's code
  /// mapped from a reused descriptor number would get the first's object.
  int fd_ = -1;
  std::vector<nimble_kernel_fn> fns_;
  std::vector<nimble_kernel_fn> gatherFns_;
};

/// Whether this CPU (and OS) supports feature `name` as LLVM spells it
/// ("avx2", "avx512f", ...); false for names it does not know.
bool cpuHasFeature(const std::string &name);

/// The type of every value of kernel `k` (inputs, then each member's
/// results, in KernelDesc numbering) on the actual inputs, by the members'
/// shape functions. False when a check fails, a member's shape depends on a
/// value computed inside the kernel, or an output tensor does not have the
/// computed type (or is read-only): the reference path then words the error.
bool kernelValueSigs(const KernelDesc &k, const std::vector<Tensor *> &ins,
                     const std::vector<Tensor *> &outs, std::vector<TensorSig> &sigs);

/// The key of a call's input types: dtype, rank and dims of every input
/// (NativeCallMemo, and the dispatcher's last decision per kernel).
void inputKey(const std::vector<Tensor *> &ins, std::vector<int64_t> &key);
/// inputKey(ins) == key, without building it (every call of a loop body or
/// a recursion asks this).
bool sameInputKey(const std::vector<Tensor *> &ins, const std::vector<int64_t> &key);

/// What runNativeKernel derived from the last input shapes of one kernel: the
/// type of every value and the descriptors' shapes and strides. While the
/// shapes repeat (every iteration of a loop, every node of a tree) the
/// members' shape functions need not run again: they are pure functions of
/// the input shapes, except for data-dependent members, whose kernels are
/// never memoized. The outputs are still checked on every call.
struct NativeCallMemo {
  enum State : uint8_t { Unknown, Cacheable, NotCacheable };
  State state = Unknown;
  bool valid = false;
  std::vector<int64_t> key; // dtype, rank and dims of every input
  std::vector<TensorSig> sigs;       // every value of the kernel, then every output
  std::vector<std::vector<int64_t>> strides;
  std::vector<nimble_buffer> bufs;
};

/// Runs kernel `k` through its native entry `fn`: first the members' shape
/// functions on the actual shapes (the checks the compiler deferred, as the
/// reference path does), then one call with a descriptor per value and per
/// output (vm/KernelABI.h). `*rerun` is set when the native code reported an
/// error or could not take the call: the caller then runs the reference
/// kernel, which reports the exact message.
/// With `memo` (one per kernel, kept by the caller) the shapes and
/// descriptors of the last call are reused when the input shapes repeat.
/// `gathered` (gather fusion: a gather-fused entry), when given, has one
/// entry per input and then per output: a non-null one replaces that
/// buffer's data pointer (it is the buffer's row table; the tensor passed for
/// it only gives its shape).
/// `sig` (the object's signature of the entry), when given, is checked on
/// every call whose shapes are not the memo's: each buffer's dtype, rank
/// and static dims must be what the code was compiled for, else the call
/// goes to the reference path (which words any real shape error).
Status runNativeKernel(const KernelDesc &k, nimble_kernel_fn fn, const std::vector<Tensor *> &ins,
                       const std::vector<Tensor *> &outs, KernelContext &ctx,
                       size_t *failedMember, bool *rerun, NativeCallMemo *memo = nullptr,
                       const std::vector<const void *> *gathered = nullptr,
                       const NativeSignature *sig = nullptr);

} // namespace nimble::vm

#endif // NIMBLE_VM_NATIVEKERNELS_H
