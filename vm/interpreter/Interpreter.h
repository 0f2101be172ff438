//===- Interpreter.h - The Nimble virtual machine ------------------*- C++ -*-===//
//
// A register VM (Nimble paper §4): each call gets a frame of virtual
// registers holding reference-counted objects; instructions are CISC (a
// kernel call, an allocation, a whole match) so that dispatch overhead stays
// small next to kernel time. Frames live on an explicit stack, never the C++
// stack, so deep recursion in the model cannot overflow the process: past
// `maxCallDepth` frames the run stops with an error at the call's .nir
// location.
//
// The executable must have passed vm::verify (deserialize does it); the
// interpreter still checks what only the run can know — register contents,
// shapes against every kernel's shape function (the run-time half of gradual
// typing), storage bounds, tags — and reports each as an error carrying the
// op's .nir source location. Nothing a model does crashes the VM.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_INTERPRETER_H
#define NIMBLE_VM_INTERPRETER_H

#include "vm/support/Allocator.h"
#include "vm/dispatch/Dispatch.h"
#include "vm/format/Executable.h"
#include "vm/Kernel.h"
#include "vm/dispatch/NativeKernels.h"
#include "vm/Object.h"

#include <array>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace nimble::vm {

class ThreadPool;
class NativeKernels;
class LibraryKernels;
namespace cuda {
class DeviceRuntime;
}

struct VMOptions {
  /// Native kernels mapped from the executable (vm/dispatch/NativeKernels.h), or null:
  /// every kernel runs its reference implementation (--kernels=reference).
  const NativeKernels *native = nullptr;
  /// oneDNN's dense kernels (vm/dispatch/LibraryKernels.h), or null.
  LibraryKernels *library = nullptr;
  /// Which implementation runs each kernel (vm/dispatch/Dispatch.h).
  KernelMode kernels = KernelMode::Auto;
  /// Decisions of KernelMode::Tune, read and extended, and stored ones
  /// that Auto obeys (null: kept per VM).
  TuningTable *tuning = nullptr;
  uint32_t maxCallDepth = 10000;
  /// Stop a run with an error after this many instructions (0: no limit): a
  /// guard against a program that never ends.
  uint64_t maxInstructions = 0;
  unsigned threads = 1;
  /// The CUDA device the program's device part runs on (vm/cuda/CudaRuntime.h),
  /// or null. With it, storages placed on `cuda` live on the device, kernels
  /// with device code run there, and run() returns host values.
  cuda::DeviceRuntime *device = nullptr;
  /// Without a device: storages placed on `cuda` live in host memory and
  /// every kernel runs on the host (nimble-run --kernels=reference on a
  /// program compiled for cuda: the device code is never loaded).
  bool hostDevices = false;
  bool profile = false;
  /// Auto-batching of `rows` kernels whose batched variant has a
  /// gather-fused native entry (docs/autobatch.md): Auto measures both forms
  /// on a kernel's first launches and keeps the faster, On always reads and
  /// writes the rows in place through row tables, Off always stacks copies.
  enum class GatherFusion : uint8_t { Auto, On, Off };
  GatherFusion gather = GatherFusion::Auto;
  /// Auto-batching: honour the kernels' program phases (the .nbc's
  /// batch-phases section, seed 001 §4.1); false schedules as if every
  /// kernel had phase 0 (--batch-phases=off, for measuring).
  bool phases = true;
  /// Auto-batching: at most this many instances in flight (0: all of them);
  /// the next instance starts when one finishes (docs/autobatch.md, "The
  /// window").
  uint32_t batchWindow = 16;
  /// Print each instruction as it executes (to `traceStream`).
  bool trace = false;
  std::ostream *traceStream = nullptr;
};

/// Per-kernel statistics of --profile (paper Table 4: kernel time versus the
/// rest of the VM's time).
struct KernelProfile {
  uint64_t calls = 0;
  uint64_t implCalls[kNumKernelImpls] = {}; // of `calls`, by KernelImpl
  double seconds = 0;
  struct ShapeStats {
    uint64_t calls = 0;
    uint64_t implCalls[kNumKernelImpls] = {};
  };
  std::map<std::string, ShapeStats> shapes; // "(1x300xf32, 300x2048xf32)" -> calls
};
/// What the auto-batching scheduler did (VirtualMachine::runInstances).
struct BatchProfile {
  uint64_t instances = 0;
  uint64_t suspensions = 0;     // kernel calls of instances that went through the scheduler
  uint64_t rowLaunches = 0;     // batched-variant runs (each serves >= 2 calls)
  uint64_t rowCalls = 0;        // calls they served
  uint64_t invariantLaunches = 0, invariantCalls = 0; // one call computed, the others copied
  uint64_t singleCalls = 0;     // calls run on their own (alone in their group)
  uint64_t fallbackCalls = 0;   // calls of a group a run-time check split (rows differ, shared inputs differ)
  uint64_t rounds = 0;          // scheduling rounds (groups chosen)
  uint64_t maxGroup = 0;
  uint64_t forks = 0;           // calls run concurrently in a child fiber (instance parallelism)
  double scheduleSeconds = 0;   // grouping and checks
  double gatherSeconds = 0;     // stacking per-instance rows and scattering results
  // Gather fusion: rows launches whose batched kernel read and wrote the
  // rows in place through row tables (of rowLaunches / rowCalls).
  uint64_t fusedLaunches = 0, fusedCalls = 0;
  double tableSeconds = 0;      // building the row tables
  // --gather-fusion=auto: batched kernels decided for row tables / copies.
  uint64_t chosenFused = 0, chosenStacked = 0;
  // Program phases: rounds in which a kernel of a later phase had pending
  // calls and waited (seed 001 §4.1).
  uint64_t phaseWaits = 0;
  // The window (VMOptions::batchWindow): the most instances in flight at
  // once in a run, and the runs it held instances back in.
  uint64_t inFlight = 0, windowedRuns = 0;
};
struct Profile {
  std::vector<KernelProfile> kernels; // by kernel index
  double shapeFuncSeconds = 0;
  uint64_t shapeFuncCalls = 0;
  double totalSeconds = 0;
  uint64_t instructions = 0;
  // Tensors copied by the VM itself (device_copy, on the host or to and
  // from a device), counted on every run like `instructions`: a loop whose
  // carried values need no copy shows 0 (docs/nimble-run.md, "Profile
  // output"). Copies a kernel makes inside itself are kernel time.
  uint64_t copies = 0;
  uint64_t copiedBytes = 0;
  BatchProfile batch;
};

/// One instance's outcome in VirtualMachine::runInstances.
struct InstanceOutcome {
  std::vector<ObjectRef> results;
  Status status;
};

class VirtualMachine {
public:
  VirtualMachine(std::shared_ptr<const Executable> exe, VMOptions opts = {});
  ~VirtualMachine();

  /// Runs function `name` on `args`. On failure returns the error message,
  /// prefixed with the failing op's source location where known.
  Status run(const std::string &name, std::vector<ObjectRef> args, std::vector<ObjectRef> &results);

  /// Runs function `name` once per element of `instances` (each that
  /// instance's arguments). With `autoBatch`, the instances run as fibers of
  /// the VM and their kernel calls are grouped and run as batched kernels
  /// (vm/interpreter/AutoBatch.cpp, docs/autobatch.md); without, one after another (the
  /// oracle). A failing instance gets its own status; the others go on.
  /// The result is an error only for what concerns every instance (no such
  /// function).
  Status runInstances(const std::string &name, std::vector<std::vector<ObjectRef>> instances,
                      std::vector<InstanceOutcome> &out, bool autoBatch);

  const Profile &profile() const { return profile_; }
  void resetProfile();
  const Executable &executable() const { return *exe_; }
  const VMOptions &options() const { return opts_; }

private:
  struct Frame {
    uint32_t func;
    size_t base;     // first register in the fiber's regs
    uint32_t callPc; // pc of the caller's Invoke (unused for frame 0)
  };
  /// An execution of one function call to its end: the register file, the
  /// call stack and where to go on. run() uses one; runInstances() one per
  /// instance, and switches between them at kernel calls (seed 001 §4.2: the
  /// fibers of concurrent execution).
  struct Fiber {
    std::vector<ObjectRef> regs;
    std::vector<Frame> frames;
    uint32_t resumePc = 0;
    // A kernel call waiting for the scheduler (runInstances only).
    bool suspended = false;
    uint32_t kernel = 0, callPc = 0;
    std::vector<Tensor *> ins, outs;
    uint64_t depth = 0; // kernel calls made so far through the scheduler
    size_t index = 0;   // the instance
    // Instance parallelism (seed 001 §4.1, concurrent calls): a call forked
    // to a child fiber, joined when this fiber reaches it (`pc` at call
    // depth `depth`) with the child's results or error.
    struct Join {
      uint32_t pc = 0;
      size_t depth = 0;
      Fiber *child = nullptr;
      bool done = false;
      Status status;
      std::vector<ObjectRef> results;
    };
    std::vector<Join> joins;
    Fiber *parent = nullptr; // a forked call: the fiber that joins it
    size_t depthBase = 0;    // frames above this fiber's first (its parents')
    bool waiting = false;    // stopped at a join whose child has not finished
    bool dead = false;       // its instance failed: never resumed
  };
  struct Scheduler; // vm/interpreter/AutoBatch.cpp

  /// Runs the current fiber from its top frame at its resumePc until it
  /// returns from frame 0 (results set), fails, or (runInstances) suspends at
  /// a kernel call. `func` and `pc` follow the instruction being executed (for
  /// the error of a failed allocation, see run()).
  Status execute(std::vector<ObjectRef> &results, uint32_t &func, uint32_t &pc);
  /// Runs kernel `k` through the dispatcher for the instruction at (func,
  /// pc), with profiling and the failing member's location on error.
  Status callKernel(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs,
                    uint32_t func, uint32_t pc);
  /// --profile: one call of kernel `k` run by `ran`, its time, and the key of
  /// its argument shapes (the first 16 keys of a kernel are kept).
  void profileKernelCall(uint32_t k, KernelImpl ran, double seconds, const std::string &key);
  /// Runs kernel `k`, whose operands are on the device, there; or on the host
  /// through copies when it has no device code.
  /// `func` and `pc` come back changed when the error is an earlier
  /// launch's failure (found at a synchronisation).
  Status callDeviceKernel(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs,
                          uint32_t &func, uint32_t &pc, KernelImpl &ran, size_t &failed);
  /// The host may read `t`'s elements (shapes, sizes, conditions).
  bool hostReadable(const Tensor &t) const { return t.device() == Device::CPU || opts_.hostDevices; }
  /// After a run on a device: waits for it, reports a kernel's failure at
  /// its launch, and copies device tensors among `results` to the host.
  Status finishDevice(std::vector<ObjectRef> &results);
  /// `at`, when given, replaces the instruction's own location (the member
  /// of a fused kernel that failed).
  Status errorAt(uint32_t func, uint32_t pc, const std::string &msg,
                 const SourceLoc *at = nullptr) const;
  /// Where member `member` of kernel `kernel`, called at (func, pc), was
  /// written: the call's own location (site-locs) when it has one for a
  /// kernel of that many members, else the kernel's (kernel-locs); null for
  /// a one-member kernel, which identical ops share, so that the
  /// instruction's location (the op's) is the precise one.
  const SourceLoc *memberLoc(uint32_t kernel, uint32_t func, uint32_t pc, size_t member) const;
  TensorRef constant(uint32_t index);
  /// LoadConsti's scalar for `v`: one read-only tensor per value, made once
  /// (offsets and sizes repeat on every call; allocating each was a third
  /// of the VM's allocations on Tree-LSTM).
  ObjectRef scalarConstant(int64_t v);
  std::unordered_map<int64_t, TensorRef> scalars_;
  static constexpr size_t kSmallScalars = 4096;
  std::array<TensorRef, kSmallScalars> smallScalars_;

  std::shared_ptr<const Executable> exe_;
  VMOptions opts_;
  std::unique_ptr<ThreadPool> pool_;
  KernelContext kctx_;
  TuningTable ownTuning_; // when opts_.tuning is null
  std::vector<Tensor *> scratchIn_, scratchOut_; // InvokePacked's operands
  std::vector<std::vector<int64_t>> scratchShapes_; // a shape function's results
  KernelDispatcher dispatch_;
  Fiber main_;
  Fiber *cur_ = &main_;
  /// runInstances with auto-batching: batchable kernel calls suspend, and
  /// independent consecutive calls fork (children land in spawned_).
  bool batching_ = false;
  std::vector<Fiber *> spawned_;
  /// Every fiber runInstances has made (instances and forked calls), kept
  /// for the life of the VM, and those free for reuse: a finished fiber is
  /// reset and reused, with the capacity of its registers, frames and
  /// operand lists, by the next fork or instance (a fork was six heap
  /// allocations, one per tree node on Tree-LSTM; `fiberFree_` never holds
  /// more than `fiberStore_`, so returning one to it cannot fail).
  std::vector<std::unique_ptr<Fiber>> fiberStore_;
  std::vector<Fiber *> fiberFree_;
  /// Emptied result lists of joined calls, with their capacity, for the
  /// next fiber step's results (a forked call's results were two heap
  /// allocations per tree node); room for one per fiber, reserved with
  /// the fibers, so that returning one never allocates.
  std::vector<std::vector<ObjectRef>> spareResults_;
  /// A reset fiber, reused or new (std::bad_alloc when out of memory).
  Fiber *newFiber();
  /// Resets `f` (its registers released) and makes it free for reuse.
  void recycleFiber(Fiber &f);
  /// After a run: every fiber made so far is free again.
  void recycleAllFibers();
  /// The call stack of `f`, its parents' frames first (error messages).
  std::vector<Frame> stackOf(const Fiber &f) const;
  std::vector<TensorRef> constants_;
  /// Gather fusion, per batched kernel: Auto's probes and decision (kept
  /// across runs of this VM), and the shapes of its gather-fused calls, one
  /// memo per row count (at most kGatherMemos; the rest share one).
  struct GatherChoice {
    enum State : uint8_t { Probing, Fused, Stacked } state = Probing;
    unsigned probes[2] = {0, 0};       // launches timed: [0] fused, [1] stacked
    double seconds[2] = {0, 0};        // their time, after each form's first
    double rows[2] = {0, 0};           // and their rows
  };
  std::vector<GatherChoice> gatherChoice_;
  /// A launch's shapes are its row count's (the trailing dims and the
  /// shared inputs repeat): the shape functions of a kernel's members run
  /// once per row count instead of once per launch, whose row counts
  /// vary from launch to launch (a launch's describeCall was 1.1% of an
  /// auto-batched Tree-LSTM run; docs/perf.md). Each memo still checks the
  /// whole input key: a row count whose other shapes differ misses.
  static constexpr size_t kGatherMemos = 256;
  std::vector<std::unordered_map<int64_t, std::unique_ptr<NativeCallMemo>>> gatherMemos_;
  std::vector<std::vector<const void *>> gatherTables_; // reused between launches
  Profile profile_;
  uint64_t instructionLimit_ = 0; // profile_.instructions at which the run stops
};

/// Runs kernel `k` (its members in order, reference kernels) on `ins`,
/// writing `outs`. Checks every member against its shape function with the
/// actual shapes first. On an error raised by a member, `*failedMember` (when
/// given) receives the member's index; it is left alone otherwise.
Status runKernel(const KernelDesc &k, const std::vector<Tensor *> &ins,
                 const std::vector<Tensor *> &outs, KernelContext &ctx,
                 size_t *failedMember = nullptr);
/// Runs kernel `k`'s composed shape function: `ins` are 1-D i64 shape tensors,
/// or the input tensors themselves where a data-dependent member reads them;
/// `shapes` receives the output shapes (for upper-bound kernels, the bound):
/// the ShapeFunc instruction makes them new tensors, InvokeShapeFunc (format
/// 1.0 to 1.5) writes them into the tensors it is given.
Status computeShapes(const KernelDesc &k, const std::vector<Tensor *> &ins,
                     std::vector<std::vector<int64_t>> &shapes, size_t *failedMember = nullptr);
/// Which kernel inputs the shape function needs as values (see above).
std::vector<bool> shapeFuncNeedsValue(const KernelDesc &k);

} // namespace nimble::vm

#endif // NIMBLE_VM_INTERPRETER_H
