//===- RegisterAllocation.cpp - Registers and edge moves of the emitter ---===//
//
// FunctionEmitter's register assignment (values to VM registers, reusing a
// register once its value is dead) and the parallel moves into block
// arguments on control-flow edges. See EmitterImpl.h.
//
//===----------------------------------------------------------------------===//

#include "codegen/EmitterImpl.h"

#include "passes/analysis/Analysis.h"

#include <algorithm>
#include <climits>
#include <queue>
#include <unordered_set>

namespace nimble::codegen::detail {

// The moves are sequentialized as in a parallel-move resolver: a move whose
// destination no pending move still reads goes first; when only cycles are
// left, one register of a cycle is saved in a temporary and its readers read
// the temporary instead (one extra move per cycle, not per argument).
void FunctionEmitter::parallelMove(const std::vector<uint32_t> &srcs, const std::vector<uint32_t> &dsts,
                                   const std::vector<Type> &types, Location loc) {
  struct PendingMove {
    uint32_t src, dst;
    Type type;
  };
  std::vector<PendingMove> pending;
  for (size_t i = 0; i < srcs.size(); ++i)
    if (srcs[i] != dsts[i]) pending.push_back({srcs[i], dsts[i], types[i]});
  auto read = [&](uint32_t r) {
    for (const PendingMove &m : pending)
      if (m.src == r) return true;
    return false;
  };
  auto move = [&](uint32_t dst, uint32_t src) {
    begin(Opcode::Move, loc);
    word(dst);
    word(src);
  };
  std::vector<PendingMove> temps; // each temporary, with the type it holds
  while (!pending.empty()) {
    bool progress = false;
    for (size_t i = 0; i < pending.size();) {
      if (read(pending[i].dst)) {
        ++i;
        continue;
      }
      move(pending[i].dst, pending[i].src);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      progress = true;
    }
    if (progress || pending.empty()) continue;
    // Only cycles: save the destination of the first move; its readers
    // read the copy, and the move can go on the next round.
    const uint32_t saved = pending.front().dst;
    const uint32_t t = fresh();
    move(t, saved);
    Type held;
    for (PendingMove &m : pending)
      if (m.src == saved) {
        held = m.type;
        m.src = t;
      }
    temps.push_back({t, t, held});
  }
  // A temporary is never written again: it would hold its reference until
  // the frame ends.
  for (const PendingMove &m : temps)
    if (m.type.isTensor() || m.type.isStorage()) {
      begin(m.type.isStorage() ? Opcode::FreeStorage : Opcode::FreeTensor, loc);
      word(m.src);
    }
}

std::vector<std::pair<uint32_t, bool>> FunctionEmitter::edgeReleases(const Operation &term, unsigned k) {
  std::vector<std::pair<uint32_t, bool>> out;
  const Successor &s = term.successors()[k];
  const passes::Liveness &live = *live_;
  for (unsigned j = 0; j < s.operandCount; ++j) {
    const Value *v = term.operand(s.operandBegin + j);
    if (!passes::killable(v) || live.isLiveIn(s.block, live.id(v))) continue;
    const uint32_t r = reg(v);
    bool receives = false;
    for (unsigned i = 0; i < s.block->numArguments() && !receives; ++i) receives = reg(s.block->argument(i)) == r;
    bool listed = false;
    for (const auto &[q, storage] : out) listed |= q == r;
    if (!receives && !listed) out.emplace_back(r, v->type().isStorage());
  }
  return out;
}

void FunctionEmitter::edgeMoves(const Operation &term, unsigned k) {
  const Block *target = term.successors()[k].block;
  std::vector<Type> types;
  for (unsigned i = 0; i < target->numArguments(); ++i) types.push_back(target->argument(i)->type());
  parallelMove(regs(term.successorOperands(k)), regs(target->arguments()), types, term.loc());
  for (const auto &[r, storage] : edgeReleases(term, k)) {
    begin(storage ? Opcode::FreeStorage : Opcode::FreeTensor, term.loc());
    word(r);
  }
}

// Register allocation: linear scan (Poletto and Sarkar, 1999) over the
// blocks in reverse post-order, the order the code is laid out in. Each
// value's interval is the hull of the positions where it is live: its
// definition (a block's start for block arguments, the op for results), its
// uses, the start of every block it is live into and the end of every block
// it is live out of (passes/Liveness, exact over the CFG, so a value used
// around a loop covers the whole loop). Intervals are closed, so an op's
// results never share a register with its operands (the interpreter may
// write a destination before it has read every source), and two values
// share a register only when no point of the code needs both. Parameters
// keep registers 0..n-1 (the calling convention); globals, loaded once at
// entry, keep theirs for the whole function. Moves into a block's arguments
// stay correct when registers coincide: parallelMove skips a move onto
// itself, orders the others so that no register is written before it is
// read, and breaks a cycle of moves with a temporary; a match's case
// arguments avoid the scrutinee's register (the pad reads the fields one by
// one; it copies the scrutinee first should one coincide anyway).
// Overwriting a register drops the reference it held, so a value's tensor is
// released no later than before (kill instructions still free it at its last
// use, and an edge releases what it passes and what dies there:
// edgeReleases).
void FunctionEmitter::allocateRegisters() {
  live_ = std::make_unique<passes::Liveness>(f_);
  const passes::Liveness &live = *live_;
  regById_.assign(live.numValues(), kNoReg);
  struct Interval {
    int start = INT_MAX, end = -1;
    uint32_t order = 0;
  };
  // Indexed by the values' Liveness numbers (every value touched is one of
  // the function's: globals are skipped).
  std::vector<Interval> ivs(live.numValues());
  // The values by liveness number, in the order first touched: the
  // allocation below then reads no Value (issue 23: loading each value's
  // scratch word was a cache miss per value of a million-op function).
  std::vector<int> values;
  auto touchId = [&](int id, int p) {
    Interval &x = ivs.at(static_cast<size_t>(id));
    if (x.end < 0) {
      x.order = static_cast<uint32_t>(values.size());
      values.push_back(id);
    }
    x.start = std::min(x.start, p);
    x.end = std::max(x.end, p);
  };
  auto touch = [&](const Value *v, int p) { touchId(live.id(v), p); };
  const Block *entry = f_.entry();
  for (unsigned i = 0; i < entry->numArguments(); ++i) touch(entry->argument(i), 0);
  std::vector<std::pair<const Block *, std::pair<int, int>>> span; // per block in layout order
  // A match's case arguments are read out of the scrutinee one by one: keep
  // them off its register (else the pad copies it first).
  // Both by the block argument's liveness number (issue 23: a match of
  // 75,000 cases made these pointer-keyed maps a tenth of the emitter).
  std::vector<const Value *> avoid(live.numValues(), nullptr);
  // A block argument prefers the register of the value its first
  // predecessor (in layout order: a loop's entry edge) passes it, when that
  // value has died by then: the move disappears.
  std::vector<const Value *> hint(live.numValues(), nullptr);
  int pos = 0;
  for (const Block *b : f_.reversePostOrder()) {
    int start = pos++;
    for (unsigned i = 0; i < b->numArguments(); ++i) touch(b->argument(i), start);
    for (const Operation &op : *b) {
      int at = pos++;
      for (Value *v : op.operandValues())
        if (!isa<Global>(v)) touch(v, at);
      for (const Successor &sc : op.successors())
        for (unsigned j = 0; j < sc.operandCount; ++j)
          if (Value *v = op.operand(sc.operandBegin + j); !isa<Global>(v)) touch(v, at);
      for (Value *r : op.resultValues()) touch(r, at);
      if (op.is(OpCode::Match))
        for (const Successor &sc : op.successors())
          for (unsigned i = 0; i < sc.block->numArguments(); ++i) avoid[live.id(sc.block->argument(i))] = op.operand(0);
      else
        for (unsigned k = 0; k < op.successors().size(); ++k) {
          const Successor &sc = op.successors()[k];
          const Block *t = sc.block;
          for (unsigned i = 0; i < t->numArguments() && i < sc.operandCount; ++i) {
            const Value *passed = op.operand(sc.operandBegin + i);
            if (const Value *&h = hint[live.id(t->argument(i))]; !h && !isa<Global>(passed)) h = passed;
          }
        }
    }
    span.push_back({b, {start, pos - 1}});
  }
  for (const auto &[b, se] : span) {
    for (int id : live.liveIn(b)) touchId(id, se.first);
    for (int id : live.liveOut(b)) touchId(id, se.second);
  }
  // Parameters first, at their fixed registers; then globals, for good.
  next_ = entry->numArguments();
  for (unsigned i = 0; i < entry->numArguments(); ++i) slot(entry->argument(i)) = i;
  // (run() loads them at entry in the same order: globals_.)
  for (auto &b : f_.blocks())
    for (const Operation &op : *b)
      for (Value *v : op.operandValues())
        if (auto *g = dyn_cast<Global>(v); g && !hasReg(g)) {
          slot(g) = next_++;
          globals_.push_back(g);
        }
  std::vector<int> order = std::move(values);
  auto byStart = [&](int a, int b) {
    const Interval &x = ivs[static_cast<size_t>(a)], &y = ivs[static_cast<size_t>(b)];
    return x.start != y.start ? x.start < y.start : x.order < y.order;
  };
  // Values are first touched at their definition, in layout order, so the
  // list is usually sorted already (a definition dominates its uses, and
  // the reverse post-order puts it first): check in O(n) before sorting.
  if (!std::is_sorted(order.begin(), order.end(), byStart)) std::sort(order.begin(), order.end(), byStart);
  // Free registers: a flag per register and a min-heap of candidates
  // (entries whose flag was cleared since are skipped), so taking the
  // lowest free register, or a given one, costs O(log) without a tree.
  std::vector<char> isFree;
  std::priority_queue<uint32_t, std::vector<uint32_t>, std::greater<uint32_t>> freeHeap;
  auto release = [&](uint32_t r) {
    if (r >= isFree.size()) isFree.resize(r + 1, 0);
    isFree[r] = 1;
    freeHeap.push(r);
  };
  auto lowestFree = [&](uint32_t banned) {
    std::vector<uint32_t> skipped;
    uint32_t r = kNoReg;
    while (!freeHeap.empty()) {
      uint32_t c = freeHeap.top();
      freeHeap.pop();
      if (!isFree[c]) continue; // taken since it was pushed
      if (c == banned) {
        skipped.push_back(c);
        continue;
      }
      r = c;
      isFree[c] = 0;
      break;
    }
    for (uint32_t c : skipped) freeHeap.push(c);
    return r;
  };
  // Live intervals by end: a min-heap of (end, register).
  using Active = std::pair<int, uint32_t>;
  std::priority_queue<Active, std::vector<Active>, std::greater<Active>> active;
  for (unsigned i = 0; i < entry->numArguments(); ++i)
    active.push({ivs[static_cast<size_t>(live.id(entry->argument(i)))].end, i});
  for (int id : order) {
    const Interval &x = ivs[static_cast<size_t>(id)];
    while (!active.empty() && active.top().first < x.start) {
      release(active.top().second);
      active.pop();
    }
    uint32_t &reg = regById_[static_cast<size_t>(id)];
    if (reg != kNoReg) continue; // a parameter
    uint32_t r = kNoReg;
    if (const Value *h = hint[static_cast<size_t>(id)])
      if (uint32_t hr = slot(h); hr != kNoReg && hr < isFree.size() && isFree[hr]) {
        r = hr;
        isFree[r] = 0;
      }
    if (r == kNoReg) {
      const Value *av = avoid[static_cast<size_t>(id)];
      uint32_t banned = av ? slot(av) : kNoReg;
      r = lowestFree(banned);
    }
    if (r == kNoReg) r = next_++;
    reg = r;
    active.push({x.end, r});
  }
}

} // namespace nimble::codegen::detail
