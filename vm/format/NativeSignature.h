//===- NativeSignature.h - What a native kernel was compiled for -*- C++ -*-===//
//
// The native-code object of a .nbc (docs/codegen.md) carries, in an ELF
// section of its own (kNativeSigSection), one line per native entry: the
// kernel-table index it serves, its symbol, the digest of the kernel-table
// record it was generated from (kernelDigest, vm/format/Format.h), and the dtype and
// static dims of every buffer it reads and writes (`?` where the code reads
// the size at run time). nimblec writes it (codegen/llvm/NativeCodegen.cpp);
// nimble-run reads it from the object's bytes before dlopen and compares it
// with the kernel table (vm/dispatch/NativeKernels.cpp), and checks each call's
// buffers against the static dims before the code trusts them.
//
// Why (issue 51 §3): the code folds the static dims and the member list into
// its loops. A kernel table that no longer matches the object (version skew,
// a bad build, a damaged file resealed) made the VM size buffers by one
// kernel and run another's code on them: writes out of bounds inside native
// code. The trust model stands (native code is trusted, like a shared
// library; --kernels=reference never maps it); the signature makes the
// mismatch one warning and a reference run instead.
//
// The text, one line per entry (no line may exceed kMaxSigLine bytes):
//
//   <kernel index> <symbol> <digest, 16 hex digits> <inputs> <outputs>
//
// where a buffer list is `-` (none) or comma-separated `dtype:dims`, dims
// `x`-separated with `?` for a run-time size (`f32:?x64`, `i64:` for a
// scalar).
//
// Part of //vm:format: the compiler may include it, the runtime parses it.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_NATIVESIGNATURE_H
#define NIMBLE_VM_NATIVESIGNATURE_H

#include "ir/OpTable.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nimble::vm {

inline constexpr const char *kNativeSigSection = ".nimble.sigs";
inline constexpr size_t kMaxSigLine = 1 << 16;

struct NativeBufferSig {
  DType dtype = DType::F32;
  std::vector<int64_t> dims; // kDynamic (-1) for `?`
  bool operator==(const NativeBufferSig &) const = default;
};

struct NativeSignature {
  uint32_t kernel = 0;
  std::string symbol;
  uint64_t digest = 0;
  std::vector<NativeBufferSig> inputs, outputs;
};

/// The section's text for `sigs`.
std::string formatNativeSignatures(const std::vector<NativeSignature> &sigs);
/// Parses the section's text; false with a one-line reason on anything
/// malformed (it comes from a file: every field is checked).
bool parseNativeSignatures(std::string_view text, std::vector<NativeSignature> &out, std::string &error);

} // namespace nimble::vm

#endif // NIMBLE_VM_NATIVESIGNATURE_H
