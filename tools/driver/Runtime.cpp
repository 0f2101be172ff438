//===- Runtime.cpp - The runtime driver: load an executable, run it -------===//

#include "tools/driver/Runtime.h"

#include "vm/support/Allocator.h"
#include "vm/format/Disassembler.h"
#include "vm/format/Format.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <sched.h>
#include <thread>

namespace nimble::driver {

using namespace nimble::vm;

namespace {

/// printf into the end of `out`.
[[gnu::format(printf, 2, 3)]] void appendf(std::string &out, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if (static_cast<size_t>(n) < sizeof buf) {
    out.append(buf, static_cast<size_t>(n));
    return;
  }
  std::string big(static_cast<size_t>(n) + 1, '\0');
  va_start(ap, fmt);
  std::vsnprintf(big.data(), big.size(), fmt, ap);
  va_end(ap);
  out.append(big.data(), static_cast<size_t>(n));
}

bool sameSettings(const RunSettings &a, const RunSettings &b) {
  return a.kernels == b.kernels && a.threads == b.threads && a.maxCallDepth == b.maxCallDepth &&
         a.maxInstructions == b.maxInstructions && a.profile == b.profile && a.gather == b.gather &&
         a.phases == b.phases && a.batchWindow == b.batchWindow && a.trace == b.trace && a.traceStream == b.traceStream;
}

} // namespace

unsigned availableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::clamp(n, 1, 256));
}

//===-- Program ------------------------------------------------------------===//

/// One VM and the oneDNN kernels it calls (which must outlive it).
struct Program::Lease::Runner {
  std::unique_ptr<LibraryKernels> library;
  LibraryKernels *active = nullptr; // library, when it runs
  std::unique_ptr<VirtualMachine> vm;
  unsigned threads = 1;
};

struct Program::Pool {
  RunSettings settings;
  std::vector<std::unique_ptr<Lease::Runner>> idle;
  size_t runners = 0; // idle has room for all of them (see ~Lease)
};

Program::Program(std::shared_ptr<Executable> exe) : exe_(std::move(exe)) {}

Program::~Program() {
  // The VMs (and the values they cache) before the device runtime.
  pools_.clear();
}

std::shared_ptr<Program> Program::load(const std::string &path, std::string &error) {
  auto exe = std::make_shared<Executable>();
  if (!readExecutableFile(path, *exe, error)) return nullptr;
  return std::shared_ptr<Program>(new Program(std::move(exe)));
}

std::shared_ptr<Program> Program::fromBytes(const uint8_t *data, size_t size, const std::string &name,
                                            std::string &error) {
  std::shared_ptr<AlignedBuffer> buf = AlignedBuffer::copyOf(data, size);
  if (!buf) {
    error = "cannot allocate " + std::to_string(size) + " bytes to read '" + name + "'";
    return nullptr;
  }
  auto exe = std::make_shared<Executable>();
  if (!deserialize(std::shared_ptr<const AlignedBuffer>(std::move(buf)), *exe, error)) {
    error = name + ": " + error;
    return nullptr;
  }
  return std::shared_ptr<Program>(new Program(std::move(exe)));
}

const VMFunction *Program::function(const std::string &name, const std::string &file, std::string &error) const {
  int fi = exe_->findFunction(name);
  if (fi >= 0) return &exe_->functions[static_cast<size_t>(fi)];
  std::string names;
  for (auto &f : exe_->functions) names += (names.empty() ? "" : ", ") + ("@" + f.name);
  error = "no function @" + name + " in '" + file + "' (it has " + names + ")";
  return nullptr;
}

// A program with device code (nimblec --target=cuda), or --device=cuda[:N],
// runs its device part on a CUDA device (vm/cuda/CudaRuntime.h): the driver, the
// device, the module and (for cuBLAS entries) cuBLAS are opened here, before
// anything runs, so that a machine without them gets one line naming what is
// missing. --kernels=reference instead runs such a program entirely on the
// host (device storages in host memory, every kernel's reference
// implementation) and never loads the driver or the device code.
int Program::openDevice(const std::string &device, KernelMode kernels, const std::string &file, std::string &error) {
  const bool wanted = device != "cpu";
  if (kernels == KernelMode::Reference) {
    if (wanted) {
      error = "--kernels=reference runs every kernel on the host; it does not take --device=" + device;
      return 2;
    }
    // Whether or not the executable carries device code: a program placed
    // for cuda whose kernels all lack a device form (conv, the pools) has
    // device storages and no cuda module.
    hostDevices_ = true;
    return 0;
  }
  if (exe_->cuda.empty() && !wanted) return 0;
  int ordinal = device.size() > 5 ? std::stoi(device.substr(5)) : 0;
  std::string who = exe_->cuda.empty() ? "--device=" + device : file + " (compiled for cuda " + exe_->cuda.arch + ")";
  device_ = cuda::DeviceRuntime::open(*exe_, ordinal, error);
  if (!device_) {
    error = who + " needs CUDA: " + error;
    return 1;
  }
  return 0;
}

Program::Lease Program::lease(const RunSettings &settings, std::vector<std::string> *warnings) {
  std::unique_ptr<Lease::Runner> r;
  size_t pi = 0;
  const NativeKernels *native = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (pi < pools_.size() && !sameSettings(pools_[pi]->settings, settings)) ++pi;
    if (pi == pools_.size()) {
      pools_.push_back(std::make_unique<Pool>());
      pools_.back()->settings = settings;
    }
    Pool &pool = *pools_[pi];
    if (!pool.idle.empty()) {
      r = std::move(pool.idle.back());
      pool.idle.pop_back();
    } else {
      // Room to take it back: ending a lease must not allocate (it runs in
      // a destructor, also when memory has run out).
      pool.idle.reserve(pool.runners + 1);
      ++pool.runners;
    }
    if (!r && settings.kernels != KernelMode::Reference && !exe_->native.empty()) {
      // Mapped once, at the first run that may call it: --kernels=reference
      // never maps native code (the mode for .nbc files one does not trust).
      if (nativeState_ == NativeState::NotTried) {
        std::string why;
        nativeState_ = native_.load(*exe_, why) ? NativeState::Loaded : NativeState::Failed;
        if (nativeState_ == NativeState::Failed && warnings)
          warnings->push_back("running reference kernels instead of native code: " + why);
      }
      if (nativeState_ == NativeState::Loaded) native = &native_;
    }
  }
  if (!r) {
    // A new VM, built outside the lock (oneDNN's analysis of the kernels).
    r = std::make_unique<Lease::Runner>();
    r->threads = settings.threads ? settings.threads : availableCores();
    r->library = std::make_unique<LibraryKernels>(*exe_);
    const bool wantLibrary = settings.kernels == KernelMode::Library || settings.kernels == KernelMode::Auto ||
                             settings.kernels == KernelMode::Tune;
    if (wantLibrary && r->library->count() > 0) {
      // (Nothing for oneDNN in the executable: it is not even started.)
      std::string why;
      if (r->library->init(why)) r->active = r->library.get();
      else if (warnings)
        warnings->push_back("running the other kernels instead of oneDNN: " + why);
    }
    VMOptions vo;
    vo.native = native;
    vo.library = r->active;
    vo.kernels = settings.kernels;
    vo.tuning = &tuning_;
    vo.threads = r->threads;
    vo.device = device_.get();
    vo.hostDevices = hostDevices_;
    vo.maxCallDepth = settings.maxCallDepth;
    vo.maxInstructions = settings.maxInstructions;
    vo.profile = settings.profile;
    vo.gather = settings.gather;
    vo.phases = settings.phases;
    vo.batchWindow = settings.batchWindow;
    vo.trace = settings.trace;
    vo.traceStream = settings.traceStream;
    r->vm = std::make_unique<VirtualMachine>(exe_, vo);
  }
  // oneDNN's team is the calling thread's (an OpenMP setting per thread).
  if (r->active) LibraryKernels::setThreads(r->threads);
  return Lease(this, pi, std::move(r));
}

Program::Lease::Lease(Program *p, size_t pool, std::unique_ptr<Runner> r)
    : program_(p), pool_(pool), runner_(std::move(r)) {}

Program::Lease::Lease(Lease &&o) noexcept
    : program_(o.program_), pool_(o.pool_), runner_(std::move(o.runner_)) {}

Program::Lease::~Lease() {
  if (!runner_) return;
  std::lock_guard<std::mutex> lock(program_->mu_);
  program_->pools_[pool_]->idle.push_back(std::move(runner_));
}

VirtualMachine &Program::Lease::vm() const { return *runner_->vm; }
LibraryKernels *Program::Lease::library() const { return runner_->active; }

//===-- Values and profiles -------------------------------------------------===//

std::string inputName(const VMFunction &fn, size_t i) {
  return "input " + std::to_string(i) + " (%" + fn.paramNames[i] + ")";
}

std::string inputCountError(const Executable &exe, const VMFunction &fn, size_t got) {
  std::string m = "@" + fn.name + " takes " + std::to_string(fn.paramTypes.size()) + " input" +
                  (fn.paramTypes.size() == 1 ? "" : "s") + ", got " + std::to_string(got);
  for (size_t i = 0; i < fn.paramTypes.size(); ++i)
    m += "\n  " + inputName(fn, i) + ": " + typeToString(exe, fn.paramTypes[i]);
  return m;
}

std::string implNames(const uint64_t (&calls)[kNumKernelImpls], uint64_t total) {
  for (unsigned i = 0; i < kNumKernelImpls; ++i)
    if (calls[i] == total) return kernelImplName(static_cast<KernelImpl>(i));
  std::string m;
  for (unsigned i = 0; i < kNumKernelImpls; ++i)
    if (calls[i]) m += (m.empty() ? "" : "+") + std::string(kernelImplName(static_cast<KernelImpl>(i)));
  return m;
}

/// Compares `got` with `want` (tensors element-wise, ADTs structurally).
bool compareValues(const Object &got, const Object &want, double tol, const std::string &what,
                   std::string &why) {
  const Tensor *g = asTensor(const_cast<Object *>(&got)), *w = asTensor(const_cast<Object *>(&want));
  if (g && w) {
    if (g->dtype() != w->dtype() || g->shape() != w->shape()) {
      why = what + " is " + g->typeString() + ", expected " + w->typeString();
      return false;
    }
    double worst = 0, worstGot = 0, worstWant = 0;
    int64_t worstAt = -1;
    for (int64_t i = 0; i < g->numElements(); ++i) {
      double a = 0, b = 0;
      switch (g->dtype()) {
      case DType::F32: a = g->data<float>()[i]; b = w->data<float>()[i]; break;
      case DType::F64: a = g->data<double>()[i]; b = w->data<double>()[i]; break;
      case DType::F16: a = halfToFloat(g->data<uint16_t>()[i]); b = halfToFloat(w->data<uint16_t>()[i]); break;
      case DType::BF16: a = bf16ToFloat(g->data<uint16_t>()[i]); b = bf16ToFloat(w->data<uint16_t>()[i]); break;
      case DType::I1: case DType::I8: a = g->data<int8_t>()[i]; b = w->data<int8_t>()[i]; break;
      case DType::I32: a = g->data<int32_t>()[i]; b = w->data<int32_t>()[i]; break;
      case DType::I16: a = g->data<int16_t>()[i]; b = w->data<int16_t>()[i]; break;
      case DType::U8: a = g->data<uint8_t>()[i]; b = w->data<uint8_t>()[i]; break;
      case DType::U16: a = g->data<uint16_t>()[i]; b = w->data<uint16_t>()[i]; break;
      case DType::U32: a = g->data<uint32_t>()[i]; b = w->data<uint32_t>()[i]; break;
      case DType::I64:
      case DType::U64: // compared as bits: doubles would merge neighbours above 2^53
        if (g->data<int64_t>()[i] != w->data<int64_t>()[i]) {
          bool u = g->dtype() == DType::U64;
          auto show = [&](const Tensor *t) {
            return u ? std::to_string(t->data<uint64_t>()[i]) : std::to_string(t->data<int64_t>()[i]);
          };
          why = what + "[" + std::to_string(i) + "] is " + show(g) + ", expected " + show(w);
          return false;
        }
        continue;
      }
      bool isF = isFloat(g->dtype());
      double diff = std::fabs(a - b);
      // NaN matches NaN and an infinity only itself (inf - inf is NaN, and
      // the relative tolerance of an infinite expected value admits anything).
      bool close = a == b || (std::isnan(a) && std::isnan(b)) ||
                   (!std::isinf(a) && !std::isinf(b) && diff <= tol + tol * std::fabs(b));
      bool bad = isF ? !close : a != b;
      if (bad && (worstAt < 0 || diff > worst || std::isnan(diff))) {
        worst = diff;
        worstAt = i;
        worstGot = a;
        worstWant = b;
      }
    }
    if (worstAt >= 0) {
      // The values of the worst element, whatever the dtype (they were read
      // as doubles above); integers and booleans compare exactly.
      char buf[160];
      int prec = g->dtype() == DType::F64 ? 17 : 9;
      if (isFloat(g->dtype()))
        std::snprintf(buf, sizeof buf, "[%lld] differs: got %.*g, expected %.*g (|diff| %.3g > tolerance %.3g)",
                      static_cast<long long>(worstAt), prec, worstGot, prec, worstWant, worst, tol);
      else
        std::snprintf(buf, sizeof buf, "[%lld] is %.0f, expected %.0f", static_cast<long long>(worstAt), worstGot,
                      worstWant);
      why = what + buf;
      return false;
    }
    return true;
  }
  const Adt *ga = asAdt(const_cast<Object *>(&got)), *wa = asAdt(const_cast<Object *>(&want));
  if (ga && wa) {
    if (ga->tag() != wa->tag() || ga->fields().size() != wa->fields().size()) {
      why = what + " has a different constructor than expected";
      return false;
    }
    for (size_t i = 0; i < ga->fields().size(); ++i)
      if (!compareValues(*ga->fields()[i], *wa->fields()[i], tol, what + " field " + std::to_string(i), why))
        return false;
    return true;
  }
  why = what + " has a different kind of value than expected";
  return false;
}

std::string profileText(const VirtualMachine &vm, int runs, const LibraryKernels *library) {
  std::string out;
  const Executable &exe = vm.executable();
  const Profile &p = vm.profile();
  double kernelTotal = 0;
  for (const auto &k : p.kernels) kernelTotal += k.seconds;
  std::vector<size_t> order;
  for (size_t i = 0; i < p.kernels.size(); ++i)
    if (p.kernels[i].calls) order.push_back(i);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return p.kernels[a].seconds > p.kernels[b].seconds; });
  appendf(out, "Kernel profile (%d run%s):\n", runs, runs == 1 ? "" : "s");
  appendf(out, "  %-28s %-9s %8s %12s %7s  %s\n", "kernel", "impl", "calls", "total ms", "%", "argument shapes (calls)");
  for (size_t i : order) {
    const KernelProfile &k = p.kernels[i];
    // The implementation that ran, or "mixed" (then each shape says which).
    auto implOf = implNames;
    std::string impl = implOf(k.implCalls, k.calls);
    bool mixed = impl.find('+') != std::string::npos;
    std::string shapes;
    size_t shown = 0;
    for (auto &[s, ss] : k.shapes) {
      if (shown++ == 3) {
        shapes += " ...";
        break;
      }
      shapes += (shapes.empty() ? "" : " ") + s + " (" + std::to_string(ss.calls) +
                (mixed ? " " + implOf(ss.implCalls, ss.calls) : "") + ")";
    }
    appendf(out, "  %-28s %-9s %8llu %12.3f %6.1f%%  %s\n", exe.kernels[i].name.c_str(), impl.c_str(),
                 static_cast<unsigned long long>(k.calls), k.seconds * 1e3,
                 p.totalSeconds > 0 ? 100 * k.seconds / p.totalSeconds : 0.0, shapes.c_str());
  }
  double other = p.totalSeconds - kernelTotal - p.shapeFuncSeconds;
  appendf(out, "Time split: kernels %.3f ms (%.1f%%), shape functions %.3f ms (%.1f%%, %llu calls), "
                       "other VM work %.3f ms (%.1f%%), total %.3f ms, %llu instructions\n",
               kernelTotal * 1e3, p.totalSeconds > 0 ? 100 * kernelTotal / p.totalSeconds : 0.0,
               p.shapeFuncSeconds * 1e3, p.totalSeconds > 0 ? 100 * p.shapeFuncSeconds / p.totalSeconds : 0.0,
               static_cast<unsigned long long>(p.shapeFuncCalls), other * 1e3,
               p.totalSeconds > 0 ? 100 * other / p.totalSeconds : 0.0, p.totalSeconds * 1e3,
               static_cast<unsigned long long>(p.instructions));
  if (library && library->primitivesCreated())
    appendf(out, "Library kernels (oneDNN): %llu primitives created (cache misses, all runs) in %.3f ms, "
                         "%zu cached\n",
                 static_cast<unsigned long long>(library->primitivesCreated()), library->creationSeconds() * 1e3,
                 library->primitivesCached());
  if (library && library->weightsPacked())
    appendf(out,
            "Library weights: %llu constants packed (all runs) into %llu bytes in %.3f ms; %llu bytes of "
            "the originals released\n",
            static_cast<unsigned long long>(library->weightsPacked()),
            static_cast<unsigned long long>(library->packedBytes()), library->packSeconds() * 1e3,
            static_cast<unsigned long long>(library->releasedBytes()));
  if (library && library->panelCalls())
    appendf(out, "Library panels: %llu calls (all runs) as few-row products over streamed weight panels\n",
                 static_cast<unsigned long long>(library->panelCalls()));
  if (library && library->splitCalls())
    appendf(out, "Library threads (oneDNN): %llu calls (all runs) split by output columns, a run of blocks per thread\n",
                 static_cast<unsigned long long>(library->splitCalls()));
  if (library && library->convSplitCalls())
    appendf(out, "Library threads (oneDNN): %llu conv calls (all runs) split by images, a run of images per thread\n",
                 static_cast<unsigned long long>(library->convSplitCalls()));
  if (library && library->convPairsFused())
    appendf(out, "Library conv pairs (oneDNN): %llu calls (all runs) as one primitive with a fused depthwise conv\n",
                 static_cast<unsigned long long>(library->convPairsFused()));
  // Counts per run; peaks over all runs.
  const Allocator &a = defaultAllocator(Device::CPU);
  AllocStats s = a.stats();
  auto perRun = [&](uint64_t x) { return static_cast<unsigned long long>((x + runs / 2) / runs); };
  appendf(out,
               "Memory (%s allocator, per run): %llu allocations (%llu pool hits, %llu from the system), "
               "%llu bytes requested, peak %llu bytes live, peak %llu bytes reserved, %.3f ms allocating\n",
               a.kindName(), perRun(s.allocations), perRun(s.poolHits), perRun(s.systemAllocations),
               perRun(s.bytesAllocated), static_cast<unsigned long long>(s.peakBytes),
               static_cast<unsigned long long>(s.peakReserved), static_cast<double>(s.nanoseconds) / 1e6 / runs);
  appendf(out, "Copies (device_copy, per run): %llu tensors, %llu bytes\n", perRun(p.copies),
          perRun(p.copiedBytes));
  if (cuda::DeviceRuntime *dev = vm.options().device) {
    // Device kernels run asynchronously: their rows above time the launch
    // (or the cuBLAS call's return), not the work on the device.
    const cuda::DeviceStats &d = dev->stats();
    AllocStats ds = dev->allocator().stats();
    appendf(out,
                 "Device cuda:%d (%s), all runs: %llu kernel launches, %llu cuBLAS calls, %llu kernels on the host "
                 "(no device code), %llu host operands staged, %llu bytes to the device, %llu to the host, %llu synchronizations; "
                 "device pool: %llu allocations (%llu pool hits), peak %llu bytes live, peak %llu bytes reserved "
                 "(launch times only: the device runs asynchronously)\n",
                 dev->device().ordinal, dev->device().name.c_str(), static_cast<unsigned long long>(d.launches),
                 static_cast<unsigned long long>(d.cublasCalls), static_cast<unsigned long long>(d.hostFallbacks),
                 static_cast<unsigned long long>(d.stagedOperands),
                 static_cast<unsigned long long>(d.bytesToDevice), static_cast<unsigned long long>(d.bytesToHost),
                 static_cast<unsigned long long>(d.synchronizations), static_cast<unsigned long long>(ds.allocations),
                 static_cast<unsigned long long>(ds.poolHits), static_cast<unsigned long long>(ds.peakBytes),
                 static_cast<unsigned long long>(ds.peakReserved));
  }
  return out;
}

std::string batchProfileText(const VirtualMachine &vm, int runs) {
  std::string out;
  const BatchProfile &b = vm.profile().batch;
  uint64_t launches = b.rowLaunches + b.invariantLaunches + b.singleCalls + b.fallbackCalls;
  double total = vm.profile().totalSeconds;
  appendf(out,
               "Auto-batching (%d run%s of %llu instances): %llu kernel calls through the scheduler in %llu "
               "launches (%.2f calls per launch, largest group %llu); rows: %llu launches for %llu calls; "
               "invariant: %llu launches for %llu calls; alone: %llu; split by a run-time check: %llu; "
               "%llu calls forked\n",
               runs, runs == 1 ? "" : "s", static_cast<unsigned long long>(b.instances / std::max(1, runs)),
               static_cast<unsigned long long>(b.suspensions), static_cast<unsigned long long>(launches),
               launches ? double(b.suspensions) / double(launches) : 0.0, static_cast<unsigned long long>(b.maxGroup),
               static_cast<unsigned long long>(b.rowLaunches), static_cast<unsigned long long>(b.rowCalls),
               static_cast<unsigned long long>(b.invariantLaunches), static_cast<unsigned long long>(b.invariantCalls),
               static_cast<unsigned long long>(b.singleCalls), static_cast<unsigned long long>(b.fallbackCalls),
               static_cast<unsigned long long>(b.forks / std::max(1, runs)));
  appendf(out, "Auto-batching time: scheduling %.3f ms (%.1f%%), stacking and scattering rows %.3f ms (%.1f%%), "
                       "row tables %.3f ms (%.1f%%), %llu scheduling rounds\n",
               b.scheduleSeconds * 1e3, total > 0 ? 100 * b.scheduleSeconds / total : 0.0, b.gatherSeconds * 1e3,
               total > 0 ? 100 * b.gatherSeconds / total : 0.0, b.tableSeconds * 1e3,
               total > 0 ? 100 * b.tableSeconds / total : 0.0, static_cast<unsigned long long>(b.rounds));
  appendf(out, "Gather fusion: %llu of the row launches for %llu calls read and wrote the rows in place; "
                       "kernels chosen in place: %llu, with stacked copies: %llu\n",
               static_cast<unsigned long long>(b.fusedLaunches), static_cast<unsigned long long>(b.fusedCalls),
               static_cast<unsigned long long>(b.chosenFused), static_cast<unsigned long long>(b.chosenStacked));
  // Only for a program with phases (the lines above are the same for every
  // program).
  if (b.phaseWaits)
    appendf(out, "Program phases: %llu scheduling rounds held a later phase's calls back\n",
            static_cast<unsigned long long>(b.phaseWaits));
  // Only when the window held instances back (--batch-window).
  if (b.windowedRuns)
    appendf(out, "Window: at most %llu instances in flight, the next started as one finished (--batch-window)\n",
            static_cast<unsigned long long>(b.inFlight));
  return out;
}

} // namespace nimble::driver
