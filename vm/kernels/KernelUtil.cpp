//===- KernelUtil.cpp - Shared machinery of the reference kernels --------===//

#include "vm/kernels/KernelUtil.h"

#include "ir/Limits.h"
#include "ir/ShapeFns.h"

#include <cassert>
#include <cstdlib>
#include <string_view>

namespace nimble::vm::kernels {

std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &in,
                                      const std::vector<int64_t> &out) {
  assert(in.size() <= out.size() && "broadcast to a lower rank");
  std::vector<int64_t> s(out.size(), 0);
  std::vector<int64_t> c = contiguousStrides(in);
  size_t off = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    assert((in[d] == out[off + d] || in[d] == 1) && "shapes do not broadcast");
    s[off + d] = (in[d] == 1 && out[off + d] != 1) ? 0 : c[d];
  }
  return s;
}

int64_t product(const std::vector<int64_t> &dims, size_t begin, size_t end) {
  // A sub-product of a tensor's shape: within the element limit (ir/Limits.h)
  // whenever the tensor exists. Checked, never wrapped.
  int64_t p = 1;
  end = std::min(end, dims.size());
  if (begin < end) {
    bool ok = limits::checkedNumElements(dims.data() + begin, end - begin, p);
    assert(ok && "kernel shape past the element limit");
    (void)ok;
  }
  return p;
}

void parallelRange(const KernelArgs &args, int64_t n, int64_t costPerItem,
                   const std::function<void(int64_t, int64_t)> &fn) {
  // Below ~32k element operations a wake-up round trip costs more than it
  // saves.
  constexpr int64_t kMinParallelWork = 1 << 15;
  ThreadPool *pool = args.ctx ? args.ctx->pool : nullptr;
  costPerItem = std::max<int64_t>(costPerItem, 1);
  // n * costPerItem < kMinParallelWork, without overflowing the product.
  bool small = n < (kMinParallelWork + costPerItem - 1) / costPerItem;
  if (!pool || pool->size() <= 1 || small) {
    if (n > 0) fn(0, n);
    return;
  }
  int64_t grain = std::max<int64_t>(1, kMinParallelWork / 4 / costPerItem);
  pool->parallelFor(n, grain, fn);
}

KernelIsa kernelIsa() {
  static const KernelIsa isa = [] {
    __builtin_cpu_init();
    KernelIsa cpu = KernelIsa::kBaseline;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) cpu = KernelIsa::kAvx2;
    if (cpu == KernelIsa::kAvx2 && __builtin_cpu_supports("avx512f")) cpu = KernelIsa::kAvx512;
    const char *cap = std::getenv("NIMBLE_KERNEL_ISA");
    if (!cap) return cpu;
    const std::string_view c(cap);
    const KernelIsa most = c == "sse2" ? KernelIsa::kBaseline : c == "avx2" ? KernelIsa::kAvx2 : KernelIsa::kAvx512;
    return std::min(cpu, most);
  }();
  return isa;
}

namespace {

bool isHalf(DType t) { return t == DType::F16 || t == DType::BF16; }

void halfToF32(const Tensor &src, Tensor &dst) {
  const uint16_t *s = src.data<uint16_t>();
  float *d = dst.data<float>();
  int64_t n = src.numElements();
  if (src.dtype() == DType::F16)
    for (int64_t i = 0; i < n; ++i) d[i] = halfToFloat(s[i]);
  else
    for (int64_t i = 0; i < n; ++i) d[i] = bf16ToFloat(s[i]);
}

void f32ToHalf(const Tensor &src, Tensor &dst) {
  const float *s = src.data<float>();
  uint16_t *d = dst.data<uint16_t>();
  int64_t n = src.numElements();
  if (dst.dtype() == DType::F16)
    for (int64_t i = 0; i < n; ++i) d[i] = floatToHalf(s[i]);
  else
    for (int64_t i = 0; i < n; ++i) d[i] = floatToBF16(s[i]);
}

} // namespace

Status withF32(const KernelArgs &args, Status (*impl)(const KernelArgs &)) {
  bool any = false;
  for (const Tensor *t : args.inputs) any |= isHalf(t->dtype());
  for (const Tensor *t : args.outputs) any |= isHalf(t->dtype());
  if (!any) return impl(args);

  KernelArgs wide = args;
  std::vector<TensorRef> keep; // the f32 copies, alive until we return
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    const Tensor *t = args.inputs[i];
    if (!isHalf(t->dtype())) continue;
    TensorRef w = makeTensor(DType::F32, t->shape());
    if (!w) return Status::error("out of memory widening " + sig(*t) + " to f32");
    halfToF32(*t, *w);
    wide.inputs[i] = w.get();
    keep.push_back(w);
  }
  std::vector<std::pair<Tensor *, Tensor *>> back; // (f32 copy, real output)
  for (size_t i = 0; i < args.outputs.size(); ++i) {
    Tensor *t = args.outputs[i];
    if (!isHalf(t->dtype())) continue;
    TensorRef w = makeTensor(DType::F32, t->shape());
    if (!w) return Status::error("out of memory widening " + sig(*t) + " to f32");
    // Upper-bound kernels leave the tail of their buffer unwritten; keep the
    // copy back well defined.
    std::memset(w->rawData(), 0, w->numBytes());
    wide.outputs[i] = w.get();
    back.emplace_back(w.get(), t);
    keep.push_back(w);
  }
  Status s = impl(wide);
  if (!s.ok()) return s;
  for (auto &[w, t] : back) f32ToHalf(*w, *t);
  return s;
}

void checkOutputShapes(OpCode op, const KernelArgs &args) {
#ifndef NDEBUG
  std::vector<TensorSig> sigs;
  std::vector<DenseValue> values;
  const OpInfo &info = opInfo(op);
  bool needValues = info.shapeMode == ShapeMode::DataDependent;
  values.reserve(args.inputs.size());
  for (const Tensor *t : args.inputs) {
    sigs.push_back({t->dtype(), t->shape()});
    DenseValue v;
    if (needValues) {
      v.dtype = t->dtype();
      v.shape = t->shape();
      v.bytes.assign(t->rawData(), t->rawData() + t->numBytes());
    }
    values.push_back(std::move(v));
  }
  std::vector<const DenseValue *> ptrs;
  if (needValues)
    for (const DenseValue &v : values) ptrs.push_back(&v);
  static const std::vector<Attr> kNoAttrs;
  ShapeFnResult r = inferShapes(op, sigs, args.attrs ? *args.attrs : kNoAttrs, ptrs);
  assert(r.ok() && "kernel called with operands its shape function rejects");
  size_t extra = r.upperBound ? 1 : 0;
  assert(args.outputs.size() == r.results.size() + extra && "wrong number of outputs");
  for (size_t i = 0; i < r.results.size() && i < args.outputs.size(); ++i) {
    [[maybe_unused]] const Tensor *o = args.outputs[i];
    assert(o->dtype() == r.results[i].dtype && o->shape() == r.results[i].dims &&
           "output does not have the shape function's type");
  }
  if (extra && args.outputs.size() == r.results.size() + 1) {
    [[maybe_unused]] const Tensor *s = args.outputs.back();
    assert(s->dtype() == DType::I64 && s->rank() == 1 &&
           s->dim(0) == static_cast<int64_t>(r.results[0].dims.size()) &&
           "upper-bound shape output must be a 1-D i64 tensor of the result's rank");
  }
#else
  (void)op;
  (void)args;
#endif
}

namespace {
const Attr &attrOf(const KernelArgs &args, OpCode op, std::string_view name) {
  return args.attr(op, name);
}
} // namespace

int64_t intAttr(const KernelArgs &args, OpCode op, std::string_view name) {
  return attrOf(args, op, name).getInt();
}
bool boolAttr(const KernelArgs &args, OpCode op, std::string_view name) {
  return attrOf(args, op, name).getBool();
}
double floatAttr(const KernelArgs &args, OpCode op, std::string_view name) {
  return attrOf(args, op, name).getFloat();
}
const std::vector<int64_t> &intsAttr(const KernelArgs &args, OpCode op,
                                     std::string_view name) {
  return attrOf(args, op, name).getInts();
}

int64_t loadInt(const Tensor &t, int64_t i) {
  const uint8_t *p = t.rawData() + static_cast<size_t>(i) * dtypeSize(t.dtype());
  switch (t.dtype()) {
  case DType::I1: return *p != 0;
  case DType::I8: return static_cast<int8_t>(*p);
  case DType::I32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case DType::I64:
  case DType::U64: { // u64 above INT64_MAX: its bits (an index out of range)
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  case DType::I16: {
    int16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case DType::U8: return *p;
  case DType::U16: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case DType::U32: {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  default: break;
  }
  assert(false && "loadInt of a floating-point tensor");
  return 0;
}

std::string sig(const Tensor &t) { return t.typeString(); }

} // namespace nimble::vm::kernels
