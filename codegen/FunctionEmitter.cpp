//===- FunctionEmitter.cpp - One function's VM instructions ---------------===//
//
// FunctionEmitter's instruction selection: each operation of a
// memory-explicit function (after manifest-memory and plan-memory) as VM
// instructions, terminators with their edge moves and pads, and the source
// map. See EmitterImpl.h.
//
//===----------------------------------------------------------------------===//

#include "codegen/EmitterImpl.h"

#include "ir/Limits.h"
#include "passes/analysis/Analysis.h"

#include <algorithm>
#include <climits>
#include <cstring>

namespace nimble::codegen::detail {

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

} // namespace nimble::codegen::detail
