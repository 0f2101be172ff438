//===- Statistic.cpp - Pass statistics -------------------------------------===//

#include "passes/Statistic.h"

#include <algorithm>
#include <iomanip>
#include <ostream>
#include <string>

namespace nimble::passes {

namespace {
std::vector<const Statistic *> &registry() {
  static std::vector<const Statistic *> stats;
  return stats;
}
} // namespace

Statistic::Statistic(std::string_view pass, std::string_view name, std::string_view desc)
    : pass_(pass), name_(name), desc_(desc) {
  registry().push_back(this);
}

const std::vector<const Statistic *> &allStatistics() { return registry(); }

void printStatistics(std::ostream &os) {
  std::vector<const Statistic *> shown;
  for (const Statistic *s : registry())
    if (s->value() != 0) shown.push_back(s);
  if (shown.empty()) return;
  std::stable_sort(shown.begin(), shown.end(), [](const Statistic *a, const Statistic *b) {
    return a->pass() != b->pass() ? a->pass() < b->pass() : a->name() < b->name();
  });
  size_t valueWidth = 1, passWidth = 1;
  for (const Statistic *s : shown) {
    valueWidth = std::max(valueWidth, std::to_string(s->value()).size());
    passWidth = std::max(passWidth, s->pass().size());
  }
  const std::string rule(77, '-');
  os << "===" << rule << "===\n"
     << std::string(26, ' ') << "... Statistics Collected ...\n"
     << "===" << rule << "===\n\n";
  for (const Statistic *s : shown)
    os << std::right << std::setw(static_cast<int>(valueWidth)) << s->value() << " " << std::left
       << std::setw(static_cast<int>(passWidth)) << s->pass() << " - " << s->desc() << "\n";
  os << "\n" << std::right;
}

void resetStatistics() {
  for (const Statistic *s : registry()) const_cast<Statistic *>(s)->reset();
}

} // namespace nimble::passes
