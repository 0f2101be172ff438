//===- Diagnostics.h - Source locations and diagnostics -----------*- C++ -*-===//
//
// Every token, op, block argument and declaration carries a Location. Library
// code reports problems as Diagnostics through a DiagnosticEngine and returns
// failure; it never exits. The default handler prints the LLVM/MLIR way:
//
//   model.nir:12:17: error: operands are not broadcast-compatible: ...
//     %y = add %a, %b
//                  ^
//   model.nir:3:8: note: operand 1 defined here
//
// A DiagnosticVerifier replaces the handler for `--verify-diagnostics`: it
// collects diagnostics and matches them against `expected-error@+N {{text}}`
// comments (also -note, -warning, -remark; `@-N`, `@above`, `@below` offsets
// as in MLIR) in the input.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_IR_DIAGNOSTICS_H
#define NIMBLE_IR_DIAGNOSTICS_H

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace nimble::ir {

/// Success or failure of an operation whose errors were already reported
/// (MLIR's LogicalResult).
struct [[nodiscard]] LogicalResult {
  bool ok;
};
inline LogicalResult success(bool ok = true) { return {ok}; }
inline LogicalResult failure() { return {false}; }
inline bool succeeded(LogicalResult r) { return r.ok; }
inline bool failed(LogicalResult r) { return !r.ok; }

struct Location {
  const char *file = nullptr; // interned; null: unknown
  uint32_t line = 0, col = 0;
  bool known() const { return file != nullptr; }
  std::string str() const; // "file:line:col" or "<unknown>"
};

enum class Severity { Error, Warning, Note, Remark };
std::string_view severityName(Severity s);

struct Diagnostic {
  Severity severity = Severity::Error;
  Location loc;
  std::string message;
  struct Note {
    Location loc;
    std::string message;
  };
  std::vector<Note> notes;

  Diagnostic &note(Location l, std::string msg) {
    notes.push_back({l, std::move(msg)});
    return *this;
  }
};

/// Keeps the text of every file read so diagnostics can show the source line.
class SourceMgr {
public:
  void addBuffer(const std::string &name, std::string text) { buffers_[name] = std::move(text); }
  /// The text of `line` (1-based) of `file`, without newline; empty if unknown.
  std::string_view lineText(const char *file, uint32_t line) const;
  const std::string *buffer(const std::string &name) const;

private:
  std::map<std::string, std::string> buffers_;
};

class DiagnosticEngine {
public:
  using Handler = std::function<void(const Diagnostic &)>;
  /// The default handler prints to `os` with source lines from `sm` (may be null).
  DiagnosticEngine(const SourceMgr *sm, std::ostream &os);

  void emit(Diagnostic d);
  void error(Location loc, std::string msg) { emit({Severity::Error, loc, std::move(msg), {}}); }
  void remark(Location loc, std::string msg) { emit({Severity::Remark, loc, std::move(msg), {}}); }

  void setHandler(Handler h) { handler_ = std::move(h); }
  unsigned errorCount() const { return errors_; }
  /// Errors whose message starts with "internal error" (a compiler bug, not
  /// the input's): the pass manager writes a crash reproducer for them.
  unsigned internalErrorCount() const { return internalErrors_; }
  const SourceMgr *sourceMgr() const { return sm_; }

  /// Renders one diagnostic (with notes) as the default handler would.
  std::string render(const Diagnostic &d) const;

private:
  void renderOne(std::string &out, Severity s, Location loc, const std::string &msg) const;
  const SourceMgr *sm_;
  std::ostream &os_;
  Handler handler_;
  unsigned errors_ = 0, internalErrors_ = 0;
};

/// `--verify-diagnostics`: collects diagnostics and checks them against the
/// expectations written in the input buffer.
class DiagnosticVerifier {
public:
  /// Scans `text` (the file `file`, starting at line `firstLine`) for
  /// expectations.
  DiagnosticVerifier(DiagnosticEngine &engine, const char *file, std::string_view text,
                     uint32_t firstLine = 1);
  /// Reports, through `report`, each unexpected diagnostic, each expectation
  /// that was not produced and each malformed expectation, rendered like any
  /// error (`file:line:col: error: ...`, source line, caret); returns true
  /// when everything matched.
  bool finish(const std::function<void(const std::string &)> &report);

private:
  struct Expected {
    Severity severity;
    uint32_t line;
    std::string text;
    Location comment; // where `expected-...` is written
    bool matched = false;
  };
  void handle(const Diagnostic &d);
  void check(Severity s, Location loc, const std::string &msg);
  const char *file_;
  std::vector<Expected> expected_;
  std::vector<Diagnostic> unexpected_;
  std::vector<Diagnostic> malformed_; // expectations that cannot be read
  const DiagnosticEngine &engine_;
};

} // namespace nimble::ir

#endif // NIMBLE_IR_DIAGNOSTICS_H
