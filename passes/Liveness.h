//===- Liveness.h - Live SSA values over the CFG --------------------*- C++ -*-===//
//
// Classic backward liveness on blocks for every SSA value of a function (op
// results and block arguments; globals are not tracked). Block arguments are
// defined at the start of their block; the operands a terminator passes to a
// successor are used by the terminator, in the predecessor (so a value passed
// only along one edge is live-out of the predecessor only if some successor
// needs it). Values are numbered in block order (arguments, then results), so
// every set iterates deterministically.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_LIVENESS_H
#define NIMBLE_PASSES_LIVENESS_H

#include "ir/IR.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace nimble::passes {

/// A fixed-size bit set over value numbers.
class ValueSet {
public:
  ValueSet() = default;
  explicit ValueSet(size_t n) : bits_((n + 63) / 64, 0), n_(n) {}
  bool test(int i) const { return (bits_[i / 64] >> (i % 64)) & 1; }
  void set(int i) { bits_[i / 64] |= uint64_t(1) << (i % 64); }
  void reset(int i) { bits_[i / 64] &= ~(uint64_t(1) << (i % 64)); }
  /// this |= o; returns true if this grew.
  bool unite(const ValueSet &o);
  bool operator==(const ValueSet &o) const { return bits_ == o.bits_; }
  size_t size() const { return n_; }
  /// The members, ascending.
  std::vector<int> members() const;

private:
  std::vector<uint64_t> bits_;
  size_t n_ = 0;
};

class Liveness {
public:
  explicit Liveness(const ir::Function &f);

  /// The value's number, or -1 (globals, values of other functions).
  int id(const ir::Value *v) const {
    auto it = ids_.find(v);
    return it == ids_.end() ? -1 : it->second;
  }
  ir::Value *value(int id) const { return values_[id]; }
  size_t numValues() const { return values_.size(); }

  const ValueSet &liveIn(const ir::Block *b) const { return in_.at(b); }
  const ValueSet &liveOut(const ir::Block *b) const { return out_.at(b); }
  /// The values live just after each op of `b`, in block order (the last
  /// entry, after the terminator, is liveOut(b)).
  std::vector<ValueSet> liveAfterEachOp(const ir::Block *b) const;

private:
  std::vector<ir::Value *> values_;
  std::unordered_map<const ir::Value *, int> ids_;
  std::unordered_map<const ir::Block *, ValueSet> in_, out_;
};

} // namespace nimble::passes

#endif // NIMBLE_PASSES_LIVENESS_H
