//===- Fuse.cpp - Operator fusion under the shape-function policy ---------===//
//
// Groups kernel ops into primitive functions (attribute `primitive = true`),
// the way TVM's FuseOps does, so that manifest-memory turns each group into
// one invoke_shape_func (the composed shape function) and one invoke_mut (one
// kernel call that the runtime, vm/dispatch/KernelRunner.cpp, runs member by member):
//
//   %h  = matmul %x, @w                %y = call @fused_matmul_0(%x, @w, @b)
//   %hb = add %h, @b           ==>
//   %y  = relu %hb                     func @fused_matmul_0(%in0, %in1, %in2)
//                                          attributes {primitive = true} {
//                                        %h = matmul %in0, %in1  (same locs)
//                                        %hb = add %h, %in2
//                                        %y = relu %hb
//                                        ret %y
//                                      }
//
// Kernel ops are the ops whose relation is not Structural and that the VM
// does not execute natively (constant, shape_of, reshape, dyn_reshape,
// device_copy and storage_size stay outside groups: manifest-memory's
// isVMNative). Constants and globals used by members become group inputs.
//
// Grouping (per basic block, never across blocks). The ops of a block are
// visited last to first; each kernel op either joins the group of its
// consumers or starts a new group. A producer P joins group G when
//   1. every use of every result of P is a member of G, all in P's block
//      (a value also needed outside the group is left to the multi-output
//      step below);
//   2. the fusion patterns of ir/Ops.def allow it (table below), judged
//      against G's pattern, the "worst" of its members (ElemWise < Broadcast
//      < Injective < Reduction < OutputFusable < Opaque), which is what G may
//      still absorb;
//   3. the paper's policy allows it (below);
//   4. G has fewer than `max-group-size` members;
//   5. P does not end the element-wise epilogue of a matmul or conv when G
//      holds only transposes and reductions (movesOnly), which the matmul
//      or conv could not join: the transpose that
//      convert-layout puts after a channels-last region would otherwise
//      take the last conv's bias, residual add and relu, and the conv run
//      without its post-ops (endsEpilogue). The transpose or reduction then
//      forms a group of its own, for the same traffic (one intermediate
//      written and read either way). Other groups (the LSTM cell after its
//      gates' split) keep taking the adds before them, as they did: one
//      kernel for the cell's arithmetic.
// Row cells (issue 52; joinsRowCell): products of one static row by static
// weights of at most 2^18 elements, with the element-wise, broadcast,
// split and slice ops around them, form one group: several products, an
// element-wise lhs of a product (h_l + h_r), and a product under a split
// (the gates). A group that would also take another op (the LSTM cell's
// dynamic_slice) is formed again without the row-cell rule for its members.
// Multi-output fusion (XLA's pass of that name): then a formed group P
// whose results are read by a later group C, and otherwise only after C's
// output op (or in other blocks), merges into C, whose call also returns
// P's results used outside (the LSTM cell's c', carried to the next
// iteration and read by h' = o * tanh(c'), comes from the same kernel as
// h'); see mergeMultiOutput.
// Conv pairs (issue 47; mergeConvPairs): then a group of a 1 x 1 conv
// (channels-last, stride 1, no padding, not grouped) and its element-wise
// epilogue, whose result only a depthwise 3 x 3 conv reads, as its input
// (channels-last, padding 1, stride 1 or 2 on both axes, one channel per
// group), merges into that conv's group when that group is the conv and
// its element-wise epilogue too: MobileNetV2's expand and depthwise convs
// with their ReLU6s. The runtime runs such a kernel as one oneDNN
// primitive with a fused depthwise post-op where that pays, as the two
// convs one after the other elsewhere (vm/dispatch/LibraryConv.h, "Pairs").
// Because every use of a member outside its group comes after the group's
// output op, the group is convex in the block's dataflow (no path leaves
// the group and re-enters it: an op after the output op feeds no member):
// replacing it by one `call` at the position of its output op (the last
// member) keeps SSA dominance (every group input is defined before that op;
// every member result used outside is a result of the call, used after it). Visiting last to first, every user of P in P's
// block has been placed in a group before P is considered, so the decision
// is deterministic and needs no iteration (a block with row cells may take
// a second round, below).
//
// Pattern rules (producer pattern, and the group patterns it may join):
//
//   producer          joins a group (of consumers) whose pattern is
//   ElemWise          ElemWise, Broadcast, Injective, Reduction
//   Broadcast         ElemWise, Broadcast, Injective, Reduction
//   Injective         ElemWise, Broadcast, Injective
//   Reduction         ElemWise            (a reduction absorbs elementwise
//                                          consumers, not broadcasting ones)
//   OutputFusable     ElemWise, Broadcast (matmul + bias add + activation)
//   Opaque            never
//
// An OutputFusable op only joins a group of (elementwise/broadcast) ops, so
// two OutputFusable ops never share a group (but in a row cell, below); an
// elementwise producer never joins a group containing a matmul through the
// matmul's inputs (but in a row cell; TVM does
// not fuse into a matmul's inputs either), but does join one whose
// element-wise epilogue alone uses it (`joinsEpilogue`: an operand of the
// epilogue computed point by point, like the epilogue; an injective op
// such as the `split` of the gates is computed point by point too, by
// rewriting the index).
//
// The paper's policy (Nimble paper §3.2, last paragraph: "a basic operator
// with a data dependent or upper bound shape function cannot be fused to
// other operators, i.e., taking the outputs of other operators as its inputs
// to fuse together, as the shape function requires to access to the
// intermediate result within a composite operator"; appendix A shows the
// composed shape function that manifest-memory calls):
//   - a producer never joins a group through a use by a DataDependent or
//     UpperBound member: such an op reads only group inputs, which the
//     runtime can pass to the composed shape function by value;
//   - a DataDependent op (zeros, full, arange) may itself join the group of
//     its consumers, i.e. lead a group, since what it reads stays an input;
//   - an UpperBound op (unique, nonzero) is never fused at all: departing
//     from the paper's "not fused with its producers", it does not lead a
//     group either, because manifest-memory and the runtime only support
//     upper-bound kernels whose single member is the upper-bound op (the
//     true-shape output describes output 0 of that member).
//
// Outlining. Groups of one op are left alone (manifest-memory outlines
// those, sharing identical ones). A group of two or more becomes
// `@fused_<mnemonic of its first member>_<n>`, n the smallest number that
// makes the name unique in the module (deterministic: blocks and groups are
// processed in order). Its parameters are the group inputs in first-use
// order (members in block order, operands in order); its body is a clone of
// the members, keeping names, types and locations; it returns the output
// op's results. The members are replaced by one `call` at the output op,
// with the output op's location and result names, and with the members'
// locations (`Operation::memberLocs`, printed `loc(..., members[...])`), from
// which the bytecode emitter takes each kernel call's member locations: a
// run-time error in a member points at that member's line.
//
// Deduplication (IREE's deduplicate-executables, TVM's compile-engine cache
// keyed by structural equality): a group whose body would be identical to an
// earlier group's -- the same input types, the same members in order (op,
// attributes, result types, operands by position), the same outputs --
// calls the earlier group's function instead of outlining another. Names and
// locations are not part of the body (the locations live on each call), so
// a model that repeats a layer gets one kernel per distinct layer body, not
// one per use: a program of N identical calls compiles N calls of one kernel
// (issue 23: at 1,000,000 ops, 100,000 outlined copies of three bodies made
// a third of the IR that every later pass walked). Auto-batching then joins
// the sharing masks of every call of the kernel (passes/lowering/AutoBatch.cpp).
//
// Not fused: functions already primitive, calls, control flow, ADT ops
// (they are structural). Running the pass twice changes nothing: a fused
// `call` is structural, so it neither joins nor absorbs a group.
//
// Options: fuse{max-group-size=N}, 1 <= N <= 4096 (the bytecode's limit on
// kernel members; 1 disables fusion), default 32; fuse{row-cells=false}
// forms no row cells (the --target=cuda pipeline: there a lone f32 matmul
// runs on cuBLAS, in a row cell it would be generated device code, and a
// device runs instances one after another, so row cells buy it nothing).
//
//===----------------------------------------------------------------------===//

#include "ir/FlatMap.h"
#include "passes/analysis/Analysis.h"
#include "passes/Pass.h"
#include "passes/Statistic.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

/// An op's number (its group, its position in its block): a flat table, one
/// cache miss per lookup on a block of a million ops (issue 23).
using OpIndex = FlatMap<const Operation *, size_t>;

NIMBLE_STATISTIC(NumGroups, "fuse", "Number of fused groups formed (each one call of a primitive function)");
NIMBLE_STATISTIC(NumFusedOps, "fuse", "Number of ops moved into fused groups");
NIMBLE_STATISTIC(NumShared, "fuse", "Number of fused groups that call an identical earlier group's function");

constexpr size_t kMaxGroupSizeLimit = 4096;



/// The order of "worse" patterns (TVM's OpPatternKind order).
int rank(FusionPattern p) {
  switch (p) {
  case FusionPattern::ElemWise: return 0;
  case FusionPattern::Broadcast: return 1;
  case FusionPattern::Injective: return 2;
  case FusionPattern::Reduction: return 3;
  case FusionPattern::OutputFusable: return 4;
  case FusionPattern::Opaque: return 5;
  }
  return 5;
}

FusionPattern worst(FusionPattern a, FusionPattern b) { return rank(a) >= rank(b) ? a : b; }

/// The pattern table of the header: may a producer of pattern `p` join a
/// group whose pattern is `g`?
bool patternAllows(FusionPattern p, FusionPattern g) {
  using P = FusionPattern;
  switch (p) {
  case P::ElemWise:
  case P::Broadcast:
    return g == P::ElemWise || g == P::Broadcast || g == P::Injective || g == P::Reduction;
  case P::Injective: return g == P::ElemWise || g == P::Broadcast || g == P::Injective;
  case P::Reduction: return g == P::ElemWise;
  case P::OutputFusable: return g == P::ElemWise || g == P::Broadcast;
  case P::Opaque: return false;
  }
  return false;
}

struct Group {
  std::vector<Operation *> members; // in the order they joined (last op first)
  FusionPattern pattern;
  size_t rootPos = 0; // the output op's position in the block
  /// Members that are in the group by the row-cell rules alone (joinsRowCell;
  /// a merge of row cells adds its products): if the group ends up other
  /// than a row cell, formGroups runs again without them (Deny).
  std::vector<Operation *> rowJoined;
};

/// Ops kept out of the row-cell rules (formGroups).
using Deny = std::unordered_set<const Operation *>;

/// An element-wise (or broadcast) producer whose uses are all element-wise
/// members of an OutputFusable group, none of them the matmul: it computes
/// an operand of the epilogue (Tree-LSTM's `i * u + f * c` after the forget
/// gate's matmul, with `i = sigmoid(..)` and `u = tanh(..)`), so it fuses
/// there like the epilogue itself, evaluated per output point; what feeds
/// the matmul's own operands still never fuses (rule 2's table).
bool joinsEpilogue(const Operation &op, const Group &g,
                   const OpIndex &groupOf, size_t gi) {
  FusionPattern p = op.info().fusion;
  if (g.pattern != FusionPattern::OutputFusable ||
      (p != FusionPattern::ElemWise && p != FusionPattern::Broadcast && p != FusionPattern::Injective))
    return false;
  for (const Value *r : op.resultValues())
    for (const OpOperand &u : r->uses()) {
      const size_t *g = groupOf.find(u.owner());
      if (!g || *g != gi) continue; // a use outside: an extra output
      FusionPattern up = u.owner()->info().fusion;
      if (up != FusionPattern::ElemWise && up != FusionPattern::Broadcast && up != FusionPattern::Injective)
        return false;
    }
  return true;
}

/// The largest weight (elements) of a row product (below): the runtime runs
/// a batched product by a weight of at most this many elements as its
/// generated code on the rows in place (vm/interpreter/AutoBatch.cpp,
/// kInPlaceMaxShared), and a single row always as generated code, so a
/// group of several such products runs the same code for them as separate
/// kernels would.
constexpr int64_t kRowProductMaxWeight = int64_t(1) << 18;

/// A row product: `matmul` of one row (a static [1, K] f32 lhs, not
/// transposed) by a static weight of at most kRowProductMaxWeight elements
/// (Tree-LSTM's x . W^T, h . U^T): the products of a recurrent cell run once
/// per node or token, which auto-batching stacks across instances.
bool isRowProduct(const Operation &op) {
  if (!op.is(OpCode::MatMul) || op.boolAttr("transpose_a")) return false;
  Type a = op.operand(0)->type(), b = op.operand(1)->type();
  if (!a.isTensor() || !b.isTensor() || a.rank() != 2 || b.rank() != 2 || a.dims()[0] != 1 ||
      a.dtype() != DType::F32 || b.dtype() != DType::F32)
    return false;
  int64_t n = 1;
  for (int64_t d : b.dims()) {
    if (d == kDynamic) return false;
    n *= d;
  }
  return n <= kRowProductMaxWeight;
}

/// A row cell: a group of row products and what is computed point by point
/// around them (element-wise and broadcast ops, `split` and `slice`): the
/// node of a Tree-LSTM, the step of a small RNN cell. Nothing in it reads
/// at a computed index (dynamic_slice, take), so it batches along rows
/// whenever its products do.
bool isRowCellMember(const Operation &op) {
  FusionPattern p = op.info().fusion;
  return p == FusionPattern::ElemWise || p == FusionPattern::Broadcast || op.is(OpCode::Split) ||
         op.is(OpCode::Slice) || isRowProduct(op);
}

/// Row cells (issue 52: one kernel, one launch per Tree-LSTM node, where the
/// two rules above gave four): `op` joins the group `g` of its users when
/// every member of g and op itself are row-cell members, and either
///   - op is a row product read only point by point (by element-wise,
///     broadcast or injective members: an epilogue), though g may hold a
///     product already or a `split` (the gates'); the generated kernel
///     stores each product (a stage) and the epilogue reads them; or
///   - op is element-wise or broadcast and read only as the lhs of g's row
///     products or by the epilogue (Tree-LSTM's h_l + h_r before
///     (h_l + h_r) . U_iou^T): the kernel stores it, one row of K, before
///     the products read it.
/// Multi-output merging (mergeMultiOutput) joins two row cells likewise
/// when the consumer reads the producer's results point by point.
bool isRowCell(const Group &g) {
  for (const Operation *m : g.members)
    if (!isRowCellMember(*m)) return false;
  return true;
}

bool hasProduct(const Group &g) {
  for (const Operation *m : g.members)
    if (m->is(OpCode::MatMul)) return true;
  return false;
}

bool joinsRowCell(const Operation &op, const Group &g, const OpIndex &groupOf, size_t gi) {
  if (!isRowCellMember(op) || !isRowCell(g)) return false;
  const bool product = op.is(OpCode::MatMul);
  FusionPattern p = op.info().fusion;
  if (!product && ((p != FusionPattern::ElemWise && p != FusionPattern::Broadcast) || !hasProduct(g))) return false;
  for (const Value *r : op.resultValues())
    for (const OpOperand &u : r->uses()) {
      const size_t *ug = groupOf.find(u.owner());
      if (!ug || *ug != gi) return false; // rule 1 holds: every use is in g
      if (u.owner()->is(OpCode::MatMul)) {
        if (product || u.index() != 0) return false;
        continue;
      }
      FusionPattern up = u.owner()->info().fusion;
      if (up != FusionPattern::ElemWise && up != FusionPattern::Broadcast && up != FusionPattern::Injective)
        return false;
    }
  return true;
}

/// Whether an element-wise (or broadcast) `op` ends the epilogue of an
/// OutputFusable op of its block: one of its operands comes, through
/// element-wise ops each read by the next alone, from a matmul or conv whose
/// results only that chain reads (ResNet's `relu(add(conv, residual))`).
/// Such an op stays with that producer rather than joining a consumer group
/// the producer cannot join (rule 5 of the header). The walk stops after a
/// few ops, so a long element-wise chain costs no more than a short one.
bool endsEpilogue(const Operation &op) {
  constexpr int kMaxDepth = 8;
  const Operation *cur = &op;
  for (int depth = 0; depth < kMaxDepth; ++depth) {
    FusionPattern p = cur->info().fusion;
    if (p != FusionPattern::ElemWise && p != FusionPattern::Broadcast) return false;
    const Operation *next = nullptr;
    for (const Value *v : cur->operandValues()) {
      const Operation *d = v->definingOp();
      if (!d || d->block() != op.block() || !isKernelOp(*d)) continue;
      bool onlyCur = true;
      for (const Value *r : d->resultValues())
        for (const OpOperand &u : r->uses()) onlyCur &= u.owner() == cur;
      if (!onlyCur) continue;
      if (d->info().fusion == FusionPattern::OutputFusable) return true;
      if (!next) next = d;
    }
    if (!next) return false;
    cur = next;
  }
  return false;
}

/// A group of transposes and reductions only (convert-layout's transpose
/// back to NCHW, a global pooling's mean): no member computes element-wise
/// yet, and none splits or joins tensors (the LSTM's gates `split` is
/// Injective too, but its group becomes the cell's kernel by multi-output
/// merging, which wants the adds before it).
bool movesOnly(const Group &g) {
  for (const Operation *m : g.members)
    if (!m->is(OpCode::Transpose) && m->info().fusion != FusionPattern::Reduction) return false;
  return true;
}

class FusePass : public Pass {
public:
  std::string_view name() const override { return "fuse"; }

  std::string setOption(std::string_view key, std::string_view value) override {
    if (key == "row-cells") {
      if (value != "true" && value != "false") return "option 'row-cells' of 'fuse' takes true or false";
      rowCells_ = value == "true";
      return "";
    }
    if (key != "max-group-size") return Pass::setOption(key, value);
    int64_t n = -1;
    if (!parseIntOption(value, 1, static_cast<int64_t>(kMaxGroupSizeLimit), n))
      return "option 'max-group-size' of 'fuse' takes an integer from 1 to " +
             std::to_string(kMaxGroupSizeLimit) + ", got '" + std::string(value) + "'";
    maxGroupSize_ = static_cast<size_t>(n);
    return "";
  }

  LogicalResult run(Module &m, DiagnosticEngine &, bool &changed) override {
    outlined_.clear();
    std::vector<Function *> funcs;
    for (auto &f : m.functions())
      if (!isPrimitive(*f) && !hasKills(*f)) funcs.push_back(f.get());
    for (Function *f : funcs)
      for (auto &b : f->blocks())
        for (Group &g : formGroups(*b))
          if (g.members.size() >= 2) {
            outline(m, g);
            changed = true;
          }
    return success();
  }

private:
  /// A function with explicit `kill`s (memory planning ran) is left alone:
  /// outlining moves uses past the kills of their values, and grouping
  /// kernels after their memory was planned would undo the plan.
  static bool hasKills(const Function &f) {
    for (auto &b : f.blocks())
      for (const Operation &op : *b)
        if (op.is(OpCode::Kill)) return true;
    return false;
  }
  std::vector<Group> formGroups(Block &b) const;
  std::vector<Group> formGroups(Block &b, const Deny &deny) const;
  void mergeMultiOutput(std::vector<Group> &groups, OpIndex &groupOf,
                        const OpIndex &pos, const Block &b, const Deny &deny) const;
  void mergeConvPairs(std::vector<Group> &groups, const OpIndex &groupOf, const OpIndex &pos) const;
  void outline(Module &m, Group &g);

  size_t maxGroupSize_ = 32;
  bool rowCells_ = true; // fuse{row-cells=false}: the --target=cuda pipeline
  /// The functions outlined by this run, by the hash of their body's
  /// signature (bodySignature), for deduplication.
  struct Outlined {
    std::vector<uint64_t> words;
    Function *fn;
  };
  std::unordered_map<uint64_t, std::vector<Outlined>> outlined_;
};

/// The structure of the body a group outlines to, as words: the input
/// types; per member its op, operands (input i, or result r of the members
/// in order, numbered after the inputs), result types and attributes'
/// hashes; then the outputs. Types are uniqued, so a type is its storage
/// pointer. Two groups with equal words and equal attributes (compared
/// exactly, sameAttrs) outline to identical bodies.
std::vector<uint64_t> bodySignature(const std::vector<Value *> &inputs, const std::vector<Operation *> &members,
                                    const std::vector<Value *> &results) {
  std::vector<uint64_t> w;
  std::unordered_map<const Value *, uint64_t> ref;
  w.push_back(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    ref.emplace(inputs[i], i);
    w.push_back(reinterpret_cast<uintptr_t>(inputs[i]->type().impl()));
  }
  uint64_t next = inputs.size();
  for (const Operation *op : members) {
    w.push_back(static_cast<uint64_t>(op->code()));
    w.push_back(op->numOperands());
    for (const Value *v : op->operandValues()) w.push_back(ref.at(v));
    w.push_back(op->numResults());
    for (const Value *r : op->resultValues()) {
      ref.emplace(r, next++);
      w.push_back(reinterpret_cast<uintptr_t>(r->type().impl()));
    }
    w.push_back(op->attrs().size());
    for (const Attr &a : op->attrs()) w.push_back(a.hash());
  }
  w.push_back(results.size());
  for (const Value *r : results) w.push_back(ref.at(r));
  return w;
}

/// Whether `members` carry the same attributes, exactly, as the body of
/// `fn` (outlined from a group of the same signature: one op per member,
/// then `ret`).
bool sameAttrs(const std::vector<Operation *> &members, const Function &fn) {
  auto it = fn.entry()->begin();
  for (const Operation *op : members) {
    if (it == fn.entry()->end() || it->attrs().size() != op->attrs().size()) return false;
    for (size_t i = 0; i < op->attrs().size(); ++i)
      if (!(it->attrs()[i] == op->attrs()[i])) return false;
    ++it;
  }
  return true;
}

uint64_t hashWords(const std::vector<uint64_t> &w) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (uint64_t x : w) h = (h ^ x) * 0x100000001b3ull + (h >> 29);
  return h;
}

// Row cells are decided while the groups grow, last op first, before every
// member of the group is known: a product joins a row cell, and then an op
// that is not a row-cell member (the LSTM cell's dynamic_slice of its input
// projection, which comes before the product) joins the same group by the
// other rules. Such a group would take the product out of batching (its
// per-instance slice); it is formed again with the ops that joined it as a
// row cell kept out of the row-cell rules. Each round denies at least one
// more op, so this ends; a block without row cells takes one round.
std::vector<Group> FusePass::formGroups(Block &b) const {
  Deny deny;
  for (;;) {
    std::vector<Group> groups = formGroups(b, deny);
    size_t before = deny.size();
    for (const Group &g : groups)
      if (!g.rowJoined.empty() && !isRowCell(g)) deny.insert(g.rowJoined.begin(), g.rowJoined.end());
    if (deny.size() == before) return groups;
  }
}

std::vector<Group> FusePass::formGroups(Block &b, const Deny &deny) const {
  std::vector<Group> groups;
  OpIndex groupOf;
  std::vector<Operation *> ops = b.opsSnapshot();
  OpIndex pos;
  for (size_t i = 0; i < ops.size(); ++i) pos.tryEmplace(ops[i], i);
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    Operation *op = *it;
    if (!isKernelOp(*op)) continue;
    const OpInfo &info = op->info();

    // The one group all uses of `op` lie in, if any (rule 1), with the
    // policy: no user in it may be data-dependent or upper-bound (rule 3).
    bool viaRowCell = false;
    auto joinable = [&]() -> std::optional<size_t> {
      if (info.shapeMode == ShapeMode::UpperBound) return std::nullopt;
      std::optional<size_t> target;
      for (Value *r : op->resultValues())
        for (OpOperand &u : r->uses()) {
          Operation *user = u.owner();
          const size_t *g = groupOf.find(user);
          if (user->block() != &b || !g) return std::nullopt;
          if (target && *target != *g) return std::nullopt;
          target = *g;
          ShapeMode um = user->info().shapeMode;
          if (um == ShapeMode::DataDependent || um == ShapeMode::UpperBound) return std::nullopt;
        }
      if (!target) return std::nullopt;
      const Group &g = groups[*target];
      if (!patternAllows(info.fusion, g.pattern) && !joinsEpilogue(*op, g, groupOf, *target)) {
        if (!rowCells_ || deny.count(op) || !joinsRowCell(*op, g, groupOf, *target)) return std::nullopt;
        viaRowCell = true;
      }
      // Rule 5: an epilogue stays with its matmul or conv.
      if (movesOnly(g) && endsEpilogue(*op)) return std::nullopt;
      if (g.members.size() >= maxGroupSize_) return std::nullopt;
      return target;
    };

    if (std::optional<size_t> t = joinable()) {
      Group &g = groups[*t];
      g.members.push_back(op);
      g.pattern = worst(g.pattern, info.fusion);
      if (viaRowCell) g.rowJoined.push_back(op);
      groupOf.tryEmplace(op, *t); // op is visited once: new
    } else {
      groupOf.tryEmplace(op, groups.size());
      groups.push_back(Group{{op}, info.fusion, *pos.find(op), {}});
    }
  }
  mergeMultiOutput(groups, groupOf, pos, b, deny);
  mergeConvPairs(groups, groupOf, pos);
  // Groups in block order of their output op (the first member found).
  std::reverse(groups.begin(), groups.end());
  groups.erase(std::remove_if(groups.begin(), groups.end(), [](const Group &g) { return g.members.empty(); }),
               groups.end());
  return groups;
}

// Multi-output fusion (XLA's pass of that name, after its instruction
// fusion): a group P whose results are read by a later group C, and
// otherwise only after C's output op (or in other blocks), merges into C;
// C's call then also returns the results of P that are used outside. Groups
// are visited consumers first (latest output op first), so chains merge in
// one pass. The pattern table decides as for a single producer (P's pattern
// joining C's), with the epilogue case: an element-wise, broadcast or
// injective P whose users in C are all epilogue members. Done after the
// single-output grouping so that a matmul keeps its epilogue: a group that
// merges is already formed.
void FusePass::mergeMultiOutput(std::vector<Group> &groups,
                                OpIndex &groupOf,
                                const OpIndex &pos,
                                const Block &b, const Deny &deny) const {
  for (size_t pi = 0; pi < groups.size(); ++pi) {
    Group &P = groups[pi];
    if (P.members.empty()) continue;
    bool upper = false;
    for (const Operation *op : P.members) upper |= op->info().shapeMode == ShapeMode::UpperBound;
    if (upper) continue;
    // The consumer group with the earliest output op.
    std::optional<size_t> target;
    for (const Operation *op : P.members)
      for (const Value *r : op->resultValues())
        for (const OpOperand &u : r->uses()) {
          const size_t *g = groupOf.find(u.owner());
          if (u.owner()->block() != &b || !g || *g == pi) continue;
          if (!target || groups[*g].rootPos < groups[*target].rootPos) target = *g;
        }
    if (!target) continue;
    Group &C = groups[*target];
    if (P.members.size() + C.members.size() > maxGroupSize_) continue;
    bool ok = true, epilogueUsers = true;
    for (const Operation *op : P.members)
      for (const Value *r : op->resultValues())
        for (const OpOperand &u : r->uses()) {
          const Operation *user = u.owner();
          const size_t *g = groupOf.find(user);
          if (g && *g == pi) continue;
          if (g && *g == *target) {
            ShapeMode um = user->info().shapeMode;
            if (um == ShapeMode::DataDependent || um == ShapeMode::UpperBound) ok = false;
            FusionPattern up = user->info().fusion;
            if (up != FusionPattern::ElemWise && up != FusionPattern::Broadcast && up != FusionPattern::Injective)
              epilogueUsers = false;
            continue;
          }
          if (user->block() == &b && *pos.find(user) < C.rootPos) ok = false;
        }
    bool epilogue = C.pattern == FusionPattern::OutputFusable && epilogueUsers &&
                    (P.pattern == FusionPattern::ElemWise || P.pattern == FusionPattern::Broadcast ||
                     P.pattern == FusionPattern::Injective);
    // Row cells (joinsRowCell): the producer's products and the consumer's
    // share a kernel when the consumer reads the producer point by point.
    bool rowCells = rowCells_ && epilogueUsers && isRowCell(P) && isRowCell(C) && (hasProduct(P) || hasProduct(C));
    std::vector<Operation *> products;
    for (const Group *g : {&P, &C})
      for (Operation *op : g->members)
        if (op->is(OpCode::MatMul)) {
          rowCells &= deny.count(op) == 0;
          products.push_back(op);
        }
    bool byRule = patternAllows(P.pattern, C.pattern) || epilogue;
    if (!ok || !(byRule || rowCells)) continue;
    if (!byRule) C.rowJoined.insert(C.rowJoined.end(), products.begin(), products.end());
    C.rowJoined.insert(C.rowJoined.end(), P.rowJoined.begin(), P.rowJoined.end());
    P.rowJoined.clear();
    for (Operation *op : P.members) {
      C.members.push_back(op);
      *groupOf.find(op) = *target;
    }
    P.members.clear();
    C.pattern = worst(C.pattern, P.pattern);
    std::sort(C.members.begin(), C.members.end(),
              [&](const Operation *x, const Operation *y) { return *pos.find(x) > *pos.find(y); });
  }
}

/// Whether `a` lists `n` values all equal to `v` (or is empty: the
/// attribute's default, every one `dflt`).
bool allOf(const std::vector<int64_t> &a, size_t n, int64_t v, int64_t dflt) {
  if (a.empty()) return v == dflt;
  if (a.size() != n) return false;
  for (int64_t x : a)
    if (x != v) return false;
  return true;
}

/// A 2-D channels-last conv by a static 1 x 1 weight, stride 1, no padding,
/// not grouped (MobileNetV2's expand).
bool isPointwiseConv(const Operation &op) {
  if (!op.is(OpCode::Conv) || !op.boolAttr("channels_last") || op.intAttr("groups") != 1) return false;
  Type w = op.operand(1)->type();
  if (!w.isTensor() || w.rank() != 4 || w.dims()[2] != 1 || w.dims()[3] != 1) return false;
  return allOf(op.attr("strides").getInts(), 2, 1, 1) && allOf(op.attr("pads").getInts(), 4, 0, 0) &&
         allOf(op.attr("dilations").getInts(), 2, 1, 1);
}

/// A 2-D channels-last depthwise conv by a static M x 1 x 3 x 3 weight with
/// M groups, padding 1, stride 1 or 2 on both axes (MobileNetV2's).
bool isDepthwise3x3(const Operation &op) {
  if (!op.is(OpCode::Conv) || !op.boolAttr("channels_last")) return false;
  Type w = op.operand(1)->type();
  if (!w.isTensor() || w.rank() != 4) return false;
  const std::vector<int64_t> &wd = w.dims();
  if (wd[0] == kDynamic || wd[0] != op.intAttr("groups") || wd[1] != 1 || wd[2] != 3 || wd[3] != 3) return false;
  const std::vector<int64_t> &st = op.attr("strides").getInts();
  const bool strided = !st.empty() && st[0] == 2;
  return allOf(st, 2, strided ? 2 : 1, 1) && allOf(op.attr("pads").getInts(), 4, 1, 0) &&
         allOf(op.attr("dilations").getInts(), 2, 1, 1);
}

/// The conv of a group that is one conv (by `is`) and element-wise or
/// broadcast ops, the conv first in block order; null otherwise.
const Operation *pairConv(const Group &g, bool (*is)(const Operation &)) {
  if (g.members.empty() || !is(*g.members.back())) return nullptr;
  for (size_t i = 0; i + 1 < g.members.size(); ++i) {
    FusionPattern p = g.members[i]->info().fusion;
    if (p != FusionPattern::ElemWise && p != FusionPattern::Broadcast) return nullptr;
  }
  return g.members.back();
}

// Conv pairs (the header): a group A, a 1 x 1 conv and its epilogue, merges
// into the group B of the depthwise conv that alone reads A's output, when
// A's other members are read inside A only. A's members all come before
// B's conv, which reads them: the merged group stays convex.
void FusePass::mergeConvPairs(std::vector<Group> &groups, const OpIndex &groupOf, const OpIndex &pos) const {
  for (Group &A : groups) {
    if (!pairConv(A, isPointwiseConv)) continue;
    const Operation *root = A.members.front();
    if (root->numResults() != 1 || !root->result(0)->hasOneUse()) continue;
    const OpOperand &use = *root->result(0)->uses().begin();
    const size_t *bi = groupOf.find(use.owner());
    if (!bi || use.index() != 0) continue;
    Group &B = groups[*bi];
    if (&B == &A || pairConv(B, isDepthwise3x3) != use.owner()) continue;
    if (A.members.size() + B.members.size() > maxGroupSize_) continue;
    bool inside = true;
    for (size_t i = 1; i < A.members.size(); ++i)
      for (const Value *r : A.members[i]->resultValues())
        for (const OpOperand &u : r->uses()) {
          const size_t *g = groupOf.find(u.owner());
          inside &= g && &groups[*g] == &A;
        }
    if (!inside) continue;
    B.members.insert(B.members.end(), A.members.begin(), A.members.end());
    A.members.clear();
    std::sort(B.members.begin(), B.members.end(),
              [&](const Operation *x, const Operation *y) { return *pos.find(x) > *pos.find(y); });
  }
}

void FusePass::outline(Module &m, Group &g) {
  Context &ctx = m.context();
  // Members in block order; the output op is the last.
  std::vector<Operation *> members(g.members.rbegin(), g.members.rend());
  std::unordered_set<const Operation *> inGroup(members.begin(), members.end());
  Operation *root = members.back();

  // Group inputs in first-use order.
  std::vector<Value *> inputs;
  std::unordered_set<const Value *> seen;
  for (Operation *op : members)
    for (Value *v : op->operandValues()) {
      Operation *def = v->definingOp();
      if (def && inGroup.count(def)) continue;
      if (seen.insert(v).second) inputs.push_back(v);
    }

  // Outputs: the output op's results, then every other member result that
  // is used outside the group (multi-output fusion), in block order.
  std::vector<Value *> results;
  for (Value *r : root->results()) results.push_back(r);
  for (Operation *op : members) {
    if (op == root) continue;
    for (Value *r : op->resultValues())
      for (OpOperand &u : r->uses())
        if (!inGroup.count(u.owner())) {
          results.push_back(r);
          break;
        }
  }
  std::vector<Type> ins, outs;
  for (Value *v : inputs) ins.push_back(v->type());
  for (Value *r : results) outs.push_back(r->type());

  // An identical earlier group's function, or a new one.
  std::vector<uint64_t> sig = bodySignature(inputs, members, results);
  std::vector<Outlined> &same = outlined_[hashWords(sig)];
  Function *fn = nullptr;
  for (const Outlined &o : same)
    if (o.words == sig && sameAttrs(members, *o.fn)) {
      fn = o.fn;
      ++NumShared;
      break;
    }
  if (!fn) {
    std::string fname = m.freshFunctionName("fused_" + std::string(members.front()->name()));
    auto owned = std::make_unique<Function>(fname, ctx.func(ins, outs), members.front()->loc());
    owned->fnAttrs().emplace_back("primitive", Attr::getBool(true));
    fn = m.addFunction(std::move(owned));
    Block *entry = fn->addBlock(std::make_unique<Block>("entry"));
    IRMapping map;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Value *a = entry->addArgument(ins[i], members.front()->loc());
      a->setName("in" + std::to_string(i));
      map.values[inputs[i]] = a;
    }
    for (Operation *op : members) entry->push_back(cloneOp(*op, map));
    std::vector<Value *> rets;
    for (Value *r : results) rets.push_back(map.lookup(r));
    entry->push_back(Operation::create(OpCode::Ret, root->loc(), rets, {}, defaultAttrs(OpCode::Ret)));
    same.push_back({std::move(sig), fn});
  }

  // The call replaces the members, at the output op, and keeps where each
  // member was written.
  std::vector<Attr> attrs = defaultAttrs(OpCode::Call);
  attrs[static_cast<unsigned>(opInfo(OpCode::Call).attrIndex("callee"))] = Attr::getSym(fn->name());
  Operation *call =
      root->block()->insertBefore(root, Operation::create(OpCode::Call, root->loc(), inputs, outs, attrs));
  std::vector<Location> memberLocs;
  memberLocs.reserve(members.size());
  for (const Operation *op : members) memberLocs.push_back(op->loc());
  call->setMemberLocs(std::move(memberLocs));
  for (unsigned i = 0; i < results.size(); ++i) {
    call->result(i)->setName(results[i]->name());
    results[i]->replaceAllUsesWith(call->result(i));
  }
  for (auto it = members.rbegin(); it != members.rend(); ++it) (*it)->erase();

  ++NumGroups;
  NumFusedOps += members.size();
}

} // namespace

std::unique_ptr<Pass> createFusePass() { return std::make_unique<FusePass>(); }

} // namespace nimble::passes
