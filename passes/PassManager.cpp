//===- PassManager.cpp - Pipelines, verification, dumps and timing --------===//

#include "passes/Pass.h"

#include "passes/analysis/Analysis.h"

#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <map>
#include <ostream>

namespace nimble::passes {

bool Pass::parseIntOption(std::string_view text, int64_t lo, int64_t hi, int64_t &out) {
  int64_t v = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size() || v < lo || v > hi) return false;
  out = v;
  return true;
}

const std::vector<PassInfo> &registeredPasses() {
  static const std::vector<PassInfo> passes = {
#define NIMBLE_PASS(Name, Factory, Summary) {Name, &Factory, Summary},
#include "passes/Passes.def"
  };
  return passes;
}

std::unique_ptr<Pass> createPass(std::string_view name) {
  for (const PassInfo &p : registeredPasses())
    if (p.name == name) return p.create();
  for (const PassInfo &p : testPasses())
    if (p.name == name) return p.create();
  return nullptr;
}

PassManager::PassManager(DiagnosticEngine &diag, std::ostream &dumpStream,
                         PassManagerOptions opts)
    : diag_(diag), dump_(dumpStream), opts_(std::move(opts)) {}

PassManager::~PassManager() = default;

// pipeline ::= pass (`,` pass)*
// pass     ::= name (`{` option (`,` option)* `}`)?
// option   ::= key `=` value (`,` value)*     (a list value: wrt=0,1)
bool PassManager::parsePipeline(std::string_view text, std::string &error) {
  size_t pos = 0;
  auto trim = [](std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  };
  while (pos < text.size()) {
    const size_t start = pos;
    size_t end = pos;
    while (end < text.size() && text[end] != ',' && text[end] != '{') ++end;
    std::string_view name = trim(text.substr(pos, end - pos));
    if (name.empty()) {
      error = "empty pass name in pipeline '" + std::string(text) + "'";
      return false;
    }
    std::unique_ptr<Pass> p = createPass(name);
    if (!p) {
      error = "unknown pass '" + std::string(name) + "' (see --list-passes)";
      return false;
    }
    pos = end;
    if (pos < text.size() && text[pos] == '{') {
      size_t close = text.find('}', pos);
      if (close == std::string_view::npos) {
        error = "missing '}' after the options of pass '" + std::string(name) + "'";
        return false;
      }
      std::string_view opts = text.substr(pos + 1, close - pos - 1);
      // A piece without `=` continues the previous option's value, so list
      // options read naturally: grad{func=f,wrt=0,1} sets wrt to "0,1".
      std::vector<std::pair<std::string, std::string>> kvs;
      while (!opts.empty()) {
        size_t comma = opts.find(',');
        std::string_view kv = opts.substr(0, comma);
        opts = comma == std::string_view::npos ? "" : opts.substr(comma + 1);
        size_t eq = kv.find('=');
        if (eq == std::string_view::npos) {
          if (kvs.empty()) {
            error = "pass option '" + std::string(trim(kv)) + "' of '" + std::string(name) +
                    "' needs a value (key=value)";
            return false;
          }
          kvs.back().second += "," + std::string(trim(kv));
          continue;
        }
        kvs.emplace_back(std::string(trim(kv.substr(0, eq))), std::string(trim(kv.substr(eq + 1))));
      }
      for (auto &[key, value] : kvs) {
        std::string err = p->setOption(key, value);
        if (!err.empty()) {
          error = err;
          return false;
        }
      }
      pos = close + 1;
    }
    passes_.push_back(std::move(p));
    specs_.emplace_back(trim(text.substr(start, pos - start)));
    if (pos < text.size()) {
      if (text[pos] != ',') {
        error = "expected ',' between passes in '" + std::string(text) + "'";
        return false;
      }
      ++pos;
      if (pos == text.size()) {
        error = "trailing ',' in pipeline '" + std::string(text) + "'";
        return false;
      }
    }
  }
  return true;
}

AnalysisCache::AnalysisCache(const Module &m) : m_(m) {}
AnalysisCache::~AnalysisCache() = default;

const EffectAnalysis &AnalysisCache::effects() {
  if (!effects_) {
    cg_ = std::make_unique<CallGraph>(m_);
    effects_ = std::make_unique<EffectAnalysis>(m_, *cg_);
  }
  return *effects_;
}

void AnalysisCache::invalidate() {
  effects_.reset();
  cg_.reset();
}

LogicalResult PassManager::run(Module &m) {
  using Clock = std::chrono::steady_clock;
  seconds_.resize(passes_.size(), 0.0);
  ir::PrintOptions popts;
  popts.debugInfo = opts_.debugInfo;
  skipped_.resize(passes_.size(), 0);
  ran_.resize(passes_.size(), 0);
  AnalysisCache analyses(m);
  // How many passes have changed the IR so far, and for each idempotent
  // pass (by its text in the pipeline) that count when its last run ended.
  uint64_t changes = 0;
  std::map<std::string, uint64_t, std::less<>> leftAt;
  // Nothing is printed for it unless a pass fails (CrashReproducer.h).
  std::unique_ptr<CrashReproducer> repro;
  if (opts_.reproducer.enabled && !source_.text.empty() &&
      std::none_of(specs_.begin(), specs_.end(), [](const std::string &s) { return s.empty(); }))
    repro = std::make_unique<CrashReproducer>(opts_.reproducer, source_, specs_, dump_);
  for (size_t i = 0; i < passes_.size(); ++i) {
    Pass &p = *passes_[i];
    if (repro) repro->beforePass(i, m);
    std::string name(p.name());
    if (opts_.printBeforeAll || opts_.printBefore.count(name)) {
      dump_ << "// -----// IR Dump Before " << name << " //----- //\n";
      ir::printModule(m, dump_, popts);
      dump_ << "\n";
    }
    const std::string &spec = specs_[i];
    auto left = !spec.empty() && p.idempotent() ? leftAt.find(spec) : leftAt.end();
    const bool asItLeft = left != leftAt.end() && left->second == changes;
    bool changed = false;
    if (asItLeft && !opts_.checkIdempotent) {
      ++skipped_[i];
    } else {
      const unsigned internalErrors = diag_.internalErrorCount();
      auto t0 = Clock::now();
      p.setAnalysisCache(&analyses);
      LogicalResult r = p.run(m, diag_, changed);
      p.setAnalysisCache(nullptr);
      if (changed && !p.preservesEffects()) analyses.invalidate();
      seconds_[i] += std::chrono::duration<double>(Clock::now() - t0).count();
      ++ran_[i];
      if (ir::failed(r)) {
        if (repro && diag_.internalErrorCount() > internalErrors) repro->onFailure(i, "internal error");
        return r;
      }
      if (asItLeft && changed) {
        diag_.error({}, "pass '" + name +
                            "' changed IR that it had left and no pass had changed since (it is declared "
                            "idempotent: a bug in the pass)");
        if (repro) repro->onFailure(i, "internal error", ": it changed IR it had left (declared idempotent)");
        return ir::failure();
      }
    }
    if (changed) ++changes;
    if (!spec.empty() && p.idempotent()) leftAt[spec] = changes;
    if (opts_.verifyEach) {
      auto v0 = Clock::now();
      bool ok = verifyOrExplain(m, "the IR is invalid after pass '" + name + "' (a bug in the pass)");
      verifySeconds_ += std::chrono::duration<double>(Clock::now() - v0).count();
      if (!ok) {
        if (repro) repro->onFailure(i, "invalid IR", ": the verifier failed after it");
        return ir::failure();
      }
    }
    if (opts_.printAfterAll || opts_.printAfter.count(name)) {
      if (!opts_.printAfterChange || changed) {
        dump_ << "// -----// IR Dump After " << name << (changed ? "" : " (no change)")
              << " //----- //\n";
        ir::printModule(m, dump_, popts);
        dump_ << "\n";
      }
    }
  }
  if (!opts_.verifyEach && opts_.verifyAfterPipeline &&
      !verifyOrExplain(m, "the IR is invalid after the pipeline (a bug in a pass; --verify-each names which)")) {
    if (repro)
      repro->onFailure(passes_.size(), "invalid IR after the pipeline",
                       " (nimble-opt verifies after each pass: the replay names the pass)");
    return ir::failure();
  }
  return ir::success();
}

bool PassManager::verifyOrExplain(Module &m, const std::string &headline) {
  ir::VerifyOptions vo;
  vo.printOp = true;
  // Verify quietly first so that the headline comes before the details.
  std::vector<ir::Diagnostic> held;
  ir::DiagnosticEngine quiet(diag_.sourceMgr(), dump_);
  quiet.setHandler([&](const ir::Diagnostic &d) { held.push_back(d); });
  if (ir::succeeded(ir::verifyModule(m, quiet, vo))) return true;
  diag_.error({}, headline);
  for (ir::Diagnostic &d : held) diag_.emit(std::move(d));
  return false;
}

void PassManager::printTimings(std::ostream &os) const {
  double total = verifySeconds_;
  for (double s : seconds_) total += s;
  char buf[256];
  os << "===" << std::string(73, '-') << "===\n"
     << "                      ... Pass execution timing report ...\n"
     << "===" << std::string(73, '-') << "===\n";
  std::snprintf(buf, sizeof buf, "  Total Execution Time: %.3f ms\n\n", total * 1e3);
  os << buf << "  ---Wall Time (ms)---  ----Name----\n";
  auto row = [&](double s, const std::string &name) {
    std::snprintf(buf, sizeof buf, "  %10.3f (%5.1f%%)  %s\n", s * 1e3,
                  total > 0 ? 100.0 * s / total : 0.0, name.c_str());
    os << buf;
  };
  for (size_t i = 0; i < passes_.size() && i < seconds_.size(); ++i)
    row(seconds_[i], std::string(passes_[i]->name()) +
                         (i < skipped_.size() && skipped_[i] && !ran_[i]
                              ? " (skipped: no pass changed the IR since its last run)"
                              : ""));
  if (opts_.verifyEach) row(verifySeconds_, "(verifier)");
  row(total, "Total");
}

} // namespace nimble::passes
