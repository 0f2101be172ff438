//===- Builder.h - Creating operations at an insertion point -------*- C++ -*-===//
//
// A small OpBuilder: inserts new operations before a given op (or at the end
// of a block), fills attribute defaults, and infers result types through the
// op's relation when none are given. Passes use it so that every op they make
// is well-typed by construction.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_IR_BUILDER_H
#define NIMBLE_IR_BUILDER_H

#include "ir/IR.h"

#include <string>
#include <utility>
#include <vector>

namespace nimble::ir {

class Builder {
public:
  Builder(Module &m, Location loc) : m_(m), loc_(loc) {}

  /// New ops go before `op` (in its block).
  void setInsertionPoint(Operation *op) {
    block_ = op->block();
    before_ = op;
  }
  /// New ops go at the end of `b`.
  void setInsertionPointToEnd(Block *b) {
    block_ = b;
    before_ = nullptr;
  }
  void setLoc(Location l) { loc_ = l; }
  Location loc() const { return loc_; }
  Module &module() const { return m_; }
  Context &context() const { return m_.context(); }

  /// Creates `code` with `operands`; attributes not named keep their defaults.
  /// Result types are inferred when `types` is empty and the op has results.
  /// Returns null if inference fails (a bug in the caller: the types it
  /// builds from are verified).
  Operation *create(OpCode code, const std::vector<Value *> &operands,
                    const std::vector<std::pair<std::string, Attr>> &attrs = {},
                    std::vector<Type> types = {}, std::vector<Successor> succs = {});

  /// `constant v : tensor<i64>`.
  Value *constantI64(int64_t v);
  /// A constant of type `t` (static shape) splatted from `v`.
  Value *splat(Type t, double v);

private:
  Module &m_;
  Location loc_;
  Block *block_ = nullptr;
  Operation *before_ = nullptr;
};

} // namespace nimble::ir

#endif // NIMBLE_IR_BUILDER_H
