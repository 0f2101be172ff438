//===- EmitterImpl.h - The bytecode emitter's classes ------------*- C++ -*-===//
//
// Private to codegen/. emitExecutable (BytecodeEmitter.h) runs a
// ModuleEmitter, which owns the module-level tables of the executable (types,
// ADTs, constants, the kernel table and its batching entries) and runs one
// FunctionEmitter per function. The FunctionEmitter's register assignment and
// edge moves are in RegisterAllocation.cpp, its instruction selection in
// FunctionEmitter.cpp, the module level in BytecodeEmitter.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef NIMBLE_CODEGEN_EMITTERIMPL_H
#define NIMBLE_CODEGEN_EMITTERIMPL_H

#include "codegen/BytecodeEmitter.h"

#include "ir/FlatMap.h"
#include "passes/analysis/Liveness.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace nimble::codegen::detail {

using namespace nimble::ir;
using vm::Opcode;

inline bool isPrimitive(const Function &f) {
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

/// The ScalarI64 operation an `invoke_mut` computes, when its kernel is one
/// integer add / sub / mul / comparison / minimum / maximum of two scalar
/// i64 tensors into one scalar (the loop counters' step and test): the VM
/// runs those as an instruction, without a kernel call.
std::optional<vm::ScalarOp> scalarI64Kernel(const Operation &invoke, const Module &m,
                                            const std::function<bool(const Value *)> &cpuStorageArg);

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
    return detail::scalarI64Kernel(op, me_.module(), [this](const Value *v) { return cpuStorageArg(v); });
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

} // namespace nimble::codegen::detail

#endif // NIMBLE_CODEGEN_EMITTERIMPL_H
