//===- AutoBatch.cpp - Static analysis for auto-batching (ACROBAT) --------===//
//
// Seed 001 (ACROBAT, §4 and §5.1, appendix A.1) batches the kernel calls of
// many instances of one program at run time; what can be decided statically
// is decided here, so that the run-time scheduler (vm/interpreter/AutoBatch.cpp) only
// groups calls and never analyses a kernel.
//
// 1. Taint analysis, 1-context-sensitive. A value is *shared* when every
//    dynamic instance of it, in every instance of the program and every
//    iteration or recursion, has the same contents: constants and globals,
//    pure results of shared operands, kernel outputs (`invoke_mut`'s
//    destinations) written from shared inputs only, block arguments with one
//    predecessor edge (or the same incoming value on every edge) that carry a
//    shared value, and parameters the calling context passes shared values
//    to. Everything else is *per instance*: entry functions' parameters,
//    constructor fields matched out of a per-instance value, a loop's
//    induction variables (a merge of different values). Each function is
//    analysed once per calling context — the taint of its arguments at a call
//    site, which for this two-point lattice is what distinguishes call sites
//    (seed 001 §5.1) — with summaries of its results per context, iterated to
//    a fixed point over recursion. A kernel's *sharing mask* joins (per
//    instance wins) over every call of it in every context.
//
// 2. Row separability (what the batched kernel may assume). Per-instance
//    inputs are stacked along axis 0, so the kernel must compute output row r
//    from input row r and the shared inputs only. Every member op is checked
//    with its operands' kinds (shared, row-aligned, or neither): element-wise
//    ops with shared operands broadcast over the rows; matmul of rows by a
//    shared matrix; reductions, softmax, layer_norm, split, slice, concat,
//    transpose, expand_dims and squeeze on other axes; take of shared data
//    by per-instance indices; reshape that keeps the rows. Anything else
//    (batch_matmul, an op mixing rows of two instances) leaves the kernel
//    unbatched, and `remarks` says which op decided it.
//
// 3. The batched variant (§5.1: "shared operands once, per-instance ones as a
//    batch") is a clone of the primitive function whose per-instance
//    parameters have axis 0 relaxed to `?`, its types re-inferred, named
//    `@<kernel>.batched`. The kernel is marked with function attributes
//
//        batch = "rows", batch_shared = [0, 1], batch_variant = @f.batched
//        batch = "invariant", batch_shared = [1, 1]   (no per-instance input:
//                                       one call serves every instance, §A.1)
//
//    which the bytecode emitter turns into the .nbc's batching section.
//
// 4. Program phases (§4.1, appendix A.3; BatchPhases.cpp): a kernel that
//    batches gets `batch_phase = N` when its calls belong to a later
//    semantic phase (after a loop or a recursion; or the functions' `phase`
//    annotations), which the emitter writes to the batch-phases section.
//
// The run-time scheduler re-checks what only values can show (equal row
// counts, shared inputs equal across the group) and runs calls one by one
// when a check fails, so this analysis decides speed, never results.
//
//===----------------------------------------------------------------------===//

#include "passes/analysis/Analysis.h"
#include "passes/lowering/BatchPhases.h"
#include "passes/Pass.h"
#include "passes/Statistic.h"

#include "ir/FlatMap.h"
#include "ir/Inference.h"

#include <algorithm>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

NIMBLE_STATISTIC(NumRowsKernels, "auto-batch", "Number of kernels batched along rows (with a batched variant)");
NIMBLE_STATISTIC(NumInvariantKernels, "auto-batch", "Number of instance-invariant kernels (one call serves all instances)");
NIMBLE_STATISTIC(NumUnbatched, "auto-batch", "Number of kernels left unbatched");
NIMBLE_STATISTIC(NumContexts, "auto-batch", "Number of calling contexts analysed");

/// At most this many contexts per function; past it a call uses the
/// all-per-instance context (sound: per instance is the top of the lattice).
constexpr size_t kMaxContextsPerFunction = 16;

//===-- 1. Taint ------------------------------------------------------------===//

class TaintAnalysis {
public:
  explicit TaintAnalysis(const Module &m) : m_(m) {}

  /// Analyses every non-primitive function as an entry (all parameters per
  /// instance) and every context reached from them.
  /// A worklist over contexts: a context is analysed when it is created and
  /// again whenever a callee's summary it read has risen, so a chain of N
  /// calls, or one function calling N others, costs O(N) analyses.
  void run() {
    for (auto &f : m_.functions())
      if (!isPrimitive(*f) && f->entry()) context(f.get(), std::vector<bool>(f->entry()->numArguments(), true));
    // First in, first out: a caller whose callees' summaries rose is queued
    // once behind all of them (last in, first out re-analysed a caller with
    // N callees N times: quadratic on many-functions).
    while (!work_.empty()) {
      size_t ci = work_.front();
      work_.pop_front();
      queued_[ci] = false;
      std::vector<bool> before = contexts_[ci].results;
      analyse(ci);
      if (contexts_[ci].results != before)
        for (size_t u : users_[ci]) push(u);
    }
  }

  /// Per kernel (primitive function name): per input, true when some call
  /// passes a per-instance value.
  /// Null when no call of `kernel` was seen.
  const std::vector<bool> *mask(const Function *kernel) const {
    auto it = masks_.find(kernel);
    return it == masks_.end() ? nullptr : &it->second;
  }
  size_t numContexts() const { return contexts_.size(); }

private:
  struct Context {
    const Function *f;
    std::vector<bool> params; // true: per instance
    std::vector<bool> results;
  };

  size_t context(const Function *f, std::vector<bool> params) {
    auto key = std::make_pair(f, params);
    auto it = index_.find(key);
    if (it != index_.end()) return it->second;
    if (perFunction_[f] >= kMaxContextsPerFunction) {
      std::fill(params.begin(), params.end(), true);
      key.second = params;
      if ((it = index_.find(key)) != index_.end()) return it->second;
    }
    ++perFunction_[f];
    Context c;
    c.f = f;
    c.params = params;
    c.results.assign(f->resultTypes().size(), false);
    contexts_.push_back(std::move(c));
    users_.emplace_back();
    queued_.push_back(false);
    index_[key] = contexts_.size() - 1;
    push(contexts_.size() - 1);
    return contexts_.size() - 1;
  }

  void push(size_t ci) {
    if (queued_[ci]) return;
    queued_[ci] = true;
    work_.push_back(ci);
  }

  // The taint of the context being analysed lives in the values' scratch
  // words (ir::Value::scratch): the analysis epoch, shifted, plus one bit. An
  // analysis recomputes its context's taint from the parameters and the
  // callees' summaries (which only rise), so nothing needs to persist
  // between analyses; a word of another epoch reads as shared.
  bool taintOf(const Context &, const Value *v) const {
    if (isa<Global>(v)) return false;
    uint64_t w = v->scratch();
    return (w >> 1) == epoch_ && (w & 1);
  }
  /// Raises `v` to per instance; true when that is new. In a function
  /// with a cycle, a value raised after some of its users were visited is
  /// queued for them (late_; see analyse).
  bool raise(Context &c, const Value *v, bool t) {
    if (!t || taintOf(c, v)) return false;
    v->setScratch((epoch_ << 1) | 1);
    if (sparse_ && !usersAhead(v)) late_.push_back(v);
    return true;
  }
  /// During the sweep, whether every user of `v` is still to be visited:
  /// a result of the op being visited, or an argument of a block not swept
  /// yet (strict SSA: the users are dominated, so later in the reverse
  /// post-order). Anything else (an invoke_mut's destination, an argument
  /// raised along a retreating edge, every raise after the sweep) may have
  /// users already visited.
  bool usersAhead(const Value *v) const {
    if (!visiting_) return false;
    if (const auto *a = dyn_cast<BlockArgument>(v)) return a->owner()->scratch() != blockStamp_;
    return v->definingOp() == visiting_;
  }

  /// Context `ci`'s taint, from its parameters and its callees' summaries;
  /// true when anything rose (including its result summary).
  ///
  /// One sweep in reverse post-order visits every definition before its
  /// uses except along retreating edges. Without one, the sweep is the
  /// fixpoint (issue 23: a confirming second sweep was a third of the pass
  /// on call chains). With one, the values raised after some of their users
  /// were visited are queued during the sweep, and afterwards their users
  /// are visited again, queueing whatever rises in turn, until the queue
  /// empties: sparse propagation over the use lists (each value rises at
  /// most once, so each use is revisited at most once per rise), the same
  /// least fixpoint repeated sweeps reached at the cost of a sweep per
  /// level of loop nesting (issue 23: two or more sweeps of a loop of
  /// 140,000 blocks).
  bool analyse(size_t ci) {
    ++epoch_;
    bool any = false;
    const Function *f = contexts_[ci].f;
    const Shape &shape = shapeOf(f);
    sparse_ = shape.cyclic;
    blockStamp_ = epoch_;
    late_.clear();
    Block *entry = f->entry();
    for (unsigned i = 0; i < entry->numArguments(); ++i)
      any |= raise(contexts_[ci], entry->argument(i), contexts_[ci].params[i]);
    for (Block *b : shape.rpo) {
      b->setScratch(blockStamp_);
      for (Operation &op : *b) {
        visiting_ = &op;
        any |= visit(ci, op);
      }
    }
    visiting_ = nullptr;
    while (!late_.empty()) {
      const Value *v = late_.back();
      late_.pop_back();
      for (const OpOperand &u : v->uses())
        if (Operation *op = u.owner(); op->block()->scratch() == blockStamp_) // reachable
          any |= visit(ci, *op);
    }
    sparse_ = false;
    return any;
  }

  /// A function's reachable blocks in reverse post-order, and whether the
  /// CFG has a retreating edge (a cycle), computed once per function.
  struct Shape {
    std::vector<Block *> rpo;
    bool cyclic = false;
  };
  const Shape &shapeOf(const Function *f) {
    auto [it, fresh] = shapes_.try_emplace(f);
    Shape &sh = it->second;
    if (!fresh) return sh;
    sh.rpo = f->reversePostOrder();
    // RPO positions in the blocks' scratch words, under a fresh tag (a
    // hash map of the blocks was a third of the pass on a loop of 500,000
    // blocks; issue 23). A retreating edge goes to a position not after
    // its own; every successor of a reachable block is numbered.
    const uint64_t tag = newScratchTag();
    for (size_t i = 0; i < sh.rpo.size(); ++i) sh.rpo[i]->setScratch((tag << 32) | i);
    for (size_t i = 0; i < sh.rpo.size() && !sh.cyclic; ++i) {
      const Operation *t = sh.rpo[i]->terminator();
      if (!t) continue;
      for (const Successor &s : t->successors())
        if (const uint64_t w = s.block ? s.block->scratch() : 0; (w >> 32) == tag && static_cast<uint32_t>(w) <= i)
          sh.cyclic = true;
    }
    return sh;
  }

  bool visit(size_t ci, Operation &op) {
    bool changed = false;
    auto joinOperands = [&](Operation::OperandRange vs) {
      bool t = false;
      for (Value *v : vs) t |= taintOf(contexts_[ci], v);
      return t;
    };
    switch (op.code()) {
    case OpCode::Ret: {
      Context &c = contexts_[ci];
      for (unsigned i = 0; i < op.numOperands() && i < c.results.size(); ++i)
        if (taintOf(c, op.operand(i)) && !c.results[i]) c.results[i] = changed = true;
      return changed;
    }
    case OpCode::Br:
    case OpCode::CondBr: {
      // A block argument is shared when every edge into its block passes the
      // same shared value; a merge of different values (a loop's induction
      // variable, an if's result) is per instance.
      for (unsigned s = 0; s < op.successors().size(); ++s) {
        const Successor &succ = op.successors()[s];
        for (unsigned a = 0; a < succ.operandCount && a < succ.block->numArguments(); ++a) {
          BlockArgument *arg = succ.block->argument(a);
          const Value *in = op.operand(succ.operandBegin + a);
          bool t = taintOf(contexts_[ci], in) || !sameIncoming(arg, in);
          changed |= raise(contexts_[ci], arg, t);
        }
      }
      return changed;
    }
    case OpCode::Match: {
      bool t = taintOf(contexts_[ci], op.operand(0));
      for (const Successor &succ : op.successors())
        for (unsigned a = 0; a < succ.block->numArguments(); ++a)
          changed |= raise(contexts_[ci], succ.block->argument(a), t);
      return changed;
    }
    case OpCode::Call: {
      const Function *callee = m_.lookupFunction(op.attr("callee"));
      if (!callee || isPrimitive(*callee) || !callee->entry()) {
        std::vector<bool> *mask = callee && isPrimitive(*callee) ? maskFor(callee, op.numOperands()) : nullptr;
        bool t = false;
        for (unsigned i = 0; i < op.numOperands(); ++i) {
          const bool a = taintOf(contexts_[ci], op.operand(i));
          t |= a;
          if (mask && a && i < mask->size()) (*mask)[i] = true;
        }
        for (Value *r : op.resultValues()) changed |= raise(contexts_[ci], r, t);
        return changed;
      }
      std::vector<bool> args;
      for (Value *v : op.operandValues()) args.push_back(taintOf(contexts_[ci], v));
      size_t cc = context(callee, args);
      users_[cc].insert(ci);
      for (unsigned i = 0; i < op.numResults(); ++i)
        changed |= raise(contexts_[ci], op.result(i),
                         i < contexts_[cc].results.size() ? bool(contexts_[cc].results[i]) : true);
      return changed;
    }
    case OpCode::InvokeShapeFunc: {
      // The shapes come from the inputs.
      bool t = joinOperands(op.operandValues());
      for (Value *r : op.resultValues()) changed |= raise(contexts_[ci], r, t);
      return changed;
    }
    case OpCode::InvokeMut: {
      unsigned nin = static_cast<unsigned>(op.intAttr("num_inputs"));
      const unsigned n = std::min(nin, op.numOperands());
      // A callee that is not a function of the module is no kernel to
      // batch (the verifier rejects it): nothing to record.
      const Function *callee = m_.lookupFunction(op.attr("callee"));
      std::vector<bool> *mask = callee ? maskFor(callee, n) : nullptr;
      bool t = false;
      for (unsigned i = 0; i < n; ++i) {
        const bool a = taintOf(contexts_[ci], op.operand(i));
        t |= a;
        if (mask && a && i < mask->size()) (*mask)[i] = true;
      }
      // The outputs are the destinations: their contents come from the inputs.
      for (unsigned i = nin; i < op.numOperands(); ++i) changed |= raise(contexts_[ci], op.operand(i), t);
      return changed;
    }
    default: {
      bool t = joinOperands(op.operandValues());
      for (Value *r : op.resultValues()) changed |= raise(contexts_[ci], r, t);
      return changed;
    }
    }
  }

  /// True when every edge into `arg`'s block passes `v` to it.
  bool sameIncoming(const BlockArgument *arg, const Value *) {
    const Function *f = arg->owner()->function();
    if (incomingDone_.insert(f).second) {
      // Every edge of the function once: the block arguments whose incoming
      // edges pass more than one value (open addressing, no allocation per
      // edge: issue 23).
      FlatMap<const BlockArgument *, const Value *> first;
      for (auto &blk : f->blocks()) {
        Operation *t = blk->terminator();
        if (!t || (!t->is(OpCode::Br) && !t->is(OpCode::CondBr))) continue;
        for (const Successor &sc : t->successors())
          for (unsigned a = 0; a < sc.operandCount && a < sc.block->numArguments(); ++a) {
            const BlockArgument *ba = sc.block->argument(a);
            const Value *in = t->operand(sc.operandBegin + a);
            auto [v, fresh] = first.tryEmplace(ba, in);
            if (!fresh && *v != in) mixed_.tryEmplace(ba, 1);
          }
      }
    }
    return !mixed_.find(arg);
  }

  /// The mask of `kernel`, made (all shared) for `numInputs` inputs at
  /// its first call; later calls raise its entries (those of a call with
  /// more inputs than the first are not kept). Keyed by function, not
  /// name: no string is hashed per kernel call (issue 23), and a run of
  /// calls to one kernel finds it without a lookup.
  std::vector<bool> *maskFor(const Function *kernel, unsigned numInputs) {
    if (kernel != lastKernel_) {
      lastKernel_ = kernel;
      lastMask_ = &masks_.try_emplace(kernel, std::vector<bool>(numInputs, false)).first->second;
    }
    return lastMask_;
  }

  const Module &m_;
  uint64_t epoch_ = uint64_t(1) << 40; // unlikely to meet a word another pass left
  // The sweep of analyse: whether values raised out of order are queued,
  // the op being visited (null after the sweep), the swept blocks' scratch
  // word, and the queue.
  bool sparse_ = false;
  const Operation *visiting_ = nullptr;
  uint64_t blockStamp_ = 0;
  std::vector<const Value *> late_;
  std::vector<Context> contexts_;
  std::map<std::pair<const Function *, std::vector<bool>>, size_t> index_;
  std::unordered_map<const Function *, size_t> perFunction_;
  FlatMap<const BlockArgument *, char> mixed_; // merging different values (sameIncoming)
  std::unordered_set<const Function *> incomingDone_;
  std::vector<std::unordered_set<size_t>> users_; // by context: the contexts that read its summary
  std::vector<bool> queued_;
  std::deque<size_t> work_;
  std::unordered_map<const Function *, std::vector<bool>> masks_; // per kernel (stable addresses)
  const Function *lastKernel_ = nullptr;
  std::vector<bool> *lastMask_ = nullptr;
  std::unordered_map<const Function *, Shape> shapes_;
};

//===-- 2. Row separability ---------------------------------------------------===//

enum class Kind { Shared, Rows, Neither };

/// Normalises `axis` for `rank` (negative counts from the end).
int64_t norm(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

struct Separability {
  std::unordered_map<const Value *, Kind> kind;
  std::string why; // set on failure
  const Operation *at = nullptr;

  Kind of(const Value *v) const {
    auto it = kind.find(v);
    return it == kind.end() ? Kind::Shared : it->second; // globals, constants
  }
  bool fail(const Operation &op, std::string msg) {
    why = std::move(msg);
    at = &op;
    return false;
  }

  /// The kind of `op`'s results from its operands'; false (with `why`) when
  /// the op would mix rows.
  bool visit(const Operation &op) {
    bool anyRows = false;
    for (Value *v : op.operandValues()) {
      Kind k = of(v);
      if (k == Kind::Neither) return fail(op, "'" + std::string(op.name()) + "' uses a per-instance value that is not row-aligned");
      anyRows |= k == Kind::Rows;
    }
    auto set = [&](Kind k) {
      for (Value *r : op.resultValues()) kind[r] = k;
      return true;
    };
    if (!anyRows) return set(Kind::Shared);
    std::string name(op.name());
    const int64_t outRank = op.numResults() && op.result(0)->type().isTensor() ? op.result(0)->type().rank() : 0;
    if (outRank == 0) return fail(op, "'" + name + "' has a scalar result");
    const OpInfo &info = op.info();
    switch (info.relation) {
    case Relation::Unary:
      if (op.is(OpCode::Softmax) && norm(op.intAttr("axis"), outRank) == 0)
        return fail(op, "softmax over axis 0 mixes the rows");
      return set(Kind::Rows);
    case Relation::Cast:
      return set(Kind::Rows);
    case Relation::Broadcast:
    case Relation::Compare:
    case Relation::Select:
      for (Value *v : op.operandValues()) {
        Type t = v->type();
        if (of(v) == Kind::Rows) {
          if (t.rank() != outRank) return fail(op, "'" + name + "' broadcasts a per-instance operand over rows");
        } else if (t.rank() == outRank && t.dims()[0] != 1) {
          return fail(op, "'" + name + "' pairs rows with a shared operand that has rows of its own");
        }
      }
      return set(Kind::Rows);
    case Relation::MatMul:
      if (of(op.operand(0)) == Kind::Rows && of(op.operand(1)) == Kind::Shared && !op.boolAttr("transpose_a") &&
          op.operand(0)->type().rank() == 2)
        return set(Kind::Rows);
      return fail(op, "matmul batches only per-instance rows times a shared matrix");
    case Relation::Reduce: {
      const std::vector<int64_t> &axes = op.attr("axes").getInts();
      int64_t inRank = op.operand(0)->type().rank();
      if (axes.empty()) return fail(op, "'" + name + "' reduces every axis");
      for (int64_t a : axes)
        if (norm(a, inRank) == 0) return fail(op, "'" + name + "' reduces over axis 0");
      return set(Kind::Rows);
    }
    case Relation::ArgReduce:
      if (norm(op.intAttr("axis"), op.operand(0)->type().rank()) == 0)
        return fail(op, "'" + name + "' reduces over axis 0");
      return set(Kind::Rows);
    case Relation::LayerNorm:
      if (of(op.operand(0)) != Kind::Rows || of(op.operand(1)) != Kind::Shared || of(op.operand(2)) != Kind::Shared ||
          outRank < 2)
        return fail(op, "layer_norm batches only per-instance rows with shared gamma and beta");
      return set(Kind::Rows);
    case Relation::Transpose: {
      const std::vector<int64_t> &perm = op.attr("perm").getInts();
      if (perm.empty() || perm[0] != 0) return fail(op, "transpose moves axis 0");
      return set(Kind::Rows);
    }
    case Relation::Split:
      if (norm(op.intAttr("axis"), outRank) == 0) return fail(op, "split along axis 0");
      return set(Kind::Rows);
    case Relation::Slice:
      for (int64_t a : op.attr("axes").getInts())
        if (norm(a, outRank) == 0) return fail(op, "slice along axis 0");
      return set(Kind::Rows);
    case Relation::Concat:
      if (norm(op.intAttr("axis"), outRank) == 0) return fail(op, "concat along axis 0");
      for (Value *v : op.operandValues())
        if (of(v) != Kind::Rows) return fail(op, "concat of per-instance rows with a shared operand");
      return set(Kind::Rows);
    case Relation::DynamicSlice:
      if (of(op.operand(0)) != Kind::Rows || of(op.operand(1)) != Kind::Shared ||
          norm(op.intAttr("axis"), outRank) == 0)
        return fail(op, "dynamic_slice batches only rows at a shared start on another axis");
      return set(Kind::Rows);
    case Relation::Take: {
      int64_t axis = norm(op.intAttr("axis"), op.operand(0)->type().rank());
      if (of(op.operand(0)) == Kind::Shared && op.operand(1)->type().rank() >= 1 && axis == 0)
        return set(Kind::Rows); // out = indices' shape + data's trailing dims
      if (of(op.operand(0)) == Kind::Rows && of(op.operand(1)) == Kind::Shared && axis != 0)
        return set(Kind::Rows);
      return fail(op, "take batches only shared data at per-instance indices, or rows at shared indices");
    }
    case Relation::ExpandDims:
      if (norm(op.intAttr("axis"), outRank) == 0) return fail(op, "expand_dims at axis 0");
      return set(Kind::Rows);
    case Relation::Squeeze: {
      const std::vector<int64_t> &axes = op.attr("axes").getInts();
      if (axes.empty()) return fail(op, "squeeze of every size-1 axis may drop the rows");
      for (int64_t a : axes)
        if (norm(a, op.operand(0)->type().rank()) == 0) return fail(op, "squeeze of axis 0");
      return set(Kind::Rows);
    }
    case Relation::Reshape: {
      Type in = op.operand(0)->type();
      const std::vector<int64_t> &shape = op.attr("shape").getInts();
      if (in.rank() < 1 || shape.empty() || in.dims()[0] == kDynamic || shape[0] != in.dims()[0])
        return fail(op, "reshape does not keep axis 0");
      int64_t inRest = 1, outRest = 1;
      for (size_t i = 1; i < in.dims().size(); ++i) {
        if (in.dims()[i] == kDynamic) return fail(op, "reshape of a dynamic row");
        inRest *= in.dims()[i];
      }
      for (size_t i = 1; i < shape.size(); ++i) {
        if (shape[i] < 0) return fail(op, "reshape infers a trailing dimension");
        outRest *= shape[i];
      }
      if (inRest != outRest) return fail(op, "reshape moves elements across rows");
      return set(Kind::Rows);
    }
    default:
      return fail(op, "'" + name + "' is not known to keep rows apart");
    }
  }
};

//===-- The pass ----------------------------------------------------------------===//

class AutoBatchPass : public Pass {
public:
  std::string_view name() const override { return "auto-batch"; }
  std::string setOption(std::string_view key, std::string_view value) override {
    if (key == "remarks") {
      if (value != "true" && value != "false") return "auto-batch option 'remarks' takes true or false";
      remarks_ = value == "true";
      return "";
    }
    return Pass::setOption(key, value);
  }

  LogicalResult run(Module &m, DiagnosticEngine &diag, bool &changed) override {
    TaintAnalysis taint(m);
    taint.run();
    NumContexts += taint.numContexts();
    if (!assignBatchPhases(m, diag, phases_)) return failure();
    // The kernels in module order (deterministic output).
    std::vector<Function *> kernels;
    for (auto &f : m.functions())
      if (isPrimitive(*f) && taint.mask(f.get()) && !f->fnAttr("batch")) kernels.push_back(f.get());
    for (Function *f : kernels) changed |= batch(m, *f, *taint.mask(f), diag);
    return success();
  }

private:
  bool batch(Module &m, Function &f, const std::vector<bool> &perInstance, DiagnosticEngine &diag) {
    Block *body = f.entry();
    if (!body || f.blocks().size() != 1 || perInstance.size() != body->numArguments()) return false;
    std::vector<int64_t> shared;
    bool anyInstance = false;
    for (bool p : perInstance) {
      shared.push_back(p ? 0 : 1);
      anyInstance |= p;
    }
    // An upper-bound kernel returns its true output shape beside the data:
    // neither stacking nor copying serves it.
    for (Operation &op : *body)
      if (op.info().shapeMode == ShapeMode::UpperBound) {
        ++NumUnbatched;
        if (remarks_) diag.remark(op.loc(), "@" + f.name() + ": not batched: '" + std::string(op.name()) +
                                                "' has an upper-bound shape");
        return false;
      }
    // Program phases (BatchPhases.cpp): only a kernel that batches has one.
    auto pit = phases_.find(&f);
    const uint32_t phase = pit == phases_.end() ? 0 : pit->second;
    const std::string inPhase = phase ? ", phase " + std::to_string(phase) : "";
    auto mark = [&](const char *mode) {
      f.fnAttrs().emplace_back("batch", Attr::getStr(mode));
      f.fnAttrs().emplace_back("batch_shared", Attr::getInts(shared));
      if (phase) f.fnAttrs().emplace_back("batch_phase", Attr::getInt(phase));
    };
    if (!anyInstance) {
      mark("invariant");
      sortAttrs(f);
      ++NumInvariantKernels;
      if (remarks_)
        diag.remark(f.loc(), "@" + f.name() + ": instance-invariant, one call serves every instance" + inPhase);
      return true;
    }
    Separability sep;
    for (unsigned i = 0; i < body->numArguments(); ++i) {
      Type t = body->argument(i)->type();
      sep.kind[body->argument(i)] =
          !perInstance[i] ? Kind::Shared : (t.isTensor() && t.rank() >= 1 ? Kind::Rows : Kind::Neither);
    }
    bool ok = true;
    for (Operation &op : *body) {
      if (op.is(OpCode::Ret)) {
        for (Value *v : op.operandValues())
          if (sep.of(v) != Kind::Rows) ok = sep.fail(op, "a result is not per-instance rows");
        break;
      }
      if (!(ok = sep.visit(op))) break;
    }
    std::string why = sep.why;
    Function *variant = nullptr;
    if (ok && !(variant = makeVariant(m, f, perInstance, why))) ok = false;
    if (!ok) {
      ++NumUnbatched;
      if (remarks_) diag.remark(sep.at ? sep.at->loc() : f.loc(), "@" + f.name() + ": not batched: " + why);
      return false;
    }
    mark("rows");
    f.fnAttrs().emplace_back("batch_variant", Attr::getSym(variant->name()));
    sortAttrs(f);
    ++NumRowsKernels;
    if (remarks_) {
      std::string s, p;
      for (unsigned i = 0; i < perInstance.size(); ++i)
        (perInstance[i] ? p : s) += std::string((perInstance[i] ? p : s).empty() ? "" : ", ") + "%" +
                                    body->argument(i)->name();
      diag.remark(f.loc(), "@" + f.name() + ": batched along rows as @" + variant->name() + " (per instance: " + p +
                               "; shared: " + (s.empty() ? "none" : s) + ")" + inPhase);
    }
    return true;
  }

  static void sortAttrs(Function &f) {
    std::stable_sort(f.fnAttrs().begin(), f.fnAttrs().end(),
                     [](const auto &a, const auto &b) { return a.first < b.first; });
  }

  /// `@<f>.batched`: `f` with axis 0 of its per-instance parameters relaxed
  /// to `?` and its types re-inferred; null (with `why`) when inference
  /// rejects it.
  Function *makeVariant(Module &m, Function &f, const std::vector<bool> &perInstance, std::string &why) {
    Context &ctx = m.context();
    Block *body = f.entry();
    std::vector<Type> ins;
    for (unsigned i = 0; i < body->numArguments(); ++i) {
      Type t = body->argument(i)->type();
      if (perInstance[i]) {
        std::vector<int64_t> dims = t.dims();
        dims[0] = kDynamic;
        t = ctx.tensor(t.dtype(), dims);
      }
      ins.push_back(t);
    }
    std::string name = f.name() + ".batched";
    if (m.lookupFunction(name)) name = m.freshFunctionName(name);
    auto owned = std::make_unique<Function>(name, ctx.func(ins, f.resultTypes()), f.loc());
    owned->fnAttrs().emplace_back("primitive", Attr::getBool(true));
    Block *entry = owned->addBlock(std::make_unique<Block>("entry"));
    IRMapping map;
    for (unsigned i = 0; i < body->numArguments(); ++i) {
      Value *a = entry->addArgument(ins[i], body->argument(i)->loc());
      a->setName(body->argument(i)->name());
      map.values[body->argument(i)] = a;
    }
    std::vector<Type> results;
    for (Operation &op : *body) {
      std::unique_ptr<Operation> c = cloneOp(op, map);
      if (c->is(OpCode::Reshape)) {
        std::vector<int64_t> shape = c->attr("shape").getInts();
        if (!shape.empty() && c->operand(0)->type().rank() >= 1 && c->operand(0)->type().dims()[0] == kDynamic) {
          shape[0] = -1; // the rows stay rows: one row of the original per row
          c->setAttr("shape", Attr::getInts(shape));
        }
      }
      if (c->is(OpCode::Ret)) {
        for (Value *v : c->operandValues()) {
          if (!v->type().isTensor() || v->type().rank() < 1 || v->type().dims()[0] != kDynamic) {
            why = "a result of the batched variant does not have the instances' rows on axis 0";
            return nullptr;
          }
          results.push_back(v->type());
        }
        entry->push_back(std::move(c));
        break;
      }
      InferredTypes inf = inferResultTypes(*c, m);
      if (!inf.ok()) {
        why = "the batched variant does not type-check: " + inf.error;
        return nullptr;
      }
      for (unsigned r = 0; r < c->numResults(); ++r) c->result(r)->setType(inf.types[r]);
      entry->push_back(std::move(c));
    }
    owned->setType(ctx.func(ins, results));
    return m.addFunction(std::move(owned));
  }

  bool remarks_ = false;
  std::unordered_map<const Function *, uint32_t> phases_;
};

} // namespace

std::unique_ptr<Pass> createAutoBatchPass() { return std::make_unique<AutoBatchPass>(); }

} // namespace nimble::passes
