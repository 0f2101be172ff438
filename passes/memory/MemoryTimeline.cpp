//===- MemoryTimeline.cpp - The memory plan as a Graphviz timeline --------===//
//
// `--emit=dot --dot-graph=memory` (passes/analysis/DotGraph.h): for each
// function of explicit-memory IR (after manifest-memory; the plan is
// plan-memory's, Nimble paper §3.3), a table with one row per storage
// (`alloc_storage`: its bytes, or `?` when the size is known only at run
// time) and, under it, one row per tensor placed in it (`alloc_tensor`: its
// offset and bytes), against the function's ops in the order they are
// printed (one column per op; columns merge runs of ops past 120 ops). A
// cell is filled where the row is live: from its definition to its last
// use. A tensor's uses include those of the block arguments it is passed
// to; a storage's include its tensors'. A use inside a loop that does not
// hold the definition keeps the row live to the loop's last op (the value
// is needed again on the next iteration), so the picture matches what
// plan-memory's liveness decided: rows that overlap in a column were live
// together and never share bytes; an arena's tensors that share offsets
// never overlap in time. A legend numbers the ops.
//
//===----------------------------------------------------------------------===//

#include "ir/OpTable.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/analysis/DotGraph.h"
#include "passes/analysis/Loops.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace nimble::passes {

using namespace nimble::ir;

namespace {

constexpr size_t kMaxColumns = 120;
/// Ops numbered in the legend before it is cut.
constexpr size_t kMaxLegend = 400;

/// The value of a scalar i64 constant, or -1.
int64_t constantI64(const Value *v) {
  const Operation *op = v ? v->definingOp() : nullptr;
  if (!op || !op->is(OpCode::Constant)) return -1;
  Type t = op->result(0)->type();
  if (!t.isTensor() || t.dtype() != DType::I64 || t.rank() != 0) return -1;
  const DenseValue &d = op->attr(0).getDense();
  return d.numElements() == 1 ? d.getInt(0) : -1;
}

/// Bytes of a tensor of static type, or -1.
int64_t tensorBytes(Type t) {
  if (!t.isTensor()) return -1;
  int64_t n = static_cast<int64_t>(dtypeSize(t.dtype()));
  for (int64_t d : t.dims()) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

class Timeline {
public:
  explicit Timeline(const Function &f) : names_(f), dom_(f) {
    for (const auto &b : f.blocks())
      for (const Operation &op : *b) {
        index_[&op] = order_.size();
        order_.push_back(&op);
      }
    loops_ = findLoops(const_cast<Function &>(f), dom_);
    for (const Loop &l : loops_) {
      size_t hi = 0;
      for (const Block *b : l.blocks)
        if (!b->empty()) hi = std::max(hi, index_[b->back()]);
      loopEnd_.push_back(hi);
    }
  }

  struct Row {
    std::string label, bytes, offset;
    size_t begin = 0, end = 0;
    bool tensor = false, planned = false;
  };

  std::vector<Row> rows() {
    std::vector<Row> rows;
    for (const Operation *op : order_) {
      if (!op->is(OpCode::AllocStorage)) continue;
      const Value *st = op->result(0);
      Row r;
      r.label = names_.value(st);
      const std::string &device = op->strAttr("device");
      if (device != "cpu") r.label += " (" + device + ")";
      int64_t size = constantI64(op->operand(0));
      r.bytes = size >= 0 ? std::to_string(size) : "?";
      r.begin = index_[op];
      r.end = lastUse(st, op);
      std::vector<Row> tensors;
      for (const Operation *user : st->users()) {
        if (!user->is(OpCode::AllocTensor) || user->operand(0) != st) continue;
        Row t;
        t.tensor = true;
        t.label = names_.value(user->result(0));
        int64_t bytes = tensorBytes(user->result(0)->type());
        t.bytes = bytes >= 0 ? std::to_string(bytes) : "?";
        int64_t off = constantI64(user->operand(1));
        t.offset = off >= 0 ? std::to_string(off) : "?";
        t.begin = index_[user];
        t.end = lastUse(user->result(0), user);
        r.end = std::max(r.end, t.end);
        tensors.push_back(std::move(t));
      }
      std::sort(tensors.begin(), tensors.end(), [](const Row &a, const Row &b) { return a.begin < b.begin; });
      r.planned = tensors.size() > 1;
      rows.push_back(std::move(r));
      for (Row &t : tensors) rows.push_back(std::move(t));
    }
    return rows;
  }

  const std::vector<const Operation *> &order() const { return order_; }
  const FunctionNames &names() const { return names_; }

private:
  /// The last op at which `v` (defined by `def`) or a block argument it is
  /// passed to is used, loops taken into account.
  size_t lastUse(const Value *v, const Operation *def) {
    size_t end = index_[def];
    std::vector<const Value *> work{v};
    std::unordered_set<const Value *> seen{v};
    while (!work.empty()) {
      const Value *cur = work.back();
      work.pop_back();
      for (const OpOperand &use : cur->uses()) {
        const Operation *user = use.owner();
        end = std::max(end, extend(index_[user], user->block(), def->block()));
        const unsigned i = use.index();
        for (const Successor &s : user->successors())
          if (i >= s.operandBegin && i < s.operandBegin + s.operandCount) {
            const Value *arg = s.block->argument(i - s.operandBegin);
            if (seen.insert(arg).second) work.push_back(arg);
          }
      }
    }
    return end;
  }
  /// `at`, or the last op of the outermost loop that holds `use` but not
  /// `def`.
  size_t extend(size_t at, const Block *use, const Block *def) const {
    for (size_t l = 0; l < loops_.size(); ++l)
      if (loops_[l].contains(use) && !loops_[l].contains(def)) at = std::max(at, loopEnd_[l]);
    return at;
  }

  const FunctionNames names_;
  DominanceInfo dom_;
  std::vector<Loop> loops_;
  std::vector<size_t> loopEnd_;
  std::vector<const Operation *> order_;
  std::unordered_map<const Operation *, size_t> index_;
};

} // namespace

void printMemoryTimeline(const Function &f, unsigned funcIndex, std::string &out) {
  Timeline t(f);
  std::vector<Timeline::Row> rows = t.rows();
  const size_t n = t.order().size();
  const size_t step = std::max<size_t>(1, (n + kMaxColumns - 1) / kMaxColumns);
  const size_t columns = (n + step - 1) / step;
  const std::string fid = "f" + std::to_string(funcIndex);
  out += "  subgraph cluster_" + fid + " {\n";
  out += "    label=\"" + dotEscape("func @" + f.name() + ": memory plan (storages, the tensors placed in them, " +
                                   "and the ops at which each is live)") + "\";\n";
  if (rows.empty()) {
    out += "    " + fid + "_none [shape=plaintext, label=\"no alloc_storage (run manifest-memory first)\"];\n  }\n";
    return;
  }
  std::string table = "<table border=\"0\" cellborder=\"1\" cellspacing=\"0\" cellpadding=\"2\">\n";
  table += "<tr><td align=\"left\"><b>storage / tensor</b></td><td><b>bytes</b></td><td><b>offset</b></td>"
           "<td><b>live (ops)</b></td>";
  for (size_t c = 0; c < columns; ++c) table += "<td>" + std::to_string(c * step) + "</td>";
  table += "</tr>\n";
  for (const Timeline::Row &r : rows) {
    const char *color = r.tensor ? "#9ecae1" : r.planned ? "#3182bd" : "#969696";
    table += "<tr><td align=\"left\">" + std::string(r.tensor ? "&nbsp;&nbsp;" : "") + htmlEscape(r.label) +
             "</td><td>" + r.bytes + "</td><td>" + htmlEscape(r.offset) + "</td><td>" + std::to_string(r.begin) +
             "-" + std::to_string(r.end) + "</td>";
    for (size_t c = 0; c < columns; ++c) {
      const size_t lo = c * step, hi = std::min(n, lo + step) - 1;
      const bool live = r.begin <= hi && r.end >= lo;
      table += live ? std::string("<td bgcolor=\"") + color + "\"> </td>" : "<td></td>";
    }
    table += "</tr>\n";
  }
  table += "</table>";
  out += "    " + fid + "_plan [shape=plaintext, label=<" + table + ">];\n";
  std::string legend;
  for (size_t i = 0; i < n && i < kMaxLegend; ++i) {
    const Operation *op = t.order()[i];
    if (op == op->block()->front()) legend += t.names().block(op->block()) + ":\n";
    legend += std::to_string(i) + ": " + "  " + t.names().op(*op) + "\n";
  }
  if (n > kMaxLegend) legend += "... (" + std::to_string(n - kMaxLegend) + " more ops)\n";
  out += "    " + fid + "_ops [shape=box, label=\"" + dotEscape(legend) + "\"];\n";
  out += "    " + fid + "_plan -> " + fid + "_ops [style=invis];\n";
  out += "  }\n";
}

} // namespace nimble::passes
