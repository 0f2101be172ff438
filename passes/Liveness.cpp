//===- Liveness.cpp - Live SSA values over the CFG ------------------------===//

#include "passes/Liveness.h"

#include <algorithm>

namespace nimble::passes {

using namespace nimble::ir;

Liveness::Liveness(const Function &f) {
  std::vector<const Block *> blocks;
  for (auto &b : f.blocks()) {
    blockIndex_[b.get()] = blocks.size();
    blocks.push_back(b.get());
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
  std::vector<std::vector<size_t>> preds(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i)
    if (Operation *t = blocks[i]->terminator())
      for (const Successor &s : t->successors()) {
        auto it = blockIndex_.find(s.block);
        if (it != blockIndex_.end()) preds[it->second].push_back(i);
      }
  in_.assign(blocks.size(), {});
  out_.assign(blocks.size(), {});
  // Values in increasing id order: each set receives ids in ascending order,
  // and "already there" is a look at its last element.
  std::vector<size_t> work;
  for (size_t id = 0; id < values_.size(); ++id) {
    const int v = static_cast<int>(id);
    Value *val = values_[id];
    const Block *defBlock = val->definingOp() ? val->definingOp()->block()
                                              : cast<BlockArgument>(val)->owner();
    const size_t d = blockIndex_.at(defBlock);
    auto markIn = [&](size_t b) {
      if (b == d || (!in_[b].empty() && in_[b].back() == v)) return;
      in_[b].push_back(v);
      work.push_back(b);
    };
    for (OpOperand &u : val->uses()) {
      auto it = blockIndex_.find(u.owner()->block());
      if (it != blockIndex_.end()) markIn(it->second);
    }
    while (!work.empty()) {
      size_t b = work.back();
      work.pop_back();
      for (size_t p : preds[b]) {
        if (out_[p].empty() || out_[p].back() != v) out_[p].push_back(v);
        markIn(p);
      }
    }
  }
}

bool Liveness::isLiveIn(const Block *b, int id) const {
  const std::vector<int> &s = liveIn(b);
  return std::binary_search(s.begin(), s.end(), id);
}

bool Liveness::isLiveOut(const Block *b, int id) const {
  const std::vector<int> &s = liveOut(b);
  return std::binary_search(s.begin(), s.end(), id);
}

const std::vector<int32_t> &Liveness::lastUses(const Block *b) const {
  if (lastUse_.size() != values_.size()) lastUse_.assign(values_.size(), -1);
  for (int v : touched_) lastUse_[v] = -1;
  touched_.clear();
  int32_t k = 0;
  for (Operation &op : *b) {
    for (unsigned i = 0; i < op.numOperands(); ++i)
      if (int v = id(op.operand(i)); v >= 0) {
        if (lastUse_[v] < 0) touched_.push_back(v);
        lastUse_[v] = k;
      }
    ++k;
  }
  return lastUse_;
}

} // namespace nimble::passes
