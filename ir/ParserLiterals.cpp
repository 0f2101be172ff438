//===- ParserLiterals.cpp - Attribute values and dense literals -----------===//
//
// The part of the .nir parser (ir/Parser.cpp, whose header describes it) that
// reads attribute values (`name=value`) and dense tensor literals: scalars of
// every element type (decimal, hexadecimal bit patterns, inf/nan), nested
// lists checked against the declared shape, splats. The grammar rule of each
// function is written above it (test/docs/grammar-matches-parser.test checks
// them against docs/LangRef.md).
//
//===----------------------------------------------------------------------===//

#include "ir/Lexer.h"
#include "ir/Limits.h"
#include "ir/ParserImpl.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace nimble::ir::detail {

// attr-value ::= `true` | `false` | integer | float | string | dtype | symbol
//              | `[` (integer (`,` integer)*)? `]`
bool Parser::parseAttrValue(const AttrSpec &spec, Attr &a) {
  std::string what = "attribute '" + spec.name + "' expects ";
  auto parseInt = [&](int64_t &v) {
    if (!tok_.is(Tok::Integer)) return false;
    if (!intValue(tok_.text, v))
      return error("integer " + std::string(tok_.text) + " in attribute '" + spec.name +
                   "' does not fit in 64 bits");
    consume();
    return true;
  };
  switch (spec.kind) {
  case AttrKind::Bool:
    if (!tok_.isKeyword("true") && !tok_.isKeyword("false"))
      return error(what + "true or false, found " + describe(tok_));
    a = Attr::getBool(tok_.text == "true");
    consume();
    return true;
  case AttrKind::Int: {
    int64_t v;
    if (!parseInt(v)) return failed_ ? false : error(what + "an integer, found " + describe(tok_));
    a = Attr::getInt(v);
    return true;
  }
  case AttrKind::Float: {
    double v = 0;
    if (!floatValue(tok_.text, v) || !std::isfinite(v))
      return error(what + "a finite decimal number, got " + describe(tok_));
    a = Attr::getFloat(v);
    consume();
    return true;
  }
  case AttrKind::Ints: {
    if (!consumeIf(Tok::LSquare)) return error(what + "a list like [0, 1], found " + describe(tok_));
    std::vector<int64_t> vals;
    if (!tok_.is(Tok::RSquare)) {
      do {
        int64_t v;
        if (!parseInt(v))
          return failed_ ? false : error(what + "integers in its list, found " + describe(tok_));
        vals.push_back(v);
      } while (consumeIf(Tok::Comma));
    }
    if (!expect(Tok::RSquare, "to close the list")) return false;
    a = Attr::getInts(std::move(vals));
    return true;
  }
  case AttrKind::DType: {
    auto dt = tok_.is(Tok::BareId) ? parseDType(tok_.text) : std::nullopt;
    if (!dt) return error(what + "an element type (f32 f16 bf16 f64 i1 i8 i32 i64), found " + describe(tok_));
    a = Attr::getDType(*dt);
    consume();
    return true;
  }
  case AttrKind::Str:
    if (!tok_.is(Tok::String)) return error(what + "a string, found " + describe(tok_));
    a = Attr::getStr(Lexer::unescape(tok_.text));
    consume();
    return true;
  case AttrKind::Sym:
    if (!tok_.is(Tok::Symbol)) return error(what + "a symbol like @f, found " + describe(tok_));
    a = Attr::getSym(std::string(tok_.text.substr(1)));
    consume();
    return true;
  case AttrKind::Dense: break;
  }
  return error(what + "a value that cannot be written here");
}

// scalar-literal ::= integer | float | `true` | `false`
//   An integer written in hexadecimal is, for a float element type, the raw
//   bits of the element (how inf and nan are written); else its value.
bool Parser::parseScalarLiteral(DType dt, DenseValue &out) {
  if (tok_.isKeyword("true") || tok_.isKeyword("false")) {
    if (dt != DType::I1) return error("boolean literal for element type " + std::string(dtypeName(dt)));
    out.appendInt(tok_.text == "true");
    consume();
    return true;
  }
  if (tok_.is(Tok::Integer) || tok_.is(Tok::Float)) {
    std::string_view s = tok_.text;
    if (tok_.is(Tok::Integer) && s.starts_with("0x") && isFloat(dt)) {
      uint64_t bits = 0;
      auto r = std::from_chars(s.data() + 2, s.data() + s.size(), bits, 16);
      size_t n = dtypeSize(dt);
      if (r.ec != std::errc() || r.ptr != s.data() + s.size() ||
          (n < 8 && bits >> (8 * n) != 0))
        return error("hexadecimal literal " + std::string(s) + " has more than " +
                     std::to_string(8 * n) + " bits, the size of " +
                     std::string(dtypeName(dt)));
      for (size_t i = 0; i < n; ++i) out.bytes.push_back(static_cast<uint8_t>(bits >> (8 * i)));
      consume();
      return true;
    }
    if (isFloat(dt)) {
      double v = 0;
      if (!floatValue(s, v)) return error("float literal " + std::string(s) + " is out of range");
      // Narrower types would silently round a large literal to inf: reject
      // what lies at or beyond half an ulp above the largest finite value.
      double limit = dt == DType::F32 ? 0x1.ffffffp127 : dt == DType::F16 ? 65520.0
                                                                          : 0x1.ffp127;
      if (dt != DType::F64 && std::fabs(v) >= limit)
        return error("float literal " + std::string(s) + " does not fit in " +
                     std::string(dtypeName(dt)));
      out.appendDouble(v);
    } else {
      if (tok_.is(Tok::Float))
        return error("float literal for integer element type " + std::string(dtypeName(dt)));
      int64_t v = 0;
      uint64_t u = 0;
      // u64 literals reach 2^64 - 1: read them unsigned (the bits go in).
      bool big = dt == DType::U64 && !s.starts_with("-") && uintValue(s, u);
      if (big) v = static_cast<int64_t>(u);
      else if (!intValue(s, v))
        return error("integer literal " + std::string(s) + " does not fit in 64 bits");
      if (dt == DType::I1 && v != 0 && v != 1)
        return error("i1 literal must be 0, 1, true or false");
      int bits = static_cast<int>(8 * dtypeSize(dt));
      bool fits = dt == DType::I1 || big ||
                  (isUnsigned(dt) ? v >= 0 && (bits == 64 || v < (int64_t(1) << bits))
                                  : bits == 64 || (v >= -(int64_t(1) << (bits - 1)) &&
                                                   v < (int64_t(1) << (bits - 1))));
      if (!fits)
        return error("integer literal " + std::string(s) + " does not fit in " +
                     std::string(dtypeName(dt)));
      out.appendInt(v);
    }
    consume();
    return true;
  }
  return errorExpected("expected a number, found " + describe(tok_));
}

bool Parser::parseLiteralElems(Type t, size_t depth, DenseValue &out) {
  if (depth == static_cast<size_t>(t.rank())) {
    if (tok_.is(Tok::LSquare))
      return error("the literal nests deeper than the " + std::to_string(t.rank()) +
                   " dimension" + (t.rank() == 1 ? "" : "s") + " of " + t.str());
    return parseScalarLiteral(t.dtype(), out);
  }
  Location open = tok_.loc;
  if (!consumeIf(Tok::LSquare))
    return errorExpected("expected '[' for dimension " + std::to_string(depth) +
                         " of the literal, found " + describe(tok_));
  int64_t n = 0;
  if (!tok_.is(Tok::RSquare)) {
    do {
      if (!parseLiteralElems(t, depth + 1, out)) return false;
      ++n;
    } while (consumeIf(Tok::Comma));
  }
  if (!expect(Tok::RSquare, "to close the literal")) return false;
  if (n != t.dims()[depth])
    return error(open, "literal has " + std::to_string(n) + " elements in dimension " +
                           std::to_string(depth) + " but the type " + t.str() + " has " +
                           std::to_string(t.dims()[depth]));
  return true;
}

// literal ::= scalar-literal | `[` (literal (`,` literal)*)? `]`
//   A scalar literal for a non-scalar type is a splat.
bool Parser::parseLiteral(Type t, Location loc, DenseValue &out) {
  if (!t.isTensor() || !t.hasStaticShape())
    return error(loc, "literals need a tensor type with a static shape, got " + t.str());
  out.dtype = t.dtype();
  out.shape = t.dims();
  if (!tok_.is(Tok::LSquare)) {
    out.splat = t.rank() > 0;
    return parseScalarLiteral(t.dtype(), out);
  }
  if (t.rank() == 0) return error("a scalar type needs a scalar literal, not a list");
  return parseLiteralElems(t, 0, out);
}

} // namespace nimble::ir::detail
