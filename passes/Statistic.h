//===- Statistic.h - Pass statistics (LLVM's STATISTIC) ------------*- C++ -*-===//
//
// A pass counts what it did with a file-scope statistic:
//
//   NIMBLE_STATISTIC(NumFused, "fuse", "Number of ops fused into a group");
//   ...
//   ++NumFused;
//
// Every statistic registers itself once (at static initialization); `nimblec
// --stats` and `nimble-opt --stats` print the non-zero ones after the pipeline
// in LLVM's `-stats` layout (value, pass, description), sorted by pass then
// name, to stderr. Counters are process-wide and atomic; resetStatistics()
// zeroes them (tests running several pipelines in one process).
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_STATISTIC_H
#define NIMBLE_PASSES_STATISTIC_H

#include <atomic>
#include <cstdint>
#include <iosfwd>
#include <string_view>
#include <vector>

namespace nimble::passes {

class Statistic {
public:
  Statistic(std::string_view pass, std::string_view name, std::string_view desc);
  Statistic(const Statistic &) = delete;
  Statistic &operator=(const Statistic &) = delete;

  Statistic &operator++() {
    value_.fetch_add(1, std::memory_order_relaxed);
    return *this;
  }
  Statistic &operator+=(uint64_t n) {
    value_.fetch_add(n, std::memory_order_relaxed);
    return *this;
  }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }
  void reset() { value_.store(0, std::memory_order_relaxed); }

  std::string_view pass() const { return pass_; }
  std::string_view name() const { return name_; }
  std::string_view desc() const { return desc_; }

private:
  std::string_view pass_, name_, desc_;
  std::atomic<uint64_t> value_{0};
};

/// Every registered statistic, in registration order.
const std::vector<const Statistic *> &allStatistics();
/// Prints the non-zero statistics (LLVM's -stats layout); prints nothing when
/// every counter is zero.
void printStatistics(std::ostream &os);
void resetStatistics();

} // namespace nimble::passes

#define NIMBLE_STATISTIC(VAR, PASS, DESC)                                                          \
  static ::nimble::passes::Statistic VAR { PASS, #VAR, DESC }

#endif // NIMBLE_PASSES_STATISTIC_H
