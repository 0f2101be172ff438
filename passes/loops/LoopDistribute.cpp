//===- LoopDistribute.cpp - One loop per recurrence -----------------------===//
//
// Loop distribution (fission; Kennedy and Allen, "Optimizing Compilers for
// Modern Architectures", §2.2 and ch. 5; LLVM's LoopDistribute): a counted
// loop whose body holds several recurrences, one feeding the next, becomes
// one loop per recurrence. What one recurrence hands the next in an
// iteration is stacked, row by row, into a tensor that the later loop
// slices. The point is what it enables: in a 2-layer LSTM, layer 1's input
// projection `h0_t · W_ih1ᵀ` depends on layer 0's recurrence, so
// `batch-input-projection` cannot hoist it out of the loop that runs both
// layers; after distribution layer 1 has its own loop over the stacked
// h0_0 .. h0_{n-1}, and its input projection becomes one GEMM over all
// tokens (what cuDNN and PyTorch's nn.LSTM do layer by layer). ACROBAT
// (seed 001) batches across such independent recurrences at run time; this
// is the static half of it for counted loops.
//
// Which loops (everything else is left alone):
// - a counted loop (passes/analysis/Loops.h: t = 0 .. dim(X, 0), step 1) of two
//   blocks: the header holds only its comparison and the `cond_br` (which
//   passes no values), the body is the only latch and ends in `br`;
// - every op of the body is pure (no call, no effect), and every value the
//   body passes back to a header argument (other than t + 1) is a result of
//   an op of the body;
// - the body's dependence graph (ops and header arguments; an argument
//   depends on the op computing its next value) has at least two
//   recurrences (strongly connected components with a cycle), and no op
//   reads a header argument of another partition (the previous iteration's
//   value of another recurrence) or the header's exit test;
// - profitability: some value stacked for a later loop is one row (a
//   leading dimension of 1) and operand 0 of a `matmul` there whose operand
//   1 is loop-invariant (so `batch-input-projection` turns it into one
//   GEMM), with at least min-cols columns (default 512, `?` counts as
//   many). Distribution alone only adds a loop and the stacking copies, and
//   below the threshold these cost more than the one GEMM saves: on a
//   2-layer LSTM it lost 6-36% up to hidden 96 (a 1 x 384 projection), was
//   level at 112-128 and paid from 160 (docs/perf.md, "Loop distribution").
//
// Partitions: the recurrences in dependence order (Tarjan's algorithm emits
// components producers first), one loop each. An op on no cycle goes to the
// earliest partition that uses it (sinking, so that what crosses is the
// recurrence's own output, as small and as early as possible: h0_t, not
// h0_t · W_ih1ᵀ), or, unused in the body, to the latest partition it uses.
// Ops computed only from t and invariants (the token slice `x_t`) are
// copied into each partition that uses them. A header argument on no cycle
// (a value only used after the loop) goes with the op that computes it; one
// that the body uses (a value delayed by one iteration) stops the pass.
//
// Stacking: a value v of static type [d0, d1, ...] crossing from partition
// p to later partitions gets a buffer `zeros [n * d0, d1, ...]` made before
// the first loop, carried by loop p and updated there with
// `dynamic_update_slice %S, %v, t * d0` (written in place: manifest-memory,
// no copy of the buffer per iteration); each later loop reads
// `dynamic_slice %S, t * d0, size=d0`. Loop k > 0 counts to
// `dim(S, 0)` of a buffer it reads when d0 is 1 (the same n, and the form
// `batch-input-projection` recognises on S), else to the original n.
//
// Why it is sound: partitions only depend on earlier ones (sinking keeps
// every op at or after the partitions of its operands, which is checked),
// so running partition 0 for every t, then partition 1 for every t, and so
// on computes every value from the same inputs as the fused loop did; pure
// ops make the reordering unobservable. The loops run the same n
// iterations (n = 0: none runs, every carried value keeps its initial value
// and no buffer row is read). Results are bit-identical to the fused loop
// (the same ops on the same values).
//
//===----------------------------------------------------------------------===//

#include "ir/Builder.h"
#include "passes/analysis/Analysis.h"
#include "passes/analysis/Loops.h"
#include "passes/Pass.h"
#include "passes/Statistic.h"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

NIMBLE_STATISTIC(NumDistributed, "loop-distribute", "Number of loops distributed");
NIMBLE_STATISTIC(NumLoopsMade, "loop-distribute", "Number of loops made from them");
NIMBLE_STATISTIC(NumStacked, "loop-distribute", "Number of values stacked for a later loop");

/// How the body of one loop splits (see the file comment).
struct Plan {
  std::vector<Operation *> ops;                        // the body, terminator excluded
  std::unordered_map<const Operation *, int> part;     // op -> partition; absent: t-only
  std::unordered_set<const Operation *> tOnly;         // copied where used
  std::vector<int> argPart;                            // header argument -> partition (-1: t)
  int numParts = 0;
  /// Values crossing to later partitions, in body order, with the
  /// partitions that read them.
  std::vector<std::pair<Value *, std::vector<int>>> crossing;
};

class Planner {
public:
  Planner(const Loop &loop, const CountedLoop &cl, int64_t minCols) : loop_(loop), cl_(cl), minCols_(minCols) {}

  /// Fills `plan`; false when the loop is not distributed.
  bool run(Plan &plan);

private:
  const Loop &loop_;
  const CountedLoop &cl_;
  int64_t minCols_;
};

/// The columns of `mm`'s result (its last dimension), kDynamic when unknown.
int64_t productCols(const Operation &mm) {
  Type ty = mm.result(0)->type();
  return ty.isTensor() && ty.rank() >= 1 ? ty.dims().back() : kDynamic;
}

bool Planner::run(Plan &plan) {
  Block *h = loop_.header;
  if (loop_.blocks.size() != 2 || loop_.latches.size() != 1) return false;
  Block *body = loop_.latches[0];
  Operation *cond = h->back();
  if (h->front() != cl_.compare || cl_.compare->nextOp() != cond) return false;
  for (const Successor &s : cond->successors())
    if (s.operandCount != 0) return false;
  Operation *latch = body->back();
  if (!latch || !latch->is(OpCode::Br) || latch->successors()[0].block != h) return false;

  const BlockArgument *t = cl_.counter;
  for (Operation &op : *body) {
    if (&op == latch) break;
    if (!op.info().hasFlag(opflags::Pure)) return false;
    plan.ops.push_back(&op);
  }
  // t-only ops: every operand invariant, t, or t-only.
  for (Operation *op : plan.ops) {
    bool only = true;
    for (Value *v : op->operands()) {
      const Operation *d = v->definingOp();
      only &= v == t || loop_.isInvariant(v) || (d && plan.tOnly.count(d));
    }
    if (only) plan.tOnly.insert(op);
  }

  // Nodes: the other body ops, then the header arguments but t.
  std::unordered_map<const Operation *, int> opNode;
  std::vector<Operation *> nodeOp;
  for (Operation *op : plan.ops)
    if (!plan.tOnly.count(op)) {
      opNode[op] = static_cast<int>(nodeOp.size());
      nodeOp.push_back(op);
    }
  const int numOpNodes = static_cast<int>(nodeOp.size());
  const unsigned numArgs = h->numArguments();
  auto argNode = [&](unsigned i) { return numOpNodes + static_cast<int>(i); };
  const int numNodes = numOpNodes + static_cast<int>(numArgs);
  std::vector<std::vector<int>> deps(static_cast<size_t>(numNodes)), users(static_cast<size_t>(numNodes));
  auto nodeOf = [&](const Value *v) -> int {
    if (const auto *a = dyn_cast<BlockArgument>(v))
      return a->owner() == h && a != t ? argNode(a->index()) : -1;
    const Operation *d = v->definingOp();
    auto it = d ? opNode.find(d) : opNode.end();
    return it == opNode.end() ? -1 : it->second;
  };
  auto addEdge = [&](int user, int dep) {
    deps[static_cast<size_t>(user)].push_back(dep);
    users[static_cast<size_t>(dep)].push_back(user);
  };
  for (int n = 0; n < numOpNodes; ++n)
    for (Value *v : nodeOp[static_cast<size_t>(n)]->operands())
      if (int d = nodeOf(v); d >= 0) addEdge(n, d);
  for (unsigned i = 0; i < numArgs; ++i) {
    if (h->argument(i) == t) continue;
    Value *next = passedTo(latch, h, i);
    const Operation *d = next ? next->definingOp() : nullptr;
    if (!d || d->block() != body) return false; // carried unchanged, or from outside
    if (int dn = nodeOf(next); dn >= 0) addEdge(argNode(i), dn);
  }

  // Tarjan: components in producers-first order.
  std::vector<int> index(static_cast<size_t>(numNodes), -1), low(static_cast<size_t>(numNodes), 0),
      comp(static_cast<size_t>(numNodes), -1);
  std::vector<bool> onStack(static_cast<size_t>(numNodes), false);
  std::vector<int> stack;
  std::vector<std::vector<int>> comps;
  int counter = 0;
  // Iterative DFS (a body may hold thousands of ops).
  for (int root = 0; root < numNodes; ++root) {
    if (index[static_cast<size_t>(root)] >= 0) continue;
    std::vector<std::pair<int, size_t>> work{{root, 0}};
    index[static_cast<size_t>(root)] = low[static_cast<size_t>(root)] = counter++;
    stack.push_back(root);
    onStack[static_cast<size_t>(root)] = true;
    while (!work.empty()) {
      auto &[n, next] = work.back();
      const auto &ds = deps[static_cast<size_t>(n)];
      if (next < ds.size()) {
        int d = ds[next++];
        if (index[static_cast<size_t>(d)] < 0) {
          index[static_cast<size_t>(d)] = low[static_cast<size_t>(d)] = counter++;
          stack.push_back(d);
          onStack[static_cast<size_t>(d)] = true;
          work.push_back({d, 0});
        } else if (onStack[static_cast<size_t>(d)]) {
          low[static_cast<size_t>(n)] = std::min(low[static_cast<size_t>(n)], index[static_cast<size_t>(d)]);
        }
        continue;
      }
      int done = n;
      work.pop_back();
      if (!work.empty())
        low[static_cast<size_t>(work.back().first)] =
            std::min(low[static_cast<size_t>(work.back().first)], low[static_cast<size_t>(done)]);
      if (low[static_cast<size_t>(done)] == index[static_cast<size_t>(done)]) {
        std::vector<int> c;
        int w;
        do {
          w = stack.back();
          stack.pop_back();
          onStack[static_cast<size_t>(w)] = false;
          comp[static_cast<size_t>(w)] = static_cast<int>(comps.size());
          c.push_back(w);
        } while (w != done);
        comps.push_back(std::move(c));
      }
    }
  }

  // Partitions: the cyclic components in order; then sink the others.
  std::vector<int> compPart(comps.size(), -1);
  for (size_t c = 0; c < comps.size(); ++c) {
    bool cyclic = comps[c].size() > 1;
    for (int d : deps[static_cast<size_t>(comps[c][0])]) cyclic |= d == comps[c][0];
    if (cyclic) compPart[c] = plan.numParts++;
  }
  if (plan.numParts < 2) return false;
  std::vector<int> part(static_cast<size_t>(numNodes), -1), lower(static_cast<size_t>(numNodes), 0);
  for (size_t c = 0; c < comps.size(); ++c) // producers first: lower bounds
    for (int n : comps[c]) {
      int lo = compPart[c] >= 0 ? compPart[c] : 0;
      for (int d : deps[static_cast<size_t>(n)]) lo = std::max(lo, lower[static_cast<size_t>(d)]);
      lower[static_cast<size_t>(n)] = lo;
      if (compPart[c] >= 0) part[static_cast<size_t>(n)] = compPart[c];
    }
  for (size_t c = comps.size(); c-- > 0;) { // consumers first: sink
    if (compPart[c] >= 0) continue;
    int n = comps[c][0];
    int p = plan.numParts;
    for (int u : users[static_cast<size_t>(n)]) p = std::min(p, part[static_cast<size_t>(u)]);
    if (p == plan.numParts) p = lower[static_cast<size_t>(n)];
    if (n >= numOpNodes) { // an argument on no cycle: with its producer
      if (!users[static_cast<size_t>(n)].empty()) return false;
      p = lower[static_cast<size_t>(n)];
    }
    part[static_cast<size_t>(n)] = p;
  }
  for (int n = 0; n < numNodes; ++n)
    for (int d : deps[static_cast<size_t>(n)]) {
      if (part[static_cast<size_t>(d)] > part[static_cast<size_t>(n)]) return false;
      // A later loop reading another loop's carried argument would see its
      // final value, not the iteration's (that would need the rows shifted).
      if (d >= numOpNodes && n < numOpNodes && part[static_cast<size_t>(d)] != part[static_cast<size_t>(n)])
        return false;
    }
  // The header's own results (the exit test) mean nothing after the loop.
  for (Operation *op : plan.ops)
    for (Value *v : op->operands())
      if (const Operation *d = v->definingOp(); d && d->block() == h) return false;

  for (int n = 0; n < numOpNodes; ++n) plan.part[nodeOp[static_cast<size_t>(n)]] = part[static_cast<size_t>(n)];
  plan.argPart.assign(numArgs, -1);
  for (unsigned i = 0; i < numArgs; ++i)
    if (h->argument(i) != t) plan.argPart[i] = part[static_cast<size_t>(argNode(i))];

  // Crossing values and profitability.
  bool profitable = false;
  for (Operation *op : plan.ops) {
    auto pit = plan.part.find(op);
    if (pit == plan.part.end()) continue;
    for (Value *r : op->results()) {
      std::vector<int> readers;
      for (Operation *u : r->users()) {
        auto uit = plan.part.find(u);
        if (uit == plan.part.end()) continue; // the latch: carried in its own partition
        if (uit->second < pit->second) return false;
        if (uit->second > pit->second &&
            std::find(readers.begin(), readers.end(), uit->second) == readers.end())
          readers.push_back(uit->second);
        // One row per iteration (d0 = 1) is what batch-input-projection
        // turns into a GEMM; below min-cols columns the GEMM saves less than
        // the second loop and the stacking cost (docs/perf.md, "Loop
        // distribution"). Unknown columns count as many.
        if (uit->second > pit->second && u->is(OpCode::MatMul) && u->operand(0) == r &&
            !u->boolAttr("transpose_a") && loop_.isInvariant(u->operand(1)) && r->type().isTensor() &&
            r->type().rank() >= 1 && r->type().dims()[0] == 1 &&
            (productCols(*u) == kDynamic || productCols(*u) >= minCols_))
          profitable = true;
      }
      if (readers.empty()) continue;
      Type ty = r->type();
      if (!ty.isTensor() || ty.rank() < 1 || !ty.hasStaticShape()) return false;
      plan.crossing.push_back({r, readers});
    }
  }
  return profitable;
}

class LoopDistributePass : public Pass {
public:
  std::string_view name() const override { return "loop-distribute"; }

  std::string setOption(std::string_view key, std::string_view value) override {
    if (key != "min-cols") return Pass::setOption(key, value);
    if (!parseIntOption(value, 0, std::numeric_limits<int64_t>::max(), minCols_))
      return "option 'min-cols' of 'loop-distribute' takes a non-negative integer, got '" + std::string(value) + "'";
    return "";
  }

  LogicalResult run(Module &m, DiagnosticEngine &, bool &changed) override {
    for (auto &f : m.functions()) {
      if (isPrimitive(*f)) continue;
      // One loop at a time: distribution changes the CFG.
      bool again = true;
      while (again) {
        again = false;
        DominanceInfo dom(*f);
        for (Loop &loop : findLoops(*f, dom)) {
          CountedLoop cl = matchCountedLoop(loop);
          if (!cl.counter) continue;
          Plan plan;
          if (!Planner(loop, cl, minCols_).run(plan)) continue;
          distribute(m, *f, loop, cl, plan);
          changed = again = true;
          break;
        }
      }
    }
    return success();
  }

private:
  /// The batched projection's columns below which distributing does not
  /// pay (docs/perf.md, "Loop distribution").
  int64_t minCols_ = 512;

  static void distribute(Module &m, Function &f, const Loop &loop, const CountedLoop &cl, Plan &plan);
};

void LoopDistributePass::distribute(Module &m, Function &f, const Loop &loop, const CountedLoop &cl,
                                    Plan &plan) {
  Context &ctx = m.context();
  Block *h = loop.header, *body = loop.latches[0], *pre = loop.preheader, *exit = cl.exit;
  Operation *latch = body->back(), *preBr = pre->back();
  BlockArgument *t = cl.counter;
  Location loc = cl.compare->loc();
  const int K = plan.numParts;
  Value *n = cl.compare->operand(1);
  Value *zero = passedTo(preBr, h, t->index());
  Value *one = nullptr;
  for (Value *v : passedTo(latch, h, t->index())->definingOp()->operands())
    if (v != t) one = v;

  // Buffers, made in the preheader.
  Builder pb(m, loc);
  pb.setInsertionPoint(preBr);
  struct Stack {
    Value *value;
    std::vector<int> readers;
    int from;
    int64_t rows; // d0
    Value *init;
    Value *stride = nullptr;      // the constant d0 when it is not 1
    BlockArgument *arg = nullptr; // in the header of loop `from`
  };
  std::vector<Stack> stacks;
  for (auto &[v, readers] : plan.crossing) {
    Type ty = v->type();
    const std::vector<int64_t> &d = ty.dims();
    pb.setLoc(v->definingOp()->loc());
    Value *stride = d[0] == 1 ? nullptr : pb.constantI64(d[0]);
    Value *count = stride ? pb.create(OpCode::Mul, {n, stride})->result() : n;
    Value *shape = pb.create(OpCode::Reshape, {count}, {{"shape", Attr::getInts({1})}})->result();
    if (d.size() > 1) {
      DenseValue rest;
      rest.dtype = DType::I64;
      rest.shape = {static_cast<int64_t>(d.size() - 1)};
      for (size_t k = 1; k < d.size(); ++k) rest.appendInt(d[k]);
      Value *tail = pb.create(OpCode::Constant, {}, {{"value", Attr::getDense(std::move(rest))}},
                              {ctx.tensor(DType::I64, {static_cast<int64_t>(d.size() - 1)})})
                        ->result();
      shape = pb.create(OpCode::Concat, {shape, tail}, {{"axis", Attr::getInt(0)}})->result();
    }
    Value *buf = pb.create(OpCode::Zeros, {shape}, {{"dtype", Attr::getDType(ty.dtype())}})->result();
    if (d.size() > 1) {
      std::vector<int64_t> dims = d;
      dims[0] = -1;
      buf = pb.create(OpCode::Reshape, {buf}, {{"shape", Attr::getInts(dims)}})->result();
    }
    if (!v->name().empty()) buf->setName(v->name() + ".rows");
    stacks.push_back({v, readers, plan.part.at(v->definingOp()), d[0], buf, stride});
    ++NumStacked;
  }

  // The loops: 0 reuses h and body; 1 .. K-1 are new blocks after body.
  std::vector<Block *> pres(static_cast<size_t>(K), nullptr), heads(static_cast<size_t>(K), nullptr),
      bodies(static_cast<size_t>(K), nullptr);
  std::vector<BlockArgument *> counters(static_cast<size_t>(K), nullptr);
  heads[0] = h;
  bodies[0] = body;
  pres[0] = pre;
  counters[0] = t;
  Block *after = body;
  std::string hl = blockLabelOrDefault(*h), bl = blockLabelOrDefault(*body);
  for (int k = 1; k < K; ++k) {
    std::string sfx = "." + std::to_string(k);
    pres[static_cast<size_t>(k)] = f.insertBlockAfter(after, std::make_unique<Block>(hl + sfx + ".pre"));
    heads[static_cast<size_t>(k)] = f.insertBlockAfter(pres[static_cast<size_t>(k)], std::make_unique<Block>(hl + sfx));
    bodies[static_cast<size_t>(k)] = f.insertBlockAfter(heads[static_cast<size_t>(k)], std::make_unique<Block>(bl + sfx));
    after = bodies[static_cast<size_t>(k)];
    BlockArgument *tk = heads[static_cast<size_t>(k)]->addArgument(t->type(), t->argLoc());
    tk->setName(t->name());
    counters[static_cast<size_t>(k)] = tk;
  }

  // Header arguments of partitions > 0 move to their loop's header.
  std::vector<std::vector<Value *>> inits(static_cast<size_t>(K)), nexts(static_cast<size_t>(K));
  std::vector<unsigned> moved;
  for (unsigned i = 0; i < plan.argPart.size(); ++i) {
    int p = plan.argPart[i];
    if (p <= 0) continue;
    BlockArgument *old = h->argument(i);
    BlockArgument *na = heads[static_cast<size_t>(p)]->addArgument(old->type(), old->argLoc());
    na->setName(old->name());
    inits[static_cast<size_t>(p)].push_back(passedTo(preBr, h, i));
    nexts[static_cast<size_t>(p)].push_back(passedTo(latch, h, i));
    old->replaceAllUsesWith(na);
    moved.push_back(i);
  }
  // Stack buffers: one more argument of the producer's header.
  for (Stack &s : stacks) {
    Type bt = s.init->type();
    s.arg = heads[static_cast<size_t>(s.from)]->addArgument(bt, s.value->definingOp()->loc());
    s.arg->setName(s.init->name());
  }

  // Bodies: move each op to its partition's body, copying t-only ops where used.
  std::vector<IRMapping> maps(static_cast<size_t>(K));
  for (int k = 1; k < K; ++k) maps[static_cast<size_t>(k)].values[t] = counters[static_cast<size_t>(k)];
  std::vector<std::vector<bool>> needT(static_cast<size_t>(K), std::vector<bool>(plan.ops.size(), false));
  // Which t-only ops each partition needs (transitively, through operands).
  std::unordered_map<const Operation *, size_t> pos;
  for (size_t i = 0; i < plan.ops.size(); ++i) pos[plan.ops[i]] = i;
  // A worklist, not recursion: a chain of t-only ops can be as long as the
  // body.
  auto need = [&](int k, Operation *root) {
    std::vector<Operation *> work{root};
    while (!work.empty()) {
      Operation *op = work.back();
      work.pop_back();
      for (Value *v : op->operands()) {
        Operation *d = v->definingOp();
        if (!d || !plan.tOnly.count(d) || needT[static_cast<size_t>(k)][pos[d]]) continue;
        needT[static_cast<size_t>(k)][pos[d]] = true;
        work.push_back(d);
      }
    }
  };
  for (Operation *op : plan.ops)
    if (auto it = plan.part.find(op); it != plan.part.end() && it->second > 0) need(it->second, op);
  for (int k = 1; k < K; ++k)
    for (unsigned i = 0; i < plan.argPart.size(); ++i) // the original arguments (h has the stacks too now)
      if (plan.argPart[i] == k)
        if (Operation *d = passedTo(latch, h, i)->definingOp(); d && plan.tOnly.count(d)) {
          needT[static_cast<size_t>(k)][pos[d]] = true;
          need(k, d);
        }
  for (Operation *op : plan.ops) {
    if (plan.tOnly.count(op)) {
      for (int k = 1; k < K; ++k)
        if (needT[static_cast<size_t>(k)][pos[op]])
          bodies[static_cast<size_t>(k)]->push_back(cloneOp(*op, maps[static_cast<size_t>(k)]));
      continue;
    }
    int p = plan.part.at(op);
    if (p == 0) continue;
    bodies[static_cast<size_t>(p)]->push_back(op->remove());
  }
  // Carried values computed by copied t-only ops come from the copies.
  for (int k = 1; k < K; ++k)
    for (Value *&v : nexts[static_cast<size_t>(k)]) v = maps[static_cast<size_t>(k)].lookup(v);
  for (int k = 1; k < K; ++k) {
    Block *bk = bodies[static_cast<size_t>(k)];
    for (Operation &op : *bk)
      for (unsigned i = 0; i < op.numOperands(); ++i) {
        Value *v = op.operand(i);
        Value *nv = maps[static_cast<size_t>(k)].lookup(v);
        if (nv != v) op.setOperand(i, nv);
      }
  }

  // Start of row t of a stack, in loop k's body.
  auto startOf = [&](Builder &b, int k, const Stack &s) -> Value * {
    Value *tk = counters[static_cast<size_t>(k)];
    return s.stride ? b.create(OpCode::Mul, {tk, s.stride})->result() : tk;
  };
  // Writers: at the end of the producer's body. Readers: at the start of theirs.
  for (Stack &s : stacks) {
    Block *bp = bodies[static_cast<size_t>(s.from)];
    Builder wb(m, s.value->definingOp()->loc());
    if (s.from == 0) wb.setInsertionPoint(latch);
    else wb.setInsertionPointToEnd(bp);
    Value *upd = wb.create(OpCode::DynamicUpdateSlice, {s.arg, s.value, startOf(wb, s.from, s)},
                           {{"axis", Attr::getInt(0)}})
                     ->result();
    if (!s.value->name().empty()) upd->setName(s.value->name() + ".rows.next");
    if (s.from == 0) {
      std::vector<Value *> ops = latch->operands();
      ops.push_back(upd);
      latch->setOperands(ops);
      latch->mutableSuccessors()[0].operandCount += 1;
      std::vector<Value *> pops = preBr->operands();
      pops.push_back(s.init);
      preBr->setOperands(pops);
      preBr->mutableSuccessors()[0].operandCount += 1;
    } else {
      inits[static_cast<size_t>(s.from)].push_back(s.init);
      nexts[static_cast<size_t>(s.from)].push_back(upd);
    }
    for (int k : s.readers) {
      Block *bk = bodies[static_cast<size_t>(k)];
      Builder rb(m, s.value->definingOp()->loc());
      if (bk->front()) rb.setInsertionPoint(bk->front());
      else rb.setInsertionPointToEnd(bk);
      Value *row = rb.create(OpCode::DynamicSlice, {s.arg, startOf(rb, k, s)},
                             {{"axis", Attr::getInt(0)}, {"size", Attr::getInt(s.rows)}})
                       ->result();
      row->setName(s.value->name());
      std::vector<std::pair<Operation *, unsigned>> uses;
      for (OpOperand &u : s.value->uses())
        if (u.owner()->block() == bk && u.owner() != row->definingOp()) uses.push_back({u.owner(), u.index()});
      for (auto [o, i] : uses) o->setOperand(i, row);
    }
  }

  // Drop the moved arguments from loop 0 (last first: indices shift).
  for (size_t j = moved.size(); j-- > 0;) {
    unsigned i = moved[j];
    std::vector<Value *> lops = latch->operands(), pops = preBr->operands();
    lops.erase(lops.begin() + latch->successors()[0].operandBegin + i);
    pops.erase(pops.begin() + preBr->successors()[0].operandBegin + i);
    latch->setOperands(lops);
    latch->mutableSuccessors()[0].operandCount -= 1;
    preBr->setOperands(pops);
    preBr->mutableSuccessors()[0].operandCount -= 1;
    h->eraseArgument(i);
  }

  // Control: loop k-1 exits to loop k's preheader; the last to the old exit.
  Operation *cond = h->back();
  for (int k = 1; k < K; ++k) {
    size_t ku = static_cast<size_t>(k);
    Block *pk = pres[ku], *hk = heads[ku], *bk = bodies[ku];
    // Loop k counts to dim(S, 0) of a row-by-row stack it reads, if any.
    Value *bound = n;
    Builder b(m, loc);
    b.setInsertionPointToEnd(pk);
    for (Stack &s : stacks)
      if (s.rows == 1 && std::find(s.readers.begin(), s.readers.end(), k) != s.readers.end()) {
        bound = b.create(OpCode::Dim, {s.arg}, {{"axis", Attr::getInt(0)}})->result();
        break;
      }
    std::vector<Value *> init{zero};
    init.insert(init.end(), inits[ku].begin(), inits[ku].end());
    b.create(OpCode::Br, init, {}, {}, {Successor{hk, 0, static_cast<unsigned>(init.size()), "", loc}});
    Builder hb(m, loc);
    hb.setInsertionPointToEnd(hk);
    Value *done = hb.create(OpCode::GreaterEqual, {counters[ku], bound})->result();
    done->setName(cl.compare->result(0)->name());
    hb.create(OpCode::CondBr, {done}, {}, {},
              {Successor{exit, 1, 0, "", loc}, Successor{bk, 1, 0, "", loc}});
    Builder bb(m, latch->loc());
    bb.setInsertionPointToEnd(bk);
    Value *tn = bb.create(OpCode::Add, {counters[ku], one})->result();
    tn->setName(passedTo(latch, h, t->index())->name());
    std::vector<Value *> next{tn};
    next.insert(next.end(), nexts[ku].begin(), nexts[ku].end());
    bb.create(OpCode::Br, next, {}, {}, {Successor{hk, 0, static_cast<unsigned>(next.size()), "", latch->loc()}});
    // The previous loop now leaves to this one.
    Operation *prevCond = k == 1 ? cond : heads[ku - 1]->back();
    for (Successor &s : prevCond->mutableSuccessors())
      if (s.block == exit) s.block = pk;
  }
  ++NumDistributed;
  NumLoopsMade += K;
}

} // namespace

std::unique_ptr<Pass> createLoopDistributePass() { return std::make_unique<LoopDistributePass>(); }

} // namespace nimble::passes
