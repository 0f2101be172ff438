//===- LibraryPostOps.h - oneDNN post-op chains of fused kernels -*- C++ -*-===//
//
// Private to vm/dispatch/. A fused kernel whose first member is a library
// primitive (matmul, conv) and whose other members are elementwise ops,
// each applied to the previous one's result, runs as that primitive with
// oneDNN post-ops: unary members become eltwise post-ops, binary members
// whose other operand is a kernel input become binary post-ops. Both
// LibraryKernels.cpp and LibraryConv.cpp match the chain with
// matchPostOpChain, so they agree on what a library kernel may carry.
//
//===----------------------------------------------------------------------===//

#ifndef NIMBLE_VM_DISPATCH_LIBRARYPOSTOPS_H
#define NIMBLE_VM_DISPATCH_LIBRARYPOSTOPS_H

#include "vm/format/Executable.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <vector>

namespace nimble::vm::library {

/// One post-op of the chain after the primitive.
struct PostOp {
  bool binary = false;
  dnnl::algorithm alg = dnnl::algorithm::undef;
  uint32_t operand = 0; // binary: the kernel input it reads
  // binary: the operand is the op's first (lhs) operand and the chain's
  // value the second (a commutative op written `maximum %b, %chain`):
  // maximum and minimum pick between equal zeros and NaNs by operand order.
  bool operandFirst = false;
};

/// True if kernel input `v` exists and is f32.
inline bool f32Input(const KernelDesc &k, uint32_t v) {
  return v < k.numInputs && v < k.inputDTypes.size() && k.inputDTypes[v] == DType::F32;
}

/// Matches k.members[1..] as a post-op chain on the primitive's result
/// (value number k.numInputs): every value computed inside the kernel is used
/// exactly once, by the next member, and the last one is the kernel's only
/// output. Appends the chain to `post` and returns true on a match; on a
/// mismatch returns false and `post` is unspecified.
inline bool matchPostOpChain(const KernelDesc &k, std::vector<PostOp> &post) {
  uint32_t chain = k.numInputs;
  std::vector<unsigned> uses(k.numInputs + k.members.size(), 0);
  for (const KernelDesc::Member &m : k.members)
    for (uint32_t v : m.operands)
      if (v < uses.size()) ++uses[v];
  for (size_t i = 1; i < k.members.size(); ++i) {
    const KernelDesc::Member &m = k.members[i];
    if (m.numResults != 1 || uses[chain] != 1) return false;
    PostOp po;
    auto unary = [&](dnnl::algorithm a) {
      if (m.operands.size() != 1 || m.operands[0] != chain) return false;
      po.alg = a;
      return true;
    };
    auto binary = [&](dnnl::algorithm a, bool commutative) {
      if (m.operands.size() != 2) return false;
      uint32_t other;
      if (m.operands[0] == chain && m.operands[1] != chain) other = m.operands[1];
      else if (commutative && m.operands[1] == chain && m.operands[0] != chain) other = m.operands[0], po.operandFirst = true;
      else return false;
      if (!f32Input(k, other)) return false;
      po.binary = true;
      po.alg = a;
      po.operand = other;
      return true;
    };
    bool ok = false;
    switch (m.op) {
    case OpCode::Add: ok = binary(dnnl::algorithm::binary_add, true); break;
    case OpCode::Mul: ok = binary(dnnl::algorithm::binary_mul, true); break;
    case OpCode::Sub: ok = binary(dnnl::algorithm::binary_sub, false); break;
    case OpCode::Div: ok = binary(dnnl::algorithm::binary_div, false); break;
    case OpCode::Maximum: ok = binary(dnnl::algorithm::binary_max, true); break;
    case OpCode::Minimum: ok = binary(dnnl::algorithm::binary_min, true); break;
    case OpCode::Relu: ok = unary(dnnl::algorithm::eltwise_relu); break;
    case OpCode::Gelu: ok = unary(dnnl::algorithm::eltwise_gelu_erf); break;
    case OpCode::Tanh: ok = unary(dnnl::algorithm::eltwise_tanh); break;
    case OpCode::Sigmoid: ok = unary(dnnl::algorithm::eltwise_logistic); break;
    case OpCode::Exp: ok = unary(dnnl::algorithm::eltwise_exp); break;
    default: break;
    }
    if (!ok) return false;
    post.push_back(po);
    chain = k.numInputs + static_cast<uint32_t>(i);
  }
  return k.outputs[0] == chain;
}

/// Row-major strides of `d`.
inline dnnl::memory::dims contiguous(const dnnl::memory::dims &d) {
  dnnl::memory::dims s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

} // namespace nimble::vm::library

#endif // NIMBLE_VM_DISPATCH_LIBRARYPOSTOPS_H
