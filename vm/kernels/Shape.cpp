//===- Shape.cpp - Data movement: reshape, transpose, concat, slice, ... --===//
//
// These kernels only move elements, so they dispatch on the element size (an
// f16 moves like an i16) and never widen. Every output is written in full:
// whether a reshape becomes a view instead of a copy is the VM's business
// (ReshapeTensor); the kernel is what runs when it does not.
//
//   transpose / slice / broadcast_to   one strided walk over the output
//   concat / split / dynamic_slice     copies of contiguous runs
//                                      (outer x [axis extent x inner])
//   take                               numpy.take: negative indices count
//                                      from the end, anything outside
//                                      [-n, n) is an error naming the bounds
//   dynamic_slice                      start must satisfy
//                                      0 <= start <= dim - size (no clamping,
//                                      no negative starts); else an error
//
// Input-dependent conditions (indices, starts) are checked before any byte is
// written, so a failing kernel leaves its output untouched.
//
//===----------------------------------------------------------------------===//

#include "vm/kernels/KernelUtil.h"
#include "vm/kernels/Kernels.h"

namespace nimble::vm::kernels {

namespace {

/// The output is the input's bytes (reshape, expand_dims, squeeze).
Status copyAll(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  Tensor &y = *args.outputs[0];
  if (y.numBytes() && y.rawData() != x.rawData())
    std::memmove(y.rawData(), x.rawData(), y.numBytes());
  return Status::success();
}

/// y[i] = x[base + sum idx_d * strides_d] over y's shape.
void stridedCopy(const KernelArgs &args, const Tensor &x, Tensor &y, int64_t base,
                 const std::vector<int64_t> &strides) {
  visitSize(dtypeSize(x.dtype()), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U *in = x.data<U>() + base;
    U *out = y.data<U>();
    std::array<const int64_t *, 1> s = {strides.data()};
    parallelRange(args, y.numElements(), 1, [&](int64_t b, int64_t e) {
      forEachStrided<1>(y.shape(), s, b, e, [&](int64_t i, const std::array<int64_t, 1> &o) {
        out[i] = in[o[0]];
      });
    });
  });
}

Status transposeImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  std::vector<int64_t> perm = intsAttr(args, OpCode::Transpose, "perm");
  if (perm.empty())
    for (int64_t i = x.rank() - 1; i >= 0; --i) perm.push_back(i);
  std::vector<int64_t> in = contiguousStrides(x.shape()), strides;
  for (int64_t p : perm) strides.push_back(in[static_cast<size_t>(normAxis(p, x.rank()))]);
  stridedCopy(args, x, *args.outputs[0], 0, strides);
  return Status::success();
}

Status sliceImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  const auto &axes = intsAttr(args, OpCode::Slice, "axes");
  const auto &starts = intsAttr(args, OpCode::Slice, "starts");
  std::vector<int64_t> strides = contiguousStrides(x.shape());
  int64_t base = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    size_t ax = static_cast<size_t>(normAxis(axes[i], x.rank()));
    int64_t d = x.dim(ax), s = starts[i];
    if (s < 0) s += d;
    s = std::min(std::max<int64_t>(s, 0), d);
    base += s * strides[ax];
  }
  Tensor &y = *args.outputs[0];
  // An empty slice may start one past the end; never form that pointer.
  if (y.numElements() == 0) return Status::success();
  stridedCopy(args, x, y, base, strides);
  return Status::success();
}

Status broadcastToImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  Tensor &y = *args.outputs[0];
  stridedCopy(args, x, y, 0, broadcastStrides(x.shape(), y.shape()));
  return Status::success();
}

/// Splits `shape` at `axis` into outer (before) and inner (after) products.
void outerInner(const std::vector<int64_t> &shape, int64_t axis, int64_t &outer,
                int64_t &inner) {
  outer = product(shape, 0, static_cast<size_t>(axis));
  inner = product(shape, static_cast<size_t>(axis) + 1);
}

Status concatImpl(const KernelArgs &args) {
  Tensor &y = *args.outputs[0];
  int64_t axis = normAxis(intAttr(args, OpCode::Concat, "axis"), y.rank());
  int64_t outer, inner;
  outerInner(y.shape(), axis, outer, inner);
  size_t es = dtypeSize(y.dtype());
  int64_t outRun = y.dim(static_cast<size_t>(axis)) * inner; // elements per outer step
  int64_t at = 0;                                            // axis offset, in elements
  for (const Tensor *x : args.inputs) {
    int64_t run = x->dim(static_cast<size_t>(axis)) * inner;
    for (int64_t o = 0; o < outer && run > 0; ++o)
      std::memcpy(y.rawData() + static_cast<size_t>(o * outRun + at) * es,
                  x->rawData() + static_cast<size_t>(o * run) * es, static_cast<size_t>(run) * es);
    at += run;
  }
  return Status::success();
}

Status splitImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  int64_t axis = normAxis(intAttr(args, OpCode::Split, "axis"), x.rank());
  int64_t outer, inner;
  outerInner(x.shape(), axis, outer, inner);
  size_t es = dtypeSize(x.dtype());
  int64_t inRun = x.dim(static_cast<size_t>(axis)) * inner;
  int64_t at = 0;
  for (Tensor *y : args.outputs) {
    int64_t run = y->dim(static_cast<size_t>(axis)) * inner;
    for (int64_t o = 0; o < outer && run > 0; ++o)
      std::memcpy(y->rawData() + static_cast<size_t>(o * run) * es,
                  x.rawData() + static_cast<size_t>(o * inRun + at) * es,
                  static_cast<size_t>(run) * es);
    at += run;
  }
  return Status::success();
}

Status dynamicSliceImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  Tensor &y = *args.outputs[0];
  int64_t axis = normAxis(intAttr(args, OpCode::DynamicSlice, "axis"), x.rank());
  int64_t size = intAttr(args, OpCode::DynamicSlice, "size");
  int64_t d = x.dim(static_cast<size_t>(axis));
  int64_t start = loadInt(*args.inputs[1], 0);
  if (start < 0 || start > d - size)
    return Status::error("start " + std::to_string(start) +
                         " is out of range [0, " + std::to_string(d - size) + "] for size " +
                         std::to_string(size) + " along axis " + std::to_string(axis) +
                         " of size " + std::to_string(d) + " (input " + sig(x) + ")");
  int64_t outer, inner;
  outerInner(x.shape(), axis, outer, inner);
  size_t es = dtypeSize(x.dtype());
  int64_t run = size * inner, inRun = d * inner;
  for (int64_t o = 0; o < outer && run > 0; ++o)
    std::memcpy(y.rawData() + static_cast<size_t>(o * run) * es,
                x.rawData() + static_cast<size_t>(o * inRun + start * inner) * es,
                static_cast<size_t>(run) * es);
  return Status::success();
}

/// In place when the output is the operand's own buffer (manifest-memory
/// passes %x as the output when no alias of it is live afterwards): then only
/// the window is written, O(size of the update) instead of O(size of %x).
Status dynamicUpdateSliceImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0], &u = *args.inputs[1];
  Tensor &y = *args.outputs[0];
  int64_t axis = normAxis(intAttr(args, OpCode::DynamicUpdateSlice, "axis"), x.rank());
  int64_t d = x.dim(static_cast<size_t>(axis));
  int64_t size = u.rank() == x.rank() ? u.dim(static_cast<size_t>(axis)) : 0;
  // Checked here, not only by the shape function: an in-place call has none.
  bool fits = u.rank() == x.rank() && y.shape() == x.shape() && size <= d;
  for (int64_t k = 0; fits && k < x.rank(); ++k)
    fits = k == axis || u.dim(static_cast<size_t>(k)) == x.dim(static_cast<size_t>(k));
  if (!fits)
    return Status::error("the update " + sig(u) + " does not fit " + sig(x) + " along axis " +
                         std::to_string(axis) + " (every other dimension must be equal)");
  int64_t start = loadInt(*args.inputs[2], 0);
  if (start < 0 || start > d - size)
    return Status::error("start " + std::to_string(start) + " is out of range [0, " +
                         std::to_string(d - size) + "] for an update of size " +
                         std::to_string(size) + " along axis " + std::to_string(axis) +
                         " of size " + std::to_string(d) + " (input " + sig(x) + ", update " +
                         sig(u) + ")");
  size_t es = dtypeSize(x.dtype());
  if (y.rawData() != x.rawData() && x.numElements() > 0)
    std::memcpy(y.rawData(), x.rawData(), static_cast<size_t>(x.numElements()) * es);
  int64_t outer, inner;
  outerInner(x.shape(), axis, outer, inner);
  int64_t run = size * inner, outRun = d * inner;
  for (int64_t o = 0; o < outer && run > 0; ++o)
    std::memcpy(y.rawData() + static_cast<size_t>(o * outRun + start * inner) * es,
                u.rawData() + static_cast<size_t>(o * run) * es, static_cast<size_t>(run) * es);
  return Status::success();
}

Status takeImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0], &idx = *args.inputs[1];
  Tensor &y = *args.outputs[0];
  int64_t axis = normAxis(intAttr(args, OpCode::Take, "axis"), x.rank());
  int64_t n = x.dim(static_cast<size_t>(axis));
  int64_t count = idx.numElements();
  std::vector<int64_t> rows(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    int64_t i = loadInt(idx, k);
    if (i < -n || i >= n)
      return Status::error("index " + std::to_string(i) + " is out of range [" +
                           std::to_string(-n) + ", " + std::to_string(n) + ") for axis " +
                           std::to_string(axis) + " of size " + std::to_string(n) +
                           " (input " + sig(x) + ")");
    rows[static_cast<size_t>(k)] = i < 0 ? i + n : i;
  }
  int64_t outer, inner;
  outerInner(x.shape(), axis, outer, inner);
  size_t bytes = static_cast<size_t>(inner) * dtypeSize(x.dtype());
  if (bytes == 0) return Status::success();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < count; ++k)
      std::memcpy(y.rawData() + static_cast<size_t>(o * count + k) * bytes,
                  x.rawData() + static_cast<size_t>(o * n + rows[static_cast<size_t>(k)]) * bytes,
                  bytes);
  return Status::success();
}

} // namespace

#define NIMBLE_SHAPE_KERNEL(Id, Impl)                                                        \
  Status ref##Id(const KernelArgs &args) {                                                   \
    checkOutputShapes(OpCode::Id, args);                                                     \
    return Impl(args);                                                                       \
  }
NIMBLE_SHAPE_KERNEL(Reshape, copyAll)
NIMBLE_SHAPE_KERNEL(DynReshape, copyAll)
NIMBLE_SHAPE_KERNEL(ExpandDims, copyAll)
NIMBLE_SHAPE_KERNEL(Squeeze, copyAll)
NIMBLE_SHAPE_KERNEL(Transpose, transposeImpl)
NIMBLE_SHAPE_KERNEL(Slice, sliceImpl)
NIMBLE_SHAPE_KERNEL(BroadcastTo, broadcastToImpl)
NIMBLE_SHAPE_KERNEL(Concat, concatImpl)
NIMBLE_SHAPE_KERNEL(Split, splitImpl)
NIMBLE_SHAPE_KERNEL(DynamicSlice, dynamicSliceImpl)
NIMBLE_SHAPE_KERNEL(DynamicUpdateSlice, dynamicUpdateSliceImpl)
NIMBLE_SHAPE_KERNEL(Take, takeImpl)
#undef NIMBLE_SHAPE_KERNEL

} // namespace nimble::vm::kernels
