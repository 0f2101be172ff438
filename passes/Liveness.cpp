//===- Liveness.cpp - Live SSA values over the CFG ------------------------===//

#include "passes/Liveness.h"

#include <algorithm>

namespace nimble::passes {

using namespace nimble::ir;

bool ValueSet::unite(const ValueSet &o) {
  bool grew = false;
  for (size_t i = 0; i < bits_.size(); ++i) {
    uint64_t nb = bits_[i] | o.bits_[i];
    grew |= nb != bits_[i];
    bits_[i] = nb;
  }
  return grew;
}

std::vector<int> ValueSet::members() const {
  std::vector<int> out;
  for (size_t w = 0; w < bits_.size(); ++w)
    for (uint64_t b = bits_[w]; b; b &= b - 1)
      out.push_back(static_cast<int>(w * 64 + __builtin_ctzll(b)));
  return out;
}

Liveness::Liveness(const Function &f) {
  for (auto &b : f.blocks()) {
    for (Value *a : b->arguments()) {
      ids_[a] = static_cast<int>(values_.size());
      values_.push_back(a);
    }
    for (Operation &op : *b)
      for (Value *r : op.results()) {
        ids_[r] = static_cast<int>(values_.size());
        values_.push_back(r);
      }
  }
  size_t n = values_.size();
  // Per block: upward-exposed uses and definitions.
  std::unordered_map<const Block *, ValueSet> use, def;
  for (auto &b : f.blocks()) {
    ValueSet u(n), d(n);
    for (Value *a : b->arguments()) d.set(id(a));
    for (Operation &op : *b) {
      for (Value *v : op.operands()) {
        int i = id(v);
        if (i >= 0 && !d.test(i)) u.set(i);
      }
      for (Value *r : op.results()) d.set(id(r));
    }
    use[b.get()] = u;
    def[b.get()] = d;
    in_[b.get()] = ValueSet(n);
    out_[b.get()] = ValueSet(n);
  }
  // Iterate to a fixpoint, blocks in reverse order of the RPO (then the
  // unreachable ones) so that most facts flow in one sweep.
  std::vector<Block *> order = f.reversePostOrder();
  std::vector<Block *> all(order.rbegin(), order.rend());
  for (auto &b : f.blocks())
    if (std::find(order.begin(), order.end(), b.get()) == order.end()) all.push_back(b.get());
  for (bool changed = true; changed;) {
    changed = false;
    for (Block *b : all) {
      ValueSet out(n);
      for (Block *s : b->successors()) out.unite(in_[s]);
      ValueSet in = out;
      // in = use | (out - def)
      for (int i : def[b].members()) in.reset(i);
      in.unite(use[b]);
      if (!(out == out_[b])) {
        out_[b] = out;
        changed = true;
      }
      if (!(in == in_[b])) {
        in_[b] = in;
        changed = true;
      }
    }
  }
}

std::vector<ValueSet> Liveness::liveAfterEachOp(const Block *b) const {
  std::vector<Operation *> ops;
  for (Operation &op : *b) ops.push_back(&op);
  std::vector<ValueSet> after(ops.size());
  ValueSet live = liveOut(b);
  for (size_t k = ops.size(); k-- > 0;) {
    after[k] = live;
    for (Value *r : ops[k]->results()) live.reset(id(r));
    for (Value *v : ops[k]->operands())
      if (int i = id(v); i >= 0) live.set(i);
  }
  return after;
}

} // namespace nimble::passes
