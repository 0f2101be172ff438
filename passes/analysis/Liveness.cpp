//===- Liveness.cpp - Live SSA values over the CFG ------------------------===//

#include "passes/analysis/Liveness.h"

#include <algorithm>
#include <climits>

namespace nimble::passes {

using namespace nimble::ir;

Liveness::Liveness(const Function &f) {
  tag_ = newScratchTag();
  auto number = [&](Value *v) {
    v->setScratch((tag_ << 32) | static_cast<uint32_t>(values_.size()));
    values_.push_back(v);
  };
  // One walk in block order numbers the values and collects the uses in a
  // block other than the value's own: an operand already numbered below
  // the block's first number is defined in an earlier block; one not yet
  // numbered (defined in a later block) is resolved after the walk. The
  // ops are visited in memory order, not through the use lists (issue 23:
  // a use-list walk loads every user op at random).
  std::vector<int> blockStart; // the first value number of each block
  std::vector<std::pair<int, uint32_t>> cross; // (value, using block)
  std::vector<std::pair<const Value *, uint32_t>> later;
  for (auto &b : f.blocks()) {
    const auto bi = static_cast<uint32_t>(blocks_.size());
    b->setScratch((tag_ << 32) | bi);
    blocks_.push_back(b.get());
    const int lo = static_cast<int>(values_.size());
    blockStart.push_back(lo);
    for (Value *a : b->arguments()) number(a);
    for (Operation &op : *b) {
      for (unsigned i = 0, n = op.numOperands(); i < n; ++i) {
        const Value *v = op.operand(i);
        const uint64_t w = v->scratch();
        if ((w >> 32) == tag_) {
          if (const int id = static_cast<int>(static_cast<uint32_t>(w)); id < lo) cross.emplace_back(id, bi);
        } else if (!isa<Global>(v)) {
          later.emplace_back(v, bi);
        }
      }
      for (Value *r : op.resultValues()) number(r);
    }
  }
  for (auto &[v, bi] : later) // a value of another function is not tracked
    if (const uint64_t w = v->scratch(); (w >> 32) == tag_) cross.emplace_back(static_cast<int>(static_cast<uint32_t>(w)), bi);
  // The using blocks grouped by value, values ascending (groups: each
  // value and where its blocks start in `users`). Within a value the order
  // does not matter, nor do repeats: markIn skips a block already marked
  // for the value. Many uses (a loop of 140,000 blocks reading a few
  // values in every block): a counting sort, values being numbered densely
  // (a comparison sort of the pairs was a tenth of the analysis). Few uses
  // beside the values (one long block): a sort of the pairs, which needs no
  // table of every value.
  std::vector<std::pair<int, uint32_t>> groups;
  std::vector<uint32_t> users;
  users.reserve(cross.size());
  if (cross.size() * 4 < values_.size()) {
    std::sort(cross.begin(), cross.end());
    for (const auto &[v, bi] : cross) {
      if (groups.empty() || groups.back().first != v) groups.emplace_back(v, static_cast<uint32_t>(users.size()));
      users.push_back(bi);
    }
  } else {
    std::vector<uint32_t> count(values_.size() + 1, 0);
    for (const auto &[v, bi] : cross) ++count[static_cast<size_t>(v) + 1];
    for (size_t k = 0; k < values_.size(); ++k) {
      if (count[k + 1]) groups.emplace_back(static_cast<int>(k), count[k]);
      count[k + 1] += count[k]; // count[k + 1]: where value k + 1 starts
    }
    users.resize(cross.size());
    for (const auto &[v, bi] : cross) users[count[static_cast<size_t>(v)]++] = bi;
  }
  cross = {};
  groups.emplace_back(INT_MAX, static_cast<uint32_t>(users.size())); // the end of the last

  // Predecessors, and below the live sets, as flat arrays with offsets
  // (compressed rows): a few allocations, not one or more per block (issue
  // 23: the analysis runs three times on functions of 140,000 blocks).
  const size_t nb = blocks_.size();
  std::vector<uint32_t> edges; // (from, to) pairs
  for (size_t i = 0; i < nb; ++i)
    if (Operation *t = blocks_[i]->terminator())
      for (const Successor &s : t->successors())
        if (size_t j = findBlock(s.block); j != SIZE_MAX) {
          edges.push_back(static_cast<uint32_t>(i));
          edges.push_back(static_cast<uint32_t>(j));
        }
  std::vector<uint32_t> predBegin(nb + 1, 0);
  for (size_t e = 0; e < edges.size(); e += 2) ++predBegin[edges[e + 1] + 1];
  for (size_t b = 0; b < nb; ++b) predBegin[b + 1] += predBegin[b];
  std::vector<uint32_t> preds(edges.size() / 2);
  {
    std::vector<uint32_t> at(predBegin.begin(), predBegin.end() - 1);
    for (size_t e = 0; e < edges.size(); e += 2) preds[at[edges[e + 1]]++] = edges[e];
  }
  edges = {};
  // Values in increasing number order, so that each block's sets receive
  // numbers in ascending order; a block's stamp says whether the value
  // being propagated is in its set already.
  std::vector<std::pair<uint32_t, int>> ins, outs; // (block, value)
  std::vector<int> inStamp(nb, -1), outStamp(nb, -1);
  std::vector<size_t> work;
  for (size_t g = 0; g + 1 < groups.size(); ++g) {
    const int v = groups[g].first;
    const size_t d = static_cast<size_t>(std::upper_bound(blockStart.begin(), blockStart.end(), v) - blockStart.begin()) - 1;
    auto markIn = [&](size_t b) {
      if (b == d || inStamp[b] == v) return;
      inStamp[b] = v;
      ins.emplace_back(static_cast<uint32_t>(b), v);
      work.push_back(b);
    };
    for (uint32_t c = groups[g].second; c < groups[g + 1].second; ++c) markIn(users[c]);
    while (!work.empty()) {
      size_t b = work.back();
      work.pop_back();
      for (uint32_t e = predBegin[b]; e < predBegin[b + 1]; ++e) {
        const uint32_t p = preds[e];
        if (outStamp[p] != v) {
          outStamp[p] = v;
          outs.emplace_back(p, v);
        }
        markIn(p);
      }
    }
  }
  // Grouped by block (a counting sort, stable: ascending within a block).
  auto rows = [nb](const std::vector<std::pair<uint32_t, int>> &pairs, std::vector<uint32_t> &begin,
                   std::vector<int> &list) {
    begin.assign(nb + 1, 0);
    for (const auto &[b, v] : pairs) ++begin[b + 1];
    for (size_t b = 0; b < nb; ++b) begin[b + 1] += begin[b];
    list.resize(pairs.size());
    std::vector<uint32_t> at(begin.begin(), begin.end() - 1);
    for (const auto &[b, v] : pairs) list[at[b]++] = v;
  };
  rows(ins, inBegin_, in_);
  rows(outs, outBegin_, out_);
}

size_t Liveness::slowBlock(const Block *b) const {
  if (!blocksIndexed_) {
    for (size_t i = 0; i < blocks_.size(); ++i) blockIndex_.tryEmplace(blocks_[i], i);
    blocksIndexed_ = true;
  }
  const size_t *i = blockIndex_.find(b);
  return i ? *i : SIZE_MAX;
}

int Liveness::slowId(const Value *v) const {
  if (isa<Global>(v)) return -1; // never numbered; common (weights)
  if (!idsBuilt_) {
    for (size_t i = 0; i < values_.size(); ++i) ids_.tryEmplace(values_[i], static_cast<int>(i));
    idsBuilt_ = true;
  }
  const int *i = ids_.find(v);
  return i ? *i : -1;
}

bool Liveness::isLiveIn(const Block *b, int id) const {
  std::span<const int> s = liveIn(b);
  return std::binary_search(s.begin(), s.end(), id);
}

bool Liveness::isLiveOut(const Block *b, int id) const {
  std::span<const int> s = liveOut(b);
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
