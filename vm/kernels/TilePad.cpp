//===- TilePad.cpp - tile and pad -----------------------------------------===//
//
// Both ops map each output coordinate, axis by axis, to a source coordinate
// (or to "the padding value"), so one walker serves both: per axis a table
// `src[j]` of the input offset (coordinate times stride) that output index
// j reads, -1 for the constant. The output is written row by row (every
// axis but the last fixed), parallel over rows; they only move elements, so
// they dispatch on the element size (an f16 moves like an i16).
//
//   tile   src = j mod d (numpy.tile / ONNX's Tile).
//   pad    s = j - begin; inside [0, d) it is s, else by mode:
//            constant  the padding value (operand 2, else zero bits)
//            edge      clamp(s, 0, d - 1)
//            wrap      s mod d
//            reflect   mirrored about the first and last entries, without
//                      repeating them, periodically (numpy.pad's reflect,
//                      which ONNX's reference implementation calls; pads
//                      may exceed d - 1); an axis of size 1 repeats its entry.
//          A negative pad removes entries from that side (ONNX). A mode other
//          than constant cannot pad an empty axis (the shape function says so;
//          the kernel checks again).
//
//===----------------------------------------------------------------------===//

#include "vm/kernels/KernelUtil.h"
#include "vm/kernels/Kernels.h"

namespace nimble::vm::kernels {

namespace {

using Tables = std::vector<std::vector<int64_t>>;

/// y[idx] = x[sum_k src[k][idx_k]], or `fill` when any term is -1.
template <class U> void walk(const KernelArgs &args, const Tensor &x, Tensor &y, const Tables &src, U fill) {
  const U *in = x.data<U>();
  U *out = y.data<U>();
  const int64_t r = y.rank();
  if (r == 0) {
    out[0] = src.empty() ? in[0] : fill;
    return;
  }
  const int64_t last = y.dim(static_cast<size_t>(r - 1));
  if (last == 0 || y.numElements() == 0) return;
  const int64_t rows = y.numElements() / last;
  const std::vector<int64_t> &inner = src[static_cast<size_t>(r - 1)];
  parallelRange(args, rows, last, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      int64_t base = 0, rem = row;
      bool constant = false;
      for (int64_t k = r - 2; k >= 0; --k) {
        const int64_t d = y.dim(static_cast<size_t>(k)), j = rem % d;
        rem /= d;
        const int64_t o = src[static_cast<size_t>(k)][static_cast<size_t>(j)];
        if (o < 0) constant = true;
        base += o;
      }
      U *dst = out + row * last;
      if (constant) {
        std::fill(dst, dst + last, fill);
        continue;
      }
      for (int64_t j = 0; j < last; ++j) {
        const int64_t o = inner[static_cast<size_t>(j)];
        dst[j] = o < 0 ? fill : in[base + o];
      }
    }
  });
}

template <class U> U fillValue(const KernelArgs &args) {
  U v{};
  if (args.inputs.size() > 2) std::memcpy(&v, args.inputs[2]->rawData(), sizeof(U));
  return v;
}

Status run(const KernelArgs &args, const Tables &src) {
  const Tensor &x = *args.inputs[0];
  Tensor &y = *args.outputs[0];
  return visitSize(dtypeSize(x.dtype()), [&](auto tag) -> Status {
    using U = typename decltype(tag)::type;
    walk<U>(args, x, y, src, fillValue<U>(args));
    return Status::success();
  });
}

} // namespace

Status refTile(const KernelArgs &args) {
  checkOutputShapes(OpCode::Tile, args);
  const Tensor &x = *args.inputs[0];
  Tensor &y = *args.outputs[0];
  const std::vector<int64_t> strides = contiguousStrides(x.shape());
  Tables src(static_cast<size_t>(x.rank()));
  for (size_t k = 0; k < src.size(); ++k) {
    const int64_t d = x.dim(k), n = y.dim(k);
    src[k].resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) src[k][static_cast<size_t>(j)] = (j % d) * strides[k];
  }
  return run(args, src);
}

Status refPad(const KernelArgs &args) {
  checkOutputShapes(OpCode::Pad, args);
  const Tensor &x = *args.inputs[0];
  Tensor &y = *args.outputs[0];
  const std::string &mode = args.attr(OpCode::Pad, "mode").getStr();
  const std::vector<int64_t> strides = contiguousStrides(x.shape());
  Tables src(static_cast<size_t>(x.rank()));
  for (size_t k = 0; k < src.size(); ++k) {
    const int64_t d = x.dim(k), n = y.dim(k), begin = loadInt(*args.inputs[1], static_cast<int64_t>(k));
    if (d == 0 && n > 0 && mode != "constant")
      return Status::error("pad: cannot pad the empty dimension " + std::to_string(k) + " of " + sig(x) +
                           " in mode " + mode);
    src[k].resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = j - begin;
      if (s < 0 || s >= d) {
        if (mode == "constant") {
          s = -1;
        } else if (mode == "edge") {
          s = s < 0 ? 0 : d - 1;
        } else if (mode == "wrap") {
          s = (s % d + d) % d;
        } else if (d == 1) { // reflect
          s = 0;
        } else {
          const int64_t p = 2 * (d - 1), m = (s % p + p) % p;
          s = m < d ? m : p - m;
        }
      }
      src[k][static_cast<size_t>(j)] = s < 0 ? -1 : s * strides[k];
    }
  }
  return run(args, src);
}

} // namespace nimble::vm::kernels
