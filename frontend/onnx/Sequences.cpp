//===- Sequences.cpp - ONNX sequences and optionals as ADTs -----------------===//
//
// Nimble has no sequence type; it has algebraic data types, and a list is one
// (the paper's Tree-LSTM inputs are ADTs, seed 000 §2 and §3.1). So an ONNX
// sequence of tensors of element type T and rank r is a cons list the
// importer declares once per (T, r):
//
//   type @Seq_f32_r1 = Nil | Cons(tensor<?xf32>, @Seq_f32_r1)
//
// its elements' dimensions all `?` (a sequence's tensors may differ in
// size), and an ONNX optional is `type @Opt_<elem> = None | Some(<elem>)`
// over such an element type (a tensor with `?` dims, or a sequence). The
// ops on a list are small functions declared beside @main once per list
// type (`@Seq_f32_r1.length`, `.at`, `.insert`, `.erase`, `.reverse`:
// loops over `match`, positions counted from the front, negative ones from
// the back, ONNX's rule; a position out of range reaches `unreachable`,
// a located run-time error). SequenceMap's body, a sub-graph that reads its
// parents' names, becomes blocks of @main like Loop's: a loop over the
// input lists that conses each iteration's outputs onto accumulators, then
// reverses them.
//
// ONNX does not always say an element's rank: SequenceEmpty gives only a
// dtype, a graph input may declare no shape (or, in ONNX's own tests, a
// wrong one that its checker accepts). Such a sequence's type is a guess
// (rank 1, or the declared one), remembered as weak; when a tensor of
// another type is inserted into it, the importer records the type under the
// sequence's origin (SeqHints) and imports the model again from the start
// (Importer.cpp), at most once per origin.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Converters.h"
#include "frontend/onnx/Graph.h"

#include <cstdio>
#include <cstdlib>

namespace nimble::onnx_import {

using namespace ir;
using namespace convert;

namespace {
constexpr int64_t kGuessedRank = 1;

std::string typeTag(Type t) {
  if (t.isAdt()) return t.adtName();
  return std::string(dtypeName(t.dtype())) + "_r" + std::to_string(t.rank());
}

Type dynamicLike(Context &ctx, DType dt, int64_t rank) {
  return ctx.tensor(dt, std::vector<int64_t>(static_cast<size_t>(rank), kDynamic));
}

/// The ADT `name` (a sequence's list or an optional), declared in `m` the
/// first time it is asked for, with these constructors (name, fields).
Type declareOnce(Module &m, Context &ctx, const std::string &name, Location loc,
                 std::vector<std::pair<std::string, std::vector<Type>>> ctors) {
  if (!m.lookupAdt(name)) {
    auto a = std::make_unique<AdtDecl>();
    a->name = name;
    a->loc = loc;
    for (auto &[ctor, fields] : ctors) a->ctors.push_back({ctor, std::move(fields), loc});
    m.addAdt(std::move(a));
  }
  return ctx.adt(name);
}
} // namespace

//===-- Types ----------------------------------------------------------------===//

Type GraphImporter::seqType(DType dt, int64_t rank) {
  Type elem = dynamicLike(ctx_, dt, rank);
  std::string name = "Seq_" + typeTag(elem);
  return declareOnce(m_, ctx_, name, nodeLoc(), {{"Nil", {}}, {"Cons", {elem, ctx_.adt(name)}}});
}

Type GraphImporter::optType(Type elem) {
  if (elem.isTensor()) elem = dynamicLike(ctx_, elem.dtype(), elem.rank());
  return declareOnce(m_, ctx_, "Opt_" + typeTag(elem), nodeLoc(), {{"None", {}}, {"Some", {elem}}});
}

bool GraphImporter::isSeq(Type t) const { return t.isAdt() && t.adtName().rfind("Seq_", 0) == 0 && m_.lookupAdt(t.adtName()); }
bool GraphImporter::isOpt(Type t) const { return t.isAdt() && t.adtName().rfind("Opt_", 0) == 0 && m_.lookupAdt(t.adtName()); }

/// The element type of a sequence or the value type of an optional.
Type GraphImporter::seqElem(Type t) const {
  const AdtDecl *a = m_.lookupAdt(t.adtName());
  return a->ctors[1].fields[0];
}

/// An ONNX sequence or optional type (of a graph input, an Optional's
/// `type`): the ADT; `origin` names the value for the hints.
bool GraphImporter::sequenceType(const onnx::TypeProto &tp, const std::string &origin, Type &t, std::string &error) {
  if (tp.has_optional_type()) {
    Type inner;
    if (!tp.optional_type().has_elem_type()) {
      error = "'" + origin + "' is an optional without an element type";
      return false;
    }
    if (!sequenceType(tp.optional_type().elem_type(), origin, inner, error)) return false;
    t = optType(inner);
    return true;
  }
  if (tp.has_tensor_type()) {
    const auto &tt = tp.tensor_type();
    std::optional<DType> dt = dtypeOf(tt.elem_type());
    if (!dt) {
      error = "'" + origin + "' has element type " + onnxTypeName(tt.elem_type()) + ", which Nimble does not have";
      return false;
    }
    t = dynamicLike(ctx_, *dt, tt.has_shape() ? tt.shape().dim_size() : kGuessedRank);
    return true;
  }
  if (tp.has_sequence_type() && tp.sequence_type().has_elem_type() &&
      tp.sequence_type().elem_type().has_tensor_type()) {
    const auto &tt = tp.sequence_type().elem_type().tensor_type();
    std::optional<DType> dt = dtypeOf(tt.elem_type());
    if (!dt) {
      error = "'" + origin + "' is a sequence of " + onnxTypeName(tt.elem_type()) + ", which Nimble does not have";
      return false;
    }
    int64_t rank = tt.has_shape() ? tt.shape().dim_size() : kGuessedRank;
    if (auto h = seqHints_.find(origin); h != seqHints_.end()) std::tie(*dt, rank) = h->second;
    t = seqType(*dt, rank);
    return true;
  }
  error = "'" + origin + "' is not a tensor, a sequence of tensors or an optional of those (maps are not supported)";
  return false;
}

bool GraphImporter::learnSeq(Value *v, DType dt, int64_t rank) {
  auto w = weakSeqs_.find(v);
  if (w == weakSeqs_.end() || seqHints_.count(w->second)) return false;
  seqHints_[w->second] = {dt, rank};
  retry_ = true;
  return true;
}

void GraphImporter::inheritWeak(Value *from, Value *to) {
  if (auto w = weakSeqs_.find(from); w != weakSeqs_.end()) weakSeqs_[to] = w->second;
}

Value *GraphImporter::construct(Type adt, const std::string &ctor, const std::vector<Value *> &fields) {
  std::string ignored;
  Operation *o = emit(OpCode::Construct, fields, {{"adt", Attr::getSym(adt.adtName())}, {"ctor", Attr::getStr(ctor)}},
                      1, ignored);
  return o ? o->result() : nullptr;
}

//===-- The list functions ---------------------------------------------------===//

/// `@<Seq>.<what>`, declared and built on first use.
Function *GraphImporter::seqHelper(const std::string &what, Type seq) {
  std::string name = seq.adtName() + "." + what;
  if (Function *f = m_.lookupFunction(name)) return f;
  Type elem = seqElem(seq), i64 = ctx_.tensor(DType::I64, {});
  Type sig = what == "length"   ? ctx_.func({seq}, {i64})
             : what == "at"     ? ctx_.func({seq, i64}, {elem})
             : what == "insert" ? ctx_.func({seq, elem, i64}, {seq})
             : what == "erase"  ? ctx_.func({seq, i64}, {seq})
                                : ctx_.func({seq}, {seq}); // reverse
  Function *f = m_.addFunction(std::make_unique<Function>(name, sig, nodeLoc()));
  // Build it with emit() and terminate(), which work on fn_ and block_: the
  // caller's function, block and constants are set aside meanwhile.
  Function *savedFn = fn_;
  Block *savedBlock = block_;
  Operation *savedLast = lastConstant_;
  std::unordered_map<std::string, Value *> savedConsts;
  savedConsts.swap(constants_);
  fn_ = f;
  block_ = f->addBlock(std::make_unique<Block>("entry"));
  for (Type t : sig.elems()) {
    Value *a = block_->addArgument(t, nodeLoc());
    a->setName(t == seq ? "seq" : t.isTensor() && t.rank() == 0 && t.dtype() == DType::I64 ? "pos" : "x");
  }
  lastConstant_ = nullptr;
  buildSeqHelper(f, what, seq);
  fn_ = savedFn;
  block_ = savedBlock;
  lastConstant_ = savedLast;
  constants_.swap(savedConsts);
  return f;
}

void GraphImporter::buildSeqHelper(Function *f, const std::string &what, Type seq) {
  Type elem = seqElem(seq), i64 = ctx_.tensor(DType::I64, {});
  Location loc = nodeLoc();
  std::string ignored;
  // The helpers are well typed by construction: a failed emit is a bug.
  auto check = [&](Operation *o) {
    if (!o) {
      std::fprintf(stderr, "nimble-import-onnx: internal error: %s\n", ignored.c_str());
      std::abort();
    }
    return o->result();
  };
  auto op = [&](OpCode code, std::vector<Value *> operands) { return check(emit(code, operands, {}, 1, ignored)); };
  auto call = [&](Function *g, std::vector<Value *> args) {
    return check(emit(OpCode::Call, args, {{"callee", Attr::getSym(g->name())}}, 1, ignored));
  };
  auto i64c = [&](int64_t v) {
    DenseValue d;
    d.dtype = DType::I64;
    d.appendInt(v);
    return constant(std::move(d));
  };
  auto br = [&](Block *to, std::vector<Value *> args) {
    terminate(OpCode::Br, args, {Successor{to, 0, static_cast<unsigned>(args.size()), "", {}}});
  };
  // match %l [Cons: ^cons(%h, %t), Nil: ^nil]
  auto match = [&](Value *l, Block *cons, Block *nil) {
    terminate(OpCode::Match, {l}, {Successor{cons, 0, 0, "Cons", {}}, Successor{nil, 0, 0, "Nil", {}}});
  };
  auto consBlock = [&](const std::string &label) {
    Block *b = newBlock(label);
    b->addArgument(elem, loc);
    b->addArgument(seq, loc);
    return b;
  };
  Block *entry = block_;
  std::vector<Value *> args = entry->arguments();
  Value *zero = what == "reverse" ? nullptr : i64c(0), *one = what == "reverse" ? nullptr : i64c(1);

  if (what == "length" || what == "reverse") {
    // ^head(%l, %acc): Nil -> ret %acc; Cons(%h, %t) -> ^head(%t, %acc + 1 | Cons(%h, %acc))
    bool length = what == "length";
    Value *init = length ? zero : construct(seq, "Nil", {});
    Block *head = newBlock("walk"), *cons = consBlock("cons"), *nil = newBlock("end");
    Value *l = head->addArgument(seq, loc), *acc = head->addArgument(length ? i64 : seq, loc);
    br(head, {args[0], init});
    block_ = head;
    match(l, cons, nil);
    block_ = cons;
    Value *next = length ? op(OpCode::Add, {acc, one}) : construct(seq, "Cons", {cons->argument(0), acc});
    br(head, {cons->argument(1), next});
    block_ = nil;
    terminate(OpCode::Ret, {acc}, {});
    return;
  }

  // The position: counted from the back when negative (p + length).
  Value *n = call(seqHelper("length", seq), {args[0]});
  block_ = entry;
  Value *p = args[what == "insert" ? 2 : 1];
  Value *neg = op(OpCode::Less, {p, zero});
  Value *pos = op(OpCode::Select, {neg, op(OpCode::Add, {p, n}), p});
  Block *oob = newBlock("out_of_range");
  {
    Block *saved = block_;
    block_ = oob;
    terminate(OpCode::Unreachable, {}, {});
    block_ = saved;
  }

  if (what == "at") {
    // ^walk(%l, %k): Cons(%h, %t) -> ret %h when k == 0, else ^walk(%t, %k - 1)
    Block *head = newBlock("walk"), *cons = consBlock("cons"), *found = newBlock("found"), *next = newBlock("next");
    Value *l = head->addArgument(seq, loc), *k = head->addArgument(i64, loc);
    br(head, {args[0], pos});
    block_ = head;
    match(l, cons, oob);
    block_ = cons;
    terminate(OpCode::CondBr, {op(OpCode::Equal, {k, zero})},
              {Successor{found, 1, 0, "", {}}, Successor{next, 1, 0, "", {}}});
    block_ = found;
    terminate(OpCode::Ret, {cons->argument(0)}, {});
    block_ = next;
    br(head, {cons->argument(1), op(OpCode::Sub, {k, one})});
    return;
  }

  // insert / erase: walk k elements, keeping them reversed in %acc; at the
  // position cons the new element on the rest (insert) or drop its head
  // (erase); then put the kept ones back in front.
  Block *walk = newBlock("walk"), *step = newBlock("step"), *cons = consBlock("keep"), *place = newBlock("place"),
        *unwind = newBlock("unwind"), *ucons = consBlock("put_back"), *done = newBlock("done");
  Value *l = walk->addArgument(seq, loc), *k = walk->addArgument(i64, loc), *acc = walk->addArgument(seq, loc);
  br(walk, {args[0], pos, construct(seq, "Nil", {})});
  block_ = walk;
  terminate(OpCode::CondBr, {op(OpCode::Equal, {k, zero})},
            {Successor{place, 1, 0, "", {}}, Successor{step, 1, 0, "", {}}});
  block_ = step;
  match(l, cons, oob);
  block_ = cons;
  br(walk, {cons->argument(1), op(OpCode::Sub, {k, one}), construct(seq, "Cons", {cons->argument(0), acc})});
  Value *ua = unwind->addArgument(seq, loc), *ur = unwind->addArgument(seq, loc);
  block_ = place;
  if (what == "insert") {
    br(unwind, {acc, construct(seq, "Cons", {args[1], l})});
  } else {
    Block *skip = consBlock("drop");
    match(l, skip, oob);
    block_ = skip;
    br(unwind, {acc, skip->argument(1)});
  }
  block_ = unwind;
  match(ua, ucons, done);
  block_ = ucons;
  br(unwind, {ucons->argument(1), construct(seq, "Cons", {ucons->argument(0), ur})});
  block_ = done;
  terminate(OpCode::Ret, {ur}, {});
  (void)f;
}

//===-- The converters -------------------------------------------------------===//

namespace {

/// A position input as a scalar i64 (ONNX allows int32 and a 1-element tensor).
Value *position(Conv &c, Value *p) {
  bool one = p->type().isTensor() && p->type().hasStaticShape();
  for (int64_t d : one ? p->type().dims() : std::vector<int64_t>{}) one = one && d == 1;
  if (!one || !isInteger(p->type().dtype())) return c.fail("the position is not an integer scalar"), nullptr;
  if (p->type().rank() != 0 && !(p = c.op(OpCode::Reshape, {p}, {{"shape", Attr::getInts({})}}))) return nullptr;
  if (p->type().dtype() != DType::I64 && !(p = c.op(OpCode::Cast, {p}, {{"dtype", Attr::getDType(DType::I64)}})))
    return nullptr;
  return p;
}

} // namespace

bool GraphImporter::convertSequenceOp(Conv &c, std::vector<Value *> &out) {
  const std::string &type = c.node().op_type();
  auto call = [&](Function *f, std::vector<Value *> args) -> Value * {
    std::string why;
    Operation *o = emit(OpCode::Call, args, {{"callee", Attr::getSym(f->name())}}, 1, why);
    if (!o) return c.fail(why), nullptr;
    return o->result();
  };
  auto needSeq = [&](size_t i) -> Value * {
    Value *v = c.input(i);
    if (!v || !isSeq(v->type())) return c.fail("input " + std::to_string(i) + " is not a sequence"), nullptr;
    return v;
  };
  /// Whether tensor `x` fits sequence `s`'s elements; a weak sequence learns
  /// x's type (and the import restarts).
  auto fits = [&](Value *s, Value *x) {
    Type e = seqElem(s->type());
    if (!x->type().isTensor()) return c.fail("the element is not a tensor");
    if (x->type().dtype() == e.dtype() && x->type().rank() == e.rank()) return true;
    if (learnSeq(s, x->type().dtype(), x->type().rank()))
      return c.fail("the sequence's element type was guessed (" + e.str() + "); importing again with " +
                    x->type().str());
    return c.fail("a " + x->type().str() + " does not fit a sequence of " + e.str() +
                  " (Nimble's sequences hold one element type and rank)");
  };

  if (type == "SequenceEmpty") {
    int64_t onnxType = c.attrInt("dtype", onnx::TensorProto_DataType_FLOAT);
    std::optional<DType> dt = dtypeOf(static_cast<int>(onnxType));
    if (!dt) return c.fail("element type " + onnxTypeName(static_cast<int>(onnxType)) + " is not Nimble's");
    int64_t rank = kGuessedRank;
    const std::string &origin = c.node().output(0);
    if (auto h = seqHints_.find(origin); h != seqHints_.end()) std::tie(*dt, rank) = h->second;
    Value *nil = construct(seqType(*dt, rank), "Nil", {});
    weakSeqs_[nil] = origin;
    return done(out, nil);
  }
  if (type == "SequenceConstruct") {
    if (c.in.empty() || !c.input(0)) return c.fail("needs at least one tensor");
    Value *x0 = c.input(0);
    if (!x0->type().isTensor()) return c.fail("input 0 is not a tensor");
    Type seq = seqType(x0->type().dtype(), x0->type().rank());
    Value *acc = construct(seq, "Nil", {});
    for (size_t i = c.in.size(); i-- > 0;) {
      Value *x = c.input(i);
      if (!x || !x->type().isTensor() || x->type().dtype() != x0->type().dtype() ||
          x->type().rank() != x0->type().rank())
        return c.fail("input " + std::to_string(i) + " is not a tensor of input 0's element type and rank " +
                      "(Nimble's sequences hold one element type and rank)");
      acc = construct(seq, "Cons", {x, acc});
    }
    return done(out, acc);
  }
  if (type == "SequenceLength") {
    Value *s = needSeq(0);
    return s && done(out, call(seqHelper("length", s->type()), {s}));
  }
  if (type == "SequenceAt") {
    Value *s = needSeq(0), *p = s && c.input(1) ? position(c, c.input(1)) : nullptr;
    if (!p) return c.fail("needs a position");
    return done(out, call(seqHelper("at", s->type()), {s, p}));
  }
  if (type == "SequenceInsert") {
    Value *s = needSeq(0), *x = c.input(1);
    if (!s || !x) return c.fail("needs a sequence and a tensor");
    if (!fits(s, x)) return false;
    Value *p = c.input(2) ? position(c, c.input(2)) : call(seqHelper("length", s->type()), {s});
    if (!p) return false;
    Value *r = call(seqHelper("insert", s->type()), {s, x, p});
    if (r) inheritWeak(s, r);
    return done(out, r);
  }
  if (type == "SequenceErase") {
    Value *s = needSeq(0);
    if (!s) return false;
    Value *p = c.input(1) ? position(c, c.input(1)) : c.scalar(DType::I64, -1);
    if (!p) return false;
    Value *r = call(seqHelper("erase", s->type()), {s, p});
    if (r) inheritWeak(s, r);
    return done(out, r);
  }
  if (type == "SequenceMap") return sequenceMap(c, out);

  if (type == "Optional") {
    if (Value *x = c.input(0)) {
      Type t = optType(x->type());
      Type inner = seqElem(t);
      if (x->type().isTensor() ? !x->type().isSubtypeOf(inner) : x->type() != inner)
        return c.fail("cannot make an optional of " + x->type().str());
      return done(out, construct(t, "Some", {x}));
    }
    const onnx::AttributeProto *a = c.attr("type");
    if (!a || !a->has_tp()) return c.fail("an empty optional needs the 'type' attribute");
    Type inner;
    std::string why;
    if (!sequenceType(a->tp(), c.node().output(0), inner, why)) return c.fail(why);
    return done(out, construct(optType(inner), "None", {}));
  }
  if (type == "OptionalHasElement" || type == "OptionalGetElement") {
    Value *o = c.input(0);
    bool has = type == "OptionalHasElement";
    if (!o) return has ? done(out, c.scalar(DType::I1, 0)) : c.fail("has no input");
    if (!isOpt(o->type())) // opset 18: a tensor or sequence is a present value
      return done(out, has ? c.scalar(DType::I1, 1) : o);
    Type inner = seqElem(o->type());
    Block *some = newBlock("some"), *none = newBlock(has ? "none" : "no_value");
    Value *v = some->addArgument(inner, nodeLoc());
    terminate(OpCode::Match, {o}, {Successor{some, 0, 0, "Some", {}}, Successor{none, 0, 0, "None", {}}});
    if (!has) {
      // OptionalGetElement of an empty optional is an error (ONNX's rule).
      block_ = none;
      terminate(OpCode::Unreachable, {}, {});
      block_ = some;
      inheritWeak(o, v);
      return done(out, v);
    }
    Block *merge = newBlock("has_element");
    Value *r = merge->addArgument(ctx_.tensor(DType::I1, {}), nodeLoc());
    for (auto [b, bit] : {std::pair{some, 1}, std::pair{none, 0}}) {
      block_ = b;
      Value *k = c.scalar(DType::I1, bit);
      terminate(OpCode::Br, {k}, {Successor{merge, 0, 1, "", {}}});
    }
    block_ = merge;
    return done(out, r);
  }
  return c.fail("not a sequence or optional op");
}

/// SequenceMap: a loop over the input sequences (in step) whose body is the
/// node's sub-graph, each output consed onto an accumulator; the outputs
/// are the accumulators reversed. The accumulators' types are the body's
/// outputs', known once the body is imported: their block arguments are
/// added to the loop's head then, and the branch into the loop is made last.
bool GraphImporter::sequenceMap(Conv &c, std::vector<Value *> &out) {
  const onnx::AttributeProto *a = c.attr("body");
  if (!a || !a->has_g()) return c.fail("has no body");
  const onnx::GraphProto &body = a->g();
  if (body.input_size() != static_cast<int>(c.in.size()))
    return c.fail("the body takes " + std::to_string(body.input_size()) + " inputs; the node has " +
                  std::to_string(c.in.size()));
  if (body.output_size() != static_cast<int>(c.numOutputs()))
    return c.fail("the body has " + std::to_string(body.output_size()) + " outputs; the node has " +
                  std::to_string(c.numOutputs()));
  std::vector<size_t> seqs;
  for (size_t i = 0; i < c.in.size(); ++i) {
    if (!c.input(i)) return c.fail("input " + std::to_string(i) + " is omitted");
    if (isSeq(c.input(i)->type())) seqs.push_back(i);
  }
  if (seqs.empty() || seqs[0] != 0) return c.fail("input 0 is not a sequence");
  Location loc = nodeLoc();
  Block *pre = block_, *head = newBlock("map"), *exit = newBlock("map_exit");
  std::vector<Value *> lists;
  for (size_t i : seqs) lists.push_back(head->addArgument(c.input(i)->type(), loc));
  // ^map(lists..., accs...): each list is matched in turn; the first one's
  // end ends the loop, a later one's is an error (ONNX: equal lengths).
  Block *oob = lists.size() > 1 ? newBlock("map_length_differs") : nullptr;
  if (oob) {
    block_ = oob;
    terminate(OpCode::Unreachable, {}, {});
  }
  std::vector<Value *> elems, tails;
  block_ = head;
  for (size_t k = 0; k < lists.size(); ++k) {
    Type seq = lists[k]->type();
    Block *cons = newBlock("map_elem");
    elems.push_back(cons->addArgument(seqElem(seq), loc));
    tails.push_back(cons->addArgument(seq, loc));
    terminate(OpCode::Match, {lists[k]},
              {Successor{cons, 0, 0, "Cons", {}}, Successor{k == 0 ? exit : oob, 0, 0, "Nil", {}}});
    block_ = cons;
  }
  scopes_.emplace_back();
  for (size_t i = 0, k = 0; i < c.in.size(); ++i)
    scopes_.back()[body.input(static_cast<int>(i)).name()] =
        k < seqs.size() && seqs[k] == i ? elems[k++] : c.input(i);
  std::vector<Value *> outs;
  std::string error;
  bool ok = importSubgraph(body, outs, error);
  scopes_.pop_back();
  if (!ok) return c.fail("body: " + error);
  std::vector<Value *> back = tails, init, accs;
  for (size_t j = 0; j < outs.size(); ++j) {
    if (!outs[j]->type().isTensor()) return c.fail("body output " + std::to_string(j) + " is not a tensor");
    Type seq = seqType(outs[j]->type().dtype(), outs[j]->type().rank());
    Value *acc = head->addArgument(seq, loc);
    accs.push_back(acc);
    back.push_back(construct(seq, "Cons", {outs[j], acc}));
  }
  terminate(OpCode::Br, back, {Successor{head, 0, static_cast<unsigned>(back.size()), "", {}}});
  block_ = pre;
  for (size_t k = 0; k < seqs.size(); ++k) init.push_back(c.input(seqs[k]));
  for (Value *acc : accs) init.push_back(construct(acc->type(), "Nil", {}));
  terminate(OpCode::Br, init, {Successor{head, 0, static_cast<unsigned>(init.size()), "", {}}});
  block_ = exit;
  for (Value *acc : accs) {
    std::string why;
    Operation *o = emit(OpCode::Call, {acc}, {{"callee", Attr::getSym(seqHelper("reverse", acc->type())->name())}},
                        1, why);
    if (!o) return c.fail(why);
    out.push_back(o->result());
  }
  return true;
}

} // namespace nimble::onnx_import
