//===- Importer.h - ONNX models to Nimble IR ------------------------*- C++ -*-===//
//
// Reads an ONNX model (a ModelProto, with its external-data files) and builds
// a Nimble module with one function, @main, whose parameters are the graph's
// inputs and whose results are its outputs (docs/import-onnx.md is the
// manual):
//
//   * every `dim_param` and unknown dimension is `?`; graph inputs that share
//     a `dim_param` name get a run-time check that their sizes agree;
//   * initializers become module constants: inline literals up to
//     `inlineLimit` bytes, `external(file, key)` references to a safetensors
//     side file above it (the caller writes the file from `weights`);
//   * each node goes through the op map (OpMap.cpp): one Nimble op or a short
//     composite of existing ops; `If` and `Loop` become blocks and block
//     arguments;
//   * shapes computed in the graph (Shape, Gather, Concat, ... feeding a
//     Reshape) are followed entry by entry, so static sizes stay static.
//
// Everything the importer emits is typed by the ops' relations as it is
// built and the module is verified before it is returned, so a model whose
// shapes do not fit is a message naming the node, and never a module that
// nimblec would reject.
//
// Errors are returned, never printed: one line without the `file: error: `
// prefix, which the tool adds.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_FRONTEND_ONNX_IMPORTER_H
#define NIMBLE_FRONTEND_ONNX_IMPORTER_H

#include "ir/IR.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nimble::onnx_import {

struct ImportOptions {
  /// The model file; external-data paths are resolved against its directory.
  std::string modelPath;
  /// The model's name in locations and messages (e.g. its path as given).
  std::string displayName;
  /// Initializers of more bytes than this go to the side file.
  uint64_t inlineLimit = 1024;
  /// The side file's name as the .nir refers to it (`external("<ref>", key)`).
  std::string weightsRef = "weights.safetensors";
  /// The function's name (`@main`).
  std::string functionName = "main";
};

/// One tensor of the side file.
struct Weight {
  std::string key;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

struct ImportResult {
  std::unique_ptr<ir::Module> module;
  /// The tensors of the side file, in the order of the model's initializers
  /// (empty: the module needs no side file).
  std::vector<Weight> weights;
};

/// Imports `opts.modelPath` into a module of `ctx`. On failure returns false
/// with `error` set to one line (`node 'n' (Add, opset 17): ...`,
/// `cannot parse the model: ...`, ...).
bool importOnnx(const ImportOptions &opts, ir::Context &ctx, ImportResult &result, std::string &error);

/// The same over the model's bytes (fuzzing, tests); external data is then
/// resolved against `opts.modelPath`'s directory.
bool importOnnxBytes(const std::string &bytes, const ImportOptions &opts, ir::Context &ctx,
                     ImportResult &result, std::string &error);

/// The op table as text, one op type a line: `Type<TAB>since opset<TAB>nir
/// ops<TAB>notes`, then the op types that need a new Nimble op (`--list-ops`).
std::string listOps();

} // namespace nimble::onnx_import

#endif // NIMBLE_FRONTEND_ONNX_IMPORTER_H
