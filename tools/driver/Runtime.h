//===- Runtime.h - The runtime driver: load an executable, run it --*- C++ -*-===//
//
// What nimble-run does between parsing its flags and printing its results,
// as a library that nimble-run's main and the Python module (`nimble.load`,
// `Executable.run`) both call: read and verify a .nbc, map its native code,
// open the CUDA device it needs, build VMs with the options of a run, run a
// function on values, compare values, and put a profile into words.
//
// A Program is one loaded executable that many threads may run at once. What
// every run shares is read-only or locked: the Executable, its native code
// (mapped once), the decisions of --kernels=tune and --tuning (one
// TuningTable for the life of the Program: each kernel and shape bucket is
// measured once, by whichever run meets it first). What a run changes is its own: a VM (its
// registers, constants and gather-fusion choices) and its oneDNN primitives
// and packed weights (vm/dispatch/LibraryKernels.h, not thread-safe), leased from a
// pool per set of run settings for the length of one call and kept for the
// next, so a warm call builds nothing.
//
// Like vm/, this library links no compiler code and no LLVM
// (test/tools/runtime-deps.test checks nimble-run, which links it).
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_TOOLS_DRIVER_RUNTIME_H
#define NIMBLE_TOOLS_DRIVER_RUNTIME_H

#include "vm/cuda/CudaRuntime.h"
#include "vm/dispatch/Dispatch.h"
#include "vm/interpreter/Interpreter.h"
#include "vm/dispatch/LibraryKernels.h"
#include "vm/dispatch/NativeKernels.h"

#include <iosfwd>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace nimble::driver {

/// The cores this process may run on (its affinity mask, so `taskset -c 0`
/// means one thread), at least 1 and at most 256.
unsigned availableCores();

/// The options of one run (nimble-run's flags; `Executable.run`'s keywords).
struct RunSettings {
  vm::KernelMode kernels = vm::KernelMode::Auto;
  unsigned threads = 0; // 0: availableCores()
  uint32_t maxCallDepth = 10000;
  uint64_t maxInstructions = 0;
  bool profile = false;
  vm::VMOptions::GatherFusion gather = vm::VMOptions::GatherFusion::Auto;
  bool phases = true;
  uint32_t batchWindow = 16; // 0: every instance at once
  bool trace = false;
  std::ostream *traceStream = nullptr;
};

class Program {
public:
  /// Reads and verifies a .nbc file (messages start with the path).
  static std::shared_ptr<Program> load(const std::string &path, std::string &error);
  /// The same from bytes in memory (copied into an aligned buffer); messages
  /// start with `name`.
  static std::shared_ptr<Program> fromBytes(const uint8_t *data, size_t size, const std::string &name,
                                            std::string &error);
  ~Program();
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;

  const vm::Executable &executable() const { return *exe_; }
  /// The function called `name`, or null with an error listing the
  /// functions (`file` names the executable).
  const vm::VMFunction *function(const std::string &name, const std::string &file, std::string &error) const;

  /// Opens what `device` (cpu, cuda, cuda:N) and the executable need before
  /// any run: a program with a cuda-code section, or --device=cuda, gets the
  /// CUDA driver and device; with --kernels=reference such a program runs on
  /// the host instead. Returns 0, 1 (error) or 2 (a usage error), with the
  /// message (without the tool's name). Not thread-safe: call it once, first.
  int openDevice(const std::string &device, vm::KernelMode kernels, const std::string &file, std::string &error);
  bool hasDevice() const { return device_ != nullptr; }

  /// Decisions of --kernels=tune (and stored ones, which auto obeys too),
  /// shared by every run of this program.
  vm::TuningTable &tuning() { return tuning_; }

  /// A VM for one run with `settings`, out of the program's pool, returned
  /// to it when the lease ends. The thread that holds the lease runs it.
  class Lease {
  public:
    Lease(Lease &&) noexcept;
    ~Lease();
    vm::VirtualMachine &vm() const;
    /// oneDNN's kernels of this VM, or null when they do not run.
    vm::LibraryKernels *library() const;

  private:
    friend class Program;
    struct Runner;
    Lease(Program *p, size_t pool, std::unique_ptr<Runner> r);
    Program *program_;
    size_t pool_;
    std::unique_ptr<Runner> runner_;
  };
  /// The first lease of each kind maps the native code and starts oneDNN;
  /// when either cannot be used here, one line saying why is appended to
  /// `warnings` (once per Program for native code) and the run goes on
  /// without it.
  Lease lease(const RunSettings &settings, std::vector<std::string> *warnings);

private:
  explicit Program(std::shared_ptr<vm::Executable> exe);
  std::shared_ptr<const vm::Executable> exe_;
  // Declared before every pool: device storages go back to its pool.
  std::unique_ptr<vm::cuda::DeviceRuntime> device_;
  bool hostDevices_ = false;
  vm::TuningTable tuning_;
  std::mutex mu_; // guards everything below
  vm::NativeKernels native_;
  enum class NativeState { NotTried, Loaded, Failed } nativeState_ = NativeState::NotTried;
  struct Pool;
  std::vector<std::unique_ptr<Pool>> pools_;
};

/// "input 1 (%h0)": how messages name input `i` of `fn`.
std::string inputName(const vm::VMFunction &fn, size_t i);
/// "@f takes 2 inputs, got 1", then a line per parameter with its type.
std::string inputCountError(const vm::Executable &exe, const vm::VMFunction &fn, size_t got);

/// Compares `got` with `want` (tensors element-wise within `tol`: |a-b| <=
/// tol + tol*|b|, NaN equal to NaN; ADT values structurally); false with a
/// message naming `what` and the worst element.
bool compareValues(const vm::Object &got, const vm::Object &want, double tol, const std::string &what,
                   std::string &why);

/// nimble-run --profile's text: the kernel table, the time split, oneDNN's
/// lines, memory (per run over `runs`), the device's line.
std::string profileText(const vm::VirtualMachine &vm, int runs, const vm::LibraryKernels *library);
/// The auto-batching lines of --profile (after runInstances).
std::string batchProfileText(const vm::VirtualMachine &vm, int runs);
/// The implementation(s) that ran `calls` ("native", or "native+library").
std::string implNames(const uint64_t (&calls)[vm::kNumKernelImpls], uint64_t total);

} // namespace nimble::driver

#endif // NIMBLE_TOOLS_DRIVER_RUNTIME_H
