//===- ManifestMemory.cpp - Explicit shapes, allocation and kernel calls --===//
//
// Nimble paper §3.3 and appendix A: "an inter-procedural change of calling
// convention, with each operator now taking its outputs explicitly". Every
// tensor computation becomes
//
//   %s_x  = shape_of %x                              (dynamic output shapes only)
//   %o_sh = invoke_shape_func @k(%s_x, ...)          (composed shape function)
//   %sz   = storage_size %o_sh, dtype=f32            (or a constant when static)
//   %st   = alloc_storage %sz, device="cpu"
//   %out  = alloc_tensor %st, %zero, %o_sh, dtype=f32   (or shape=[..] when static)
//   invoke_mut @k(%x, ...) -> (%out)
//
// The paper gives the shape function explicitly allocated output buffers
// (`alloc_tensor` of 8*rank bytes, then `invoke_shape_func ... -> (%o_sh)`);
// here its outputs are results, fresh small tensors as `shape_of`'s are: a
// shape buffer is never written by anything else, never aliased and a few
// bytes long, so the allocation, its storage and their kills were four ops
// of each kernel call (two after memory planning put every buffer in one
// arena) for nothing a planner could improve (issue 23: the IR after this
// pass is most of a compilation's time and memory).
//
// where @k is a primitive function (attribute `primitive = true`): either the
// callee of an existing `call` to a primitive function (what fusion produces)
// or a one-op function outlined here for a bare op (identical ops share one).
// Shape-function modes (paper §3.2):
//   data-independent  the shape function reads the inputs' shapes (shape_of);
//   data-dependent    inputs read by a data-dependent member are passed as
//                     values (the runtime needs them: arange's bounds, zeros'
//                     shape);
//   upper-bound       (unique, nonzero) the shape function gives a bound; the
//                     kernel takes one more output, the true shape, and the
//                     result is a second alloc_tensor over the same storage
//                     with that shape (the kernel writes the true elements
//                     compactly at the start: "slicing" without a copy).
//
// Constants: the integers this makes (offsets, static sizes) and the shape
// of an input whose type is static (`constant [8, 8] : tensor<2xi64>`, in
// place of a `shape_of`) are made once per function, at the top of its
// entry block, and shared by every kernel call (with the shape function's
// results, a matmul by a static weight with a dynamic output is 8 ops
// where it was 15: no shape_of of the weight, kill, constant 0, shape
// buffer, its storage and their kills), and the VM loads each once per
// call of the function, not once per kernel (issue 23: the IR after this
// pass is most of a compilation's time and memory). They dominate every
// use; constants are never killed (the constant pool keeps them), so
// sharing one changes no kill.
//
// A value's shape_of is made once per block and read by every kernel call
// of the block that needs that input's shape (issue 23: a value read by two
// kernels, a residual connection, had two).
//
// No shape function is called where it could only copy an input's shape
// (shapeIdentityInput: tanh of `?x8`, matmul of `?x8` by `8x8`, add of two
// tensors sized from one shape): the output is sized from that input's
// shape value, the shape each output was allocated with is remembered as
// its shape, and a storage_size is made once per shape value, dtype and
// block. A chain of kernels that keep the batch dimension then reads one
// shape_of and one storage_size, and plan-memory sees one size (issue 23:
// a matmul chain was 8 ops a call, now 4, and alternates two storages;
// the VM calls no shape function for it).
//
// Not lowered, because the VM has an instruction for them: constant (LoadConst
// / LoadConsti), shape_of (ShapeOf), reshape and dyn_reshape (ReshapeTensor:
// a view), device_copy (DeviceCopy), storage_size, and the structural ops.
//
// In-place updates: `dynamic_update_slice %x, %u, %s` (bare, or the call of a
// primitive function that is only that op) gets %x itself as its output, no
// new storage, when overwriting %x's buffer cannot be observed: %x's may-alias
// class (its reshape views, the block arguments it flows into and out of, and
// earlier in-place updates of it, to a fixpoint by union-find) holds no
// function argument, global, call result, tuple/ADT field or value that a
// call, tuple or constructor captured, and no value of the class that the
// update's result does not dominate is live after it (Liveness). A constant
// in the class (shared by every call, so never written) gets a private copy
// first (broadcast_to, once). The
// kernel then writes only the window (vm/kernels/Shape.cpp). This is the
// usual destination-passing reuse (XLA's in-place dynamic-update-slice,
// IREE's tied operands), decided here before any op of the function is
// lowered, on the program's own values. It makes an accumulator carried by
// a loop (`loop-distribute`'s stacked rows) O(row) per iteration, not
// O(all rows).
//
// Devices: every storage is placed on the pass's `device` option (default
// "cpu"); heterogeneous placement is a later pass.
//
// Frees: a `kill` follows the last use of each storage reference (the tensors
// allocated in it keep it alive) and of an upper-bound kernel's true-shape
// buffer (not of a `shape_of` or `invoke_shape_func` result: see
// smallFreshTensor in passes/analysis/Analysis.h); a kernel output is killed after
// its last use when every use is in its block and none lets it escape
// (returned, passed to a branch, call or constructor). Liveness
// across blocks (frees on every control-flow path) is memory planning's job.
// Option kills=false places none: for pipelines in which plan-memory follows
// (-O2), which drops every kill and places them all afresh, so making these
// would be wasted work (two ops of a kernel call's nine).
//
//===----------------------------------------------------------------------===//

#include "passes/analysis/Analysis.h"
#include "passes/analysis/Liveness.h"
#include "passes/Pass.h"
#include "passes/Statistic.h"

#include "ir/Builder.h"
#include "ir/FlatMap.h"
#include "ir/Limits.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

NIMBLE_STATISTIC(NumKernelCalls, "manifest-memory", "Number of kernel calls made explicit (invoke_mut)");
NIMBLE_STATISTIC(NumOutlined, "manifest-memory", "Number of one-op primitive functions outlined");
NIMBLE_STATISTIC(NumShapeFuncCalls, "manifest-memory", "Number of shape function calls inserted (invoke_shape_func)");
NIMBLE_STATISTIC(NumShapeFuncsElided, "manifest-memory",
                 "Number of shape function calls left out (the output has an input's shape)");
NIMBLE_STATISTIC(NumStaticAllocs, "manifest-memory", "Number of kernel output storages of static size");
NIMBLE_STATISTIC(NumDynamicAllocs, "manifest-memory", "Number of kernel output storages of run-time size");
NIMBLE_STATISTIC(NumKills, "manifest-memory", "Number of kills inserted");
NIMBLE_STATISTIC(NumInPlace, "manifest-memory", "Number of dynamic_update_slice calls made in place");



/// Uses that let a value outlive its block or its frame.
bool escapes(const OpOperand &use) {
  switch (use.owner()->code()) {
  case OpCode::Ret: case OpCode::Br: case OpCode::CondBr: case OpCode::Call:
  case OpCode::Construct: case OpCode::Tuple: case OpCode::Match:
    return true;
  default: return false;
  }
}


/// The operand of `op` whose buffer a dynamic_update_slice would overwrite in
/// place: operand 0 of a bare one, or the call operand bound to the updated
/// argument of a primitive function that is only `dynamic_update_slice`.
Value *updatedOperand(Module &m, Operation &op) {
  if (op.is(OpCode::DynamicUpdateSlice)) return op.operand(0);
  if (!op.is(OpCode::Call) || op.numResults() != 1) return nullptr;
  Function *callee = m.lookupFunction(op.attr("callee"));
  if (!callee || !isPrimitive(*callee) || callee->blocks().size() != 1) return nullptr;
  Block *body = callee->entry();
  Operation *first = body->empty() ? nullptr : &*body->begin();
  if (!first || !first->is(OpCode::DynamicUpdateSlice)) return nullptr;
  Operation *ret = first->nextOp();
  if (!ret || !ret->is(OpCode::Ret) || ret->nextOp() || ret->numOperands() != 1 ||
      ret->operand(0) != first->result(0))
    return nullptr;
  auto *arg = dyn_cast<BlockArgument>(first->operand(0));
  if (!arg || arg->owner() != body || arg->index() >= op.numOperands()) return nullptr;
  return op.operand(arg->index());
}

constexpr size_t kMaxInPlaceClass = 256;

struct InPlacePlan {
  std::unordered_set<const Operation *> updates;
  /// Constants to give a private copy first (a splat of zeros starting an
  /// accumulator): constants are shared, so they are never written, but a
  /// copy made once per call can be.
  std::vector<Operation *> privatize;
};

/// The updates of `f` that may run in place (see the header).
InPlacePlan inPlaceUpdates(Module &m, Function &f) {
  InPlacePlan plan;
  std::unordered_set<const Operation *> &result = plan.updates;
  std::vector<std::pair<Operation *, Value *>> updates;
  for (auto &b : f.blocks())
    for (Operation &op : *b)
      if (Value *x = updatedOperand(m, op)) updates.emplace_back(&op, x);
  if (updates.empty()) return plan;

  // May-alias classes (union-find) and which classes are foreign: shared with
  // the caller, the constant pool or a data structure.
  std::unordered_map<const Value *, const Value *> parent;
  // Iterative, with path compression: a chain of 100,000 block arguments
  // must not recurse (issue 23).
  auto find = [&](const Value *v) -> const Value * {
    const Value *r = v;
    for (auto it = parent.find(r); it != parent.end() && it->second != r; it = parent.find(r)) r = it->second;
    while (v != r) {
      auto it = parent.find(v);
      const Value *next = it->second;
      it->second = r;
      v = next;
    }
    return r;
  };
  auto unite = [&](const Value *a, const Value *b) {
    // Both get an entry, roots included: `members` lists a class from them.
    parent.emplace(a, a);
    parent.emplace(b, b);
    const Value *ra = find(a), *rb = find(b);
    if (ra != rb) parent[ra] = rb;
  };
  std::vector<const Value *> foreign;
  std::vector<Operation *> constants;
  for (auto &b : f.blocks()) {
    bool entry = b.get() == f.entry();
    for (unsigned i = 0; i < b->numArguments(); ++i)
      if (entry) foreign.push_back(b->argument(i));
    for (Operation &op : *b) {
      switch (op.code()) {
      case OpCode::Reshape: case OpCode::DynReshape: case OpCode::DeviceCopy:
      case OpCode::DynamicUpdateSlice:
        unite(op.result(0), op.operand(0));
        break;
      case OpCode::Constant:
        constants.push_back(&op);
        break;
      case OpCode::GetTuple:
        foreign.push_back(op.result(0));
        break;
      case OpCode::Br: case OpCode::CondBr:
        for (unsigned s = 0; s < op.successors().size(); ++s) {
          std::vector<Value *> ins = op.successorOperands(s);
          Block *to = op.successors()[s].block;
          for (unsigned k = 0; k < ins.size() && k < to->numArguments(); ++k)
            unite(to->argument(k), ins[k]);
        }
        break;
      case OpCode::Match:
        for (const Successor &s : op.successors())
          for (unsigned k = 0; k < s.block->numArguments(); ++k) foreign.push_back(s.block->argument(k));
        break;
      case OpCode::Call: case OpCode::Tuple: case OpCode::Construct: {
        Function *callee = op.is(OpCode::Call) ? m.lookupFunction(op.attr("callee")) : nullptr;
        bool kernel = callee && isPrimitive(*callee);
        if (Value *x = kernel ? updatedOperand(m, op) : nullptr) {
          unite(op.result(0), x);
          break;
        }
        if (kernel) break; // reads its inputs, writes fresh outputs
        for (Value *v : op.operandValues()) foreign.push_back(v);
        for (Value *r : op.resultValues()) foreign.push_back(r);
        break;
      }
      default: break;
      }
      for (Value *v : op.operandValues())
        if (isa<Global>(v)) foreign.push_back(v);
    }
  }
  std::unordered_set<const Value *> foreignRoots;
  for (const Value *v : foreign) foreignRoots.insert(find(v));
  std::unordered_map<const Value *, std::vector<Operation *>> constantsOf;
  for (Operation *c : constants) constantsOf[find(c->result(0))].push_back(c);
  std::unordered_set<const Operation *> privatized;

  // Members of each class that matter: those whose liveness is checked.
  std::unordered_map<const Value *, std::vector<Value *>> members;
  for (auto &b : f.blocks()) {
    for (unsigned i = 0; i < b->numArguments(); ++i)
      if (parent.count(b->argument(i))) members[find(b->argument(i))].push_back(b->argument(i));
    for (Operation &op : *b)
      for (Value *r : op.resultValues())
        if (parent.count(r)) members[find(r)].push_back(r);
  }

  Liveness live(f);
  DominanceInfo dom(f);
  for (auto [op, x] : updates) {
    const Value *root = find(x);
    if (foreignRoots.count(root) || isa<Global>(x)) continue;
    Block *blk = op->block();
    if (!dom.isReachable(blk)) continue;
    int pos = 0;
    for (Operation &o : *blk) {
      if (&o == op) break;
      ++pos;
    }
    const std::vector<int32_t> &last = live.lastUses(blk);
    bool observed = false;
    auto check = [&](Value *v) {
      if (v == op->result(0)) return;
      // Defined after the update where its result dominates: derived from
      // the new contents, or from a value live across it (caught there).
      if (Operation *d = v->definingOp())
        if (dom.valueDominates(op->result(0), d)) return;
      if (auto *a = dyn_cast<BlockArgument>(v))
        if (a->owner() != blk && dom.dominates(blk, a->owner())) return;
      int id = live.id(v);
      if (id < 0) { observed = true; return; }
      if (live.isLiveOut(blk, id) || last[static_cast<size_t>(id)] > pos) observed = true;
    };
    check(x); // a class of one has no entry in `members`
    auto it = members.find(root);
    // Each update scans its class: bounded, so that thousands of updates of
    // one buffer stay linear (beyond the bound they copy, still correct).
    if (it != members.end() && it->second.size() > kMaxInPlaceClass) observed = true;
    if (!observed && it != members.end())
      for (Value *v : it->second) {
        check(v);
        if (observed) break;
      }
    if (observed) continue;
    result.insert(op);
    if (auto ci = constantsOf.find(root); ci != constantsOf.end())
      for (Operation *c : ci->second)
        if (privatized.insert(c).second) plan.privatize.push_back(c);
  }
  return plan;
}

/// `%c2 = broadcast_to %c` (a kernel: a fresh copy) after constant `c`, and
/// every use of `c` reads the copy. Sound for a constant in an in-place
/// class: no value of the class (c included) is live after the update, so
/// every read of `c` precedes the write.
void privatizeConstant(Module &m, Operation &c) {
  Builder b(m, c.loc());
  Operation *next = c.nextOp();
  if (next) b.setInsertionPoint(next);
  else b.setInsertionPointToEnd(c.block());
  Value *v = c.result(0);
  Operation *copy = b.create(OpCode::BroadcastTo, {v}, {{"shape", Attr::getInts(v->type().dims())}});
  if (!v->name().empty()) copy->result(0)->setName(v->name() + ".copy");
  std::vector<std::pair<Operation *, unsigned>> uses;
  for (OpOperand &u : v->uses())
    if (u.owner() != copy) uses.push_back({u.owner(), u.index()});
  for (auto [o, i] : uses) o->setOperand(i, copy->result(0));
}

/// A `kill` after the last use of `v` when every use is in its block and none
/// lets it escape (frees across blocks are plan-memory's).
void killAfterLastUse(Module &m, Value *v) {
  Operation *def = v->definingOp();
  if (!def) return;
  Block *blk = def->block();
  Operation *last = def;
  for (OpOperand &u : v->uses()) {
    if (u.owner()->block() != blk || escapes(u) || u.owner()->isTerminator()) return;
    if (last->isBeforeInBlock(u.owner())) last = u.owner();
  }
  Operation *next = last->nextOp();
  if (!next) return;
  Builder kb(m, last->loc());
  kb.setInsertionPoint(next);
  kb.create(OpCode::Kill, {v});
  ++NumKills;
}

class ManifestMemoryPass : public Pass {
public:
  std::string_view name() const override { return "manifest-memory"; }
  std::string setOption(std::string_view key, std::string_view value) override {
    if (key == "device") {
      if (value != "cpu" && value != "cuda") return "option 'device' of 'manifest-memory' takes cpu or cuda";
      device_ = std::string(value);
      return "";
    }
    if (key == "kills") {
      if (value != "true" && value != "false") return "option 'kills' of 'manifest-memory' takes true or false";
      kills_ = value == "true";
      return "";
    }
    return Pass::setOption(key, value);
  }

  LogicalResult run(Module &m, DiagnosticEngine &diag, bool &changed) override {
    std::vector<Function *> funcs;
    for (auto &f : m.functions())
      if (!isPrimitive(*f)) funcs.push_back(f.get());
    for (Function *f : funcs) {
      entry_ = f->entry();
      lastConst_ = nullptr;
      i64s_.clear();
      shapes_.clear();
      shapeTag_ = newScratchTag();
      shapeVals_.clear();
      storageSizes_.clear();
      InPlacePlan plan = inPlaceUpdates(m, *f);
      for (Operation *c : plan.privatize) privatizeConstant(m, *c);
      inPlace_ = std::move(plan.updates);
      for (auto &b : f->blocks())
        for (Operation *op : b->opsSnapshot()) {
          Function *prim = nullptr;
          if (op->is(OpCode::Call)) {
            Function *callee = m.lookupFunction(op->attr("callee"));
            if (callee && isPrimitive(*callee)) prim = callee;
          } else if (isKernelOp(*op)) {
            prim = outline(m, *op);
          }
          if (!prim) continue;
          if (failed(manifest(m, *op, *prim, diag))) return failure();
          changed = true;
        }
    }
    inPlace_.clear();
    entry_ = nullptr;
    lastConst_ = nullptr;
    i64s_.clear();
    shapes_.clear();
    shapeVals_.clear();
    return success();
  }

private:
  Function *outline(Module &m, Operation &op);
  LogicalResult manifest(Module &m, Operation &op, Function &prim, DiagnosticEngine &diag);
  Value *allocShapeTensor(Builder &b, int64_t rank, std::vector<Value *> &temps);
  /// The function's one `constant v : tensor<i64>` / one constant shape
  /// tensor of `dims` (see "Constants" in the header), made on first use.
  Value *constI64(Module &m, int64_t v, Location loc);
  Value *constShape(Module &m, const std::vector<int64_t> &dims, Location loc);
  Value *hoisted(Module &m, Location loc, const std::function<Value *(Builder &)> &make);
  int shapeIdentityInput(const Function &prim, const std::vector<Value *> &ins,
                         const std::vector<int> &classes);

  std::string device_ = "cpu";
  bool kills_ = true;
  // Per function: where the hoisted constants go, and the ones made so far.
  Block *entry_ = nullptr;
  Operation *lastConst_ = nullptr;
  std::map<int64_t, Value *> i64s_;
  std::map<std::vector<int64_t>, Value *> shapes_;
  /// The shape_of made for a kernel input, by value (reused in its block).
  // The last `shape_of` made of each value, kept in the value's scratch word
  // (shapeTag_ << 32 | its index in shapeVals_): a hash map keyed by value
  // was a tenth of the pass on a chain of a million kernel calls (issue 23).
  // Nothing else writes a value's scratch while a function is rewritten.
  uint64_t shapeTag_ = 0;
  std::vector<Value *> shapeVals_;
  Value *lastShapeOf(const Value *v) const {
    const uint64_t w = v->scratch();
    return (w >> 32) == shapeTag_ ? shapeVals_[static_cast<uint32_t>(w)] : nullptr;
  }
  void setShapeOf(const Value *v, Value *shape) {
    v->setScratch((shapeTag_ << 32) | shapeVals_.size());
    shapeVals_.push_back(shape);
  }
  /// The last `storage_size` made of each shape value (with its dtype):
  /// outputs sized from one shape (a chain of kernels keeping the batch
  /// dimension) share it within a block.
  FlatMap<const Value *, std::pair<Value *, DType>> storageSizes_;
  std::unordered_map<std::string, Function *> outlined_;
  std::unordered_set<const Operation *> inPlace_;
  /// shapeIdentityInput's answers, by kernel and its inputs' types (a
  /// million calls of one kernel ask one question).
  struct IdentityAnswer {
    std::vector<Type> ins;
    std::vector<int> classes;
    int input;
  };
  std::unordered_map<const Function *, std::vector<IdentityAnswer>> identity_;
};

/// The kernel input whose shape the kernel's one output has for every
/// run-time size, or -1. `classes[i]` numbers input i's shape: inputs whose
/// shapes are one value of the caller (the same `shape_of`, or outputs
/// sized from the same shape) have one number. Through each member of the
/// body in turn, a result has an input's shape when
///   - the member's relation proves it from the operand types alone
///     (ir/ShapeFns.h, shapeIdentityOperand: `tanh`, `?x8` by `8x8`), or
///   - it broadcasts operands (add, select, ...) that all have one input's
///     shape: equal shapes broadcast to themselves, and the check the shape
///     function would make (`?` against `?`) cannot fail.
/// Every member must be proved: a member whose shape function is left a
/// run-time check (`?x8` + `?x8` of unrelated shapes) keeps the call, since
/// that check is what stops the kernel from reading out of bounds. The
/// members' operand types are the call's input types where they are the
/// body's arguments (a kernel shared by calls of different types is typed
/// by their join; the call's own are as precise or more).
int ManifestMemoryPass::shapeIdentityInput(const Function &prim, const std::vector<Value *> &ins,
                                           const std::vector<int> &classes) {
  auto &answers = identity_[&prim];
  for (const IdentityAnswer &a : answers) {
    bool same = a.ins.size() == ins.size() && a.classes == classes;
    for (size_t i = 0; same && i < ins.size(); ++i) same = a.ins[i] == ins[i]->type();
    if (same) return a.input;
  }
  auto answer = [&](int input) {
    IdentityAnswer a{{}, classes, input};
    for (Value *v : ins) a.ins.push_back(v->type());
    answers.push_back(std::move(a));
    return input;
  };
  const Block *body = prim.entry();
  // The shape class of each member's result (-1: unknown, or a constant's
  // static shape). Hashed: a fused group may have many members.
  FlatMap<const Value *, int> same;
  auto classOf = [&](const Value *v) -> int {
    if (const auto *a = dyn_cast<BlockArgument>(v))
      return a->index() < classes.size() ? classes[a->index()] : -1;
    const int *c = same.find(v);
    return c ? *c : -1;
  };
  std::vector<TensorSig> sigs;
  for (const Operation &member : *body) {
    if (member.is(OpCode::Ret)) {
      int c = member.numOperands() == 1 ? classOf(member.operand(0)) : -1;
      for (size_t i = 0; c >= 0 && i < classes.size(); ++i)
        if (classes[i] == c) return answer(static_cast<int>(i));
      return answer(-1);
    }
    if (member.is(OpCode::Constant) && member.numResults() == 1 && member.result()->type().isTensor()) {
      same.tryEmplace(member.result(), -1);
      continue;
    }
    if (member.numResults() != 1) return answer(-1);
    const OpInfo &info = member.info();
    if (info.shapeMode == ShapeMode::DataIndependent &&
        (info.relation == Relation::Broadcast || info.relation == Relation::Compare ||
         info.relation == Relation::Select) &&
        member.numOperands() > 0) {
      int c = classOf(member.operand(0));
      for (const Value *v : member.operandValues()) c = classOf(v) == c ? c : -1;
      if (c >= 0) {
        same.tryEmplace(member.result(), c);
        continue;
      }
    }
    sigs.clear();
    for (const Value *v : member.operandValues()) {
      const auto *a = dyn_cast<BlockArgument>(v);
      Type t = a && a->index() < ins.size() ? ins[a->index()]->type() : v->type();
      if (!t.isTensor()) return answer(-1);
      sigs.push_back(t.sig());
    }
    int j = shapeIdentityOperand(member.code(), sigs, member.attrs());
    if (j < 0) return answer(-1);
    int c = classOf(member.operand(static_cast<unsigned>(j)));
    // A static shape (a constant's) has no class, and needs none: an
    // output of static shape never asks.
    const std::vector<int64_t> &dims = sigs[static_cast<size_t>(j)].dims;
    if (c < 0 && std::find(dims.begin(), dims.end(), kDynamic) != dims.end()) return answer(-1);
    same.tryEmplace(member.result(), c);
  }
  return answer(-1);
}

/// A one-op primitive function for `op`; identical ops (same op, attributes
/// and types) share one, keyed by the op's name, its types (uniqued in the
/// context: equal types are one object, so the key holds their addresses;
/// printing every type of a million kernel calls was a tenth of the pass)
/// and its attributes' printed form.
Function *ManifestMemoryPass::outline(Module &m, Operation &op) {
  Context &ctx = m.context();
  std::vector<Type> ins, outs;
  for (Value *v : op.operandValues()) ins.push_back(v->type());
  for (Value *r : op.resultValues()) outs.push_back(r->type());
  std::string key = std::string(op.name()) + "|";
  auto addType = [&](Type t) {
    const void *p = t.impl();
    key.append(reinterpret_cast<const char *>(&p), sizeof p);
  };
  for (Type t : ins) addType(t);
  key += "|";
  for (Type t : outs) addType(t);
  for (const Attr &a : op.attrs()) key += "|" + printAttr(a);
  auto it = outlined_.find(key);
  if (it != outlined_.end()) return it->second;

  std::string fname = m.freshFunctionName(std::string(op.name()));
  auto f = std::make_unique<Function>(fname, ctx.func(ins, outs), op.loc());
  f->fnAttrs().emplace_back("primitive", Attr::getBool(true));
  Function *fn = m.addFunction(std::move(f));
  Block *entry = fn->addBlock(std::make_unique<Block>("entry"));
  std::vector<Value *> args;
  for (size_t i = 0; i < ins.size(); ++i) {
    Value *a = entry->addArgument(ins[i], op.loc());
    a->setName("in" + std::to_string(i));
    args.push_back(a);
  }
  auto clone = Operation::create(op.code(), op.loc(), args, outs, std::vector<Attr>(op.attrs().begin(), op.attrs().end()));
  Operation *c = entry->push_back(std::move(clone));
  for (unsigned i = 0; i < c->numResults(); ++i) c->result(i)->setName("out" + std::to_string(i));
  entry->push_back(Operation::create(OpCode::Ret, op.loc(), c->results(), {}, defaultAttrs(OpCode::Ret)));
  outlined_[key] = fn;
  ++NumOutlined;
  return fn;
}

Value *ManifestMemoryPass::hoisted(Module &m, Location loc,
                                   const std::function<Value *(Builder &)> &make) {
  // In creation order at the top of the entry block: after the last one, or
  // before the block's first op (which exists: every block ends in a
  // terminator, and a hoisted constant is only made for an op being
  // lowered, before it is erased).
  Builder b(m, loc);
  b.setInsertionPoint(lastConst_ ? lastConst_->nextOp() : entry_->front());
  Value *v = make(b);
  lastConst_ = v->definingOp();
  return v;
}

Value *ManifestMemoryPass::constI64(Module &m, int64_t v, Location loc) {
  auto it = i64s_.find(v);
  if (it != i64s_.end()) return it->second;
  Value *c = hoisted(m, loc, [&](Builder &b) { return b.constantI64(v); });
  i64s_.emplace(v, c);
  return c;
}

Value *ManifestMemoryPass::constShape(Module &m, const std::vector<int64_t> &dims, Location loc) {
  auto it = shapes_.find(dims);
  if (it != shapes_.end()) return it->second;
  Value *c = hoisted(m, loc, [&](Builder &b) {
    DenseValue d;
    d.dtype = DType::I64;
    d.shape = {static_cast<int64_t>(dims.size())};
    for (int64_t x : dims) d.appendInt(x);
    Type t = m.context().tensor(DType::I64, {static_cast<int64_t>(dims.size())});
    return b.create(OpCode::Constant, {}, {{"value", Attr::getDense(std::move(d))}}, {t})->result();
  });
  shapes_.emplace(dims, c);
  return c;
}

Value *ManifestMemoryPass::allocShapeTensor(Builder &b, int64_t rank, std::vector<Value *> &temps) {
  Module &m = b.module();
  Value *size = constI64(m, 8 * std::max<int64_t>(rank, 1), b.loc());
  // Result types given, not inferred: this runs once per kernel call of a
  // million-op program, and the verifier checks the pass's output anyway.
  Value *st = b.create(OpCode::AllocStorage, {size}, {{"device", Attr::getStr(device_)}},
                       {m.context().storage()})
                  ->result();
  Value *zero = constI64(m, 0, b.loc());
  Value *t = b.create(OpCode::AllocTensor, {st, zero},
                      {{"shape", Attr::getInts({rank})}, {"dtype", Attr::getDType(DType::I64)}},
                      {m.context().tensor(DType::I64, {rank})})
                 ->result();
  temps.push_back(st);
  temps.push_back(t);
  return t;
}

LogicalResult ManifestMemoryPass::manifest(Module &m, Operation &op, Function &prim,
                                           DiagnosticEngine &diag) {
  Builder b(m, op.loc());
  b.setInsertionPoint(&op);
  // A fused group's call keeps where its members were written (fuse): so do
  // the kernel's invocations.
  auto withMembers = [&](Operation *invoke) {
    if (!op.memberLocs().empty()) invoke->setMemberLocs(op.memberLocs());
  };
  std::vector<Value *> temps; // storages and shape tensors to kill after use
  std::vector<Value *> ins = op.operands();

  // In place: the updated operand is the output (no shape function, no
  // storage; the tensor keeps its storage alive). The kernel checks the
  // update's shape against it.
  if (inPlace_.count(&op)) {
    Value *x = updatedOperand(m, op);
    std::vector<Value *> operands = ins;
    operands.push_back(x);
    withMembers(b.create(OpCode::InvokeMut, operands,
             {{"callee", Attr::getSym(prim.name())},
              {"num_inputs", Attr::getInt(static_cast<int64_t>(ins.size()))}}));
    ++NumKernelCalls;
    ++NumInPlace;
    if (x->name().empty()) x->setName(op.result(0)->name());
    op.result(0)->replaceAllUsesWith(x);
    op.erase();
    // %x now lives as long as the result did: its kill (placed when %x was
    // made, before the result's uses were its own) moves.
    if (!kills_) return success();
    std::vector<Operation *> kills;
    for (Operation *u : x->users())
      if (u->is(OpCode::Kill)) kills.push_back(u);
    if (!kills.empty()) {
      for (Operation *k : kills) k->erase();
      killAfterLastUse(m, x);
    }
    return success();
  }


  // Which kernel inputs the shape function needs as values, and whether any
  // member is upper-bound.
  Block *body = prim.entry();
  std::vector<bool> needsValue(ins.size(), false);
  bool upperBound = false;
  for (Operation &member : *body) {
    ShapeMode mode = member.info().shapeMode;
    if (mode == ShapeMode::UpperBound) upperBound = true;
    if (mode != ShapeMode::DataDependent) continue;
    for (Value *v : member.operandValues())
      if (auto *a = dyn_cast<BlockArgument>(v)) needsValue[a->index()] = true;
  }
  if (upperBound && op.numResults() != 1) {
    diag.error(op.loc(), "upper-bound kernels must have exactly one result");
    return failure();
  }

  bool allStatic = true;
  for (Value *r : op.resultValues()) {
    if (!r->type().isTensor()) {
      diag.error(op.loc(), "manifest-memory: result of '" + std::string(op.name()) +
                               "' is not a tensor (" + r->type().str() + ")");
      return failure();
    }
    allStatic &= r->type().hasStaticShape();
  }

  // Output shapes: static, or computed by the shape function, or, when
  // the shape function would only copy an input's shape, that input's.
  std::vector<Value *> outShapes(op.numResults(), nullptr);
  auto shapeOfInput = [&](size_t i) -> Value * {
    if (ins[i]->type().hasStaticShape()) return constShape(m, ins[i]->type().dims(), op.loc());
    // One shape_of per value and block: a later kernel call of the block
    // reads the same shape (a value's shape never changes, even when an
    // in-place update writes its buffer).
    Value *s = lastShapeOf(ins[i]);
    if (!s || s->definingOp()->block() != op.block()) {
      s = b.create(OpCode::ShapeOf, {ins[i]}, {}, {m.context().tensor(DType::I64, {ins[i]->type().rank()})})
              ->result();
      setShapeOf(ins[i], s);
    }
    return s; // not killed: smallFreshTensor
  };
  int sameShape = -1;
  if (!allStatic && !upperBound && op.numResults() == 1) {
    // Inputs of one shape value share a class (see shapeIdentityInput).
    std::vector<int> classes(ins.size());
    for (size_t i = 0; i < ins.size(); ++i) {
      classes[i] = static_cast<int>(i);
      Value *si = ins[i]->type().isTensor() && !ins[i]->type().hasStaticShape() ? lastShapeOf(ins[i]) : nullptr;
      for (size_t j = 0; si && j < i; ++j)
        if (ins[j]->type().isTensor() && !ins[j]->type().hasStaticShape() && lastShapeOf(ins[j]) == si) {
          classes[i] = classes[j];
          break;
        }
    }
    sameShape = shapeIdentityInput(prim, ins, classes);
  }
  if (sameShape >= 0) {
    ++NumShapeFuncsElided;
    outShapes[0] = shapeOfInput(static_cast<size_t>(sameShape));
  } else if (!allStatic || upperBound) {
    std::vector<Value *> shapeIns;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (needsValue[i] || !ins[i]->type().isTensor()) shapeIns.push_back(ins[i]);
      else shapeIns.push_back(shapeOfInput(i));
    }
    // The output shapes: fresh results (not killed: smallFreshTensor).
    std::vector<Type> shapeTypes;
    for (unsigned i = 0; i < op.numResults(); ++i)
      shapeTypes.push_back(m.context().tensor(DType::I64, {op.result(i)->type().rank()}));
    ++NumShapeFuncCalls;
    Operation *sf = b.create(OpCode::InvokeShapeFunc, shapeIns, {{"callee", Attr::getSym(prim.name())}},
                             shapeTypes);
    withMembers(sf);
    for (unsigned i = 0; i < op.numResults(); ++i) outShapes[i] = sf->result(i);
  }

  // Output buffers.
  Value *zero = constI64(m, 0, op.loc());
  std::vector<Value *> outs, storages;
  for (unsigned i = 0; i < op.numResults(); ++i) {
    Type t = op.result(i)->type();
    Value *size;
    bool staticOut = t.hasStaticShape() && !upperBound;
    if (staticOut) {
      // The verifier keeps static types within limits::kMaxTensorBytes, so
      // this cannot fail on verified IR; checked all the same (no wrapping).
      int64_t bytes = 0;
      if (!limits::checkedByteSize(t.dims(), static_cast<int64_t>(dtypeSize(t.dtype())), bytes)) {
        diag.error(op.loc(), "result " + std::to_string(i) + " of type " + t.str() +
                                 " holds more than " + std::to_string(limits::kMaxTensorBytes) +
                                 " bytes (2^48, the limit)");
        return failure();
      }
      size = constI64(m, (bytes + 63) / 64 * 64, op.loc());
    } else {
      auto *known = storageSizes_.tryEmplace(outShapes[i], {nullptr, t.dtype()}).first;
      size = known->first && known->second == t.dtype() && known->first->definingOp()->block() == op.block()
                 ? known->first
                 : nullptr;
      if (!size) {
        size = b.create(OpCode::StorageSize, {outShapes[i]}, {{"dtype", Attr::getDType(t.dtype())}},
                        {m.context().tensor(DType::I64, {})})
                   ->result();
        *known = {size, t.dtype()};
      }
    }
    Value *st = b.create(OpCode::AllocStorage, {size}, {{"device", Attr::getStr(device_)}},
                         {m.context().storage()})
                    ->result();
    ++(staticOut ? NumStaticAllocs : NumDynamicAllocs);
    storages.push_back(st);
    Value *out;
    if (staticOut) {
      out = b.create(OpCode::AllocTensor, {st, zero},
                     {{"shape", Attr::getInts(t.dims())}, {"dtype", Attr::getDType(t.dtype())}}, {t})
                ->result();
    } else {
      // The buffer's type: the result type, with `?` where the (bound) shape
      // is only known at run time.
      out = b.create(OpCode::AllocTensor, {st, zero, outShapes[i]},
                     {{"dtype", Attr::getDType(t.dtype())}}, {t})
                ->result();
      // Its shape is that value: a later kernel call reading it needs no
      // shape_of, and sees it share a shape with the inputs it was sized
      // from (shapeIdentityInput's classes). Not an upper bound's: the
      // kernel gives the true shape.
      if (!upperBound) setShapeOf(out, outShapes[i]);
    }
    outs.push_back(out);
  }

  std::vector<Value *> results = outs;
  std::vector<Value *> operands = ins;
  if (upperBound) {
    Type t = op.result(0)->type();
    Value *trueShape = allocShapeTensor(b, t.rank(), temps);
    operands.insert(operands.end(), outs.begin(), outs.end());
    operands.push_back(trueShape);
    withMembers(b.create(OpCode::InvokeMut, operands,
             {{"callee", Attr::getSym(prim.name())},
              {"num_inputs", Attr::getInt(static_cast<int64_t>(ins.size()))}}));
    // The result: the same storage viewed with the true shape.
    results[0] = b.create(OpCode::AllocTensor, {storages[0], zero, trueShape},
                          {{"dtype", Attr::getDType(t.dtype())}}, {t})
                     ->result();
    temps.push_back(outs[0]);
  } else {
    operands.insert(operands.end(), outs.begin(), outs.end());
    withMembers(b.create(OpCode::InvokeMut, operands,
             {{"callee", Attr::getSym(prim.name())},
              {"num_inputs", Attr::getInt(static_cast<int64_t>(ins.size()))}}));
  }
  for (Value *st : storages) temps.push_back(st);
  ++NumKernelCalls;

  for (unsigned i = 0; i < op.numResults(); ++i) {
    results[i]->setName(op.result(i)->name());
    op.result(i)->replaceAllUsesWith(results[i]);
  }
  op.erase();

  // Frees. Temporaries: after their last use in this block (all their uses
  // are here by construction). Outputs: the same, unless a use escapes or
  // lies in another block.
  if (!kills_) return success();
  for (Value *t : temps) killAfterLastUse(m, t);
  for (Value *r : results) killAfterLastUse(m, r);
  return success();
}

} // namespace

std::unique_ptr<Pass> createManifestMemoryPass() { return std::make_unique<ManifestMemoryPass>(); }

} // namespace nimble::passes
