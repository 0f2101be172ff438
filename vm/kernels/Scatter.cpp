//===- Scatter.cpp - gather_nd, scatter_elements, scatter_nd, one_hot ------===//
//
// ONNX's GatherND, ScatterElements, ScatterND and OneHot. Indices may be
// negative (counting from the end of their dimension, as ONNX allows);
// anything outside [-n, n) is an error naming the index and the bounds,
// checked before any element is written, except in one_hot, where ONNX
// defines an out-of-range index as a row of `off` values.
//
// The scatters copy %data to the output (unless they share the buffer) and
// then apply the updates in order, so with reduction none a repeated index
// keeps the last update (ONNX leaves that order undefined); add / mul / max
// / min combine in order (f16 and bf16 through f32; integers wrap; max and
// min propagate NaN like maximum / minimum). They run single-threaded: the
// updates may collide.
//
//===----------------------------------------------------------------------===//

#include "vm/kernels/KernelUtil.h"
#include "vm/kernels/Kernels.h"

#include <cmath>

namespace nimble::vm::kernels {

namespace {

/// Normalises index `v` against a dimension of size `n`; false when out of range.
bool normIndex(int64_t v, int64_t n, int64_t &out) {
  if (v < -n || v >= n) return false;
  out = v < 0 ? v + n : v;
  return true;
}

std::string indexError(const char *op, int64_t v, int64_t axis, int64_t n, const Tensor &x) {
  return std::string(op) + ": index " + std::to_string(v) + " is out of range [-" + std::to_string(n) + ", " +
         std::to_string(n) + ") for axis " + std::to_string(axis) + " of size " + std::to_string(n) + " (input " +
         sig(x) + ")";
}

/// Offsets (in elements) into `data` of each index tuple of `indices` (its
/// last axis), for batch `b` tuples per batch entry of `batch` elements.
Status tupleOffsets(const char *op, const Tensor &data, const Tensor &idx, int64_t batchDims,
                    std::vector<int64_t> &offs) {
  const int64_t m = idx.dim(static_cast<size_t>(idx.rank() - 1));
  const int64_t tuples = m ? idx.numElements() / m : 0;
  const std::vector<int64_t> strides = contiguousStrides(data.shape());
  // Tuples per batch entry, and the data elements a batch entry spans.
  int64_t perBatch = tuples;
  for (int64_t k = 0; k < batchDims; ++k) perBatch /= std::max<int64_t>(idx.dim(static_cast<size_t>(k)), 1);
  const int64_t batchSpan = batchDims ? strides[static_cast<size_t>(batchDims - 1)] : 0;
  offs.resize(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = perBatch ? (t / perBatch) * batchSpan : 0;
    for (int64_t j = 0; j < m; ++j) {
      const int64_t axis = batchDims + j, n = data.dim(static_cast<size_t>(axis));
      int64_t v = loadInt(idx, t * m + j), k;
      if (!normIndex(v, n, k)) return Status::error(indexError(op, v, axis, n, data));
      off += k * strides[static_cast<size_t>(axis)];
    }
    offs[static_cast<size_t>(t)] = off;
  }
  return Status::success();
}

enum class Red { None, Add, Mul, Max, Min };

Red reductionOf(const KernelArgs &args, OpCode op) {
  const std::string &r = args.attr(op, "reduction").getStr();
  return r == "add" ? Red::Add : r == "mul" ? Red::Mul : r == "max" ? Red::Max : r == "min" ? Red::Min : Red::None;
}

template <class T> T combine(Red r, T a, T b) {
  if constexpr (kIsFloat<T> || kIsInt<T>) {
    switch (r) {
    case Red::None: return b;
    case Red::Add:
      if constexpr (kIsFloat<T>) return a + b;
      else return wrapAdd(a, b);
    case Red::Mul:
      if constexpr (kIsFloat<T>) return a * b;
      else return wrapMul(a, b);
    case Red::Max:
    case Red::Min:
      if constexpr (kIsFloat<T>)
        if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
      return r == Red::Max ? (a < b ? b : a) : (b < a ? b : a);
    }
  }
  return b;
}

/// The output starts as a copy of the data (in place when planned so).
void copyData(const Tensor &data, Tensor &out) {
  if (out.numBytes() && out.rawData() != data.rawData()) std::memmove(out.rawData(), data.rawData(), out.numBytes());
}

/// Applies updates[u * inner + i] at out[offs[u] + i] for every update u.
Status applyUpdates(const KernelArgs &args, OpCode op, const std::vector<int64_t> &offs, int64_t inner) {
  const Tensor &upd = *args.inputs[2];
  Tensor &out = *args.outputs[0];
  Red red = reductionOf(args, op);
  return visitType(out.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T *u = upd.data<T>();
    T *o = out.data<T>();
    for (size_t k = 0; k < offs.size(); ++k)
      for (int64_t i = 0; i < inner; ++i) {
        T &dst = o[offs[k] + i];
        dst = combine<T>(red, dst, u[static_cast<int64_t>(k) * inner + i]);
      }
    return Status::success();
  });
}

Status scatterElementsImpl(const KernelArgs &args) {
  const Tensor &data = *args.inputs[0], &idx = *args.inputs[1];
  const int64_t r = data.rank(), ax = normAxis(intAttr(args, OpCode::ScatterElements, "axis"), r);
  const std::vector<int64_t> strides = contiguousStrides(data.shape());
  const int64_t n = data.dim(static_cast<size_t>(ax));
  // The target of each update: its own coordinates, the index along axis.
  std::vector<int64_t> offs(static_cast<size_t>(idx.numElements()));
  std::vector<int64_t> coord(static_cast<size_t>(r), 0);
  for (int64_t e = 0; e < idx.numElements(); ++e) {
    int64_t v = loadInt(idx, e), k;
    if (!normIndex(v, n, k)) return Status::error(indexError("scatter_elements", v, ax, n, data));
    int64_t off = 0;
    for (int64_t d = 0; d < r; ++d)
      off += (d == ax ? k : coord[static_cast<size_t>(d)]) * strides[static_cast<size_t>(d)];
    offs[static_cast<size_t>(e)] = off;
    for (int64_t d = r - 1; d >= 0; --d) { // the next coordinate of indices
      if (++coord[static_cast<size_t>(d)] < idx.dim(static_cast<size_t>(d))) break;
      coord[static_cast<size_t>(d)] = 0;
    }
  }
  copyData(data, *args.outputs[0]);
  return applyUpdates(args, OpCode::ScatterElements, offs, 1);
}

Status scatterNDImpl(const KernelArgs &args) {
  const Tensor &data = *args.inputs[0], &idx = *args.inputs[1];
  std::vector<int64_t> offs;
  if (Status s = tupleOffsets("scatter_nd", data, idx, 0, offs); !s.ok()) return s;
  const int64_t m = idx.dim(static_cast<size_t>(idx.rank() - 1));
  copyData(data, *args.outputs[0]);
  return applyUpdates(args, OpCode::ScatterND, offs, product(data.shape(), static_cast<size_t>(m)));
}

} // namespace

Status refGatherND(const KernelArgs &args) {
  checkOutputShapes(OpCode::GatherND, args);
  const Tensor &data = *args.inputs[0], &idx = *args.inputs[1];
  Tensor &out = *args.outputs[0];
  const int64_t b = intAttr(args, OpCode::GatherND, "batch_dims");
  std::vector<int64_t> offs;
  if (Status s = tupleOffsets("gather_nd", data, idx, b, offs); !s.ok()) return s;
  const int64_t m = idx.dim(static_cast<size_t>(idx.rank() - 1));
  const size_t bytes = static_cast<size_t>(product(data.shape(), static_cast<size_t>(b + m))) * dtypeSize(data.dtype());
  for (size_t k = 0; k < offs.size(); ++k)
    if (bytes)
      std::memcpy(out.rawData() + k * bytes, data.rawData() + static_cast<size_t>(offs[k]) * dtypeSize(data.dtype()),
                  bytes);
  return Status::success();
}

Status refScatterElements(const KernelArgs &args) {
  checkOutputShapes(OpCode::ScatterElements, args);
  return withF32(args, &scatterElementsImpl);
}

Status refScatterND(const KernelArgs &args) {
  checkOutputShapes(OpCode::ScatterND, args);
  return withF32(args, &scatterNDImpl);
}

Status refOneHot(const KernelArgs &args) {
  checkOutputShapes(OpCode::OneHot, args);
  const Tensor &idx = *args.inputs[0], &values = *args.inputs[2];
  Tensor &out = *args.outputs[0];
  const int64_t depth = loadInt(*args.inputs[1], 0);
  if (depth < 0) return Status::error("one_hot: depth " + std::to_string(depth) + " is negative");
  const int64_t ax = normAxis(intAttr(args, OpCode::OneHot, "axis"), idx.rank() + 1);
  // out[outer, j, inner] = values[idx[outer, inner] == j]
  const int64_t outer = product(idx.shape(), 0, static_cast<size_t>(ax)),
                inner = product(idx.shape(), static_cast<size_t>(ax));
  const size_t es = dtypeSize(values.dtype());
  const uint8_t *off = values.rawData(), *on = values.rawData() + es;
  uint8_t *o = out.rawData();
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t j = 0; j < depth; ++j)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t v = loadInt(idx, a * inner + i);
        if (v < 0) v += depth;
        std::memcpy(o + static_cast<size_t>((a * depth + j) * inner + i) * es, v == j ? on : off, es);
      }
  return Status::success();
}

} // namespace nimble::vm::kernels
