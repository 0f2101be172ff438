//===- IR.cpp - Values, operations, blocks, functions, modules ------------===//

#include "ir/IR.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>

namespace nimble::ir {

// A million-op program is a million of each: keep them in their size
// classes (issue 23). Operation: 128 bytes; an operand: 32.
static_assert(sizeof(Operation) <= 128, "Operation outgrew its 128-byte size class");
static_assert(sizeof(OpOperand) <= 32, "OpOperand outgrew 32 bytes");
static_assert(sizeof(OpResult) <= 64, "OpResult outgrew its 64-byte size class");


//===-- Value --------------------------------------------------------------===//

Value::~Value() { assert(!firstUse_ && "destroying a value that still has uses"); }

const std::string &Value::noName() {
  static const std::string empty;
  return empty;
}

void Value::setName(std::string n) {
  // An existing string is reassigned, not replaced, so that a reference a
  // caller holds to name() stays valid (as when the name was a member).
  if (name_) *name_ = std::move(n);
  else if (!n.empty()) name_ = std::make_unique<std::string>(std::move(n));
}

Value::use_iterator &Value::use_iterator::operator++() {
  u_ = u_->nextUse();
  return *this;
}

bool Value::hasOneUse() const { return firstUse_ && !firstUse_->nextUse(); }

size_t Value::numUses() const {
  size_t n = 0;
  for (OpOperand *u = firstUse_; u; u = u->nextUse()) ++n;
  return n;
}

void Value::replaceAllUsesWith(Value *v) {
  assert(v != this && "replacing a value with itself");
  while (firstUse_) firstUse_->set(v);
}

std::vector<Operation *> Value::users() const {
  std::vector<Operation *> r;
  for (OpOperand *u = firstUse_; u; u = u->nextUse()) r.push_back(u->owner());
  return r;
}

Location Value::loc() const {
  switch (kind_) {
  case Kind::OpResult: return static_cast<const OpResult *>(this)->owner()->loc();
  case Kind::BlockArgument: return static_cast<const BlockArgument *>(this)->argLoc();
  case Kind::Global: return static_cast<const Global *>(this)->declLoc();
  }
  return {};
}

Operation *Value::definingOp() const {
  if (kind_ != Kind::OpResult) return nullptr;
  return static_cast<const OpResult *>(this)->owner();
}

//===-- OpOperand ----------------------------------------------------------===//

void OpOperand::link() {
  if (!value_) return;
  next_ = value_->firstUse_;
  if (next_) next_->prevNext_ = &next_;
  prevNext_ = &value_->firstUse_;
  value_->firstUse_ = this;
}

void OpOperand::unlink() {
  if (!prevNext_) return;
  *prevNext_ = next_;
  if (next_) next_->prevNext_ = prevNext_;
  next_ = nullptr;
  prevNext_ = nullptr;
}

void OpOperand::set(Value *v) {
  unlink();
  value_ = v;
  link();
}

unsigned OpOperand::index() const {
  return static_cast<unsigned>(this - &owner_->opOperand(0));
}

uint32_t newScratchTag() {
  static std::atomic<uint32_t> next{0};
  return 0x80000000u | (next.fetch_add(1, std::memory_order_relaxed) & 0x7FFFFFFFu);
}

//===-- Operation ----------------------------------------------------------===//

std::vector<Attr> defaultAttrs(OpCode code) {
  std::vector<Attr> attrs;
  attrs.reserve(opInfo(code).attrs.size()); // one allocation, not one per growth
  for (const AttrSpec &s : opInfo(code).attrs)
    attrs.push_back(s.defaultValue ? *s.defaultValue : Attr());
  return attrs;
}

std::unique_ptr<Operation> Operation::create(OpCode code, Location loc,
                                             const std::vector<Value *> &operands,
                                             const std::vector<Type> &resultTypes,
                                             std::vector<Attr> attrs,
                                             std::vector<Successor> successors) {
  // One allocation: the results, the op, the attributes (see resultsBase,
  // attrsBase).
  static_assert(sizeof(OpResult) % alignof(Operation) == 0 && sizeof(Operation) % alignof(Attr) == 0 &&
                sizeof(Attr) % alignof(OpOperand) == 0 && sizeof(Operation) % alignof(OpOperand) == 0 &&
                alignof(OpResult) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__ &&
                alignof(Attr) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__ &&
                alignof(OpOperand) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  assert(attrs.size() == opInfo(code).attrs.size() && "attribute list does not match schema");
  const size_t n = resultTypes.size();
  char *mem = static_cast<char *>(::operator new(n * sizeof(OpResult) + sizeof(Operation) +
                                                 attrs.size() * sizeof(Attr) + operands.size() * sizeof(OpOperand)));
  std::unique_ptr<Operation> op(new (mem + n * sizeof(OpResult)) Operation(code, loc));
  // The counts grow as each part is made: a destroying delete destroys
  // exactly what exists.
  for (unsigned i = 0; i < n; ++i) {
    new (mem + i * sizeof(OpResult)) OpResult(op.get(), i, resultTypes[i]);
    op->numResults_ = i + 1;
  }
  for (size_t i = 0; i < attrs.size(); ++i) {
    new (op->attrsBase() + i) Attr(std::move(attrs[i]));
    op->numAttrs_ = static_cast<uint16_t>(i + 1);
  }
  OpOperand *slots = op->inlineOperands();
  for (size_t i = 0; i < operands.size(); ++i) new (slots + i) OpOperand();
  op->inlineCapacity_ = static_cast<unsigned>(operands.size());
  op->setOperands(operands);
  assert((successors.empty() || op->isTerminator()) && "only a terminator has successors");
  if (!successors.empty()) op->extra().succs = std::move(successors);
  return op;
}

Operation::~Operation() {
  assert(!hasResultUses() && "destroying an operation whose results are still used");
  dropAllReferences();
}

void Operation::operator delete(Operation *op, std::destroying_delete_t) {
  const unsigned n = op->numResults_, na = op->numAttrs_, no = op->inlineCapacity_;
  OpResult *results = op->resultsBase();
  Attr *attrs = op->attrsBase();
  OpOperand *slots = op->inlineOperands();
  op->~Operation();
  for (unsigned i = 0; i < no; ++i) slots[i].~OpOperand();
  for (unsigned i = 0; i < na; ++i) attrs[i].~Attr();
  for (unsigned i = 0; i < n; ++i) results[i].~OpResult();
  ::operator delete(static_cast<void *>(results));
}

std::vector<Value *> Operation::operands() const {
  std::vector<Value *> r;
  r.reserve(numOperands_);
  const OpOperand *ops = slots();
  for (unsigned i = 0; i < numOperands_; ++i) r.push_back(ops[i].get());
  return r;
}

void Operation::setOperands(const std::vector<Value *> &vals) {
  dropAllReferences();
  if (extra_) {
    extra_->outOfLine.reset();
    extra_->operands.clear(); // a new list: where it was written is unknown
  }
  numOperands_ = static_cast<unsigned>(vals.size());
  if (numOperands_ > inlineCapacity_) extra().outOfLine.reset(new OpOperand[numOperands_]);
  OpOperand *ops = slots();
  for (unsigned i = 0; i < numOperands_; ++i) {
    ops[i].owner_ = this;
    ops[i].set(vals[i]);
  }
}

void Operation::dropAllReferences() {
  OpOperand *ops = slots();
  for (unsigned i = 0; i < numOperands_; ++i) ops[i].set(nullptr);
}

Location Operation::operandLoc(unsigned i) const {
  Location l = operand(i) && extra_ && i < extra_->operands.size() ? extra_->operands[i] : Location();
  return l.known() ? l : loc_;
}

void Operation::setOperandLoc(unsigned i, Location l) {
  assert(i < numOperands_ && "op has no such operand");
  std::vector<Location> &at = extra().operands;
  if (at.size() < numOperands_) at.resize(numOperands_);
  at[i] = l;
}

Location Operation::attrLoc(unsigned i) const {
  return extra_ && i < extra_->attrs.size() && extra_->attrs[i].known() ? extra_->attrs[i] : loc_;
}

void Operation::setAttrLoc(unsigned i, Location l) {
  assert(i < numAttrs_ && "op has no such attribute");
  std::vector<Location> &at = extra().attrs;
  if (at.size() < numAttrs_) at.resize(numAttrs_);
  at[i] = l;
}

const std::vector<Location> &Operation::memberLocs() const {
  static const std::vector<Location> none;
  return extra_ ? extra_->members : none;
}

void Operation::setMemberLocs(std::vector<Location> locs) {
  if (!extra_ && locs.empty()) return;
  extra().members = std::move(locs);
}

std::vector<Value *> Operation::results() const {
  std::vector<Value *> r;
  r.reserve(numResults_);
  for (Value *v : resultValues()) r.push_back(v);
  return r;
}

bool Operation::hasResultUses() const {
  for (Value *v : resultValues())
    if (v->hasUses()) return true;
  return false;
}

const Attr &Operation::attr(std::string_view name) const {
  int i = info().attrIndex(name);
  assert(i >= 0 && "op has no such attribute");
  return attrsBase()[i];
}

void Operation::setAttr(std::string_view name, Attr a) {
  int i = info().attrIndex(name);
  assert(i >= 0 && "op has no such attribute");
  attrsBase()[i] = std::move(a);
  if (extra_ && static_cast<size_t>(i) < extra_->attrs.size()) extra_->attrs[static_cast<size_t>(i)] = Location();
}

std::vector<Value *> Operation::successorOperands(unsigned i) const {
  const Successor &s = successors()[i];
  std::vector<Value *> r;
  for (unsigned k = 0; k < s.operandCount; ++k) r.push_back(operand(s.operandBegin + k));
  return r;
}

unsigned Operation::numNonSuccessorOperands() const {
  unsigned first = numOperands_;
  for (const Successor &s : successors())
    if (s.operandCount) first = std::min(first, s.operandBegin);
  return first;
}

const std::vector<Successor> &Operation::noSuccessors() {
  static const std::vector<Successor> none;
  return none;
}

std::vector<Successor> &Operation::mutableSuccessors() {
  if (!isTerminator()) {
    // Only a terminator's list may be changed (or assigned); anything else
    // reads the shared empty list, which nobody modifies.
    return const_cast<std::vector<Successor> &>(noSuccessors());
  } else if (Function *f = function()) {
    f->cfgChanged(); // the caller may change the edges
  }
  return extra().succs;
}

Function *Operation::function() const { return block_ ? block_->function() : nullptr; }

void Operation::erase() {
  assert(!hasResultUses() && "erasing an operation whose results are still used");
  remove().reset();
}

std::unique_ptr<Operation> Operation::remove() {
  assert(block_ && "operation is not in a block");
  block_->unlink(this);
  return std::unique_ptr<Operation>(this);
}

void Operation::moveBefore(Operation *other) {
  std::unique_ptr<Operation> self = remove();
  other->block()->insertBefore(other, std::move(self));
}

bool Operation::isBeforeInBlock(const Operation *other) const {
  assert(block_ && block_ == other->block_);
  if (!block_->orderValid_) block_->renumber();
  return order_ < other->order_;
}

//===-- Block --------------------------------------------------------------===//

Block::~Block() {
  // Ops may use each other (and this block's arguments): drop references first.
  for (Operation *op = first_; op; op = op->next_) op->dropAllReferences();
  while (first_) {
    Operation *op = first_;
    unlink(op);
    delete op;
  }
}

bool Block::isEntry() const { return func_ && func_->entry() == this; }

std::vector<Value *> Block::arguments() const {
  std::vector<Value *> r;
  for (auto &a : args_) r.push_back(a.get());
  return r;
}

std::vector<Type> Block::argumentTypes() const {
  std::vector<Type> r;
  for (auto &a : args_) r.push_back(a->type());
  return r;
}

BlockArgument *Block::addArgument(Type t, Location loc) {
  args_.push_back(std::make_unique<BlockArgument>(this, numArguments(), t, loc));
  return args_.back().get();
}

void Block::eraseArgument(unsigned i) {
  assert(!args_[i]->hasUses() && "erasing a block argument that is still used");
  args_.erase(args_.begin() + i);
  for (unsigned k = i; k < args_.size(); ++k) args_[k]->index_ = k;
}

size_t Block::size() const {
  size_t n = 0;
  for (Operation *op = first_; op; op = op->next_) ++n;
  return n;
}

std::vector<Operation *> Block::opsSnapshot() const {
  std::vector<Operation *> r;
  for (Operation *op = first_; op; op = op->next_) r.push_back(op);
  return r;
}

void Block::renumber() const {
  uint64_t n = 0;
  for (Operation *op = first_; op; op = op->next_) op->order_ = n += kOrderStride;
  orderValid_ = true;
}

Operation *Block::push_back(std::unique_ptr<Operation> op) {
  Operation *o = op.release();
  o->block_ = this;
  if (orderValid_) {
    uint64_t last = last_ ? last_->order_ : 0;
    if (last <= UINT64_MAX - kOrderStride) o->order_ = last + kOrderStride;
    else orderValid_ = false;
  }
  o->prev_ = last_;
  o->next_ = nullptr;
  if (last_) last_->next_ = o;
  else first_ = o;
  last_ = o;
  if (func_) func_->cfgChanged(); // a new last op: the terminator may change
  return o;
}

Operation *Block::insertBefore(Operation *before, std::unique_ptr<Operation> op) {
  if (!before) return push_back(std::move(op));
  assert(before->block_ == this);
  Operation *o = op.release();
  o->block_ = this;
  o->next_ = before;
  o->prev_ = before->prev_;
  if (before->prev_) before->prev_->next_ = o;
  else first_ = o;
  before->prev_ = o;
  if (orderValid_) {
    // Halve the gap before `before`; when there is none, relabel a range.
    uint64_t lo = o->prev_ ? o->prev_->order_ : 0;
    if (before->order_ - lo > 1) o->order_ = lo + (before->order_ - lo) / 2;
    else relabelAround(o, lo);
  }
  return o;
}

// Order maintenance (Bender, Cole, Demaine, Farach-Colton, Zito: "Two
// simplified algorithms for maintaining order in a list", 2002): find the
// smallest aligned range of 2^i labels around the insertion point whose ops
// (with `o`) have density below T^-i (T = 1.5), and spread them evenly over
// it. Amortized O(log^2 n) per insertion, so that inserting repeatedly at
// one point (kills after one op, constants before the first) stays cheap,
// where renumbering the whole block would make it quadratic.
void Block::relabelAround(Operation *o, uint64_t x) {
  double capacity = 1.0; // 2^i / T^i
  // The ranges are nested (each aligned range of 2^i labels around x holds
  // the one of 2^(i-1)), so each level extends the last one's walk instead
  // of starting again from `o`: a relabel walks only the ops it relabels.
  Operation *first = o, *last = o;
  size_t count = 1;
  for (unsigned i = 1; i < 64; ++i) {
    capacity *= 2.0 / 1.5;
    uint64_t size = uint64_t(1) << i;
    uint64_t base = x & ~(size - 1);
    while (first->prev_ && first->prev_->order_ >= base) {
      first = first->prev_;
      ++count;
    }
    while (last->next_ && last->next_->order_ - base < size) {
      last = last->next_;
      ++count;
    }
    if (static_cast<double>(count) >= capacity) continue;
    uint64_t step = size / (count + 1);
    if (step == 0) continue;
    uint64_t label = base;
    for (Operation *op = first;; op = op->next_) {
      op->order_ = label += step;
      if (op == last) break;
    }
    return;
  }
  orderValid_ = false; // no room anywhere: renumber at the next query
}

void Block::unlink(Operation *op) {
  if (op->prev_) op->prev_->next_ = op->next_;
  else first_ = op->next_;
  if (op->next_) {
    op->next_->prev_ = op->prev_;
  } else {
    last_ = op->prev_;
    if (func_) func_->cfgChanged();
  }
  op->prev_ = op->next_ = nullptr;
  op->block_ = nullptr;
}

std::vector<Block *> Block::successors() const {
  std::vector<Block *> r;
  if (Operation *t = terminator())
    for (const Successor &s : t->successors()) r.push_back(s.block);
  return r;
}

//===-- Function -----------------------------------------------------------===//

Function::~Function() {
  // Blocks may use values of other blocks: drop every reference first.
  for (auto &b : blocks_)
    for (Operation &op : *b) op.dropAllReferences();
}

const Attr *Function::fnAttr(std::string_view name) const {
  for (auto &[n, a] : fnAttrs_)
    if (n == name) return &a;
  return nullptr;
}

void Function::setName(std::string n) {
  std::string old = std::move(name_);
  name_ = std::move(n);
  if (module_) module_->renameFunction(this, old);
}

Block *Function::addBlock(std::unique_ptr<Block> b) {
  cfgChanged();
  b->func_ = this;
  blocks_.push_back(std::move(b));
  return blocks_.back().get();
}

Block *Function::insertBlockAfter(Block *after, std::unique_ptr<Block> b) {
  cfgChanged();
  b->func_ = this;
  if (deferInsertions_) {
    Block *raw = b.get();
    insertedAfter_[after].push_back(raw);
    blocks_.push_back(std::move(b));
    return raw;
  }
  auto it = std::find_if(blocks_.begin(), blocks_.end(),
                         [after](const std::unique_ptr<Block> &p) { return p.get() == after; });
  assert(it != blocks_.end());
  return blocks_.insert(it + 1, std::move(b))->get();
}

void Function::endBlockInsertions() {
  cfgChanged();
  deferInsertions_ = false;
  if (insertedAfter_.empty()) return;
  // Each block is followed by the blocks inserted after it, the latest
  // first, each followed in turn by its own (a pre-order walk).
  std::unordered_map<const Block *, std::unique_ptr<Block>> owned;
  std::vector<Block *> roots;
  std::unordered_set<const Block *> inserted;
  for (auto &[after, list] : insertedAfter_) inserted.insert(list.begin(), list.end());
  for (auto &b : blocks_) {
    if (!inserted.count(b.get())) roots.push_back(b.get());
    owned[b.get()] = std::move(b);
  }
  blocks_.clear();
  std::vector<Block *> stack;
  for (Block *r : roots) {
    stack.push_back(r);
    while (!stack.empty()) {
      Block *b = stack.back();
      stack.pop_back();
      blocks_.push_back(std::move(owned[b]));
      auto it = insertedAfter_.find(b);
      if (it != insertedAfter_.end())
        for (Block *c : it->second) stack.push_back(c); // latest on top
    }
  }
  insertedAfter_.clear();
}

void Function::eraseBlock(Block *b) {
  assert(!deferInsertions_ && "erasing a block while insertions are deferred");
  cfgChanged();
  for (Operation &op : *b) op.dropAllReferences();
  for (auto &other : blocks_)
    if (Operation *t = other->terminator())
      for ([[maybe_unused]] const Successor &s : t->successors())
        assert((other.get() == b || s.block != b) && "erasing a block that is still a target");
  auto it = std::find_if(blocks_.begin(), blocks_.end(),
                         [b](const std::unique_ptr<Block> &p) { return p.get() == b; });
  assert(it != blocks_.end());
  blocks_.erase(it);
}

void Function::eraseBlocks(const std::vector<Block *> &bs) {
  assert(!deferInsertions_ && "erasing blocks while insertions are deferred");
  cfgChanged();
  std::unordered_set<const Block *> gone(bs.begin(), bs.end());
  for (Block *b : bs)
    for (Operation &op : *b) op.dropAllReferences();
  for ([[maybe_unused]] auto &other : blocks_) {
#ifndef NDEBUG
    if (gone.count(other.get())) continue;
    if (Operation *t = other->terminator())
      for (const Successor &s : t->successors())
        assert(!gone.count(s.block) && "erasing a block that is still a target");
#endif
  }
  blocks_.erase(std::remove_if(blocks_.begin(), blocks_.end(),
                               [&](const std::unique_ptr<Block> &p) { return gone.count(p.get()) != 0; }),
                blocks_.end());
}

std::vector<Block *> Function::reversePostOrder() const {
  if (rpoEpoch_ != cfgEpoch_) {
    rpo_ = computeReversePostOrder();
    rpoEpoch_ = cfgEpoch_;
  }
#ifndef NDEBUG
  // A change that did not call cfgChanged would leave a stale order here.
  else if (rpo_ != computeReversePostOrder()) {
    std::fprintf(stderr, "internal error: @%s: the kept reverse post-order is stale (a CFG change "
                         "that did not call Function::cfgChanged)\n", name_.c_str());
    std::abort();
  }
#endif
  return rpo_;
}

std::vector<Block *> Function::computeReversePostOrder() const {
  std::vector<Block *> post;
  if (!entry()) return post;
  // Visited marks live in the blocks (Block::visited_), stamped with this
  // walk's number: a hash set of visited blocks per walk cost more than the
  // walk itself on functions of many blocks, and passes walk often.
  static std::atomic<uint64_t> walks{0};
  const uint64_t walk = walks.fetch_add(1, std::memory_order_relaxed) + 1;
  auto visit = [walk](Block *b) {
    if (b->visited_ == walk) return false;
    b->visited_ = walk;
    return true;
  };
  // Iterative DFS: (block, its next successor, the end of its successors),
  // the successor list read once per block (issue 23: a function of tens
  // of thousands of blocks is walked by most passes).
  struct Frame {
    Block *b;
    const Successor *next, *end;
  };
  auto frame = [](Block *b) {
    const Operation *t = b->terminator();
    if (!t) return Frame{b, nullptr, nullptr};
    const std::vector<Successor> &ss = t->successors();
    return Frame{b, ss.data(), ss.data() + ss.size()};
  };
  std::vector<Frame> stack = {frame(entry())};
  visit(entry());
  while (!stack.empty()) {
    Frame &f = stack.back();
    if (f.next != f.end) {
      Block *s = (f.next++)->block;
      if (s && visit(s)) stack.push_back(frame(s));
    } else {
      post.push_back(f.b);
      stack.pop_back();
    }
  }
  std::reverse(post.begin(), post.end());
  return post;
}

//===-- Module -------------------------------------------------------------===//

int AdtDecl::ctorIndex(std::string_view n, size_t hint) const {
  if (hint < ctors.size() && ctors[hint].name == n) return static_cast<int>(hint);
  if (ctors.size() <= 8) {
    for (size_t i = 0; i < ctors.size(); ++i)
      if (ctors[i].name == n) return static_cast<int>(i);
    return -1;
  }
  if (ctorIndexCacheSize != ctors.size()) {
    ctorIndexCache.clear();
    for (size_t i = ctors.size(); i-- > 0;) ctorIndexCache[ctors[i].name] = static_cast<int>(i);
    ctorIndexCacheSize = ctors.size();
  }
  auto it = ctorIndexCache.find(n);
  return it == ctorIndexCache.end() ? -1 : it->second;
}

Module::~Module() {
  // Functions use globals: destroy functions first.
  funcs_.clear();
}

// The symbol tables map a name to the first symbol added under it; erasing
// or renaming that symbol looks for another of the same name (only invalid
// IR has two, so the scan is rare).

AdtDecl *Module::addAdt(std::unique_ptr<AdtDecl> a) {
  adts_.push_back(std::move(a));
  adtIndex_.emplace(adts_.back()->name, adts_.back().get());
  return adts_.back().get();
}

Global *Module::addGlobal(std::unique_ptr<Global> g) {
  globals_.push_back(std::move(g));
  globalIndex_.emplace(globals_.back()->name(), globals_.back().get());
  return globals_.back().get();
}

Function *Module::addFunction(std::unique_ptr<Function> f) {
  f->module_ = this;
  funcs_.push_back(std::move(f));
  funcIndex_.emplace(funcs_.back()->name(), funcs_.back().get());
  syncSymbol(funcs_.back()->name());
  return funcs_.back().get();
}

void Module::syncSymbol(const std::string &name) {
  const std::string *key = Attr::intern(name);
  auto it = funcIndex_.find(name);
  if (it == funcIndex_.end()) {
    symIndex_.erase(key);
    return;
  }
  *symIndex_.tryEmplace(key, it->second).first = it->second;
}

void Module::renameFunction(Function *f, const std::string &oldName) {
  auto it = funcIndex_.find(oldName);
  if (it != funcIndex_.end() && it->second == f) {
    funcIndex_.erase(it);
    for (auto &g : funcs_)
      if (g.get() != f && g->name() == oldName) {
        funcIndex_.emplace(oldName, g.get());
        break;
      }
  }
  // `f` is found under its new name unless an earlier function has it.
  auto [at, inserted] = funcIndex_.emplace(f->name(), f);
  if (!inserted)
    for (auto &g : funcs_) {
      if (g->name() != f->name()) continue;
      at->second = g.get();
      break;
    }
  syncSymbol(oldName);
  syncSymbol(f->name());
}

void Module::eraseFunction(Function *f) {
  auto it = std::find_if(funcs_.begin(), funcs_.end(),
                         [f](const std::unique_ptr<Function> &p) { return p.get() == f; });
  assert(it != funcs_.end());
  std::string name = f->name();
  funcs_.erase(it);
  auto at = funcIndex_.find(name);
  if (at != funcIndex_.end() && at->second == f) {
    funcIndex_.erase(at);
    for (auto &g : funcs_)
      if (g->name() == name) {
        funcIndex_.emplace(name, g.get());
        break;
      }
    syncSymbol(name);
  }
}

void Module::eraseGlobal(Global *g) {
  assert(!g->hasUses() && "erasing a global that is still used");
  auto it = std::find_if(globals_.begin(), globals_.end(),
                         [g](const std::unique_ptr<Global> &p) { return p.get() == g; });
  assert(it != globals_.end());
  std::string name = g->name();
  globals_.erase(it);
  auto at = globalIndex_.find(name);
  if (at != globalIndex_.end() && at->second == g) {
    globalIndex_.erase(at);
    for (auto &o : globals_)
      if (o->name() == name) {
        globalIndex_.emplace(name, o.get());
        break;
      }
  }
}

AdtDecl *Module::lookupAdt(std::string_view n) const {
  auto it = adtIndex_.find(std::string(n));
  return it == adtIndex_.end() ? nullptr : it->second;
}

Global *Module::lookupGlobal(std::string_view n) const {
  auto it = globalIndex_.find(std::string(n));
  return it == globalIndex_.end() ? nullptr : it->second;
}

Function *Module::lookupFunction(std::string_view n) const {
  auto it = funcIndex_.find(n);
  return it == funcIndex_.end() ? nullptr : it->second;
}

Function *Module::lookupFunction(const Attr &sym) const {
  Function *const *f = symIndex_.find(sym.internedStr());
  assert(f ? *f == lookupFunction(sym.getStr()) : !lookupFunction(sym.getStr()));
  return f ? *f : nullptr;
}

std::string Module::freshFunctionName(const std::string &base) {
  unsigned &n = freshCounters_[base];
  for (;; ++n) {
    std::string name = base + "_" + std::to_string(n);
    if (!lookupFunction(name)) return name;
  }
}

} // namespace nimble::ir
