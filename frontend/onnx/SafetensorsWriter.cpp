//===- SafetensorsWriter.cpp - The importer's weight side file -------------===//

#include "frontend/onnx/SafetensorsWriter.h"

#include <nlohmann/json.hpp>

namespace nimble::onnx_import {

namespace {
const char *stName(DType t) {
  switch (t) {
  case DType::F32: return "F32";
  case DType::F16: return "F16";
  case DType::BF16: return "BF16";
  case DType::F64: return "F64";
  case DType::I1: return "BOOL";
  case DType::I8: return "I8";
  case DType::I32: return "I32";
  case DType::I64: return "I64";
  case DType::I16: return "I16";
  case DType::U8: return "U8";
  case DType::U16: return "U16";
  case DType::U32: return "U32";
  case DType::U64: return "U64";
  }
  return "F32";
}
} // namespace

std::string safetensorsHeader(const std::vector<Weight> &weights) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  uint64_t at = 0;
  for (const Weight &w : weights) {
    j[w.key] = {{"dtype", stName(w.dtype)}, {"shape", w.shape}, {"data_offsets", {at, at + w.bytes.size()}}};
    at += w.bytes.size();
  }
  std::string json = j.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + json;
}

} // namespace nimble::onnx_import
