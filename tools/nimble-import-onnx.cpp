//===- nimble-import-onnx.cpp - ONNX models to Nimble IR (.nir) -----------===//
//
// parse the model -> import (frontend/onnx) -> verify -> write the weight
// side file, then the .nir, each atomically. docs/import-onnx.md is the
// manual; --help below says the same.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Importer.h"
#include "frontend/onnx/SafetensorsWriter.h"
#include "ir/Printer.h"
#include "tools/ToolSupport.h"

#include <climits>
#include <cstdlib>
#include <iostream>

using namespace nimble;
using namespace nimble::tools;

namespace {

constexpr const char *kHelp = R"(OVERVIEW: nimble-import-onnx - import an ONNX model (.onnx) as Nimble IR (.nir)

USAGE: nimble-import-onnx [options] <model.onnx>

OPTIONS:
  -o <file>                 Write the .nir to <file> (atomically); default: stdout
  --weights=<file>          The safetensors side file of the large initializers
                            (default: the output's name with .safetensors for its
                            extension, beside it; with stdout, <model>.safetensors in
                            the current directory). Written only when needed
  --inline-limit=<bytes>    Initializers of at most this many bytes are inline
                            constants, larger ones go to the side file (default 1024)
  --function=<name>         Name of the imported function (default: main)
  --print-debuginfo         Print loc("<model>":N:1) after each op, N the node's number
                            in graph order (sub-graphs counted where they are)
  --list-ops                Print the supported ONNX ops (type, first opset, the .nir
                            ops they become, limits) and the unsupported ones, and exit
  --help                    Show this help and exit
  --version                 Show the version and exit

Opsets 1 to 21 of ONNX's default domain (below 7, ops that did not change
since; each op's first opset: --list-ops). Pipe the output to the compiler:
  nimble-import-onnx model.onnx | nimblec - -o model.nbc

Exit status: 0 on success, 1 when the model cannot be read or imported (one line:
<model>: error: ..., and no output file), 2 on a usage error.
)";

struct Options {
  std::string input, output = "-", weights, function = "main";
  uint64_t inlineLimit = 1024;
  bool debugInfo = false, listOps = false;
};

int usageError(const std::string &msg) { return tools::usageError("nimble-import-onnx", msg); }

int parseArgs(int argc, char **argv, Options &o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::optional<std::string> v;
    if (a == "--help" || a == "-h") {
      std::cout << kHelp;
      return kExitOk;
    }
    if (a == "--version") {
      std::cout << "nimble-import-onnx (Nimble) 0.1, ONNX opsets 1 to 21\n";
      return kExitOk;
    }
    if (a == "-o") {
      if (i + 1 >= argc) return usageError("-o needs a file name");
      o.output = argv[++i];
    } else if ((v = flagValue(a, "--weights"))) {
      if (v->empty()) return usageError("--weights needs a file name");
      o.weights = *v;
    } else if ((v = flagValue(a, "--inline-limit"))) {
      char *end = nullptr;
      errno = 0;
      unsigned long long n = std::strtoull(v->c_str(), &end, 10);
      if (v->empty() || *end || errno || (*v)[0] == '-')
        return usageError("--inline-limit takes a number of bytes, got '" + *v + "'");
      o.inlineLimit = n;
    } else if ((v = flagValue(a, "--function"))) {
      if (v->empty()) return usageError("--function needs a name");
      o.function = *v;
    } else if (a == "--print-debuginfo") {
      o.debugInfo = true;
    } else if (a == "--list-ops") {
      o.listOps = true;
    } else if (a.size() > 1 && a[0] == '-') {
      return usageError("unknown option '" + a + "'");
    } else {
      if (!o.input.empty()) return usageError("more than one input file");
      o.input = a;
    }
  }
  if (o.listOps) return -1;
  if (o.input.empty()) return usageError("no input file");
  if (o.input == "-") return usageError("the model must be a file (its external data is found beside it)");
  return -1;
}

std::string dirOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

std::string baseOf(const std::string &path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// `name` with its extension (after the last dot of the file name) replaced.
std::string withExtension(const std::string &path, const std::string &ext) {
  size_t slash = path.rfind('/'), dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + ext;
  return path.substr(0, dot) + ext;
}

std::string realDir(const std::string &dir) {
  char *r = ::realpath(dir.c_str(), nullptr);
  std::string s = r ? r : dir;
  std::free(r);
  return s;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  int early = parseArgs(argc, argv, o);
  if (early >= 0) return early;
  if (o.listOps) {
    std::cout << onnx_import::listOps();
    return kExitOk;
  }

  // Where the side file goes, and how the .nir names it: relative to the
  // .nir's directory (nimblec's default --weights-dir), or to the current
  // directory for stdout (nimblec reading `-` looks there).
  std::string weights = o.weights;
  if (weights.empty())
    weights = o.output == "-" ? withExtension(baseOf(o.input), ".safetensors") : withExtension(o.output, ".safetensors");
  std::string ref = weights;
  if (o.output != "-") {
    if (realDir(dirOf(weights)) == realDir(dirOf(o.output))) ref = baseOf(weights);
    else if (weights[0] != '/') ref = realDir(dirOf(weights)) + "/" + baseOf(weights);
  }

  onnx_import::ImportOptions io;
  io.modelPath = o.input;
  io.displayName = displayName(o.input);
  io.inlineLimit = o.inlineLimit;
  io.weightsRef = ref;
  io.functionName = o.function;
  ir::Context ctx;
  onnx_import::ImportResult result;
  std::string error;
  if (!onnx_import::importOnnx(io, ctx, result, error)) {
    std::cerr << io.displayName << ": error: " << error << "\n";
    return kExitError;
  }
  ir::PrintOptions popts;
  popts.debugInfo = o.debugInfo;
  std::string text = ir::printModuleToString(*result.module, popts);
  if (!result.weights.empty()) {
    std::string header = onnx_import::safetensorsHeader(result.weights);
    std::vector<std::string_view> pieces = {header};
    for (const auto &w : result.weights)
      pieces.emplace_back(reinterpret_cast<const char *>(w.bytes.data()), w.bytes.size());
    if (!writeOutputAtomically(weights, pieces, error)) {
      std::cerr << "nimble-import-onnx: error: " << error << "\n";
      return kExitError;
    }
  }
  if (!writeOutputAtomically(o.output, text, error)) {
    std::cerr << "nimble-import-onnx: error: " << error << "\n";
    return kExitError;
  }
  return kExitOk;
}
