//===- ShapeFnsImpl.h - Private to the type relations of ShapeFns.cpp ----===//
//
// Shared by the files that hold the relations (ShapeFns.cpp: elementwise,
// linear algebra, reductions, normalisation, convolution, pooling and
// attention, with the dispatch over every relation; ShapeFnsLayout.cpp:
// layout, indexing, scatter/gather and creation ops; ShapeFnsSampling.cpp:
// resize and grid_sample): the context one
// relation builds its answer in, and the relations each file gives the
// other. Not part of the IR library's interface: include ir/ShapeFns.h.
//
//===----------------------------------------------------------------------===//

#ifndef NIMBLE_IR_SHAPEFNSIMPL_H
#define NIMBLE_IR_SHAPEFNSIMPL_H

#include "ir/Limits.h"
#include "ir/ShapeFns.h"

#include <cassert>
#include <string>
#include <string_view>
#include <vector>

namespace nimble::shapefns {

inline std::string dimStr(int64_t d) { return d == kDynamic ? "?" : std::to_string(d); }

/// "[0, 1, 1]": an integer-list attribute as written.
inline std::string formatInts(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// Sizes come from user text, so products and sums of dimensions may
/// overflow int64: these report it instead of wrapping (UB).
inline bool mulOverflows(int64_t &acc, int64_t d) { return __builtin_mul_overflow(acc, d, &acc); }
inline bool addOverflows(int64_t &acc, int64_t d) { return __builtin_add_overflow(acc, d, &acc); }

/// Ranks a run-time shape operand may give (the rank of a result is its
/// length): the rank limit, which also bounds what a single
/// `tensor<100000000xi64>` constant can make the compiler allocate.
constexpr int64_t kMaxShapeLength = limits::kMaxRank;

/// Builds one relation's answer. Relations return early on the first error.
class Ctx {
public:
  Ctx(OpCode code, const std::vector<TensorSig> &ops, std::span<const Attr> attrs,
      const std::vector<const DenseValue *> &values)
      : info(opInfo(code)), ops(ops), attrs(attrs), values(values) {}

  const OpInfo &info;
  const std::vector<TensorSig> &ops;
  std::span<const Attr> attrs;
  const std::vector<const DenseValue *> &values;
  ShapeFnResult r;

  const Attr &attr(std::string_view name) const {
    int i = info.attrIndex(name);
    assert(i >= 0 && static_cast<size_t>(i) < attrs.size() && "attribute missing");
    return attrs[static_cast<size_t>(i)];
  }
  int64_t intAttr(std::string_view n) const { return attr(n).getInt(); }
  bool boolAttr(std::string_view n) const { return attr(n).getBool(); }
  const std::vector<int64_t> &intsAttr(std::string_view n) const { return attr(n).getInts(); }
  const DenseValue *value(size_t i) const { return i < values.size() ? values[i] : nullptr; }
  int64_t rank(size_t i) const { return static_cast<int64_t>(ops[i].dims.size()); }

  bool fail(std::string msg, int operand = -1) {
    if (r.error.empty()) {
      r.error = std::move(msg);
      r.errorOperand = operand;
    }
    return false;
  }
  void defer(std::string what) { r.deferred.push_back(std::move(what)); }
  void result(DType t, std::vector<int64_t> dims) { r.results.push_back({t, std::move(dims)}); }

  /// Fails because of attribute `name`: diagnostics point at it.
  bool failAttr(std::string_view name, std::string msg) {
    if (r.error.empty()) r.errorAttr = info.attrIndex(name);
    return fail(std::move(msg));
  }

  /// Normalises a possibly negative axis, read from attribute `attrName`,
  /// against `rank`.
  bool axis(int64_t a, int64_t rank, int64_t &out, std::string_view attrName,
            std::string_view what = "axis") {
    if (a < -rank || a >= rank || (rank == 0 && a != 0))
      return failAttr(attrName, std::string(what) + " " + std::to_string(a) +
                                    " is out of range for rank " + std::to_string(rank));
    out = a < 0 ? a + rank : a;
    return true;
  }

  /// Equality constraint between two dims: returns the more precise one,
  /// defers when one side is `?`.
  bool unify(int64_t a, int64_t b, int64_t &out, const std::string &what) {
    if (a != kDynamic && b != kDynamic && a != b)
      return fail(what + " must be equal, got " + dimStr(a) + " and " + dimStr(b));
    if ((a == kDynamic) != (b == kDynamic)) defer(what + " must be equal (" + dimStr(a) +
                                                  " vs " + dimStr(b) + ")");
    else if (a == kDynamic) defer(what + " must be equal (both ?)");
    out = a == kDynamic ? b : a;
    return true;
  }

  bool sameDType(size_t i, size_t j) {
    if (ops[i].dtype == ops[j].dtype) return true;
    return fail("operand " + std::to_string(j) + " has element type " +
                    std::string(dtypeName(ops[j].dtype)) + " but operand " +
                    std::to_string(i) + " has " + std::string(dtypeName(ops[i].dtype)),
                static_cast<int>(j));
  }

  bool requireScalar(size_t i, std::string_view what) {
    if (ops[i].dims.empty()) return true;
    return fail(std::string(what) + " (operand " + std::to_string(i) +
                    ") must be a scalar tensor, got " + formatSig(ops[i]),
                static_cast<int>(i));
  }

  bool requireRank(size_t i, int64_t rank, std::string_view what) {
    if (this->rank(i) == rank) return true;
    return fail(std::string(what) + " (operand " + std::to_string(i) + ") must have rank " +
                    std::to_string(rank) + ", got " + formatSig(ops[i]),
                static_cast<int>(i));
  }

  /// numpy broadcasting of operands `which`, with the paper's `?` rules.
  bool broadcast(const std::vector<size_t> &which, std::vector<int64_t> &out) {
    size_t rankOut = 0;
    for (size_t i : which) rankOut = std::max(rankOut, ops[i].dims.size());
    out.assign(rankOut, 1);
    // `known[k]`: the operand that fixed out[k] to a size != 1 (for messages).
    std::vector<int> known(rankOut, -1);
    for (size_t i : which) {
      const auto &d = ops[i].dims;
      size_t off = rankOut - d.size();
      for (size_t k = 0; k < d.size(); ++k) {
        int64_t a = out[off + k], b = d[k];
        int64_t res;
        if (a == kDynamic && b == kDynamic) {
          res = kDynamic;
          defer("dimension " + std::to_string(off + k) + " of the broadcast operands must "
                "be compatible (both ?)");
        } else if (a == kDynamic || b == kDynamic) {
          int64_t n = a == kDynamic ? b : a;
          if (n == 1) {
            res = kDynamic;
          } else {
            res = n;
            defer("dimension " + std::to_string(off + k) + " (?) must be 1 or " +
                  std::to_string(n) + " to broadcast");
          }
        } else if (a == b || b == 1) {
          res = a;
        } else if (a == 1) {
          res = b;
        } else {
          return fail("operands are not broadcast-compatible: dimension " +
                          std::to_string(off + k) + " is " + std::to_string(a) +
                          " in operand " + std::to_string(known[off + k]) + " and " +
                          std::to_string(b) + " in operand " + std::to_string(i) + " (" +
                          formatDims(ops[static_cast<size_t>(known[off + k])].dims) +
                          " vs " + formatDims(d) + ")",
                      static_cast<int>(i));
        }
        // The operand whose static size != 1 now fixes out[k] (a `?` or 1 before
        // it does not), so a later conflict names the right operand.
        if (known[off + k] < 0 || (b != 1 && b != kDynamic && (a == 1 || a == kDynamic)))
          known[off + k] = static_cast<int>(i);
        out[off + k] = res;
      }
    }
    return true;
  }

  /// Reads an integer 1-D value (a shape) from operand `i`, if known.
  bool shapeValue(size_t i, std::vector<int64_t> &out) {
    const DenseValue *v = value(i);
    if (!v) return false;
    out.clear();
    for (int64_t k = 0; k < v->numElements(); ++k) out.push_back(v->getInt(k));
    return true;
  }
};

/// Relations of ShapeFnsLayout.cpp, dispatched by apply() in ShapeFns.cpp.
bool relReshape(Ctx &c);
bool relDynReshape(Ctx &c);
bool relTranspose(Ctx &c);
bool relConcat(Ctx &c);
bool relSplit(Ctx &c);
bool relSlice(Ctx &c);
bool relDynamicSlice(Ctx &c);
bool relDynamicUpdateSlice(Ctx &c);
bool relTake(Ctx &c);
bool relExpandDims(Ctx &c);
bool relSqueeze(Ctx &c);
bool relBroadcastTo(Ctx &c);
bool relArange(Ctx &c);
bool relUnique(Ctx &c);
bool relNonzero(Ctx &c);
bool relZerosFull(Ctx &c, bool full);
bool relCumSum(Ctx &c);
bool relTile(Ctx &c);
bool relPad(Ctx &c);
bool relGatherND(Ctx &c);
bool relScatterElements(Ctx &c);
bool relScatterND(Ctx &c);
bool relOneHot(Ctx &c);

/// Relations of ShapeFnsMisc.cpp (issue 47's third batch).
bool relTopK(Ctx &c);
bool relNonMaxSuppression(Ctx &c);
/// Relations of ShapeFnsSampling.cpp (resize, grid_sample).
bool relResize(Ctx &c);
bool relGridSample(Ctx &c);

} // namespace nimble::shapefns

#endif // NIMBLE_IR_SHAPEFNSIMPL_H
