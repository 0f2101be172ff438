//===- IR.h - Values, operations, blocks, functions, modules -----*- C++ -*-===//
//
// The in-memory IR (DLVM §3.1, MLIR's core without nested regions):
//
//   Module    owns ADT declarations, global constants and functions
//   Function  owns blocks; the entry block's arguments are the parameters
//   Block     owns arguments (block arguments replace phi nodes) and an
//             intrusive list of operations ending in one terminator
//   Operation an OpCode from Ops.def, operands, results, attributes (in the
//             op's schema order, defaults filled in) and successors
//
// Values (op results, block arguments, globals) keep live use-lists: every
// OpOperand is linked into its value's list, so `uses()` is always exact and
// `replaceAllUsesWith` is O(uses). Erasing an operation whose results are
// still used is a programming error and asserts.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_IR_IR_H
#define NIMBLE_IR_IR_H

#include "ir/Diagnostics.h"
#include "ir/FlatMap.h"
#include "ir/OpTable.h"
#include "ir/Types.h"

#include <cassert>
#include <iterator>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nimble::ir {

class Block;
class Function;
class Module;
class Operation;
class OpOperand;

/// A tag for scratch words (Value::scratch, Block::scratch) that no other
/// user in the process has: bit 31 set, then a count (2^31 tags before one
/// repeats). A user keeps (tag << 32 | payload) and reads a word as its own
/// only when the high half is its tag; other users' words (epochs, which
/// never set bit 63) and stale ones read as unset.
uint32_t newScratchTag();

//===-- Values -------------------------------------------------------------===//

class Value {
public:
  enum class Kind : uint8_t { OpResult, BlockArgument, Global };
  Value(const Value &) = delete;
  Value &operator=(const Value &) = delete;

  Kind kind() const { return kind_; }
  Type type() const { return type_; }
  void setType(Type t) { type_ = t; }
  /// The name the value was written with (without `%`); the printer keeps it
  /// when it is unique in its function and numbers the value otherwise.
  const std::string &name() const { return name_ ? *name_ : noName(); }
  void setName(std::string n);

  bool hasUses() const { return firstUse_ != nullptr; }
  bool hasOneUse() const;
  size_t numUses() const;
  /// Replaces every use of this value with `v`.
  void replaceAllUsesWith(Value *v);

  /// Forward iteration over uses (OpOperand&).
  class use_iterator {
  public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = OpOperand;
    using difference_type = std::ptrdiff_t;
    using pointer = OpOperand *;
    using reference = OpOperand &;
    explicit use_iterator(OpOperand *u) : u_(u) {}
    OpOperand &operator*() const { return *u_; }
    OpOperand *operator->() const { return u_; }
    use_iterator &operator++();
    bool operator==(const use_iterator &o) const { return u_ == o.u_; }
    bool operator!=(const use_iterator &o) const { return u_ != o.u_; }

  private:
    OpOperand *u_;
  };
  struct UseRange {
    OpOperand *first;
    use_iterator begin() const { return use_iterator(first); }
    use_iterator end() const { return use_iterator(nullptr); }
  };
  UseRange uses() const { return {firstUse_}; }
  /// The operations using this value (an op appears once per use).
  std::vector<Operation *> users() const;

  /// Where the value is defined (op, block argument or global declaration).
  Location loc() const;
  /// The defining operation, or null for block arguments and globals.
  Operation *definingOp() const;

  /// A word an analysis may keep on the value while it runs (LLVM keeps
  /// such per-value scratch for the same reason: a hash map keyed by value
  /// costs a cache miss per lookup on programs of a million ops). It has no
  /// meaning between passes; a user tags what it writes (e.g. with an epoch)
  /// so that a stale word from an earlier user reads as unset.
  uint64_t scratch() const { return scratch_; }
  void setScratch(uint64_t w) const { scratch_ = w; }
  // (newScratchTag, above, gives a user a tag no other user has.)

protected:
  Value(Kind k, Type t, unsigned index = 0) : kind_(k), index_(index), type_(t) {}
  /// Not virtual: values are destroyed as what they are (an op destroys its
  /// results, a block its arguments, a module its globals), never through a
  /// Value pointer, so a value carries no vtable pointer.
  ~Value();

private:
  friend class OpOperand;
  friend class OpResult;
  friend class BlockArgument;
  friend class Block; // renumbers its arguments
  static const std::string &noName();
  Kind kind_;
  /// The position of an op result or block argument (in the padding after
  /// kind_: an op result is 48 bytes, issue 23).
  unsigned index_;
  Type type_;
  OpOperand *firstUse_ = nullptr;
  /// Null when unnamed (most values a pass makes): a value is 40 bytes, an
  /// op result 48 (issue 23: a million-op program has a million of them).
  std::unique_ptr<std::string> name_;
  mutable uint64_t scratch_ = 0;
};

/// One operand slot of an operation, linked into its value's use-list.
class OpOperand {
public:
  OpOperand() = default;
  OpOperand(const OpOperand &) = delete;
  OpOperand &operator=(const OpOperand &) = delete;
  ~OpOperand() { unlink(); }

  Value *get() const { return value_; }
  void set(Value *v);
  Operation *owner() const { return owner_; }
  unsigned index() const;
  OpOperand *nextUse() const { return next_; }
  // Where the operand was written: Operation::operandLoc (kept out of
  // line, so that an operand is 32 bytes).

private:
  friend class Operation;
  void link();
  void unlink();
  Value *value_ = nullptr;
  Operation *owner_ = nullptr;
  OpOperand *next_ = nullptr;
  OpOperand **prevNext_ = nullptr;
};

class OpResult : public Value {
public:
  OpResult(Operation *owner, unsigned index, Type t) : Value(Kind::OpResult, t, index), owner_(owner) {}
  ~OpResult() = default;
  Operation *owner() const { return owner_; }
  unsigned index() const { return index_; }
  static bool classof(const Value *v) { return v->kind() == Kind::OpResult; }

private:
  Operation *owner_;
};

class BlockArgument : public Value {
public:
  BlockArgument(Block *owner, unsigned index, Type t, Location loc)
      : Value(Kind::BlockArgument, t, index), owner_(owner), loc_(loc) {}
  ~BlockArgument() = default;
  Block *owner() const { return owner_; }
  unsigned index() const { return index_; }
  Location argLoc() const { return loc_; }
  static bool classof(const Value *v) { return v->kind() == Kind::BlockArgument; }

private:
  friend class Block;
  Block *owner_;
  Location loc_;
};

/// A module-level constant (`const @w : T = external(...)` or `= literal`).
/// It is a Value, so ops use it directly as an operand (like LLVM globals).
class Global : public Value {
public:
  /// The symbol name (without `@`) is the value's name.
  Global(std::string name, Type t, Location loc) : Value(Kind::Global, t), loc_(loc) {
    setName(std::move(name));
  }
  ~Global() = default;
  Location declLoc() const { return loc_; }
  static bool classof(const Value *v) { return v->kind() == Kind::Global; }

  /// Either external (safetensors file + tensor key) or an inline literal.
  bool isExternal() const { return !file_.empty(); }
  const std::string &file() const { return file_; }
  const std::string &key() const { return key_; }
  void setExternal(std::string file, std::string key) {
    file_ = std::move(file);
    key_ = std::move(key);
  }
  const Attr &literal() const { return literal_; }
  void setLiteral(Attr a) { literal_ = std::move(a); }

private:
  Location loc_;
  std::string file_, key_;
  Attr literal_;
};

// Kind-based casts (no RTTI), LLVM style.
template <class T> bool isa(const Value *v) { return v && T::classof(v); }
template <class T> T *dyn_cast(Value *v) { return isa<T>(v) ? static_cast<T *>(v) : nullptr; }
template <class T> const T *dyn_cast(const Value *v) {
  return isa<T>(v) ? static_cast<const T *>(v) : nullptr;
}
template <class T> T *cast(Value *v) {
  assert(isa<T>(v) && "cast to the wrong value kind");
  return static_cast<T *>(v);
}

//===-- Operations ---------------------------------------------------------===//

/// A control-flow edge: the target block and the slice of the operand list
/// passed to its arguments. For `match`, `label` names the constructor and the
/// block's arguments receive the constructor's fields (no operands); an empty
/// label on a match successor is the default case.
struct Successor {
  Block *block = nullptr;
  unsigned operandBegin = 0, operandCount = 0;
  std::string label;
  /// Where the target (`^bb` or the match case) was written; may be unknown.
  Location loc = {};
};

class Operation {
public:
  /// Creates a detached operation; insert it with Block::push_back/insertBefore.
  /// `attrs` must hold one entry per attribute in the op's schema.
  static std::unique_ptr<Operation> create(OpCode code, Location loc,
                                           const std::vector<Value *> &operands,
                                           const std::vector<Type> &resultTypes,
                                           std::vector<Attr> attrs,
                                           std::vector<Successor> successors = {});
  ~Operation();
  Operation(const Operation &) = delete;
  Operation &operator=(const Operation &) = delete;

  OpCode code() const { return code_; }
  const OpInfo &info() const { return opInfo(code_); }
  std::string_view name() const { return info().mnemonic; }
  Location loc() const { return loc_; }
  void setLoc(Location l) { loc_ = l; }
  bool is(OpCode c) const { return code_ == c; }
  bool isTerminator() const { return opHasFlag(code_, opflags::Terminator); }

  // Operands.
  unsigned numOperands() const { return numOperands_; }
  Value *operand(unsigned i) const {
    assert(i < numOperands_);
    return slots()[i].get();
  }
  OpOperand &opOperand(unsigned i) { return slots()[i]; }
  std::vector<Value *> operands() const;
  /// The operands without a copy (a range of Value *): for read-only loops
  /// on hot paths; valid until the operand list is replaced (setOperands)
  /// or the op destroyed. operands() returns a copy that stays valid.
  class OperandRange {
  public:
    struct iterator {
      const OpOperand *p;
      Value *operator*() const { return p->get(); }
      iterator &operator++() { ++p; return *this; }
      bool operator!=(const iterator &o) const { return p != o.p; }
      bool operator==(const iterator &o) const { return p == o.p; }
    };
    OperandRange(const OpOperand *b, unsigned n) : b_(b), n_(n) {}
    iterator begin() const { return {b_}; }
    iterator end() const { return {b_ + n_}; }
    unsigned size() const { return n_; }
  private:
    const OpOperand *b_;
    unsigned n_;
  };
  OperandRange operandValues() const { return {slots(), numOperands_}; }
  /// Where operand `i` was written, or the op's location when unknown
  /// (ops built by passes): lets diagnostics point at the use rather than
  /// at the whole operation.
  Location operandLoc(unsigned i) const;
  void setOperandLoc(unsigned i, Location l);
  void setOperand(unsigned i, Value *v) { slots()[i].set(v); }
  /// Replaces the whole operand list (successor slices must be updated by the
  /// caller through setSuccessors).
  void setOperands(const std::vector<Value *> &vals);

  // Results. Fixed at creation, and allocated with the op: they sit
  // directly before it in the same block of memory (MLIR's layout), so that
  // an op and its results are one allocation and one cache line apart, not
  // a vector of separately allocated values.
  unsigned numResults() const { return numResults_; }
  OpResult *result(unsigned i = 0) const {
    assert(i < numResults_);
    return resultsBase() + i;
  }
  std::vector<Value *> results() const;
  /// The results without a copy (a range of Value *), valid while the op
  /// lives; see operandValues.
  class ResultRange {
  public:
    struct iterator {
      OpResult *p;
      Value *operator*() const;
      iterator &operator++() { ++p; return *this; }
      bool operator!=(const iterator &o) const { return p != o.p; }
      bool operator==(const iterator &o) const { return p == o.p; }
    };
    ResultRange(OpResult *b, unsigned n) : b_(b), n_(n) {}
    iterator begin() const { return {b_}; }
    iterator end() const { return {b_ + n_}; }
    unsigned size() const { return n_; }
  private:
    OpResult *b_;
    unsigned n_;
  };
  ResultRange resultValues() const { return {resultsBase(), numResults_}; }
  bool hasResultUses() const;

  // Attributes (schema order), allocated with the op, after it.
  std::span<const Attr> attrs() const { return {attrsBase(), numAttrs_}; }
  const Attr &attr(unsigned i) const {
    assert(i < numAttrs_);
    return attrsBase()[i];
  }
  /// The attribute `name`, which the op's schema must declare.
  const Attr &attr(std::string_view name) const;
  /// Replaces attribute `name` (forgetting where the old value was written).
  void setAttr(std::string_view name, Attr a);
  /// Where attribute `i` was written (`name=value`), or the op's location when
  /// unknown (defaults, custom syntax, ops built by passes).
  Location attrLoc(unsigned i) const;
  void setAttrLoc(unsigned i, Location l);
  /// On a call or invoke of a fused kernel (fuse): where each member of the
  /// callee was written, in the callee's order; empty otherwise. Identical
  /// fused groups share one kernel function, so the members' locations live
  /// at each call, and a run-time error in a member names its own line
  /// (docs/VM.md, "Kernels"). Printed with --print-debuginfo as
  /// `loc("f":9:3, members["f":7:3, "f":9:3])`.
  const std::vector<Location> &memberLocs() const;
  void setMemberLocs(std::vector<Location> locs);
  int64_t intAttr(std::string_view n) const { return attr(n).getInt(); }
  bool boolAttr(std::string_view n) const { return attr(n).getBool(); }
  const std::string &strAttr(std::string_view n) const { return attr(n).getStr(); }

  // Successors.
  /// Only a terminator's list is looked up: most ops a walk meets have a
  /// side structure (written or member locations) whose list is empty, and
  /// reading it was a cache miss per op (issue 23).
  const std::vector<Successor> &successors() const {
    return extra_ && isTerminator() ? extra_->succs : noSuccessors();
  }
  /// To change the edges: only terminators have successors to change (others
  /// get an empty list that must not be modified; a terminator's list is
  /// made on first use). Marks the function's CFG changed (cfgChanged), so
  /// reads go through the const successors().
  std::vector<Successor> &mutableSuccessors();
  std::vector<Value *> successorOperands(unsigned i) const;
  /// Operands that are not successor arguments (e.g. cond_br's condition).
  unsigned numNonSuccessorOperands() const;

  // Position.
  Block *block() const { return block_; }
  Function *function() const;
  Operation *nextOp() const { return next_; }
  Operation *prevOp() const { return prev_; }
  /// Unlinks from the block and destroys. Asserts that no result is used.
  void erase();
  /// Unlinks from the block and returns ownership.
  std::unique_ptr<Operation> remove();
  /// Drops all operand uses (before deleting a group of ops that use each other).
  void dropAllReferences();
  void moveBefore(Operation *other);
  /// True when this op comes before `other` in the same block. Amortized
  /// O(1): ops carry order numbers, spaced so that insertions rarely force
  /// the block to renumber (LLVM's instruction ordering).
  bool isBeforeInBlock(const Operation *other) const;

  /// Destroys the op, its results and attributes and frees their one allocation (a
  /// destroying delete: `delete op` and std::unique_ptr<Operation> reach
  /// it, and it knows where the allocation starts).
  void operator delete(Operation *op, std::destroying_delete_t);

private:
  friend class Block;
  Operation(OpCode code, Location loc) : code_(code), loc_(loc) {}
  static const std::vector<Successor> &noSuccessors();
  OpResult *resultsBase() const;
  Attr *attrsBase() const;
  OpOperand *inlineOperands() const;
  // One allocation holds the results, the op (72 bytes), its attributes and
  // its operands, in that order: an op with one result, no attribute and two
  // operands is 184 bytes, where it was five allocations (op, result vector,
  // result: 128 + 8 + 64, then attributes and operands). A walk over ops and
  // their operands, which every pass is, then reads neighbouring lines
  // instead of a second allocation per op (issue 23). Operands beyond the
  // count the op was created with (setOperands growing the list, rare) move
  // out of line. Rarely used lists are out of line, in Extra.
  OpCode code_;
  uint16_t numAttrs_ = 0;
  unsigned numOperands_ = 0;
  unsigned numResults_ = 0;
  /// Operand slots in the op's own allocation (constructed once, reused).
  unsigned inlineCapacity_ = 0;
  Location loc_;
  /// What few ops have, in one side allocation (null for most ops a pass
  /// builds: issue 23, an op was 88 bytes with three pointers for these):
  /// where each attribute, operand and fused member was written (the
  /// parser's; a vector is empty or has one entry per attribute / operand /
  /// member), the successors (branches), and the operand slots when the list
  /// grew past the inline ones.
  struct Extra {
    std::vector<Location> attrs, operands, members;
    std::vector<Successor> succs;
    std::unique_ptr<OpOperand[]> outOfLine;
  };
  std::unique_ptr<Extra> extra_;
  Extra &extra() {
    if (!extra_) extra_ = std::make_unique<Extra>();
    return *extra_;
  }
  /// The operand slots: inline unless there are more operands than inline
  /// slots (then out of line: the invariant setOperands keeps).
  OpOperand *slots() const { return numOperands_ <= inlineCapacity_ ? inlineOperands() : extra_->outOfLine.get(); }
  Block *block_ = nullptr;
  Operation *prev_ = nullptr, *next_ = nullptr;
  /// Position in the block, valid while the block's orderValid_ is set.
  mutable uint64_t order_ = 0;
};

inline OpResult *Operation::resultsBase() const {
  return reinterpret_cast<OpResult *>(reinterpret_cast<char *>(const_cast<Operation *>(this)) -
                                      numResults_ * sizeof(OpResult));
}
inline Attr *Operation::attrsBase() const {
  return reinterpret_cast<Attr *>(reinterpret_cast<char *>(const_cast<Operation *>(this)) + sizeof(Operation));
}
inline OpOperand *Operation::inlineOperands() const {
  return reinterpret_cast<OpOperand *>(reinterpret_cast<char *>(attrsBase()) + numAttrs_ * sizeof(Attr));
}
inline Value *Operation::ResultRange::iterator::operator*() const { return p; }

/// Default attribute list for `code` (every optional attribute at its default;
/// required ones null).
std::vector<Attr> defaultAttrs(OpCode code);

//===-- Blocks -------------------------------------------------------------===//

class Block {
public:
  explicit Block(std::string label = "") : label_(std::move(label)) {}
  ~Block();
  Block(const Block &) = delete;
  Block &operator=(const Block &) = delete;

  const std::string &label() const { return label_; }
  void setLabel(std::string l) { label_ = std::move(l); }
  Location loc() const { return loc_; }
  void setLoc(Location l) { loc_ = l; }
  Function *function() const { return func_; }
  bool isEntry() const;

  // Arguments.
  unsigned numArguments() const { return static_cast<unsigned>(args_.size()); }
  BlockArgument *argument(unsigned i) const { return args_[i].get(); }
  std::vector<Value *> arguments() const;
  std::vector<Type> argumentTypes() const;
  BlockArgument *addArgument(Type t, Location loc);
  /// Erases argument `i`, which must be unused.
  void eraseArgument(unsigned i);

  // Operations (intrusive list).
  class iterator {
  public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = Operation;
    using difference_type = std::ptrdiff_t;
    using pointer = Operation *;
    using reference = Operation &;
    iterator(Operation *op, const Block *b) : op_(op), b_(b) {}
    Operation &operator*() const { return *op_; }
    Operation *operator->() const { return op_; }
    iterator &operator++() { op_ = op_->nextOp(); return *this; }
    iterator &operator--() { op_ = op_ ? op_->prevOp() : b_->back(); return *this; }
    bool operator==(const iterator &o) const { return op_ == o.op_; }
    bool operator!=(const iterator &o) const { return op_ != o.op_; }

  private:
    Operation *op_;
    const Block *b_;
  };
  iterator begin() const { return iterator(first_, this); }
  iterator end() const { return iterator(nullptr, this); }
  bool empty() const { return first_ == nullptr; }
  Operation *front() const { return first_; }
  Operation *back() const { return last_; }
  size_t size() const;
  /// Snapshot of the op list, safe to iterate while erasing.
  std::vector<Operation *> opsSnapshot() const;

  Operation *push_back(std::unique_ptr<Operation> op);
  Operation *insertBefore(Operation *before, std::unique_ptr<Operation> op);
  /// The terminator, or null if the block does not end in one.
  /// The last op when it is a terminator, else null. Inline: analyses ask it
  /// of every block, several times per pass.
  Operation *terminator() const { return last_ && last_->isTerminator() ? last_ : nullptr; }
  std::vector<Block *> successors() const;

  /// A word an analysis may keep on the block while it runs, as
  /// Value::scratch (the same rules: tag what you write).
  uint64_t scratch() const { return scratch_; }
  void setScratch(uint64_t w) const { scratch_ = w; }
  /// DominanceInfo's word (its RPO numbering, tagged the same way), apart
  /// from `scratch` so that an analysis using that word while a
  /// DominanceInfo lives does not send every dominance query to a hash map.
  uint64_t domWord() const { return domWord_; }
  void setDomWord(uint64_t w) const { domWord_ = w; }

private:
  friend class Operation;
  friend class Function;
  void unlink(Operation *op);
  /// Numbers the ops kOrderStride apart (isBeforeInBlock).
  void renumber() const;
  void relabelAround(Operation *o, uint64_t x);
  static constexpr uint64_t kOrderStride = uint64_t(1) << 32;
  mutable bool orderValid_ = true;
  std::string label_;
  Location loc_;
  Function *func_ = nullptr;
  std::vector<std::unique_ptr<BlockArgument>> args_;
  Operation *first_ = nullptr, *last_ = nullptr;
  mutable uint64_t scratch_ = 0;
  mutable uint64_t domWord_ = 0;
  /// Function::reversePostOrder's visited mark: the walk's number (a
  /// process-wide count), so no set of visited blocks is built per walk.
  mutable uint64_t visited_ = 0;
};

//===-- Functions and modules ----------------------------------------------===//

class Function {
public:
  Function(std::string name, Type type, Location loc)
      : name_(std::move(name)), type_(type), loc_(loc) {}
  ~Function();

  const std::string &name() const { return name_; }
  void setName(std::string n);
  Type type() const { return type_; }
  void setType(Type t) { type_ = t; }
  std::vector<Type> argTypes() const { return type_.elems(); }
  std::vector<Type> resultTypes() const { return type_.results(); }
  Location loc() const { return loc_; }
  Module *module() const { return module_; }

  /// Function attributes (`attributes {inline = "never", ...}`), sorted by name.
  std::vector<std::pair<std::string, Attr>> &fnAttrs() { return fnAttrs_; }
  const std::vector<std::pair<std::string, Attr>> &fnAttrs() const { return fnAttrs_; }
  const Attr *fnAttr(std::string_view name) const;

  // Blocks, entry first.
  const std::vector<std::unique_ptr<Block>> &blocks() const { return blocks_; }
  Block *entry() const { return blocks_.empty() ? nullptr : blocks_.front().get(); }
  Block *addBlock(std::unique_ptr<Block> b);
  /// O(blocks), or O(1) between begin/endBlockInsertions.
  Block *insertBlockAfter(Block *after, std::unique_ptr<Block> b);
  /// Batches insertBlockAfter (inlining thousands of calls into one
  /// function): in between, inserted blocks are appended and their places
  /// recorded, so blocks() is out of order until endBlockInsertions puts
  /// every block where insertBlockAfter would have, in one pass. No block
  /// may be erased in between.
  void beginBlockInsertions() { deferInsertions_ = true; }
  void endBlockInsertions();
  /// Erases a block whose values are unused and that no terminator targets
  /// (its own ops' operand references are dropped first).
  void eraseBlock(Block *b);
  /// Erases several such blocks in one pass over the block list (erasing
  /// them one by one is O(blocks) each).
  void eraseBlocks(const std::vector<Block *> &bs);
  /// Blocks in reverse post-order from the entry (unreachable ones omitted).
  /// Kept until the CFG changes (see cfgChanged), so the analyses of several
  /// passes in a row share one walk.
  std::vector<Block *> reversePostOrder() const;

  /// Records a change to the CFG: the block list, a block's last op (which
  /// is its terminator) or a terminator's successors. Block, Operation and
  /// Function call it on every such change; code that edits a CFG some
  /// other way (none should) must call it too. Builds with assertions check
  /// the kept order against a fresh walk on every query.
  void cfgChanged() { ++cfgEpoch_; }

private:
  friend class Module;
  std::vector<Block *> computeReversePostOrder() const;
  std::string name_;
  Type type_;
  Location loc_;
  Module *module_ = nullptr;
  std::vector<std::pair<std::string, Attr>> fnAttrs_;
  std::vector<std::unique_ptr<Block>> blocks_;
  bool deferInsertions_ = false;
  /// Blocks inserted after each block while deferred, in insertion order.
  std::unordered_map<const Block *, std::vector<Block *>> insertedAfter_;
  /// reversePostOrder's kept result, valid while rpoEpoch_ == cfgEpoch_
  /// (issue 23: on a function of 100,000 blocks most passes walk the CFG,
  /// some twice, and each walk is a cache miss per block).
  uint64_t cfgEpoch_ = 0;
  mutable uint64_t rpoEpoch_ = UINT64_MAX;
  mutable std::vector<Block *> rpo_;
};

/// `type @Tree = Leaf(tensor<4xf32>) | Node(@Tree, @Tree)`
struct AdtDecl {
  struct Ctor {
    std::string name;
    std::vector<Type> fields;
    Location loc;
  };
  std::string name;
  std::vector<Ctor> ctors;
  Location loc;
  /// Index of constructor `name`, or -1. `hint`, where the caller has one
  /// (a match's k-th case usually names the k-th constructor), is tried
  /// first; else the name is hashed once the ADT has many constructors (the
  /// index is rebuilt when `ctors` changed size).
  int ctorIndex(std::string_view name, size_t hint = SIZE_MAX) const;

  // The cache of ctorIndex (not part of the declaration), looked up by
  // string_view without making a string.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  mutable std::unordered_map<std::string, int, NameHash, std::equal_to<>> ctorIndexCache;
  mutable size_t ctorIndexCacheSize = 0;
};

class Module {
public:
  explicit Module(Context &ctx) : ctx_(ctx) {}
  ~Module();
  Context &context() const { return ctx_; }

  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }

  const std::vector<std::unique_ptr<AdtDecl>> &adts() const { return adts_; }
  const std::vector<std::unique_ptr<Global>> &globals() const { return globals_; }
  const std::vector<std::unique_ptr<Function>> &functions() const { return funcs_; }

  AdtDecl *addAdt(std::unique_ptr<AdtDecl> a);
  Global *addGlobal(std::unique_ptr<Global> g);
  Function *addFunction(std::unique_ptr<Function> f);
  /// Erases a function (calls to it must be gone).
  void eraseFunction(Function *f);
  /// Erases an unused global.
  void eraseGlobal(Global *g);

  /// Symbol lookups are hash-table lookups (the tables are kept by add/erase
  /// and Function::setName); with several symbols of one name (only invalid
  /// IR has them) the first added is found.
  AdtDecl *lookupAdt(std::string_view name) const;
  Global *lookupGlobal(std::string_view name) const;
  Function *lookupFunction(std::string_view name) const;
  /// The function a symbol attribute (a `callee`) names: one probe of a
  /// table keyed by the attribute's interned text. Passes resolve every
  /// call, invoke and kernel reference on every visit (issue 23: the
  /// string-keyed lookup was 5% of compiling 110,000 functions).
  Function *lookupFunction(const Attr &sym) const;
  /// `base_N` for the smallest N (from the last one handed out for `base`)
  /// that names no function: O(1) amortized per new function.
  std::string freshFunctionName(const std::string &base);

private:
  friend class Function;
  void renameFunction(Function *f, const std::string &oldName);
  Context &ctx_;
  std::string name_;
  std::vector<std::unique_ptr<AdtDecl>> adts_;
  std::vector<std::unique_ptr<Global>> globals_;
  std::vector<std::unique_ptr<Function>> funcs_;
  std::unordered_map<std::string, AdtDecl *> adtIndex_;
  std::unordered_map<std::string, Global *> globalIndex_;
  /// Transparent: lookupFunction hashes the caller's string_view, with no
  /// std::string made per lookup (every call, invoke and kernel reference
  /// resolves its callee here).
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, Function *, NameHash, std::equal_to<>> funcIndex_;
  /// funcIndex_ again, keyed by the interned name (Attr::intern): kept in
  /// step with it by syncSymbol after every change of funcIndex_.
  FlatMap<const std::string *, Function *> symIndex_;
  void syncSymbol(const std::string &name);
  std::unordered_map<std::string, unsigned> freshCounters_;
};

} // namespace nimble::ir

#endif // NIMBLE_IR_IR_H
