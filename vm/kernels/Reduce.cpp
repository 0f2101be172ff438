//===- Reduce.cpp - sum, mean, max, min, prod, argmax, cumsum -------------===//
//
// A reduction splits the input's dimensions into kept and reduced ones. The
// output (keepdims only inserts 1s, which do not change the row-major order)
// enumerates the kept dimensions; each output element folds the elements at
// `base + off` for every offset `off` of the reduced sub-space. Both offset
// lists are computed once with the strided walker, so any set of axes, in any
// order, negative or not, takes the same path.
//
// Semantics (numpy's, and ONNX's for empty axes): no axes reduces
// everything; a reduction over zero elements gives 0 for sum, 1 for prod,
// NaN for mean (0/0), and for max / min their identities, -inf / +inf for
// floats and the type's lowest / highest value for integers (ONNX's
// ReduceMax / ReduceMin of an empty set; numpy raises); argmax, which has no
// identity, is an error unless the output is empty as well. Floats
// accumulate in double; integer sums and products wrap. max/min propagate
// NaN; argmax returns the first maximal index (the first NaN if there is
// one).
//
// cumsum runs along one axis: each of the outer x inner lines is summed in
// order (from the end with reverse; exclusive shifts by one, starting at 0),
// f32 accumulating in double and rounding each output once, integers
// wrapping.
//
//===----------------------------------------------------------------------===//

#include "vm/kernels/KernelUtil.h"
#include "vm/kernels/Kernels.h"

#include <cmath>
#include <limits>

namespace nimble::vm::kernels {

namespace {

struct ReducePlan {
  std::vector<int64_t> base;    // per output element: offset of its first input
  std::vector<int64_t> offsets; // per reduced element: offset from base
  // The reduced axes are the trailing ones (e.g. sum of everything): output
  // element o folds the contiguous run [o * count, (o + 1) * count), and the
  // two lists stay empty. They would be as large as the input (8 bytes per
  // element): a second copy of a big tensor (issue 23).
  bool suffix = false;
};

std::vector<int64_t> enumerateOffsets(const std::vector<int64_t> &dims,
                                      const std::vector<int64_t> &strides) {
  std::vector<int64_t> out(static_cast<size_t>(product(dims)));
  std::array<const int64_t *, 1> s = {strides.data()};
  forEachStrided<1>(dims, s, 0, static_cast<int64_t>(out.size()),
                    [&](int64_t i, const std::array<int64_t, 1> &o) {
                      out[static_cast<size_t>(i)] = o[0];
                    });
  return out;
}

ReducePlan makePlan(const std::vector<int64_t> &shape, const std::vector<bool> &reduced) {
  size_t firstReduced = shape.size();
  while (firstReduced > 0 && reduced[firstReduced - 1]) --firstReduced;
  bool suffix = true;
  for (size_t d = 0; d < firstReduced; ++d) suffix &= !reduced[d];
  if (suffix) {
    ReducePlan p;
    p.suffix = true;
    return p;
  }
  std::vector<int64_t> strides = contiguousStrides(shape);
  std::vector<int64_t> keptDims, keptStrides, redDims, redStrides;
  for (size_t d = 0; d < shape.size(); ++d) {
    (reduced[d] ? redDims : keptDims).push_back(shape[d]);
    (reduced[d] ? redStrides : keptStrides).push_back(strides[d]);
  }
  return {enumerateOffsets(keptDims, keptStrides), enumerateOffsets(redDims, redStrides)};
}

std::vector<bool> reducedAxes(const KernelArgs &args, OpCode op, int64_t rank) {
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  if (op == OpCode::ArgMax) {
    reduced[static_cast<size_t>(normAxis(intAttr(args, op, "axis"), rank))] = true;
    return reduced;
  }
  const std::vector<int64_t> &axes = intsAttr(args, op, "axes");
  if (axes.empty()) reduced.assign(reduced.size(), true);
  for (int64_t a : axes) reduced[static_cast<size_t>(normAxis(a, rank))] = true;
  return reduced;
}

std::string emptyReductionError(OpCode op, const Tensor &x) {
  return std::string(opInfo(op).mnemonic) + " of an empty reduction (input " + sig(x) +
         "): the operation has no identity";
}

template <OpCode Op> Status reduceImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  Tensor &y = *args.outputs[0];
  std::vector<bool> reduced = reducedAxes(args, Op, x.rank());
  ReducePlan p = makePlan(x.shape(), reduced);
  int64_t outs = static_cast<int64_t>(p.base.size());
  int64_t count = static_cast<int64_t>(p.offsets.size());
  if (p.suffix) {
    outs = count = 1;
    for (size_t d = 0; d < reduced.size(); ++d) (reduced[d] ? count : outs) *= x.dim(d);
  }
  if (Op == OpCode::ArgMax && count == 0 && outs > 0)
    return Status::error(emptyReductionError(Op, x));
  return visitType(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    constexpr bool ok = Op == OpCode::Mean ? kIsFloat<T> : (kIsFloat<T> || kIsInt<T>);
    if constexpr (!ok) {
      return Status::error(std::string(opInfo(Op).mnemonic) + " has no kernel for " + sig(x));
    } else {
      const T *in = x.data<T>();
      const int64_t *offs = p.offsets.data();
      auto fold = [&](auto offAt, auto baseAt) {
        parallelRange(args, outs, count, [&](int64_t b, int64_t e) {
          for (int64_t o = b; o < e; ++o) {
            const T *row = in + baseAt(o);
            if constexpr (Op == OpCode::Prod) {
              if constexpr (kIsFloat<T>) {
                double acc = 1;
                for (int64_t j = 0; j < count; ++j) acc *= static_cast<double>(row[offAt(j)]);
                y.data<T>()[o] = static_cast<T>(acc);
              } else {
                T acc = 1;
                for (int64_t j = 0; j < count; ++j) acc = wrapMul<T>(acc, row[offAt(j)]);
                y.data<T>()[o] = acc;
              }
            } else if constexpr (Op == OpCode::Sum || Op == OpCode::Mean) {
              using Acc = std::conditional_t<kIsFloat<T>, double, uint64_t>;
              Acc acc = 0;
              for (int64_t j = 0; j < count; ++j) acc += static_cast<Acc>(row[offAt(j)]);
              if constexpr (Op == OpCode::Mean)
                y.data<T>()[o] = static_cast<T>(acc / static_cast<double>(count));
              else
                y.data<T>()[o] = static_cast<T>(acc);
            } else if constexpr (Op == OpCode::ArgMax) {
              int64_t best = 0;
              T bv = row[offAt(0)];
              for (int64_t j = 1; j < count; ++j) {
                T v = row[offAt(j)];
                if constexpr (kIsFloat<T>)
                  if (std::isnan(bv)) break;
                bool better = v > bv;
                if constexpr (kIsFloat<T>) better |= std::isnan(v);
                if (better) {
                  bv = v;
                  best = j;
                }
              }
              y.data<int64_t>()[o] = best;
            } else {
              if (count == 0) { // the identity (ONNX's empty ReduceMax / ReduceMin)
                if constexpr (kIsFloat<T>)
                  y.data<T>()[o] = Op == OpCode::Max ? -std::numeric_limits<T>::infinity()
                                                     : std::numeric_limits<T>::infinity();
                else
                  y.data<T>()[o] = Op == OpCode::Max ? std::numeric_limits<T>::lowest()
                                                     : std::numeric_limits<T>::max();
                continue;
              }
              T bv = row[offAt(0)];
              for (int64_t j = 1; j < count; ++j) {
                T v = row[offAt(j)];
                if constexpr (kIsFloat<T>) {
                  if (std::isnan(bv)) break;
                  if (std::isnan(v)) {
                    bv = v;
                    break;
                  }
                }
                if (Op == OpCode::Max ? v > bv : v < bv) bv = v;
              }
              y.data<T>()[o] = bv;
            }
          }
        });
      };
      if (p.suffix)
        fold([](int64_t j) { return j; }, [count](int64_t o) { return o * count; });
      else
        fold([offs](int64_t j) { return offs[j]; },
             [&](int64_t o) { return p.base[static_cast<size_t>(o)]; });
      return Status::success();
    }
  });
}

} // namespace

#define NIMBLE_REDUCE_KERNEL(Id)                                                             \
  Status ref##Id(const KernelArgs &args) {                                                   \
    checkOutputShapes(OpCode::Id, args);                                                     \
    return withF32(args, &reduceImpl<OpCode::Id>);                                           \
  }
NIMBLE_REDUCE_KERNEL(Sum)
NIMBLE_REDUCE_KERNEL(Mean)
NIMBLE_REDUCE_KERNEL(Max)
NIMBLE_REDUCE_KERNEL(Min)
NIMBLE_REDUCE_KERNEL(ArgMax)
NIMBLE_REDUCE_KERNEL(Prod)
#undef NIMBLE_REDUCE_KERNEL

namespace {

Status cumsumImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  Tensor &y = *args.outputs[0];
  const int64_t r = x.rank(), a = loadInt(*args.inputs[1], 0);
  if (a < -r || a >= r)
    return Status::error("cumsum: axis " + std::to_string(a) + " is out of range for " + sig(x));
  const size_t ax = static_cast<size_t>(normAxis(a, r));
  const int64_t n = x.dim(ax), outer = product(x.shape(), 0, ax), inner = product(x.shape(), ax + 1);
  const bool exclusive = boolAttr(args, OpCode::CumSum, "exclusive");
  const bool reverse = boolAttr(args, OpCode::CumSum, "reverse");
  return visitType(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!(kIsFloat<T> || kIsInt<T>)) {
      return Status::error("cumsum has no kernel for " + sig(x));
    } else {
      using Acc = std::conditional_t<kIsFloat<T>, double, T>;
      const T *in = x.data<T>();
      T *out = y.data<T>();
      parallelRange(args, outer * inner, n, [&](int64_t b, int64_t e) {
        for (int64_t line = b; line < e; ++line) {
          const int64_t base = (line / inner) * n * inner + line % inner;
          Acc acc = 0;
          for (int64_t j = 0; j < n; ++j) {
            const int64_t at = base + (reverse ? n - 1 - j : j) * inner;
            const Acc v = static_cast<Acc>(in[at]);
            if (exclusive) out[at] = static_cast<T>(acc);
            if constexpr (kIsFloat<T>) acc += v;
            else acc = wrapAdd<T>(acc, v);
            if (!exclusive) out[at] = static_cast<T>(acc);
          }
        }
      });
      return Status::success();
    }
  });
}

} // namespace

Status refCumSum(const KernelArgs &args) {
  checkOutputShapes(OpCode::CumSum, args);
  return withF32(args, &cumsumImpl);
}

} // namespace nimble::vm::kernels
