//===- CarriedStorage.cpp - Loop-carried tensors in rotating storages -----===//
//
// plan-memory's step 0 (PlanMemory.cpp): NNC's loop handling ("The NNC
// Tensor Allocation Algorithm", seed 002, "Loop" and "Multi-view Tensor":
// a carried tensor's buffer is chosen per iteration as ptrs[counter %
// repeat], so that no iteration copies or allocates), in SSA form.
//
// A tensor carried around a loop — computed in the body into its own
// `alloc_storage`, passed on the back edge to a header argument — was
// allocated on every iteration (the run-time pool served it from its free
// list, but each was an allocation). Here its storage is allocated R times
// in the preheader, once per loop entry, and the R storages are carried as
// header arguments in rotation:
//
//   ^pre:  %st0 = alloc_storage %n ; %st1 = alloc_storage %n
//          br ^loop(..., %h0, %st0, %st1)
//   ^loop(..., %h: T, %h.st0: storage, %h.st1: storage):
//          ...
//          %h1 = alloc_tensor %h.st0, %off, shape=[...]   // was its own alloc_storage
//          invoke_mut @cell(%h, ...) -> (%h1)
//          br ^loop(..., %h1, %h.st1, %h.st0)            // the views rotate
//
// Iteration i writes storage i mod R while the value of iteration i-1 (in
// another storage) is read: the pointer is views[i mod R] of NNC's
// multi-view tensor, and the block arguments are its counter. R is the
// number of iterations a value stays live plus one: 2 for a state read by
// the next iteration only (an LSTM's h and c, the loop counter), 3 for one
// the loop hands to a second header argument and reads two iterations later
// (`br ^loop(%new, %a)` into `^loop(%a, %b)`), and so on.
//
// When: the loop has a preheader and one latch, both ending in `br`; the
// back edge passes header argument j the result v of an `alloc_tensor` in
// the loop whose storage is an `alloc_storage` in the loop used only by that
// alloc_tensor (and kills); v and the header arguments it becomes (j, then
// any argument the latch passes j to, and so on: the family) are used in the
// loop only by kernels (`invoke_mut`, `invoke_shape_func`), `shape_of`,
// `kill`s, the latch's operands of the family, and branches that leave the
// loop: nothing in the loop may keep them beyond the iterations counted in R
// (a call, a tuple, an ADT field, a reshape view, a join argument inside
// the loop all could). After the loop the last values are free to escape:
// no further iteration writes their storage.
//
// The size: the storage's size operand is defined outside the loop (a
// constant: every static shape), so the preheader has it; or (family of
// one) it provably equals the size of header argument j's own storage —
// `storage_size` of a shape that SizeKeys names as argument j's shape, as
// for a state the cell maps through element-wise ops and broadcasts — and
// then by induction every iteration's size is that of the initial value,
// which the preheader computes (`shape_of`, `storage_size`). Shapes that
// grow (a concatenation carried around the loop), or that only the shape
// functions of matmul/split/concat relate to the state's, keep their
// per-iteration allocation: their size is not provably the same from one
// iteration to the next, and the run-time pool serves them (docs/passes.md,
// `plan-memory`, step 0).
//
//===----------------------------------------------------------------------===//

#include "passes/memory/CarriedStorage.h"

#include "ir/Builder.h"
#include "ir/Verifier.h"
#include "passes/analysis/Analysis.h"
#include "passes/analysis/Loops.h"
#include "passes/memory/SizeKeys.h"
#include "passes/Statistic.h"

#include <set>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

NIMBLE_STATISTIC(NumRotated, "plan-memory", "Number of loop-carried tensors given rotating storages (NNC multi-view)");
NIMBLE_STATISTIC(NumRotatedViews, "plan-memory", "Number of rotating storages allocated in loop preheaders");

/// A carried tensor whose per-iteration storage can rotate.
struct Family {
  Operation *alloc = nullptr;        // the alloc_storage in the loop
  Operation *view = nullptr;         // its alloc_tensor (defines v)
  std::vector<unsigned> args;        // header arguments v flows through, in order
  bool sizeFromInit = false;         // the size is the initial value's (SizeKeys)
  bool sameShape = false;            // and the view's shape operand too
};

/// Whether every use of `v` inside `loop` is one a rotation keeps sound:
/// kernels and shape functions (they read or write in place), shape_of, kill,
/// the latch's operand `allowedLatchPos`, and branches leaving the loop.
bool usesStayInIteration(Value *v, const Loop &loop, const Operation *latchBr, int allowedLatchPos) {
  for (OpOperand &u : v->uses()) {
    Operation *o = u.owner();
    if (!loop.contains(o->block())) continue;
    if (o->is(OpCode::InvokeMut) || o->is(OpCode::InvokeShapeFunc) || o->is(OpCode::ShapeOf) ||
        o->is(OpCode::Kill))
      continue;
    if (o == latchBr && static_cast<int>(u.index()) == allowedLatchPos) continue;
    if (o->is(OpCode::Br) || o->is(OpCode::CondBr)) {
      // A branch operand feeds the block argument of its successor: fine
      // only when that block is outside the loop.
      bool ok = false;
      for (const Successor &s : o->successors())
        if (u.index() >= s.operandBegin && u.index() < s.operandBegin + s.operandCount)
          ok = !loop.contains(s.block);
      if (ok) continue;
    }
    return false;
  }
  return true;
}

/// The latch position whose operand is header argument `k` (a delayed
/// copy of the family), or -1 when there is none or several.
int latchPosOf(const Operation *latchBr, Value *k) {
  int pos = -1;
  for (unsigned i = 0; i < latchBr->numOperands(); ++i)
    if (latchBr->operand(i) == k) {
      if (pos >= 0) return -2;
      pos = static_cast<int>(i);
    }
  return pos;
}

bool matchFamily(const Loop &loop, Operation *latchBr, unsigned j, SizeKeys &keys, Family &fam) {
  Block *h = loop.header;
  Value *v = latchBr->operand(j);
  Operation *view = v->definingOp();
  if (!view || !view->is(OpCode::AllocTensor) || !loop.contains(view->block())) return false;
  Operation *alloc = view->operand(0)->definingOp();
  if (!alloc || !alloc->is(OpCode::AllocStorage) || !loop.contains(alloc->block())) return false;
  for (OpOperand &u : alloc->result(0)->uses())
    if (u.owner() != view && !u.owner()->is(OpCode::Kill)) return false;
  if (view->operand(0) != alloc->result(0) || view->operand(1) == alloc->result(0)) return false;
  // v, then the header arguments it flows into: j, the argument the latch
  // passes j to (a value read two iterations later), ...
  if (!usesStayInIteration(v, loop, latchBr, static_cast<int>(j))) return false;
  std::vector<unsigned> args;
  std::set<unsigned> seen;
  unsigned cur = j;
  while (true) {
    if (!seen.insert(cur).second || args.size() > 16) return false;
    args.push_back(cur);
    Value *a = h->argument(cur);
    int next = latchPosOf(latchBr, a);
    if (next == -2) return false;
    if (!usesStayInIteration(a, loop, latchBr, next)) return false;
    if (next < 0) break;
    cur = static_cast<unsigned>(next);
  }
  fam.alloc = alloc;
  fam.view = view;
  fam.args = args;
  Value *size = alloc->operand(0);
  if (loop.isInvariant(size)) return true;
  // A run-time size: provably the size of argument j's own storage?
  if (args.size() != 1) return false;
  Value *arg = h->argument(j);
  if (!arg->type().isTensor()) return false;
  Operation *ss = size->definingOp();
  if (!ss || !ss->is(OpCode::StorageSize)) return false;
  const DType dt = ss->attr("dtype").getDType();
  const int64_t align = ss->intAttr("alignment");
  if (dt != arg->type().dtype()) return false;
  if (keys.ofSize(size) != keys.ofTensorSize(arg, dt, align)) return false;
  // Equal keys have equal shape parts: the new state's shape is the old
  // one's, so (by induction) the initial value's. The view then takes that
  // shape, computed once in the preheader, when it was allocated with the
  // shape the size was computed from.
  fam.sizeFromInit = true;
  fam.sameShape = view->numOperands() == 3 && view->operand(2) == ss->operand(0);
  return true;
}

/// Whether a family of one is dead in each iteration before its new value
/// is allocated: every use of the header argument in the loop, other than
/// kills, precedes the new value's alloc_tensor in its block (an LSTM's h,
/// read by the W_hh product before the cell writes h'). Then one storage
/// holds both (NNC: "co-allocating them to the same memory region is
/// sufficient"), repeat length 1: the pool's reuse of the freed buffer, made
/// static.
bool deadBeforeWrite(const Loop &loop, const Family &f) {
  if (f.args.size() != 1) return false;
  Value *a = loop.header->argument(f.args[0]);
  // A use after the loop reads the storage as the last exit left it: only
  // an exit from the header (before any write of the iteration) leaves it
  // unwritten.
  bool usedOutside = false;
  for (OpOperand &u : a->uses()) usedOutside |= !loop.contains(u.owner()->block());
  if (usedOutside)
    for (Block *b : loop.blocks)
      if (b != loop.header)
        for (const Successor &s : b->back()->successors())
          if (!loop.contains(s.block)) return false;
  for (OpOperand &u : a->uses()) {
    Operation *o = u.owner();
    if (!loop.contains(o->block()) || o->is(OpCode::Kill)) continue;
    if (o->block() != f.view->block() || !o->isBeforeInBlock(f.view)) return false;
  }
  return true;
}

/// Replaces `br` by one with `extra` appended to its operands (one successor).
Operation *appendBrOperands(Module &m, Operation *br, const std::vector<Value *> &extra) {
  std::vector<Value *> ops;
  for (Value *v : br->operandValues()) ops.push_back(v);
  ops.insert(ops.end(), extra.begin(), extra.end());
  Successor s = br->successors()[0];
  s.operandCount = static_cast<unsigned>(ops.size());
  Builder b(m, br->loc());
  b.setInsertionPoint(br);
  Operation *nb = b.create(OpCode::Br, ops, {}, {}, {s});
  br->erase();
  return nb;
}

size_t rotateLoop(Module &m, const Loop &loop, SizeKeys &keys) {
  Block *h = loop.header;
  Block *pre = loop.preheader;
  if (!pre || loop.latches.size() != 1) return 0;
  Operation *preBr = pre->back();
  Operation *latchBr = loop.latches[0]->back();
  if (!preBr || !preBr->is(OpCode::Br) || !latchBr || !latchBr->is(OpCode::Br)) return 0;
  if (latchBr->successors().size() != 1 || latchBr->successors()[0].block != h) return 0;
  if (preBr->numOperands() != h->numArguments() || latchBr->numOperands() != h->numArguments()) return 0;

  std::vector<Family> fams;
  std::set<unsigned> taken;
  for (unsigned j = 0; j < h->numArguments(); ++j) {
    Family f;
    if (!matchFamily(loop, latchBr, j, keys, f)) continue;
    bool clash = false;
    for (unsigned a : f.args) clash |= taken.count(a) > 0;
    if (clash) continue;
    taken.insert(f.args.begin(), f.args.end());
    fams.push_back(f);
  }
  if (fams.empty()) return 0;

  Context &ctx = m.context();
  std::vector<Value *> preExtra, latchExtra;
  std::vector<Operation *> oldShapes;
  for (Family &f : fams) {
    const size_t repeat = f.args.size() + (deadBeforeWrite(loop, f) ? 0 : 1);
    Value *v = f.view->result(0);
    std::string base = v->name().empty() ? "carried" : v->name();
    Builder b(m, f.alloc->loc());
    b.setInsertionPoint(preBr);
    Value *size = f.alloc->operand(0);
    if (f.sizeFromInit) {
      // storage_size of the initial value's shape, as the loop's own
      // storage_size computes it from argument j's.
      Operation *ss = size->definingOp();
      Value *init = preBr->operand(f.args[0]);
      Value *shape = b.create(OpCode::ShapeOf, {init})->result(0);
      size = b.create(OpCode::StorageSize, {shape},
                      {{"dtype", ss->attr("dtype")}, {"alignment", ss->attr("alignment")}})
                 ->result(0);
      size->setName(base + ".size");
      if (f.sameShape) {
        Value *inLoop = f.view->operand(2);
        f.view->setOperand(2, shape);
        // No shape tensor made per iteration (a shape_of allocates).
        if (Operation *d = inLoop->definingOp(); d && d->is(OpCode::ShapeOf)) oldShapes.push_back(d);
      }
    }
    std::vector<std::pair<std::string, Attr>> attrs = {{"alignment", f.alloc->attr("alignment")},
                                                       {"device", f.alloc->attr("device")}};
    std::vector<BlockArgument *> slots;
    for (size_t k = 0; k < repeat; ++k) {
      Value *st = b.create(OpCode::AllocStorage, {size}, attrs)->result(0);
      st->setName(base + ".view" + std::to_string(k) + ".init");
      preExtra.push_back(st);
      BlockArgument *slot = h->addArgument(ctx.storage(), f.alloc->loc());
      slot->setName(base + ".view" + std::to_string(k));
      slots.push_back(slot);
      ++NumRotatedViews;
    }
    for (size_t k = 0; k < repeat; ++k) latchExtra.push_back(slots[(k + 1) % repeat]);
    // The tensor takes the current view; the per-iteration storage goes.
    Value *old = f.alloc->result(0);
    for (Operation *u : old->users())
      if (u->is(OpCode::Kill)) u->erase();
    f.view->setOperand(0, slots[0]);
    Value *oldSize = f.alloc->operand(0);
    f.alloc->erase();
    // The per-iteration size, if nothing else reads it.
    if (Operation *d = oldSize->definingOp(); d && d->is(OpCode::StorageSize) && !oldSize->hasUses()) d->erase();
    ++NumRotated;
  }
  for (Operation *d : oldShapes)
    if (!d->result(0)->hasUses()) d->erase();
  appendBrOperands(m, preBr, preExtra);
  appendBrOperands(m, latchBr, latchExtra);
  return fams.size();
}

} // namespace

size_t rotateCarriedStorages(Module &m, Function &f) {
  DominanceInfo dom(f);
  std::vector<Loop> loops = findLoops(f, dom);
  if (loops.empty()) return 0;
  SizeKeys keys(m);
  size_t n = 0;
  for (const Loop &loop : loops) n += rotateLoop(m, loop, keys);
  return n;
}

} // namespace nimble::passes
