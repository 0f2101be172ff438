//===- Lexer.cpp - Tokens of the .nir language ----------------------------===//

#include "ir/Lexer.h"

#include <cctype>

namespace nimble::ir {

std::string_view tokName(Tok t) {
  switch (t) {
  case Tok::Eof: return "end of file";
  case Tok::Error: return "invalid token";
  case Tok::BareId: return "identifier";
  case Tok::ValueId: return "value name";
  case Tok::BlockId: return "block label";
  case Tok::Symbol: return "symbol";
  case Tok::Integer: return "integer";
  case Tok::Float: return "float";
  case Tok::String: return "string";
  case Tok::LParen: return "'('";
  case Tok::RParen: return "')'";
  case Tok::LSquare: return "'['";
  case Tok::RSquare: return "']'";
  case Tok::LBrace: return "'{'";
  case Tok::RBrace: return "'}'";
  case Tok::Less: return "'<'";
  case Tok::Greater: return "'>'";
  case Tok::Comma: return "','";
  case Tok::Colon: return "':'";
  case Tok::ColonColon: return "'::'";
  case Tok::Equal: return "'='";
  case Tok::Question: return "'?'";
  case Tok::Pipe: return "'|'";
  case Tok::Arrow: return "'->'";
  }
  return "?";
}

Lexer::Lexer(std::string_view buffer, const char *file, uint32_t firstLine)
    : buf_(buffer), file_(file), line_(firstLine) {}

void Lexer::advance() {
  if (pos_ >= buf_.size()) return;
  if (buf_[pos_] == '\n') {
    ++line_;
    col_ = 1;
  } else {
    ++col_;
  }
  ++pos_;
}

void Lexer::skipSpaceAndComments() {
  for (;;) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      advance();
    } else if (c == '/' && peek(1) == '/') {
      while (peek() && peek() != '\n') advance();
    } else {
      return;
    }
  }
}

Token Lexer::make(Tok k, size_t start, Location loc) {
  if (k != Tok::Eof) lastEnd_ = here();
  else if (lastEnd_.known()) loc = lastEnd_;
  return Token{k, buf_.substr(start, pos_ - start), loc};
}

Token Lexer::error(Location loc, size_t start) {
  if (pos_ == start) advance();
  return make(Tok::Error, start, loc);
}

namespace {
bool isIdStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isIdChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$';
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }
} // namespace

Token Lexer::lex() {
  skipSpaceAndComments();
  Location loc = here();
  size_t start = pos_;
  char c = peek();
  if (c == '\0') {
    if (pos_ < buf_.size()) return error(loc, start); // embedded NUL byte
    return make(Tok::Eof, start, loc);
  }
  if (isIdStart(c)) {
    while (isIdChar(peek()) && peek() != '$') advance();
    return make(Tok::BareId, start, loc);
  }
  if (c == '%' || c == '^' || c == '@') {
    advance();
    size_t nameStart = pos_;
    if (c == '@' && !isIdStart(peek())) return error(loc, start);
    while (isIdChar(peek())) advance();
    if (pos_ == nameStart) return error(loc, start);
    return make(c == '%' ? Tok::ValueId : c == '^' ? Tok::BlockId : Tok::Symbol, start, loc);
  }
  if (c == '0' && peek(1) == 'x' && std::isxdigit(static_cast<unsigned char>(peek(2)))) {
    advance();
    advance();
    while (std::isxdigit(static_cast<unsigned char>(peek()))) advance();
    return make(Tok::Integer, start, loc);
  }
  if (isDigit(c) || (c == '-' && isDigit(peek(1)))) {
    advance();
    while (isDigit(peek())) advance();
    bool isFloat = false;
    if (peek() == '.' && isDigit(peek(1))) {
      isFloat = true;
      advance();
      while (isDigit(peek())) advance();
    }
    if ((peek() == 'e' || peek() == 'E') &&
        (isDigit(peek(1)) || ((peek(1) == '-' || peek(1) == '+') && isDigit(peek(2))))) {
      isFloat = true;
      advance();
      if (peek() == '-' || peek() == '+') advance();
      while (isDigit(peek())) advance();
    }
    return make(isFloat ? Tok::Float : Tok::Integer, start, loc);
  }
  if (c == '"') {
    advance();
    while (peek() != '"') {
      if (peek() == '\0' || peek() == '\n') return error(loc, start);
      if (peek() == '\\') advance();
      advance();
    }
    advance();
    return make(Tok::String, start, loc);
  }
  advance();
  switch (c) {
  case '(': return make(Tok::LParen, start, loc);
  case ')': return make(Tok::RParen, start, loc);
  case '[': return make(Tok::LSquare, start, loc);
  case ']': return make(Tok::RSquare, start, loc);
  case '{': return make(Tok::LBrace, start, loc);
  case '}': return make(Tok::RBrace, start, loc);
  case '<': return make(Tok::Less, start, loc);
  case '>': return make(Tok::Greater, start, loc);
  case ',': return make(Tok::Comma, start, loc);
  case '=': return make(Tok::Equal, start, loc);
  case '?': return make(Tok::Question, start, loc);
  case '|': return make(Tok::Pipe, start, loc);
  case ':':
    if (peek() == ':') {
      advance();
      return make(Tok::ColonColon, start, loc);
    }
    return make(Tok::Colon, start, loc);
  case '-':
    if (peek() == '>') {
      advance();
      return make(Tok::Arrow, start, loc);
    }
    break;
  default: break;
  }
  return make(Tok::Error, start, loc);
}

Lexer::TensorBody Lexer::lexTensorBody(std::string_view &body, Location &loc) {
  skipSpaceAndComments();
  loc = here();
  if (peek() != '<') return TensorBody::NoLess;
  advance();
  loc = here();
  size_t start = pos_;
  while (peek() != '>') {
    if (peek() == '\0' || peek() == '\n') return TensorBody::NoGreater;
    advance();
  }
  body = buf_.substr(start, pos_ - start);
  advance(); // '>'
  lastEnd_ = here();
  return TensorBody::Ok;
}

std::string Lexer::unescape(std::string_view q) {
  std::string r;
  for (size_t i = 1; i + 1 < q.size(); ++i) {
    char c = q[i];
    if (c == '\\' && i + 2 < q.size()) {
      char n = q[++i];
      r += n == 'n' ? '\n' : n == 't' ? '\t' : n;
    } else {
      r += c;
    }
  }
  return r;
}

} // namespace nimble::ir
