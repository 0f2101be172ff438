//===- nimble-run.cpp - Run a Nimble executable (.nbc) ---------------------===//
//
// Load and verify an executable, read the inputs, run one function on the VM,
// print or save the outputs, optionally compare them, benchmark, profile or
// trace. Conventions of IREE's iree-run-module. docs/nimble-run.md is the
// manual; --help says the same. This binary links the runtime only: no
// compiler code, no LLVM.
//
//===----------------------------------------------------------------------===//

#include "tools/ToolSupport.h"
#include "vm/support/Allocator.h"
#include "vm/cuda/CudaRuntime.h"
#include "vm/format/Disassembler.h"
#include "vm/support/FailAlloc.h"
#include "vm/format/Format.h"
#include "vm/dispatch/Dispatch.h"
#include "vm/interpreter/Interpreter.h"
#include "vm/dispatch/LibraryKernels.h"
#include "vm/dispatch/NativeKernels.h"
#include "vm/io/Npy.h"
#include "vm/io/TensorText.h"
#include "vm/io/ValueText.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <new>
#include <sched.h>
#include <thread>
#include <unistd.h>

using namespace nimble;
using namespace nimble::tools;
using namespace nimble::vm;

namespace {

constexpr const char *kHelp = R"(OVERVIEW: nimble-run - run a Nimble executable (.nbc) on the VM

USAGE: nimble-run [options] <model.nbc>

OPTIONS:
  --function=<name>          Function to run (default: main)
  --input=<value>            One input, in parameter order (repeat the flag):
                               2x3xf32="1 2 3 4 5 6"   a tensor literal (one value: splat)
                               f32=1.5                 a scalar
                               @x.npy                  a tensor from a .npy file
                               Node(Leaf(1x4xf32=1 2 3 4), Leaf(@l.npy))
                                                       an algebraic data type value
                               @tree.txt               such a value from a text file
  --output=@<file.npy>       Write the next output to a .npy file instead of printing
                             it (repeat for several outputs; '-' prints that output)
  --expected-output=<value>  Compare the next output with this value (same forms as
                             --input); exit 1 on a mismatch
  --tolerance=<t>            Allowed difference for floats: |a-b| <= t + t*|b| (default 1e-5)
  --benchmark=<n>            Run n more times after a warm-up and print min/median/max
                             latency (with --instances: of the whole batch, and
                             instances/s)
  --instances=<file>         Run the function once per line of <file>: each line is one
                             instance's inputs in the --input forms, separated by
                             spaces ('#' starts a comment line; @ paths are relative
                             to <file>). Results are printed per instance after an
                             'instance N:' line; a failing instance is reported with
                             its index and does not stop the others (exit 1 at the end)
  --auto-batch=<on|off>      With --instances: run the instances together and batch
                             their kernel calls (on, the default; docs/autobatch.md),
                             or one after another (off: the oracle)
  --gather-fusion=<auto|on|off>
                             With auto-batching: how a batched kernel with a
                             gather-fused entry gets its rows: in place through row
                             tables (on), stacked into copies (off), or the faster of
                             the two as measured on its first launches (auto, the
                             default)
  --output-dir=<dir>         With --instances: write result j of instance i to
                             <dir>/i.j.npy (tensors) or <dir>/i.j.txt (other values)
                             instead of printing it
  --profile                  Print per-kernel time, calls and argument shapes, the
                             kernel / shape function / other split, and allocation stats
  --trace                    Print each instruction as it executes (to stderr)
  --kernels=<auto|native|library|reference>
                             Which implementation runs each kernel (docs/VM.md):
                             auto (default): oneDNN or the .nbc's native code,
                               whichever measures faster per kernel and shape
                               bucket; elsewhere native where present, else reference
                             native: the .nbc's native kernels (nimblec
                               --kernels=native) where present, else reference
                             library: oneDNN for the dense kernels it can run, native
                               elsewhere where present, else reference
                             reference: reference kernels only; never maps native code
                               (the mode for .nbc files you do not trust); runs a
                               program compiled for cuda on the host, loading no
                               CUDA driver or device code
  --tuning=<file>            Decisions of --kernels=auto: read from <file> when it
                             exists (used as is, so dispatch is deterministic), and
                             written back with any new ones after the run
  --allocator=<pool|system>  Memory for storages: size-class pool that recycles freed
                             blocks (default), or one malloc per allocation
  --device=<cpu|cuda[:N]>    Device to run on (default cpu). A program compiled with
                             nimblec --target=cuda runs its device part on a CUDA
                             device whatever this says (cuda:N chooses which); the
                             driver (libcuda.so.1) and cuBLAS are loaded only then, and
                             a missing one, or a missing device, is one error line
                             (exit 1). Never run on a GPU yet: tested against a fake
                             driver only (docs/nimble-run.md)
  --threads=<n>              Threads for kernels, generated and oneDNN alike (default:
                             the cores this process may run on)
  --max-call-depth=<n>       Limit on nested calls before an error (default 10000)
  --max-instructions=<n>     Stop with an error after n instructions (default: no limit)
  --help                     Show this help and exit
  --version                  Show the version and exit

Environment: NIMBLE_FAIL_ALLOC=<k> makes the k-th allocation fail (tests of the
out-of-memory paths; 0 prints the count of allocations at exit).
NIMBLE_CUDA_DRIVER=<library> is opened instead of libcuda.so.1, and
NIMBLE_CUBLAS_LIBRARY=<library> instead of libcublas.so.13/.12/.11.

Exit status: 0 on success, 1 on an invalid executable or input, a run-time error
(out of memory included) or a failed expectation, 2 on a usage error.
)";

struct Options {
  std::string file, function = "main", device = "cpu";
  std::vector<std::string> inputs, outputs, expected;
  std::string instances, outputDir;
  bool autoBatch = true;
  VMOptions::GatherFusion gather = VMOptions::GatherFusion::Auto;
  double tolerance = 1e-5;
  int benchmark = 0;
  unsigned threads = 0; // 0: the cores this process may run on
  uint32_t maxDepth = 10000;
  uint64_t maxInstructions = 0;
  bool profile = false, trace = false;
  KernelMode kernels = KernelMode::Auto;
  std::string tuning;
  AllocatorKind allocator = AllocatorKind::Pool;
};

/// The cores this process may run on (its affinity mask, so `taskset -c 0`
/// means one thread), at least 1 and at most 256.
unsigned availableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::clamp(n, 1, 256));
}

int usageError(const std::string &msg) { return tools::usageError("nimble-run", msg); }

bool parseUnsigned(const std::string &s, uint64_t max, uint64_t &out) {
  if (s.empty() || s.size() > 12) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > max) return false;
  out = v;
  return true;
}

int parseArgs(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::optional<std::string> v;
    uint64_t n;
    if (a == "--help" || a == "-h") {
      std::cout << kHelp;
      return kExitOk;
    }
    if (a == "--version") {
      std::cout << "nimble-run (Nimble) 0.1, bytecode format " << Executable::kMajor << "."
                << Executable::kMinor << "\n";
      return kExitOk;
    }
    if ((v = flagValue(a, "--function"))) {
      if (v->empty()) return usageError("--function needs a name");
      o.function = *v;
    } else if ((v = flagValue(a, "--input"))) {
      o.inputs.push_back(*v);
    } else if ((v = flagValue(a, "--instances"))) {
      if (v->empty()) return usageError("--instances takes a file name");
      o.instances = *v;
    } else if ((v = flagValue(a, "--auto-batch"))) {
      if (*v != "on" && *v != "off") return usageError("--auto-batch takes on or off, got '" + *v + "'");
      o.autoBatch = *v == "on";
    } else if ((v = flagValue(a, "--gather-fusion"))) {
      if (*v == "auto") o.gather = VMOptions::GatherFusion::Auto;
      else if (*v == "on") o.gather = VMOptions::GatherFusion::On;
      else if (*v == "off") o.gather = VMOptions::GatherFusion::Off;
      else return usageError("--gather-fusion takes auto, on or off, got '" + *v + "'");
    } else if ((v = flagValue(a, "--output-dir"))) {
      if (v->empty()) return usageError("--output-dir takes a directory");
      o.outputDir = *v;
    } else if ((v = flagValue(a, "--output"))) {
      if (*v != "-" && (v->size() < 2 || (*v)[0] != '@'))
        return usageError("--output takes @file.npy or -, got '" + *v + "'");
      o.outputs.push_back(*v);
    } else if ((v = flagValue(a, "--expected-output"))) {
      o.expected.push_back(*v);
    } else if ((v = flagValue(a, "--tolerance"))) {
      char *end = nullptr;
      double t = std::strtod(v->c_str(), &end);
      if (v->empty() || *end || !(t >= 0)) return usageError("--tolerance takes a non-negative number");
      o.tolerance = t;
    } else if ((v = flagValue(a, "--benchmark"))) {
      if (!parseUnsigned(*v, 1000000, n) || n == 0) return usageError("--benchmark takes a positive count");
      o.benchmark = static_cast<int>(n);
    } else if ((v = flagValue(a, "--threads"))) {
      if (!parseUnsigned(*v, 256, n) || n == 0) return usageError("--threads takes a count from 1 to 256");
      o.threads = static_cast<unsigned>(n);
    } else if ((v = flagValue(a, "--max-call-depth"))) {
      if (!parseUnsigned(*v, 100000000, n) || n == 0) return usageError("--max-call-depth takes a positive count");
      o.maxDepth = static_cast<uint32_t>(n);
    } else if ((v = flagValue(a, "--max-instructions"))) {
      if (!parseUnsigned(*v, 999999999999ull, n) || n == 0)
        return usageError("--max-instructions takes a positive count");
      o.maxInstructions = n;
    } else if ((v = flagValue(a, "--device"))) {
      if (*v != "cpu" && *v != "cuda" &&
          !(v->rfind("cuda:", 0) == 0 && parseUnsigned(v->substr(5), 1023, n)))
        return usageError("--device takes cpu, cuda or cuda:<ordinal>, got '" + *v + "'");
      o.device = *v;
    } else if ((v = flagValue(a, "--kernels"))) {
      if (!parseKernelMode(*v, o.kernels))
        return usageError("--kernels takes auto, native, library or reference, got '" + *v + "'");
    } else if ((v = flagValue(a, "--tuning"))) {
      if (v->empty()) return usageError("--tuning takes a file name");
      o.tuning = *v;
    } else if ((v = flagValue(a, "--allocator"))) {
      if (*v != "pool" && *v != "system") return usageError("--allocator takes pool or system, got '" + *v + "'");
      o.allocator = *v == "pool" ? AllocatorKind::Pool : AllocatorKind::System;
    } else if (a == "--profile") {
      o.profile = true;
    } else if (a == "--trace") {
      o.trace = true;
    } else if (a.size() > 1 && a[0] == '-') {
      return usageError("unknown option '" + a + "'");
    } else {
      if (!o.file.empty()) return usageError("more than one executable given");
      o.file = a;
    }
  }
  if (!o.instances.empty() && (!o.inputs.empty() || !o.outputs.empty() || !o.expected.empty()))
    return usageError("--instances replaces --input, --output and --expected-output");
  if (o.instances.empty() && !o.outputDir.empty()) return usageError("--output-dir needs --instances");
  if (o.file.empty()) return usageError("no executable given");
  return -1;
}

/// Compares `got` with `want` (tensors element-wise, ADTs structurally).
bool compare(const Object &got, const Object &want, double tol, const std::string &what,
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
      case DType::I64:
        if (g->data<int64_t>()[i] != w->data<int64_t>()[i]) {
          why = what + "[" + std::to_string(i) + "] is " + std::to_string(g->data<int64_t>()[i]) +
                ", expected " + std::to_string(w->data<int64_t>()[i]);
          return false;
        }
        continue;
      }
      bool isF = isFloat(g->dtype());
      double diff = std::fabs(a - b);
      bool bad = isF ? !(diff <= tol + tol * std::fabs(b)) && !(std::isnan(a) && std::isnan(b)) : a != b;
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
      if (!compare(*ga->fields()[i], *wa->fields()[i], tol, what + " field " + std::to_string(i), why))
        return false;
    return true;
  }
  why = what + " has a different kind of value than expected";
  return false;
}


void printProfile(const VirtualMachine &vm, int runs, const LibraryKernels *library) {
  const Executable &exe = vm.executable();
  const Profile &p = vm.profile();
  double kernelTotal = 0;
  for (const auto &k : p.kernels) kernelTotal += k.seconds;
  std::vector<size_t> order;
  for (size_t i = 0; i < p.kernels.size(); ++i)
    if (p.kernels[i].calls) order.push_back(i);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return p.kernels[a].seconds > p.kernels[b].seconds; });
  std::fprintf(stderr, "Kernel profile (%d run%s):\n", runs, runs == 1 ? "" : "s");
  std::fprintf(stderr, "  %-28s %-9s %8s %12s %7s  %s\n", "kernel", "impl", "calls", "total ms", "%", "argument shapes (calls)");
  for (size_t i : order) {
    const KernelProfile &k = p.kernels[i];
    // The implementation that ran, or "mixed" (then each shape says which).
    auto implOf = [](const uint64_t (&calls)[kNumKernelImpls], uint64_t total) -> std::string {
      for (unsigned i = 0; i < kNumKernelImpls; ++i)
        if (calls[i] == total) return kernelImplName(static_cast<KernelImpl>(i));
      std::string m;
      for (unsigned i = 0; i < kNumKernelImpls; ++i)
        if (calls[i]) m += (m.empty() ? "" : "+") + std::string(kernelImplName(static_cast<KernelImpl>(i)));
      return m;
    };
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
    std::fprintf(stderr, "  %-28s %-9s %8llu %12.3f %6.1f%%  %s\n", exe.kernels[i].name.c_str(), impl.c_str(),
                 static_cast<unsigned long long>(k.calls), k.seconds * 1e3,
                 p.totalSeconds > 0 ? 100 * k.seconds / p.totalSeconds : 0.0, shapes.c_str());
  }
  double other = p.totalSeconds - kernelTotal - p.shapeFuncSeconds;
  std::fprintf(stderr, "Time split: kernels %.3f ms (%.1f%%), shape functions %.3f ms (%.1f%%, %llu calls), "
                       "other VM work %.3f ms (%.1f%%), total %.3f ms, %llu instructions\n",
               kernelTotal * 1e3, p.totalSeconds > 0 ? 100 * kernelTotal / p.totalSeconds : 0.0,
               p.shapeFuncSeconds * 1e3, p.totalSeconds > 0 ? 100 * p.shapeFuncSeconds / p.totalSeconds : 0.0,
               static_cast<unsigned long long>(p.shapeFuncCalls), other * 1e3,
               p.totalSeconds > 0 ? 100 * other / p.totalSeconds : 0.0, p.totalSeconds * 1e3,
               static_cast<unsigned long long>(p.instructions));
  if (library && library->primitivesCreated())
    std::fprintf(stderr, "Library kernels (oneDNN): %llu primitives created (cache misses, all runs) in %.3f ms, "
                         "%zu cached\n",
                 static_cast<unsigned long long>(library->primitivesCreated()), library->creationSeconds() * 1e3,
                 library->primitivesCached());
  if (library && library->weightsPacked())
    std::fprintf(stderr, "Library weights (oneDNN): %llu constants packed (all runs) into %llu bytes in %.3f ms\n",
                 static_cast<unsigned long long>(library->weightsPacked()),
                 static_cast<unsigned long long>(library->packedBytes()), library->packSeconds() * 1e3);
  if (library && library->splitCalls())
    std::fprintf(stderr, "Library threads (oneDNN): %llu calls (all runs) split by output columns, a block per thread\n",
                 static_cast<unsigned long long>(library->splitCalls()));
  // Counts per run; peaks over all runs.
  const Allocator &a = defaultAllocator(Device::CPU);
  AllocStats s = a.stats();
  auto perRun = [&](uint64_t x) { return static_cast<unsigned long long>((x + runs / 2) / runs); };
  std::fprintf(stderr,
               "Memory (%s allocator, per run): %llu allocations (%llu pool hits, %llu from the system), "
               "%llu bytes requested, peak %llu bytes live, peak %llu bytes reserved, %.3f ms allocating\n",
               a.kindName(), perRun(s.allocations), perRun(s.poolHits), perRun(s.systemAllocations),
               perRun(s.bytesAllocated), static_cast<unsigned long long>(s.peakBytes),
               static_cast<unsigned long long>(s.peakReserved), static_cast<double>(s.nanoseconds) / 1e6 / runs);
  if (cuda::DeviceRuntime *dev = vm.options().device) {
    // Device kernels run asynchronously: their rows above time the launch
    // (or the cuBLAS call's return), not the work on the device.
    const cuda::DeviceStats &d = dev->stats();
    AllocStats ds = dev->allocator().stats();
    std::fprintf(stderr,
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
}

/// Where the value of type `t` that starts at `line[pos]` ends: a tensor
/// literal is its first word and the numbers after it; anything else (an
/// `@file`, a constructor or tuple expression) runs to the first space
/// outside parentheses.
size_t valueEnd(const TypeDesc &t, const std::string &line, size_t pos) {
  auto word = [&](size_t p) {
    int depth = 0;
    while (p < line.size() && (depth > 0 || !std::isspace(static_cast<unsigned char>(line[p])))) {
      if (line[p] == '(') ++depth;
      else if (line[p] == ')' && depth > 0) --depth;
      ++p;
    }
    return p;
  };
  size_t end = word(pos);
  std::string first = line.substr(pos, end - pos);
  if (t.kind != TypeDesc::Kind::Tensor || first[0] == '@' || first.find('=') == std::string::npos) return end;
  // A literal: numbers follow until a word that starts another value.
  auto isNumber = [](const std::string &w) {
    if (w.find('=') != std::string::npos || w.find('(') != std::string::npos || w[0] == '@') return false;
    std::string l;
    for (char c : w) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (l == "inf" || l == "-inf" || l == "+inf" || l == "nan" || l == "-nan" || l == "true" || l == "false")
      return true;
    return std::strchr("+-.0123456789", w[0]) != nullptr;
  };
  while (true) {
    size_t p = end;
    while (p < line.size() && std::isspace(static_cast<unsigned char>(line[p]))) ++p;
    if (p == line.size()) return end;
    size_t e = word(p);
    if (!isNumber(line.substr(p, e - p))) return end;
    end = e;
  }
}

/// Reads --instances: one instance a line (blank lines and '#' comments
/// skipped), each value checked against the function's signature. A line
/// that does not give a valid instance is that instance's failure
/// (`bad[i]`: "FILE:LINE: what is wrong"), not the run's: the others run.
/// Only an unreadable or empty file fails the whole run.
bool readInstances(const Executable &exe, const VMFunction &fn, const std::string &path,
                   std::vector<std::vector<ObjectRef>> &out, std::vector<std::string> &bad) {
  std::string text, error;
  if (!readTextFile(path, text, error)) {
    std::cerr << "nimble-run: error: " << error << "\n";
    return false;
  }
  std::string dir = ".";
  if (size_t slash = path.rfind('/'); slash != std::string::npos) dir = path.substr(0, slash);
  size_t lineNo = 0;
  for (size_t start = 0; start < text.size();) {
    size_t stop = text.find('\n', start);
    if (stop == std::string::npos) stop = text.size();
    std::string line = text.substr(start, stop - start);
    start = stop + 1;
    ++lineNo;
    size_t pos = 0;
    auto skip = [&] {
      while (pos < line.size() && std::isspace(static_cast<unsigned char>(line[pos]))) ++pos;
    };
    skip();
    if (pos == line.size() || line[pos] == '#') continue;
    std::vector<ObjectRef> args;
    std::string why;
    for (size_t i = 0; i < fn.paramTypes.size() && why.empty(); ++i) {
      skip();
      std::string what = "input " + std::to_string(i) + " (%" + fn.paramNames[i] + ")";
      if (pos == line.size()) {
        why = std::to_string(i) + " input" + (i == 1 ? "" : "s") + "; @" + fn.name + " takes " +
              std::to_string(fn.paramTypes.size());
        break;
      }
      size_t end = valueEnd(fn.paramTypes[i], line, pos);
      std::string value = line.substr(pos, end - pos);
      pos = end;
      ObjectRef v;
      if (!parseValue(exe, fn.paramTypes[i], value, dir, v, error) ||
          !checkValue(exe, fn.paramTypes[i], v.get(), what, error))
        why = (error.rfind(what, 0) == 0 ? "" : what + ": ") + error;
      else
        args.push_back(v);
    }
    skip();
    if (why.empty() && pos != line.size())
      why = "text after its " + std::to_string(fn.paramTypes.size()) + " input" +
            (fn.paramTypes.size() == 1 ? "" : "s") + ": '" + line.substr(pos, 40) + "'";
    bad.push_back(why.empty() ? "" : path + ":" + std::to_string(lineNo) + ": " + why);
    if (!why.empty()) args.clear();
    out.push_back(std::move(args));
  }
  if (out.empty()) {
    std::cerr << "nimble-run: error: '" << path << "' has no instances\n";
    return false;
  }
  return true;
}

void printBatchProfile(const VirtualMachine &vm, int runs) {
  const BatchProfile &b = vm.profile().batch;
  uint64_t launches = b.rowLaunches + b.invariantLaunches + b.singleCalls + b.fallbackCalls;
  double total = vm.profile().totalSeconds;
  std::fprintf(stderr,
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
  std::fprintf(stderr, "Auto-batching time: scheduling %.3f ms (%.1f%%), stacking and scattering rows %.3f ms (%.1f%%), "
                       "row tables %.3f ms (%.1f%%), %llu scheduling rounds\n",
               b.scheduleSeconds * 1e3, total > 0 ? 100 * b.scheduleSeconds / total : 0.0, b.gatherSeconds * 1e3,
               total > 0 ? 100 * b.gatherSeconds / total : 0.0, b.tableSeconds * 1e3,
               total > 0 ? 100 * b.tableSeconds / total : 0.0, static_cast<unsigned long long>(b.rounds));
  std::fprintf(stderr, "Gather fusion: %llu of the row launches for %llu calls read and wrote the rows in place; "
                       "kernels measured faster in place: %llu, with stacked copies: %llu\n",
               static_cast<unsigned long long>(b.fusedLaunches), static_cast<unsigned long long>(b.fusedCalls),
               static_cast<unsigned long long>(b.chosenFused), static_cast<unsigned long long>(b.chosenStacked));
}

/// --benchmark: `n` timed calls of `once` after resetting the profile and
/// the allocator's statistics (the first run was the warm-up); `ms` gets the
/// times, sorted. Stops at the first failure.
Status timeRuns(VirtualMachine &vm, Allocator &alloc, int n, std::vector<double> &ms,
                const std::function<Status()> &once) {
  vm.resetProfile();
  alloc.resetStats();
  for (int i = 0; i < n; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Status s = once();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!s.ok()) return s;
  }
  std::sort(ms.begin(), ms.end());
  return Status::success();
}

/// --instances: run, print or write every instance's results, benchmark and
/// profile the whole batch.
int runInstancesTool(const Options &o, VirtualMachine &vm, const VMFunction &fn,
                     std::vector<std::vector<ObjectRef>> instances, const std::vector<std::string> &bad,
                     const LibraryKernels *library) {
  const Executable &exe = vm.executable();
  Allocator &alloc = defaultAllocator(Device::CPU);
  alloc.setTiming(o.profile);
  alloc.resetStats();
  // Instances whose line was invalid do not run; the others run together.
  std::vector<size_t> valid;
  std::vector<std::vector<ObjectRef>> runnable;
  for (size_t i = 0; i < instances.size(); ++i)
    if (bad[i].empty()) {
      valid.push_back(i);
      runnable.push_back(std::move(instances[i]));
    }
  std::vector<InstanceOutcome> ran, outcomes(instances.size());
  std::vector<std::vector<ObjectRef>> again = o.benchmark > 0 ? runnable : std::vector<std::vector<ObjectRef>>{};
  Status st = vm.runInstances(o.function, std::move(runnable), ran, o.autoBatch);
  if (!st.ok()) {
    std::cerr << "nimble-run: error: " << st.message << "\n";
    return kExitError;
  }
  for (size_t k = 0; k < valid.size(); ++k) outcomes[valid[k]] = std::move(ran[k]);
  for (size_t i = 0; i < instances.size(); ++i)
    if (!bad[i].empty()) outcomes[i].status = Status::error(bad[i]);
  size_t failedFirst = 0;
  for (const InstanceOutcome &r : outcomes) failedFirst += !r.status.ok();
  int runs = 1;
  if (o.benchmark > 0) {
    std::vector<double> ms;
    timeRuns(vm, alloc, o.benchmark, ms, [&] {
      std::vector<InstanceOutcome> r;
      vm.runInstances(o.function, again, r, o.autoBatch);
      return Status::success(); // each instance's failure was reported by the first run
    });
    runs = o.benchmark;
    double med = ms[ms.size() / 2];
    // Throughput counts the instances that succeeded (in the first run).
    size_t good = outcomes.size() - failedFirst;
    std::printf("latency: min %.3f ms, median %.3f ms, max %.3f ms over %d runs of %zu instances (after 1 warm-up); "
                "%.1f instances/s (median), auto-batch %s%s\n",
                ms.front(), med, ms.back(), o.benchmark, again.size(), med > 0 ? 1e3 * double(good) / med : 0.0,
                o.autoBatch ? "on" : "off",
                failedFirst ? (", " + std::to_string(failedFirst) + " failed instances not counted").c_str() : "");
  }
  bool ok = true;
  std::string error;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const InstanceOutcome &r = outcomes[i];
    if (!r.status.ok()) {
      std::cerr << "nimble-run: error: instance " << i << ": " << r.status.message << "\n";
      if (o.outputDir.empty()) std::printf("instance %zu: failed\n", i);
      ok = false;
      continue;
    }
    if (o.outputDir.empty()) std::printf("instance %zu:\n", i);
    for (size_t j = 0; j < r.results.size(); ++j) {
      const TypeDesc &t = fn.resultTypes[j];
      if (o.outputDir.empty()) {
        std::printf("%s\n", printValue(exe, t, *r.results[j]).c_str());
        continue;
      }
      std::string base = o.outputDir + "/" + std::to_string(i) + "." + std::to_string(j);
      const Tensor *x = asTensor(r.results[j].get());
      bool wrote;
      if (x) {
        std::string header;
        if (Status hs = npyHeader(*x, header); !hs.ok()) {
          std::cerr << "nimble-run: error: " << base << ".npy: " << hs.message << "\n";
          return kExitError;
        }
        std::string_view data(reinterpret_cast<const char *>(x->rawData()), x->numBytes());
        wrote = writeOutputAtomically(base + ".npy", {header, data}, error);
      } else {
        wrote = writeOutputAtomically(base + ".txt", printValue(exe, t, *r.results[j]) + "\n", error);
      }
      if (!wrote) {
        std::cerr << "nimble-run: error: " << error << "\n";
        return kExitError;
      }
    }
  }
  if (o.profile) {
    printProfile(vm, runs, library);
    if (o.autoBatch) printBatchProfile(vm, runs);
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::cerr << "nimble-run: error: cannot write to standard output: " << std::strerror(errno) << "\n";
    return kExitError;
  }
  return ok ? kExitOk : kExitError;
}

} // namespace

// Every `new` of nimble-run counts for NIMBLE_FAIL_ALLOC (vm/support/FailAlloc.h), so
// the out-of-memory test reaches every allocation of the tool and the VM.
// All the unaligned forms are replaced together, over malloc and free: a
// sanitizer runtime that keeps its own for the others would see malloc'd
// memory freed by its operator delete (an alloc-dealloc mismatch).
void *operator new(std::size_t size) {
  if (injectAllocationFailure()) throw std::bad_alloc();
  if (void *p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void *operator new[](std::size_t size) { return operator new(size); }
void *operator new(std::size_t size, const std::nothrow_t &) noexcept {
  if (injectAllocationFailure()) return nullptr;
  return std::malloc(size ? size : 1);
}
void *operator new[](std::size_t size, const std::nothrow_t &t) noexcept {
  return operator new(size, t);
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { std::free(p); }

namespace {

// A program with device code (nimblec --target=cuda), or --device=cuda[:N],
// runs its device part on a CUDA device (vm/cuda/CudaRuntime.h): the driver, the
// device, the module and (for cuBLAS entries) cuBLAS are opened here, before
// anything runs, so that a machine without them gets one line naming what is
// missing. --kernels=reference instead runs such a program entirely on the
// host (device storages in host memory, every kernel's reference
// implementation) and never loads the driver or the device code.
int openCuda(const Options &o, const Executable &exe, std::unique_ptr<cuda::DeviceRuntime> &rt, bool &hostDevices) {
  const bool wanted = o.device != "cpu";
  if (o.kernels == KernelMode::Reference) {
    if (wanted) {
      std::cerr << "nimble-run: error: --kernels=reference runs every kernel on the host; it does not take --device="
                << o.device << "\n";
      return kExitUsage;
    }
    hostDevices = !exe.cuda.empty();
    return kExitOk;
  }
  if (exe.cuda.empty() && !wanted) return kExitOk;
  int ordinal = o.device.size() > 5 ? std::stoi(o.device.substr(5)) : 0;
  std::string who = exe.cuda.empty() ? "--device=" + o.device : o.file + " (compiled for cuda " + exe.cuda.arch + ")";
  std::string error;
  rt = cuda::DeviceRuntime::open(exe, ordinal, error);
  if (!rt) {
    std::cerr << "nimble-run: error: " << who << " needs CUDA: " << error << "\n";
    return kExitError;
  }
  return kExitOk;
}

int runTool(int argc, char **argv) {
  Options o;
  int early = parseArgs(argc, argv, o);
  if (early >= 0) return early;
  setDefaultAllocatorKind(o.allocator);

  auto exe = std::make_shared<Executable>();
  // Declared before every value of the run: device storages go back to its
  // pool, so it must outlive them.
  std::unique_ptr<cuda::DeviceRuntime> device;
  std::string error;
  if (!readExecutableFile(o.file, *exe, error)) {
    std::cerr << "nimble-run: error: " << error << "\n";
    return kExitError;
  }
  bool hostDevices = false;
  if (int rc = openCuda(o, *exe, device, hostDevices); rc != kExitOk) return rc;
  int fi = exe->findFunction(o.function);
  if (fi < 0) {
    std::string names;
    for (auto &f : exe->functions) names += (names.empty() ? "" : ", ") + ("@" + f.name);
    std::cerr << "nimble-run: error: no function @" << o.function << " in '" << o.file
              << "' (it has " << names << ")\n";
    return kExitError;
  }
  const VMFunction &fn = exe->functions[static_cast<size_t>(fi)];
  std::vector<std::vector<ObjectRef>> instances;
  std::vector<std::string> badInstances;
  if (!o.instances.empty() && !readInstances(*exe, fn, o.instances, instances, badInstances)) return kExitError;
  if (o.instances.empty() && o.inputs.size() != fn.paramTypes.size()) {
    std::cerr << "nimble-run: error: @" << fn.name << " takes " << fn.paramTypes.size() << " input"
              << (fn.paramTypes.size() == 1 ? "" : "s") << ", got " << o.inputs.size() << "\n";
    for (size_t i = 0; i < fn.paramTypes.size(); ++i)
      std::cerr << "  input " << i << " (%" << fn.paramNames[i] << "): " << typeToString(*exe, fn.paramTypes[i]) << "\n";
    return kExitError;
  }
  const NativeKernels *vo_native = nullptr;
  std::vector<ObjectRef> args;
  for (size_t i = 0; i < o.inputs.size(); ++i) {
    std::string what = "input " + std::to_string(i) + " (%" + fn.paramNames[i] + ")";
    ObjectRef v;
    if (!parseValue(*exe, fn.paramTypes[i], o.inputs[i], ".", v, error) ||
        !checkValue(*exe, fn.paramTypes[i], v.get(), what, error)) {
      std::cerr << "nimble-run: error: " << (error.rfind(what, 0) == 0 ? "" : what + ": ") << error << "\n";
      return kExitError;
    }
    args.push_back(v);
  }
  if (o.outputs.size() > fn.resultTypes.size() || o.expected.size() > fn.resultTypes.size()) {
    std::cerr << "nimble-run: error: @" << fn.name << " has " << fn.resultTypes.size()
              << " output(s); more --output or --expected-output flags were given\n";
    return kExitError;
  }
  std::vector<ObjectRef> expected;
  for (size_t i = 0; i < o.expected.size(); ++i) {
    ObjectRef v;
    if (!parseValue(*exe, fn.resultTypes[i], o.expected[i], ".", v, error)) {
      std::cerr << "nimble-run: error: expected output " << i << ": " << error << "\n";
      return kExitError;
    }
    expected.push_back(v);
  }

  NativeKernels native;
  if (o.kernels != KernelMode::Reference && !exe->native.empty()) {
    std::string why;
    if (native.load(*exe, why)) {
      vo_native = &native;
    } else {
      std::cerr << "nimble-run: warning: running reference kernels instead of native code: " << why << "\n";
    }
  }
  unsigned threads = o.threads ? o.threads : availableCores();
  LibraryKernels library(*exe);
  LibraryKernels *vo_library = nullptr;
  if ((o.kernels == KernelMode::Library || o.kernels == KernelMode::Auto) && library.count() == 0) {
    // Nothing for oneDNN in this executable: do not even start it.
  } else if (o.kernels == KernelMode::Library || o.kernels == KernelMode::Auto) {
    std::string why;
    if (library.init(why)) {
      LibraryKernels::setThreads(threads);
      vo_library = &library;
    } else {
      std::cerr << "nimble-run: warning: running the other kernels instead of oneDNN: " << why << "\n";
    }
  }
  TuningTable tuning;
  if (!o.tuning.empty() && access(o.tuning.c_str(), F_OK) == 0 && !tuning.load(o.tuning, error)) {
    std::cerr << "nimble-run: error: " << error << "\n";
    return kExitError;
  }
  VMOptions vo;
  vo.native = vo_native;
  vo.library = vo_library;
  vo.kernels = o.kernels;
  vo.tuning = &tuning;
  vo.threads = threads;
  vo.device = device.get();
  vo.hostDevices = hostDevices;
  vo.maxCallDepth = o.maxDepth;
  vo.maxInstructions = o.maxInstructions;
  vo.profile = o.profile;
  vo.gather = o.gather;
  vo.trace = o.trace;
  vo.traceStream = &std::cerr;
  VirtualMachine vm(exe, vo);
  if (!o.instances.empty()) {
    int rc = runInstancesTool(o, vm, fn, std::move(instances), badInstances, vo_library);
    if (rc == kExitOk && !o.tuning.empty() && tuning.measured() > 0 && !tuning.save(o.tuning, error)) {
      std::cerr << "nimble-run: error: " << error << "\n";
      return kExitError;
    }
    return rc;
  }
  std::vector<ObjectRef> results;
  // The memory statistics cover the program's runs, not reading the inputs.
  Allocator &alloc = defaultAllocator(Device::CPU);
  alloc.setTiming(o.profile);
  alloc.resetStats();
  Status st = vm.run(o.function, args, results);
  if (!st.ok()) {
    std::cerr << st.message << "\n";
    return kExitError;
  }
  int runs = 1;
  if (o.benchmark > 0) {
    std::vector<double> ms;
    Status s = timeRuns(vm, alloc, o.benchmark, ms, [&] {
      std::vector<ObjectRef> r;
      return vm.run(o.function, args, r);
    });
    if (!s.ok()) {
      std::cerr << s.message << "\n";
      return kExitError;
    }
    runs = o.benchmark;
    std::printf("latency: min %.3f ms, median %.3f ms, max %.3f ms over %d runs (after 1 warm-up)\n",
                ms.front(), ms[ms.size() / 2], ms.back(), o.benchmark);
  }

  bool ok = true;
  for (size_t i = 0; i < results.size(); ++i) {
    const TypeDesc &t = fn.resultTypes[i];
    std::string what = "output " + std::to_string(i);
    if (i < o.outputs.size() && o.outputs[i] != "-") {
      const Tensor *x = asTensor(results[i].get());
      if (!x) {
        std::cerr << "nimble-run: error: " << what << " is not a tensor; it cannot be written as .npy\n";
        return kExitError;
      }
      // The header, then the tensor's bytes in place, into a temporary
      // renamed at the end: no copy of a big output, and no partial file
      // when writing fails.
      std::string path = o.outputs[i].substr(1), header;
      if (Status hs = npyHeader(*x, header); !hs.ok()) {
        std::cerr << "nimble-run: error: " << path << ": " << hs.message << "\n";
        return kExitError;
      }
      std::string_view data(reinterpret_cast<const char *>(x->rawData()), x->numBytes());
      if (!writeOutputAtomically(path, {header, data}, error)) {
        std::cerr << "nimble-run: error: " << error << "\n";
        return kExitError;
      }
    } else {
      std::printf("%s\n", printValue(*exe, t, *results[i]).c_str());
    }
    if (i < expected.size()) {
      std::string why;
      if (!compare(*results[i], *expected[i], o.tolerance, what, why)) {
        std::cerr << "nimble-run: error: " << why << "\n";
        ok = false;
      }
    }
  }
  if (o.profile) printProfile(vm, runs, vo_library);
  if (!o.tuning.empty() && tuning.measured() > 0 && !tuning.save(o.tuning, error)) {
    std::cerr << "nimble-run: error: " << error << "\n";
    return kExitError;
  }
  // Results printed to a full disk or a closed pipe are an error, not a
  // success with lost output.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::cerr << "nimble-run: error: cannot write to standard output: " << std::strerror(errno) << "\n";
    return kExitError;
  }
  return ok ? kExitOk : kExitError;
}

} // namespace

int main(int argc, char **argv) {
  // What the run itself cannot place (reading the executable, the inputs,
  // printing the outputs) ends here: one line, exit 1, never an abort. The
  // VM reports its own with the .nir location (VirtualMachine::run).
  armAllocationFailures();
  try {
    return runTool(argc, argv);
  } catch (const std::bad_alloc &) {
    std::fputs("nimble-run: error: out of memory\n", stderr);
    return kExitError;
  }
}
