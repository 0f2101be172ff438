//===- nimble-run.cpp - Run a Nimble executable (.nbc) ---------------------===//
//
// Load and verify an executable, read the inputs, run one function on the VM,
// print or save the outputs, optionally compare them, benchmark, profile or
// trace. Conventions of IREE's iree-run-module. docs/nimble-run.md is the
// manual; --help says the same. Loading, the VM's options and the profile's
// text are the runtime driver's (tools/driver/Runtime.h, shared with the
// Python module); this file parses the flags and formats the outputs. This
// binary links the runtime only: no compiler code, no LLVM.
//
//===----------------------------------------------------------------------===//

#include "tools/ToolSupport.h"
#include "tools/driver/Runtime.h"
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
using namespace nimble::driver;
using namespace nimble::tools;
using namespace nimble::vm;

namespace {

/// Prints result `v` as text on stdout. The text of a big tensor may not fit
/// in memory beside it: a 4 GB output (which the native kernels computed
/// without the temporaries the reference path needs) ended in a bare
/// `nimble-run: error: out of memory` (issue 51 §4). Now the message says
/// which output, its type and size, and the way out.
bool printResultText(const Executable &exe, const TypeDesc &t, const Object &v, const std::string &what) {
  std::string text;
  try {
    text = printValue(exe, t, v);
  } catch (const std::bad_alloc &) {
    text = std::string();
    const Tensor *x = asTensor(const_cast<Object *>(&v));
    std::string size = x ? " (" + x->typeString() + ", " + std::to_string(x->numBytes()) + " bytes)" : "";
    std::fprintf(stderr, "nimble-run: error: out of memory printing %s%s as text; write it to a file with "
                         "--output=@FILE.npy\n", what.c_str(), size.c_str());
    return false;
  }
  std::printf("%s\n", text.c_str());
  return true;
}


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
  --batch-phases=<on|off>    With auto-batching: run no kernel of a program phase while
                             a call of an earlier phase is pending (on, the default;
                             docs/autobatch.md), or ignore the phases (off)
  --batch-window=<n>         With auto-batching: at most n instances in flight; the
                             next starts when one finishes (default 16; 0: all at
                             once)
  --output-dir=<dir>         With --instances: write result j of instance i to
                             <dir>/i.j.npy (tensors) or <dir>/i.j.txt (other values)
                             instead of printing it
  --profile                  Print per-kernel time, calls and argument shapes, the
                             kernel / shape function / other split, and allocation stats
  --trace                    Print each instruction as it executes (to stderr)
  --kernels=<auto|tune|native|library|reference>
                             Which implementation runs each kernel (docs/VM.md):
                             auto (default): oneDNN or the .nbc's native code by a
                               fixed rule on the shapes (oneDNN for products of 2
                               or more rows; one row by a large constant weight
                               on the runtime's panels on AMD CPUs), the same in
                               every process;
                               elsewhere native where present, else reference
                             tune: oneDNN or native code, whichever measures
                               faster per kernel and shape bucket (may differ
                               from process to process; see --tuning)
                             native: the .nbc's native kernels (nimblec
                               --kernels=native) where present, else reference
                             library: oneDNN for the dense kernels it can run, native
                               elsewhere where present, else reference
                             reference: reference kernels only; never maps native code
                               (the mode for .nbc files you do not trust); runs a
                               program compiled for cuda on the host, loading no
                               CUDA driver or device code
  --tuning=<file>            Stored decisions: read from <file> when it exists and
                             used as is by auto and tune; with --kernels=tune, written
                             back with any newly measured ones after the run
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
NIMBLE_KERNEL_ISA=<sse2|avx2|avx512> caps the vector instructions of the
hand-vectorized reference kernels; NIMBLE_CONV_DW_IMPL=<jit_dw|first> picks
oneDNN's depthwise convolution kernel (default: jit_dw on AMD CPUs);
NIMBLE_CONV_SERIAL_MACS=<n> runs oneDNN convolutions of fewer than n
multiply-adds on one thread; NIMBLE_CONV_BATCH_SPLIT=0 keeps a convolution's
batch from being split by images over the threads; NIMBLE_CONV_PAIR=<0|1>
never or always runs a 1x1 conv and the depthwise conv reading it as one
fused primitive (default: stride 2, large intermediates);
NIMBLE_PANEL_PRODUCT=<0|1> never or always (on AVX-512) runs matmuls of 1 to 32
rows (64 on an even thread count) by a constant weight on the runtime's panel
kernel instead of oneDNN or native code (default: from 2 rows on AVX-512, one
row on AMD CPUs only); NIMBLE_PANEL_AHEAD=<0|1> turns its AVX-512 prefetch of the
next block of the weight off or on (default: on except on AMD CPUs; the AVX2
kernel always prefetches)
(docs/nimble-run.md, "Environment").

Exit status: 0 on success, 1 on an invalid executable or input, a run-time error
(out of memory included) or a failed expectation, 2 on a usage error.
)";

struct Options {
  std::string file, function = "main", device = "cpu";
  std::vector<std::string> inputs, outputs, expected;
  std::string instances, outputDir;
  bool autoBatch = true;
  VMOptions::GatherFusion gather = VMOptions::GatherFusion::Auto;
  bool phases = true;
  uint32_t batchWindow = 16;
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
    } else if ((v = flagValue(a, "--batch-phases"))) {
      if (*v != "on" && *v != "off") return usageError("--batch-phases takes on or off, got '" + *v + "'");
      o.phases = *v == "on";
    } else if ((v = flagValue(a, "--batch-window"))) {
      if (!parseUnsigned(*v, 1000000000, n)) return usageError("--batch-window takes a count (0: every instance at once), got '" + *v + "'");
      o.batchWindow = static_cast<uint32_t>(n);
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
        return usageError("--kernels takes auto, tune, native, library or reference, got '" + *v + "'");
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
      std::string what = inputName(fn, i);
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
        if (!printResultText(exe, t, *r.results[j], "instance " + std::to_string(i) + " output " + std::to_string(j)))
          return kExitError;
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
    std::fputs(profileText(vm, runs, library).c_str(), stderr);
    if (o.autoBatch) std::fputs(batchProfileText(vm, runs).c_str(), stderr);
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

int runTool(int argc, char **argv) {
  Options o;
  int early = parseArgs(argc, argv, o);
  if (early >= 0) return early;
  setDefaultAllocatorKind(o.allocator);

  // Declared before every value of the run: device storages go back to its
  // pool, so it must outlive them.
  std::string error;
  std::shared_ptr<Program> program = Program::load(o.file, error);
  if (!program) {
    std::cerr << "nimble-run: error: " << error << "\n";
    return kExitError;
  }
  if (int rc = program->openDevice(o.device, o.kernels, o.file, error); rc != kExitOk) {
    std::cerr << "nimble-run: error: " << error << "\n";
    return rc;
  }
  const Executable *exe = &program->executable();
  const VMFunction *found = program->function(o.function, o.file, error);
  if (!found) {
    std::cerr << "nimble-run: error: " << error << "\n";
    return kExitError;
  }
  const VMFunction &fn = *found;
  std::vector<std::vector<ObjectRef>> instances;
  std::vector<std::string> badInstances;
  if (!o.instances.empty() && !readInstances(*exe, fn, o.instances, instances, badInstances)) return kExitError;
  if (o.instances.empty() && o.inputs.size() != fn.paramTypes.size()) {
    std::cerr << "nimble-run: error: " << inputCountError(*exe, fn, o.inputs.size()) << "\n";
    return kExitError;
  }
  std::vector<ObjectRef> args;
  for (size_t i = 0; i < o.inputs.size(); ++i) {
    std::string what = inputName(fn, i);
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

  RunSettings rs;
  rs.kernels = o.kernels;
  rs.threads = o.threads;
  rs.maxCallDepth = o.maxDepth;
  rs.maxInstructions = o.maxInstructions;
  rs.profile = o.profile;
  rs.gather = o.gather;
  rs.phases = o.phases;
  rs.batchWindow = o.batchWindow;
  rs.trace = o.trace;
  rs.traceStream = &std::cerr;
  std::vector<std::string> warnings;
  Program::Lease lease = program->lease(rs, &warnings);
  for (const std::string &w : warnings) std::cerr << "nimble-run: warning: " << w << "\n";
  TuningTable &tuning = program->tuning();
  if (!o.tuning.empty() && access(o.tuning.c_str(), F_OK) == 0 && !tuning.load(o.tuning, error)) {
    std::cerr << "nimble-run: error: " << error << "\n";
    return kExitError;
  }
  VirtualMachine &vm = lease.vm();
  LibraryKernels *library = lease.library();
  if (!o.instances.empty()) {
    int rc = runInstancesTool(o, vm, fn, std::move(instances), badInstances, library);
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
    } else if (!printResultText(*exe, t, *results[i], what)) {
      return kExitError;
    }
    if (i < expected.size()) {
      std::string why;
      if (!compareValues(*results[i], *expected[i], o.tolerance, what, why)) {
        std::cerr << "nimble-run: error: " << why << "\n";
        ok = false;
      }
    }
  }
  if (o.profile) std::fputs(profileText(vm, runs, library).c_str(), stderr);
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
