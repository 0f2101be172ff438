//===- DotGraph.cpp - A module's graphs in Graphviz -----------------------===//
//
// The CFG and dataflow views; the memory view is MemoryTimeline.cpp
// (passes/memory). See DotGraph.h for what each shows.
//
//===----------------------------------------------------------------------===//

#include "passes/analysis/DotGraph.h"

#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/analysis/Analysis.h"
#include "passes/analysis/Loops.h"

#include <cctype>
#include <unordered_map>
#include <unordered_set>

namespace nimble::passes {

using namespace nimble::ir;

namespace {

/// Ops shown in a CFG node before the rest is elided: a block of a thousand
/// ops would make a node taller than any screen.
constexpr size_t kMaxOpsPerBlock = 12;
/// Characters of an op's text in a node.
constexpr size_t kMaxOpText = 96;

std::string clip(std::string s) {
  if (s.size() > kMaxOpText) s = s.substr(0, kMaxOpText - 3) + "...";
  return s;
}

std::string blockHeader(const Block &b, const FunctionNames &names) {
  std::string s = names.block(&b);
  if (b.numArguments()) {
    s += "(";
    for (unsigned i = 0; i < b.numArguments(); ++i) {
      if (i) s += ", ";
      s += names.value(b.argument(i)) + ": " + b.argument(i)->type().str();
    }
    s += ")";
  }
  return s + ":";
}

std::string funcLabel(const Function &f) {
  std::string s = "func @" + f.name() + " : " + f.type().str();
  if (isPrimitive(f)) s += " (primitive: a fused group)";
  return s;
}

void header(const Module &m, std::string_view view, std::string &out) {
  std::string title = (m.name().empty() ? std::string("module") : "module @" + m.name()) + " (" + std::string(view) + ")";
  out += "digraph \"" + dotEscape(title) + "\" {\n";
  out += "  graph [fontname=\"monospace\", fontsize=11, compound=true, labeljust=l];\n";
  out += "  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  out += "  edge [fontname=\"monospace\", fontsize=9];\n";
}

//===-- CFG ----------------------------------------------------------------===//

void printCfg(const Function &f, unsigned fi, std::string &out) {
  const std::string fid = "f" + std::to_string(fi);
  out += "  subgraph cluster_" + fid + " {\n";
  out += "    label=\"" + dotEscape(funcLabel(f)) + "\";\n";
  const FunctionNames names(f);
  std::unordered_map<const Block *, std::string> ids;
  for (size_t i = 0; i < f.blocks().size(); ++i) ids[f.blocks()[i].get()] = fid + "_b" + std::to_string(i);
  // The loop nest: each block's innermost loop, each loop's parent.
  DominanceInfo dom(f);
  std::vector<Loop> loops = findLoops(const_cast<Function &>(f), dom);
  std::vector<int> parent(loops.size(), -1);
  for (size_t i = 0; i < loops.size(); ++i)
    for (size_t j = i + 1; j < loops.size(); ++j)
      if (loops[j].header != loops[i].header && loops[j].contains(loops[i].header)) {
        parent[i] = static_cast<int>(j);
        break;
      }
  // Innermost first: the first loop to claim a block is its innermost
  // (O(the loops' sizes), as findLoops itself).
  std::unordered_map<const Block *, int> innermost;
  for (const auto &b : f.blocks()) innermost[b.get()] = -1;
  for (size_t i = 0; i < loops.size(); ++i)
    for (const Block *b : loops[i].blocks)
      if (int &l = innermost[b]; l < 0) l = static_cast<int>(i);

  auto node = [&](const Block &b, const std::string &indent) {
    std::string text = blockHeader(b, names) + "\n";
    size_t n = 0, total = 0;
    for (const Operation &op : b) {
      ++total;
      if (n < kMaxOpsPerBlock || op.isTerminator()) {
        if (n == kMaxOpsPerBlock && total > n + 1) text += "  ... (" + std::to_string(b.size() - n - 1) + " more ops)\n";
        text += "  " + clip(names.op(op)) + "\n";
        ++n;
      }
    }
    out += indent + ids[&b] + " [label=\"" + dotEscape(text) + "\"" +
           (b.isEntry() ? ", style=bold" : "") + "];\n";
  };
  // Clusters nest as the loops do: a loop's cluster holds the blocks whose
  // innermost loop it is, then its child loops' clusters.
  auto emitLoop = [&](auto &&self, int l, const std::string &indent) -> void {
    for (const auto &b : f.blocks())
      if (innermost[b.get()] == l) node(*b, indent);
    for (size_t c = 0; c < loops.size(); ++c) {
      if (parent[c] != l) continue;
      out += indent + "subgraph cluster_" + fid + "_loop" + std::to_string(c) + " {\n";
      out += indent + "  label=\"" + dotEscape("loop " + names.block(loops[c].header)) +
             "\"; style=dashed; color=blue;\n";
      self(self, static_cast<int>(c), indent + "  ");
      out += indent + "}\n";
    }
  };
  emitLoop(emitLoop, -1, "    ");
  out += "  }\n";

  for (const auto &b : f.blocks()) {
    const Operation *t = b->terminator();
    if (!t) continue;
    const auto &succs = t->successors();
    for (size_t k = 0; k < succs.size(); ++k) {
      const Successor &s = succs[k];
      std::string label;
      if (t->is(OpCode::CondBr)) label = k == 0 ? "true" : "false";
      else if (t->is(OpCode::Match)) label = s.label.empty() ? "default" : s.label;
      if (s.operandCount) {
        label += label.empty() ? "(" : " (";
        for (unsigned a = 0; a < s.operandCount; ++a)
          label += (a ? ", " : "") + names.value(t->operand(s.operandBegin + a));
        label += ")";
      }
      // A back edge (to a block that dominates the source: a loop's latch
      // to its header) is bold and says so.
      const bool back = dom.isReachable(b.get()) && dom.dominates(s.block, b.get());
      if (back) label = label.empty() ? "back" : "back " + label;
      out += "  " + ids[b.get()] + " -> " + ids[s.block] + " [label=\"" + dotEscape(label) + "\"" +
             (back ? ", style=bold, color=blue" : "") + "];\n";
    }
  }
}

//===-- Dataflow ---------------------------------------------------------===//

/// The function a call or invoke_mut runs, when it is a fused group drawn as
/// a cluster (a primitive function of one block).
const Function *fusedCallee(const Module &m, const Operation &op) {
  if (!op.is(OpCode::Call) && !op.is(OpCode::InvokeMut)) return nullptr;
  const Function *callee = m.lookupFunction(op.attr("callee"));
  if (!callee || !isPrimitive(*callee) || callee->blocks().size() != 1) return nullptr;
  return callee;
}

class DataflowPrinter {
public:
  DataflowPrinter(const Module &m, const Function &f, unsigned fi, std::string &out)
      : m_(m), f_(f), names_(f), fid_("f" + std::to_string(fi)), out_(out) {}

  void print() {
    out_ += "  subgraph cluster_" + fid_ + " {\n";
    out_ += "    label=\"" + dotEscape(funcLabel(f_)) + "\";\n";
    const bool blocks = f_.blocks().size() > 1;
    for (size_t bi = 0; bi < f_.blocks().size(); ++bi) {
      const Block &b = *f_.blocks()[bi];
      std::string indent = "    ";
      if (blocks) {
        out_ += indent + "subgraph cluster_" + fid_ + "_b" + std::to_string(bi) + " {\n";
        out_ += indent + "  label=\"" + dotEscape(names_.block(&b)) + "\"; style=dashed;\n";
        indent += "  ";
      }
      for (unsigned a = 0; a < b.numArguments(); ++a) {
        const Value *v = b.argument(a);
        out_ += indent + id(v) + " [shape=ellipse, label=\"" +
                dotEscape(names_.value(v) + ": " + v->type().str()) + "\"];\n";
      }
      for (const Operation &op : b) {
        if (const Function *callee = fusedCallee(m_, op)) fused(op, *callee, indent);
        else plain(op, indent);
      }
      if (blocks) out_ += "    }\n";
    }
    out_ += globals_ + "  }\n" + edges_;
  }

private:
  /// The node that defines `v` (created for globals on first use).
  std::string id(const Value *v) {
    if (auto it = ids_.find(v); it != ids_.end()) return it->second;
    std::string s = fid_ + "_n" + std::to_string(ids_.size());
    ids_[v] = s;
    if (isa<Global>(v))
      globals_ += "    " + s + " [shape=note, label=\"" + dotEscape(names_.value(v) + ": " + v->type().str()) + "\"];\n";
    return s;
  }
  void edge(const Value *from, const std::string &to, const std::string &attrs = "") {
    std::string src = id(from);
    edges_ += "  " + src + " -> " + to + (attrs.empty() ? "" : " [" + attrs + "]") + ";\n";
  }

  void plain(const Operation &op, const std::string &indent) {
    std::string self = fid_ + "_op" + std::to_string(ops_++);
    for (const Value *r : op.resultValues()) ids_[r] = self;
    out_ += indent + self + " [label=\"" + dotEscape(clip(names_.op(op))) + "\"" +
            (op.isTerminator() ? ", shape=cds" : "") + "];\n";
    for (unsigned i = 0; i < op.numNonSuccessorOperands(); ++i) edge(op.operand(i), self);
    for (const Successor &s : op.successors())
      for (unsigned a = 0; a < s.operandCount; ++a) {
        edge(op.operand(s.operandBegin + a), self);
        edges_ += "  " + self + " -> " + id(s.block->argument(a)) + " [style=dashed];\n";
      }
  }

  /// A fused group: the callee's ops in a cluster, its parameters bound to
  /// the call's inputs, its results to the call's results (call) or drawn
  /// into the output buffers the kernel writes (invoke_mut).
  void fused(const Operation &op, const Function &callee, const std::string &indent) {
    const std::string cid = fid_ + "_g" + std::to_string(groups_++);
    out_ += indent + "subgraph cluster_" + cid + " {\n";
    out_ += indent + "  label=\"" + dotEscape(std::string(op.name()) + " @" + callee.name() + " (fused group)") +
            "\"; style=filled; fillcolor=lightyellow;\n";
    const Block &body = *callee.entry();
    const FunctionNames calleeNames(callee);
    const unsigned ins = op.is(OpCode::InvokeMut) ? static_cast<unsigned>(op.intAttr("num_inputs")) : op.numOperands();
    // The parameters are the call's inputs: their uses inside the group come
    // from the caller's definitions.
    std::unordered_map<const Value *, const Value *> bound;
    for (unsigned a = 0; a < body.numArguments() && a < ins; ++a) bound[body.argument(a)] = op.operand(a);
    auto source = [&](const Value *v) {
      auto it = bound.find(v);
      return it != bound.end() ? it->second : v;
    };
    size_t k = 0;
    const Operation *ret = nullptr;
    for (const Operation &inner : body) {
      if (inner.is(OpCode::Ret)) {
        ret = &inner;
        continue;
      }
      std::string self = cid + "_op" + std::to_string(k++);
      for (const Value *r : inner.resultValues()) ids_[r] = self;
      out_ += indent + "  " + self + " [label=\"" + dotEscape(clip(calleeNames.op(inner))) + "\"];\n";
      for (const Value *v : inner.operandValues()) edge(source(v), self);
    }
    out_ += indent + "}\n";
    if (!ret) return;
    for (unsigned j = 0; j < ret->numOperands(); ++j) {
      const Value *produced = source(ret->operand(j));
      if (op.is(OpCode::Call)) {
        if (j < op.numResults()) ids_[op.result(j)] = id(produced);
      } else if (ins + j < op.numOperands()) {
        edges_ += "  " + id(produced) + " -> " + id(op.operand(ins + j)) + " [style=dashed, label=\"writes\"];\n";
      }
    }
  }

  const Module &m_;
  const Function &f_;
  const FunctionNames names_;
  std::string fid_;
  std::string &out_;
  std::string edges_, globals_;
  std::unordered_map<const Value *, std::string> ids_;
  size_t ops_ = 0, groups_ = 0;
};

} // namespace

std::string dotEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\l";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

std::string htmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    case '\n': out += "<br align=\"left\"/>"; break;
    default: out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
    }
  }
  return out;
}

std::string dotId(std::string_view s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return out;
}

bool parseDotGraphKind(std::string_view text, DotGraphKind &kind) {
  if (text == "cfg") kind = DotGraphKind::Cfg;
  else if (text == "dataflow") kind = DotGraphKind::Dataflow;
  else if (text == "memory") kind = DotGraphKind::Memory;
  else return false;
  return true;
}

std::string printDot(const Module &m, DotGraphKind kind) {
  std::string out;
  header(m, kind == DotGraphKind::Cfg ? "cfg" : kind == DotGraphKind::Dataflow ? "dataflow" : "memory", out);
  // Fused groups called from a function are drawn inside it (dataflow) and
  // have no memory plan of their own (memory): only those never called are
  // drawn as functions there.
  std::unordered_set<const Function *> called;
  if (kind != DotGraphKind::Cfg)
    for (const auto &f : m.functions())
      for (const auto &b : f->blocks())
        for (const Operation &op : *b)
          if (const Function *c = fusedCallee(m, op)) called.insert(c);
  unsigned fi = 0;
  for (const auto &f : m.functions()) {
    const unsigned index = fi++;
    if (f->blocks().empty()) continue;
    if (kind == DotGraphKind::Cfg) printCfg(*f, index, out);
    else if (called.count(f.get())) continue;
    else if (kind == DotGraphKind::Dataflow) DataflowPrinter(m, *f, index, out).print();
    else if (!isPrimitive(*f)) printMemoryTimeline(*f, index, out);
  }
  out += "}\n";
  return out;
}

} // namespace nimble::passes
