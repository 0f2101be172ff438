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
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>
#include <vector>

// Allocation failure is an error the code handles (makeTensor returns null,
// the caller reports "out of memory"), as under --config=asan's
// ASAN_OPTIONS; without this ASan would abort on the first huge request.
// Requests over 256 MiB fail the same way: a program or file may
// legitimately ask for more memory than the fuzzer's RSS limit (2 GiB), and
// the out-of-memory path is what a fuzzer should exercise there, not the
// machine's memory (filling a 1 GiB tensor took 1.7 s of CPU per input).
// Defined (not inline: it must be emitted) in the one fuzzer source of each
// binary that includes this header.
extern "C" __attribute__((used)) const char *__asan_default_options() {
  return "allocator_may_return_null=1:max_allocation_size_mb=256";
}

namespace nimble::fuzz {

/// Where a target sends the diagnostics of the code under test: nowhere
/// (every rejected input prints one, and printing is most of a run's time),
/// or standard error with NIMBLE_FUZZ_VERBOSE=1 while reproducing.
inline std::ostream &diagStream() {
  struct NullBuf : std::streambuf {
    int overflow(int c) override { return c; }
  };
  static NullBuf nb;
  static std::ostream null(&nb);
  static bool verbose = std::getenv("NIMBLE_FUZZ_VERBOSE") != nullptr;
  return verbose ? std::cerr : null;
}

/// A finding that is not a crash (a broken round trip, an accepted input
/// that does not verify): printed as `TARGET-fuzzer: WHAT` and the detail,
/// then a trap, so libFuzzer saves the input as it does for a crash.
[[noreturn]] inline void bug(const char *target, std::string_view what, std::string_view detail = {}) {
  std::fprintf(stderr, "%s-fuzzer: %.*s\n", target, static_cast<int>(what.size()), what.data());
  if (!detail.empty()) std::fprintf(stderr, "%.*s\n", static_cast<int>(detail.size()), detail.data());
  __builtin_trap();
}

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

/// The largest element count that a `DxDx...` chain in `text` asks for
/// (saturating at INT64_MAX). The input syntax lets a user ask for any size,
/// and a legitimate multi-gigabyte tensor is not a bug; the text targets skip
/// such inputs so that libFuzzer's malloc and RSS limits report real leaks
/// and blow-ups only.
inline int64_t largestDimProduct(std::string_view text) {
  int64_t best = 0, product = 1;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] < '0' || text[i] > '9') {
      product = 1;
      ++i;
      continue;
    }
    int64_t v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      v = v > (INT64_MAX - 9) / 10 ? INT64_MAX : v * 10 + (text[i] - '0');
      ++i;
    }
    product = (v != 0 && product > INT64_MAX / v) ? INT64_MAX : product * v;
    if (product > best) best = product;
    if (i < text.size() && text[i] == 'x') {
      ++i; // the chain goes on: 2x3x...
    } else {
      product = 1;
    }
  }
  return best;
}

} // namespace nimble::fuzz

#endif // NIMBLE_TEST_FUZZ_FUZZSUPPORT_H
