//===- compiler_module.cpp - nimble._compiler: .nir to .nbc from Python ---===//
//
// The Python face of the compiler driver (tools/driver/Compiler.h): the
// stages nimblec runs, in process, to the bytes nimblec -o would write. A
// module of its own so that a process that only runs executables (a
// serving replica) never loads LLVM: nimble.compile imports it on first use.
//
// Compilations take a process-wide lock (the passes' statistics and LLVM's
// initialisation are process-wide) and release the GIL while they work, so
// other Python threads go on running executables.
//
//===----------------------------------------------------------------------===//

#include "tools/driver/Compiler.h"

#include <pybind11/pybind11.h>

#include <mutex>
#include <new>

namespace py = pybind11;
using namespace nimble;

namespace {

std::mutex gCompileMutex;

py::bytes compile(std::string text, const std::string &name, int optLevel, const std::string &kernels,
                  const std::string &target, const std::string &weightsDir, const std::string &mcpu,
                  const std::string &mattr, const std::string &passes) {
  if (optLevel < 0 || optLevel > 3) throw py::value_error("opt_level takes 0, 1, 2 or 3");
  if (kernels != "native" && kernels != "reference")
    throw py::value_error("kernels takes 'native' or 'reference', got '" + kernels + "'");
  if (target != "cpu" && target != "cuda") throw py::value_error("target takes 'cpu' or 'cuda', got '" + target + "'");
  if (kernels == "native" && target != "cpu")
    throw py::value_error("kernels='native' generates cpu code; target='" + target + "' has no native kernels yet");
  driver::CompileOptions o;
  o.optLevel = optLevel;
  o.kernels = kernels;
  o.target = target;
  o.weightsDir = weightsDir.empty() ? "." : weightsDir;
  o.mcpu = mcpu;
  o.mattr = mattr;
  o.passes = passes;
  std::vector<uint8_t> bytes;
  std::string error;
  bool ok;
  {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(gCompileMutex);
    try {
      ok = driver::compileToBytes(std::move(text), name, o, bytes, error);
    } catch (const std::bad_alloc &) {
      ok = false;
      error = "error: out of memory";
    }
  }
  if (!ok) {
    py::object cls = py::module_::import("nimble.errors").attr("CompileError");
    PyErr_SetObject(cls.ptr(), py::str(error).ptr());
    throw py::error_already_set();
  }
  return py::bytes(reinterpret_cast<const char *>(bytes.data()), bytes.size());
}

} // namespace

PYBIND11_MODULE(_compiler, m) {
  m.doc() = "Nimble's compiler: .nir text to .nbc bytes (see nimble.compile).";
  m.def("compile", &compile, py::arg("text"), py::arg("name"), py::arg("opt_level"), py::arg("kernels"),
        py::arg("target"), py::arg("weights_dir"), py::arg("mcpu") = "", py::arg("mattr") = "",
        py::arg("passes") = "");
  m.def("pipeline", &driver::pipelineFor, py::arg("opt_level"), py::arg("target") = "cpu",
        py::arg("batch_remarks") = false, py::arg("fp_reassociate") = false);
}
