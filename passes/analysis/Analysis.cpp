//===- Analysis.cpp - Call graph, function effects, IR cloning ------------===//

#include "passes/analysis/Analysis.h"

#include <algorithm>
#include <unordered_set>

namespace nimble::passes {

using namespace nimble::ir;

//===-- Call graph ---------------------------------------------------------===//

CallGraph::CallGraph(const Module &m) {
  const size_t n = m.functions().size();
  num_.reserve(n);
  for (size_t i = 0; i < n; ++i) num_.emplace(m.functions()[i].get(), static_cast<unsigned>(i));
  callees_.resize(n);
  local_.assign(n, 0);
  std::unordered_set<Function *> seen;
  for (size_t i = 0; i < n; ++i) {
    const Function &f = *m.functions()[i];
    std::vector<Function *> &out = callees_[i];
    uint8_t local = 0;
    seen.clear();
    for (auto &b : f.blocks())
      for (Operation &op : *b) {
        if (op.is(OpCode::Call)) {
          Function *callee = m.lookupFunction(op.attr("callee"));
          if (!callee) local |= kCallsUnknown;
          else if (seen.insert(callee).second) out.push_back(callee);
          continue;
        }
        const OpInfo &info = op.info();
        if (info.hasFlag(opflags::Effect)) local |= kLocalEffect;
        else if (info.hasFlag(opflags::Alloc)) local |= kLocalAlloc;
      }
    local_[i] = local;
  }

  // Tarjan's algorithm, iteratively (a deep call chain must not overflow the
  // C++ stack). A component is complete when its root (index == lowlink) is
  // left; components therefore come out callees first.
  constexpr unsigned kUnvisited = ~0u;
  std::vector<unsigned> index(n, kUnvisited), lowlink(n, 0);
  std::vector<bool> onStack(n, false);
  std::vector<unsigned> stack;
  sccIndex_.assign(n, 0);
  unsigned next = 0;
  struct Frame {
    unsigned f;
    size_t child;
  };
  std::vector<Frame> frames;
  for (unsigned root = 0; root < n; ++root) {
    if (index[root] != kUnvisited) continue;
    frames = {{root, 0}};
    index[root] = lowlink[root] = next++;
    stack.push_back(root);
    onStack[root] = true;
    while (!frames.empty()) {
      Frame &fr = frames.back();
      const std::vector<Function *> &succ = callees_[fr.f];
      if (fr.child < succ.size()) {
        unsigned w = number(succ[fr.child++]);
        if (index[w] == kUnvisited) {
          index[w] = lowlink[w] = next++;
          stack.push_back(w);
          onStack[w] = true;
          frames.push_back({w, 0});
        } else if (onStack[w]) {
          lowlink[fr.f] = std::min(lowlink[fr.f], index[w]);
        }
        continue;
      }
      unsigned v = fr.f;
      frames.pop_back();
      if (!frames.empty()) lowlink[frames.back().f] = std::min(lowlink[frames.back().f], lowlink[v]);
      if (lowlink[v] != index[v]) continue;
      std::vector<Function *> scc;
      unsigned w;
      do {
        w = stack.back();
        stack.pop_back();
        onStack[w] = false;
        scc.push_back(m.functions()[w].get());
      } while (w != v);
      // Module order inside a component, for deterministic iteration.
      std::reverse(scc.begin(), scc.end());
      unsigned id = static_cast<unsigned>(sccs_.size());
      bool selfCall = false;
      for (Function *g : scc) {
        sccIndex_[number(g)] = id;
        const std::vector<Function *> &cs = callees_[number(g)];
        selfCall |= std::find(cs.begin(), cs.end(), g) != cs.end();
      }
      recursive_.push_back(scc.size() > 1 || selfCall);
      sccs_.push_back(std::move(scc));
    }
  }
}

//===-- Effects ------------------------------------------------------------===//

EffectAnalysis::EffectAnalysis(const Module &m, const CallGraph &cg) : m_(m) {
  level_.reserve(m.functions().size());
  for (unsigned id = 0; id < cg.sccs().size(); ++id) {
    const std::vector<Function *> &scc = cg.sccs()[id];
    Level lvl = Level::Pure;
    for (Function *f : scc) {
      // The component's own ops, and calls to unknown functions...
      uint8_t local = cg.localEffects(f);
      if (local & (CallGraph::kLocalEffect | CallGraph::kCallsUnknown)) lvl = Level::Effect;
      else if (local & CallGraph::kLocalAlloc) lvl = std::max(lvl, Level::Alloc);
      // ...and callees in other components, decided earlier (bottom-up);
      // calls inside the component add nothing of their own.
      for (Function *callee : cg.callees(f))
        if (cg.sccOf(callee) != id) lvl = std::max(lvl, level_.at(callee));
    }
    for (Function *f : scc) level_[f] = lvl;
  }
}

EffectAnalysis::Level EffectAnalysis::level(const Function *f) const {
  auto it = level_.find(f);
  return it == level_.end() ? Level::Effect : it->second;
}

EffectAnalysis::Level EffectAnalysis::level(const Operation &op) const {
  if (op.is(OpCode::Call)) return level(m_.lookupFunction(op.attr("callee")));
  const OpInfo &info = op.info();
  if (info.hasFlag(opflags::Effect)) return Level::Effect;
  if (info.hasFlag(opflags::Alloc)) return Level::Alloc;
  return Level::Pure;
}

//===-- Cloning ------------------------------------------------------------===//

std::unique_ptr<Operation> cloneOp(const Operation &op, IRMapping &map) {
  std::vector<Value *> operands;
  for (Value *v : op.operandValues()) operands.push_back(map.lookup(v));
  std::vector<Type> types;
  for (Value *r : op.resultValues()) types.push_back(r->type());
  std::vector<Successor> succs = op.successors();
  for (Successor &s : succs) s.block = map.lookup(s.block);
  std::unique_ptr<Operation> copy =
      Operation::create(op.code(), op.loc(), operands, types, std::vector<Attr>(op.attrs().begin(), op.attrs().end()),
                        std::move(succs));
  if (!op.memberLocs().empty()) copy->setMemberLocs(op.memberLocs());
  for (unsigned i = 0; i < op.numResults(); ++i) {
    copy->result(i)->setName(op.result(i)->name());
    map.values[op.result(i)] = copy->result(i);
  }
  return copy;
}

std::string blockLabelOrDefault(const Block &b) {
  if (!b.label().empty()) return b.label();
  if (b.isEntry()) return "entry";
  const Function *f = b.function();
  for (size_t i = 0; f && i < f->blocks().size(); ++i)
    if (f->blocks()[i].get() == &b) return "bb" + std::to_string(i);
  return "bb";
}

std::vector<Block *> cloneBlocksInto(const std::vector<Block *> &blocks, Function &dst,
                                     Block *insertAfter, IRMapping &map,
                                     const std::string &labelPrefix) {
  // Blocks and arguments first, so that successors and block-argument uses
  // can be mapped whatever the order of the blocks.
  std::vector<Block *> out;
  Block *after = insertAfter;
  for (Block *b : blocks) {
    auto nb = std::make_unique<Block>(labelPrefix + blockLabelOrDefault(*b));
    nb->setLoc(b->loc());
    Block *raw = dst.insertBlockAfter(after, std::move(nb));
    for (unsigned i = 0; i < b->numArguments(); ++i) {
      BlockArgument *a = b->argument(i);
      if (map.values.count(a)) continue;
      BlockArgument *na = raw->addArgument(a->type(), a->argLoc());
      na->setName(a->name());
      map.values[a] = na;
    }
    map.blocks[b] = raw;
    out.push_back(raw);
    after = raw;
  }
  std::vector<Operation *> cloned;
  for (size_t k = 0; k < blocks.size(); ++k)
    for (Operation &op : *blocks[k]) cloned.push_back(out[k]->push_back(cloneOp(op, map)));
  // A use cloned before its definition still names the original value.
  for (Operation *op : cloned)
    for (unsigned i = 0; i < op->numOperands(); ++i) {
      Value *v = op->operand(i);
      Value *nv = map.lookup(v);
      if (nv != v) op->setOperand(i, nv);
    }
  return out;
}

bool isPrimitive(const ir::Function &f) {
  const Attr *a = f.fnAttr("primitive");
  return a && a->kind() == AttrKind::Bool && a->getBool();
}

bool isVMNative(OpCode c) {
  switch (c) {
  case OpCode::Constant:
  case OpCode::ShapeOf:
  case OpCode::Reshape:
  case OpCode::DynReshape:
  case OpCode::DeviceCopy:
  case OpCode::StorageSize:
    return true;
  default: return false;
  }
}

bool isKernelOp(const ir::Operation &op) {
  return op.info().relation != Relation::Structural && !isVMNative(op.code());
}

bool smallFreshTensor(const Value *v) {
  const Operation *d = v->definingOp();
  return d && (d->is(OpCode::ShapeOf) || d->is(OpCode::InvokeShapeFunc) || d->is(OpCode::StorageSize));
}

bool killable(const Value *v) {
  if (!v->type().isTensor() && !v->type().isStorage()) return false;
  if (isa<Global>(v)) return false;
  if (const auto *a = dyn_cast<BlockArgument>(v)) return !a->owner()->isEntry();
  const Operation *d = v->definingOp();
  return d && !d->is(OpCode::Constant) && !smallFreshTensor(v);
}

bool hasKilledResult(const Operation &op) {
  for (Value *r : op.resultValues())
    for (Operation *u : r->users())
      if (u->is(OpCode::Kill)) return true;
  return false;
}

} // namespace nimble::passes
