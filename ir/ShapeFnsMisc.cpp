//===- ShapeFnsMisc.cpp - Relations of top_k and non_max_suppression ------===//
//
// Issue 47's third batch (ops for ONNX models). top_k is data-dependent
// (Nimble paper §3.2): its k is a run-time scalar, so the result's size
// along the axis is k where the value is known (a constant, or at run time)
// and `?` otherwise. non_max_suppression is upper-bound: it keeps at most
// every box of every class of every batch entry, and the kernel returns the
// true count (paper §3.2, like unique and nonzero).
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeFnsImpl.h"

namespace nimble::shapefns {

bool relTopK(Ctx &c) {
  if (!dtypeAllowed(c.info.dtypes, c.ops[0].dtype))
    return c.fail("operand 0 must have " + std::string(dtypeRuleDescription(c.info.dtypes)) + ", got " +
                      formatSig(c.ops[0]),
                  0);
  if (c.rank(0) < 1) return c.fail("input must have rank >= 1, got " + formatSig(c.ops[0]), 0);
  if (!c.requireScalar(1, "k")) return false;
  if (!isInteger(c.ops[1].dtype)) return c.fail("k (operand 1) must be an integer, got " + formatSig(c.ops[1]), 1);
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), c.rank(0), ax, "axis")) return false;
  std::vector<int64_t> out = c.ops[0].dims;
  int64_t n = out[static_cast<size_t>(ax)], k = kDynamic;
  if (const DenseValue *v = c.value(1)) {
    k = v->getInt(0);
    if (k < 0 || (n != kDynamic && k > n))
      return c.fail("k " + std::to_string(k) + " is out of range [0, " + dimStr(n) + "] (the size of axis " +
                        std::to_string(ax) + ")",
                    1);
    if (n == kDynamic) c.defer("k is at most the size of the axis");
  } else {
    c.defer("k is in [0, the size of the axis]");
  }
  out[static_cast<size_t>(ax)] = k;
  c.result(c.ops[0].dtype, out);
  c.result(DType::I64, out);
  return true;
}

/// boxes B x N x 4, scores B x C x N, max_per_class an integer scalar,
/// iou_threshold and score_threshold scalars of the boxes' type ->
/// [at most B * C * N, 3] i64.
bool relNonMaxSuppression(Ctx &c) {
  for (size_t i : {0, 1})
    if (!dtypeAllowed(c.info.dtypes, c.ops[i].dtype))
      return c.fail("operand " + std::to_string(i) + " must have " +
                        std::string(dtypeRuleDescription(c.info.dtypes)) + ", got " + formatSig(c.ops[i]),
                    static_cast<int>(i));
  if (!c.requireRank(0, 3, "boxes") || !c.requireRank(1, 3, "scores") || !c.sameDType(0, 1)) return false;
  const auto &b = c.ops[0].dims, &s = c.ops[1].dims;
  int64_t four, batch, n;
  if (!c.unify(b[2], 4, four, "boxes dim 2 and 4 (the coordinates)")) {
    c.r.errorOperand = 0;
    return false;
  }
  if (!c.unify(b[0], s[0], batch, "the batch of boxes and scores (dim 0)") ||
      !c.unify(b[1], s[2], n, "the boxes of boxes (dim 1) and of scores (dim 2)")) {
    c.r.errorOperand = 1;
    return false;
  }
  if (!c.requireScalar(2, "max_per_class") || !c.requireScalar(3, "iou_threshold") ||
      !c.requireScalar(4, "score_threshold"))
    return false;
  if (!isInteger(c.ops[2].dtype))
    return c.fail("max_per_class (operand 2) must be an integer, got " + formatSig(c.ops[2]), 2);
  if (!c.sameDType(0, 3) || !c.sameDType(0, 4)) return false;
  int64_t bound = batch;
  if (bound != kDynamic && (s[1] == kDynamic || n == kDynamic)) bound = kDynamic;
  if (bound != kDynamic && (mulOverflows(bound, s[1]) || mulOverflows(bound, n)))
    return c.fail("batch x classes x boxes does not fit in 64 bits", 1);
  c.r.upperBound = true;
  c.result(DType::I64, {bound, 3});
  return true;
}

} // namespace nimble::shapefns
