//===- Liveness.cpp - Live SSA values over the CFG ------------------------===//

#include "passes/Liveness.h"

#include <algorithm>

namespace nimble::passes {

using namespace nimble::ir;

Liveness::Liveness(const Function &f) {
  tag_ = newScratchTag();
  auto number = [&](Value *v) {
    v->setScratch((tag_ << 32) | static_cast<uint32_t>(values_.size()));
    values_.push_back(v);
  };
  for (auto &b : f.blocks()) {
    b->setScratch((tag_ << 32) | static_cast<uint32_t>(blocks_.size()));
    blocks_.push_back(b.get());
    for (Value *a : b->arguments()) number(a);
    for (Operation &op : *b)
      for (Value *r : op.resultValues()) number(r);
  }
  std::vector<std::vector<size_t>> preds(blocks_.size());
  for (size_t i = 0; i < blocks_.size(); ++i)
    if (Operation *t = blocks_[i]->terminator())
      for (const Successor &s : t->successors())
        if (size_t j = findBlock(s.block); j != SIZE_MAX) preds[j].push_back(i);
  in_.assign(blocks_.size(), {});
  out_.assign(blocks_.size(), {});
  // Values in increasing id order: each set receives ids in ascending order,
  // and "already there" is a look at its last element.
  std::vector<size_t> work;
  for (size_t id = 0; id < values_.size(); ++id) {
    const int v = static_cast<int>(id);
    Value *val = values_[id];
    const Block *defBlock = val->definingOp() ? val->definingOp()->block()
                                              : cast<BlockArgument>(val)->owner();
    const size_t d = blockIndex(defBlock);
    auto markIn = [&](size_t b) {
      if (b == d || (!in_[b].empty() && in_[b].back() == v)) return;
      in_[b].push_back(v);
      work.push_back(b);
    };
    for (OpOperand &u : val->uses())
      if (size_t b = findBlock(u.owner()->block()); b != SIZE_MAX) markIn(b);
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

size_t Liveness::slowBlock(const Block *b) const {
  if (!blocksIndexed_) {
    blockIndex_.reserve(blocks_.size());
    for (size_t i = 0; i < blocks_.size(); ++i) blockIndex_.emplace(blocks_[i], i);
    blocksIndexed_ = true;
  }
  auto it = blockIndex_.find(b);
  return it == blockIndex_.end() ? SIZE_MAX : it->second;
}

int Liveness::slowId(const Value *v) const {
  if (isa<Global>(v)) return -1; // never numbered; common (weights)
  if (!idsBuilt_) {
    ids_.reserve(values_.size());
    for (size_t i = 0; i < values_.size(); ++i) ids_.emplace(values_[i], static_cast<int>(i));
    idsBuilt_ = true;
  }
  auto it = ids_.find(v);
  return it == ids_.end() ? -1 : it->second;
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
