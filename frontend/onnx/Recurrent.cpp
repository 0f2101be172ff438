//===- Recurrent.cpp - ONNX LSTM, GRU and RNN as a loop of blocks ----------===//
//
// ONNX's recurrent layers have no Nimble op: each direction becomes a
// counted loop over the sequence in the form the hand-written models use
// (models/lstm), built from matmul, split and element-wise ops:
//
//   XW = reshape(X, [S*B, I]) · W_dᵀ + bias     before the loop: one GEMM for
//                                              all tokens (cuDNN's strategy,
//                                              what batch-input-projection
//                                              would make of a per-token GEMV)
//   br ^rnn(0, h0, c0, Y0)
//   ^rnn(t, h, c, Y):  cond_br (less t, S), ^rnn_body, ^rnn_exit(h, c, Y)
//   ^rnn_body:         x_t = XW[idx] with idx = t (forward) or S-1-t
//                      (reverse); the cell's equations (ONNX operator
//                      docs, LSTM/GRU/RNN); Y' = dynamic_update_slice(Y,
//                      h', idx) when the node's Y is used
//                      br ^rnn(t + 1, h', c', Y')
//
// `bidirectional` is the forward loop, then the reverse one; Y concatenates
// the directions on axis 1 and Y_h / Y_c on axis 0. layout = 1 transposes X,
// initial_h and initial_c in and Y, Y_h, Y_c out. Gate orders are ONNX's
// (LSTM i, o, f, c; GRU z, r, h), biases Wb + Rb are folded into XW except
// GRU's Rb, which its equations apply inside the recurrence. When W, R, B,
// P or the initial states are initializers (as exporters write them), each
// direction's part is cut at import into a module constant of its own, and
// Wb + Rb is summed there (GraphImporter::derivedInitializer): the products
// then take constant weights, which the kernels pack once, as in the
// hand-written models. GRU: with linear_before_reset (torch's export) a step
// is one product h·R_dᵀ over the three gates, split after it; without,
// R_d's z/r rows and its h rows are cut apart at import (h's product reads
// r ⊙ h), as are Wb and Rb.
//
// Supported: activations Sigmoid, Tanh, Relu (per direction, ONNX's
// defaults otherwise), clip, peepholes (LSTM P), initial states, GRU's
// linear_before_reset. Refused with a message: input_forget = 1, other
// activations, a run-time sequence_lens with direction reverse or
// bidirectional (forward ones are masked per step).
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Converters.h"
#include "frontend/onnx/Graph.h"

#include <algorithm>
#include <cstring>

namespace nimble::onnx_import {

using namespace ir;
using convert::Out;

namespace {

enum class Cell { LSTM, GRU, RNN };

/// An activation by ONNX name, after the optional clip.
Value *activate(Conv &c, const std::string &name, Value *x, std::optional<double> clip) {
  if (!x) return nullptr;
  if (clip) {
    DType t = x->type().dtype();
    x = c.op(OpCode::Minimum, {c.op(OpCode::Maximum, {x, c.scalar(t, -*clip)}), c.scalar(t, *clip)});
    if (!x) return nullptr;
  }
  if (name == "Sigmoid") return c.op(OpCode::Sigmoid, {x});
  if (name == "Tanh") return c.op(OpCode::Tanh, {x});
  if (name == "Relu") return c.op(OpCode::Relu, {x});
  return nullptr;
}

/// The name new constants derived from `x` are given.
std::string nameFrom(Value *x, const std::string &suffix) {
  auto *g = dyn_cast<Global>(x);
  return (g ? g->name() : std::string("rnn")) + suffix;
}

/// Entry `d` of axis 0 of `x`, without that axis. Of an initializer (W, R,
/// B, P, initial states given as data) the entry is taken at import, so
/// that the loop's products see constant weights, as in the hand-written
/// models: a slice computed at run time copied all of W and R at every
/// inference and kept the kernels from packing them (the imported 1-layer
/// LSTM at 8 tokens: 2.39 against the hand-written model's 1.44 ms).
/// Rows [lo, hi) of axis 0 of the known value `k` (0 <= lo < hi <= its
/// extent), axis 0 kept.
DenseValue rowsOfKnown(const DenseValue &k, int64_t lo, int64_t hi) {
  DenseValue v;
  v.dtype = k.dtype;
  v.shape = k.shape;
  v.shape[0] = hi - lo;
  v.splat = k.splat;
  if (k.splat) {
    v.bytes = k.bytes;
  } else {
    const size_t per = k.bytes.size() / static_cast<size_t>(k.shape[0]);
    v.bytes.assign(k.bytes.begin() + static_cast<std::ptrdiff_t>(per * static_cast<size_t>(lo)),
                   k.bytes.begin() + static_cast<std::ptrdiff_t>(per * static_cast<size_t>(hi)));
  }
  return v;
}

Value *direction(Conv &c, Value *x, int64_t d) {
  if (!x) return nullptr;
  if (const DenseValue *k = c.known(x); k && !k->shape.empty() && d < k->shape[0]) {
    DenseValue v = rowsOfKnown(*k, d, d + 1);
    v.shape.erase(v.shape.begin());
    return c.graph().derivedInitializer(nameFrom(x, "_d" + std::to_string(d)), std::move(v));
  }
  Value *s = c.op(OpCode::Slice, {x}, {{"axes", convert::ints({0})}, {"starts", convert::ints({d})}, {"ends", convert::ints({d + 1})}});
  if (!s) return nullptr;
  std::vector<Conv::DimPart> parts;
  for (int64_t k = 1; k < x->type().rank(); ++k) parts.push_back(c.dimOf(s, k));
  Value *shape = c.shapeVector(parts);
  return shape ? c.op(OpCode::DynReshape, {s, shape}) : nullptr;
}

/// Rows [lo, hi) of axis 0 of `x` (GRU's gate blocks of R and Rb): cut at
/// import when `x` is a known initializer, like `direction`, so that no
/// weight is split at run time (the imported GRU split R's 3 MiB at every
/// inference before); else a run-time `slice`.
Value *rowsOf(Conv &c, Value *x, int64_t lo, int64_t hi, const std::string &suffix) {
  if (!x) return nullptr;
  if (const DenseValue *k = c.known(x); k && !k->shape.empty() && hi <= k->shape[0])
    return c.graph().derivedInitializer(nameFrom(x, suffix), rowsOfKnown(*k, lo, hi));
  return c.op(OpCode::Slice, {x}, {{"axes", convert::ints({0})}, {"starts", convert::ints({lo})}, {"ends", convert::ints({hi})}});
}

/// Wb + Rb of one direction (`halves` of `bd`): summed at import when `bd`
/// is an initializer of f32 or f64, in that precision, so the sum has the
/// bits the run-time `add` would give it (one IEEE addition per element);
/// else that `add`.
Value *biasSum(Conv &c, Value *bd, const std::vector<Value *> &halves) {
  const DenseValue *k = c.known(bd);
  if (!k || k->splat || k->shape.size() != 1 || k->shape[0] % 2 != 0 ||
      (k->dtype != DType::F32 && k->dtype != DType::F64))
    return c.op(OpCode::Add, {halves[0], halves[1]});
  const int64_t n = k->shape[0] / 2;
  DenseValue v;
  v.dtype = k->dtype;
  v.shape = {n};
  v.bytes.resize(k->bytes.size() / 2);
  auto sum = [&](auto zero) {
    using T = decltype(zero);
    for (int64_t i = 0; i < n; ++i) {
      T a, b;
      std::memcpy(&a, k->bytes.data() + sizeof(T) * static_cast<size_t>(i), sizeof(T));
      std::memcpy(&b, k->bytes.data() + sizeof(T) * static_cast<size_t>(n + i), sizeof(T));
      const T r = a + b;
      std::memcpy(v.bytes.data() + sizeof(T) * static_cast<size_t>(i), &r, sizeof(T));
    }
  };
  if (k->dtype == DType::F32)
    sum(0.0f);
  else
    sum(0.0);
  return c.graph().derivedInitializer(nameFrom(bd, "_bias"), std::move(v));
}

/// `x` reshaped to `parts`: a static `reshape` (its -1 entry for the one
/// run-time size) when at most one part is a run-time size, so that the
/// result keeps every static size; else `dyn_reshape`.
Value *reshapeTo(Conv &c, Value *x, const std::vector<Conv::DimPart> &parts) {
  if (!x) return nullptr;
  std::vector<int64_t> shape;
  for (const Conv::DimPart &p : parts) shape.push_back(p.v ? -1 : p.size);
  if (std::count(shape.begin(), shape.end(), -1) <= 1) return c.op(OpCode::Reshape, {x}, {{"shape", convert::ints(shape)}});
  Value *v = c.shapeVector(parts);
  return v ? c.op(OpCode::DynReshape, {x, v}) : nullptr;
}

Value *scalarOf(Conv &c, Conv::DimPart p) { return p.v ? p.v : c.scalar(DType::I64, static_cast<double>(p.size)); }

/// The block-argument type of a carried value: `expected` (the state's
/// static sizes, `?` for run-time ones) where the initial value agrees, `?`
/// where it does not say (a `zeros` of run-time shape is all `?`).
Type carriedType(Context &ctx, Type init, const std::vector<int64_t> &expected) {
  std::vector<int64_t> d = init.dims();
  if (d.size() != expected.size()) return init;
  for (size_t k = 0; k < d.size(); ++k)
    if (d[k] != expected[k]) d[k] = kDynamic;
  return ctx.tensor(init.dtype(), d);
}

} // namespace

bool GraphImporter::convertRecurrent(Conv &c, std::vector<Value *> &out) {
  const std::string &type = c.node().op_type();
  const Cell cell = type == "LSTM" ? Cell::LSTM : type == "GRU" ? Cell::GRU : Cell::RNN;
  const int64_t gates = cell == Cell::LSTM ? 4 : cell == Cell::GRU ? 3 : 1;
  Value *x = c.input(0), *w = c.input(1), *r = c.input(2), *b = c.input(3), *seqLens = c.input(4),
        *h0 = c.input(5), *c0 = cell == Cell::LSTM ? c.input(6) : nullptr, *peep = cell == Cell::LSTM ? c.input(7) : nullptr;
  if (!x || !w || !r) return c.fail("needs X, W and R");
  for (Value *v : {x, w, r})
    if (v->type().rank() != 3) return c.fail("X, W and R must have rank 3");
  const DType dt = x->type().dtype();
  if (!isFloat(dt)) return c.fail("X is not a floating-point tensor");
  const std::string dir = c.attrStr("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") return c.fail("unknown direction '" + dir + "'");
  const int64_t dirs = dir == "bidirectional" ? 2 : 1;
  int64_t hidden = c.attrInt("hidden_size", -1);
  if (hidden <= 0) hidden = r->type().dims()[2];
  if (hidden <= 0) return c.fail("hidden_size is neither given nor static in R");
  const int64_t gh = gates * hidden;
  if (w->type().dims()[1] != kDynamic && w->type().dims()[1] != gh)
    return c.fail("W has " + std::to_string(w->type().dims()[1]) + " rows; hidden_size " + std::to_string(hidden) +
                  " needs " + std::to_string(gh));
  const int64_t inputSize = w->type().dims()[2];
  if (inputSize == kDynamic) return c.fail("W's input size must be static");
  if (cell == Cell::LSTM && c.attrInt("input_forget", 0) != 0) return c.fail("input_forget = 1 is not supported");
  const bool linearBeforeReset = cell == Cell::GRU && c.attrInt("linear_before_reset", 0) != 0;
  std::optional<double> clip;
  if (c.attr("clip")) clip = c.attrFloat("clip", 0);
  if (c.attr("activation_alpha") || c.attr("activation_beta"))
    return c.fail("activation_alpha / activation_beta are not supported (only Sigmoid, Tanh and Relu)");
  const size_t perDir = cell == Cell::LSTM ? 3 : cell == Cell::GRU ? 2 : 1;
  std::vector<std::string> acts;
  if (const onnx::AttributeProto *a = c.attr("activations")) {
    for (const std::string &s : a->strings()) acts.push_back(s);
    if (acts.size() != perDir * static_cast<size_t>(dirs))
      return c.fail("has " + std::to_string(acts.size()) + " activations; " + type + " with " + std::to_string(dirs) +
                    " direction(s) needs " + std::to_string(perDir * static_cast<size_t>(dirs)));
    for (const std::string &s : acts)
      if (s != "Sigmoid" && s != "Tanh" && s != "Relu") return c.fail("activation '" + s + "' is not supported (only Sigmoid, Tanh and Relu)");
  } else {
    // ONNX's defaults: LSTM f = Sigmoid, g = h = Tanh; GRU f = Sigmoid, g = Tanh; RNN Tanh.
    const std::vector<std::string> dflt = cell == Cell::LSTM  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                          : cell == Cell::GRU ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                              : std::vector<std::string>{"Tanh"};
    for (int64_t d = 0; d < dirs; ++d) acts.insert(acts.end(), dflt.begin(), dflt.end());
  }
  const bool batchFirst = c.attrInt("layout", 0) != 0;
  if (batchFirst) {
    x = c.op(OpCode::Transpose, {x}, {{"perm", convert::ints({1, 0, 2})}});
    if (h0) h0 = c.op(OpCode::Transpose, {h0}, {{"perm", convert::ints({1, 0, 2})}});
    if (c0) c0 = c.op(OpCode::Transpose, {c0}, {{"perm", convert::ints({1, 0, 2})}});
    if (!x || (c.input(5) && !h0) || (c.input(6) && cell == Cell::LSTM && !c0)) return false;
  }
  const Conv::DimPart seq = c.dimOf(x, 0), batch = c.dimOf(x, 1);
  // sequence_lens: ignored when known to be S for every batch entry; else,
  // forward only, a mask per step (entry b keeps its state and gets zero
  // rows of Y from step len_b on). Reversing each entry within its own
  // length would need a gather per step: refused.
  Value *lens = nullptr;
  if (seqLens) {
    const DenseValue *k = c.known(seqLens);
    bool all = k && seq.v == nullptr;
    for (int64_t i = 0; all && i < k->numElements(); ++i) all = k->getInt(i) == seq.size;
    if (!all) {
      if (dir != "forward")
        return c.fail("a sequence_lens that is not the sequence length of every batch entry is supported for direction "
                      "forward only (this node's is " + dir + ")");
      if (seqLens->type().rank() != 1 || !isInteger(seqLens->type().dtype())) return c.fail("sequence_lens is not a 1-D integer tensor");
      lens = c.op(OpCode::Cast, {seqLens}, {{"dtype", Attr::getDType(DType::I64)}});
      lens = lens ? reshapeTo(c, lens, {batch, {1, nullptr}}) : nullptr;
      if (!lens) return false;
    }
  }
  const bool wantY = c.wantsOutput(0);
  Value *seqLen = scalarOf(c, seq);
  Value *zero = c.scalar(DType::I64, 0), *one = c.scalar(DType::I64, 1);
  Value *flat = reshapeTo(c, x, {{-1, nullptr}, {inputSize, nullptr}});
  if (!flat || !seqLen) return false;

  std::vector<Value *> ys, hs, cs;
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = dir == "reverse" || d == 1;
    const std::string *act = &acts[static_cast<size_t>(d) * perDir];
    Value *wd = direction(c, w, d), *rd = direction(c, r, d);
    if (!wd || !rd) return false;
    // Input projection of every token, biases folded (GRU's Rb stays apart).
    Value *xw = c.op(OpCode::MatMul, {flat, wd}, {{"transpose_a", Attr::getBool(false)}, {"transpose_b", Attr::getBool(true)}});
    Value *rb = nullptr;
    if (b) {
      Value *bd = direction(c, b, d);
      if (!bd) return false;
      if (cell == Cell::GRU) {
        // Wb joins the projection; Rb stays for the recurrence. Both cut at
        // import when B is an initializer.
        rb = rowsOf(c, bd, gh, 2 * gh, "_rb");
        xw = c.op(OpCode::Add, {xw, rowsOf(c, bd, 0, gh, "_wb")});
        if (!rb || !xw) return false;
      } else {
        std::vector<Value *> halves = c.ops(OpCode::Split, {bd}, {{"axis", Attr::getInt(0)}, {"sections", Attr::getInt(2)}}, 2);
        if (halves.size() != 2 || !halves[0] || !halves[1]) return false;
        xw = c.op(OpCode::Add, {xw, biasSum(c, bd, halves)});
      }
    }
    Value *xw3 = reshapeTo(c, xw, {seq, batch, {gh, nullptr}});
    if (!xw3) return false;
    auto initial = [&](Value *given) -> Value * {
      if (given) return direction(c, given, d);
      Value *shape = c.shapeVector({batch, {hidden, nullptr}});
      return shape ? c.op(OpCode::Zeros, {shape}, {{"dtype", Attr::getDType(dt)}}) : nullptr;
    };
    std::vector<Value *> init = {zero, initial(h0)};
    if (cell == Cell::LSTM) init.push_back(initial(c0));
    if (wantY) {
      Value *shape = c.shapeVector({seq, batch, {hidden, nullptr}});
      init.push_back(shape ? c.op(OpCode::Zeros, {shape}, {{"dtype", Attr::getDType(dt)}}) : nullptr);
    }
    for (Value *v : init)
      if (!v) return false;
    // Peepholes P = [p_i, p_o, p_f] of this direction.
    std::vector<Value *> pe;
    if (peep) {
      Value *pd = direction(c, peep, d);
      pe = pd ? c.ops(OpCode::Split, {pd}, {{"axis", Attr::getInt(0)}, {"sections", Attr::getInt(3)}}, 3) : pe;
      if (pe.size() != 3) return false;
    }
    // GRU without linear_before_reset: R's rows for z and r, and for h,
    // apart (h's product reads r ⊙ h). With it (what torch exports) the
    // step is one product h·Rᵀ over all three gates, as ORT computes it:
    // one GEMV reads R once, split over the threads.
    std::vector<Value *> rParts, rbParts;
    if (cell == Cell::GRU && !linearBeforeReset) {
      rParts = {rowsOf(c, rd, 0, 2 * hidden, "_zr"), rowsOf(c, rd, 2 * hidden, gh, "_h")};
      if (!rParts[0] || !rParts[1]) return false;
      if (rb) {
        rbParts = {rowsOf(c, rb, 0, 2 * hidden, "_zr"), rowsOf(c, rb, 2 * hidden, gh, "_h")};
        if (!rbParts[0] || !rbParts[1]) return false;
      }
    }

    Block *head = newBlock("rnn"), *body = newBlock("rnn_body"), *exit = newBlock("rnn_exit");
    terminate(OpCode::Br, init, {Successor{head, 0, static_cast<unsigned>(init.size()), "", {}}});
    std::vector<Value *> args, exitArgs;
    const int64_t sd = seq.v ? kDynamic : seq.size, bd = batch.v ? kDynamic : batch.size;
    for (size_t k = 0; k < init.size(); ++k) {
      Type t = init[k]->type();
      if (k > 0) t = carriedType(ctx_, t, wantY && k + 1 == init.size() ? std::vector<int64_t>{sd, bd, hidden}
                                                                         : std::vector<int64_t>{bd, hidden});
      args.push_back(head->addArgument(t, nodeLoc()));
    }
    block_ = head;
    Value *go = c.op(OpCode::Less, {args[0], seqLen});
    if (!go) return false;
    std::vector<Value *> carried(args.begin() + 1, args.end());
    std::vector<Value *> condOps = {go};
    condOps.insert(condOps.end(), carried.begin(), carried.end());
    terminate(OpCode::CondBr, condOps,
              {Successor{body, 1, 0, "", {}}, Successor{exit, 1, static_cast<unsigned>(carried.size()), "", {}}});
    for (Value *v : carried) exitArgs.push_back(exit->addArgument(v->type(), nodeLoc()));

    block_ = body;
    Value *t = args[0], *h = args[1], *cPrev = cell == Cell::LSTM ? args[2] : nullptr, *y = wantY ? args.back() : nullptr;
    Value *idx = reverse ? c.op(OpCode::Sub, {c.op(OpCode::Sub, {seqLen, one}), t}) : t;
    Value *xt = idx ? c.op(OpCode::DynamicSlice, {xw3, idx}, {{"axis", Attr::getInt(0)}, {"size", Attr::getInt(1)}}) : nullptr;
    xt = reshapeTo(c, xt, {batch, {gh, nullptr}});
    if (!xt) return false;
    auto mm = [&](Value *a, Value *m) {
      return a && m ? c.op(OpCode::MatMul, {a, m}, {{"transpose_a", Attr::getBool(false)}, {"transpose_b", Attr::getBool(true)}}) : nullptr;
    };
    auto add = [&](Value *a, Value *m) { return a && m ? c.op(OpCode::Add, {a, m}) : nullptr; };
    auto mul = [&](Value *a, Value *m) { return a && m ? c.op(OpCode::Mul, {a, m}) : nullptr; };
    Value *hNext = nullptr, *cNext = nullptr;
    if (cell == Cell::LSTM) {
      Value *g = add(xt, mm(h, rd));
      std::vector<Value *> s = g ? c.ops(OpCode::Split, {g}, {{"axis", Attr::getInt(1)}, {"sections", Attr::getInt(4)}}, 4)
                                 : std::vector<Value *>{};
      if (s.size() != 4) return false;
      Value *gi = s[0], *go2 = s[1], *gf = s[2], *gc = s[3];
      if (peep) {
        gi = add(gi, mul(pe[0], cPrev));
        gf = add(gf, mul(pe[2], cPrev));
      }
      Value *i = activate(c, act[0], gi, clip), *f = activate(c, act[0], gf, clip), *cc = activate(c, act[1], gc, clip);
      cNext = add(mul(f, cPrev), mul(i, cc));
      if (peep) go2 = add(go2, mul(pe[1], cNext));
      Value *o = activate(c, act[0], go2, clip);
      hNext = mul(o, activate(c, act[2], cNext, std::nullopt));
    } else if (cell == Cell::GRU) {
      std::vector<Value *> xs = c.ops(OpCode::Split, {xt}, {{"axis", Attr::getInt(1)}, {"sections", Attr::getInt(3)}}, 3);
      if (xs.size() != 3) return false;
      auto split = [&](Value *v, int64_t n) {
        return v ? c.ops(OpCode::Split, {v}, {{"axis", Attr::getInt(1)}, {"sections", Attr::getInt(n)}}, static_cast<unsigned>(n))
                 : std::vector<Value *>{};
      };
      std::vector<Value *> hr; // h·R_zᵀ, h·R_rᵀ (+ Rb), and with linear_before_reset h·R_hᵀ (+ Rb_h)
      if (linearBeforeReset) {
        Value *all = mm(h, rd);
        if (rb) all = add(all, rb);
        hr = split(all, 3);
      } else {
        Value *hzr = mm(h, rParts[0]);
        if (rb) hzr = add(hzr, rbParts[0]);
        hr = split(hzr, 2);
      }
      if (hr.size() != (linearBeforeReset ? 3u : 2u)) return false;
      Value *z = activate(c, act[0], add(xs[0], hr[0]), clip), *rg = activate(c, act[0], add(xs[1], hr[1]), clip);
      Value *hh;
      if (linearBeforeReset) {
        hh = add(xs[2], mul(rg, hr[2]));
      } else {
        Value *lin = mm(mul(rg, h), rParts[1]);
        if (rb) lin = add(lin, rbParts[1]);
        hh = add(xs[2], lin);
      }
      Value *ht = activate(c, act[1], hh, clip);
      // (1 - z) ⊙ ĥ + z ⊙ h  =  ĥ + z ⊙ (h - ĥ)
      hNext = add(ht, mul(z, ht ? c.op(OpCode::Sub, {h, ht}) : nullptr));
    } else {
      hNext = activate(c, act[0], add(xt, mm(h, rd)), clip);
    }
    if (!hNext || (cell == Cell::LSTM && !cNext)) return c.fail(c.error().empty() ? "cannot build the cell's equations" : c.error());
    Value *yRow = hNext;
    if (lens) {
      Value *valid = c.op(OpCode::Less, {t, lens}); // [B, 1]
      if (!valid) return false;
      yRow = c.op(OpCode::Select, {valid, hNext, c.scalar(dt, 0)});
      hNext = c.op(OpCode::Select, {valid, hNext, h});
      if (cNext) cNext = c.op(OpCode::Select, {valid, cNext, cPrev});
      if (!yRow || !hNext || (cell == Cell::LSTM && !cNext)) return false;
    }
    std::vector<Value *> back = {c.op(OpCode::Add, {t, one}), hNext};
    if (cell == Cell::LSTM) back.push_back(cNext);
    if (wantY) {
      Value *row = reshapeTo(c, yRow, {{1, nullptr}, batch, {hidden, nullptr}});
      back.push_back(row ? c.op(OpCode::DynamicUpdateSlice, {y, row, idx}, {{"axis", Attr::getInt(0)}}) : nullptr);
    }
    for (size_t k = 0; k < back.size(); ++k) {
      if (!back[k]) return false;
      if (!back[k]->type().isSubtypeOf(args[k]->type()))
        return c.fail("the recurrence's state is " + args[k]->type().str() + " on entry and " + back[k]->type().str() +
                      " after a step (the shapes of X, W, R and the initial states disagree)");
    }
    terminate(OpCode::Br, back, {Successor{head, 0, static_cast<unsigned>(back.size()), "", {}}});
    block_ = exit;
    hs.push_back(reshapeTo(c, exitArgs[0], {{1, nullptr}, batch, {hidden, nullptr}}));
    if (cell == Cell::LSTM) cs.push_back(reshapeTo(c, exitArgs[1], {{1, nullptr}, batch, {hidden, nullptr}}));
    if (wantY) ys.push_back(reshapeTo(c, exitArgs.back(), {seq, {1, nullptr}, batch, {hidden, nullptr}}));
  }

  auto join = [&](std::vector<Value *> &vs, int64_t axis) -> Value * {
    for (Value *v : vs)
      if (!v) return nullptr;
    return vs.size() == 1 ? vs[0] : c.op(OpCode::Concat, vs, {{"axis", Attr::getInt(axis)}});
  };
  out.assign(c.numOutputs(), nullptr);
  Value *y = wantY ? join(ys, 1) : nullptr, *yh = join(hs, 0), *yc = cell == Cell::LSTM ? join(cs, 0) : nullptr;
  if ((wantY && !y) || !yh || (cell == Cell::LSTM && !yc)) return false;
  if (batchFirst) {
    if (y) y = c.op(OpCode::Transpose, {y}, {{"perm", convert::ints({2, 0, 1, 3})}});
    yh = c.op(OpCode::Transpose, {yh}, {{"perm", convert::ints({1, 0, 2})}});
    if (yc) yc = c.op(OpCode::Transpose, {yc}, {{"perm", convert::ints({1, 0, 2})}});
    if ((wantY && !y) || !yh || (cell == Cell::LSTM && !yc)) return false;
  }
  if (c.numOutputs() > 0) out[0] = y;
  if (c.numOutputs() > 1) out[1] = yh;
  if (c.numOutputs() > 2 && cell == Cell::LSTM) out[2] = yc;
  return true;
}

} // namespace nimble::onnx_import
