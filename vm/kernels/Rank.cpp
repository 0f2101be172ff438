//===- Rank.cpp - top_k and non_max_suppression ----------------------------===//
//
// The ranking ops of issue 47's third batch (docs/LangRef.md):
//
//   top_k    per line along the axis, the k first entries of the order
//            "larger first" (or smaller first), NaN before every number
//            when largest and after every number otherwise; equal entries
//            (and NaNs) in index order, so the result is deterministic (ONNX
//            asks for the lower index first). std::partial_sort with that
//            total order: O(n log k) per line, lines spread over the pool.
//   non_max_suppression  ONNX's greedy selection per (batch, class): the
//            boxes with score > score_threshold, by descending score (equal
//            scores: lower index first), each kept unless its IoU with a box
//            already kept exceeds iou_threshold, at most max_per_class of
//            them. Boxes are [y1, x1, y2, x2] with the corners in either
//            order, or [x_center, y_center, width, height] with
//            center_point_box; a box of zero area overlaps nothing. The rows
//            [batch, class, box] go into the upper-bound buffer (paper §3.2)
//            in batch, class, selection order; the true count is returned.
//
//===----------------------------------------------------------------------===//

#include "vm/kernels/KernelUtil.h"
#include "vm/kernels/Kernels.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace nimble::vm::kernels {

namespace {

Status topKImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  Tensor &vals = *args.outputs[0], &idx = *args.outputs[1];
  const int64_t ax = normAxis(intAttr(args, OpCode::TopK, "axis"), x.rank());
  const bool largest = boolAttr(args, OpCode::TopK, "largest");
  const int64_t k = loadInt(*args.inputs[1], 0), n = x.dim(static_cast<size_t>(ax));
  if (k < 0 || k > n)
    return Status::error("top_k: k " + std::to_string(k) + " is out of range [0, " + std::to_string(n) +
                         "] (the size of axis " + std::to_string(ax) + " of " + sig(x) + ")");
  const int64_t outer = product(x.shape(), 0, static_cast<size_t>(ax)),
                inner = product(x.shape(), static_cast<size_t>(ax) + 1);
  return visitType(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsFloat<T> && !kIsInt<T>) {
      return Status::error("top_k has no kernel for " + sig(x));
    } else {
      const T *xs = x.data<T>();
      T *vs = vals.data<T>();
      int64_t *is = idx.data<int64_t>();
      parallelRange(args, outer * inner, n * 4 + 1, [&](int64_t l0, int64_t l1) {
        std::vector<int64_t> order(static_cast<size_t>(n));
        for (int64_t l = l0; l < l1; ++l) {
          const int64_t o = l / inner, i = l % inner;
          const T *line = xs + o * n * inner + i;
          auto at = [&](int64_t j) { return line[j * inner]; };
          // true when entry a comes before entry b.
          auto before = [&](int64_t a, int64_t b) {
            T va = at(a), vb = at(b);
            if constexpr (kIsFloat<T>) {
              bool na = std::isnan(va), nb = std::isnan(vb);
              if (na || nb) return na && nb ? a < b : (largest ? na : nb);
            }
            if (va != vb) return largest ? vb < va : va < vb;
            return a < b;
          };
          std::iota(order.begin(), order.end(), int64_t(0));
          std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
          for (int64_t j = 0; j < k; ++j) {
            const int64_t out = (o * k + j) * inner + i;
            vs[out] = at(order[static_cast<size_t>(j)]);
            is[out] = order[static_cast<size_t>(j)];
          }
        }
      });
      return Status::success();
    }
  });
}

/// A box as [ymin, xmin, ymax, xmax].
struct Box {
  double y0, x0, y1, x1;
};

template <class T> Box boxAt(const T *p, bool center) {
  double a = static_cast<double>(p[0]), b = static_cast<double>(p[1]), c = static_cast<double>(p[2]),
         d = static_cast<double>(p[3]);
  if (center) return {b - d / 2, a - c / 2, b + d / 2, a + c / 2};
  return {std::min(a, c), std::min(b, d), std::max(a, c), std::max(b, d)};
}

/// Whether the IoU of p and q exceeds the threshold (a box of no area, or
/// no overlap, never does).
bool suppresses(const Box &p, const Box &q, double iouThreshold) {
  double ap = (p.y1 - p.y0) * (p.x1 - p.x0), aq = (q.y1 - q.y0) * (q.x1 - q.x0);
  if (ap <= 0 || aq <= 0) return false;
  double ih = std::min(p.y1, q.y1) - std::max(p.y0, q.y0), iw = std::min(p.x1, q.x1) - std::max(p.x0, q.x0);
  if (ih <= 0 || iw <= 0) return false;
  double inter = ih * iw;
  return inter / (ap + aq - inter) > iouThreshold;
}

Status nmsImpl(const KernelArgs &args) {
  const Tensor &boxes = *args.inputs[0], &scores = *args.inputs[1];
  const int64_t maxPer = loadInt(*args.inputs[2], 0);
  const bool center = boolAttr(args, OpCode::NonMaxSuppression, "center_point_box");
  const int64_t nb = scores.dim(0), nc = scores.dim(1), n = scores.dim(2);
  int64_t *out = args.outputs[0]->data<int64_t>();
  int64_t count = 0;
  Status st = visitType(boxes.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!kIsFloat<T>) {
      return Status::error("non_max_suppression has no kernel for " + sig(boxes));
    } else {
      const double iou = static_cast<double>(*args.inputs[3]->data<T>());
      const double thr = static_cast<double>(*args.inputs[4]->data<T>());
      const T *bs = boxes.data<T>(), *ss = scores.data<T>();
      std::vector<int64_t> cand;
      std::vector<Box> kept;
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t c = 0; c < nc && maxPer > 0; ++c) {
          const T *s = ss + (b * nc + c) * n;
          cand.clear();
          for (int64_t i = 0; i < n; ++i)
            if (static_cast<double>(s[i]) > thr) cand.push_back(i);
          std::stable_sort(cand.begin(), cand.end(), [&](int64_t p, int64_t q) { return s[q] < s[p]; });
          kept.clear();
          for (int64_t i : cand) {
            if (static_cast<int64_t>(kept.size()) >= maxPer) break;
            Box box = boxAt(bs + (b * n + i) * 4, center);
            bool drop = false;
            for (const Box &k : kept) drop = drop || suppresses(k, box, iou);
            if (drop) continue;
            kept.push_back(box);
            out[count * 3] = b;
            out[count * 3 + 1] = c;
            out[count * 3 + 2] = i;
            ++count;
          }
        }
      return Status::success();
    }
  });
  if (!st.ok()) return st;
  int64_t *shape = args.outputs[1]->data<int64_t>();
  shape[0] = count;
  shape[1] = 3;
  return Status::success();
}

} // namespace

Status refTopK(const KernelArgs &args) {
  checkOutputShapes(OpCode::TopK, args);
  return withF32(args, &topKImpl);
}

Status refNonMaxSuppression(const KernelArgs &args) {
  checkOutputShapes(OpCode::NonMaxSuppression, args);
  return withF32(args, &nmsImpl);
}

} // namespace nimble::vm::kernels
