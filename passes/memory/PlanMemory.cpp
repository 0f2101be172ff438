//===- PlanMemory.cpp - Liveness, kills, storage coalescing and reuse -----===//
//
// Memory planning over the explicit-memory IR that `manifest-memory` makes
// (Nimble paper §3.3 and appendix A: "a storage coalescing pass to group
// storage into a larger region which allows the multiplexing of multiple
// tensor allocations to a single piece of storage ... liveness analysis and
// graph coloring algorithm can be applied to the program to reuse the
// storages"; §5 "Memory planning": 47% fewer buffer allocations). Per
// non-primitive function:
//
// 1. Drop every `kill` (manifest-memory's are block-local) and plan afresh.
//
// 2. Static coalescing (NNC, seed 002 "The NNC Tensor Allocation
//    Algorithm"). A candidate is an `alloc_storage` of constant size whose
//    storage and every alias (its alloc_tensor views, reshapes of those, and
//    the block arguments they flow into) is only read or written by kernels,
//    shape functions, shape_of/storage_size/device_copy and forward branches:
//    it must not escape (ret, call, construct, tuple, match, anything else) and
//    must not be loop-carried (flow along a retreating edge of the RPO into a
//    block argument). Aliases are computed as may-alias sets to a fixpoint, so
//    a join block argument aliases the storages of all its incoming values.
//    Interference: two candidates interfere when an alias of each is live at
//    the same op (live after it, or used or defined by it: the inputs and
//    outputs of one kernel call never share bytes). Per device, NNC's
//    allocator (passes/memory/TensorAllocator.cpp: interference graph, allocation
//    graph, candidate selection with tuples of up to 3, insertion with partial
//    reuse of larger regions) assigns offsets, sizes rounded to the 64-byte
//    alignment. Rewrite: one `alloc_storage` of the arena size per region
//    (see the departures) and device, executed at most once per call, as
//    late as possible. Each member's alloc_tensor takes the arena and the
//    member's offset (plus its own constant offset); the member alloc_storage
//    disappears; the arena is killed by the same liveness as everything else
//    (after its last alloc_tensor: the tensors keep it alive as long as they
//    live). A member in a loop body gets the same bytes every iteration,
//    which is sound because a non-carried value defined in a loop is dead
//    before its definition runs again (SSA: it is not live-in at the header).
//
//    Departures from NNC and why:
//    - Interference comes from liveness over a CFG, not from an acyclic graph
//      with a total execution order, so "a and c do not interfere with b"
//      does not make a chain a -> b -> c safe. Besides NNC's check (the
//      edge's endpoints do not interfere with the tuple), an edge is taken
//      only if no tensor already owning the bytes interferes with a member.
//    - NNC says the chosen edge must not start at the dummy source or end at
//      the dummy sink; read literally no insertion after the first could
//      reuse memory (every edge touches a dummy). We read it as "dummies
//      impose no interference constraint" and exclude only source->sink.
//      Among usable edges we take the best fit (smallest, then lowest
//      offset) for determinism; NNC leaves the choice open.
//    - No multi-view tensors (our tensors are one contiguous range, views are
//      whole-storage aliases), so no loop unrolling: loop-carried storages are
//      left out of the arena (see 4).
//    - Storages with a larger alignment than 64 are left alone.
//    - Not one arena per function and device but one per region: the members'
//      nearest common dominator D, lifted out of any cycle (the arena is then
//      allocated once, before D's terminator); if no member is in D, the
//      members under different dominator-tree children of D (the arms of a
//      branch) are split into separate regions, recursively. The arena goes
//      before the region's first member. With one arena at function entry
//      the small Tree-LSTM's peak grew from 1520 to 3440 bytes: each
//      recursive frame held its arena across the recursive calls and both
//      match arms' tensors were allocated. Separate arenas never share bytes,
//      so splitting is always sound; a region of one member is left alone
//      unless it is in a loop (lifted, it is allocated once per entry).
//
// 3. Dynamic reuse. An alloc_storage of run-time size takes over the storage
//    of an earlier one (replacing all its uses) when both are non-escaping and
//    non-carried, on the same device with the same alignment, the earlier one
//    dominates it, neither interferes with any storage already merged into
//    the earlier one, and the sizes are provably equal: structurally equal
//    keys (SizeKeys, passes/memory/SizeKeys.h). A size is the same SSA value, or
//    `storage_size` (same dtype and alignment) of a shape whose contents are
//    named: `shape_of` of a tensor (its static dims; else the shape buffer
//    it was allocated with;
//    else the tensor itself), a constant shape (its dims: manifest-memory
//    passes one for an input of static type), or a result of
//    `invoke_shape_func` (that no kernel writes afterwards) of the same
//    callee and output from equally named inputs — or, when the callee
//    provably keeps a shape (unary elementwise ops, casts, layer_norm's
//    input, broadcasts with rank-0 constants, with each other, or with an
//    operand whose static dims the other's static trailing dims absorb),
//    simply the name of the input shapes it keeps when they are equal.
//    Shape functions are pure. Soundness: every leaf of a key (an SSA value) is defined at a
//    point dominating the earlier alloc, which dominates the later one, so
//    every path from the leaf's latest definition to the later alloc passes
//    the earlier alloc and the computation of its size: both see the same
//    leaf values. Not recognised: other shape functions that agree (matmul
//    with equal operand shapes, reshapes). Not done: "provably bounded"
//    reuse (constant size <= a dead constant storage) — every constant-size
//    storage that could be reused soundly is already in the arena; a dynamic
//    size has no static bound here. The rest is left to the run-time pool.
//
// 0. Loop-carried tensors (an LSTM's hidden state passed to the header on
//    the back edge) whose size repeats get R storages allocated in the
//    preheader and rotated through header arguments: NNC's multi-view
//    tensors in SSA form (CarriedStorage.cpp; option rotate=false skips it).
//
// 4. The other loop-carried tensors (a size that is not provably the same
//    each iteration, or a use that could keep a value longer). The kernel
//    reading the old state writes the new one, so the two cannot share
//    bytes, and one fixed arena range cannot hold both. They are left to
//    the run-time pool allocator. The kills below free the old state right
//    after its last read, and the back edge hands the new state over to the
//    header's argument (step 5), so at most two state buffers exist at a
//    time and the pool alternates them. Our IR never copies the state
//    (block arguments are passed by reference).
//
// 5. Kills on every path, from global liveness (passes/analysis/Liveness.h) of the
//    rewritten function: a `kill` right after the last use in a block of each
//    value dead after it (a result never used dies right after its
//    definition, a dead block argument at its block's start); for a value
//    live at the end of a predecessor (or used by its terminator) but not
//    live into a successor, a kill on that edge: at the successor's start
//    when every predecessor edge of the successor would kill it (then it is
//    live at the end of every predecessor, so it dominates the successor in
//    strict SSA), else in a new block that splits the edge and forwards the
//    block arguments. A value the edge passes to a block argument gets no
//    kill on it: the branch hands it over (docs/LangRef.md, `br`; the
//    emitter releases its register after the edge's moves), so joins and
//    back edges need no split. Killed: tensors and storages (shape tensors included).
//    Not killed: function parameters (the caller holds its own reference, so
//    a kill could never free them; dropping our register's reference buys
//    nothing and the caller's view of ownership stays simple), constants
//    (the constant pool keeps them), globals, and the results of shape_of
//    and storage_size (smallFreshTensor: at most 512 bytes, aliasing no
//    storage; the register holding one is overwritten soon after its last
//    use, which releases it, so a kill would only add an instruction to
//    every kernel call with a dynamic shape). Each value is killed at
//    most once on any path: kills sit exactly where it stops being live.
//    Kills that would sit directly before a `ret` are left out: returning
//    releases the frame's registers at the same point.
//
//===----------------------------------------------------------------------===//

#include "passes/analysis/Dominators.h"
#include "passes/analysis/Liveness.h"
#include "passes/analysis/Analysis.h"
#include "passes/Pass.h"
#include "passes/memory/CarriedStorage.h"
#include "passes/memory/SizeKeys.h"
#include "passes/Statistic.h"
#include "passes/memory/TensorAllocator.h"

#include "ir/Builder.h"
#include "ir/Limits.h"

#include <algorithm>
#include <array>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <span>
#include <unordered_map>
#include <unordered_set>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

NIMBLE_STATISTIC(NumCoalesced, "plan-memory", "Number of storages coalesced into arenas");
NIMBLE_STATISTIC(NumArenas, "plan-memory", "Number of arenas (one per function and device)");
NIMBLE_STATISTIC(NumArenaBytes, "plan-memory", "Bytes of all arenas");
NIMBLE_STATISTIC(NumStaticBytesBefore, "plan-memory", "Bytes of the coalesced storages before planning");
NIMBLE_STATISTIC(NumStaticBytesAfter, "plan-memory", "Bytes of the coalesced storages after planning (arena bytes)");
NIMBLE_STATISTIC(NumDynamicReuses, "plan-memory", "Number of run-time-size storages reusing a dead storage");
NIMBLE_STATISTIC(NumKillsPlaced, "plan-memory", "Number of kills placed");
NIMBLE_STATISTIC(NumEdgesSplit, "plan-memory", "Number of control-flow edges split to hold kills");


/// The value of a scalar integer `constant`, if `v` is one.
bool constantInt(Value *v, int64_t &out) {
  Operation *d = v ? v->definingOp() : nullptr;
  if (!d || !d->is(OpCode::Constant) || !v->type().isTensor()) return false;
  const DenseValue &dv = d->attr("value").getDense();
  if (!isInteger(dv.dtype) || dv.numElements() != 1) return false;
  out = dv.getInt(0);
  return true;
}

/// A storage under consideration: its alloc_storage and what we know.
struct StorageInfo {
  Operation *alloc;
  int64_t constSize = -1; // -1: run-time size
  bool escapes = false, carried = false;
};

/// A closed range of positions in a function's linear numbering (each block
/// start and each op has one position, blocks in function order).
using Segment = std::pair<int64_t, int64_t>;

/// Where each of a set of storages is present (from their may-alias sets,
/// which `analyze` computes and drops): the positions where an alias of it is live after,
/// used or defined by an op, or live into / defined at a block start. Within
/// a block that is one range per value (from its definition or the block
/// start to its last use or the block end), so two storages interfere (some
/// op or block start sees both) exactly when their segments overlap: the
/// interference graph is never materialised, only queried (sweeps over
/// segments sorted by start, or two-pointer merges).
struct AliasInfo {
  /// Per storage: disjoint segments, ascending.
  std::vector<std::vector<Segment>> segments;
  bool interferes(int a, int b) const {
    const std::vector<Segment> &x = segments[a], &y = segments[b];
    size_t i = 0, j = 0;
    while (i < x.size() && j < y.size()) {
      if (x[i].second < y[j].first) ++i;
      else if (y[j].second < x[i].first) ++j;
      else return true;
    }
    return false;
  }
};

/// Interference among `members` (storage indices) as a dense matrix, by a
/// sweep over their segments sorted by start: O(S log S + pairs).
std::vector<std::vector<bool>> interferenceMatrix(const AliasInfo &ai, const std::vector<int> &members) {
  std::vector<std::vector<bool>> m(members.size(), std::vector<bool>(members.size(), false));
  struct Seg {
    Segment s;
    int member;
  };
  std::vector<Seg> segs;
  for (size_t k = 0; k < members.size(); ++k)
    for (const Segment &sg : ai.segments[members[k]]) segs.push_back({sg, static_cast<int>(k)});
  std::sort(segs.begin(), segs.end(), [](const Seg &a, const Seg &b) { return a.s < b.s; });
  std::vector<Seg> active;
  for (const Seg &sg : segs) {
    size_t keep = 0;
    for (const Seg &a : active) {
      if (a.s.second < sg.s.first) continue;
      active[keep++] = a;
      if (a.member != sg.member) m[a.member][sg.member] = m[sg.member][a.member] = true;
    }
    active.resize(keep);
    active.push_back(sg);
  }
  return m;
}

/// Regions with more members than this are planned in windows of this many
/// consecutive members (in RPO order), each its own arena: NNC's allocator
/// is cubic in the members of a region. The paper's three models have at
/// most 186 members in a region (BERT's shape buffers), so their plans are
/// NNC's over the whole region; a generated program with thousands of
/// static storages gets arenas that never share bytes across windows.
constexpr size_t kMaxRegionMembers = 256;

class PlanMemoryPass : public Pass {
public:
  std::string_view name() const override { return "plan-memory"; }
  /// coalesce=false / reuse=false switch off static coalescing / dynamic
  /// reuse (the kills are always placed): for measuring what each buys, and
  /// for the "ideal" baseline of scripts/bench_memory.py (every tensor at its
  /// own exact size, freed at its last use).
  std::string setOption(std::string_view key, std::string_view value) override {
    if ((key == "coalesce" || key == "reuse" || key == "rotate") && (value == "true" || value == "false")) {
      (key == "coalesce" ? coalesce_ : key == "reuse" ? reuse_ : rotate_) = value == "true";
      return "";
    }
    if (key == "coalesce" || key == "reuse" || key == "rotate")
      return "option '" + std::string(key) + "' of 'plan-memory' takes true or false";
    return Pass::setOption(key, value);
  }
  LogicalResult run(Module &m, DiagnosticEngine &, bool &changed) override {
    for (auto &f : m.functions())
      if (!isPrimitive(*f) && f->entry()) planFunction(m, *f, changed);
    return success();
  }

private:
  void planFunction(Module &m, Function &f, bool &changed);
  std::vector<StorageInfo> dropKillsAndCollectStorages(Function &f, bool &changed);
  AliasInfo analyze(Function &f, std::vector<StorageInfo> &st, const Dominators &dom);
  void coalesceStatic(Module &m, Function &f, const std::vector<StorageInfo> &st, const AliasInfo &ai,
                      const Dominators &dom, bool &changed);
  void reuseDynamic(Function &f, const std::vector<StorageInfo> &st, const AliasInfo &ai, const Dominators &dom,
                    bool &changed);
  /// Returns the number of kills placed.
  size_t placeKills(Module &m, Function &f, bool &changed);

  bool coalesce_ = true, reuse_ = true, rotate_ = true;
};

/// Drops every kill (step 1) and returns every alloc_storage of the
/// function, in RPO order: constant sizes (static coalescing) and run-time
/// sizes (dynamic reuse) together, so that one alias analysis and one
/// liveness serve both steps. One walk over the ops (issue 23).
std::vector<StorageInfo> PlanMemoryPass::dropKillsAndCollectStorages(Function &f, bool &changed) {
  std::vector<StorageInfo> out;
  const std::vector<Block *> rpo = f.reversePostOrder();
  auto dropKills = [&](Block &b) {
    for (Operation *op = b.front(), *next; op; op = next) {
      next = op->nextOp();
      if (op->is(OpCode::Kill)) {
        op->erase();
        changed = true;
      }
    }
  };
  for (Block *b : rpo)
    for (Operation *op = b->front(), *next; op; op = next) {
      next = op->nextOp();
      if (op->is(OpCode::Kill)) {
        op->erase();
        changed = true;
        continue;
      }
      if (!op->is(OpCode::AllocStorage)) continue;
      int64_t size;
      bool isConst = constantInt(op->operand(0), size) && size >= 0;
      StorageInfo s{op};
      if (isConst) s.constSize = size;
      out.push_back(s);
    }
  if (rpo.size() != f.blocks().size()) { // unreachable blocks keep no kill either
    std::unordered_set<const Block *> reached(rpo.begin(), rpo.end());
    for (auto &b : f.blocks())
      if (!reached.count(b.get())) dropKills(*b);
  }
  return out;
}

namespace {

/// The storages each value may alias (sorted sets of storage indices, by
/// the values' liveness numbers). Almost every set is empty or holds one
/// storage: those are one integer per value, and only larger sets have a
/// vector (issue 23: a vector per value was 24 bytes for each of millions
/// of values, and one allocation per storage and per alias).
class AliasSets {
public:
  explicit AliasSets(size_t numValues) : tag_(numValues, kEmpty) {}
  bool empty(int v) const { return tag_[static_cast<size_t>(v)] == kEmpty; }
  std::span<const int> get(int v) const {
    const int &t = tag_[static_cast<size_t>(v)];
    if (t == kEmpty) return {};
    if (t >= 0) return {&t, 1};
    return multi_[static_cast<size_t>(kEmpty - 1 - t)];
  }
  /// Adds storage `s` to the empty set of `v`.
  void init(int v, int s) { tag_[static_cast<size_t>(v)] = s; }
  /// dst := dst u src; true when dst grew.
  bool unite(int dst, int src) {
    std::span<const int> a = get(dst), b = get(src);
    scratch_.clear();
    std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(scratch_));
    if (scratch_.size() == a.size()) return false;
    int &t = tag_[static_cast<size_t>(dst)];
    if (scratch_.size() == 1) t = scratch_[0];
    else if (t <= kEmpty - 1) multi_[static_cast<size_t>(kEmpty - 1 - t)].swap(scratch_);
    else {
      t = kEmpty - 1 - static_cast<int>(multi_.size());
      multi_.push_back(std::move(scratch_));
      scratch_ = {};
    }
    return true;
  }

private:
  static constexpr int kEmpty = -1; // then -2 - k: multi_[k]
  std::vector<int> tag_;
  std::vector<std::vector<int>> multi_;
  std::vector<int> scratch_;
};

} // namespace

AliasInfo PlanMemoryPass::analyze(Function &f, std::vector<StorageInfo> &st, const Dominators &dom) {
  AliasInfo ai;
  // Liveness first: its value numbers index the alias sets (sorted vectors
  // of storage indices; almost all hold one), so the fixpoint below makes
  // no hash lookup and no node allocation per value (issue 23).
  Liveness lv(f);
  AliasSets aliases(lv.numValues());
  std::vector<int> work;
  for (size_t i = 0; i < st.size(); ++i) {
    int v = lv.id(st[i].alloc->result());
    aliases.init(v, static_cast<int>(i)); // one storage per alloc_storage result
    work.push_back(v);
  }
  auto flow = [&](int from, Value *toValue) {
    int to = lv.id(toValue);
    if (to < 0) return;
    if (aliases.unite(to, from)) work.push_back(to);
  };
  auto escape = [&](const std::vector<int> &s, bool carried) {
    for (int i : s) (carried ? st[i].carried : st[i].escapes) = true;
  };
  std::vector<int> set;
  while (!work.empty()) {
    int vid = work.back();
    work.pop_back();
    std::span<const int> cur = aliases.get(vid);
    set.assign(cur.begin(), cur.end());
    for (OpOperand &u : lv.value(vid)->uses()) {
      Operation *op = u.owner();
      unsigned idx = u.index();
      switch (op->code()) {
      case OpCode::AllocTensor:
        if (idx == 0) flow(vid, op->result());
        break;
      case OpCode::Reshape:
      case OpCode::DynReshape:
        if (idx == 0) flow(vid, op->result());
        break;
      case OpCode::InvokeMut:
      case OpCode::InvokeShapeFunc:
      case OpCode::Kill:
      case OpCode::ShapeOf:
      case OpCode::StorageSize:
      case OpCode::DeviceCopy:
        break;
      case OpCode::Br:
      case OpCode::CondBr: {
        // A successor operand aliases the block argument (carried along a
        // retreating edge); cond_br's condition is only read.
        for (const Successor &s : op->successors()) {
          if (idx < s.operandBegin || idx >= s.operandBegin + s.operandCount) continue;
          flow(vid, s.block->argument(idx - s.operandBegin));
          // A back edge, or any edge out of an unreachable block.
          if (int from = dom.index(op->block()); from < 0 || dom.index(s.block) <= from)
            escape(set, /*carried=*/true);
        }
        break;
      }
      default:
        escape(set, /*carried=*/false);
        break;
      }
    }
  }

  // Where each storage is present (see AliasInfo), from liveness.
  ai.segments.assign(st.size(), {});
  std::vector<std::pair<int, int64_t>> defPos; // values of the block with aliases, where defined
  int64_t pos = 0;
  std::vector<int32_t> lastUseBlock(lv.numValues(), -1);
  std::vector<int64_t> lastUseAt(lv.numValues());
  int32_t bi = 0;
  for (auto &bp : f.blocks()) {
    Block *b = bp.get();
    const int64_t start = pos++;
    const int64_t first = pos;
    const auto stamp = static_cast<int32_t>(bi++);
    defPos.clear();
    int64_t end = first;
    for (Operation &op : *b) { // the last uses and the definitions, one walk
      end = pos;
      for (Value *v : op.operandValues())
        if (int i = lv.id(v); i >= 0) {
          lastUseBlock[i] = stamp;
          lastUseAt[i] = pos;
        }
      for (Value *r : op.resultValues())
        if (int i = lv.id(r); !aliases.empty(i)) defPos.emplace_back(i, pos);
      ++pos;
    }
    if (b->empty()) end = start;
    auto add = [&](int i, int64_t from) {
      int64_t to;
      if (lv.isLiveOut(b, i)) to = end;
      else if (lastUseBlock[i] == stamp) to = lastUseAt[i];
      else to = from;
      for (int s : aliases.get(i)) ai.segments[s].push_back({from, std::max(from, to)});
    };
    for (int i : lv.liveIn(b))
      if (!aliases.empty(i)) add(i, start);
    for (Value *a : b->arguments())
      if (int i = lv.id(a); !aliases.empty(i)) add(i, start);
    for (auto &[i, at] : defPos) add(i, at);
  }
  for (std::vector<Segment> &segs : ai.segments) { // merged in place
    std::sort(segs.begin(), segs.end());
    size_t n = 0;
    for (const Segment &sg : segs) {
      if (n > 0 && sg.first <= segs[n - 1].second) segs[n - 1].second = std::max(segs[n - 1].second, sg.second);
      else segs[n++] = sg;
    }
    segs.resize(n);
  }
  return ai;
}

void PlanMemoryPass::coalesceStatic(Module &m, Function &f, const std::vector<StorageInfo> &st,
                                    const AliasInfo &ai, const Dominators &dom, bool &changed) {
  // Candidates, grouped by device (never mix devices in one arena).
  std::map<std::string, std::vector<int>> byDevice;
  for (size_t i = 0; i < st.size(); ++i) {
    Operation *a = st[i].alloc;
    if (st[i].constSize < 0 || st[i].escapes || st[i].carried) continue;
    int64_t align = a->intAttr("alignment");
    if (align <= 0 || align > 64 || (64 % align) != 0) continue;
    bool ok = true;
    for (OpOperand &u : a->result()->uses()) {
      int64_t off;
      if (!u.owner()->is(OpCode::AllocTensor) || u.index() != 0 || !constantInt(u.owner()->operand(1), off))
        ok = false;
    }
    if (ok) byDevice[a->strAttr("device")].push_back(static_cast<int>(i));
  }

  // Regions: one arena per group of members, placed as late as possible.
  // The members' nearest common dominator D, lifted out of any cycle (then
  // allocated once, not per iteration); if no member is in D itself, the
  // members under different dominator-tree children of D (the arms of a
  // branch) get separate arenas, so that only the arm taken allocates, and
  // after whatever precedes it in that arm (a recursive function does not
  // hold its arena across its calls). Separate arenas never share bytes, so
  // splitting is always sound.
  struct Region {
    std::string device;
    std::vector<int> members;
    Block *at;
    bool lifted;
  };
  std::vector<Region> regions;
  // A window (a part of a region over kMaxRegionMembers) is not lifted out
  // of cycles: its arena is allocated on each iteration, where its members
  // are. Lifted, the arenas of all the windows of a long loop would be live
  // through the whole loop (quadratic liveness, and every window's bytes
  // held at once).
  std::function<void(const std::string &, std::vector<int>, bool)> split = [&](const std::string &device,
                                                                               std::vector<int> members,
                                                                               bool window) {
    // One member gains nothing from an arena, unless it is allocated in a
    // loop: lifted, its arena is allocated once per entry to the loop.
    if (members.empty() || (members.size() == 1 && (window || !dom.inCycle(st[members[0]].alloc->block()))))
      return;
    // An arena is one storage, so it obeys the limit on one tensor's bytes
    // (limits::kMaxTensorBytes, which alloc_storage's type rule enforces):
    // members whose sizes add up past it are cut, in order, into runs that
    // fit, each planned on its own. Only programs whose static tensors are
    // near 2^48 bytes reach this (they can never run, but must compile).
    {
      std::vector<int> run;
      int64_t sum = 0;
      bool cut = false;
      std::vector<std::vector<int>> runs;
      for (int i : members) {
        int64_t bytes = (st[i].constSize + 63) / 64 * 64, next;
        if (!limits::checkedAdd(sum, bytes, next) || next > limits::kMaxTensorBytes) {
          cut = true;
          runs.push_back(std::move(run));
          run.clear();
          next = bytes;
        }
        run.push_back(i);
        sum = next;
      }
      if (cut) {
        runs.push_back(std::move(run));
        for (std::vector<int> &r : runs) split(device, std::move(r), window);
        return;
      }
    }
    if (members.size() > kMaxRegionMembers) {
      for (size_t k = 0; k < members.size(); k += kMaxRegionMembers)
        split(device,
              std::vector<int>(members.begin() + static_cast<std::ptrdiff_t>(k),
                               members.begin() + static_cast<std::ptrdiff_t>(
                                                     std::min(members.size(), k + kMaxRegionMembers))),
              /*window=*/true);
      return;
    }
    std::vector<const Block *> blocks;
    for (int i : members) blocks.push_back(st[i].alloc->block());
    Block *d = dom.common(blocks);
    bool lifted = false;
    while (d && !window && dom.inCycle(d)) {
      d = dom.idom(d);
      lifted = true;
    }
    if (!d) return; // unreachable: every cycle has an ancestor outside it (the entry)
    bool inD = false;
    for (int i : members) inD |= st[i].alloc->block() == d;
    if (lifted || inD) {
      regions.push_back({device, members, d, lifted});
      return;
    }
    std::map<int, std::vector<int>> byChild; // RPO index of the child of d -> members
    for (int i : members) {
      Block *c = dom.childToward(d, st[i].alloc->block());
      byChild[dom.index(c)].push_back(i);
    }
    for (auto &[child, group] : byChild) split(device, group, window);
  };
  for (auto &[device, members] : byDevice) split(device, members, /*window=*/false);

  for (Region &r : regions) {
    const std::string &device = r.device;
    const std::vector<int> &members = r.members;
    AllocProblem p;
    for (size_t k = 0; k < members.size(); ++k) {
      p.sizes.push_back((st[members[k]].constSize + 63) / 64 * 64);
      p.order.push_back(static_cast<int64_t>(k)); // collected in RPO order
    }
    p.interferes = interferenceMatrix(ai, members);
    AllocSolution sol = allocateTensors(p);

    // In the region's block: before its first member, else (lifted out of
    // a cycle) before its terminator.
    Block *at = r.at;
    Operation *insertBefore = at->terminator();
    if (!r.lifted)
      for (int i : members)
        if (Operation *a = st[i].alloc; a->block() == at && (insertBefore == at->terminator() || a->isBeforeInBlock(insertBefore)))
          insertBefore = a;
    Builder b(m, f.loc());
    b.setInsertionPoint(insertBefore);
    Value *size = b.constantI64(sol.size);
    size->setName("arena_size");
    Value *arena = b.create(OpCode::AllocStorage, {size}, {{"device", Attr::getStr(device)}})->result();
    arena->setName(device == "cpu" ? "arena" : "arena_" + device);
    std::map<int64_t, Value *> offsets;
    auto offsetConst = [&](int64_t off) {
      auto it = offsets.find(off);
      if (it != offsets.end()) return it->second;
      Value *c = b.constantI64(off);
      offsets[off] = c;
      return c;
    };
    // Every offset constant first: the rewrite below may erase the op the
    // builder inserts before.
    for (size_t k = 0; k < members.size(); ++k)
      for (Operation *user : st[members[k]].alloc->result()->users()) {
        int64_t off = 0;
        constantInt(user->operand(1), off);
        offsetConst(sol.offsets[k] + off);
      }
    int64_t before = 0;
    for (size_t k = 0; k < members.size(); ++k) {
      Operation *alloc = st[members[k]].alloc;
      before += p.sizes[k];
      for (Operation *user : alloc->result()->users()) {
        int64_t off = 0;
        constantInt(user->operand(1), off);
        Value *oldOff = user->operand(1);
        user->setOperand(0, arena);
        user->setOperand(1, offsetConst(sol.offsets[k] + off));
        if (Operation *d = oldOff->definingOp(); d && !oldOff->hasUses()) d->erase();
      }
      Value *oldSize = alloc->operand(0);
      alloc->erase();
      if (Operation *d = oldSize->definingOp(); d && !oldSize->hasUses()) d->erase();
      ++NumCoalesced;
    }
    ++NumArenas;
    NumArenaBytes += static_cast<uint64_t>(sol.size);
    NumStaticBytesBefore += static_cast<uint64_t>(before);
    NumStaticBytesAfter += static_cast<uint64_t>(sol.size);
    changed = true;
  }
}

void PlanMemoryPass::reuseDynamic(Function &f, const std::vector<StorageInfo> &st, const AliasInfo &ai,
                                  const Dominators &dom, bool &changed) {
  SizeKeys keys(*f.module());
  // Groups by key, in creation order (first fit, as before). Members of a
  // group never interfere with each other, so their segments are disjoint;
  // once a second member joins, the group keeps their union in a map (start
  // -> end) that answers "does storage i interfere with any member" in
  // O(log) per segment of i (a group of one asks its leader's segments). At
  // most kMaxGroupsTried groups of a key are tried per storage: a program
  // with thousands of live run-time-size storages of one size would
  // otherwise try them all (the models have none reused, see
  // docs/perf.md). Flat tables: most storages stay alone (a chain of a
  // million kernel calls, each size its own key, made a million vectors,
  // maps and hash entries; issue 23).
  constexpr size_t kMaxGroupsTried = 64;
  std::vector<int> leaderOf;        // per group: its first member
  std::vector<int> nextOfKey;       // per group: the next group of its key, -1
  std::vector<std::unique_ptr<std::map<int64_t, int64_t>>> occupied; // per group of two or more
  std::vector<int> firstOfKey, lastOfKey; // per key number: its groups' list
  std::vector<int> groupOf(st.size(), -1);
  auto overlaps = [&](size_t g, int i) {
    if (!occupied[g]) return ai.interferes(leaderOf[g], i);
    const std::map<int64_t, int64_t> &occ = *occupied[g];
    for (const Segment &sg : ai.segments[i]) {
      auto it = occ.upper_bound(sg.second); // first range starting after sg
      if (it == occ.begin()) continue;
      if ((--it)->second >= sg.first) return true;
    }
    return false;
  };
  // Each candidate's device and alignment, read once (a storage is compared
  // with up to kMaxGroupsTried leaders; attributes are looked up by name).
  struct Placement {
    const std::string *device = nullptr; // interned
    int64_t alignment = 0;
    bool operator==(const Placement &o) const {
      return alignment == o.alignment && (device == o.device || *device == *o.device);
    }
  };
  std::vector<Placement> placement(st.size());
  for (size_t i = 0; i < st.size(); ++i)
    if (st[i].constSize < 0 && !st[i].escapes && !st[i].carried)
      placement[i] = {&st[i].alloc->strAttr("device"), st[i].alloc->intAttr("alignment")};
  std::vector<int> joined; // the storages that joined a group, in order
  for (size_t i = 0; i < st.size(); ++i) {
    if (st[i].constSize >= 0 || st[i].escapes || st[i].carried) continue;
    Operation *a = st[i].alloc;
    const auto keyA = static_cast<size_t>(keys.ofSize(a->operand(0)));
    if (keyA >= firstOfKey.size()) {
      firstOfKey.resize(keyA + 1, -1);
      lastOfKey.resize(keyA + 1, -1);
    }
    size_t tried = 0;
    for (int g = firstOfKey[keyA]; g >= 0; g = nextOfKey[static_cast<size_t>(g)]) {
      if (tried++ == kMaxGroupsTried) break;
      const int leader = leaderOf[static_cast<size_t>(g)];
      Operation *lead = st[static_cast<size_t>(leader)].alloc;
      if (!(placement[static_cast<size_t>(leader)] == placement[i])) continue;
      if (!dom.dominates(lead, a)) continue;
      if (overlaps(static_cast<size_t>(g), static_cast<int>(i))) continue;
      std::unique_ptr<std::map<int64_t, int64_t>> &occ = occupied[static_cast<size_t>(g)];
      if (!occ) {
        occ = std::make_unique<std::map<int64_t, int64_t>>();
        for (const Segment &sg : ai.segments[static_cast<size_t>(leader)]) (*occ)[sg.first] = sg.second;
      }
      for (const Segment &sg : ai.segments[i]) (*occ)[sg.first] = sg.second;
      groupOf[i] = g;
      joined.push_back(static_cast<int>(i));
      break;
    }
    if (groupOf[i] < 0) {
      const int g = static_cast<int>(leaderOf.size());
      groupOf[i] = g;
      leaderOf.push_back(static_cast<int>(i));
      nextOfKey.push_back(-1);
      occupied.emplace_back();
      if (lastOfKey[keyA] >= 0) nextOfKey[static_cast<size_t>(lastOfKey[keyA])] = g;
      else firstOfKey[keyA] = g;
      lastOfKey[keyA] = g;
    }
  }
  // Members by group, in join order within each (as before).
  std::stable_sort(joined.begin(), joined.end(), [&](int x, int y) { return groupOf[x] < groupOf[y]; });
  for (int member : joined) {
    const int leader = leaderOf[static_cast<size_t>(groupOf[static_cast<size_t>(member)])];
    Operation *a = st[static_cast<size_t>(member)].alloc;
    a->result()->replaceAllUsesWith(st[static_cast<size_t>(leader)].alloc->result());
    Value *size = a->operand(0);
    a->erase();
    if (Operation *d = size->definingOp(); d && !size->hasUses() && d->info().hasFlag(opflags::Pure))
      d->erase();
    ++NumDynamicReuses;
    changed = true;
  }
}

size_t PlanMemoryPass::placeKills(Module &m, Function &f, bool &changed) {
  Liveness lv(f);
  size_t placed = 0;
  auto kill = [&](Value *v, Operation *before, Block *atEnd, Location loc) {
    ++placed;
    Builder b(m, loc);
    if (before) b.setInsertionPoint(before);
    else b.setInsertionPointToEnd(atEnd);
    b.create(OpCode::Kill, {v});
    changed = true;
  };

  // Edge kills first (from the unmodified liveness). Flat arrays with
  // offsets and reused scratch, not a few vectors per block and edge (issue
  // 23: a loop of 430,000 blocks made over a million small allocations here).
  struct EdgeKill {
    Operation *term;
    unsigned succ;
    uint32_t begin, end; // its values: edgeVals[begin, end)
  };
  std::vector<EdgeKill> edges;
  std::vector<int> edgeVals;
  std::vector<Block *> blocks;
  for (auto &b : f.blocks()) blocks.push_back(b.get());
  std::vector<int> atEnd;
  for (Block *b : blocks) {
    Operation *t = b->terminator();
    if (!t) continue;
    std::span<const int> out = lv.liveOut(b);
    atEnd.assign(out.begin(), out.end());
    for (Value *v : t->operandValues())
      if (int i = lv.id(v); i >= 0) atEnd.push_back(i);
    std::sort(atEnd.begin(), atEnd.end());
    atEnd.erase(std::unique(atEnd.begin(), atEnd.end()), atEnd.end());
    for (unsigned k = 0; k < t->successors().size(); ++k) {
      Block *s = t->successors()[k].block;
      const auto begin = static_cast<uint32_t>(edgeVals.size());
      for (int i : atEnd)
        if (!lv.isLiveIn(s, i) && killable(lv.value(i))) edgeVals.push_back(i);
      edges.push_back({t, k, begin, static_cast<uint32_t>(edgeVals.size())});
    }
  }
  // The incoming edges of each block (by block index), as compressed rows.
  std::vector<uint32_t> predBegin(blocks.size() + 1, 0), predEdges(edges.size());
  for (const EdgeKill &e : edges) ++predBegin[lv.blockNumber(e.term->successors()[e.succ].block) + 1];
  for (size_t b = 0; b < blocks.size(); ++b) predBegin[b + 1] += predBegin[b];
  {
    std::vector<uint32_t> at(predBegin.begin(), predBegin.end() - 1);
    for (size_t e = 0; e < edges.size(); ++e)
      predEdges[at[lv.blockNumber(edges[e].term->successors()[edges[e].succ].block)]++] = static_cast<uint32_t>(e);
  }
  auto valsOf = [&](const EdgeKill &e) { return std::span<const int>(edgeVals.data() + e.begin, e.end - e.begin); };
  // Per successor: values every incoming edge kills go to its start. What
  // an edge passes to a block argument it hands over (LangRef, `br`; the
  // emitter releases the register after the edge's moves): no kill on that
  // edge. A value every incoming edge passes is therefore not killed at the
  // start either; one that some edge passes and another does not is (one
  // kill instead of a split edge; live into the successor, it is then
  // handed over by no edge).
  auto passedOn = [&](const EdgeKill &e, int i) {
    const Successor &sc = e.term->successors()[e.succ];
    for (unsigned j = 0; j < sc.operandCount; ++j)
      if (lv.id(e.term->operand(sc.operandBegin + j)) == i) return true;
    return false;
  };
  // The agreed start kills of each block (by block index), as compressed
  // rows; an edge's own remaining values shrink in place (a subsequence).
  std::vector<uint32_t> startBegin(blocks.size() + 1, 0);
  std::vector<int> startVals, common, keep;
  for (size_t si = 0; si < blocks.size(); ++si) {
    startBegin[si] = static_cast<uint32_t>(startVals.size());
    const uint32_t p0 = predBegin[si], p1 = predBegin[si + 1];
    if (p0 == p1) continue;
    std::span<const int> first = valsOf(edges[predEdges[p0]]);
    common.assign(first.begin(), first.end());
    for (uint32_t pe = p0; pe < p1 && !common.empty(); ++pe) {
      std::span<const int> vals = valsOf(edges[predEdges[pe]]);
      keep.clear();
      std::set_intersection(common.begin(), common.end(), vals.begin(), vals.end(), std::back_inserter(keep));
      common.swap(keep);
    }
    std::erase_if(common, [&](int i) {
      for (uint32_t pe = p0; pe < p1; ++pe)
        if (!passedOn(edges[predEdges[pe]], i)) return false;
      return true;
    });
    for (uint32_t pe = p0; pe < p1; ++pe) {
      EdgeKill &e = edges[predEdges[pe]];
      // The difference with `common`, minus what the edge passes on,
      // written over the edge's own values (both sorted).
      uint32_t w = e.begin;
      size_t c = 0;
      for (uint32_t r = e.begin; r < e.end; ++r) {
        const int i = edgeVals[r];
        while (c < common.size() && common[c] < i) ++c;
        if (c < common.size() && common[c] == i) continue;
        if (!passedOn(e, i)) edgeVals[w++] = i;
      }
      e.end = w;
    }
    startVals.insert(startVals.end(), common.begin(), common.end());
  }
  startBegin[blocks.size()] = static_cast<uint32_t>(startVals.size());

  // Kills inside blocks, after the last use. Walking each block backwards,
  // the first use met of a value is its last in the block: no positions,
  // no snapshot of the op list (the kills go after the op just visited).
  std::vector<int32_t> usedBelow(lv.numValues(), -1); // the block index
  std::vector<Value *> dying, start;
  for (size_t bi = 0; bi < blocks.size(); ++bi) {
    Block *b = blocks[bi];
    const auto stamp = static_cast<int32_t>(bi);
    // Live after the op: used further down the block, or live out of it.
    auto liveAfter = [&](int i) { return usedBelow[i] == stamp || lv.isLiveOut(b, i); };
    for (Operation *op = b->back(), *prev; op; op = prev) {
      prev = op->prevOp();
      dying.clear();
      const bool term = op->isTerminator();
      for (Value *v : op->operandValues()) {
        int i = lv.id(v);
        if (i < 0) continue;
        if (!term && !liveAfter(i) && killable(v)) dying.push_back(v);
        usedBelow[i] = stamp; // a repeated operand is not dying twice
      }
      if (term) continue;
      for (Value *r : op->resultValues())
        if (!liveAfter(lv.id(r)) && killable(r)) dying.push_back(r);
      for (Value *v : dying) kill(v, op->nextOp(), nullptr, op->loc());
    }
    // Block start: agreed edge kills and dead block arguments.
    start.clear();
    for (uint32_t k = startBegin[bi]; k < startBegin[bi + 1]; ++k) start.push_back(lv.value(startVals[k]));
    for (Value *a : b->arguments()) {
      bool used = a->hasUses() || lv.isLiveOut(b, lv.id(a));
      if (!used && killable(a)) start.push_back(a);
    }
    Operation *first = b->front();
    for (Value *v : start) kill(v, first, nullptr, first ? first->loc() : b->loc());
  }

  // Remaining edge kills: split the edge (the new blocks are placed after
  // their predecessors in one pass at the end).
  f.beginBlockInsertions();
  unsigned counter = 0;
  // The labels a new `split<N>` could clash with: only those of that form
  // (made at the first split).
  std::unordered_set<std::string> labels;
  bool labelsMade = false;
  for (EdgeKill &e : edges) {
    if (e.begin == e.end) continue;
    if (!labelsMade) {
      for (Block *b : blocks)
        if (b->label().rfind("split", 0) == 0) labels.insert(b->label());
      labelsMade = true;
    }
    Successor &s = e.term->mutableSuccessors()[e.succ];
    Block *target = s.block;
    std::string label;
    do label = "split" + std::to_string(counter++);
    while (labels.count(label));
    labels.insert(label);
    auto nb = std::make_unique<Block>(label);
    nb->setLoc(e.term->loc());
    Block *split = f.insertBlockAfter(e.term->block(), std::move(nb));
    std::vector<Value *> fwd;
    for (Value *a : target->arguments()) fwd.push_back(split->addArgument(a->type(), e.term->loc()));
    split->push_back(Operation::create(OpCode::Br, e.term->loc(), fwd, {}, defaultAttrs(OpCode::Br),
                                       {Successor{target, 0, static_cast<unsigned>(fwd.size()), "", {}}}));
    s.block = split;
    for (int i : valsOf(e)) kill(lv.value(i), split->front(), nullptr, e.term->loc());
    ++NumEdgesSplit;
    changed = true;
  }
  f.endBlockInsertions();
  return placed;
}

/// Kills directly before a `ret` (only kills in between) are dropped: leaving
/// the frame releases every register anyway, at the same point.
/// Returns how many it dropped.
size_t dropKillsBeforeRet(Function &f) {
  size_t dropped = 0;
  for (auto &b : f.blocks()) {
    Operation *t = b->terminator();
    if (!t || !t->is(OpCode::Ret)) continue;
    while (Operation *p = t->prevOp()) {
      if (!p->is(OpCode::Kill)) break;
      p->erase();
      ++dropped;
    }
  }
  return dropped;
}

void PlanMemoryPass::planFunction(Module &m, Function &f, bool &changed) {
  if (rotate_ && rotateCarriedStorages(m, f)) changed = true; // step 0
  std::vector<StorageInfo> st = dropKillsAndCollectStorages(f, changed);
  // One analysis for both steps: coalescing rewrites only the static
  // storages' allocations and views (and adds arenas and constants), which
  // changes neither the aliases, the liveness, the relative order of the
  // run-time-size storages' segments nor the CFG that reuse reads.
  size_t numStatic = 0;
  for (const StorageInfo &s : st) numStatic += s.constSize >= 0;
  const size_t numDynamic = st.size() - numStatic;
  const bool doCoalesce = coalesce_ && numStatic >= 1, doReuse = reuse_ && numDynamic >= 2;
  if (doCoalesce || doReuse) {
    Dominators dom(f);
    AliasInfo ai = analyze(f, st, dom);
    if (doCoalesce) coalesceStatic(m, f, st, ai, dom, changed);
    if (doReuse) reuseDynamic(f, st, ai, dom, changed);
  }
  const size_t placed = placeKills(m, f, changed);
  NumKillsPlaced += placed - dropKillsBeforeRet(f);
}

} // namespace

std::unique_ptr<Pass> createPlanMemoryPass() { return std::make_unique<PlanMemoryPass>(); }

} // namespace nimble::passes
