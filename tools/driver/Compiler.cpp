//===- Compiler.cpp - The compiler driver: .nir text to an executable -----===//

#include "tools/driver/Compiler.h"

#include "codegen/BytecodeEmitter.h"
#include "codegen/Safetensors.h"
#include "passes/Pipelines.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "vm/format/Format.h"

#include <map>
#include <sstream>

namespace nimble::driver {

passes::PassManagerOptions CompileOptions::defaultPassManagerOptions() {
  passes::PassManagerOptions p;
  p.verifyEach = false;
  p.verifyAfterPipeline = true;
  return p;
}

std::string pipelineOf(const CompileOptions &opts) {
  return opts.passes.empty() ? passes::pipelineFor(opts.optLevel, opts.target, opts.printBatching, opts.fpReassociate) : opts.passes;
}

bool checkCustomPipeline(const std::string &pipeline, std::string &error) {
  std::ostringstream quietStream;
  ir::DiagnosticEngine quiet(nullptr, quietStream);
  passes::PassManager probe(quiet, quietStream);
  if (!probe.parsePipeline(pipeline, error)) {
    if (size_t at = error.find("(see --list-passes)"); at != std::string::npos)
      error.replace(at, 19, "(see nimble-opt --list-passes)");
    error = "--passes: " + error;
    return false;
  }
  bool manifests = false;
  for (const auto &p : probe.passes()) manifests |= p->name() == "manifest-memory";
  if (!manifests) {
    error = "--passes: the pipeline must run manifest-memory (bytecode needs explicit memory)";
    return false;
  }
  return true;
}

namespace {

/// Loads every external constant, checking names, dtypes and shapes.
bool loadWeights(const ir::Module &m, const std::string &dir, codegen::GlobalData &data,
                 ir::DiagnosticEngine &diag) {
  std::map<std::string, std::unique_ptr<codegen::SafetensorsFile>> files;
  for (auto &g : m.globals()) {
    if (!g->isExternal()) continue;
    std::string path = g->file();
    if (path.empty() || path[0] != '/') path = dir + "/" + path;
    auto &file = files[path];
    if (!file) {
      file = std::make_unique<codegen::SafetensorsFile>();
      std::string err;
      if (!file->load(path, err)) {
        diag.error(g->declLoc(), "constant @" + g->name() + ": " + err);
        return false;
      }
    }
    const auto *e = file->find(g->key());
    if (!e) {
      diag.error(g->declLoc(), "constant @" + g->name() + ": no tensor '" + g->key() + "' in '" + path + "'");
      return false;
    }
    ir::Type t = g->type();
    if (e->dtype != t.dtype() || e->shape != t.dims()) {
      diag.error(g->declLoc(), "constant @" + g->name() + ": tensor '" + g->key() + "' in '" + path +
                                   "' is " + formatSig({e->dtype, e->shape}) + " but the constant is declared " +
                                   t.str());
      return false;
    }
    const uint8_t *p = file->data(*e);
    data[g.get()] = std::vector<uint8_t>(p, p + (e->end - e->begin));
  }
  return true;
}

} // namespace

Compilation::Compilation(CompileOptions opts, std::ostream &diagStream)
    : opts_(std::move(opts)), diagStream_(diagStream), diag_(&sm_, diagStream) {}

Compilation::~Compilation() = default;

bool Compilation::parse(std::string text, const std::string &name) {
  sm_.addBuffer(name, std::move(text)); // the only copy: a source of a million ops is 30 MB
  name_ = name;
  module_ = ir::parseModule(*sm_.buffer(name), name, ctx_, diag_);
  ir::VerifyOptions parsed;
  parsed.structureVerified = true; // by parseModule
  return module_ && ir::succeeded(ir::verifyModule(*module_, diag_, parsed));
}

bool Compilation::optimize(std::string &error) {
  pm_ = std::make_unique<passes::PassManager>(diag_, diagStream_, opts_.pm);
  if (!pm_->parsePipeline(pipelineOf(opts_), error)) {
    error = "internal error: " + error;
    return false;
  }
  pm_->setSource({*sm_.buffer(name_), name_, 1});
  return ir::succeeded(pm_->run(*module_));
}

bool Compilation::emitBytecode(std::string &error) {
  codegen::GlobalData weights;
  if (!loadWeights(*module_, opts_.weightsDir, weights, diag_)) return false;
  if (ir::failed(codegen::emitExecutable(*module_, weights, exe_, diag_))) return false;
  if (!vm::verify(exe_, error)) {
    error = "internal error: the emitted executable is invalid: " + error;
    return false;
  }
  return true;
}

bool Compilation::generateNative(bool link, codegen::NativeResult &out, std::string &error) {
  codegen::NativeOptions nopts;
  nopts.cpu = opts_.mcpu;
  nopts.attrs = opts_.mattr;
  nopts.optLevel = opts_.optLevel;
  if (!codegen::generateNativeKernels(*module_, exe_, nopts, link, out, error)) {
    error = "error: " + error;
    return false;
  }
  if (link && !vm::verify(exe_, error)) {
    error = "internal error: the native-code table is invalid: " + error;
    return false;
  }
  return true;
}

bool Compilation::generateCuda(bool assemble, codegen::CudaResult &out, std::string &error) {
  codegen::CudaOptions copts;
  copts.arch = opts_.cudaArch;
  copts.optLevel = opts_.optLevel;
  copts.ptxas = assemble ? opts_.ptxas : "none";
  if (!codegen::generateCudaKernels(*module_, exe_, copts, out, error)) {
    error = "error: " + error;
    return false;
  }
  if (assemble && !vm::verify(exe_, error)) {
    error = "internal error: the cuda-code table is invalid: " + error;
    return false;
  }
  return true;
}

bool compileToBytes(std::string text, const std::string &name, const CompileOptions &opts,
                    std::vector<uint8_t> &bytes, std::string &error) {
  std::ostringstream diag;
  auto fail = [&] {
    // Diagnostics first, as nimblec prints them; then the driver's message.
    std::string all = diag.str();
    if (!error.empty()) all += (all.empty() || all.back() == '\n' ? "" : "\n") + error;
    while (!all.empty() && all.back() == '\n') all.pop_back();
    error = all.empty() ? "error: compilation failed" : all;
    return false;
  };
  if (!opts.passes.empty() && !checkCustomPipeline(opts.passes, error)) return fail();
  Compilation c(opts, diag);
  if (!c.parse(std::move(text), name) || !c.optimize(error) || !c.emitBytecode(error)) return fail();
  if (opts.kernels == "native") {
    codegen::NativeResult nres;
    if (!c.generateNative(/*link=*/true, nres, error)) return fail();
  }
  if (opts.target == "cuda") {
    codegen::CudaResult cres;
    if (!c.generateCuda(/*assemble=*/true, cres, error)) return fail();
  }
  bytes = vm::serialize(c.executable());
  return true;
}

} // namespace nimble::driver
