//===- Diagnostics.cpp - Printing and verifying diagnostics ---------------===//

#include "ir/Diagnostics.h"

#include <cstring>
#include <ostream>

namespace nimble::ir {

std::string Location::str() const {
  if (!file) return "<unknown>";
  return std::string(file) + ":" + std::to_string(line) + ":" + std::to_string(col);
}

std::string_view severityName(Severity s) {
  switch (s) {
  case Severity::Error: return "error";
  case Severity::Warning: return "warning";
  case Severity::Note: return "note";
  case Severity::Remark: return "remark";
  }
  return "?";
}

const std::string *SourceMgr::buffer(const std::string &name) const {
  auto it = buffers_.find(name);
  return it == buffers_.end() ? nullptr : &it->second;
}

std::string_view SourceMgr::lineText(const char *file, uint32_t line) const {
  if (!file || line == 0) return {};
  const std::string *b = buffer(file);
  if (!b) return {};
  size_t pos = 0;
  for (uint32_t l = 1; l < line; ++l) {
    pos = b->find('\n', pos);
    if (pos == std::string::npos) return {};
    ++pos;
  }
  size_t end = b->find('\n', pos);
  std::string_view text = std::string_view(*b).substr(
      pos, end == std::string::npos ? std::string::npos : end - pos);
  if (text.ends_with('\r')) text.remove_suffix(1); // CRLF files
  return text;
}

DiagnosticEngine::DiagnosticEngine(const SourceMgr *sm, std::ostream &os) : sm_(sm), os_(os) {}

void DiagnosticEngine::renderOne(std::string &out, Severity s, Location loc,
                                 const std::string &msg) const {
  out += loc.known() ? loc.str() + ": " : std::string();
  out += std::string(severityName(s)) + ": " + msg + "\n";
  if (!sm_ || !loc.known()) return;
  std::string_view text = sm_->lineText(loc.file, loc.line);
  if (text.empty()) return;
  out += std::string(text) + "\n";
  // The caret sits under column `col`; tabs are kept so it lines up.
  std::string pad;
  for (uint32_t i = 1; i < loc.col && i - 1 < text.size(); ++i)
    pad += text[i - 1] == '\t' ? '\t' : ' ';
  out += pad + "^\n";
}

std::string DiagnosticEngine::render(const Diagnostic &d) const {
  std::string out;
  renderOne(out, d.severity, d.loc, d.message);
  for (const auto &n : d.notes) renderOne(out, Severity::Note, n.loc, n.message);
  return out;
}

void DiagnosticEngine::emit(Diagnostic d) {
  if (d.severity == Severity::Error) {
    ++errors_;
    if (d.message.starts_with("internal error")) ++internalErrors_;
  }
  if (handler_) {
    handler_(d);
    return;
  }
  os_ << render(d);
  os_.flush();
}

//===-- DiagnosticVerifier -------------------------------------------------===//

DiagnosticVerifier::DiagnosticVerifier(DiagnosticEngine &engine, const char *file,
                                       std::string_view text, uint32_t firstLine)
    : file_(file), engine_(engine) {
  // Expectation syntax (MLIR's):
  //   expected-(error|warning|note|remark)(@(+N|-N|above|below))? {{text}}
  // A diagnostic matches when its severity and line agree and `text` is a
  // substring of its message. A keyword whose offset or {{...}} cannot be
  // read (an '@' or '{' after it, but no valid offset or {{...}}) is
  // reported, so that a typo cannot silently disable a check; the bare word
  // in prose is ignored.
  uint32_t line = firstLine;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    std::string_view l = text.substr(pos, end == std::string_view::npos ? text.npos : end - pos);
    size_t at = 0;
    while ((at = l.find("expected-", at)) != std::string_view::npos) {
      Location where{file, line, static_cast<uint32_t>(at + 1)};
      std::string_view rest = l.substr(at + 9);
      at += 9;
      Severity sev;
      size_t len;
      if (rest.starts_with("error")) { sev = Severity::Error; len = 5; }
      else if (rest.starts_with("warning")) { sev = Severity::Warning; len = 7; }
      else if (rest.starts_with("note")) { sev = Severity::Note; len = 4; }
      else if (rest.starts_with("remark")) { sev = Severity::Remark; len = 6; }
      else continue;
      rest = rest.substr(len);
      std::string kind = "expected-" + std::string(severityName(sev));
      auto bad = [&](std::string why) {
        malformed_.push_back({Severity::Error, where, "malformed " + kind + ": " + why, {}});
      };
      int64_t target = line;
      bool hasOffset = rest.starts_with("@");
      if (hasOffset) {
        rest = rest.substr(1);
        if (rest.starts_with("above")) { target = line - 1; rest = rest.substr(5); }
        else if (rest.starts_with("below")) { target = line + 1; rest = rest.substr(5); }
        else {
          int sign = rest.starts_with("-") ? -1 : 1;
          if (rest.starts_with("-") || rest.starts_with("+")) rest = rest.substr(1);
          int64_t n = 0;
          size_t k = 0;
          while (k < rest.size() && rest[k] >= '0' && rest[k] <= '9' && n < 1000000)
            n = n * 10 + (rest[k++] - '0');
          if (k == 0) {
            bad("expected a line offset after '@' (+N, -N, above or below)");
            continue;
          }
          target = line + sign * n;
          rest = rest.substr(k);
        }
      }
      while (rest.starts_with(" ")) rest = rest.substr(1);
      // Prose that merely mentions the keyword is not an expectation; an
      // offset or a '{' says one was meant.
      if (!rest.starts_with("{")) {
        if (hasOffset) bad("expected the message text in {{...}}");
        continue;
      }
      size_t close = rest.find("}}", 2);
      if (!rest.starts_with("{{") || close == std::string_view::npos) {
        bad("expected the message text in {{...}}");
        continue;
      }
      if (target < 1) {
        bad("line offset points before the first line");
        continue;
      }
      expected_.push_back(
          {sev, static_cast<uint32_t>(target), std::string(rest.substr(2, close - 2)), where});
    }
    if (end == std::string_view::npos) break;
    pos = end + 1;
    ++line;
  }
  engine.setHandler([this](const Diagnostic &d) { handle(d); });
}

void DiagnosticVerifier::check(Severity s, Location loc, const std::string &msg) {
  for (Expected &e : expected_) {
    if (e.matched || e.severity != s) continue;
    if (loc.known() && (e.line != loc.line || std::strcmp(loc.file, file_) != 0)) continue;
    if (msg.find(e.text) == std::string::npos) continue;
    e.matched = true;
    return;
  }
  unexpected_.push_back(
      {Severity::Error, loc, "unexpected " + std::string(severityName(s)) + ": " + msg, {}});
}

void DiagnosticVerifier::handle(const Diagnostic &d) {
  check(d.severity, d.loc, d.message);
  for (const auto &n : d.notes) {
    // Notes are checked only when some expectation asks for a note.
    bool wanted = false;
    for (const Expected &e : expected_) wanted |= e.severity == Severity::Note;
    if (wanted) check(Severity::Note, n.loc, n.message);
  }
}

bool DiagnosticVerifier::finish(const std::function<void(const std::string &)> &report) {
  bool ok = unexpected_.empty() && malformed_.empty();
  for (const Diagnostic &d : malformed_) report(engine_.render(d));
  for (const Diagnostic &d : unexpected_) report(engine_.render(d));
  for (const Expected &e : expected_) {
    if (e.matched) continue;
    ok = false;
    Diagnostic d{Severity::Error, e.comment,
                 "expected " + std::string(severityName(e.severity)) + " \"" + e.text +
                     "\" was not produced on line " + std::to_string(e.line),
                 {}};
    report(engine_.render(d));
  }
  return ok;
}

} // namespace nimble::ir
