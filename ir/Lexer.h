//===- Lexer.h - Tokens of the .nir language ----------------------*- C++ -*-===//
//
// A hand-written lexer; every token carries its location. Lexical grammar:
//
//   bare-id    ::= [a-zA-Z_][a-zA-Z0-9_.]*        (keywords, op names, dtypes)
//   value-id   ::= `%` [a-zA-Z0-9_.$]+
//   block-id   ::= `^` [a-zA-Z0-9_.$]+
//   symbol     ::= `@` [a-zA-Z_][a-zA-Z0-9_.$]*
//   integer    ::= `-`? [0-9]+  |  `0x` [0-9a-fA-F]+
//   float      ::= `-`? [0-9]+ `.` [0-9]+ ([eE] [+-]? [0-9]+)?
//                |  `-`? [0-9]+ [eE] [+-]? [0-9]+
//   string     ::= `"` (char | `\"` | `\\` | `\n` | `\t`)* `"`
//   punctuation: ( ) [ ] { } < > , : = ? | -> ::
//   comments   ::= `//` to end of line
//
// Tensor shapes (`2x?xf32`) are not tokens of their own: after `tensor <` the
// parser asks for the raw body with lexTensorBody(), as MLIR's parser does.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_IR_LEXER_H
#define NIMBLE_IR_LEXER_H

#include "ir/Diagnostics.h"

#include <string>
#include <string_view>

namespace nimble::ir {

enum class Tok {
  Eof, Error,
  BareId, ValueId, BlockId, Symbol, Integer, Float, String,
  LParen, RParen, LSquare, RSquare, LBrace, RBrace, Less, Greater,
  Comma, Colon, ColonColon, Equal, Question, Pipe, Arrow,
};
std::string_view tokName(Tok t);

struct Token {
  Tok kind = Tok::Eof;
  std::string_view text; // spelling in the buffer (for strings: with quotes)
  Location loc;
  bool is(Tok k) const { return kind == k; }
  bool isKeyword(std::string_view kw) const { return kind == Tok::BareId && text == kw; }
};

class Lexer {
public:
  /// Lexes `buffer` (which must outlive the lexer) as file `file` (interned),
  /// numbering lines from `firstLine` (used by --split-input-file chunks).
  Lexer(std::string_view buffer, const char *file, uint32_t firstLine = 1);

  Token lex();
  /// Called right after the `tensor` keyword: expects `<` and returns the text
  /// up to the closing `>` (consumed) in `body`, with the location of its
  /// first character in `loc`. On failure `loc` is where the problem is.
  enum class TensorBody { Ok, NoLess, NoGreater };
  TensorBody lexTensorBody(std::string_view &body, Location &loc);
  /// Decodes the escapes of a string token (without quotes).
  static std::string unescape(std::string_view quoted);
  const char *file() const { return file_; }
  /// Just past the last token lexed (unknown before the first one).
  Location lastEnd() const { return lastEnd_; }

private:
  Token make(Tok k, size_t start, Location loc);
  Location here() const { return {file_, line_, col_}; }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < buf_.size() ? buf_[pos_ + ahead] : '\0';
  }
  void advance();
  void skipSpaceAndComments();
  Token error(Location loc, size_t start);

  std::string_view buf_;
  const char *file_;
  size_t pos_ = 0;
  uint32_t line_, col_ = 1;
  // Just past the last token: where end of file is reported, so that
  // "expected '}', found end of file" points after the last thing written
  // (not at the next chunk's `// -----` line under --split-input-file).
  Location lastEnd_;
};

} // namespace nimble::ir

#endif // NIMBLE_IR_LEXER_H
