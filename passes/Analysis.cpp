//===- Analysis.cpp - Call graph, function effects, IR cloning ------------===//

#include "passes/Analysis.h"

#include <algorithm>
#include <unordered_set>

namespace nimble::passes {

using namespace nimble::ir;

//===-- Call graph ---------------------------------------------------------===//

CallGraph::CallGraph(const Module &m) {
  for (auto &f : m.functions()) {
    std::vector<Function *> &out = callees_[f.get()];
    std::unordered_set<Function *> seen;
    for (auto &b : f->blocks())
      for (Operation &op : *b) {
        if (!op.is(OpCode::Call)) continue;
        Function *callee = m.lookupFunction(op.strAttr("callee"));
        if (callee && seen.insert(callee).second) out.push_back(callee);
      }
  }

  // Tarjan's algorithm, iteratively (a deep call chain must not overflow the
  // C++ stack). A component is complete when its root (index == lowlink) is
  // left; components therefore come out callees first.
  std::unordered_map<const Function *, unsigned> index, lowlink;
  std::unordered_set<const Function *> onStack;
  std::vector<Function *> stack;
  unsigned next = 0;
  struct Frame {
    Function *f;
    size_t child;
  };
  for (auto &root : m.functions()) {
    if (index.count(root.get())) continue;
    std::vector<Frame> frames = {{root.get(), 0}};
    index[root.get()] = lowlink[root.get()] = next++;
    stack.push_back(root.get());
    onStack.insert(root.get());
    while (!frames.empty()) {
      Frame &fr = frames.back();
      const std::vector<Function *> &succ = callees_[fr.f];
      if (fr.child < succ.size()) {
        Function *w = succ[fr.child++];
        if (!index.count(w)) {
          index[w] = lowlink[w] = next++;
          stack.push_back(w);
          onStack.insert(w);
          frames.push_back({w, 0});
        } else if (onStack.count(w)) {
          lowlink[fr.f] = std::min(lowlink[fr.f], index[w]);
        }
        continue;
      }
      Function *v = fr.f;
      frames.pop_back();
      if (!frames.empty())
        lowlink[frames.back().f] = std::min(lowlink[frames.back().f], lowlink[v]);
      if (lowlink[v] != index[v]) continue;
      std::vector<Function *> scc;
      Function *w = nullptr;
      do {
        w = stack.back();
        stack.pop_back();
        onStack.erase(w);
        scc.push_back(w);
      } while (w != v);
      // Module order inside a component, for deterministic iteration.
      std::reverse(scc.begin(), scc.end());
      unsigned id = static_cast<unsigned>(sccs_.size());
      bool selfCall = false;
      for (Function *g : scc) {
        sccIndex_[g] = id;
        const std::vector<Function *> &cs = callees_[g];
        selfCall |= std::find(cs.begin(), cs.end(), g) != cs.end();
      }
      recursive_.push_back(scc.size() > 1 || selfCall);
      sccs_.push_back(std::move(scc));
    }
  }
}

const std::vector<Function *> &CallGraph::callees(const Function *f) const {
  return callees_.at(f);
}

//===-- Effects ------------------------------------------------------------===//

EffectAnalysis::EffectAnalysis(const Module &m, const CallGraph &cg) : m_(m) {
  for (unsigned id = 0; id < cg.sccs().size(); ++id) {
    const std::vector<Function *> &scc = cg.sccs()[id];
    Level lvl = Level::Pure;
    for (Function *f : scc)
      for (auto &b : f->blocks())
        for (Operation &op : *b) {
          if (op.is(OpCode::Call)) {
            // Callees in other components were decided earlier (bottom-up);
            // calls inside the component add nothing of their own.
            const Function *callee = m.lookupFunction(op.strAttr("callee"));
            if (callee && cg.sccOf(callee) == id) continue;
          }
          lvl = std::max(lvl, level(op));
        }
    for (Function *f : scc) level_[f] = lvl;
  }
}

EffectAnalysis::Level EffectAnalysis::level(const Function *f) const {
  auto it = level_.find(f);
  return it == level_.end() ? Level::Effect : it->second;
}

EffectAnalysis::Level EffectAnalysis::level(const Operation &op) const {
  if (op.is(OpCode::Call)) return level(m_.lookupFunction(op.strAttr("callee")));
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
  return d && (d->is(OpCode::ShapeOf) || d->is(OpCode::StorageSize));
}

bool hasKilledResult(const Operation &op) {
  for (Value *r : op.resultValues())
    for (Operation *u : r->users())
      if (u->is(OpCode::Kill)) return true;
  return false;
}

} // namespace nimble::passes
