//===- BytecodeEmitter.cpp - Memory-explicit IR to VM bytecode ------------===//
//
// The module level of the emitter (EmitterImpl.h): type descriptors, ADTs,
// constants and the kernel table with its batching entries; each function
// is emitted by a FunctionEmitter (FunctionEmitter.cpp,
// RegisterAllocation.cpp).
//
//===----------------------------------------------------------------------===//

#include "codegen/BytecodeEmitter.h"

#include "codegen/EmitterImpl.h"
#include "ir/Limits.h"
#include "passes/analysis/Analysis.h"

#include <algorithm>
#include <cstring>
#include <functional>

namespace nimble::codegen {

using namespace nimble::ir;

std::vector<uint8_t> constantBytes(const DenseValue &v) {
  if (!v.splat) return v.bytes;
  // One element for all (format 1.8): what a splat of more than one
  // element stores; none for an empty shape; the element itself for one.
  if (v.numElements() == 0) return {};
  return v.bytes;
}

namespace detail {

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
  // batch_phase (program phases, seed 001 §4.1): a non-negative integer.
  if (const Attr *phase = f.fnAttr("batch_phase")) {
    if (phase->kind() != AttrKind::Int || phase->getInt() < 0 || phase->getInt() > UINT32_MAX) {
      diag_.error(f.loc(), "@" + f.name() + " has a malformed batch_phase (a non-negative integer)");
      return false;
    }
    b.phase = static_cast<uint32_t>(phase->getInt());
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

} // namespace detail

LogicalResult emitExecutable(const Module &m, const GlobalData &globals, vm::Executable &out,
                             DiagnosticEngine &diag) {
  detail::ModuleEmitter me(m, globals, out, diag);
  return me.run();
}

} // namespace nimble::codegen
