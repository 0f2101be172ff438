//===- Kernel.h - Kernel calling convention and the reference kernels -*- C++ -*-===//
//
// A kernel computes one op (or, through KernelDesc, a fused group) on tensors
// whose outputs are already allocated with the shapes the shape functions
// computed (destination-passing style: the paper's invoke_mut). Kernels never
// allocate their outputs and never throw; they report problems (an index out
// of range, integer division by zero) as a Status message, which the VM turns
// into an error at the op's .nir source location.
//
// Every op in ir/Ops.def with a relation other than Structural has a reference
// kernel in plain C++ (the NNC `*_REF` idea): correct for every shape,
// including empty dimensions and size-1 broadcasting, the oracle for faster
// implementations. Dtypes: every float type where the op accepts floats
// (f16/bf16 computed in f32 and rounded), and the integer / bool types the
// op's DTypeRule admits.
//
// Upper-bound ops (unique, nonzero) get one extra output: a 1-D i64 tensor
// that receives the true shape of output 0, whose buffer has the bound shape
// and whose true elements are written compactly at its start.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_KERNEL_H
#define NIMBLE_VM_KERNEL_H

#include "ir/OpTable.h"
#include "vm/Object.h"

#include <functional>
#include <string>
#include <vector>

namespace nimble::vm {

class ThreadPool;

/// A kernel's message says what is wrong with the values ("integer division
/// by zero", "index 7 is out of range [-5, 5) ..."); it does not repeat the op
/// name, which the caller adds together with the op's source location.
struct Status {
  std::string message; // empty: success
  bool ok() const { return message.empty(); }
  static Status success() { return {}; }
  static Status error(std::string m) { return {std::move(m)}; }
};

struct KernelContext {
  ThreadPool *pool = nullptr; // null: run on the calling thread
};

struct KernelArgs {
  std::vector<const Tensor *> inputs;
  std::vector<Tensor *> outputs;
  const std::vector<Attr> *attrs = nullptr; // the op's schema order, defaults filled
  KernelContext *ctx = nullptr;
  const Attr &attr(OpCode op, std::string_view name) const;
};

using KernelFn = Status (*)(const KernelArgs &);

/// The reference kernel of `op`, or null for structural ops.
KernelFn referenceKernel(OpCode op);

} // namespace nimble::vm

#endif // NIMBLE_VM_KERNEL_H
