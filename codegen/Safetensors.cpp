//===- Safetensors.cpp - Reading weights for `const ... = external(...)` --===//

#include "codegen/Safetensors.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace nimble::codegen {

namespace {
bool parseDTypeName(const std::string &s, DType &out) {
  static const std::pair<const char *, DType> names[] = {
      {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"F64", DType::F64},
      {"BOOL", DType::I1}, {"I8", DType::I8},   {"I32", DType::I32},   {"I64", DType::I64},
      {"I16", DType::I16}, {"U8", DType::U8},   {"U16", DType::U16},   {"U32", DType::U32},
      {"U64", DType::U64}};
  for (auto &[n, t] : names)
    if (s == n) {
      out = t;
      return true;
    }
  return false;
}
} // namespace

bool SafetensorsFile::load(const std::string &path, std::string &error) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  std::vector<uint8_t> bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
  bool readFailed = std::ferror(f);
  std::fclose(f);
  if (readFailed) {
    error = "cannot read '" + path + "': " + std::strerror(errno);
    return false;
  }
  return parse(std::move(bytes), path, error);
}

bool SafetensorsFile::parse(std::vector<uint8_t> bytes, const std::string &path, std::string &error) {
  bytes_ = std::move(bytes);
  entries_.clear();
  auto bad = [&](const std::string &why) {
    error = "'" + path + "' is not a valid safetensors file: " + why;
    return false;
  };
  if (bytes_.size() < 8) return bad("shorter than its 8-byte header length");
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | bytes_[static_cast<size_t>(i)];
  if (hlen > bytes_.size() - 8) return bad("header length " + std::to_string(hlen) + " exceeds the file");
  dataStart_ = 8 + static_cast<size_t>(hlen);
  size_t dataSize = bytes_.size() - dataStart_;
  nlohmann::json j = nlohmann::json::parse(bytes_.begin() + 8, bytes_.begin() + 8 + static_cast<std::ptrdiff_t>(hlen),
                                           nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("the header is not a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto &v = it.value();
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets") ||
        !v["dtype"].is_string() || !v["shape"].is_array() || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      return bad("entry '" + it.key() + "' lacks dtype, shape or data_offsets");
    Entry e;
    if (!parseDTypeName(v["dtype"].get<std::string>(), e.dtype))
      return bad("entry '" + it.key() + "' has unsupported dtype " + v["dtype"].get<std::string>());
    uint64_t numel = 1;
    for (const auto &d : v["shape"]) {
      if (!d.is_number_unsigned()) return bad("entry '" + it.key() + "' has a bad shape");
      uint64_t x = d.get<uint64_t>();
      if (x != 0 && numel > UINT64_MAX / x / 8) return bad("entry '" + it.key() + "' is too large");
      numel *= x;
      e.shape.push_back(static_cast<int64_t>(x));
    }
    const auto &off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return bad("entry '" + it.key() + "' has bad data_offsets");
    uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en || en > dataSize)
      return bad("entry '" + it.key() + "' lies outside the data buffer");
    if (en - b != numel * dtypeSize(e.dtype))
      return bad("entry '" + it.key() + "' has " + std::to_string(en - b) + " bytes but its shape and dtype need " +
                 std::to_string(numel * dtypeSize(e.dtype)));
    e.begin = static_cast<size_t>(b);
    e.end = static_cast<size_t>(en);
    entries_[it.key()] = std::move(e);
  }
  return true;
}

const SafetensorsFile::Entry *SafetensorsFile::find(const std::string &name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

} // namespace nimble::codegen
