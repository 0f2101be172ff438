//===- AutoBatch.cpp - Many instances of one function, batched (ACROBAT) -===//
//
// VirtualMachine::runInstances: seed 001 (ACROBAT) §4 at run time, on the
// static facts of the auto-batch pass (passes/lowering/AutoBatch.cpp, the .nbc's
// batching section).
//
// Every instance runs as a fiber of the VM: its own register file and call
// stack, executed by the ordinary interpreter loop. A call of a kernel that
// the batching section marks suspends the fiber (execute() returns with the
// call recorded); everything else — control flow, allocation, shape
// functions, kernels that do not batch — runs in the fiber as it would
// alone. When no fiber can go on, the scheduler picks the kernel with the
// most pending calls (ties: the one whose calls are shallowest, i.e. made
// earliest in their instances' order, seed 001 §4.1's depth), runs them as
// one group and resumes those fibers. The granularity is the fused group,
// a static sub-graph (§A.2). A branch on a computed value needs no special
// case: the fiber that computes it is suspended until its batch has run, and
// then reads the value (§4.2).
//
// Program phases (§4.1, appendix A.3): a kernel's phase comes from the .nbc's
// batch-phases section (passes/lowering/BatchPhases.cpp assigns them). Only
// the kernels of the lowest phase with pending calls are candidates, so the
// work after a loop or a recursion (a decoder, an early exit's head) waits
// until no instance can issue earlier-phase work, and then runs in full
// groups instead of in the cohorts in which the instances got there.
// --batch-phases=off ignores them (for measuring).
//
// The window: at most VMOptions::batchWindow instances are in flight (16 by
// default); the next one starts when one finishes, so the groups stay full
// while instances come and go. Level-by-level batching over all instances
// at once makes the frontier as wide as the batch: Tree-LSTM's 64 trees put
// all 1,344 leaves in flight, 5.9 MB of live tensors, registers and fibers
// (the L2 holds 1 or 2 MiB), and every resumption touches a cold one. With
// 16 in flight the launches grow from 158 to 194 a run and the calls per
// launch fall from 49 to 40, the kernels' time stays (within 5%) and the
// VM's work between them halves (docs/perf.md, "The auto-batching window").
// --batch-window=0 admits every instance at once (the schedule the tests of
// the launch counts pin). A program with phases (and --batch-phases=on)
// ignores the window: an instance admitted mid-run would hold every later
// phase's kernels back while it caught up alone.
//
// Instance parallelism (§4.1): the interpreter forks a call that directly
// follows an independent call into a child fiber of the same instance
// (Interpreter.cpp, CASE(Invoke)); the parent joins it at that call. The
// scheduler treats children like any fiber; finish() hands a child's results
// or error to its parent's join, and a failed instance's outstanding
// children are killed (never resumed) with it.
//
// Fibers are cheap to make: the VM keeps every fiber it has made and reuses
// a finished one (reset, with the capacity of its registers, frames and
// operand lists) for the next fork or instance, within a run and across
// runs (newFiber, recycleFiber). So are the scheduler's lists (the ready
// fibers, each kernel's pending calls, a launch's rows, row tables and
// descriptor tensors) and a forked call's result list, which goes from the
// child's return to the parent's join and back to the next step: a run of
// 64 trees made 12,138 heap allocations, 4,450 after (the rest: about
// 1,850 in the native kernels' shape checks in vm/dispatch, tensors and
// storages made in execute(), the instances' results). ACROBAT launches
// its fibers fork-join style from generated C++ (§4.2) and computes depths
// inline in that code (§4.1); here a fork is the interpreter's, one per
// tree node on Tree-LSTM (1,280 a run of 64 trees), and was six heap
// allocations before recycling. What is
// left per node is the interpreter itself and the resumptions: every
// batchable kernel call suspends its fiber and resumes it after its group
// (7,808 a run), and each resumption first touches that fiber's cold
// registers and tensors (perf: cache misses on them dominate execute() and
// rows()). ACROBAT avoids most of that by running a program whose control
// flow depends on no tensor value to its end per instance, lazily, in
// generated code, before any batch is launched (§4.2, "without
// tensor-dependent control flow"). Recording calls in the interpreter
// instead of suspending at them (one resumption per node instead of one per
// call) was measured and did not pay: the references and operand copies
// per recorded call cost more than the resumptions saved (docs/perf.md,
// "The VM's per-node overhead").
//
// A group runs as:
//   - rows: the per-instance inputs of the calls are stacked along axis 0,
//     the kernel's batched variant runs once on the stack with the shared
//     inputs, and its outputs are scattered back into each call's output
//     tensors (which the instance allocated from its own planned arenas).
//     The copies are the explicit gather of DyNet; seed 001 §5.2's
//     gather-fused kernels, which read the rows in place through a table of
//     pointers, are not implemented yet (docs/autobatch.md measures the
//     copies' share).
//   - invariant: every input is shared, so one call computes what every
//     instance's call would; the others receive copies (§A.1's hoisting of
//     instance-invariant work, at run time).
// Before a group runs, the scheduler checks what the static analysis could
// not: the shared inputs of the calls are the same tensor or equal bytes (a
// group whose calls disagree is split into groups that agree), each call's
// per-instance inputs and outputs have one row count on axis 0, and the
// trailing dimensions agree across the group. A call that fails a check, or
// a group whose batched kernel reports an error, runs call by call, so every
// error is reported by the instance that caused it, at its own .nir
// location, and results never depend on the grouping beyond the rounding of
// the implementation that ran.
//
//===----------------------------------------------------------------------===//

#include "vm/interpreter/Interpreter.h"

#include "vm/dispatch/LibraryKernels.h"
#include "vm/io/ValueText.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>

namespace nimble::vm {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// Same tensor, or same dtype, shape and bytes.
bool sameContents(const Tensor *a, const Tensor *b) {
  if (a == b || (a->rawData() == b->rawData() && a->shape() == b->shape() && a->dtype() == b->dtype()))
    return true;
  if (a->dtype() != b->dtype() || a->shape() != b->shape()) return false;
  return a->numBytes() == 0 || std::memcmp(a->rawData(), b->rawData(), a->numBytes()) == 0;
}

/// The dimensions after the first agree. A loop, not std::equal: that is a
/// call of memcmp for a few bytes, 2.3% of a batched Tree-LSTM run's samples
/// (perf, with rows() checking every call's inputs and outputs).
bool sameTrailing(const Tensor *a, const Tensor *b) {
  const auto r = a->rank();
  if (r != b->rank()) return false;
  const int64_t *x = a->shape().data(), *y = b->shape().data();
  for (decltype(a->rank()) d = 1; d < r; ++d)
    if (x[d] != y[d]) return false;
  return true;
}
} // namespace

struct VirtualMachine::Scheduler {
  VirtualMachine &vm;
  const Executable &exe;
  std::vector<Fiber *> fibers; // the instances (forked calls go to `ready` only)
  std::vector<InstanceOutcome> &out;
  std::vector<Fiber *> ready;
  std::vector<std::vector<Fiber *>> pending; // by kernel
  std::vector<uint32_t> active;              // kernels with pending calls
  uint32_t entry;
  /// Some kernel has a program phase other than 0 and --batch-phases=on.
  bool phased = false;
  /// How a gather-fused launch went (NotApplicable: stack instead).
  enum class Gathered { Done, Failed, NotApplicable };
  /// --kernels=auto runs a batched kernel that oneDNN could run on stacked
  /// rows in place (its generated code) when none of its shared inputs has
  /// more elements than this: weights that stay in L2 (1 MiB of f32), which
  /// the generated tiles read where they are, as KernelMatMul.cpp's stage
  /// does below kParallelMatMulWork. Tree-LSTM's three products (450 x
  /// 300, 450 x 150, 150 x 150) are under it, the LSTMs' (2048 x 512, 2048 x
  /// 300) over. Measured on an AMD EPYC (Zen 4; docs/perf.md, "Native
  /// products in place"): in place 0.7-0.9x the time of oneDNN plus the
  /// copies per batch of 64 trees.
  static constexpr int64_t kInPlaceMaxShared = int64_t(1) << 18;
  // Working lists of the rounds and launches, kept with their capacity
  // from round to round: building them anew cost about 9,000 heap
  // allocations per run of 64 trees (docs/perf.md, "The VM's per-node
  // overhead"). Each is filled and used by one function, which nothing
  // re-enters while it does.
  size_t admitted = 0;                  // run(): instances started so far
  std::vector<Fiber *> now_;            // run(): the fibers stepped this pass
  std::vector<Fiber *> calls_;          // run(): the group taken from `pending`
  std::vector<Fiber *> fit_, misfit_;   // rows()
  std::vector<int64_t> rowsOf_;         // rows()
  std::vector<TensorRef> keep_;         // rows(), gathered(): the launch's own tensors
  std::vector<Tensor *> launchIns_, launchOuts_;
  std::vector<const void *> tableData_; // gathered()
  Ref<Storage> none_;                   // gathered(): no memory (descriptor tensors)
  std::vector<int64_t> shapeBuf_;       // gathered(): a stacked shape

  Scheduler(VirtualMachine &vm, std::vector<InstanceOutcome> &out, uint32_t entry)
      : vm(vm), exe(*vm.exe_), out(out), pending(vm.exe_->kernels.size()), entry(entry) {
    if (vm.opts_.phases)
      for (const KernelBatching &b : exe.batching) phased = phased || b.phase != 0;
  }

  /// `f`'s instance failed: its forked calls will never be joined.
  void kill(Fiber &f) {
    for (Fiber::Join &j : f.joins)
      if (j.child && !j.done && !j.child->dead) {
        j.child->dead = true;
        kill(*j.child);
        release(*j.child);
      }
    f.joins.clear();
  }

  static void release(Fiber &f) {
    f.regs.clear(); // the capacity stays for the fiber's reuse (recycleFiber)
    f.frames.clear();
    f.ins.clear();
    f.outs.clear();
  }

  void finish(Fiber &f, Status st, std::vector<ObjectRef> results) {
    if (!st.ok()) kill(f);
    if (Fiber *p = f.parent) {
      // A forked call: its parent takes the results (or the error) at the
      // join; the instance's own result checks are the root's.
      for (auto it = p->joins.rbegin(); it != p->joins.rend(); ++it)
        if (it->child == &f) {
          it->done = true;
          it->status = std::move(st);
          it->results = std::move(results);
          it->child = nullptr;
          break;
        }
      release(f);
      f.dead = true;
      if (p->waiting && !p->dead) {
        p->waiting = false;
        ready.push_back(p);
      }
      recycle(f);
      return;
    }
    const VMFunction &fn = exe.functions[entry];
    if (st.ok() && results.size() != fn.resultTypes.size())
      st = Status::error("error: @" + fn.name + " returned " + std::to_string(results.size()) +
                         " values, its signature declares " + std::to_string(fn.resultTypes.size()));
    for (size_t i = 0; st.ok() && i < results.size(); ++i) {
      std::string err;
      if (!checkValue(exe, fn.resultTypes[i], results[i].get(), "result " + std::to_string(i) + " of @" + fn.name, err))
        st = Status::error("error: " + err);
    }
    if (!st.ok()) results.clear();
    out[f.index].status = std::move(st);
    out[f.index].results = std::move(results);
    release(f);
    f.dead = true;
    recycle(f);
    // The window: an instance finished, the next one starts.
    if (admitted < fibers.size()) ready.push_back(fibers[admitted++]);
  }

  /// A finished fiber is referenced from nowhere any more: the parent's join
  /// let go of it, it was in no list but the one being walked (a fiber is
  /// in at most one of `ready`, `pending` and a group's calls), and its
  /// outstanding children (killed when it failed) never read their
  /// `parent`. It is reused by the next fork. Killed fibers are not: they
  /// may still sit in a list, and wait for the end of the run.
  void recycle(Fiber &f) { vm.recycleFiber(f); }

  /// Runs fiber `f` until it suspends, returns or fails.
  void step(Fiber &f) {
    if (f.dead) return;
    vm.cur_ = &f;
    f.suspended = false;
    f.waiting = false;
    std::vector<ObjectRef> results;
    if (!vm.spareResults_.empty()) {
      results = std::move(vm.spareResults_.back()); // empty, with capacity
      vm.spareResults_.pop_back();
    }
    uint32_t func = 0, pc = 0;
    Status st;
    try {
      st = vm.execute(results, func, pc);
    } catch (const std::bad_alloc &) {
      results.clear();
      f.regs.clear();
      f.regs.shrink_to_fit();
      st = vm.errorAt(func, pc, "out of memory");
    }
    vm.cur_ = &vm.main_;
    // Calls this step forked run as fibers of their own.
    for (Fiber *c : vm.spawned_) ready.push_back(c);
    vm.spawned_.clear();
    if (st.ok() && (f.suspended || f.waiting)) {
      // The unused result list keeps its capacity for the next step.
      if (vm.spareResults_.size() < vm.spareResults_.capacity()) vm.spareResults_.push_back(std::move(results));
      if (f.waiting) return; // resumed when its child finishes
      std::vector<Fiber *> &q = pending[f.kernel];
      if (q.empty()) active.push_back(f.kernel);
      q.push_back(&f);
      return;
    }
    finish(f, std::move(st), std::move(results));
  }

  /// Runs `f`'s pending call on its own; true when it succeeded (the fiber
  /// is then ready), else the fiber has failed.
  bool single(Fiber &f) {
    // A call of a group whose earlier call failed may belong to the same
    // instance (a forked child): that instance is finished, the call is
    // not made.
    if (f.dead) return false;
    vm.cur_ = &f;
    Status st;
    try {
      st = vm.callKernel(f.kernel, f.ins, f.outs, f.frames.back().func, f.callPc);
    } catch (const std::bad_alloc &) {
      st = vm.errorAt(f.frames.back().func, f.callPc, "out of memory");
    }
    vm.cur_ = &vm.main_;
    if (!st.ok()) {
      finish(f, std::move(st), {});
      return false;
    }
    ready.push_back(&f);
    return true;
  }

  void singles(const std::vector<Fiber *> &calls, uint64_t &counter) {
    for (Fiber *f : calls) {
      ++counter;
      single(*f);
    }
  }

  /// An invariant group: one call, copies for the rest.
  void invariant(const std::vector<Fiber *> &calls) {
    Fiber &lead = *calls[0];
    if (!single(lead)) return singles({calls.begin() + 1, calls.end()}, vm.profile_.batch.fallbackCalls);
    ++vm.profile_.batch.invariantLaunches;
    ++vm.profile_.batch.invariantCalls;
    auto t0 = Clock::now();
    std::vector<Fiber *> rest;
    for (size_t c = 1; c < calls.size(); ++c) {
      Fiber &f = *calls[c];
      bool same = f.outs.size() == lead.outs.size();
      for (size_t i = 0; same && i < f.ins.size(); ++i) same = sameContents(f.ins[i], lead.ins[i]);
      for (size_t o = 0; same && o < f.outs.size(); ++o)
        same = f.outs[o]->dtype() == lead.outs[o]->dtype() && f.outs[o]->shape() == lead.outs[o]->shape();
      if (!same) {
        rest.push_back(&f);
        continue;
      }
      for (size_t o = 0; o < f.outs.size(); ++o)
        if (f.outs[o] != lead.outs[o] && f.outs[o]->numBytes())
          std::memmove(f.outs[o]->rawData(), lead.outs[o]->rawData(), f.outs[o]->numBytes());
      ++vm.profile_.batch.invariantCalls;
      ready.push_back(&f);
    }
    vm.profile_.batch.gatherSeconds += since(t0);
    singles(rest, vm.profile_.batch.fallbackCalls);
  }

  /// A rows group whose shared inputs agree (checked by the caller).
  void rows(uint32_t k, const std::vector<Fiber *> &calls) {
    const KernelBatching &b = exe.batching[k];
    const Fiber &lead = *calls[0];
    auto tc = Clock::now();
    // Per call: its row count; calls that do not fit the layout run alone.
    std::vector<Fiber *> &fit = fit_, &misfit = misfit_;
    std::vector<int64_t> &rowsOf = rowsOf_;
    fit.clear();
    misfit.clear();
    rowsOf.clear();
    int64_t total = 0;
    for (Fiber *f : calls) {
      int64_t n = -1;
      bool ok = f->ins.size() == b.shared.size() && f->outs.size() == lead.outs.size();
      for (size_t i = 0; ok && i < f->ins.size(); ++i) {
        if (b.shared[i]) continue;
        const Tensor *t = f->ins[i];
        ok = t->rank() >= 1 && (n < 0 || t->dim(0) == n) && sameTrailing(t, lead.ins[i]) &&
             t->dtype() == lead.ins[i]->dtype();
        if (ok) n = t->dim(0);
      }
      for (size_t o = 0; ok && o < f->outs.size(); ++o) {
        const Tensor *t = f->outs[o];
        ok = t->rank() >= 1 && t->dim(0) == n && sameTrailing(t, lead.outs[o]) && t->dtype() == lead.outs[o]->dtype();
      }
      if (ok && n >= 0) {
        fit.push_back(f);
        rowsOf.push_back(n);
        total += n;
      } else {
        misfit.push_back(f);
      }
    }
    vm.profile_.batch.scheduleSeconds += since(tc);
    singles(misfit, vm.profile_.batch.fallbackCalls);
    if (!misfit.empty()) {
      // A misfit that failed killed its instance's forked calls, which may
      // be among `fit`: released, their operands are gone.
      size_t w = 0;
      total = 0;
      for (size_t c = 0; c < fit.size(); ++c)
        if (!fit[c]->dead) {
          total += rowsOf[c];
          fit[w] = fit[c];
          rowsOf[w++] = rowsOf[c];
        }
      fit.resize(w);
      rowsOf.resize(w);
    }
    if (fit.size() < 2) return singles(fit, vm.profile_.batch.singleCalls);

    // Gather fusion, or stacked copies; under --gather-fusion=auto the
    // stacked form's first launch is a warm-up (it may create a oneDNN
    // primitive), then kProbes launches of each form are timed, and the
    // form with less time per row serves the kernel's later launches.
    constexpr unsigned kProbes = 2;
    bool fusable = gatherFn(b.batched) != nullptr || referenceInPlace(b.batched);
    bool fused = false;
    VirtualMachine::GatherChoice *choice = nullptr;
    if (fusable) {
      switch (vm.opts_.gather) {
      case VMOptions::GatherFusion::On: fused = true; break;
      case VMOptions::GatherFusion::Off: break;
      case VMOptions::GatherFusion::Auto:
        choice = &vm.gatherChoice_[b.batched];
        if (choice->state == VirtualMachine::GatherChoice::Probing && !libraryMayRun(b.batched)) {
          // Stacked, the batched kernel would run the same native code on
          // copies of the rows: in place wins without a measurement.
          choice->state = VirtualMachine::GatherChoice::Fused;
          ++vm.profile_.batch.chosenFused;
        } else if (choice->state == VirtualMachine::GatherChoice::Probing &&
                   vm.opts_.kernels == KernelMode::Auto) {
          // --kernels=auto decides without a clock (vm/dispatch/Dispatch.h):
          // a measurement here picked the form, and with it oneDNN or native
          // code, differently from process to process (issue 52). Shared
          // inputs (the weights) of at most kInPlaceMaxShared elements each:
          // the generated kernel in place, as one row at a time runs it,
          // so a batched call gives its instances' one-row bits; larger
          // ones: oneDNN on stacked rows (a shared constant weight over 2 or
          // more rows is what the dispatcher's rule sends to oneDNN).
          bool small = gatherFn(b.batched) != nullptr;
          for (size_t i = 0; small && i < lead.ins.size() && i < b.shared.size(); ++i)
            small = !b.shared[i] || lead.ins[i]->numElements() <= kInPlaceMaxShared;
          choice->state = small ? VirtualMachine::GatherChoice::Fused : VirtualMachine::GatherChoice::Stacked;
          ++(small ? vm.profile_.batch.chosenFused : vm.profile_.batch.chosenStacked);
        }
        // Stacked first: its one-time costs (oneDNN primitives, the
        // dispatcher's tuning) come before the in-place form's none.
        if (choice->state == VirtualMachine::GatherChoice::Probing)
          fused = choice->probes[1] > choice->probes[0];
        else
          fused = choice->state == VirtualMachine::GatherChoice::Fused;
        break;
      }
    }
    // A probe that paid a one-time cost (a oneDNN primitive created, the
    // dispatcher tuning a new shape) is not counted.
    auto oneTime = [&] {
      return (vm.opts_.library ? vm.opts_.library->primitivesCreated() : 0) +
             (vm.opts_.tuning ? vm.opts_.tuning : &vm.ownTuning_)->measured();
    };
    uint64_t oneTime0 = choice ? oneTime() : 0;
    auto tl = Clock::now();
    auto probed = [&](int form) {
      if (!choice || choice->state != VirtualMachine::GatherChoice::Probing) return;
      double sec = since(tl);
      if (oneTime() != oneTime0) return;
      if (choice->probes[form]++ > 0 || form == 0) {
        choice->seconds[form] += sec;
        choice->rows[form] += static_cast<double>(total);
      }
      if (choice->probes[0] >= kProbes && choice->probes[1] > kProbes) {
        bool f = choice->seconds[0] / std::max(1.0, choice->rows[0]) <=
                 choice->seconds[1] / std::max(1.0, choice->rows[1]);
        choice->state = f ? VirtualMachine::GatherChoice::Fused : VirtualMachine::GatherChoice::Stacked;
        ++(f ? vm.profile_.batch.chosenFused : vm.profile_.batch.chosenStacked);
      }
    };
    if (fused) {
      switch (gatherFn(b.batched) ? gathered(b.batched, b, fit, total) : gatheredReference(b.batched, fit)) {
      case Gathered::Done:
        probed(0);
        for (Fiber *f : fit) ready.push_back(f);
        return;
      case Gathered::Failed: return singles(fit, vm.profile_.batch.fallbackCalls);
      case Gathered::NotApplicable: break;
      }
    }

    // Stack the per-instance inputs; make the stacked outputs.
    auto tg = Clock::now();
    const Fiber &first = *fit[0];
    std::vector<TensorRef> &keep = keep_;
    std::vector<Tensor *> &ins = launchIns_, &outs = launchOuts_;
    keep.clear();
    ins.clear();
    outs.clear();
    auto stacked = [&](const Tensor *like) -> Tensor * {
      std::vector<int64_t> shape = like->shape();
      shape[0] = total;
      TensorRef t = makeTensor(like->dtype(), shape);
      if (!t) return nullptr;
      keep.push_back(t);
      return t.get();
    };
    bool ok = true;
    for (size_t i = 0; ok && i < first.ins.size(); ++i) {
      if (b.shared[i]) {
        ins.push_back(first.ins[i]);
        continue;
      }
      Tensor *s = stacked(first.ins[i]);
      if (!(ok = s != nullptr)) break;
      uint8_t *dst = static_cast<uint8_t *>(s->rawData());
      for (Fiber *f : fit) {
        size_t bytes = f->ins[i]->numBytes();
        if (bytes) std::memcpy(dst, f->ins[i]->rawData(), bytes);
        dst += bytes;
      }
      ins.push_back(s);
    }
    for (size_t o = 0; ok && o < first.outs.size(); ++o) {
      Tensor *s = stacked(first.outs[o]);
      if (!(ok = s != nullptr)) break;
      outs.push_back(s);
    }
    vm.profile_.batch.gatherSeconds += since(tg);
    Status st;
    if (ok) {
      // Located at the first call; on failure every call re-runs alone and
      // reports its own error.
      vm.cur_ = fit[0];
      st = vm.callKernel(b.batched, ins, outs, fit[0]->frames.back().func, fit[0]->callPc);
      vm.cur_ = &vm.main_;
    }
    // Out of memory for the stacked copies (the scheduler's own memory, as
    // its lists are) ends the run with that error (runInstances). Running
    // the calls alone instead would survive it with other last bits: a
    // product of one row goes to another implementation than the stacked
    // one (--kernels=auto's rule, vm/dispatch/Dispatch.h), and
    // test/models/fail-alloc.test saw "exit 0 with a different output".
    if (!ok) throw std::bad_alloc();
    if (!st.ok()) return singles(fit, vm.profile_.batch.fallbackCalls);
    ++vm.profile_.batch.rowLaunches;
    vm.profile_.batch.rowCalls += fit.size();
    auto ts = Clock::now();
    for (size_t o = 0; o < outs.size(); ++o) {
      const uint8_t *src = static_cast<const uint8_t *>(outs[o]->rawData());
      for (Fiber *f : fit) {
        size_t bytes = f->outs[o]->numBytes();
        if (bytes) std::memcpy(f->outs[o]->rawData(), src, bytes);
        src += bytes;
      }
    }
    vm.profile_.batch.gatherSeconds += since(ts);
    keep.clear(); // the stacked copies go back to the pool now
    if (fusable) probed(1);
    for (Fiber *f : fit) ready.push_back(f);
  }

  /// Whether batched kernel `kb` runs as its reference kernel (no native
  /// code for it, oneDNN not allowed or unable to run it).
  bool referenceInPlace(uint32_t kb) const {
    if (vm.opts_.gather == VMOptions::GatherFusion::Off || vm.opts_.device) return false;
    if (vm.opts_.kernels == KernelMode::Reference) return true;
    if (vm.opts_.kernels == KernelMode::Library) return false;
    return !(vm.opts_.native && vm.opts_.native->get(kb)) && !libraryMayRun(kb);
  }

  /// Gather fusion on the reference path: the batched variant's reference
  /// kernel runs on each call's own rows, where the instance keeps them (the
  /// reference kernels are loops over one dense tensor each: a launch over a
  /// row table would run the same loops, row by row). Shared inputs are read
  /// in place too. Failed: a call's kernel reported an error (every call then
  /// runs alone and words it).
  Gathered gatheredReference(uint32_t kb, const std::vector<Fiber *> &fit) {
    for (Fiber *f : fit) {
      vm.cur_ = f;
      Status st = vm.callKernel(kb, f->ins, f->outs, f->frames.back().func, f->callPc);
      vm.cur_ = &vm.main_;
      if (!st.ok()) return Gathered::Failed;
    }
    return fusedLaunch(fit.size());
  }

  /// Whether the dispatcher may run batched kernel `kb` through oneDNN.
  bool libraryMayRun(uint32_t kb) const {
    return vm.opts_.library && (vm.opts_.kernels == KernelMode::Auto || vm.opts_.kernels == KernelMode::Tune) &&
           vm.opts_.library->supports(kb);
  }

  nimble_kernel_fn gatherFn(uint32_t kb) const {
    if (!vm.opts_.native || vm.opts_.gather == VMOptions::GatherFusion::Off) return nullptr;
    if (vm.opts_.kernels != KernelMode::Auto && vm.opts_.kernels != KernelMode::Tune &&
        vm.opts_.kernels != KernelMode::Native)
      return nullptr;
    return vm.opts_.native->getGathered(kb);
  }

  /// Runs batched kernel `kb` on the calls' rows in place (seed 001 §5.2):
  /// a row table per per-instance input and per output, pointing into each
  /// call's own tensors, and the gather-fused entry. Failed: the kernel
  /// reported an error (the calls then run alone and word it).
  Gathered gathered(uint32_t kb, const KernelBatching &b, const std::vector<Fiber *> &fit, int64_t total) {
    const KernelDesc &k = exe.kernels[kb];
    const Fiber &first = *fit[0];
    if (first.ins.size() != k.numInputs || first.outs.size() != k.outputs.size()) return Gathered::NotApplicable;
    auto tt = Clock::now();
    // Tensors with the stacked shapes and no memory: the shape functions
    // and the descriptors read their shapes only.
    if (!none_) none_ = Ref<Storage>(new Storage(nullptr, nullptr, 0, Device::CPU));
    std::vector<TensorRef> &keep = keep_;
    std::vector<Tensor *> &ins = launchIns_, &outs = launchOuts_;
    keep.clear();
    ins.clear();
    outs.clear();
    size_t nb = k.numInputs + k.outputs.size();
    if (vm.gatherTables_.size() < nb) vm.gatherTables_.resize(nb);
    std::vector<const void *> &data = tableData_;
    data.assign(nb, nullptr);
    auto table = [&](size_t slot, const Tensor *like, auto tensorOf) -> Tensor * {
      // From the tensors' free list: its shape buffer is reused too.
      shapeBuf_.assign(like->shape().begin(), like->shape().end());
      shapeBuf_[0] = total;
      TensorRef t(Tensor::make(like->dtype(), shapeBuf_.data(), shapeBuf_.size(), none_, 0));
      keep.push_back(t);
      std::vector<const void *> &rows = vm.gatherTables_[slot];
      rows.clear();
      rows.reserve(static_cast<size_t>(total));
      for (Fiber *f : fit) {
        const Tensor *x = tensorOf(*f);
        int64_t n = x->dim(0);
        size_t rowBytes = n > 0 ? x->numBytes() / static_cast<size_t>(n) : 0;
        const uint8_t *p = x->rawData();
        for (int64_t r = 0; r < n; ++r) rows.push_back(p + static_cast<size_t>(r) * rowBytes);
      }
      data[slot] = rows.data();
      return t.get();
    };
    for (size_t i = 0; i < k.numInputs; ++i) {
      if (b.shared[i]) {
        ins.push_back(first.ins[i]);
        continue;
      }
      ins.push_back(table(i, first.ins[i], [i](const Fiber &f) { return f.ins[i]; }));
    }
    for (size_t o = 0; o < k.outputs.size(); ++o)
      outs.push_back(table(k.numInputs + o, first.outs[o], [o](const Fiber &f) { return f.outs[o]; }));
    vm.profile_.batch.tableSeconds += since(tt);
    if (vm.gatherMemos_.size() < exe.kernels.size()) vm.gatherMemos_.resize(exe.kernels.size());
    auto &memos = vm.gatherMemos_[kb];
    // Past kGatherMemos row counts, one memo (key -1) serves the others.
    auto slot = memos.find(total);
    if (slot == memos.end()) slot = memos.emplace(memos.size() < kGatherMemos ? total : -1, nullptr).first;
    if (!slot->second) slot->second = std::make_unique<NativeCallMemo>();
    auto t0 = Clock::now();
    bool rerun = false;
    size_t failed = SIZE_MAX;
    Status st = runNativeKernel(k, gatherFn(kb), ins, outs, vm.kctx_, &failed, &rerun,
                                slot->second.get(), &data, vm.opts_.native->signature(kb));
    if (vm.opts_.profile)
      vm.profileKernelCall(kb, KernelImpl::Native, since(t0), "(gathered " + std::to_string(total) + " rows)");
    keep.clear();
    if (!st.ok() || rerun) return Gathered::Failed;
    return fusedLaunch(fit.size());
  }

  Gathered fusedLaunch(size_t calls) {
    BatchProfile &bp = vm.profile_.batch;
    ++bp.rowLaunches;
    bp.rowCalls += calls;
    ++bp.fusedLaunches;
    bp.fusedCalls += calls;
    return Gathered::Done;
  }

  /// Runs the pending calls of kernel `k`.
  void group(uint32_t k, std::vector<Fiber *> &calls) {
    BatchProfile &bp = vm.profile_.batch;
    calls.erase(std::remove_if(calls.begin(), calls.end(), [](Fiber *f) { return f->dead; }), calls.end());
    if (calls.empty()) return;
    bp.maxGroup = std::max<uint64_t>(bp.maxGroup, calls.size());
    for (Fiber *f : calls) ++f->depth;
    if (calls.size() == 1) return singles(calls, bp.singleCalls);
    const KernelBatching &b = exe.batching[k];
    if (b.mode == KernelBatching::Mode::Invariant) return invariant(calls);
    // Split by the shared inputs' contents (the same weights: one group).
    // Usually every call agrees with the first (the same constants), and
    // the calls are the one part, in order, without copying the list.
    auto tc = Clock::now();
    auto agrees = [&](const Fiber &f, const Fiber &lead) {
      bool same = f.ins.size() == lead.ins.size();
      for (size_t i = 0; same && i < f.ins.size(); ++i)
        if (i < b.shared.size() && b.shared[i]) same = sameContents(f.ins[i], lead.ins[i]);
      return same;
    };
    bool one = true;
    for (size_t c = 1; one && c < calls.size(); ++c) one = agrees(*calls[c], *calls[0]);
    if (one) {
      bp.scheduleSeconds += since(tc);
      return rows(k, calls);
    }
    std::vector<std::vector<Fiber *>> parts;
    for (Fiber *f : calls) {
      bool placed = false;
      for (auto &p : parts) {
        const Fiber &lead = *p[0];
        bool same = f->ins.size() == lead.ins.size();
        for (size_t i = 0; same && i < f->ins.size(); ++i)
          if (i < b.shared.size() && b.shared[i]) same = sameContents(f->ins[i], lead.ins[i]);
        if (same) {
          p.push_back(f);
          placed = true;
          break;
        }
      }
      if (!placed) parts.push_back({f});
    }
    bp.scheduleSeconds += since(tc);
    for (auto &p : parts) {
      if (p.size() == 1) singles(p, parts.size() == 1 ? bp.singleCalls : bp.fallbackCalls);
      else rows(k, p);
    }
  }

  void run() {
    // No window with program phases: an instance admitted mid-run would
    // hold every later phase back while it caught up alone (tree2seq, 64
    // instances: 142 launches at once, 878 with a window of 16).
    const size_t window = vm.opts_.batchWindow && !phased ? std::min<size_t>(vm.opts_.batchWindow, fibers.size())
                                                          : fibers.size();
    for (admitted = 0; admitted < window; ++admitted) ready.push_back(fibers[admitted]);
    vm.profile_.batch.inFlight = std::max<uint64_t>(vm.profile_.batch.inFlight, window);
    if (window < fibers.size()) ++vm.profile_.batch.windowedRuns;
    while (true) {
      // Every fiber that can go on does, forked children included, before
      // a group is chosen: otherwise a fork tree unfolds one level per
      // round and the leaves of a deep tree are launched in many groups.
      while (!ready.empty()) {
        now_.clear();
        now_.swap(ready); // `ready` takes the emptied list and its capacity
        for (Fiber *f : now_) step(*f);
      }
      if (active.empty()) break;
      // The kernel with the most pending calls; ties: the shallowest.
      // With program phases, only kernels of the lowest phase pending are
      // candidates (seed 001 §4.1: a phase waits until every instance has
      // left the earlier ones).
      auto tc = Clock::now();
      auto minDepth = [&](uint32_t k) {
        uint64_t d = UINT64_MAX;
        for (Fiber *f : pending[k]) d = std::min(d, f->depth);
        return d;
      };
      uint32_t phase = 0;
      if (phased) {
        phase = UINT32_MAX;
        uint32_t highest = 0;
        for (uint32_t k : active) {
          phase = std::min(phase, exe.batching[k].phase);
          highest = std::max(highest, exe.batching[k].phase);
        }
        if (highest != phase) ++vm.profile_.batch.phaseWaits;
      }
      size_t best = active.size();
      for (size_t i = 0; i < active.size(); ++i) {
        if (phased && exe.batching[active[i]].phase != phase) continue;
        if (best == active.size()) {
          best = i;
          continue;
        }
        size_t a = pending[active[i]].size(), bsz = pending[active[best]].size();
        if (a > bsz || (a == bsz && minDepth(active[i]) < minDepth(active[best]))) best = i;
      }
      uint32_t k = active[best];
      active.erase(active.begin() + static_cast<std::ptrdiff_t>(best));
      // `pending[k]` takes the emptied list of the last round and its
      // capacity; group() runs kernels and readies fibers, but steps none,
      // so nothing is added to `pending` meanwhile.
      calls_.clear();
      calls_.swap(pending[k]);
      ++vm.profile_.batch.rounds;
      vm.profile_.batch.suspensions += calls_.size();
      vm.profile_.batch.scheduleSeconds += since(tc);
      group(k, calls_);
    }
  }
};

VirtualMachine::Fiber *VirtualMachine::newFiber() {
  if (fiberFree_.empty()) {
    // Room in the free list first: recycling must not allocate. Doubling:
    // a run forks a fiber per tree node.
    size_t room = std::max<size_t>(64, 2 * fiberStore_.size());
    if (fiberFree_.capacity() <= fiberStore_.size()) fiberFree_.reserve(room);
    if (fiberStore_.capacity() <= fiberStore_.size()) fiberStore_.reserve(room);
    if (spareResults_.capacity() < room) spareResults_.reserve(room);
    fiberStore_.push_back(std::make_unique<Fiber>());
    return fiberStore_.back().get();
  }
  Fiber *f = fiberFree_.back();
  fiberFree_.pop_back();
  return f;
}

void VirtualMachine::recycleFiber(Fiber &f) {
  f.regs.clear();
  f.frames.clear();
  f.resumePc = 0;
  f.suspended = false;
  f.kernel = f.callPc = 0;
  f.ins.clear();
  f.outs.clear();
  f.depth = 0;
  f.index = 0;
  f.joins.clear();
  f.parent = nullptr;
  f.depthBase = 0;
  f.waiting = false;
  f.dead = false;
  fiberFree_.push_back(&f);
}

void VirtualMachine::recycleAllFibers() {
  fiberFree_.clear();
  for (auto &f : fiberStore_) recycleFiber(*f);
}

Status VirtualMachine::runInstances(const std::string &name, std::vector<std::vector<ObjectRef>> instances,
                                    std::vector<InstanceOutcome> &out, bool autoBatch) {
  int f = exe_->findFunction(name);
  if (f < 0) return Status::error("no function @" + name + " in the executable");
  out.assign(instances.size(), InstanceOutcome{});
  profile_.batch.instances += instances.size();
  // The scheduler stacks and scatters rows in host memory: a program with a
  // device part runs its instances one after another (docs/autobatch.md).
  if (!autoBatch || opts_.device) {
    for (size_t i = 0; i < instances.size(); ++i)
      out[i].status = run(name, std::move(instances[i]), out[i].results);
    return Status::success();
  }
  const VMFunction &fn = exe_->functions[static_cast<size_t>(f)];
  auto t0 = Clock::now();
  Scheduler s(*this, out, static_cast<uint32_t>(f));
  s.fibers.reserve(instances.size());
  for (size_t i = 0; i < instances.size(); ++i) {
    if (instances[i].size() != fn.paramTypes.size()) {
      out[i].status = Status::error("@" + name + " takes " + std::to_string(fn.paramTypes.size()) +
                                    " arguments, got " + std::to_string(instances[i].size()));
      continue;
    }
    Fiber *fb = newFiber();
    fb->index = i;
    fb->regs.assign(fn.numRegisters, ObjectRef());
    for (size_t a = 0; a < instances[i].size(); ++a) fb->regs[a] = std::move(instances[i][a]);
    fb->frames.assign(1, Frame{static_cast<uint32_t>(f), 0, 0});
    s.fibers.push_back(fb);
  }
  // --max-instructions bounds each instance: the batch gets n times it.
  uint64_t n = std::max<uint64_t>(1, s.fibers.size());
  instructionLimit_ = opts_.maxInstructions && opts_.maxInstructions <= UINT64_MAX / n
                          ? profile_.instructions + opts_.maxInstructions * n
                          : UINT64_MAX;
  batching_ = !exe_->batching.empty();
  if (gatherChoice_.size() < exe_->kernels.size()) gatherChoice_.resize(exe_->kernels.size());
  try {
    s.run();
  } catch (...) {
    // Out of memory outside any one instance (the scheduler's own lists):
    // the run ends with that error; the VM is left as run() would leave it.
    batching_ = false;
    spawned_.clear();
    cur_ = &main_;
    recycleAllFibers();
    throw;
  }
  batching_ = false;
  spawned_.clear();
  cur_ = &main_;
  recycleAllFibers();
  profile_.totalSeconds += since(t0);
  return Status::success();
}

} // namespace nimble::vm
