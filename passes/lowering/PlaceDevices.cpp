//===- PlaceDevices.cpp - Heterogeneous device placement by unification ---===//
//
// Nimble paper §3.4 and appendix B: every value of the explicit-memory IR
// (manifest-memory's output, §3.3 / appendix A) gets a device domain, CPU or
// the compilation target, so that shape work runs on the CPU, kernels on the
// target, and data crosses devices only through `device_copy`s inserted where
// the two meet. Afterwards each `alloc_storage`'s `device` names its domain.
//
// Domains and rules (appendix B). Nodes are SSA values, one node per kernel
// call (its "kernel domain") and one per function result. Two kinds of edge:
//
//   hard (union-find `union`, no copy possible: a conflict is an error)
//     alloc_tensor result = its storage            ("memory operations")
//     invoke_mut outputs  = the kernel domain      (written in place)
//     call results        = the callee's results
//     tuple/construct     = their fields, get_tuple and match fields = the
//                           aggregate (aggregates are placed whole)
//     non-tensor values   flow hard wherever a tensor would flow soft
//   soft (a use that needs its value in a domain; a copy can be inserted)
//     invoke_mut inputs   -> the kernel domain     ("all arguments of one
//                                                    invoke_mut in one domain")
//     br/cond_br operands -> the target block's arguments
//     call operands       -> the callee's parameters
//     ret operands        -> the function's results
//     reshape input       -> its result (a view; the copy goes before it)
//     device_copy input   -> `src`
//     CPU: invoke_shape_func inputs, storage_size, alloc_storage's size,
//          alloc_tensor's offset and shape, dyn_reshape's shape, cond_br's
//          condition (the VM reads them on the host)
//   fixed
//     CPU: shape_of results, invoke_shape_func outputs (so the shape tensors'
//          storage), storage_size results, the parameters and results of
//          entry functions (host I/O, below)
//     device_copy result: `dst`; alloc_storage with device != "cpu": that device
//
// Unification (paper: "union(s, t) ... find(s)"): the hard edges are unified
// with a union-find, each class carrying its fixed device (two different fixed
// devices in one class is reported as an error at the op that joined them).
// The soft edges are then resolved over the classes, and where their two ends
// end up in different domains a copy is inserted at that use, and only there.
// Departure from the paper, which unifies every edge in one go and leaves the
// order of failures (hence where the copies land) implicit: we decide domains
// in a fixed order so copies land where they are cheapest:
//
//   1. backward: a class whose uses need it on a device is put there (a
//      constant or block argument a shape function reads is on the CPU). A
//      kernel is not moved by such an implicit demand (its inputs could drag
//      the whole model to the host) unless it is scalar (rank-0 operands and
//      results: loop counters and bounds, "a few cheap scalar arithmetic
//      computation" in the paper's words), so a counted loop's control stays
//      on the host with no copy per iteration;
//   2. both ways from explicit placements (device_copy, explicit storages),
//      through kernels too: "the device domains of the input and output are
//      propagated in the opposite directions to other IR nodes that are
//      reachable to/from the device copy node"; forward only from these;
//   3. (non-scalar) kernel domains still unconstrained get the target ("if
//      there is no constraint ... we assign the compilation target"), then 1
//      again;
//   4. the remaining classes follow their producers, else get the target.
//
// The entry functions' CPU parameters and results are a boundary that takes
// part in none of 1-3 (a kernel reading a parameter, or one whose result is
// returned, still runs on the target): the conflict becomes one upload per
// parameter and one download per result. Entry functions are the
// non-primitive functions no other function calls (nimble-run can call any
// function; these are the ones a caller in the module cannot be the only
// user of), plus `@main` (nimble-run's default); a function another function
// calls is internal: its parameters and results are unified with its call
// sites. (Calling an internal function directly from nimble-run on a device
// runtime would need the runtime to copy its inputs; this VM has no device.)
//
// Copies: the uses of one value that need it on one device share one copy per
// function, placed before the first such use in the nearest common dominator
// of their blocks, hoisted up the dominator tree out of loops the value is not
// defined in (a parameter read in a loop body is uploaded once, before the
// loop; a loop-carried value returned after the loop is downloaded after it).
// A value a kernel writes (an alloc_tensor result) is copied after its writer.
// Constants and globals are ordinary nodes: they live where their uses need
// them (a CUDA runtime loads the constant pool onto the device); a `constant`
// needed in both domains is rematerialized (cloned) in the second one rather
// than copied.
//
// With target=cpu and no explicit device in the input every domain is the
// CPU, no copy is inserted and the pass changes nothing. Memory planning runs
// after this pass and plans each device's storages separately.
//
//===----------------------------------------------------------------------===//

#include "passes/analysis/Analysis.h"
#include "passes/Pass.h"
#include "passes/Statistic.h"

#include "ir/Builder.h"
#include "ir/Verifier.h"

#include <algorithm>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

NIMBLE_STATISTIC(NumDeviceCopies, "place-devices", "Number of device_copy ops inserted");
NIMBLE_STATISTIC(NumConstantsCloned, "place-devices",
                 "Number of constants rematerialized on another device instead of copied");
NIMBLE_STATISTIC(NumCpuStorages, "place-devices", "Number of storages placed on cpu");
NIMBLE_STATISTIC(NumCudaStorages, "place-devices", "Number of storages placed on cuda");

enum class Dev : int8_t { None = -1, CPU = 0, CUDA = 1 };

const char *devName(Dev d) { return d == Dev::CUDA ? "cuda" : "cpu"; }

bool parseDev(const std::string &s, Dev &d) {
  if (s == "cpu") d = Dev::CPU;
  else if (s == "cuda") d = Dev::CUDA;
  else return false;
  return true;
}


/// A use that needs its value in the domain of node `req`.
struct SoftEdge {
  Operation *user;
  unsigned index;
  int req;
};

/// Dominator tree (ir::DominanceInfo) and loop depth of one function's
/// reachable blocks.
class BlockInfo {
public:
  explicit BlockInfo(const Function &f) : dom_(f) {
    const std::vector<Block *> &rpo = dom_.reversePostOrder();
    std::unordered_map<Block *, std::vector<Block *>> preds;
    for (Block *b : rpo)
      for (Block *s : b->successors()) preds[s].push_back(b);
    // Natural loops: a back edge t -> h (h dominates t) makes h a header; its
    // body is what reaches t without passing h.
    std::map<Block *, std::unordered_set<Block *>> loops;
    for (Block *t : rpo)
      for (Block *h : t->successors())
        if (reachable(h) && dom_.dominates(h, t)) {
          auto &body = loops[h];
          body.insert(h);
          std::vector<Block *> work{t};
          while (!work.empty()) {
            Block *b = work.back();
            work.pop_back();
            if (!body.insert(b).second) continue;
            for (Block *p : preds[b]) work.push_back(p);
          }
        }
    for (auto &[h, body] : loops)
      for (Block *b : body) ++depth_[b];
  }

  bool reachable(Block *b) const { return dom_.isReachable(b); }
  /// The immediate dominator (`b` reachable, not the entry).
  Block *idom(Block *b) const { return dom_.idom(b); }
  int depth(Block *b) const {
    auto it = depth_.find(b);
    return it == depth_.end() ? 0 : it->second;
  }
  Block *commonDominator(Block *a, Block *b) const { return dom_.common(a, b); }

private:
  ir::DominanceInfo dom_;
  std::unordered_map<Block *, int> depth_;
};

class PlaceDevicesPass : public Pass {
public:
  std::string_view name() const override { return "place-devices"; }
  std::string setOption(std::string_view key, std::string_view value) override {
    if (key == "target") {
      if (!parseDev(std::string(value), target_)) return "option 'target' of 'place-devices' takes cpu or cuda";
      return "";
    }
    return Pass::setOption(key, value);
  }
  LogicalResult run(Module &m, DiagnosticEngine &diag, bool &changed) override;

private:
  // Union-find.
  int newNode() {
    parent_.push_back(static_cast<int>(parent_.size()));
    dev_.push_back(Dev::None);
    explicit_.push_back(false);
    anchor_.push_back(false);
    boundary_.push_back(false);
    return static_cast<int>(parent_.size()) - 1;
  }
  int find(int n) {
    while (parent_[n] != n) n = parent_[n] = parent_[parent_[n]];
    return n;
  }
  int node(Value *v) {
    auto [it, inserted] = valueNode_.try_emplace(v, 0);
    if (inserted) it->second = newNode();
    return it->second;
  }
  int resultNode(Function *f, unsigned i) {
    auto [it, inserted] = resultNode_.try_emplace({f, i}, 0);
    if (inserted) it->second = newNode();
    return it->second;
  }
  /// Hard edge: one domain. Reports two different fixed devices.
  bool unite(int a, int b, Location loc, DiagnosticEngine &diag, const char *what);
  /// Fixes `n`'s class on `d`.
  bool fix(int n, Dev d, bool isExplicit, Location loc, DiagnosticEngine &diag, const char *what,
           bool isBoundary = false);
  /// Operand `i` of `op` must be in `req`'s domain (copyable if a tensor).
  bool require(Operation &op, unsigned i, int req, DiagnosticEngine &diag);
  bool requireDev(Operation &op, unsigned i, Dev d, DiagnosticEngine &diag, bool isExplicit = false);
  bool collect(Module &m, Function &f, bool entry, DiagnosticEngine &diag);
  void propagate();
  /// Returns the number of copies (and rematerialized constants) inserted.
  unsigned insertCopies(Module &m);

  Dev target_ = Dev::CPU;
  std::vector<int> parent_;
  std::vector<Dev> dev_;
  std::vector<bool> explicit_, anchor_, boundary_;
  std::unordered_map<Value *, int> valueNode_;
  std::map<std::pair<Function *, unsigned>, int> resultNode_;
  std::vector<SoftEdge> soft_;
  /// The domains of fixed requirements: [explicit][device].
  int req_[2][2] = {{-1, -1}, {-1, -1}};
};

bool PlaceDevicesPass::unite(int a, int b, Location loc, DiagnosticEngine &diag, const char *what) {
  a = find(a);
  b = find(b);
  if (a == b) return true;
  if (dev_[a] != Dev::None && dev_[b] != Dev::None && dev_[a] != dev_[b]) {
    diag.error(loc, std::string("place-devices: ") + what + " joins a value placed on " + devName(dev_[a]) +
                        " with one placed on " + devName(dev_[b]));
    return false;
  }
  parent_[b] = a;
  if (dev_[a] == Dev::None) dev_[a] = dev_[b];
  explicit_[a] = explicit_[a] || explicit_[b];
  anchor_[a] = anchor_[a] || anchor_[b];
  boundary_[a] = boundary_[a] || boundary_[b];
  return true;
}

bool PlaceDevicesPass::fix(int n, Dev d, bool isExplicit, Location loc, DiagnosticEngine &diag,
                           const char *what, bool isBoundary) {
  n = find(n);
  if (dev_[n] != Dev::None && dev_[n] != d) {
    diag.error(loc, std::string("place-devices: ") + what + " must be on " + devName(d) +
                        " but is also needed on " + devName(dev_[n]));
    return false;
  }
  dev_[n] = d;
  explicit_[n] = explicit_[n] || isExplicit;
  boundary_[n] = boundary_[n] || isBoundary;
  return true;
}

bool PlaceDevicesPass::require(Operation &op, unsigned i, int req, DiagnosticEngine &diag) {
  Value *v = op.operand(i);
  if (v->type().isTensor()) {
    soft_.push_back({&op, i, req});
    return true;
  }
  return unite(node(v), req, op.operandLoc(i), diag, "this non-tensor operand (no copy possible)");
}

bool PlaceDevicesPass::requireDev(Operation &op, unsigned i, Dev d, DiagnosticEngine &diag,
                                  bool isExplicit) {
  Value *v = op.operand(i);
  if (v->type().isTensor()) {
    soft_.push_back({&op, i, req_[isExplicit][static_cast<int>(d)]});
    return true;
  }
  return fix(node(v), d, isExplicit, op.operandLoc(i), diag, "this non-tensor operand");
}

/// Collects the nodes, hard edges and soft edges of `f`.
bool PlaceDevicesPass::collect(Module &m, Function &f, bool entry, DiagnosticEngine &diag) {
  if (entry) {
    for (Value *a : f.entry()->arguments())
      if (!fix(node(a), Dev::CPU, false, a->loc(), diag, "entry function parameter", true)) return false;
    for (unsigned i = 0; i < f.resultTypes().size(); ++i)
      if (!fix(resultNode(&f, i), Dev::CPU, false, f.loc(), diag, "entry function result", true))
        return false;
  }
  auto kernelDomain = [&](Operation &op, unsigned numInputs) {
    int k = newNode();
    // Scalar kernels (every operand and result rank 0: loop counters, bounds)
    // are cheap anywhere; they go where their results are needed.
    bool scalar = true;
    for (Value *v : op.operandValues()) scalar &= v->type().isTensor() && v->type().rank() == 0;
    for (Value *v : op.resultValues()) scalar &= v->type().isTensor() && v->type().rank() == 0;
    anchor_[k] = !scalar;
    for (unsigned i = 0; i < op.numOperands(); ++i) {
      if (i < numInputs) {
        if (!require(op, i, k, diag)) return false;
      } else if (!unite(k, node(op.operand(i)), op.operandLoc(i), diag, "this kernel output")) {
        return false;
      }
    }
    for (Value *r : op.resultValues())
      if (!unite(k, node(r), op.loc(), diag, "this result")) return false;
    return true;
  };

  for (auto &bp : f.blocks())
    for (Operation &op : *bp) {
      bool ok = true;
      switch (op.code()) {
      case OpCode::Constant:
      case OpCode::Kill:
        break;
      case OpCode::ShapeOf:
        ok = fix(node(op.result()), Dev::CPU, false, op.loc(), diag, "the result of shape_of");
        break;
      case OpCode::StorageSize:
        ok = requireDev(op, 0, Dev::CPU, diag) &&
             fix(node(op.result()), Dev::CPU, false, op.loc(), diag, "the result of storage_size");
        break;
      case OpCode::AllocStorage: {
        ok = requireDev(op, 0, Dev::CPU, diag);
        Dev d;
        if (!parseDev(op.strAttr("device"), d)) {
          diag.error(op.loc(), "place-devices: unknown device \"" + op.strAttr("device") +
                                   "\" (expected \"cpu\" or \"cuda\")");
          return false;
        }
        // The default (`cpu`, which the printer omits) is no constraint.
        if (ok && d != Dev::CPU) ok = fix(node(op.result()), d, true, op.loc(), diag, "this storage");
        break;
      }
      case OpCode::AllocTensor:
        ok = unite(node(op.result()), node(op.operand(0)), op.loc(), diag, "this tensor's storage");
        for (unsigned i = 1; ok && i < op.numOperands(); ++i) ok = requireDev(op, i, Dev::CPU, diag);
        break;
      case OpCode::InvokeShapeFunc:
        for (unsigned i = 0; ok && i < op.numOperands(); ++i) ok = requireDev(op, i, Dev::CPU, diag);
        for (unsigned i = 0; ok && i < op.numResults(); ++i)
          ok = fix(node(op.result(i)), Dev::CPU, false, op.loc(), diag, "a shape function output");
        break;
      case OpCode::InvokeMut:
        ok = kernelDomain(op, static_cast<unsigned>(std::clamp<int64_t>(op.intAttr("num_inputs"), 0, op.numOperands())));
        break;
      case OpCode::DeviceCopy: {
        Dev src, dst;
        if (!parseDev(op.strAttr("src"), src) || !parseDev(op.strAttr("dst"), dst)) {
          diag.error(op.loc(), "place-devices: device_copy between unknown devices \"" + op.strAttr("src") +
                                   "\" and \"" + op.strAttr("dst") + "\" (expected \"cpu\" or \"cuda\")");
          return false;
        }
        ok = requireDev(op, 0, src, diag, true) &&
             fix(node(op.result()), dst, true, op.loc(), diag, "the result of device_copy");
        break;
      }
      case OpCode::Reshape:
        ok = require(op, 0, node(op.result()), diag);
        break;
      case OpCode::DynReshape:
        ok = require(op, 0, node(op.result()), diag) && requireDev(op, 1, Dev::CPU, diag);
        break;
      case OpCode::Tuple:
      case OpCode::Construct:
      case OpCode::GetTuple:
        for (unsigned i = 0; ok && i < op.numOperands(); ++i)
          ok = unite(node(op.result()), node(op.operand(i)), op.operandLoc(i), diag, "this aggregate field");
        break;
      case OpCode::Ret:
        for (unsigned i = 0; ok && i < op.numOperands(); ++i) ok = require(op, i, resultNode(&f, i), diag);
        break;
      case OpCode::Br:
      case OpCode::CondBr:
      case OpCode::Match: {
        if (op.is(OpCode::CondBr)) ok = requireDev(op, 0, Dev::CPU, diag);
        for (const Successor &s : op.successors()) {
          if (op.is(OpCode::Match)) {
            for (Value *a : s.block->arguments())
              if (ok) ok = unite(node(a), node(op.operand(0)), s.loc.known() ? s.loc : op.loc(), diag,
                                 "this match case");
            continue;
          }
          for (unsigned j = 0; ok && j < s.operandCount && j < s.block->numArguments(); ++j)
            ok = require(op, s.operandBegin + j, node(s.block->argument(j)), diag);
        }
        break;
      }
      case OpCode::Call: {
        Function *callee = m.lookupFunction(op.attr("callee"));
        if (!callee || isPrimitive(*callee) || !callee->entry() ||
            callee->entry()->numArguments() != op.numOperands() ||
            callee->resultTypes().size() != op.numResults()) {
          ok = kernelDomain(op, op.numOperands());
          break;
        }
        for (unsigned i = 0; ok && i < op.numOperands(); ++i)
          ok = require(op, i, node(callee->entry()->argument(i)), diag);
        for (unsigned i = 0; ok && i < op.numResults(); ++i)
          ok = unite(node(op.result(i)), resultNode(callee, i), op.loc(), diag, "this call result");
        break;
      }
      default:
        // A compute op manifest-memory did not lower: a kernel domain of its own.
        ok = kernelDomain(op, op.numOperands());
        break;
      }
      if (!ok) return false;
    }
  return true;
}

void PlaceDevicesPass::propagate() {
  std::unordered_map<int, std::vector<size_t>> byReq, byVal;
  for (size_t e = 0; e < soft_.size(); ++e) {
    byReq[find(soft_[e].req)].push_back(e);
    byVal[find(node(soft_[e].user->operand(soft_[e].index)))].push_back(e);
  }
  std::deque<int> work;
  auto assign = [&](int c, Dev d, bool isExplicit) {
    dev_[c] = d;
    explicit_[c] = isExplicit;
    work.push_back(c);
  };
  auto run = [&](bool forwardFromAll) {
    while (!work.empty()) {
      int c = work.front();
      work.pop_front();
      // Backward: what this domain's uses read is produced in this domain.
      // Only an explicit placement moves a kernel.
      for (size_t e : byReq[c]) {
        int vc = find(node(soft_[e].user->operand(soft_[e].index)));
        if (dev_[vc] == Dev::None && (explicit_[c] || !anchor_[vc])) assign(vc, dev_[c], explicit_[c]);
      }
      // Forward: users follow an explicit placement.
      if (!forwardFromAll && !explicit_[c]) continue;
      for (size_t e : byVal[c]) {
        int rc = find(soft_[e].req);
        if (dev_[rc] == Dev::None) assign(rc, dev_[c], explicit_[c]);
      }
    }
  };
  int numNodes = static_cast<int>(parent_.size());
  // 1 and 2: from the fixed devices, except the entry functions' boundary.
  for (int n = 0; n < numNodes; ++n)
    if (find(n) == n && dev_[n] != Dev::None && !boundary_[n]) work.push_back(n);
  run(false);
  // 3: kernels without a constraint run on the target.
  for (int n = 0; n < numNodes; ++n)
    if (find(n) == n && anchor_[n] && dev_[n] == Dev::None) assign(n, target_, false);
  run(false);
  // 4: the rest follows its producers, else the target.
  for (int n = 0; n < numNodes; ++n)
    if (find(n) == n && dev_[n] != Dev::None) work.push_back(n);
  run(true);
  for (int n = 0; n < numNodes; ++n)
    if (find(n) == n && dev_[n] == Dev::None) dev_[n] = target_;
}

/// Where `v` is complete in its function: its block and the op after which it
/// may be copied (null: the start of the block). A tensor a kernel writes in
/// place is complete after that kernel. Returns false when the writer is in
/// another block (copies then go right before each use).
bool completionPoint(Value *v, Function &f, Block *&block, Operation *&after) {
  after = nullptr;
  if (auto *a = dyn_cast<BlockArgument>(v)) {
    block = a->owner();
    return true;
  }
  Operation *def = v->definingOp();
  if (!def) { // a global
    block = f.entry();
    return true;
  }
  block = def->block();
  after = def;
  if (!def->is(OpCode::AllocTensor)) return true;
  for (OpOperand &u : v->uses()) {
    Operation *w = u.owner();
    if (!w->is(OpCode::InvokeMut)) continue;
    if (static_cast<int64_t>(u.index()) < w->intAttr("num_inputs")) continue;
    if (w->block() != block) return false;
    if (after->isBeforeInBlock(w)) after = w;
  }
  return true;
}

unsigned PlaceDevicesPass::insertCopies(Module &m) {
  unsigned count = 0;
  // The uses to copy, grouped by (value, device, function), in IR order.
  std::map<std::tuple<Function *, Value *, Dev>, std::vector<size_t>> groups;
  std::vector<std::tuple<Function *, Value *, Dev>> order;
  for (size_t e = 0; e < soft_.size(); ++e) {
    Value *v = soft_[e].user->operand(soft_[e].index);
    Dev have = dev_[find(node(v))], need = dev_[find(soft_[e].req)];
    if (have == need) continue;
    auto key = std::make_tuple(soft_[e].user->function(), v, need);
    auto &g = groups[key];
    if (g.empty()) order.push_back(key);
    g.push_back(e);
  }
  std::unordered_map<Function *, std::unique_ptr<BlockInfo>> infos;
  for (auto &key : order) {
    auto [f, v, need] = key;
    Dev have = dev_[find(node(v))];
    const std::vector<size_t> &uses = groups[key];
    auto &info = infos[f];
    if (!info) info = std::make_unique<BlockInfo>(*f);
    Operation *constDef = v->definingOp() && v->definingOp()->is(OpCode::Constant) ? v->definingOp() : nullptr;
    auto makeCopy = [&](Operation *before, Block *atEnd) {
      Builder b(m, before ? before->loc() : v->loc());
      if (before) b.setInsertionPoint(before);
      else b.setInsertionPointToEnd(atEnd);
      if (constDef) { // a constant is rematerialized in the other domain
        Operation *c = b.create(OpCode::Constant, {}, {{"value", constDef->attr("value")}}, {v->type()});
        c->setLoc(constDef->loc());
        if (!v->name().empty()) c->result()->setName(v->name() + "_" + devName(need));
        ++NumConstantsCloned;
        ++count;
        return c->result();
      }
      Operation *c = b.create(OpCode::DeviceCopy, {v},
                              {{"src", Attr::getStr(devName(have))}, {"dst", Attr::getStr(devName(need))}},
                              {v->type()});
      if (!v->name().empty()) c->result()->setName(v->name() + "_" + devName(need));
      ++NumDeviceCopies;
      ++count;
      return c->result();
    };

    Block *defBlock;
    Operation *after;
    bool shared = completionPoint(v, *f, defBlock, after) && info->reachable(defBlock);
    // Uses the shared copy cannot serve (unreachable, or before the value is
    // complete) get a copy of their own.
    std::vector<size_t> sharedUses, ownUses;
    for (size_t e : uses) {
      Operation *u = soft_[e].user;
      bool ok = shared && info->reachable(u->block()) &&
                (u->block() != defBlock || !after || after->isBeforeInBlock(u));
      (ok ? sharedUses : ownUses).push_back(e);
    }
    for (size_t e : ownUses) soft_[e].user->setOperand(soft_[e].index, makeCopy(soft_[e].user, nullptr));
    if (sharedUses.empty()) continue;

    Block *where = soft_[sharedUses[0]].user->block();
    for (size_t e : sharedUses) where = info->commonDominator(where, soft_[e].user->block());
    while (where != defBlock && info->depth(where) > info->depth(defBlock)) where = info->idom(where);
    // Before the first use in `where` (after the completion point), else at
    // its end (before the terminator).
    std::unordered_set<Operation *> users;
    for (size_t e : sharedUses) users.insert(soft_[e].user);
    Operation *at = where == defBlock && after ? after->nextOp() : where->front();
    for (; at; at = at->nextOp())
      if (users.count(at) || at->isTerminator()) break;
    Value *copy = makeCopy(at, where);
    for (size_t e : sharedUses) soft_[e].user->setOperand(soft_[e].index, copy);
  }
  return count;
}

LogicalResult PlaceDevicesPass::run(Module &m, DiagnosticEngine &diag, bool &changed) {
  // Fast path (see the header): with target=cpu, no device_copy and every
  // storage already on cpu, every domain is the CPU (every fixed requirement
  // is the CPU, so nothing can conflict) and the pass changes nothing. The
  // union-find over every value is then skipped: it is most of this pass's
  // time on large programs.
  if (target_ == Dev::CPU) {
    bool allCpu = true;
    uint64_t storages = 0;
    for (auto &f : m.functions()) {
      if (isPrimitive(*f)) continue;
      for (auto &b : f->blocks())
        for (Operation &op : *b) {
          if (op.is(OpCode::DeviceCopy)) allCpu = false;
          if (op.is(OpCode::AllocStorage)) {
            allCpu &= op.strAttr("device") == "cpu";
            ++storages;
          }
        }
      if (!allCpu) break;
    }
    if (allCpu) {
      NumCpuStorages += storages;
      return success();
    }
  }
  parent_.clear();
  dev_.clear();
  explicit_.clear();
  anchor_.clear();
  valueNode_.clear();
  resultNode_.clear();
  boundary_.clear();
  soft_.clear();
  for (int x = 0; x < 2; ++x)
    for (int d = 0; d < 2; ++d) {
      req_[x][d] = newNode();
      dev_[req_[x][d]] = static_cast<Dev>(d);
      explicit_[req_[x][d]] = x != 0;
    }

  // Functions another function calls (a function that only calls itself is
  // still an entry point).
  std::unordered_set<std::string> called;
  for (auto &f : m.functions())
    for (auto &b : f->blocks())
      for (Operation &op : *b)
        if (op.is(OpCode::Call) && op.strAttr("callee") != f->name()) called.insert(op.strAttr("callee"));
  for (auto &f : m.functions()) {
    if (isPrimitive(*f) || !f->entry()) continue;
    bool entry = f->name() == "main" || !called.count(f->name());
    if (!collect(m, *f, entry, diag)) return failure();
  }

  propagate();
  if (insertCopies(m)) changed = true;

  for (auto &f : m.functions()) {
    if (isPrimitive(*f)) continue;
    for (auto &b : f->blocks())
      for (Operation &op : *b) {
        if (!op.is(OpCode::AllocStorage)) continue;
        Dev d = dev_[find(node(op.result()))];
        ++(d == Dev::CUDA ? NumCudaStorages : NumCpuStorages);
        if (op.strAttr("device") != devName(d)) {
          op.setAttr("device", Attr::getStr(devName(d)));
          changed = true;
        }
      }
  }
  return success();
}

} // namespace

std::unique_ptr<Pass> createPlaceDevicesPass() { return std::make_unique<PlaceDevicesPass>(); }

} // namespace nimble::passes
