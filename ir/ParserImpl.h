//===- ParserImpl.h - The parser's state (private to Parser*.cpp) -*- C++ -*-===//
//
// The recursive-descent parser behind parseModule (Parser.h). It lives in its
// own header so that its parts can each be read in one sitting: the module
// level (Parser.cpp), types (ParserTypes.cpp), function bodies
// (ParserOps.cpp), attribute values and literals (ParserLiterals.cpp); nothing
// else includes it. The grammar rule each member parses is written above its
// definition (and collected in docs/LangRef.md).
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_IR_PARSERIMPL_H
#define NIMBLE_IR_PARSERIMPL_H

#include "ir/FlatMap.h"
#include "ir/IR.h"
#include "ir/Lexer.h"

#include <charconv>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace nimble::ir::detail {

class Parser {
public:
  Parser(std::string_view text, const char *file, Context &ctx, DiagnosticEngine &diag,
         uint32_t firstLine)
      : lex_(text, file, firstLine), ctx_(ctx), diag_(diag) {
    consume();
  }
  ~Parser() {
    // On failure ops may still use placeholders: unlink those uses before the
    // placeholders (and, later, the module) are destroyed.
    auto drop = [](Value *v) {
      while (v->hasUses()) v->uses().begin()->set(nullptr);
    };
    for (auto &[n, f] : forwardValues_) drop(f.placeholder.get());
    for (auto &[n, f] : forwardGlobals_) drop(f.placeholder.get());
    if (m_)
      for (auto &fn : m_->functions())
        for (auto &b : fn->blocks())
          if (Operation *t = b->terminator())
            for (Successor &s : t->mutableSuccessors())
              for (auto &[n, fb] : forwardBlocks_)
                if (s.block == fb.block.get()) s.block = nullptr;
  }
  std::unique_ptr<Module> parseModule();

private:
  //===-- Token helpers ------------------------------------------------------===//
  void consume() {
    prevEnd_ = lex_.lastEnd();
    tok_ = lex_.lex();
  }
  Token peek() {
    Lexer copy = lex_;
    return copy.lex();
  }
  bool consumeIf(Tok k) {
    if (!tok_.is(k)) return false;
    consume();
    return true;
  }
  bool error(Location loc, std::string msg) {
    if (!failed_) diag_.error(loc, std::move(msg));
    failed_ = true;
    return false;
  }
  /// An error with a note pointing at a related place.
  bool error(Location loc, std::string msg, Location noteLoc, std::string note) {
    if (!failed_) {
      Diagnostic d{Severity::Error, loc, std::move(msg), {}};
      d.note(noteLoc, std::move(note));
      diag_.emit(std::move(d));
    }
    failed_ = true;
    return false;
  }
  /// An error at the current token. When that token is itself a lexical
  /// error, that is the root cause and is reported instead of `msg`.
  bool error(std::string msg) {
    if (tok_.is(Tok::Error)) return error(tok_.loc, lexErrorText(tok_));
    return error(tok_.loc, std::move(msg));
  }
  /// "expected X, found Y": when Y starts a later line, X was missing at the
  /// end of the previous line, so the caret goes just past the last token
  /// (clang does the same) instead of onto an unrelated next line.
  bool errorExpected(std::string msg) {
    if (tok_.is(Tok::Error)) return lexError(); // the real problem is lexical
    bool nextLine = prevEnd_.known() && tok_.loc.line > prevEnd_.line;
    return error(nextLine ? prevEnd_ : tok_.loc, std::move(msg));
  }
  std::string describe(const Token &t) {
    if (t.is(Tok::Eof)) return "end of file";
    if (t.is(Tok::Error)) return lexErrorText(t);
    return "'" + std::string(t.text) + "'";
  }
  /// 'c' for a printable character, else its byte value (a NUL or the first
  /// byte of a UTF-8 sequence would print as garbage).
  static std::string quoteChar(std::string_view text) {
    unsigned char c = text.empty() ? 0 : static_cast<unsigned char>(text[0]);
    if (c >= 0x21 && c < 0x7f) return "'" + std::string(1, static_cast<char>(c)) + "'";
    const char *hex = "0123456789ABCDEF";
    return std::string("(byte 0x") + hex[c >> 4] + hex[c & 15] + ")";
  }
  bool expect(Tok k, std::string_view context) {
    if (tok_.is(Tok::Error)) return lexError();
    if (consumeIf(k)) return true;
    return errorExpected("expected " + std::string(tokName(k)) + " " + std::string(context) +
                 ", found " + describe(tok_));
  }
  static std::string lexErrorText(const Token &t) {
    if (!t.text.empty() && t.text[0] == '"') return "unterminated string literal";
    if (!t.text.empty() && (t.text[0] == '%' || t.text[0] == '^' || t.text[0] == '@'))
      return "expected a name after '" + std::string(t.text.substr(0, 1)) + "'";
    return "invalid character " + quoteChar(t.text);
  }
  bool lexError() { return error(tok_.loc, lexErrorText(tok_)); }

  //===-- Module level -------------------------------------------------------===//
  bool parseTopLevel();
  bool parseTypeDecl();
  bool parseConstDecl();
  bool parseFuncDecl();
  bool parseFnAttrs(Function &f);
  bool finishModule();

  //===-- Types --------------------------------------------------------------===//
  bool parseType(Type &t);
  bool parseCompoundType(Type &t);
  bool parseTensorType(Type &t);
  bool parseTypeList(std::vector<Type> &ts, Tok close);
  bool parseResultTypes(std::vector<Type> &ts);

  //===-- Functions ----------------------------------------------------------===//
  bool parseBody(Function &f, Location open);
  bool parseBlockHeader(Function &f, Block *&b, bool first);
  bool parseOperation(Block &b);
  bool parseOperand(Value *&v);
  bool parseOperandList(std::vector<Value *> &vs, Tok close);
  bool parseSuccessor(Successor &s, std::vector<Value *> &operands);
  bool parseAttrValue(const AttrSpec &spec, Attr &a);
  bool parseLiteral(Type t, Location loc, DenseValue &out);
  bool parseLiteralElems(Type t, size_t depth, DenseValue &out);
  bool parseScalarLiteral(DType dt, DenseValue &out);
  bool parseLoc(Location &loc, std::vector<Location> *members = nullptr);
  bool parseFileLoc(Location &loc);
  bool defineValue(Value *v, const Token &nameTok);
  /// The block named by `t` (a placeholder if not yet defined); null, with an
  /// error, when it is the entry block, which cannot be branched to.
  Block *getBlock(const Token &t);
  bool finishFunction(Function &f);
  /// True when the tokens ahead are `value-id (, value-id)* =`: the start of
  /// the next operation, not operands of this one (`ret` and operand-less
  /// generic ops have no closing delimiter).
  bool atResultList();

  /// Creates the op, names its results, queues it for inference when its
  /// result types were omitted.
  bool buildOp(Block &b, OpCode code, Location loc, const std::vector<Token> &names,
               const std::vector<Value *> &operands, std::vector<Type> types, bool typesGiven,
               std::vector<Attr> attrs, std::vector<Successor> succs,
               const std::vector<Location> &attrLocs);

  Lexer lex_;
  Token tok_;
  Location prevEnd_; // just past the token before tok_
  Context &ctx_;
  DiagnosticEngine &diag_;
  std::unique_ptr<Module> m_;
  bool failed_ = false;
  // Nesting of the type being parsed (parseType recurses through tuple and
  // function types): bounded by limits::kMaxTypeDepth, so no input can
  // overflow the stack.
  int typeDepth_ = 0;

  // Function scope.
  // Names are views into the buffer being parsed (which outlives the
  // parser), in flat tables: a lookup is one cache miss (issue 23).
  FlatMap<std::string_view, Value *> values_;
  struct ForwardValue {
    std::unique_ptr<BlockArgument> placeholder;
    Location firstUse;
  };
  std::unordered_map<std::string, ForwardValue> forwardValues_;
  FlatMap<std::string_view, Block *> blocks_;
  struct ForwardBlock {
    std::unique_ptr<Block> block;
    Location firstUse;
  };
  std::unordered_map<std::string, ForwardBlock> forwardBlocks_;

  // Module scope.
  struct ForwardGlobal {
    std::unique_ptr<Global> placeholder;
    Location firstUse;
  };
  std::unordered_map<std::string, ForwardGlobal> forwardGlobals_;
  // Where each operand of the operation being parsed was written
  // (parseOperand appends), so diagnostics can point at the use.
  std::vector<Location> operandLocs_;
  // The `members[...]` of the operation's loc(...), when written.
  std::vector<Location> memberLocs_;
  // Named types (`@Tree`) in the order first written, checked against the
  // declarations once the whole module is read.
  std::vector<std::pair<std::string, Location>> typeRefs_;
};

// Token values shared by the parser's files.

/// The value of an integer token: decimal, or `0x` hexadecimal (the lexer
/// makes both Integer tokens). False when it does not fit in int64.
inline bool intValue(std::string_view s, int64_t &v) {
  if (s.starts_with("0x")) {
    uint64_t u = 0;
    auto r = std::from_chars(s.data() + 2, s.data() + s.size(), u, 16);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size() || u > uint64_t(INT64_MAX))
      return false;
    v = static_cast<int64_t>(u);
    return true;
  }
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

/// The value of a non-negative integer token up to 2^64 - 1 (u64 literals).
inline bool uintValue(std::string_view s, uint64_t &v) {
  bool hex = s.starts_with("0x");
  const char *b = s.data() + (hex ? 2 : 0), *e = s.data() + s.size();
  auto r = std::from_chars(b, e, v, hex ? 16 : 10);
  return r.ec == std::errc() && r.ptr == e;
}

/// The value of a decimal integer or float token. False when out of range
/// (`1e999`) or hexadecimal (raw bits, meaningful only in float literals).
inline bool floatValue(std::string_view s, double &v) {
  if (s.starts_with("0x")) return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

/// How attribute `spec` is written, for messages: `shape=[2, 3]`.
inline std::string attrExample(const AttrSpec &spec) {
  switch (spec.kind) {
  case AttrKind::Bool: return spec.name + "=true";
  case AttrKind::Int: return spec.name + "=1";
  case AttrKind::Float: return spec.name + "=0.5";
  case AttrKind::Ints: return spec.name + "=[2, 3]";
  case AttrKind::DType: return spec.name + "=f32";
  case AttrKind::Str: return spec.name + "=\"cpu\"";
  case AttrKind::Sym: return spec.name + "=@f";
  case AttrKind::Dense: break;
  }
  return spec.name + "=...";
}

} // namespace nimble::ir::detail

#endif // NIMBLE_IR_PARSERIMPL_H
