//===- Safetensors.h - Reading weights for `const ... = external(...)` -*- C++ -*-===//
//
// The safetensors format: an 8-byte little-endian header length N, N bytes of
// JSON mapping tensor names to {"dtype", "shape", "data_offsets": [begin,
// end)} (plus an optional "__metadata__"), then the data buffer. Everything is
// checked (header size, JSON shape, dtype names, offsets inside the buffer and
// consistent with shape x dtype size), so a damaged file gives a message, not
// garbage weights.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_CODEGEN_SAFETENSORS_H
#define NIMBLE_CODEGEN_SAFETENSORS_H

#include "ir/OpTable.h"

#include <map>
#include <string>
#include <vector>

namespace nimble::codegen {

class SafetensorsFile {
public:
  struct Entry {
    DType dtype;
    std::vector<int64_t> shape;
    size_t begin = 0, end = 0; // byte range in the data buffer
  };
  /// Reads and validates `path`; false with `error` set on any problem.
  bool load(const std::string &path, std::string &error);
  /// The same over the file's bytes; `path` only names it in messages.
  bool parse(std::vector<uint8_t> bytes, const std::string &path, std::string &error);
  const Entry *find(const std::string &name) const;
  const uint8_t *data(const Entry &e) const { return bytes_.data() + dataStart_ + e.begin; }
  const std::map<std::string, Entry> &entries() const { return entries_; }

private:
  std::vector<uint8_t> bytes_;
  size_t dataStart_ = 0;
  std::map<std::string, Entry> entries_;
};

} // namespace nimble::codegen

#endif // NIMBLE_CODEGEN_SAFETENSORS_H
