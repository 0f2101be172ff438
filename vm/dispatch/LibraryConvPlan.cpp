//===- LibraryConvPlan.cpp - What a conv kernel is, for oneDNN ------------===//
//
// See LibraryConvPlan.h.
//
//===----------------------------------------------------------------------===//

#include "vm/dispatch/LibraryConvPlan.h"

#include "vm/dispatch/LibraryConv.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace nimble::vm::library {

Plan analyze(const KernelDesc &k) {
  Plan p;
  if (k.members.empty() || k.outputs.size() != 1 || k.upperBound) return p;
  const KernelDesc::Member &mm = k.members[0];
  p.transpose = mm.op == OpCode::ConvTranspose;
  if ((mm.op != OpCode::Conv && !p.transpose) || mm.numResults != 1 || mm.attrs.size() != 5u)
    return p;
  if (mm.operands.size() < 2 || mm.operands.size() > 3) return p;
  for (uint32_t v : mm.operands)
    if (!f32Input(k, v)) return p;
  p.x = mm.operands[0];
  p.w = mm.operands[1];
  if (mm.operands.size() == 3) p.bias = mm.operands[2];
  p.strides = mm.attrs[0].getInts();
  p.pads = mm.attrs[1].getInts();
  p.dilations = mm.attrs[2].getInts();
  if (p.transpose) p.outPad = mm.attrs[3].getInts();
  p.groups = mm.attrs[p.transpose ? 4 : 3].getInt();
  if (!p.transpose) p.last = mm.attrs[4].getBool();
  if (!library::matchPostOpChain(k, p.post)) return p;
  p.ok = true;
  return p;
}

Plan analyzePair(const KernelDesc &k) {
  Plan p;
  if (k.members.size() < 2 || k.outputs.size() != 1 || k.upperBound) return p;
  size_t j = 0;
  for (size_t i = 1; i < k.members.size(); ++i)
    if (k.members[i].op == OpCode::Conv || k.members[i].op == OpCode::ConvTranspose) {
      if (j) return p;
      j = i;
    }
  if (!j) return p;
  for (const KernelDesc::Member &m : k.members)
    if (m.numResults != 1) return p;
  const uint32_t n = k.numInputs, mid = n + static_cast<uint32_t>(j) - 1;
  KernelDesc a = k;
  a.members.resize(j);
  a.outputs = {mid};
  KernelDesc b = k;
  b.numInputs = n + 1;
  b.inputDTypes.resize(n);
  b.inputDTypes.push_back(DType::F32);
  b.members.assign(k.members.begin() + static_cast<std::ptrdiff_t>(j), k.members.end());
  bool ok = true;
  auto renumber = [&](uint32_t v) -> uint32_t {
    if (v < n) return v;
    if (v == mid) return n;
    if (v > mid) return v - static_cast<uint32_t>(j) + 1;
    ok = false; // a value of the first part other than its result
    return 0;
  };
  for (KernelDesc::Member &m : b.members)
    for (uint32_t &v : m.operands) v = renumber(v);
  b.outputs = {renumber(k.outputs[0])};
  if (!ok || b.members[0].operands.empty() || b.members[0].operands[0] != n) return p;
  Plan pa = analyze(a), pb = analyze(b);
  if (!pa.ok || !pb.ok || pa.transpose || pb.transpose || !pa.last || !pb.last || pa.groups != 1) return p;
  for (int64_t v : pa.strides)
    if (v != 1) return p;
  for (int64_t v : pa.pads)
    if (v != 0) return p;
  for (int64_t v : pa.dilations)
    if (v != 1) return p;
  p.parts = {std::move(pa), std::move(pb)};
  p.second = j;
  p.ok = true;
  return p;
}

bool clipAt(const Plan &p, const std::vector<Tensor *> &ins, size_t i, float &lo, float &hi) {
  if (i + 1 >= p.post.size()) return false;
  const PostOp &a = p.post[i], &b = p.post[i + 1];
  if (!a.binary || !b.binary || a.alg != dnnl::algorithm::binary_max || b.alg != dnnl::algorithm::binary_min)
    return false;
  const Tensor *l = ins[a.operand], *h = ins[b.operand];
  if (l->numElements() != 1 || h->numElements() != 1) return false;
  lo = *l->data<float>();
  hi = *h->data<float>();
  return lo <= hi; // false for NaN too
}

dnnl::memory::desc plain(const Dims &d) { return dnnl::memory::desc(d, dnnl::memory::data_type::f32, contiguous(d)); }

dnnl::memory::desc user(const Dims &phys, bool last) {
  if (!last || phys.size() < 3) return plain(phys);
  Dims d = phys, st = contiguous(phys);
  std::rotate(d.begin() + 1, d.end() - 1, d.end());
  std::rotate(st.begin() + 1, st.end() - 1, st.end());
  return dnnl::memory::desc(d, dnnl::memory::data_type::f32, st);
}

bool preferJit(const Plan &p, const Dims &xd, const Dims &od, const Dims &wd) {
  if (!p.last || p.transpose || p.groups != 1 || xd.size() != 4 || od.size() != 4 || wd.size() != 4) return false;
  if (xd[0] < 2 || wd[2] * wd[3] < 2) return false;
  return od[1] * od[2] <= 49; // channels-last: N x H x W x C
}

bool preferJitDw(const Plan &p, const Dims &xd, const Dims &wd) {
  static const bool jitDw = [] {
    if (const char *e = std::getenv("NIMBLE_CONV_DW_IMPL")) return std::string(e) == "jit_dw";
    __builtin_cpu_init();
    return __builtin_cpu_is("amd") != 0;
  }();
  if (!jitDw || !p.last || p.transpose || p.groups < 2 || xd.size() < 3 || wd.size() != xd.size()) return false;
  return xd.back() == p.groups && wd[0] == p.groups; // x: N x D.. x C; w: M x C/G x K..
}

void takeImpl(dnnl::convolution_forward::primitive_desc &pd, const char *prefix) {
  const dnnl::convolution_forward::primitive_desc first = pd;
  bool found = std::string(pd.impl_info_str()).rfind(prefix, 0) == 0;
  while (!found && pd.next_impl()) found = std::string(pd.impl_info_str()).rfind(prefix, 0) == 0;
  if (!found || pd.src_desc() != first.src_desc() || pd.dst_desc() != first.dst_desc()) pd = first;
}

double convMacs(const Plan &p, const std::vector<Tensor *> &ins, const Tensor *out) {
  const Tensor *w = ins[p.w];
  const double perElement = w->shape()[0] ? static_cast<double>(w->numElements()) / w->shape()[0] : 0;
  return static_cast<double>((p.transpose ? ins[p.x] : out)->numElements()) * perElement;
}

int64_t batchSlices(const Plan &p, const Tensor *x, int64_t threads) {
  static const bool on = [] {
    const char *e = std::getenv("NIMBLE_CONV_BATCH_SPLIT");
    return !e || std::string(e) != "0";
  }();
  if (!on || threads < 2 || !p.last || p.transpose || x->rank() < 3) return 1;
  const int64_t n = x->shape()[0];
  return n >= threads && n % threads == 0 ? threads : 1;
}

bool fusePair(const Plan &second, const std::vector<int64_t> &mid) {
  static const int mode = [] {
    const char *e = std::getenv("NIMBLE_CONV_PAIR");
    return !e ? -1 : std::string(e) == "0" ? 0 : std::string(e) == "1" ? 1 : -1;
  }();
  if (mode >= 0) return mode == 1;
  const int64_t stride = second.strides.empty() ? 1 : second.strides[0];
  double bytes = sizeof(float);
  for (int64_t d : mid) bytes *= static_cast<double>(d);
  return stride == 2 && bytes >= ConvKernels::kPairFuseBytes;
}

void appendPairChain(const Plan &p, const std::vector<Tensor *> &ins, dnnl::post_ops &ops) {
  for (size_t i = 0; i < p.post.size(); ++i) {
    float lo, hi;
    if (clipAt(p, ins, i, lo, hi)) {
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, lo, hi);
      ++i;
      continue;
    }
    if (p.post[i].binary) throw dnnl::error(dnnl_unimplemented, "pair: a binary post-op");
    ops.append_eltwise(1.0f, p.post[i].alg, 0.0f, 0.0f);
  }
}

} // namespace nimble::vm::library
