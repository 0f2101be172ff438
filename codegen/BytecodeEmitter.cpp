//===- BytecodeEmitter.cpp - Memory-explicit IR to VM bytecode ------------===//

#include "codegen/BytecodeEmitter.h"

#include "ir/FlatMap.h"
#include "ir/Limits.h"
#include "passes/analysis/Analysis.h"
#include "passes/analysis/Liveness.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <functional>
#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

namespace nimble::codegen {

using namespace nimble::ir;
using vm::Opcode;

std::vector<uint8_t> constantBytes(const DenseValue &v) {
  if (!v.splat) return v.bytes;
  // One element for all (format 1.8): what a splat of more than one
  // element stores; none for an empty shape; the element itself for one.
  if (v.numElements() == 0) return {};
  return v.bytes;
}

namespace {

bool isPrimitive(const Function &f) {
  const Attr *a = f.fnAttr("primitive");
  return a && a->kind() == AttrKind::Bool && a->getBool();
}

/// State shared by the functions of one module.
class ModuleEmitter {
public:
  ModuleEmitter(const Module &m, const GlobalData &globals, vm::Executable &out,
                DiagnosticEngine &diag)
      : m_(m), globals_(globals), out_(out), diag_(diag) {}

  LogicalResult run();

  vm::TypeDesc typeDesc(Type t);
  uint32_t functionIndex(const std::string &name) const { return funcIndex_.at(name); }
  bool hasFunction(const std::string &name) const { return funcIndex_.count(name) != 0; }
  /// Kernel-table index of primitive function `name` (built on first use).
  bool kernelIndex(const Attr &callee, Location loc, uint32_t &idx);
  /// The member locations of a call whose members were written at `site`
  /// (Operation::memberLocs), to record for the call's pc (format 1.7,
  /// VMFunction::sites), or empty when the kernel's own (kernel-locs) are
  /// those. Fuse gives identical groups one function and keeps each group's
  /// member locations on its call; the VM reports a member's run-time error
  /// at its call's member location, so every call shares one descriptor,
  /// one batching entry and one native entry.
  std::vector<vm::SourceLoc> siteLocs(uint32_t idx, const std::vector<Location> &site);
  bool batching(const Function &f, uint32_t idx);
  uint32_t constantIndex(const std::string &name, DType dt, const std::vector<int64_t> &shape,
                         std::vector<uint8_t> bytes);
  uint32_t globalConstant(const Global *g);
  uint32_t string(const std::string &s) { return out_.internString(s); }
  /// A location's file name (interned by the Context: one string per file,
  /// so the table is keyed by its address; every instruction with a
  /// location asks).
  uint32_t fileString(const char *file) {
    auto [it, fresh] = files_.try_emplace(file, 0);
    if (fresh) it->second = out_.internString(file);
    return it->second;
  }
  DiagnosticEngine &diag() { return diag_; }
  const Module &module() const { return m_; }

private:
  const Module &m_;
  const GlobalData &globals_;
  vm::Executable &out_;
  DiagnosticEngine &diag_;
  std::unordered_map<std::string, uint32_t> funcIndex_, adtIndex_;
  /// By the callee's interned name (Attr::internedStr): a kernel call
  /// resolves with one probe.
  FlatMap<const std::string *, uint32_t> kernelIndex_;
  std::unordered_map<const char *, uint32_t> files_;
  std::unordered_map<const Global *, uint32_t> globalIndex_;
  std::map<std::pair<std::string, std::vector<uint8_t>>, uint32_t> literalIndex_;
};

vm::TypeDesc ModuleEmitter::typeDesc(Type t) {
  vm::TypeDesc d;
  switch (t.kind()) {
  case TypeKind::Tensor:
    d.kind = vm::TypeDesc::Kind::Tensor;
    d.dtype = t.dtype();
    d.dims = t.dims();
    break;
  case TypeKind::Tuple:
    d.kind = vm::TypeDesc::Kind::Tuple;
    for (Type e : t.elems()) d.elems.push_back(typeDesc(e));
    break;
  case TypeKind::Adt:
    d.kind = vm::TypeDesc::Kind::Adt;
    d.adt = adtIndex_.at(t.adtName());
    break;
  case TypeKind::Storage:
  case TypeKind::Func:
    d.kind = vm::TypeDesc::Kind::Storage;
    break;
  }
  return d;
}

uint32_t ModuleEmitter::constantIndex(const std::string &name, DType dt,
                                      const std::vector<int64_t> &shape,
                                      std::vector<uint8_t> bytes) {
  std::string key = name + "|" + std::string(dtypeName(dt));
  for (int64_t d : shape) key += "x" + std::to_string(d);
  auto k = std::make_pair(key, bytes);
  if (name.empty()) {
    auto it = literalIndex_.find(k);
    if (it != literalIndex_.end()) return it->second;
  }
  out_.ownedData.push_back(std::move(bytes));
  vm::ConstantDesc c;
  c.name = name;
  c.dtype = dt;
  c.shape = shape;
  c.data = out_.ownedData.back().data();
  c.size = out_.ownedData.back().size();
  c.splat = vm::ConstantDesc::isSplatForm(dt, shape, c.size);
  out_.constants.push_back(std::move(c));
  uint32_t idx = static_cast<uint32_t>(out_.constants.size() - 1);
  if (name.empty()) literalIndex_[k] = idx;
  return idx;
}

uint32_t ModuleEmitter::globalConstant(const Global *g) {
  auto it = globalIndex_.find(g);
  if (it != globalIndex_.end()) return it->second;
  std::vector<uint8_t> bytes;
  auto d = globals_.find(g);
  if (d != globals_.end()) bytes = d->second;
  else if (!g->literal().isNull()) bytes = constantBytes(g->literal().getDense());
  uint32_t idx = constantIndex(g->name(), g->type().dtype(), g->type().dims(), std::move(bytes));
  globalIndex_[g] = idx;
  return idx;
}

bool ModuleEmitter::kernelIndex(const Attr &callee, Location loc, uint32_t &idx) {
  if (const uint32_t *known = kernelIndex_.find(callee.internedStr())) {
    idx = *known;
    return true;
  }
  const std::string &name = callee.getStr();
  const Function *f = m_.lookupFunction(callee);
  if (!f || !isPrimitive(*f) || f->blocks().size() != 1) {
    diag_.error(loc, "@" + name + " is not a primitive function (one block, attribute primitive = true)");
    return false;
  }
  vm::KernelDesc k;
  k.name = name;
  const Block *body = f->entry();
  k.numInputs = body->numArguments();
  for (unsigned i = 0; i < body->numArguments(); ++i) {
    Type t = body->argument(i)->type();
    k.inputDTypes.push_back(t.isTensor() ? t.dtype() : DType::F32);
  }
  std::unordered_map<const Value *, uint32_t> num;
  for (unsigned i = 0; i < body->numArguments(); ++i) num[body->argument(i)] = i;
  uint32_t next = k.numInputs;
  for (const Operation &op : *body) {
    if (op.is(OpCode::Ret)) {
      for (Value *v : op.operandValues()) k.outputs.push_back(num.at(v));
      break;
    }
    if (op.info().relation == Relation::Structural) {
      diag_.error(op.loc(), "'" + std::string(op.name()) + "' cannot be part of a kernel");
      return false;
    }
    vm::KernelDesc::Member mem;
    mem.op = op.code();
    mem.attrs.assign(op.attrs().begin(), op.attrs().end());
    for (Value *v : op.operandValues()) {
      auto n = num.find(v);
      if (n == num.end()) {
        diag_.error(op.loc(), "kernel @" + name + " uses a value defined outside it");
        return false;
      }
      mem.operands.push_back(n->second);
    }
    mem.numResults = op.numResults();
    for (Value *r : op.resultValues()) num[r] = next++;
    if (op.info().shapeMode == ShapeMode::UpperBound) k.upperBound = true;
    k.members.push_back(std::move(mem));
    Location ml = op.loc();
    k.memberLocs.push_back(ml.known() ? vm::SourceLoc{0, fileString(ml.file), ml.line, ml.col}
                                      : vm::SourceLoc{});
  }
  out_.kernels.push_back(std::move(k));
  idx = static_cast<uint32_t>(out_.kernels.size() - 1);
  kernelIndex_.tryEmplace(callee.internedStr(), idx);
  return batching(*f, idx);
}

std::vector<vm::SourceLoc> ModuleEmitter::siteLocs(uint32_t idx, const std::vector<Location> &site) {
  const std::vector<vm::SourceLoc> &own = out_.kernels[idx].memberLocs;
  if (site.size() <= 1 || site.size() != own.size()) return {};
  auto same = [&](Location l, const vm::SourceLoc &o) {
    return l.known() ? o.line == l.line && o.col == l.col && o.file == fileString(l.file) : o.line == 0;
  };
  if (std::equal(site.begin(), site.end(), own.begin(), own.end(), same)) return {};
  std::vector<vm::SourceLoc> locs;
  locs.reserve(site.size());
  for (Location l : site) locs.push_back(l.known() ? vm::SourceLoc{0, fileString(l.file), l.line, l.col} : vm::SourceLoc{});
  return locs;
}

// The auto-batch pass's attributes (passes/lowering/AutoBatch.cpp) as the kernel's
// batching entry; a `rows` kernel brings its batched variant into the table.
bool ModuleEmitter::batching(const Function &f, uint32_t idx) {
  const Attr *mode = f.fnAttr("batch");
  if (!mode) return true;
  const Attr *shared = f.fnAttr("batch_shared");
  const Attr *variant = f.fnAttr("batch_variant");
  vm::KernelBatching b;
  bool rows = mode->kind() == AttrKind::Str && mode->getStr() == "rows";
  bool invariant = mode->kind() == AttrKind::Str && mode->getStr() == "invariant";
  if ((!rows && !invariant) || !shared || shared->kind() != AttrKind::Ints ||
      shared->getInts().size() != out_.kernels[idx].numInputs || (rows && (!variant || variant->kind() != AttrKind::Sym))) {
    diag_.error(f.loc(), "@" + f.name() + " has malformed batching attributes (batch = \"rows\" | \"invariant\", "
                         "batch_shared = [0|1 per input], batch_variant = @f for rows)");
    return false;
  }
  for (int64_t s : shared->getInts()) b.shared.push_back(s ? 1 : 0);
  b.mode = rows ? vm::KernelBatching::Mode::Rows : vm::KernelBatching::Mode::Invariant;
  if (rows && !kernelIndex(*variant, f.loc(), b.batched)) return false;
  if (out_.batching.size() < out_.kernels.size()) out_.batching.resize(out_.kernels.size());
  out_.batching[idx] = std::move(b);
  return true;
}

/// The ScalarI64 operation an `invoke_mut` computes, when its kernel is one
/// integer add / sub / mul / comparison / minimum / maximum of two scalar
/// i64 tensors into one scalar (the loop counters' step and test): the VM
/// runs those as an instruction, without a kernel call.
std::optional<vm::ScalarOp> scalarI64Kernel(const Operation &invoke, const Module &m,
                                            const std::function<bool(const Value *)> &cpuStorageArg) {
  if (invoke.numOperands() != 3 || invoke.intAttr("num_inputs") != 2) return std::nullopt;
  const Function *f = m.lookupFunction(invoke.attr("callee"));
  if (!f || f->blocks().size() != 1) return std::nullopt;
  const Block *body = f->entry();
  auto it = body->begin();
  if (it == body->end()) return std::nullopt;
  const Operation &o = *it;
  if (++it == body->end() || !it->is(OpCode::Ret) || it->numOperands() != 1 || it->operand(0) != o.result() ||
      o.numOperands() != 2 || o.operand(0) != body->argument(0) || o.operand(1) != body->argument(1))
    return std::nullopt;
  auto scalar = [](const Value *v, DType dt) {
    Type t = v->type();
    return t.isTensor() && t.rank() == 0 && t.dtype() == dt;
  };
  if (!scalar(invoke.operand(0), DType::I64) || !scalar(invoke.operand(1), DType::I64)) return std::nullopt;
  using vm::ScalarOp;
  std::optional<ScalarOp> r;
  switch (o.code()) {
  case OpCode::Add: r = ScalarOp::Add; break;
  case OpCode::Sub: r = ScalarOp::Sub; break;
  case OpCode::Mul: r = ScalarOp::Mul; break;
  case OpCode::Minimum: r = ScalarOp::Min; break;
  case OpCode::Maximum: r = ScalarOp::Max; break;
  case OpCode::Equal: r = ScalarOp::Eq; break;
  case OpCode::NotEqual: r = ScalarOp::Ne; break;
  case OpCode::Less: r = ScalarOp::Lt; break;
  case OpCode::LessEqual: r = ScalarOp::Le; break;
  case OpCode::Greater: r = ScalarOp::Gt; break;
  case OpCode::GreaterEqual: r = ScalarOp::Ge; break;
  default: return std::nullopt;
  }
  DType out = vm::scalarOpCompares(static_cast<uint32_t>(*r)) ? DType::I1 : DType::I64;
  if (!scalar(invoke.operand(2), out) || !scalar(o.result(), out)) return std::nullopt;
  // Only where the result's memory is on the CPU (place-devices keeps scalar
  // kernels there); anything else stays a kernel call.
  // A storage block argument (plan-memory's rotating storages of a loop
  // counter) qualifies when every storage reaching it is on the CPU.
  const Operation *alloc = invoke.operand(2)->definingOp();
  if (!alloc || !alloc->is(OpCode::AllocTensor)) return std::nullopt;
  const Operation *storage = alloc->operand(0)->definingOp();
  if (!storage && cpuStorageArg && cpuStorageArg(alloc->operand(0))) return r;
  if (!storage || !storage->is(OpCode::AllocStorage) || storage->strAttr("device") != "cpu") return std::nullopt;
  return r;
}

/// Emits one function.
class FunctionEmitter {
public:
  FunctionEmitter(ModuleEmitter &me, const Function &f, vm::VMFunction &out)
      : me_(me), f_(f), out_(out) {}
  LogicalResult run();

private:
  uint32_t reg(const Value *v);
  uint32_t fresh() { return next_++; }
  /// Assigns every value of the function its register (regs_, next_).
  void allocateRegisters();
  /// Starts an instruction: records its pc and source location.
  size_t begin(Opcode op, Location loc);
  /// Before begin() of a call of kernel `k` by `op`: records the call's own
  /// member locations when they are not the kernel's (ModuleEmitter::siteLocs).
  void site(uint32_t k, const Operation &op) {
    const std::vector<Location> &at = op.memberLocs();
    if (at.empty()) return;
    std::vector<vm::SourceLoc> locs = me_.siteLocs(k, at);
    if (locs.empty()) return;
    const uint32_t pc = static_cast<uint32_t>(out_.code.size()), n = static_cast<uint32_t>(locs.size());
    // A call's ShapeFunc and InvokePacked share one range of the table.
    std::vector<vm::SourceLoc> &table = out_.siteMemberLocs;
    if (!out_.sites.empty() && out_.sites.back().count == n &&
        std::equal(locs.begin(), locs.end(), table.begin() + out_.sites.back().first,
                   [](const vm::SourceLoc &a, const vm::SourceLoc &b) {
                     return a.file == b.file && a.line == b.line && a.col == b.col;
                   })) {
      out_.sites.push_back({pc, out_.sites.back().first, n});
      return;
    }
    out_.sites.push_back({pc, static_cast<uint32_t>(table.size()), n});
    table.insert(table.end(), locs.begin(), locs.end());
  }
  void word(uint32_t w) { out_.code.push_back(w); }
  void i64(int64_t v) {
    word(static_cast<uint32_t>(static_cast<uint64_t>(v)));
    word(static_cast<uint32_t>(static_cast<uint64_t>(v) >> 32));
  }
  void regList(const std::vector<uint32_t> &rs) {
    word(static_cast<uint32_t>(rs.size()));
    for (uint32_t r : rs) word(r);
  }
  std::vector<uint32_t> regs(const std::vector<Value *> &vs) {
    std::vector<uint32_t> r;
    for (Value *v : vs) r.push_back(reg(v));
    return r;
  }
  /// A jump operand to `target`, patched when the target's pc is known.
  void jumpTo(size_t instrStart, const Block *target) {
    fixups_.push_back({out_.code.size(), instrStart, target, SIZE_MAX});
    word(0);
  }
  void jumpToPc(size_t instrStart, size_t padId) {
    fixups_.push_back({out_.code.size(), instrStart, nullptr, padId});
    word(0);
  }
  /// Copies `srcs` into `dsts` as if simultaneously (block arguments).
  /// `types` are the arguments' types: a temporary that a cycle of moves
  /// goes through is released afterwards when it holds a tensor or storage.
  void parallelMove(const std::vector<uint32_t> &srcs, const std::vector<uint32_t> &dsts,
                    const std::vector<Type> &types, Location loc);
  /// The edge from `term` to its successor `k`: the moves into the block
  /// arguments, then the release of each value passed that dies on the
  /// edge (edgeReleases).
  void edgeMoves(const Operation &term, unsigned k);
  /// The registers the edge releases after its moves: a killable value
  /// (passes::killable) passed to a block argument and not live into the
  /// successor, whose register receives no argument (if it does, the
  /// argument owns the object or the move overwrote it). The branch hands
  /// the value over (docs/LangRef.md, `br`), so memory planning places no
  /// kill on the edge for it. Each with whether it holds a storage.
  std::vector<std::pair<uint32_t, bool>> edgeReleases(const Operation &term, unsigned k);
  LogicalResult emitOp(const Operation &op);
  std::optional<vm::ScalarOp> scalarI64Kernel(const Operation &op) {
    return codegen::scalarI64Kernel(op, me_.module(), [this](const Value *v) { return cpuStorageArg(v); });
  }
  /// Whether storage block argument `v` only ever holds CPU storages: every
  /// branch operand passed to it is a cpu alloc_storage or such an argument
  /// (a fixpoint over the function's storage arguments, built on first use).
  bool cpuStorageArg(const Value *v);
  std::unordered_map<const Value *, bool> cpuStorageArgs_;
  bool cpuStorageArgsBuilt_ = false;
  LogicalResult emitTerminator(const Operation &op);

  ModuleEmitter &me_;
  const Function &f_;
  vm::VMFunction &out_;
  /// Registers, indexed by the values' Liveness numbers (live_ lives while
  /// the function is emitted, so a number is a load from the value's
  /// scratch word, not a hash lookup); globals in `globalRegs_`.
  std::unique_ptr<passes::Liveness> live_;
  std::vector<uint32_t> regById_;
  std::unordered_map<const Value *, uint32_t> globalRegs_;
  /// The globals the function uses, in the order of their first use.
  std::vector<const Global *> globals_;
  static constexpr uint32_t kNoReg = UINT32_MAX;
  /// The register slot of `v` (kNoReg when unassigned).
  uint32_t &slot(const Value *v) {
    int id = live_->id(v);
    if (id >= 0) return regById_[static_cast<size_t>(id)];
    return globalRegs_.try_emplace(v, kNoReg).first->second;
  }
  bool hasReg(const Value *v) { return slot(v) != kNoReg; }
  uint32_t next_ = 0;
  struct Fixup {
    size_t word, instr;
    const Block *block;
    size_t pad;
  };
  std::vector<Fixup> fixups_;
  ir::FlatMap<const Block *, size_t> blockPc_;
  /// Pads (move sequences before a jump into a block) emitted after the body.
  struct Pad {
    const Operation *term;
    unsigned succ;
  };
  std::vector<Pad> pads_;
  std::vector<size_t> padPc_;
};

uint32_t FunctionEmitter::reg(const Value *v) {
  uint32_t &r = slot(v);
  if (r == kNoReg) r = fresh();
  return r;
}

size_t FunctionEmitter::begin(Opcode op, Location loc) {
  size_t pc = out_.code.size();
  // The source map is a line table (findSourceLoc: the last entry at or
  // before a pc), so an entry is written only where the location changes: a
  // kernel call's 8 instructions share one op's location (issue 23: at a
  // million ops the map was half the functions section). An instruction
  // without a location after one with gets a line-0 entry, so that it is not
  // reported at its neighbour's.
  std::vector<vm::SourceLoc> &map = out_.sourceMap;
  if (loc.known()) {
    uint32_t file = me_.fileString(loc.file);
    if (map.empty() || map.back().file != file || map.back().line != loc.line || map.back().col != loc.col)
      map.push_back({static_cast<uint32_t>(pc), file, loc.line, loc.col});
  } else if (!map.empty() && map.back().line != 0) {
    map.push_back({static_cast<uint32_t>(pc), 0, 0, 0});
  }
  word(static_cast<uint32_t>(op));
  return pc;
}

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

bool FunctionEmitter::cpuStorageArg(const Value *v) {
  if (!cpuStorageArgsBuilt_) {
    cpuStorageArgsBuilt_ = true;
    // incoming[arg]: the values branches pass to each storage block argument.
    std::unordered_map<const Value *, std::vector<const Value *>> incoming;
    for (const auto &b : f_.blocks()) {
      const Operation *t = b->terminator();
      if (!t) continue;
      for (const Successor &s : t->successors())
        for (unsigned i = 0; i < s.operandCount; ++i) {
          const Value *a = s.block->argument(i);
          if (a->type().isStorage()) incoming[a].push_back(t->operand(s.operandBegin + i));
        }
    }
    for (const auto &[a, ins] : incoming) cpuStorageArgs_[a] = true;
    for (bool changed = true; changed;) { // greatest fixpoint: a cycle of arguments is fine
      changed = false;
      for (const auto &[a, ins] : incoming) {
        if (!cpuStorageArgs_[a]) continue;
        for (const Value *in : ins) {
          const Operation *d = in->definingOp();
          bool ok = d ? d->is(OpCode::AllocStorage) && d->strAttr("device") == "cpu"
                      : cpuStorageArgs_.count(in) && cpuStorageArgs_[in];
          if (!ok) {
            cpuStorageArgs_[a] = false;
            changed = true;
            break;
          }
        }
      }
    }
  }
  auto it = cpuStorageArgs_.find(v);
  return it != cpuStorageArgs_.end() && it->second;
}

LogicalResult FunctionEmitter::run() {
  out_.name = f_.name();
  const Block *entry = f_.entry();
  allocateRegisters();
  // A big function's code is reserved at once, at a generous bound (about
  // 5.5 words per value are written at a million ops): its pages become
  // resident only as they are written, where growing by doubling held the
  // old and the new array at once (issue 23: 164 MB of code).
  if (size_t bound = live_->numValues() * 8; bound >= (size_t(1) << 18)) out_.code.reserve(bound);
  for (unsigned i = 0; i < entry->numArguments(); ++i) {
    reg(entry->argument(i));
    out_.paramNames.push_back(entry->argument(i)->name());
  }
  for (Type t : f_.argTypes()) out_.paramTypes.push_back(me_.typeDesc(t));
  for (Type t : f_.resultTypes()) out_.resultTypes.push_back(me_.typeDesc(t));
  // Globals used here are loaded once, at entry, in the order of their
  // first use (found by allocateRegisters: no second walk of the ops).
  for (const Global *g : globals_) {
    uint32_t c = me_.globalConstant(g);
    begin(Opcode::LoadConst, g->declLoc());
    word(reg(g));
    word(c);
  }
  // Blocks in layout order; a block's first instruction is its pc.
  for (const Block *b : f_.reversePostOrder()) {
    blockPc_.tryEmplace(b, out_.code.size()); // each block is laid out once
    for (const Operation &op : *b)
      if (failed(op.isTerminator() ? emitTerminator(op) : emitOp(op))) return failure();
  }
  // Pads: moves into a successor's arguments, then a jump.
  for (const Pad &p : pads_) {
    padPc_.push_back(out_.code.size());
    const Successor &s = p.term->successors()[p.succ];
    if (p.term->is(OpCode::Match)) {
      uint32_t obj = reg(p.term->operand(0));
      for (unsigned i = 0; i < s.block->numArguments(); ++i)
        if (reg(s.block->argument(i)) == obj) {
          // A field lands in the scrutinee's register: read from a copy.
          uint32_t t = fresh();
          begin(Opcode::Move, p.term->loc());
          word(t);
          word(obj);
          obj = t;
          break;
        }
      for (unsigned i = 0; i < s.block->numArguments(); ++i) {
        begin(Opcode::GetField, p.term->loc());
        word(reg(s.block->argument(i)));
        word(obj);
        word(i);
      }
    } else {
      edgeMoves(*p.term, p.succ);
    }
    size_t at = begin(Opcode::Goto, p.term->loc());
    jumpTo(at, s.block);
  }
  for (const Fixup &fx : fixups_) {
    // A successor of a laid-out (reachable) block is laid out too.
    size_t target = fx.block ? *blockPc_.find(fx.block) : padPc_.at(fx.pad);
    out_.code[fx.word] = static_cast<uint32_t>(static_cast<int32_t>(target) - static_cast<int32_t>(fx.instr));
  }
  out_.numRegisters = std::max<uint32_t>(next_, static_cast<uint32_t>(entry->numArguments()));
  // The format's limit (ir/Limits.h): a located error, not an executable the
  // loader would refuse.
  if (out_.numRegisters > limits::kMaxRegisters) {
    me_.diag().error(f_.loc(), "@" + f_.name() + " needs " + std::to_string(out_.numRegisters) +
                               " registers, more than the limit of " +
                               std::to_string(limits::kMaxRegisters) +
                               " (split it into functions)");
    return failure();
  }
  return success();
}

LogicalResult FunctionEmitter::emitTerminator(const Operation &op) {
  Location loc = op.loc();
  auto needsPad = [&](unsigned k) {
    const Successor &s = op.successors()[k];
    if (op.is(OpCode::Match)) return s.block->numArguments() > 0;
    std::vector<uint32_t> src = regs(op.successorOperands(k)), dst = regs(s.block->arguments());
    return src != dst || !edgeReleases(op, k).empty();
  };
  switch (op.code()) {
  case OpCode::Ret: {
    begin(Opcode::Ret, loc);
    regList(regs(op.operands()));
    return success();
  }
  case OpCode::Unreachable: {
    begin(Opcode::Fatal, loc);
    word(me_.string("reached 'unreachable'"));
    return success();
  }
  case OpCode::Br: {
    edgeMoves(op, 0);
    size_t at = begin(Opcode::Goto, loc);
    jumpTo(at, op.successors()[0].block);
    return success();
  }
  case OpCode::CondBr: {
    size_t at = begin(Opcode::If, loc);
    word(reg(op.operand(0)));
    for (unsigned k = 0; k < 2; ++k) {
      if (needsPad(k)) {
        pads_.push_back({&op, k});
        jumpToPc(at, pads_.size() - 1);
      } else {
        jumpTo(at, op.successors()[k].block);
      }
    }
    return success();
  }
  case OpCode::Match: {
    const AdtDecl *adt = me_.module().lookupAdt(op.operand(0)->type().adtName());
    size_t at = begin(Opcode::Switch, loc);
    word(reg(op.operand(0)));
    const Successor *dflt = nullptr;
    std::vector<unsigned> cases;
    for (unsigned k = 0; k < op.successors().size(); ++k) {
      if (op.successors()[k].label.empty()) dflt = &op.successors()[k];
      else cases.push_back(k);
    }
    word(static_cast<uint32_t>(cases.size()));
    for (unsigned k : cases) {
      word(static_cast<uint32_t>(adt->ctorIndex(op.successors()[k].label, k)));
      if (needsPad(k)) {
        pads_.push_back({&op, k});
        jumpToPc(at, pads_.size() - 1);
      } else {
        jumpTo(at, op.successors()[k].block);
      }
    }
    if (dflt) {
      jumpTo(at, dflt->block);
    } else {
      // Every constructor is covered (the verifier checks), so the default is
      // unreachable; it still needs a target: a Fatal right after the Switch
      // (which never falls through).
      size_t dfltWord = out_.code.size();
      word(0);
      size_t fat = begin(Opcode::Fatal, loc);
      word(me_.string("match: no case for the constructor tag"));
      out_.code[dfltWord] = static_cast<uint32_t>(static_cast<int32_t>(fat) - static_cast<int32_t>(at));
    }
    return success();
  }
  default: break;
  }
  me_.diag().error(loc, "cannot emit terminator '" + std::string(op.name()) + "'");
  return failure();
}

LogicalResult FunctionEmitter::emitOp(const Operation &op) {
  Location loc = op.loc();
  auto result = [&](unsigned i = 0) { return reg(op.result(i)); };
  switch (op.code()) {
  case OpCode::Constant: {
    const DenseValue &v = op.attr("value").getDense();
    if (v.dtype == DType::I64 && v.shape.empty()) {
      begin(Opcode::LoadConsti, loc);
      word(result());
      i64(v.getInt(0));
    } else {
      uint32_t c = me_.constantIndex("", v.dtype, v.shape, constantBytes(v));
      begin(Opcode::LoadConst, loc);
      word(result());
      word(c);
    }
    return success();
  }
  case OpCode::AllocStorage: {
    const std::string &dev = op.strAttr("device");
    if (dev != "cpu" && dev != "cuda") {
      me_.diag().error(loc, "unknown device \"" + dev + "\" (expected \"cpu\" or \"cuda\")");
      return failure();
    }
    begin(Opcode::AllocStorage, loc);
    word(result());
    word(reg(op.operand(0)));
    word(static_cast<uint32_t>(op.intAttr("alignment")));
    word(dev == "cuda" ? 1u : 0u);
    return success();
  }
  case OpCode::AllocTensor: {
    DType dt = op.attr("dtype").getDType();
    if (op.numOperands() == 2) {
      begin(Opcode::AllocTensor, loc);
      word(result());
      word(reg(op.operand(0)));
      word(reg(op.operand(1)));
      word(static_cast<uint32_t>(dt));
      const auto &shape = op.attr("shape").getInts();
      word(static_cast<uint32_t>(shape.size()));
      for (int64_t d : shape) i64(d);
    } else {
      begin(Opcode::AllocTensorReg, loc);
      word(result());
      word(reg(op.operand(0)));
      word(reg(op.operand(1)));
      word(static_cast<uint32_t>(dt));
      word(reg(op.operand(2)));
    }
    return success();
  }
  case OpCode::StorageSize:
    begin(Opcode::StorageSize, loc);
    word(result());
    word(reg(op.operand(0)));
    word(static_cast<uint32_t>(op.attr("dtype").getDType()));
    word(static_cast<uint32_t>(op.intAttr("alignment")));
    return success();
  case OpCode::InvokeMut:
    if (std::optional<vm::ScalarOp> sop = scalarI64Kernel(op)) {
      // A loop counter's step or test: a VM instruction, not a kernel call.
      begin(Opcode::ScalarI64, loc);
      word(static_cast<uint32_t>(*sop));
      word(reg(op.operand(2)));
      word(reg(op.operand(0)));
      word(reg(op.operand(1)));
      return success();
    }
    {
      uint32_t k;
      if (!me_.kernelIndex(op.attr("callee"), loc, k)) return failure();
      unsigned nin = static_cast<unsigned>(op.intAttr("num_inputs"));
      std::vector<Value *> all = op.operands();
      site(k, op);
      begin(Opcode::InvokePacked, loc);
      word(k);
      regList(regs({all.begin(), all.begin() + nin}));
      regList(regs({all.begin() + nin, all.end()}));
      return success();
    }
  case OpCode::InvokeShapeFunc: {
    uint32_t k;
    if (!me_.kernelIndex(op.attr("callee"), loc, k)) return failure();
    site(k, op);
    begin(Opcode::ShapeFunc, loc);
    word(k);
    regList(regs(op.operands()));
    regList(regs(op.results()));
    return success();
  }
  case OpCode::Kill:
    begin(op.operand(0)->type().isStorage() ? Opcode::FreeStorage : Opcode::FreeTensor, loc);
    word(reg(op.operand(0)));
    return success();
  case OpCode::ShapeOf:
    begin(Opcode::ShapeOf, loc);
    word(result());
    word(reg(op.operand(0)));
    return success();
  case OpCode::Reshape:
  case OpCode::DynReshape: {
    uint32_t shapeReg;
    if (op.is(OpCode::Reshape)) {
      const auto &shape = op.attr("shape").getInts();
      DenseValue d;
      d.dtype = DType::I64;
      d.shape = {static_cast<int64_t>(shape.size())};
      for (int64_t s : shape) d.appendInt(s);
      uint32_t c = me_.constantIndex("", DType::I64, d.shape, d.bytes);
      shapeReg = fresh();
      begin(Opcode::LoadConst, loc);
      word(shapeReg);
      word(c);
    } else {
      shapeReg = reg(op.operand(1));
    }
    begin(Opcode::ReshapeTensor, loc);
    word(result());
    word(reg(op.operand(0)));
    word(shapeReg);
    return success();
  }
  case OpCode::DeviceCopy: {
    auto dev = [](const std::string &s) { return s == "cuda" ? 1u : 0u; };
    begin(Opcode::DeviceCopy, loc);
    word(result());
    word(reg(op.operand(0)));
    word(dev(op.strAttr("src")));
    word(dev(op.strAttr("dst")));
    return success();
  }
  case OpCode::Call: {
    const std::string &callee = op.strAttr("callee");
    if (!me_.hasFunction(callee)) {
      me_.diag().error(loc, "call to primitive function @" + callee +
                                " was not lowered to invoke_mut (run manifest-memory)");
      return failure();
    }
    begin(Opcode::Invoke, loc);
    word(me_.functionIndex(callee));
    regList(regs(op.operands()));
    regList(regs(op.results()));
    return success();
  }
  case OpCode::Construct: {
    const AdtDecl *adt = me_.module().lookupAdt(op.strAttr("adt"));
    begin(Opcode::AllocADT, loc);
    word(result());
    word(static_cast<uint32_t>(adt->ctorIndex(op.strAttr("ctor"))));
    regList(regs(op.operands()));
    return success();
  }
  case OpCode::Tuple:
    begin(Opcode::AllocADT, loc);
    word(result());
    word(0);
    regList(regs(op.operands()));
    return success();
  case OpCode::GetTuple:
    begin(Opcode::GetField, loc);
    word(result());
    word(reg(op.operand(0)));
    word(static_cast<uint32_t>(op.intAttr("index")));
    return success();
  default: break;
  }
  me_.diag().error(loc, "'" + std::string(op.name()) +
                            "' was not lowered to a kernel call (the manifest-memory pass does that)");
  return failure();
}

LogicalResult ModuleEmitter::run() {
  for (auto &a : m_.adts()) adtIndex_[a->name] = static_cast<uint32_t>(adtIndex_.size());
  for (auto &a : m_.adts()) {
    vm::AdtDesc d;
    d.name = a->name;
    for (auto &c : a->ctors) {
      vm::AdtDesc::Ctor vc;
      vc.name = c.name;
      for (Type t : c.fields) vc.fields.push_back(typeDesc(t));
      d.ctors.push_back(std::move(vc));
    }
    out_.adts.push_back(std::move(d));
  }
  for (auto &f : m_.functions())
    if (!isPrimitive(*f)) funcIndex_[f->name()] = static_cast<uint32_t>(funcIndex_.size());
  out_.functions.resize(funcIndex_.size());
  for (auto &f : m_.functions()) {
    if (isPrimitive(*f)) continue;
    FunctionEmitter fe(*this, *f, out_.functions[funcIndex_.at(f->name())]);
    if (failed(fe.run())) return failure();
  }
  // One batching entry per kernel, or none at all.
  if (!out_.batching.empty()) out_.batching.resize(out_.kernels.size());
  return success();
}

} // namespace

LogicalResult emitExecutable(const Module &m, const GlobalData &globals, vm::Executable &out,
                             DiagnosticEngine &diag) {
  ModuleEmitter me(m, globals, out, diag);
  return me.run();
}

} // namespace nimble::codegen
