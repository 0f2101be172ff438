//===- FuzzSupport.h - Helpers shared by the libFuzzer targets ----*- C++ -*-===//
//
// Each target (test/fuzz/*Fuzzer.cpp) is one LLVMFuzzerTestOneInput over
// bytes; build and run them with scripts/fuzz.sh (test/fuzz/README.md).
//
//===----------------------------------------------------------------------===//

#ifndef NIMBLE_TEST_FUZZ_FUZZSUPPORT_H
#define NIMBLE_TEST_FUZZ_FUZZSUPPORT_H

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace nimble::fuzz {

/// Splits `text` at lines that are exactly `// -----` (nimble-opt's
/// --split-input-file), so that every chunk of a lit test in the seed corpus
/// is a module of its own.
inline std::vector<std::string_view> splitChunks(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0, pos = 0;
  while (pos <= text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    if (line == "// -----") {
      out.push_back(text.substr(start, pos - start));
      start = eol + 1 > text.size() ? text.size() : eol + 1;
    }
    pos = eol + 1;
  }
  out.push_back(text.substr(start));
  return out;
}

} // namespace nimble::fuzz

#endif // NIMBLE_TEST_FUZZ_FUZZSUPPORT_H
