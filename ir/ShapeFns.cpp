//===- ShapeFns.cpp - Type relations and shape functions of every op -----===//
//
// See ShapeFns.h for the contract. Each relation below reads its operands'
// signatures, checks what can be checked, defers what depends on `?`, and
// produces the result signatures. Messages name operands by position and show
// shapes as `2x?x3`, so the same text serves compile-time diagnostics (with an
// op location added by the caller) and run-time errors (with the op's source
// location from the bytecode).
//
//===----------------------------------------------------------------------===//

#include "ir/ShapeFns.h"

#include "ir/Limits.h"

#include <cassert>
#include <cmath>
#include <sstream>

namespace nimble {

std::string formatDims(const std::vector<int64_t> &dims) {
  if (dims.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += 'x';
    s += dims[i] == kDynamic ? "?" : std::to_string(dims[i]);
  }
  return s;
}

std::string formatSig(const TensorSig &sig) {
  std::string s = "tensor<";
  for (int64_t d : sig.dims) s += (d == kDynamic ? "?" : std::to_string(d)) + "x";
  s += dtypeName(sig.dtype);
  return s + ">";
}

namespace {

std::string dimStr(int64_t d) { return d == kDynamic ? "?" : std::to_string(d); }

/// "[0, 1, 1]": an integer-list attribute as written.
std::string formatInts(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// Sizes come from user text, so products and sums of dimensions may
/// overflow int64: these report it instead of wrapping (UB).
bool mulOverflows(int64_t &acc, int64_t d) { return __builtin_mul_overflow(acc, d, &acc); }
bool addOverflows(int64_t &acc, int64_t d) { return __builtin_add_overflow(acc, d, &acc); }

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

bool relUnary(Ctx &c) {
  c.result(c.ops[0].dtype, c.ops[0].dims);
  if (c.info.code == OpCode::Softmax) {
    int64_t ax;
    if (!c.axis(c.intAttr("axis"), c.rank(0), ax, "axis")) return false;
  }
  return true;
}

bool relBroadcast(Ctx &c, bool compare) {
  if (!c.sameDType(0, 1)) return false;
  std::vector<int64_t> dims;
  if (!c.broadcast({0, 1}, dims)) return false;
  c.result(compare ? DType::I1 : c.ops[0].dtype, dims);
  return true;
}

bool relSelect(Ctx &c) {
  if (c.ops[0].dtype != DType::I1)
    return c.fail("condition (operand 0) must have element type i1, got " +
                      formatSig(c.ops[0]),
                  0);
  if (!c.sameDType(1, 2)) return false;
  std::vector<int64_t> dims;
  if (!c.broadcast({0, 1, 2}, dims)) return false;
  c.result(c.ops[1].dtype, dims);
  return true;
}

bool relMatMul(Ctx &c, bool batched) {
  if (!c.sameDType(0, 1)) return false;
  const auto &a = c.ops[0].dims, &b = c.ops[1].dims;
  bool ta = c.boolAttr("transpose_a"), tb = c.boolAttr("transpose_b");
  if (!batched) {
    if (a.size() != 2) return c.fail("lhs must have rank 2, got " + formatSig(c.ops[0]), 0);
    if (b.size() != 2) return c.fail("rhs must have rank 2, got " + formatSig(c.ops[1]), 1);
  } else {
    if (a.size() < 3)
      return c.fail("lhs must have rank >= 3, got " + formatSig(c.ops[0]), 0);
    if (b.size() != a.size())
      return c.fail("rhs must have the rank of lhs (" + std::to_string(a.size()) +
                        "), got " + formatSig(c.ops[1]),
                    1);
  }
  size_t n = a.size();
  int64_t m = ta ? a[n - 1] : a[n - 2], ka = ta ? a[n - 2] : a[n - 1];
  int64_t kb = tb ? b[n - 1] : b[n - 2], nn = tb ? b[n - 2] : b[n - 1];
  if (ka != kDynamic && kb != kDynamic && ka != kb)
    return c.fail("the contracted dimensions of lhs and rhs must be equal, got " +
                      std::to_string(ka) + " (lhs " + formatDims(a) + ") and " +
                      std::to_string(kb) + " (rhs " + formatDims(b) + ")",
                  1);
  int64_t k;
  if (!c.unify(ka, kb, k, "the contracted dimensions of lhs and rhs")) return false;
  std::vector<int64_t> out;
  if (batched) {
    // Batch dimensions broadcast like element-wise operands.
    TensorSig la{c.ops[0].dtype, {a.begin(), a.end() - 2}};
    TensorSig lb{c.ops[1].dtype, {b.begin(), b.end() - 2}};
    std::vector<TensorSig> batchOps = {la, lb};
    // Named, not `{}` temporaries: Ctx keeps references to them.
    std::vector<Attr> noAttrs;
    std::vector<const DenseValue *> noValues;
    Ctx bc(OpCode::Add, batchOps, noAttrs, noValues);
    if (!bc.broadcast({0, 1}, out)) return c.fail("batch dimensions: " + bc.r.error);
    for (auto &d : bc.r.deferred) c.defer("batch " + d);
  }
  out.push_back(m);
  out.push_back(nn);
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relReduce(Ctx &c, bool arg) {
  int64_t r = c.rank(0);
  std::vector<bool> reduced(static_cast<size_t>(r), false);
  if (arg) {
    int64_t ax;
    if (!c.axis(c.intAttr("axis"), r, ax, "axis")) return false;
    if (r > 0) reduced[static_cast<size_t>(ax)] = true;
  } else {
    const auto &axes = c.intsAttr("axes");
    if (axes.empty()) reduced.assign(static_cast<size_t>(r), true);
    for (int64_t a : axes) {
      int64_t ax;
      if (!c.axis(a, r, ax, "axes")) return false;
      if (reduced[static_cast<size_t>(ax)])
        return c.failAttr("axes", "axis " + std::to_string(a) + " is listed twice");
      reduced[static_cast<size_t>(ax)] = true;
    }
  }
  bool keep = c.boolAttr("keepdims");
  std::vector<int64_t> out;
  for (int64_t i = 0; i < r; ++i) {
    if (!reduced[static_cast<size_t>(i)]) out.push_back(c.ops[0].dims[static_cast<size_t>(i)]);
    else if (keep) out.push_back(1);
  }
  c.result(arg ? DType::I64 : c.ops[0].dtype, out);
  return true;
}

bool relLayerNorm(Ctx &c) {
  if (c.rank(0) < 1) return c.fail("input must have rank >= 1, got " + formatSig(c.ops[0]), 0);
  int64_t d = c.ops[0].dims.back();
  for (size_t i = 1; i < 3; ++i) {
    if (!c.sameDType(0, i) || !c.requireRank(i, 1, i == 1 ? "gamma" : "beta")) return false;
    int64_t k;
    if (!c.unify(c.ops[i].dims[0], d, k,
                 std::string(i == 1 ? "gamma" : "beta") + " size and the last dimension")) {
      c.r.errorOperand = static_cast<int>(i);
      return false;
    }
  }
  c.result(c.ops[0].dtype, c.ops[0].dims);
  return true;
}

/// The spatial attributes of conv and the pools over `k` spatial axes:
/// strides and dilations (>= 1; empty means 1s), pads (>= 0, begin then end
/// per axis; empty means 0s). Filled to full length.
bool windowAttrs(Ctx &c, size_t k, std::vector<int64_t> &st, std::vector<int64_t> &pad,
                 std::vector<int64_t> &dil) {
  auto read = [&](std::string_view name, size_t n, int64_t dflt, int64_t min, std::vector<int64_t> &out) {
    out = c.intsAttr(name);
    if (out.empty()) out.assign(n, dflt);
    if (out.size() != n)
      return c.failAttr(name, std::string(name) + " must have " + std::to_string(n) + " entries (" +
                                  std::to_string(k) + " spatial axes), got " + formatInts(out));
    for (int64_t v : out)
      if (v < min || v > (int64_t(1) << 32))
        return c.failAttr(name, std::string(name) + " entries must be " + (min ? "positive" : "non-negative") +
                                    " and at most 2^32, got " + formatInts(out));
    return true;
  };
  return read("strides", k, 1, 1, st) && read("pads", 2 * k, 0, 0, pad) && read("dilations", k, 1, 1, dil);
}

/// One output size along a spatial axis: floor (or ceil) of (padded input -
/// dilated window) / stride, plus one. With ceil, a last window that would
/// start in the end padding is dropped (PyTorch's and ONNX's rule), so every
/// window starts inside the input or its begin padding.
bool windowOut(Ctx &c, size_t axis, int64_t d, int64_t kk, int64_t st, int64_t pb, int64_t pe, int64_t dil,
               bool ceil, int64_t &out) {
  if (d == kDynamic || kk == kDynamic) {
    c.defer("the dilated window fits the padded input along spatial axis " + std::to_string(axis));
    out = kDynamic;
    return true;
  }
  int64_t span = kk - 1, padded = d + pb + pe; // d < 2^48, pads <= 2^32: no overflow
  if (kk < 1 || mulOverflows(span, dil) || ++span > padded)
    return c.fail("the window along spatial axis " + std::to_string(axis) + " (" + std::to_string(kk) +
                      (dil > 1 ? " dilated by " + std::to_string(dil) : "") + ") is larger than the padded input (" +
                      std::to_string(d) + " + " + std::to_string(pb + pe) + ")",
                  0);
  int64_t room = padded - span;
  out = (ceil ? (room + st - 1) / st : room / st) + 1;
  if (ceil && (out - 1) * st >= d + pb) --out;
  return true;
}

bool relConv(Ctx &c) {
  const auto &x = c.ops[0].dims, &w = c.ops[1].dims;
  if (x.size() < 3)
    return c.fail("input must have rank >= 3 (batch, channels, spatial axes), got " + formatSig(c.ops[0]), 0);
  if (w.size() != x.size())
    return c.fail("weights must have the rank of the input (" + std::to_string(x.size()) + "), got " +
                      formatSig(c.ops[1]),
                  1);
  if (!c.sameDType(0, 1) || (c.ops.size() == 3 && !c.sameDType(0, 2))) return false;
  size_t k = x.size() - 2;
  std::vector<int64_t> st, pad, dil;
  if (!windowAttrs(c, k, st, pad, dil)) return false;
  int64_t groups = c.intAttr("groups");
  if (groups < 1) return c.failAttr("groups", "groups must be positive, got " + std::to_string(groups));
  int64_t m = w[0];
  if (m != kDynamic && m % groups)
    return c.fail("the output channels (weights dim 0, " + std::to_string(m) + ") must be a multiple of groups (" +
                      std::to_string(groups) + ")",
                  1);
  int64_t cin = w[1] == kDynamic ? kDynamic : w[1] * groups, ch;
  if (!c.unify(x[1], cin, ch, "the input channels and weights dim 1 times groups")) {
    c.r.errorOperand = 1;
    return false;
  }
  if (c.ops.size() == 3) {
    if (!c.requireRank(2, 1, "bias")) return false;
    int64_t b;
    if (!c.unify(c.ops[2].dims[0], m, b, "the bias size and the output channels")) {
      c.r.errorOperand = 2;
      return false;
    }
    m = b;
  }
  std::vector<int64_t> out = {x[0], m};
  for (size_t i = 0; i < k; ++i) {
    int64_t o;
    if (!windowOut(c, i, x[i + 2], w[i + 2], st[i], pad[i], pad[i + k], dil[i], false, o)) return false;
    out.push_back(o);
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relPool(Ctx &c) {
  const auto &x = c.ops[0].dims;
  if (x.size() < 3)
    return c.fail("input must have rank >= 3 (batch, channels, spatial axes), got " + formatSig(c.ops[0]), 0);
  size_t k = x.size() - 2;
  const auto &kernel = c.intsAttr("kernel");
  if (kernel.size() != k)
    return c.failAttr("kernel", "kernel must have " + std::to_string(k) + " entries (spatial axes), got " +
                                    formatInts(kernel));
  for (int64_t v : kernel)
    if (v < 1 || v > (int64_t(1) << 32))
      return c.failAttr("kernel", "kernel entries must be positive and at most 2^32, got " + formatInts(kernel));
  std::vector<int64_t> st, pad, dil;
  if (!windowAttrs(c, k, st, pad, dil)) return false;
  std::vector<int64_t> out = {x[0], x[1]};
  for (size_t i = 0; i < k; ++i) {
    int64_t o;
    if (!windowOut(c, i, x[i + 2], kernel[i], st[i], pad[i], pad[i + k], dil[i], c.boolAttr("ceil_mode"), o))
      return false;
    out.push_back(o);
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relAttention(Ctx &c) {
  static const char *names[] = {"q", "k", "v", "mask"};
  for (size_t i = 0; i < 3; ++i) {
    if (!c.requireRank(i, 3, names[i])) return false;
    if (i && !c.sameDType(0, i)) return false;
  }
  const auto &q = c.ops[0].dims, &k = c.ops[1].dims, &v = c.ops[2].dims;
  int64_t h, h2, d, n;
  auto at = [&](int op, bool ok) {
    if (!ok) c.r.errorOperand = op;
    return ok;
  };
  if (!at(1, c.unify(q[1], k[1], h, "the heads of q and k (dim 1)")) ||
      !at(2, c.unify(h, v[1], h2, "the heads of q and v (dim 1)")) ||
      !at(1, c.unify(q[2], k[2], d, "the head size of q and k (dim 2)")) ||
      !at(2, c.unify(k[0], v[0], n, "the keys of k and v (dim 0)")))
    return false;
  if (c.ops.size() == 4) {
    // The additive mask broadcasts to the scores, H x m x n; it never enlarges them.
    if (!c.sameDType(0, 3)) return false;
    const auto &mk = c.ops[3].dims;
    std::vector<int64_t> scores = {h2, q[0], n};
    if (mk.size() > 3)
      return c.fail("mask must have rank <= 3 (it broadcasts to heads x queries x keys), got " +
                        formatSig(c.ops[3]),
                    3);
    for (size_t i = 0; i < mk.size(); ++i) {
      int64_t a = mk[i], t = scores[3 - mk.size() + i];
      if (a == kDynamic || (t == kDynamic && a != 1))
        c.defer("mask dimension " + std::to_string(i) + " must be 1 or " + dimStr(t));
      else if (a != 1 && a != t)
        return c.fail("mask " + formatSig(c.ops[3]) + " does not broadcast to the scores " +
                          formatDims(scores) + ": dimension " + std::to_string(i) + " is " +
                          std::to_string(a),
                      3);
    }
  }
  c.result(c.ops[0].dtype, {q[0], h2, v[2]});
  return true;
}

bool relReshape(Ctx &c) {
  const auto &target = c.intsAttr("shape");
  int infer = -1;
  int64_t knownProduct = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (infer >= 0) return c.failAttr("shape", "shape may contain at most one -1");
      infer = static_cast<int>(i);
    } else if (target[i] < 0) {
      return c.failAttr("shape", "shape entry " + std::to_string(target[i]) + " is negative");
    } else if (mulOverflows(knownProduct, target[i])) {
      return c.failAttr("shape", "shape " + formatDims(target) +
                                     " has more elements than fit in 64 bits");
    }
  }
  bool inDynamic = false;
  int64_t inProduct = 1;
  for (int64_t d : c.ops[0].dims) {
    if (d == kDynamic) inDynamic = true;
    else if (mulOverflows(inProduct, d))
      return c.fail("input " + formatDims(c.ops[0].dims) +
                        " has more elements than fit in 64 bits",
                    0);
  }
  std::vector<int64_t> out = target;
  if (infer >= 0) {
    if (inDynamic) {
      out[static_cast<size_t>(infer)] = kDynamic;
      c.defer("element count of the input must be a multiple of " +
              std::to_string(knownProduct));
    } else {
      if (knownProduct == 0 || inProduct % knownProduct != 0)
        return c.failAttr("shape", "cannot reshape " + formatDims(c.ops[0].dims) + " (" +
                      std::to_string(inProduct) + " elements) to " + formatDims(target));
      out[static_cast<size_t>(infer)] = inProduct / knownProduct;
    }
  } else if (inDynamic) {
    c.defer("element count of the input must be " + std::to_string(knownProduct));
  } else if (inProduct != knownProduct) {
    return c.failAttr("shape", "cannot reshape " + formatDims(c.ops[0].dims) + " (" +
                  std::to_string(inProduct) + " elements) to " + formatDims(target) + " (" +
                  std::to_string(knownProduct) + " elements)");
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

/// Shared by dyn_reshape / zeros / full: a run-time shape operand `i`.
bool shapeOperand(Ctx &c, size_t i, std::vector<int64_t> &out) {
  const TensorSig &s = c.ops[i];
  if (s.dims.size() != 1 || !isInteger(s.dtype))
    return c.fail("shape (operand " + std::to_string(i) +
                      ") must be a 1-D integer tensor, got " + formatSig(s),
                  static_cast<int>(i));
  if (s.dims[0] > kMaxShapeLength)
    return c.fail("shape (operand " + std::to_string(i) + ") has " + std::to_string(s.dims[0]) +
                      " entries; at most " + std::to_string(kMaxShapeLength) +
                      " (the rank limit) are supported",
                  static_cast<int>(i));
  if (c.shapeValue(i, out)) {
    for (int64_t d : out)
      if (d < 0 && c.info.code != OpCode::DynReshape)
        return c.fail("shape entry " + std::to_string(d) + " is negative",
                      static_cast<int>(i));
    return true;
  }
  if (s.dims[0] == kDynamic)
    return c.fail("shape (operand " + std::to_string(i) +
                      ") must have a static length to fix the result rank",
                  static_cast<int>(i));
  out.assign(static_cast<size_t>(s.dims[0]), kDynamic);
  return true;
}

bool relDynReshape(Ctx &c) {
  std::vector<int64_t> target;
  if (!shapeOperand(c, 1, target)) return false;
  if (c.value(1)) {
    // Known target: the static reshape relation decides.
    std::vector<Attr> attrs = {Attr::getInts(target)};
    ShapeFnResult sub = inferShapes(OpCode::Reshape, {c.ops[0]}, attrs);
    // The target came from operand 1's value: blame it (its definition holds
    // the numbers).
    if (!sub.ok()) return c.fail(sub.error, 1);
    c.r.deferred = sub.deferred;
    c.r.results = sub.results;
    return true;
  }
  c.defer("element count of the input must match the run-time shape");
  c.result(c.ops[0].dtype, target);
  return true;
}

bool relTranspose(Ctx &c) {
  int64_t r = c.rank(0);
  std::vector<int64_t> perm = c.intsAttr("perm");
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != r)
    return c.failAttr("perm", "perm " + formatInts(perm) + " has " + std::to_string(perm.size()) +
                                  " entries but the input has rank " + std::to_string(r));
  std::vector<bool> seen(static_cast<size_t>(r), false);
  std::vector<int64_t> out;
  for (int64_t p : perm) {
    int64_t ax;
    if (!c.axis(p, r, ax, "perm", "perm entry")) return false;
    if (seen[static_cast<size_t>(ax)])
      return c.failAttr("perm", "perm " + formatInts(perm) + " is not a permutation: axis " +
                                    std::to_string(ax) + " appears twice");
    seen[static_cast<size_t>(ax)] = true;
    out.push_back(c.ops[0].dims[static_cast<size_t>(ax)]);
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relConcat(Ctx &c) {
  int64_t r = c.rank(0);
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), r, ax, "axis")) return false;
  std::vector<int64_t> out = c.ops[0].dims;
  for (size_t i = 1; i < c.ops.size(); ++i) {
    if (!c.sameDType(0, i)) return false;
    if (c.rank(i) != r)
      return c.fail("operand " + std::to_string(i) + " has rank " + std::to_string(c.rank(i)) +
                        " but operand 0 has rank " + std::to_string(r),
                    static_cast<int>(i));
    for (int64_t k = 0; k < r; ++k) {
      int64_t d = c.ops[i].dims[static_cast<size_t>(k)];
      int64_t &o = out[static_cast<size_t>(k)];
      if (k == ax) {
        if (o == kDynamic || d == kDynamic) o = kDynamic;
        else if (addOverflows(o, d))
          return c.fail("the concatenated dimension " + std::to_string(k) +
                            " does not fit in 64 bits",
                        static_cast<int>(i));
      } else if (!c.unify(d, o, o, "dimension " + std::to_string(k) + " of operand " +
                                       std::to_string(i) + " and operand 0")) {
        c.r.errorOperand = static_cast<int>(i);
        return false;
      }
    }
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relSplit(Ctx &c) {
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), c.rank(0), ax, "axis")) return false;
  int64_t n = c.intAttr("sections");
  if (n <= 0) return c.failAttr("sections", "sections must be positive, got " + std::to_string(n));
  // Each section is a result: refuse before making a billion of them.
  if (n > int64_t(limits::kMaxResults))
    return c.failAttr("sections", std::to_string(n) + " sections are more than the limit of " +
                                      std::to_string(limits::kMaxResults) + " results");
  std::vector<int64_t> part = c.ops[0].dims;
  int64_t d = part[static_cast<size_t>(ax)];
  if (d != kDynamic) {
    if (d % n != 0)
      return c.failAttr("sections", "dimension " + std::to_string(ax) + " (" + std::to_string(d) +
                    ") is not divisible into " + std::to_string(n) + " sections");
    part[static_cast<size_t>(ax)] = d / n;
  } else {
    c.defer("dimension " + std::to_string(ax) + " (?) must be divisible by " +
            std::to_string(n));
  }
  for (int64_t i = 0; i < n; ++i) c.result(c.ops[0].dtype, part);
  return true;
}

bool relSlice(Ctx &c) {
  const auto &axes = c.intsAttr("axes"), &starts = c.intsAttr("starts"),
             &ends = c.intsAttr("ends");
  if (axes.size() != starts.size() || axes.size() != ends.size())
    return c.failAttr(axes.size() != starts.size() ? "starts" : "ends",
                      "axes, starts and ends must have the same length");
  std::vector<int64_t> out = c.ops[0].dims;
  std::vector<bool> seen(out.size(), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t ax;
    if (!c.axis(axes[i], c.rank(0), ax, "axes")) return false;
    if (seen[static_cast<size_t>(ax)])
      return c.failAttr("axes", "axis " + std::to_string(axes[i]) + " is listed twice");
    seen[static_cast<size_t>(ax)] = true;
    int64_t d = out[static_cast<size_t>(ax)];
    int64_t s = starts[i], e = ends[i];
    if (d == kDynamic) {
      // The extent depends on clamping against the run-time size.
      out[static_cast<size_t>(ax)] = kDynamic;
      continue;
    }
    auto clamp = [d](int64_t v) {
      if (v < 0) v += d;
      return std::min(std::max(v, int64_t(0)), d);
    };
    int64_t cs = clamp(s), ce = clamp(e);
    out[static_cast<size_t>(ax)] = std::max(ce - cs, int64_t(0));
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relDynamicSlice(Ctx &c) {
  if (!c.requireScalar(1, "start") ) return false;
  if (!isInteger(c.ops[1].dtype))
    return c.fail("start (operand 1) must be an integer, got " + formatSig(c.ops[1]), 1);
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), c.rank(0), ax, "axis")) return false;
  int64_t size = c.intAttr("size");
  int64_t d = c.ops[0].dims[static_cast<size_t>(ax)];
  if (size < 0) return c.failAttr("size", "size must be non-negative, got " + std::to_string(size));
  if (d != kDynamic && size > d)
    return c.failAttr("size", "size " + std::to_string(size) + " exceeds dimension " +
                  std::to_string(ax) + " (" + std::to_string(d) + ")");
  c.defer("start + size must lie within dimension " + std::to_string(ax));
  std::vector<int64_t> out = c.ops[0].dims;
  out[static_cast<size_t>(ax)] = size;
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relDynamicUpdateSlice(Ctx &c) {
  if (!c.sameDType(0, 1)) return false;
  if (!c.requireScalar(2, "start")) return false;
  if (!isInteger(c.ops[2].dtype))
    return c.fail("start (operand 2) must be an integer, got " + formatSig(c.ops[2]), 2);
  int64_t r = c.rank(0);
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), r, ax, "axis")) return false;
  if (c.rank(1) != r)
    return c.fail("update (operand 1) has rank " + std::to_string(c.rank(1)) +
                      " but operand 0 has rank " + std::to_string(r),
                  1);
  std::vector<int64_t> out = c.ops[0].dims;
  for (int64_t k = 0; k < r; ++k) {
    int64_t u = c.ops[1].dims[static_cast<size_t>(k)];
    int64_t &o = out[static_cast<size_t>(k)];
    if (k == ax) {
      if (o != kDynamic && u != kDynamic && u > o)
        return c.fail("update (operand 1) has " + std::to_string(u) + " entries along axis " +
                          std::to_string(ax) + ", more than operand 0's " + std::to_string(o),
                      1);
    } else if (!c.unify(u, o, o, "dimension " + std::to_string(k) +
                                     " of the update (operand 1) and operand 0")) {
      c.r.errorOperand = 1;
      return false;
    }
  }
  c.defer("start + the update's size must lie within dimension " + std::to_string(ax));
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relTake(Ctx &c) {
  if (!isInteger(c.ops[1].dtype))
    return c.fail("indices (operand 1) must have an integer element type, got " +
                      formatSig(c.ops[1]),
                  1);
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), c.rank(0), ax, "axis")) return false;
  const auto &d = c.ops[0].dims;
  std::vector<int64_t> out(d.begin(), d.begin() + ax);
  out.insert(out.end(), c.ops[1].dims.begin(), c.ops[1].dims.end());
  out.insert(out.end(), d.begin() + ax + 1, d.end());
  c.defer("indices must lie within dimension " + std::to_string(ax));
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relExpandDims(Ctx &c) {
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), c.rank(0) + 1, ax, "axis")) return false;
  std::vector<int64_t> out = c.ops[0].dims;
  out.insert(out.begin() + ax, 1);
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relSqueeze(Ctx &c) {
  const auto &d = c.ops[0].dims;
  std::vector<bool> drop(d.size(), false);
  const auto &axes = c.intsAttr("axes");
  if (axes.empty()) {
    for (size_t i = 0; i < d.size(); ++i) {
      if (d[i] == kDynamic)
        return c.fail("squeeze without axes needs a static shape, got " + formatSig(c.ops[0]) +
                      "; list the axes to drop");
      drop[i] = d[i] == 1;
    }
  }
  for (int64_t a : axes) {
    int64_t ax;
    if (!c.axis(a, c.rank(0), ax, "axes")) return false;
    if (drop[static_cast<size_t>(ax)])
      return c.fail("axis " + std::to_string(a) + " is listed twice");
    int64_t v = d[static_cast<size_t>(ax)];
    if (v != 1 && v != kDynamic)
      return c.failAttr("axes", "cannot squeeze dimension " + std::to_string(ax) + " of size " +
                    std::to_string(v));
    if (v == kDynamic) c.defer("dimension " + std::to_string(ax) + " (?) must be 1");
    drop[static_cast<size_t>(ax)] = true;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < d.size(); ++i)
    if (!drop[i]) out.push_back(d[i]);
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relBroadcastTo(Ctx &c) {
  const auto &target = c.intsAttr("shape");
  const auto &d = c.ops[0].dims;
  for (int64_t t : target)
    if (t < 0) return c.failAttr("shape", "shape entry " + std::to_string(t) + " is negative");
  if (d.size() > target.size())
    return c.failAttr("shape", "cannot broadcast " + formatDims(d) + " to the lower rank " +
                  formatDims(target));
  size_t off = target.size() - d.size();
  for (size_t k = 0; k < d.size(); ++k) {
    int64_t t = target[off + k];
    if (d[k] == kDynamic) {
      c.defer("dimension " + std::to_string(k) + " (?) must be 1 or " + std::to_string(t));
    } else if (d[k] != 1 && d[k] != t) {
      return c.failAttr("shape", "cannot broadcast " + formatDims(d) + " to " + formatDims(target) +
                    ": dimension " + std::to_string(k) + " is " + std::to_string(d[k]));
    }
  }
  c.result(c.ops[0].dtype, target);
  return true;
}

bool relArange(Ctx &c) {
  for (size_t i = 0; i < 3; ++i) {
    if (!c.requireScalar(i, i == 0 ? "start" : i == 1 ? "stop" : "step")) return false;
    if (i && !c.sameDType(0, i)) return false;
  }
  const DenseValue *s = c.value(0), *e = c.value(1), *st = c.value(2);
  int64_t n = kDynamic;
  if (s && e && st) {
    double step = st->getDouble(0);
    if (step == 0) return c.fail("step must not be zero", 2);
    double len = std::ceil((e->getDouble(0) - s->getDouble(0)) / step);
    if (len >= 0x1p62)
      return c.fail("arange would produce " + std::to_string(len) + " elements");
    n = len > 0 ? static_cast<int64_t>(len) : 0;
  }
  c.result(c.ops[0].dtype, {n});
  return true;
}

bool relUnique(Ctx &c) {
  if (!c.requireRank(0, 1, "input")) return false;
  c.r.upperBound = true;
  c.result(c.ops[0].dtype, {c.ops[0].dims[0]});
  return true;
}

bool relNonzero(Ctx &c) {
  int64_t bound = 1;
  for (int64_t d : c.ops[0].dims) {
    if (bound == kDynamic || d == kDynamic) bound = kDynamic;
    else if (mulOverflows(bound, d))
      return c.fail("input " + formatDims(c.ops[0].dims) +
                        " has more elements than fit in 64 bits",
                    0);
  }
  c.r.upperBound = true;
  c.result(DType::I64, {bound, c.rank(0)});
  return true;
}

bool relZerosFull(Ctx &c, bool full) {
  std::vector<int64_t> shape;
  if (!shapeOperand(c, 0, shape)) return false;
  DType t = c.attrs.empty() ? DType::F32 : c.attr("dtype").getDType();
  if (full) {
    if (!c.requireScalar(1, "fill value")) return false;
    t = c.ops[1].dtype;
  }
  c.result(t, shape);
  return true;
}

/// cumsum %x, %axis: the axis is a scalar integer value (known at compile
/// time when it is a constant; checked by the kernel otherwise).
bool relCumSum(Ctx &c) {
  if (!dtypeAllowed(c.info.dtypes, c.ops[0].dtype))
    return c.fail("operand 0 must have " + std::string(dtypeRuleDescription(c.info.dtypes)) + ", got " +
                      formatSig(c.ops[0]),
                  0);
  if (!c.requireScalar(1, "axis")) return false;
  if (!isInteger(c.ops[1].dtype))
    return c.fail("axis (operand 1) must be an integer, got " + formatSig(c.ops[1]), 1);
  int64_t r = c.rank(0);
  if (const DenseValue *v = c.value(1)) {
    int64_t a = v->getInt(0);
    if (a < -r || a >= r)
      return c.fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r), 1);
  } else {
    if (r == 0) return c.fail("input must have rank >= 1, got " + formatSig(c.ops[0]), 0);
    c.defer("axis must lie in [-" + std::to_string(r) + ", " + std::to_string(r) + ")");
  }
  c.result(c.ops[0].dtype, c.ops[0].dims);
  return true;
}

/// A 1-D integer operand `i` of `n` entries (per axis counts: tile's
/// repeats, pad's pads); `?` entries defer the length check.
bool perAxisOperand(Ctx &c, size_t i, int64_t n, std::string_view what) {
  const TensorSig &s = c.ops[i];
  if (s.dims.size() != 1 || !isInteger(s.dtype))
    return c.fail(std::string(what) + " (operand " + std::to_string(i) + ") must be a 1-D integer tensor, got " +
                      formatSig(s),
                  static_cast<int>(i));
  if (s.dims[0] == kDynamic) {
    c.defer(std::string(what) + " must have " + std::to_string(n) + " entries");
  } else if (s.dims[0] != n) {
    return c.fail(std::string(what) + " (operand " + std::to_string(i) + ") must have " + std::to_string(n) +
                      " entries for an input of rank " + std::to_string(c.rank(0)) + ", got " + formatSig(s),
                  static_cast<int>(i));
  }
  return true;
}

bool relTile(Ctx &c) {
  int64_t r = c.rank(0);
  if (!perAxisOperand(c, 1, r, "repeats")) return false;
  std::vector<int64_t> out(static_cast<size_t>(r), kDynamic), reps;
  if (c.shapeValue(1, reps)) {
    for (int64_t k = 0; k < r; ++k) {
      int64_t d = c.ops[0].dims[static_cast<size_t>(k)], n = reps[static_cast<size_t>(k)];
      if (n < 0) return c.fail("repeats entry " + std::to_string(n) + " is negative", 1);
      int64_t o = n;
      if (n == 0) o = 0;
      else if (d == kDynamic) o = kDynamic;
      else if (mulOverflows(o, d)) return c.fail("tile would have more elements than fit in 64 bits", 1);
      out[static_cast<size_t>(k)] = o;
    }
  } else {
    c.defer("repeats must be non-negative");
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relPad(Ctx &c) {
  int64_t r = c.rank(0);
  const std::string &mode = c.attr("mode").getStr();
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return c.failAttr("mode", "mode must be constant, reflect, edge or wrap, got '" + mode + "'");
  if (!perAxisOperand(c, 1, 2 * r, "pads")) return false;
  if (c.ops.size() == 3) {
    if (mode != "constant")
      return c.fail("a padding value (operand 2) needs mode constant, not " + mode, 2);
    if (!c.requireScalar(2, "padding value") || !c.sameDType(0, 2)) return false;
  }
  std::vector<int64_t> out(static_cast<size_t>(r), kDynamic), pads;
  if (c.shapeValue(1, pads)) {
    for (int64_t k = 0; k < r; ++k) {
      int64_t d = c.ops[0].dims[static_cast<size_t>(k)];
      int64_t b = pads[static_cast<size_t>(k)], e = pads[static_cast<size_t>(k + r)];
      // |pads| up to 2^62: the sums below cannot overflow.
      if (b < -(int64_t(1) << 62) || b > (int64_t(1) << 62) || e < -(int64_t(1) << 62) || e > (int64_t(1) << 62))
        return c.fail("pads entries must lie within +-2^62", 1);
      if (d == kDynamic) {
        c.defer("dimension " + std::to_string(k) + " plus its pads must not be negative");
        if (mode != "constant" && (b > 0 || e > 0))
          c.defer("dimension " + std::to_string(k) + " must not be empty to pad it in mode " + mode);
        continue;
      }
      int64_t o = d + b + e;
      if (o < 0)
        return c.fail("pads " + std::to_string(b) + " and " + std::to_string(e) + " remove more than dimension " +
                          std::to_string(k) + " (" + std::to_string(d) + ")",
                      1);
      if (mode != "constant" && d == 0 && (b > 0 || e > 0))
        return c.fail("cannot pad the empty dimension " + std::to_string(k) + " in mode " + mode, 1);
      out[static_cast<size_t>(k)] = o;
    }
  } else {
    c.defer("every dimension plus its pads must not be negative");
  }
  c.result(c.ops[0].dtype, out);
  return true;
}

/// The index tuples of gather_nd / scatter_nd: operand `i` integer, rank >= 1,
/// a static last dimension m (it fixes the result's rank), m <= limit.
bool indexTuples(Ctx &c, size_t i, int64_t limit, int64_t &m) {
  if (!isInteger(c.ops[i].dtype) || c.rank(i) < 1)
    return c.fail("indices (operand " + std::to_string(i) + ") must be an integer tensor of rank >= 1, got " +
                      formatSig(c.ops[i]),
                  static_cast<int>(i));
  m = c.ops[i].dims.back();
  if (m == kDynamic)
    return c.fail("the last dimension of indices (operand " + std::to_string(i) +
                      ") must be static: it is the length of each index tuple",
                  static_cast<int>(i));
  if (m < 1 || m > limit)
    return c.fail("index tuples of " + std::to_string(m) + " entries do not fit " + std::to_string(limit) +
                      " indexable axes of " + formatSig(c.ops[0]),
                  static_cast<int>(i));
  c.defer("indices must lie within the dimensions they index");
  return true;
}

/// `reduction` of the scatters: none for any element type, the others
/// numeric only.
bool scatterReduction(Ctx &c) {
  const std::string &red = c.attr("reduction").getStr();
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    return c.failAttr("reduction", "reduction must be none, add, mul, max or min, got '" + red + "'");
  if (red != "none" && !dtypeAllowed(DTypeRule::Numeric, c.ops[0].dtype))
    return c.failAttr("reduction", "reduction " + red + " needs a numeric element type, got " + formatSig(c.ops[0]));
  return c.sameDType(0, 2);
}

bool relGatherND(Ctx &c) {
  int64_t r = c.rank(0), q = c.rank(1), b = c.intAttr("batch_dims");
  if (r < 1) return c.fail("data must have rank >= 1, got " + formatSig(c.ops[0]), 0);
  if (b < 0 || b >= std::min(r, std::max<int64_t>(q, 1)))
    return c.failAttr("batch_dims", "batch_dims " + std::to_string(b) + " must lie in [0, " +
                                        std::to_string(std::min(r, q)) + ") for data of rank " + std::to_string(r) +
                                        " and indices of rank " + std::to_string(q));
  int64_t m;
  if (!indexTuples(c, 1, r - b, m)) return false;
  std::vector<int64_t> out;
  for (int64_t k = 0; k < q - 1; ++k) {
    int64_t d = c.ops[1].dims[static_cast<size_t>(k)];
    if (k < b && !c.unify(c.ops[0].dims[static_cast<size_t>(k)], d, d,
                          "batch dimension " + std::to_string(k) + " of data and indices")) {
      c.r.errorOperand = 1;
      return false;
    }
    out.push_back(d);
  }
  for (int64_t k = b + m; k < r; ++k) out.push_back(c.ops[0].dims[static_cast<size_t>(k)]);
  c.result(c.ops[0].dtype, out);
  return true;
}

bool relScatterElements(Ctx &c) {
  int64_t r = c.rank(0);
  if (!isInteger(c.ops[1].dtype))
    return c.fail("indices (operand 1) must have an integer element type, got " + formatSig(c.ops[1]), 1);
  if (!scatterReduction(c)) return false;
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), r, ax, "axis")) return false;
  for (size_t i = 1; i < 3; ++i)
    if (c.rank(i) != r)
      return c.fail(std::string(i == 1 ? "indices" : "updates") + " (operand " + std::to_string(i) +
                        ") must have the rank of data (" + std::to_string(r) + "), got " + formatSig(c.ops[i]),
                    static_cast<int>(i));
  for (int64_t k = 0; k < r; ++k) {
    int64_t d;
    if (!c.unify(c.ops[1].dims[static_cast<size_t>(k)], c.ops[2].dims[static_cast<size_t>(k)], d,
                 "dimension " + std::to_string(k) + " of indices and updates")) {
      c.r.errorOperand = 2;
      return false;
    }
    int64_t n = c.ops[0].dims[static_cast<size_t>(k)];
    if (k == ax) continue;
    if (d != kDynamic && n != kDynamic && d > n)
      return c.fail("indices (operand 1) have " + std::to_string(d) + " entries along axis " + std::to_string(k) +
                        ", more than data's " + std::to_string(n),
                    1);
    if (d == kDynamic || n == kDynamic) c.defer("indices must not be longer than data along axis " + std::to_string(k));
  }
  c.defer("indices must lie within dimension " + std::to_string(ax) + " of data");
  c.result(c.ops[0].dtype, c.ops[0].dims);
  return true;
}

bool relScatterND(Ctx &c) {
  int64_t r = c.rank(0);
  if (r < 1) return c.fail("data must have rank >= 1, got " + formatSig(c.ops[0]), 0);
  if (!scatterReduction(c)) return false;
  int64_t m;
  if (!indexTuples(c, 1, r, m)) return false;
  // updates: indices' shape without its last axis, then data's after m.
  std::vector<int64_t> want(c.ops[1].dims.begin(), c.ops[1].dims.end() - 1);
  for (int64_t k = m; k < r; ++k) want.push_back(c.ops[0].dims[static_cast<size_t>(k)]);
  if (c.rank(2) != static_cast<int64_t>(want.size()))
    return c.fail("updates (operand 2) must have shape " + formatDims(want) + " (indices' without the last axis, "
                      "then data's past the indexed axes), got " + formatSig(c.ops[2]),
                  2);
  for (size_t k = 0; k < want.size(); ++k) {
    int64_t d;
    if (!c.unify(c.ops[2].dims[k], want[k], d, "dimension " + std::to_string(k) + " of updates")) {
      c.r.errorOperand = 2;
      return false;
    }
  }
  c.result(c.ops[0].dtype, c.ops[0].dims);
  return true;
}

bool relOneHot(Ctx &c) {
  int64_t q = c.rank(0);
  if (!isInteger(c.ops[0].dtype))
    return c.fail("indices (operand 0) must have an integer element type, got " + formatSig(c.ops[0]), 0);
  if (!c.requireScalar(1, "depth")) return false;
  if (!isInteger(c.ops[1].dtype)) return c.fail("depth (operand 1) must be an integer, got " + formatSig(c.ops[1]), 1);
  if (!c.requireRank(2, 1, "values")) return false;
  int64_t two;
  if (!c.unify(c.ops[2].dims[0], 2, two, "the number of values (off, on) and 2")) {
    c.r.errorOperand = 2;
    return false;
  }
  int64_t ax;
  if (!c.axis(c.intAttr("axis"), q + 1, ax, "axis")) return false;
  int64_t depth = kDynamic;
  if (const DenseValue *v = c.value(1)) {
    depth = v->getInt(0);
    if (depth < 0) return c.fail("depth " + std::to_string(depth) + " is negative", 1);
  } else {
    c.defer("depth must not be negative");
  }
  std::vector<int64_t> out = c.ops[0].dims;
  out.insert(out.begin() + ax, depth);
  c.result(c.ops[2].dtype, out);
  return true;
}

bool apply(Ctx &c) {
  const OpInfo &info = c.info;
  int n = static_cast<int>(c.ops.size());
  if (n < info.minOperands || (info.maxOperands >= 0 && n > info.maxOperands))
    return c.fail("expects " +
                  (info.minOperands == info.maxOperands
                       ? std::to_string(info.minOperands)
                       : info.maxOperands < 0 ? "at least " + std::to_string(info.minOperands)
                                              : std::to_string(info.minOperands) + " to " +
                                                    std::to_string(info.maxOperands)) +
                  " operands, got " + std::to_string(n));
  // Element type rule on the data operands.
  switch (info.relation) {
  case Relation::Unary: case Relation::Broadcast: case Relation::Compare:
  case Relation::MatMul: case Relation::BatchMatMul: case Relation::Reduce:
  case Relation::ArgReduce: case Relation::LayerNorm: case Relation::Arange:
  case Relation::Conv: case Relation::Pool: case Relation::Attention:
    for (size_t i = 0; i < (info.relation == Relation::Unary ? 1 : c.ops.size()); ++i)
      if (!dtypeAllowed(info.dtypes, c.ops[i].dtype))
        return c.fail("operand " + std::to_string(i) + " must have " +
                          std::string(dtypeRuleDescription(info.dtypes)) + ", got " +
                          formatSig(c.ops[i]),
                      static_cast<int>(i));
    break;
  default: break;
  }
  switch (info.relation) {
  case Relation::Unary: return relUnary(c);
  case Relation::Broadcast: return relBroadcast(c, false);
  case Relation::Compare: return relBroadcast(c, true);
  case Relation::Select: return relSelect(c);
  case Relation::Cast: c.result(c.attr("dtype").getDType(), c.ops[0].dims); return true;
  case Relation::MatMul: return relMatMul(c, false);
  case Relation::BatchMatMul: return relMatMul(c, true);
  case Relation::Reduce: return relReduce(c, false);
  case Relation::ArgReduce: return relReduce(c, true);
  case Relation::LayerNorm: return relLayerNorm(c);
  case Relation::Conv: return relConv(c);
  case Relation::Pool: return relPool(c);
  case Relation::CumSum: return relCumSum(c);
  case Relation::Tile: return relTile(c);
  case Relation::Pad: return relPad(c);
  case Relation::GatherND: return relGatherND(c);
  case Relation::ScatterElements: return relScatterElements(c);
  case Relation::ScatterND: return relScatterND(c);
  case Relation::OneHot: return relOneHot(c);
  case Relation::Attention: return relAttention(c);
  case Relation::Reshape: return relReshape(c);
  case Relation::DynReshape: return relDynReshape(c);
  case Relation::Transpose: return relTranspose(c);
  case Relation::Concat: return relConcat(c);
  case Relation::Split: return relSplit(c);
  case Relation::Slice: return relSlice(c);
  case Relation::DynamicSlice: return relDynamicSlice(c);
  case Relation::DynamicUpdateSlice: return relDynamicUpdateSlice(c);
  case Relation::Take: return relTake(c);
  case Relation::ExpandDims: return relExpandDims(c);
  case Relation::Squeeze: return relSqueeze(c);
  case Relation::BroadcastTo: return relBroadcastTo(c);
  case Relation::Constant: {
    const DenseValue &v = c.attr("value").getDense();
    c.result(v.dtype, v.shape);
    return true;
  }
  case Relation::Zeros: return relZerosFull(c, false);
  case Relation::Full: return relZerosFull(c, true);
  case Relation::Arange: return relArange(c);
  case Relation::Unique: return relUnique(c);
  case Relation::Nonzero: return relNonzero(c);
  case Relation::ShapeOf: c.result(DType::I64, {c.rank(0)}); return true;
  case Relation::Dim: {
    int64_t ax;
    if (!c.axis(c.intAttr("axis"), c.rank(0), ax, "axis")) return false;
    c.result(DType::I64, {});
    return true;
  }
  case Relation::StorageSize: {
    if (c.rank(0) != 1 || !isInteger(c.ops[0].dtype))
      return c.fail("shape must be a 1-D integer tensor, got " + formatSig(c.ops[0]), 0);
    int64_t align = c.intAttr("alignment");
    if (align <= 0 || (align & (align - 1)))
      return c.fail("alignment must be a positive power of two, got " + std::to_string(align));
    c.result(DType::I64, {});
    return true;
  }
  case Relation::Structural: break;
  }
  assert(false && "structural ops are typed by the verifier");
  return c.fail("op has no shape function");
}

} // namespace

ShapeFnResult inferShapes(OpCode code, const std::vector<TensorSig> &operands,
                          std::span<const Attr> attrs,
                          const std::vector<const DenseValue *> &values) {
  Ctx c(code, operands, attrs, values);
  if (!apply(c)) {
    c.r.results.clear();
    return std::move(c.r);
  }
  // Whatever the relation, a result past the rank or size limits is refused
  // here, once, at compile time and at run time alike (ir/Limits.h).
  for (const TensorSig &res : c.r.results) {
    if (res.dims.size() > limits::kMaxRank) {
      c.fail("result has rank " + std::to_string(res.dims.size()) + ", more than the limit of " +
             std::to_string(limits::kMaxRank));
      break;
    }
    int64_t n = 0, bytes = 0;
    if (!limits::checkedStaticElements(res.dims, n) ||
        !limits::checkedMul(n, static_cast<int64_t>(dtypeSize(res.dtype)), bytes) ||
        bytes > limits::kMaxTensorBytes) {
      c.fail("result " + formatSig(res) + " holds more than " +
             std::to_string(limits::kMaxTensorBytes) + " bytes (2^48, the limit)");
      break;
    }
  }
  if (!c.r.error.empty()) c.r.results.clear();
  return std::move(c.r);
}

int shapeIdentityOperand(OpCode code, const std::vector<TensorSig> &operands,
                         std::span<const Attr> attrs) {
  const OpInfo &info = opInfo(code);
  if (info.shapeMode != ShapeMode::DataIndependent || info.numResults != 1) return -1;
  switch (info.relation) {
  case Relation::Unary: case Relation::Cast: case Relation::LayerNorm: case Relation::Broadcast:
  case Relation::Compare: case Relation::Select: case Relation::MatMul: break;
  default: return -1;
  }
  // The relation itself decides that nothing is left for run time: a
  // deferred check (`?` against `?`, `?` against a size other than 1) is
  // the shape function's to make, and it must stay.
  ShapeFnResult r = inferShapes(code, operands, attrs);
  if (!r.ok() || !r.deferred.empty() || r.results.size() != 1) return -1;
  const std::vector<int64_t> &out = r.results[0].dims;
  auto candidate = [&](size_t j) -> bool {
    const auto &dj = operands[j].dims;
    if (dj != out) return false;
    for (size_t i = 0; i < operands.size(); ++i) {
      if (i == j) continue;
      const auto &di = operands[i].dims;
      if (di.size() > dj.size()) return false;
      size_t off = dj.size() - di.size();
      for (size_t k = 0; k < di.size(); ++k)
        if (di[k] != 1 && (di[k] == kDynamic || di[k] != dj[off + k])) return false;
    }
    return true;
  };
  switch (info.relation) {
  case Relation::Unary: case Relation::Cast:
    return operands.size() == 1 && operands[0].dims == out ? 0 : -1;
  case Relation::LayerNorm: // gamma and beta match the last dim statically
    return operands[0].dims == out ? 0 : -1;
  case Relation::Broadcast: case Relation::Compare: case Relation::Select:
    for (size_t j = 0; j < operands.size(); ++j)
      if (candidate(j)) return static_cast<int>(j);
    return -1;
  case Relation::MatMul: {
    // out = [m, n]: m is lhs dim 0 unless transposed; n must equal the lhs
    // width, both static (then out is the lhs's shape whatever m is).
    if (operands.size() != 2) return -1;
    const auto &a = operands[0].dims;
    int ta = info.attrIndex("transpose_a");
    if (a.size() != 2 || ta < 0 || static_cast<size_t>(ta) >= attrs.size() ||
        attrs[static_cast<size_t>(ta)].getBool())
      return -1;
    return a[1] != kDynamic && out[1] == a[1] && out[0] == a[0] ? 0 : -1;
  }
  default: return -1;
  }
}

} // namespace nimble
