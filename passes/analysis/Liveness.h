//===- Liveness.h - Live SSA values over the CFG --------------------*- C++ -*-===//
//
// Backward liveness on blocks for every SSA value of a function (op results
// and block arguments; globals are not tracked). Block arguments are defined
// at the start of their block; the operands a terminator passes to a
// successor are used by the terminator, in the predecessor (so a value passed
// only along one edge is live-out of the predecessor only if some successor
// needs it). Values are numbered in block order (arguments, then results), so
// every set iterates deterministically. A value's number is kept in its
// scratch word while the analysis lives (see `tag_`).
//
// Computed per value from its uses in blocks other than its own, walking
// predecessors up to the defining block (path exploration, as in Brandner
// et al., "Computing Liveness Sets for SSA-Form Programs", 2011): O(operands
// + the total size of the live sets), instead of dense bit vectors per
// block, which cost blocks x values. The uses are found by one walk over the
// ops in block order (operands), not through each value's use list.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_LIVENESS_H
#define NIMBLE_PASSES_LIVENESS_H

#include "ir/FlatMap.h"
#include "ir/IR.h"

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace nimble::passes {

class Liveness {
public:
  explicit Liveness(const ir::Function &f);

  /// The value's number, or -1 (globals, values of other functions).
  int id(const ir::Value *v) const {
    const uint64_t w = v->scratch();
    if ((w >> 32) == tag_) return static_cast<int>(static_cast<uint32_t>(w));
    return slowId(v);
  }
  ir::Value *value(int id) const { return values_[id]; }
  size_t numValues() const { return values_.size(); }

  /// The values live into / out of `b`, ascending.
  std::span<const int> liveIn(const ir::Block *b) const { return row(in_, inBegin_, blockIndex(b)); }
  std::span<const int> liveOut(const ir::Block *b) const { return row(out_, outBegin_, blockIndex(b)); }
  bool isLiveIn(const ir::Block *b, int id) const;
  /// The block's position in the function's block list.
  size_t blockNumber(const ir::Block *b) const { return blockIndex(b); }
  bool isLiveOut(const ir::Block *b, int id) const;

  /// The position (in block order) of the last op of `b` using each value,
  /// indexed by value number, -1 for values `b` does not use: value v is
  /// live after op k when lastUses(b)[v] > k or v is live out of `b`. Valid
  /// until the next call (one scratch array, reset per call in O(uses)).
  const std::vector<int32_t> &lastUses(const ir::Block *b) const;

private:
  /// The block's number, kept in its scratch word under the same tag as
  /// the values' (a block of another function, or one whose word a later
  /// user overwrote, is looked up in `blockIndex_`).
  size_t blockIndex(const ir::Block *b) const {
    size_t i = findBlock(b);
    assert(i != SIZE_MAX && "a block of another function");
    return i;
  }
  /// The same, or SIZE_MAX for a block not in the function.
  size_t findBlock(const ir::Block *b) const {
    const uint64_t w = b->scratch();
    if ((w >> 32) == tag_) return static_cast<uint32_t>(w);
    return slowBlock(b);
  }
  size_t slowBlock(const ir::Block *b) const;
  int slowId(const ir::Value *v) const;
  std::vector<ir::Value *> values_;
  // A value's number is kept in its scratch word (ir::Value::scratch), the
  // high half this object's tag (bit 63 set, then a process-wide count: no
  // two Liveness objects share one, and no other user's words look like
  // one), so that a lookup is a load rather than a hash. A word that does
  // not carry the tag (a global, another function's value, or one a later
  // user of the word overwrote while this object lives) is looked up in
  // `ids_`, built at the first such lookup.
  uint64_t tag_ = 0;
  mutable ir::FlatMap<const ir::Value *, int> ids_;
  mutable bool idsBuilt_ = false;
  std::vector<const ir::Block *> blocks_;
  mutable ir::FlatMap<const ir::Block *, size_t> blockIndex_; // built at the first miss
  mutable bool blocksIndexed_ = false;
  /// The live-in values of block i are in_[inBegin_[i], inBegin_[i + 1]),
  /// ascending; likewise out_.
  std::vector<int> in_, out_;
  std::vector<uint32_t> inBegin_, outBegin_;
  static std::span<const int> row(const std::vector<int> &list, const std::vector<uint32_t> &begin, size_t i) {
    return {list.data() + begin[i], list.data() + begin[i + 1]};
  }
  mutable std::vector<int32_t> lastUse_;
  mutable std::vector<int> touched_;
};

} // namespace nimble::passes

#endif // NIMBLE_PASSES_LIVENESS_H
