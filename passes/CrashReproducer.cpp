//===- CrashReproducer.cpp - A file that replays a failing pipeline -------===//
//
// The signal path follows LLVM's Signals.inc: the handler touches only
// memory prepared before (State) and async-signal-safe calls (open, write,
// close, rename, unlink, sigaction, raise); the previous handlers are put
// back before the signal is re-raised, so a sanitizer's or the default
// action still happens.
//
//===----------------------------------------------------------------------===//

#include "passes/CrashReproducer.h"

#include "ir/Parser.h"
#include "ir/Printer.h"
#include "passes/Pass.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <ostream>
#include <sstream>
#include <unistd.h>

namespace nimble::passes {

namespace {

constexpr int kSignals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
constexpr const char *kSignalNames[] = {"SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE", "SIGILL"};
constexpr size_t kNumSignals = sizeof kSignals / sizeof kSignals[0];

/// Writes all of `s` to `fd`; async-signal-safe.
bool writeAll(int fd, std::string_view s) {
  const char *p = s.data();
  size_t n = s.size();
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

/// Decimal text of `v` in `buf` (at least 21 bytes); async-signal-safe.
std::string_view formatUnsigned(uint64_t v, char *buf) {
  char *end = buf + 21, *p = end;
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  return {p, static_cast<size_t>(end - p)};
}

} // namespace

struct CrashReproducer::State {
  std::string tool, path, tmp;
  std::vector<std::string> specs; // without spaces: the header's flags are split on them
  std::string_view source;
  /// --crash-reproducer-local: the IR before the pass in snapPass, double
  /// buffered so that a signal during printing still sees a whole text.
  std::string snap[2];
  size_t snapPass[2] = {0, 0};
  std::atomic<int> snapIndex{-1};
  volatile std::sig_atomic_t current = -1;
  struct sigaction previous[kNumSignals];
  bool installed = false;

  /// The header and body, as pieces: the pipeline's passes from `from` on,
  /// then `why1 why2`, the pass and `suffix`; then `body`.
  /// Allocates nothing: pieces point into the state or into `num`.
  template <typename F>
  void render(size_t from, std::string_view why1, std::string_view why2, size_t pass, std::string_view suffix,
              std::string_view body, char *num, F &&emit) const {
    emit(kReproducerTag);
    emit(" --passes=");
    for (size_t j = from; j < specs.size(); ++j) {
      if (j > from) emit(",");
      emit(specs[j]);
    }
    emit("\n// ");
    emit(tool);
    emit(": ");
    emit(why1);
    emit(why2);
    if (pass < specs.size()) {
      emit(" in pass '");
      emit(specs[pass]);
      emit("' (");
      emit(formatUnsigned(pass + 1, num));
      emit(" of ");
      emit(formatUnsigned(specs.size(), num + 24));
      emit(")");
    }
    emit(suffix);
    emit("\n");
    emit(body);
    if (!body.empty() && body.back() != '\n') emit("\n");
  }

  /// Writes the file through its temporary; async-signal-safe when `F` is.
  template <typename F>
  bool write(F &&renderInto) const {
    ::unlink(tmp.c_str()); // O_EXCL below: never through a planted link
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    bool ok = true;
    renderInto([&](std::string_view s) { ok = ok && writeAll(fd, s); });
    ok = (::close(fd) == 0) && ok;
    if (ok && ::rename(tmp.c_str(), path.c_str()) == 0) return true;
    ::unlink(tmp.c_str());
    return false;
  }

  void restoreHandlers() {
    if (!installed) return;
    for (size_t k = 0; k < kNumSignals; ++k) ::sigaction(kSignals[k], &previous[k], nullptr);
    installed = false;
  }
};

namespace {

std::atomic<CrashReproducer::State *> gActive{nullptr};

extern "C" void onFatalSignal(int sig, siginfo_t *info, void *) {
  CrashReproducer::State *s = gActive.exchange(nullptr);
  if (s) {
    s->restoreHandlers();
    const int pass = s->current;
    size_t k = 0;
    while (k + 1 < kNumSignals && kSignals[k] != sig) ++k;
    if (pass >= 0) {
      char num[48];
      const int snap = s->snapIndex.load();
      const bool local = snap >= 0;
      const size_t from = local ? s->snapPass[snap] : 0;
      std::string_view body = local ? std::string_view(s->snap[snap]) : s->source;
      bool written = s->write([&](auto &&emit) {
        s->render(from, "signal ", kSignalNames[k], static_cast<size_t>(pass), "", body, num, emit);
      });
      auto err = [](std::string_view t) { writeAll(2, t); };
      err(s->tool);
      err(": error: signal ");
      err(kSignalNames[k]);
      err(" in pass '");
      err(s->specs[static_cast<size_t>(pass)]);
      err("'");
      if (written) {
        err("; a reproducer is in ");
        err(s->path);
        err(" (replay: nimble-opt --run-reproducer ");
        err(s->path);
        err(")\n");
      } else {
        err("; no reproducer could be written to ");
        err(s->path);
        err("\n");
      }
    }
  } else {
    ::signal(sig, SIG_DFL);
  }
  // A signal sent by raise() or kill() is re-raised: it is blocked while
  // this handler runs and reaches the restored handler when it returns. A
  // fault (si_code > 0) happens again when the faulting instruction is
  // retried, this time into the restored handler.
  if (!info || info->si_code <= 0) ::raise(sig);
}

} // namespace

bool readReproducerHeader(std::string_view text, std::vector<std::string> &flags) {
  if (!text.starts_with(kReproducerTag)) return false;
  std::string_view line = text.substr(kReproducerTag.size());
  line = line.substr(0, line.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
    size_t end = pos;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
    if (end > pos) flags.emplace_back(line.substr(pos, end - pos));
    pos = end;
  }
  return true;
}

CrashReproducer::CrashReproducer(const ReproducerOptions &opts, const ReproducerSource &src,
                                 const std::vector<std::string> &specs, std::ostream &notes)
    : opts_(opts), src_(src), specs_(specs), notes_(notes), state_(std::make_unique<State>()) {
  State &s = *state_;
  s.tool = opts.tool;
  if (!opts.path.empty()) {
    s.path = opts.path;
  } else {
    // One name per pipeline run: the chunks of a --split-input-file input
    // each get their own.
    static std::atomic<unsigned> runs{0};
    const char *dir = std::getenv("TMPDIR");
    s.path = std::string(dir && *dir ? dir : "/tmp") + "/nimble-reproducer-" + std::to_string(::getpid()) + "-" +
             std::to_string(runs++) + ".nir";
  }
  s.tmp = s.path + ".tmp" + std::to_string(::getpid());
  for (const std::string &spec : specs) {
    std::string t;
    for (char c : spec)
      if (c != ' ' && c != '\t' && c != '\n') t += c;
    s.specs.push_back(std::move(t));
  }
  s.source = src.text;
  // The outermost pipeline owns the handlers (the passes re-run by
  // onFailure run without a reproducer).
  State *expected = nullptr;
  if (!gActive.compare_exchange_strong(expected, &s)) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = onFatalSignal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  for (size_t k = 0; k < kNumSignals; ++k) ::sigaction(kSignals[k], &sa, &s.previous[k]);
  s.installed = true;
}

CrashReproducer::~CrashReproducer() {
  State *expected = state_.get();
  if (gActive.compare_exchange_strong(expected, nullptr)) state_->restoreHandlers();
}

void CrashReproducer::beforePass(size_t i, const ir::Module &m) {
  State &s = *state_;
  if (opts_.local) {
    const int next = s.snapIndex.load() == 0 ? 1 : 0;
    s.snap[next] = ir::printModuleToString(m);
    s.snapPass[next] = i;
    s.snapIndex.store(next);
  }
  s.current = static_cast<std::sig_atomic_t>(i);
}

std::string CrashReproducer::irBefore(size_t i, size_t &from) const {
  from = 0;
  if (i >= specs_.size() || i == 0) return std::string(src_.text);
  if (const int snap = state_->snapIndex.load(); opts_.local && snap >= 0) {
    from = state_->snapPass[snap];
    return state_->snap[snap];
  }
  // Parse the input again and run the passes before `i` on it: the passes
  // are deterministic, so this is the module pass `i` was given. Quietly:
  // they succeeded once.
  std::ostringstream sink;
  ir::DiagnosticEngine quiet(nullptr, sink);
  ir::Context ctx;
  std::unique_ptr<ir::Module> m = ir::parseModule(src_.text, src_.name, ctx, quiet, src_.firstLine);
  if (!m) return std::string(src_.text);
  PassManagerOptions o;
  o.verifyEach = false;
  o.checkIdempotent = false;
  PassManager pm(quiet, sink, o);
  std::string prefix, error;
  for (size_t j = 0; j < i; ++j) prefix += (j ? "," : "") + specs_[j];
  if (!pm.parsePipeline(prefix, error) || ir::failed(pm.run(*m))) return std::string(src_.text);
  from = i;
  return ir::printModuleToString(*m);
}

void CrashReproducer::onFailure(size_t i, std::string_view why, std::string_view detail) {
  State &s = *state_;
  size_t from = 0;
  std::string body = irBefore(i, from);
  char num[48];
  bool written = s.write([&](auto &&emit) { s.render(from, why, "", i, detail, body, num, emit); });
  if (written)
    notes_ << opts_.tool << ": note: a reproducer of this failure is in " << s.path
           << " (replay: nimble-opt --run-reproducer " << s.path << ")\n";
  else
    notes_ << opts_.tool << ": note: no reproducer could be written to " << s.path << ": " << std::strerror(errno)
           << "\n";
  notes_.flush();
}

} // namespace nimble::passes
