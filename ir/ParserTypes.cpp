//===- ParserTypes.cpp - Types of the .nir parser ------------------------===//
//
// The part of the .nir parser (ir/Parser.cpp, whose header describes it) that
// reads types: tensor types with their dimensions and dtype, tuples, function
// types, ADT names and `storage`, against the limits of ir/Limits.h. The
// grammar rule of each function is written above it
// (test/docs/grammar-matches-parser.test checks them against docs/LangRef.md).
//
//===----------------------------------------------------------------------===//

#include "ir/Lexer.h"
#include "ir/Limits.h"
#include "ir/ParserImpl.h"

#include <cctype>
#include <charconv>

namespace nimble::ir::detail {

// type ::= tensor-type | `tuple` `<` (type (`,` type)*)? `>` | symbol | `storage`
//        | `(` (type (`,` type)*)? `)` `->` result-types
bool Parser::parseType(Type &t) {
  if (tok_.isKeyword("tensor")) return parseTensorType(t);
  if (tok_.isKeyword("tuple") || tok_.is(Tok::LParen)) {
    // Counted before recursing: the error comes at the first level past the
    // limit, whatever the depth of the text.
    std::string tooDeep = "type is nested more than " +
                          std::to_string(limits::kMaxTypeDepth) + " levels deep (the limit)";
    if (typeDepth_ >= limits::kMaxTypeDepth) return error(tooDeep);
    Location start = tok_.loc;
    ++typeDepth_;
    bool ok = parseCompoundType(t);
    --typeDepth_;
    if (ok && t.depth() > limits::kMaxTypeDepth) return error(start, tooDeep);
    return ok;
  }
  if (tok_.isKeyword("storage")) {
    consume();
    t = ctx_.storage();
    return true;
  }
  if (tok_.is(Tok::Symbol)) {
    std::string name(tok_.text.substr(1));
    t = ctx_.adt(name);
    typeRefs_.push_back({name, tok_.loc});
    consume();
    return true;
  }
  if (tok_.is(Tok::Error)) return lexError();
  if (tok_.is(Tok::BareId) && parseDType(tok_.text))
    return errorExpected("expected a type, found element type '" + std::string(tok_.text) +
                 "'; scalars are written 'tensor<" + std::string(tok_.text) + ">'");
  return errorExpected("expected a type, found " + describe(tok_));
}

// The tuple and function-type alternatives of `type` (see parseType), which
// nest.
bool Parser::parseCompoundType(Type &t) {
  if (tok_.isKeyword("tuple")) {
    consume();
    if (!expect(Tok::Less, "after 'tuple'")) return false;
    std::vector<Type> elems;
    if (!parseTypeList(elems, Tok::Greater)) return false;
    t = ctx_.tuple(elems);
    return true;
  }
  consume(); // `(`
  std::vector<Type> ins, outs;
  if (!parseTypeList(ins, Tok::RParen)) return false;
  if (!expect(Tok::Arrow, "in function type")) return false;
  if (!parseResultTypes(outs)) return false;
  t = ctx_.func(ins, outs);
  return true;
}

// tensor-type ::= `tensor` `<` (dim `x`)* dtype `>`      dim ::= integer | `?`
bool Parser::parseTensorType(Type &t) {
  std::string_view body;
  Location bodyLoc;
  switch (lex_.lexTensorBody(body, bodyLoc)) {
  case Lexer::TensorBody::Ok: break;
  case Lexer::TensorBody::NoLess: return error(bodyLoc, "expected '<' after 'tensor'");
  case Lexer::TensorBody::NoGreater:
    return error(bodyLoc, "expected '>' to close the tensor type on the same line");
  }
  // The body runs to the first '>' on the line: anything but dims, dtype
  // letters and spaces means that '>' closed something else.
  for (size_t i = 0; i < body.size(); ++i) {
    char ch = body[i];
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '?' && ch != ' ' && ch != '-') {
      Location at = bodyLoc;
      at.col += static_cast<uint32_t>(i);
      return error(at, "expected '>' to close the tensor type, found '" + std::string(1, ch) +
                           "'");
    }
  }
  // Split on 'x': dims then the element type.
  std::vector<int64_t> dims;
  size_t pos = 0;
  Location partLoc = bodyLoc;
  for (;;) {
    size_t x = body.find('x', pos);
    std::string_view part = body.substr(pos, x == std::string_view::npos ? x : x - pos);
    partLoc.col = bodyLoc.col + static_cast<uint32_t>(pos);
    // Trim spaces (allowed around 'x').
    while (!part.empty() && part.front() == ' ') { part.remove_prefix(1); ++partLoc.col; }
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (x == std::string_view::npos) {
      auto dt = parseDType(part);
      if (!dt) {
        if (part.empty() || part == "?" || std::isdigit(static_cast<unsigned char>(part[0]))) {
          std::string example = "tensor<";
          for (int64_t d : dims) example += (d == kDynamic ? "?" : std::to_string(d)) + "x";
          if (!part.empty()) example += std::string(part) + "x";
          return error(partLoc, "expected an element type " +
                                    std::string(dims.empty() && part.empty()
                                                    ? "(e.g. 'tensor<f32>' for a scalar)"
                                                    : "after the dimensions (e.g. '" + example +
                                                          "f32>')"));
        }
        return error(partLoc, "unknown element type '" + std::string(part) +
                                  "'; expected one of f32 f16 bf16 f64 i1 i8 i32 i64");
      }
      t = ctx_.tensor(*dt, dims);
      if (std::string why = checkTypeLimits(t); !why.empty()) return error(tok_.loc, why);
      consume();
      return true;
    }
    if (dims.size() == limits::kMaxRank)
      return error(partLoc, "tensor type has more than " + std::to_string(limits::kMaxRank) +
                                " dimensions (the limit)");
    if (part == "?") {
      dims.push_back(kDynamic);
    } else {
      int64_t v = 0;
      auto r = std::from_chars(part.data(), part.data() + part.size(), v);
      if (part.empty() || r.ec != std::errc() || r.ptr != part.data() + part.size() || v < 0) {
        if (part.empty())
          return error(partLoc, "expected a dimension (a non-negative integer or '?') before 'x'");
        if (parseDType(part))
          return error(partLoc, "element type '" + std::string(part) +
                                    "' must come last in a tensor type");
        if (r.ec == std::errc::result_out_of_range)
          return error(partLoc, "dimension " + std::string(part) + " does not fit in 64 bits");
        return error(partLoc, "invalid dimension '" + std::string(part) +
                                  "'; expected a non-negative integer or '?'" +
                                  (part.starts_with("-") ? " (unknown sizes are written '?')"
                                                         : ""));
      }
      dims.push_back(v);
    }
    pos = x + 1;
  }
}

// type-list ::= (type (`,` type)*)?   followed by `close`
bool Parser::parseTypeList(std::vector<Type> &ts, Tok close) {
  if (consumeIf(close)) return true;
  do {
    Type t;
    if (!parseType(t)) return false;
    ts.push_back(t);
  } while (consumeIf(Tok::Comma));
  return expect(close, "to close the type list");
}

// result-types ::= type | `(` (type (`,` type)*)? `)`
bool Parser::parseResultTypes(std::vector<Type> &ts) {
  if (consumeIf(Tok::LParen)) return parseTypeList(ts, Tok::RParen);
  Type t;
  if (!parseType(t)) return false;
  ts.push_back(t);
  return true;
}

} // namespace nimble::ir::detail
