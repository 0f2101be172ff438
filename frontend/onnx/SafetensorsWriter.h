//===- SafetensorsWriter.h - The importer's weight side file ------*- C++ -*-===//
//
// Writes the safetensors layout that codegen/Safetensors.h reads: an 8-byte
// little-endian header length, the JSON header (names to dtype, shape and
// [begin, end) offsets into the data), padded with spaces to a multiple of 8
// so the data is aligned, then the tensors' bytes in order.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_FRONTEND_ONNX_SAFETENSORSWRITER_H
#define NIMBLE_FRONTEND_ONNX_SAFETENSORSWRITER_H

#include "frontend/onnx/Importer.h"

#include <string>
#include <vector>

namespace nimble::onnx_import {

/// The length prefix and JSON header for `weights`; the file is this
/// followed by each weight's bytes in order.
std::string safetensorsHeader(const std::vector<Weight> &weights);

} // namespace nimble::onnx_import

#endif // NIMBLE_FRONTEND_ONNX_SAFETENSORSWRITER_H
