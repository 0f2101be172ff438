//===- Parser.cpp - Reading .nir text into a Module -----------------------===//
//
// Recursive descent, one function per grammar rule (the rule is written above
// each). Attribute values and dense literals are in ParserLiterals.cpp; the
// class and the helpers both files share, in ParserImpl.h. Forward references (values used before their definition in the text,
// blocks, globals) get placeholders that are replaced once defined; what is
// still undefined at the end of its scope is an error at its first use.
//
// Diagnostics point at the token at fault. Besides each op's location, the
// parser records where every operand, `name=value` attribute (and custom
// syntax symbol) and branch target was written, so that the verifier and the
// type relations, which run later, can blame the operand or attribute rather
// than the whole line. The first error stops parsing: after it, everything
// is suspect.
//
//===----------------------------------------------------------------------===//

#include "ir/Parser.h"

#include <unordered_set>

#include "ir/Inference.h"
#include "ir/Lexer.h"
#include "ir/Limits.h"
#include "ir/ParserImpl.h"
#include "ir/Verifier.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

namespace nimble::ir {

namespace detail {

//===----------------------------------------------------------------------===//
// Module level
//===----------------------------------------------------------------------===//

// module ::= (`module` symbol)? top-level*
std::unique_ptr<Module> Parser::parseModule() {
  m_ = std::make_unique<Module>(ctx_);
  if (tok_.isKeyword("module")) {
    consume();
    if (!tok_.is(Tok::Symbol)) {
      errorExpected("expected module name (e.g. 'module @lstm'), found " + describe(tok_));
      return nullptr;
    }
    m_->setName(std::string(tok_.text.substr(1)));
    consume();
  }
  while (!tok_.is(Tok::Eof))
    if (!parseTopLevel()) return nullptr;
  if (!finishModule()) return nullptr;
  return std::move(m_);
}

// top-level ::= type-decl | const-decl | func-decl
bool Parser::parseTopLevel() {
  if (tok_.isKeyword("type")) return parseTypeDecl();
  if (tok_.isKeyword("const")) return parseConstDecl();
  if (tok_.isKeyword("func")) return parseFuncDecl();
  if (tok_.is(Tok::Error)) return lexError();
  if (tok_.isKeyword("module"))
    return error("'module' may appear only once, at the top of the file");
  return error("expected 'func', 'const' or 'type' at the top level, found " + describe(tok_));
}

// type-decl ::= `type` symbol `=` ctor (`|` ctor)*
// ctor      ::= bare-id (`(` (type (`,` type)*)? `)`)?
bool Parser::parseTypeDecl() {
  Location loc = tok_.loc;
  consume();
  if (!tok_.is(Tok::Symbol))
    return errorExpected("expected type name (e.g. '@Tree'), found " + describe(tok_));
  auto adt = std::make_unique<AdtDecl>();
  adt->name = std::string(tok_.text.substr(1));
  adt->loc = loc;
  if (AdtDecl *prev = m_->lookupAdt(adt->name)) {
    Diagnostic d{Severity::Error, tok_.loc, "redefinition of type @" + adt->name, {}};
    d.note(prev->loc, "previous definition is here");
    diag_.emit(std::move(d));
    failed_ = true;
    return false;
  }
  consume();
  if (!expect(Tok::Equal, "after the type name")) return false;
  std::unordered_set<std::string> ctorNames;
  do {
    if (!tok_.is(Tok::BareId))
      return errorExpected("expected constructor name, found " + describe(tok_));
    AdtDecl::Ctor c;
    c.name = std::string(tok_.text);
    c.loc = tok_.loc;
    if (!ctorNames.insert(c.name).second)
      return error("duplicate constructor '" + c.name + "' in type @" + adt->name);
    consume();
    if (consumeIf(Tok::LParen))
      if (!parseTypeList(c.fields, Tok::RParen)) return false;
    adt->ctors.push_back(std::move(c));
  } while (consumeIf(Tok::Pipe));
  m_->addAdt(std::move(adt));
  return true;
}

// const-decl ::= `const` symbol `:` type `=` (`external` `(` string `,` string `)` | literal)
bool Parser::parseConstDecl() {
  Location loc = tok_.loc;
  consume();
  if (!tok_.is(Tok::Symbol))
    return errorExpected("expected constant name (e.g. '@w'), found " + describe(tok_));
  std::string name(tok_.text.substr(1));
  Location nameLoc = tok_.loc;
  consume();
  if (Global *prev = m_->lookupGlobal(name)) {
    Diagnostic d{Severity::Error, nameLoc, "redefinition of constant @" + name, {}};
    d.note(prev->declLoc(), "previous definition is here");
    diag_.emit(std::move(d));
    failed_ = true;
    return false;
  }
  if (!expect(Tok::Colon, "after the constant name")) return false;
  Location typeLoc = tok_.loc;
  Type t;
  if (!parseType(t)) return false;
  if (!t.isTensor()) return error(typeLoc, "constants must have a tensor type, got " + t.str());
  if (!t.hasStaticShape())
    return error(typeLoc, "constants must have a static shape, got " + t.str());
  if (!expect(Tok::Equal, "after the constant type")) return false;
  auto g = std::make_unique<Global>(name, t, loc);
  if (tok_.isKeyword("external")) {
    consume();
    if (!expect(Tok::LParen, "after 'external'")) return false;
    if (!tok_.is(Tok::String))
      return errorExpected("expected the safetensors file name as a string");
    std::string file = Lexer::unescape(tok_.text);
    consume();
    if (!expect(Tok::Comma, "between file and tensor name")) return false;
    if (!tok_.is(Tok::String)) return errorExpected("expected the tensor name as a string");
    std::string key = Lexer::unescape(tok_.text);
    consume();
    if (!expect(Tok::RParen, "after the tensor name")) return false;
    g->setExternal(std::move(file), std::move(key));
  } else {
    DenseValue v;
    if (!parseLiteral(t, loc, v)) return false;
    g->setLiteral(Attr::getDense(std::move(v)));
  }
  Global *added = m_->addGlobal(std::move(g));
  auto fwd = forwardGlobals_.find(name);
  if (fwd != forwardGlobals_.end()) {
    fwd->second.placeholder->replaceAllUsesWith(added);
    forwardGlobals_.erase(fwd);
  }
  return true;
}

// func-decl ::= `func` symbol `(` (value-id `:` type (`,` value-id `:` type)*)? `)`
//               (`->` result-types)? fn-attrs? `{` body
bool Parser::parseFuncDecl() {
  Location loc = tok_.loc;
  consume();
  if (!tok_.is(Tok::Symbol))
    return errorExpected("expected function name (e.g. '@main'), found " + describe(tok_));
  std::string name(tok_.text.substr(1));
  Location nameLoc = tok_.loc;
  consume();
  if (Function *prev = m_->lookupFunction(name)) {
    Diagnostic d{Severity::Error, nameLoc, "redefinition of function @" + name, {}};
    d.note(prev->loc(), "previous definition is here");
    diag_.emit(std::move(d));
    failed_ = true;
    return false;
  }
  values_.clear();
  blocks_.clear();
  if (!expect(Tok::LParen, "after the function name")) return false;
  auto entry = std::make_unique<Block>();
  entry->setLoc(loc);
  std::vector<Type> argTypes;
  std::vector<Token> argNames;
  if (!tok_.is(Tok::RParen)) {
    do {
      if (!tok_.is(Tok::ValueId))
        return errorExpected("expected parameter name (e.g. '%x'), found " + describe(tok_));
      Token nameTok = tok_;
      consume();
      if (!expect(Tok::Colon, "after the parameter name")) return false;
      Type t;
      if (!parseType(t)) return false;
      argTypes.push_back(t);
      argNames.push_back(nameTok);
    } while (consumeIf(Tok::Comma));
  }
  if (!expect(Tok::RParen, "to close the parameter list")) return false;
  std::vector<Type> results;
  if (consumeIf(Tok::Arrow))
    if (!parseResultTypes(results)) return false;
  auto f = std::make_unique<Function>(name, ctx_.func(argTypes, results), loc);
  Function *fn = m_->addFunction(std::move(f));
  Block *eb = fn->addBlock(std::move(entry));
  for (size_t i = 0; i < argTypes.size(); ++i) {
    BlockArgument *a = eb->addArgument(argTypes[i], argNames[i].loc);
    if (!defineValue(a, argNames[i])) return false;
  }
  if (tok_.isKeyword("attributes"))
    if (!parseFnAttrs(*fn)) return false;
  Location open = tok_.loc;
  if (!expect(Tok::LBrace, "to begin the function body")) return false;
  if (!parseBody(*fn, open)) return false;
  return finishFunction(*fn);
}

// fn-attrs ::= `attributes` `{` (fn-attr (`,` fn-attr)*)? `}`
// fn-attr  ::= bare-id `=` (string | integer | `true` | `false` | `[` (integer (`,` integer)*)? `]` | symbol)
bool Parser::parseFnAttrs(Function &f) {
  consume();
  if (!expect(Tok::LBrace, "after 'attributes'")) return false;
  if (!tok_.is(Tok::RBrace)) {
    do {
      if (!tok_.is(Tok::BareId))
        return errorExpected("expected attribute name, found " + describe(tok_));
      std::string name(tok_.text);
      if (f.fnAttr(name)) return error("duplicate function attribute '" + name + "'");
      consume();
      if (!expect(Tok::Equal, "after the attribute name")) return false;
      Attr a;
      if (tok_.is(Tok::String)) a = Attr::getStr(Lexer::unescape(tok_.text));
      else if (tok_.is(Tok::Integer)) {
        int64_t v = 0;
        if (!intValue(tok_.text, v))
          return error("integer " + std::string(tok_.text) + " does not fit in 64 bits");
        a = Attr::getInt(v);
      } else if (tok_.isKeyword("true") || tok_.isKeyword("false")) {
        a = Attr::getBool(tok_.text == "true");
      } else if (tok_.is(Tok::Symbol)) {
        a = Attr::getSym(std::string(tok_.text.substr(1)));
      } else if (consumeIf(Tok::LSquare)) {
        std::vector<int64_t> vals;
        if (!tok_.is(Tok::RSquare)) {
          do {
            int64_t v = 0;
            if (!tok_.is(Tok::Integer)) return errorExpected("expected an integer in the list, found " + describe(tok_));
            if (!intValue(tok_.text, v))
              return error("integer " + std::string(tok_.text) + " does not fit in 64 bits");
            consume();
            vals.push_back(v);
          } while (consumeIf(Tok::Comma));
        }
        if (!tok_.is(Tok::RSquare)) return errorExpected("expected ']' to close the list, found " + describe(tok_));
        a = Attr::getInts(std::move(vals));
      } else {
        return errorExpected("expected a string, integer, boolean, list or symbol attribute value, found " +
                             describe(tok_));
      }
      consume();
      f.fnAttrs().emplace_back(std::move(name), std::move(a));
    } while (consumeIf(Tok::Comma));
  }
  std::sort(f.fnAttrs().begin(), f.fnAttrs().end(),
            [](const auto &a, const auto &b) { return a.first < b.first; });
  return expect(Tok::RBrace, "to close the attribute list");
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Function bodies
//===----------------------------------------------------------------------===//

bool Parser::defineValue(Value *v, const Token &nameTok) {
  std::string_view name = nameTok.text.substr(1);
  // One lookup that inserts (issue 23: the table of a large function does
  // not fit in cache, and each lookup was a miss).
  auto [prev, fresh] = values_.tryEmplace(name, v);
  if (!fresh) {
    Diagnostic d{Severity::Error, nameTok.loc, "redefinition of value %" + std::string(name), {}};
    d.note((*prev)->loc(), "previous definition is here");
    diag_.emit(std::move(d));
    failed_ = true;
    return false;
  }
  v->setName(std::string(name));
  if (!forwardValues_.empty()) {
    auto fwd = forwardValues_.find(std::string(name));
    if (fwd != forwardValues_.end()) {
      fwd->second.placeholder->replaceAllUsesWith(v);
      forwardValues_.erase(fwd);
    }
  }
  return true;
}

Block *Parser::getBlock(const Token &t) {
  if (Block **known = blocks_.find(t.text.substr(1))) {
    Block *b = *known;
    if (b->isEntry()) {
      std::string name(t.text.substr(1));
      error(t.loc, "the entry block ^" + name + " cannot be a branch target", b->loc(),
            "^" + name + " is the entry block of @" + b->function()->name());
      return nullptr;
    }
    return b;
  }
  std::string name(t.text.substr(1));
  auto fwd = forwardBlocks_.find(name);
  if (fwd != forwardBlocks_.end()) return fwd->second.block.get();
  auto b = std::make_unique<Block>(name);
  Block *raw = b.get();
  forwardBlocks_[name] = {std::move(b), t.loc};
  return raw;
}

// body ::= block+ `}`
// block ::= block-header? operation*      (only the entry block may omit its header)
bool Parser::parseBody(Function &f, Location open) {
  Block *cur = f.entry();
  bool first = true;
  while (!tok_.is(Tok::RBrace)) {
    if (tok_.is(Tok::Eof))
      return error(tok_.loc, "expected '}' to end the body of @" + f.name() + ", found end of file",
                   open, "the body of @" + f.name() + " begins here");
    if (tok_.is(Tok::BlockId)) {
      if (!parseBlockHeader(f, cur, first)) return false;
    } else {
      if (!parseOperation(*cur)) return false;
    }
    first = false;
  }
  consume();
  return true;
}

// block-header ::= block-id (`(` (value-id `:` type (`,` value-id `:` type)*)? `)`)? `:`
bool Parser::parseBlockHeader(Function &f, Block *&b, bool first) {
  Token label = tok_;
  std::string name(label.text.substr(1));
  consume();
  Block *blk;
  if (first) {
    // The entry block exists already; it takes the label.
    blk = f.entry();
    blk->setLabel(name);
    blk->setLoc(label.loc);
    auto fwd = forwardBlocks_.find(name);
    if (fwd != forwardBlocks_.end())
      return error(fwd->second.firstUse, "the entry block ^" + name + " cannot be a branch target");
    if (tok_.is(Tok::LParen))
      return error("the entry block takes the function's parameters; it has no argument list");
  } else {
    if (Block **prev = blocks_.find(label.text.substr(1)))
      return error(label.loc, "redefinition of block ^" + name, (*prev)->loc(),
                   "previous definition is here");
    auto fwd = forwardBlocks_.find(name);
    std::unique_ptr<Block> owned;
    if (fwd != forwardBlocks_.end()) {
      owned = std::move(fwd->second.block);
      forwardBlocks_.erase(fwd);
    } else {
      owned = std::make_unique<Block>(name);
    }
    owned->setLoc(label.loc);
    blk = f.addBlock(std::move(owned));
    if (consumeIf(Tok::LParen)) {
      if (!tok_.is(Tok::RParen)) {
        do {
          if (!tok_.is(Tok::ValueId))
            return errorExpected("expected block argument name, found " + describe(tok_));
          Token nameTok = tok_;
          consume();
          if (!expect(Tok::Colon, "after the block argument name")) return false;
          Type t;
          if (!parseType(t)) return false;
          if (!defineValue(blk->addArgument(t, nameTok.loc), nameTok)) return false;
        } while (consumeIf(Tok::Comma));
      }
      if (!expect(Tok::RParen, "to close the block arguments")) return false;
    }
  }
  blocks_.tryEmplace(label.text.substr(1), blk); // new: a redefinition was refused above
  b = blk;
  return expect(Tok::Colon, "after the block label");
}

// operand ::= value-id | symbol          (a symbol names a module constant)
bool Parser::parseOperand(Value *&v) {
  if (tok_.is(Tok::ValueId) || tok_.is(Tok::Symbol)) operandLocs_.push_back(tok_.loc);
  if (tok_.is(Tok::ValueId)) {
    if (Value **known = values_.find(tok_.text.substr(1))) {
      v = *known;
    } else {
      auto &fwd = forwardValues_[std::string(tok_.text.substr(1))];
      if (!fwd.placeholder) {
        fwd.placeholder = std::make_unique<BlockArgument>(nullptr, 0, Type(), tok_.loc);
        fwd.firstUse = tok_.loc;
      }
      v = fwd.placeholder.get();
    }
    consume();
    return true;
  }
  if (tok_.is(Tok::Symbol)) {
    std::string name(tok_.text.substr(1));
    if (Global *g = m_->lookupGlobal(name)) {
      v = g;
    } else {
      auto &fwd = forwardGlobals_[name];
      if (!fwd.placeholder) {
        fwd.placeholder = std::make_unique<Global>(name, Type(), tok_.loc);
        fwd.firstUse = tok_.loc;
      }
      v = fwd.placeholder.get();
    }
    consume();
    return true;
  }
  if (tok_.is(Tok::Error)) return lexError();
  return errorExpected("expected an operand (e.g. '%x' or '@weight'), found " + describe(tok_));
}

// operand-list ::= (operand (`,` operand)*)?   followed by `close`
bool Parser::parseOperandList(std::vector<Value *> &vs, Tok close) {
  if (consumeIf(close)) return true;
  do {
    Value *v;
    if (!parseOperand(v)) return false;
    vs.push_back(v);
  } while (consumeIf(Tok::Comma));
  return expect(close, "to close the operand list");
}

// successor ::= block-id (`(` operand-list `)`)?
bool Parser::parseSuccessor(Successor &s, std::vector<Value *> &operands) {
  if (!tok_.is(Tok::BlockId))
    return errorExpected("expected a block label (e.g. '^exit'), found " + describe(tok_));
  s.block = getBlock(tok_);
  if (!s.block) return false;
  s.loc = tok_.loc;
  consume();
  s.operandBegin = static_cast<unsigned>(operands.size());
  if (consumeIf(Tok::LParen))
    if (!parseOperandList(operands, Tok::RParen)) return false;
  s.operandCount = static_cast<unsigned>(operands.size()) - s.operandBegin;
  return true;
}

// loc      ::= `loc` `(` file-loc (`,` `members` `[` file-loc (`,` file-loc)* `]`)? `)`
// file-loc ::= string `:` integer `:` integer | `unknown`
bool Parser::parseLoc(Location &loc, std::vector<Location> *members) {
  consume();
  if (!expect(Tok::LParen, "after 'loc'")) return false;
  if (!parseFileLoc(loc)) return false;
  if (consumeIf(Tok::Comma)) {
    if (!tok_.isKeyword("members") || !members)
      return errorExpected(std::string(members ? "expected 'members' after ',' in loc(...)"
                                               : "expected ')' to close loc(...)") +
                           ", found " + describe(tok_));
    consume();
    if (!expect(Tok::LSquare, "after 'members'")) return false;
    members->clear();
    do {
      Location l;
      if (!parseFileLoc(l)) return false;
      members->push_back(l);
    } while (consumeIf(Tok::Comma));
    if (!expect(Tok::RSquare, "to close members[...]")) return false;
  }
  return expect(Tok::RParen, "to close loc(...)");
}

bool Parser::parseFileLoc(Location &loc) {
  if (tok_.isKeyword("unknown")) {
    consume();
    loc = Location();
    return true;
  }
  if (!tok_.is(Tok::String)) return errorExpected("expected a file name string or 'unknown' in loc(...)");
  std::string file = Lexer::unescape(tok_.text);
  consume();
  uint32_t nums[2];
  for (uint32_t &n : nums) {
    if (!expect(Tok::Colon, "in loc(\"file\":line:col)")) return false;
    int64_t v = 0;
    if (!tok_.is(Tok::Integer) || !intValue(tok_.text, v) || v < 0 || v > UINT32_MAX)
      return errorExpected("expected a line or column number in loc(...)");
    n = static_cast<uint32_t>(v);
    consume();
  }
  loc = {ctx_.intern(file), nums[0], nums[1]};
  return true;
}

bool Parser::buildOp(Block &b, OpCode code, Location loc, const std::vector<Token> &names,
                     const std::vector<Value *> &operands, std::vector<Type> types,
                     bool typesGiven, std::vector<Attr> attrs, std::vector<Successor> succs,
                     const std::vector<Location> &attrLocs) {
  const OpInfo &info = opInfo(code);
  std::string opName = "'" + std::string(info.mnemonic) + "'";
  int n = static_cast<int>(operands.size());
  if (n < info.minOperands || (info.maxOperands >= 0 && n > info.maxOperands)) {
    std::string expected = info.minOperands == info.maxOperands
                               ? std::to_string(info.minOperands)
                           : info.maxOperands < 0
                               ? "at least " + std::to_string(info.minOperands)
                               : std::to_string(info.minOperands) + " or " +
                                     std::to_string(info.maxOperands);
    return error(loc, opName + " expects " + expected + " operand" +
                          (expected == "1" ? "" : "s") + ", got " + std::to_string(n));
  }
  for (size_t i = 0; i < info.attrs.size(); ++i)
    if (attrs[i].isNull())
      return error(loc, opName + " requires attribute '" + info.attrs[i].name + "' (e.g. " +
                            attrExample(info.attrs[i]) + ")");
  size_t numResults = info.numResults >= 0 ? static_cast<size_t>(info.numResults)
                      : typesGiven         ? types.size()
                                           : names.size();
  if (!names.empty() && names.size() != numResults)
    return error(loc, opName + " produces " + std::to_string(numResults) + " result" +
                          (numResults == 1 ? "" : "s") + " but " + std::to_string(names.size()) +
                          (names.size() == 1 ? " name is" : " names are") + " given");
  if (typesGiven && types.size() != numResults)
    return error(loc, opName + " produces " + std::to_string(numResults) + " result" +
                          (numResults == 1 ? "" : "s") + " but " + std::to_string(types.size()) +
                          " result type" + (types.size() == 1 ? " is" : "s are") + " given");
  if (!typesGiven) types.assign(numResults, Type());
  auto op = Operation::create(code, loc, operands, types, std::move(attrs), std::move(succs));
  Operation *raw = b.push_back(std::move(op));
  for (unsigned i = 0; i < raw->numOperands() && i < operandLocs_.size(); ++i)
    raw->setOperandLoc(i, operandLocs_[i]);
  for (unsigned i = 0; i < attrLocs.size(); ++i)
    if (attrLocs[i].known()) raw->setAttrLoc(i, attrLocs[i]);
  if (!memberLocs_.empty()) raw->setMemberLocs(std::move(memberLocs_));
  memberLocs_.clear();
  for (size_t i = 0; i < names.size(); ++i)
    if (!defineValue(raw->result(static_cast<unsigned>(i)), names[i])) return false;
  return true;
}

// operation ::= (value-id (`,` value-id)* `=`)? op-body loc?
// op-body   ::= generic-op | constant-op | call-op | construct-op | br-op
//             | cond-br-op | match-op | ret-op | invoke-op
// generic-op ::= bare-id (item (`,` item)*)? (`:` type (`,` type)*)?
// item       ::= operand | bare-id `=` attr-value
bool Parser::parseOperation(Block &b) {
  std::vector<Token> names;
  Location loc = tok_.loc;
  if (tok_.is(Tok::ValueId)) {
    do {
      if (!tok_.is(Tok::ValueId))
        return errorExpected("expected a result name, found " + describe(tok_));
      names.push_back(tok_);
      consume();
    } while (consumeIf(Tok::Comma));
    if (!expect(Tok::Equal, "after the result names")) return false;
  }
  if (tok_.is(Tok::Error)) return lexError();
  if (!tok_.is(Tok::BareId)) return error("expected an operation name, found " + describe(tok_));
  Location opLoc = tok_.loc;
  if (names.empty()) loc = opLoc;
  auto code = lookupOpCode(tok_.text);
  if (!code) return error("unknown operation '" + std::string(tok_.text) + "'");
  const OpInfo &info = opInfo(*code);
  consume();

  operandLocs_.clear();
  memberLocs_.clear();
  std::vector<Value *> operands;
  std::vector<Attr> attrs = defaultAttrs(*code);
  std::vector<Location> attrLocs(attrs.size());
  std::vector<Successor> succs;
  std::vector<Type> types;
  bool typesGiven = false;
  // Sets attribute `name`, written at `at` (the token of its value).
  auto setAttr = [&](std::string_view name, Attr a, Location at = {}) {
    size_t i = static_cast<size_t>(info.attrIndex(name));
    attrs[i] = std::move(a);
    attrLocs[i] = at;
  };
  auto parseOptionalTypes = [&]() {
    if (!consumeIf(Tok::Colon)) return true;
    typesGiven = true;
    do {
      Type t;
      if (!parseType(t)) return false;
      types.push_back(t);
    } while (consumeIf(Tok::Comma));
    return true;
  };

  switch (*code) {
  // constant-op ::= `constant` literal `:` type
  case OpCode::Constant: {
    Location litLoc = tok_.loc;
    // The literal is parsed after its type is known: remember where it is.
    Lexer save = lex_;
    Token saveTok = tok_;
    Location savePrevEnd = prevEnd_;
    int depth = 0;
    while (!tok_.is(Tok::Eof) && !(depth == 0 && tok_.is(Tok::Colon))) {
      if (tok_.is(Tok::LSquare)) ++depth;
      if (tok_.is(Tok::RSquare)) --depth;
      if (tok_.is(Tok::Error)) return lexError();
      if (depth < 0 || tok_.is(Tok::ValueId) || tok_.is(Tok::BlockId) || tok_.is(Tok::RBrace)) break;
      consume();
    }
    if (!tok_.is(Tok::Colon))
      return error(litLoc, "'constant' needs its type: constant <literal> : tensor<...>");
    consume();
    Location typeLoc = tok_.loc;
    Type t;
    if (!parseType(t)) return false;
    Lexer after = lex_;
    Token afterTok = tok_;
    Location afterPrevEnd = prevEnd_;
    lex_ = save;
    tok_ = saveTok;
    prevEnd_ = savePrevEnd;
    DenseValue v;
    if (!parseLiteral(t, typeLoc, v)) return false;
    if (!tok_.is(Tok::Colon)) return error("unexpected " + describe(tok_) + " after the literal");
    lex_ = after;
    tok_ = afterTok;
    prevEnd_ = afterPrevEnd;
    setAttr("value", Attr::getDense(std::move(v)));
    types = {t};
    typesGiven = true;
    break;
  }
  // call-op ::= `call` symbol `(` operand-list `)` (`:` type (`,` type)*)?
  case OpCode::Call: {
    if (!tok_.is(Tok::Symbol))
      return errorExpected("expected the callee (e.g. '@f'), found " + describe(tok_));
    setAttr("callee", Attr::getSym(std::string(tok_.text.substr(1))), tok_.loc);
    consume();
    if (!expect(Tok::LParen, "after the callee")) return false;
    if (!parseOperandList(operands, Tok::RParen)) return false;
    if (!parseOptionalTypes()) return false;
    break;
  }
  // construct-op ::= `construct` symbol `::` bare-id (`(` operand-list `)`)? (`:` type)?
  case OpCode::Construct: {
    if (!tok_.is(Tok::Symbol))
      return errorExpected("expected the type (e.g. '@Tree::Leaf'), found " + describe(tok_));
    setAttr("adt", Attr::getSym(std::string(tok_.text.substr(1))), tok_.loc);
    consume();
    if (!expect(Tok::ColonColon, "between the type and the constructor")) return false;
    if (!tok_.is(Tok::BareId))
      return errorExpected("expected a constructor name, found " + describe(tok_));
    setAttr("ctor", Attr::getStr(std::string(tok_.text)), tok_.loc);
    consume();
    if (consumeIf(Tok::LParen))
      if (!parseOperandList(operands, Tok::RParen)) return false;
    if (!parseOptionalTypes()) return false;
    break;
  }
  // br-op ::= `br` successor
  case OpCode::Br: {
    Successor s;
    if (!parseSuccessor(s, operands)) return false;
    succs.push_back(s);
    break;
  }
  // cond-br-op ::= `cond_br` operand `,` successor `,` successor
  case OpCode::CondBr: {
    Value *c;
    if (!parseOperand(c)) return false;
    operands.push_back(c);
    Successor t, f;
    if (!expect(Tok::Comma, "after the condition")) return false;
    if (!parseSuccessor(t, operands)) return false;
    if (!expect(Tok::Comma, "between the two successors")) return false;
    if (!parseSuccessor(f, operands)) return false;
    succs = {t, f};
    break;
  }
  // match-op ::= `match` operand `[` case (`,` case)* `]`
  // case     ::= (bare-id | `_`) `:` block-id
  case OpCode::Match: {
    Value *v;
    if (!parseOperand(v)) return false;
    operands.push_back(v);
    if (!expect(Tok::LSquare, "to begin the match cases")) return false;
    do {
      if (!tok_.is(Tok::BareId))
        return errorExpected("expected a constructor name or '_', found " + describe(tok_));
      Successor s;
      s.label = tok_.text == "_" ? "" : std::string(tok_.text);
      s.loc = tok_.loc;
      consume();
      if (!expect(Tok::Colon, "after the case name")) return false;
      if (!tok_.is(Tok::BlockId))
        return errorExpected("expected a block label, found " + describe(tok_));
      s.block = getBlock(tok_);
      if (!s.block) return false;
      consume();
      succs.push_back(s);
    } while (consumeIf(Tok::Comma));
    if (!expect(Tok::RSquare, "to close the match cases")) return false;
    break;
  }
  // ret-op ::= `ret` (operand (`,` operand)*)?
  case OpCode::Ret: {
    if ((tok_.is(Tok::ValueId) && !atResultList()) || tok_.is(Tok::Symbol)) {
      do {
        Value *v;
        if (!parseOperand(v)) return false;
        operands.push_back(v);
      } while (consumeIf(Tok::Comma));
    }
    break;
  }
  // invoke-op ::= `invoke_mut` symbol `(` operand-list `)` `->` `(` operand-list `)`
  //             | `invoke_shape_func` symbol `(` operand-list `)` (`:` type (`,` type)*)?
  case OpCode::InvokeMut:
  case OpCode::InvokeShapeFunc: {
    if (!tok_.is(Tok::Symbol))
      return errorExpected("expected the kernel (e.g. '@fused_add'), found " + describe(tok_));
    setAttr("callee", Attr::getSym(std::string(tok_.text.substr(1))), tok_.loc);
    consume();
    if (!expect(Tok::LParen, "after the kernel name")) return false;
    if (!parseOperandList(operands, Tok::RParen)) return false;
    if (*code == OpCode::InvokeShapeFunc) {
      if (tok_.is(Tok::Arrow))
        return error("'invoke_shape_func' returns the output shapes as results: write "
                     "'%s = invoke_shape_func @kernel(...)', not '-> (...)'");
      if (!parseOptionalTypes()) return false;
      break;
    }
    setAttr("num_inputs", Attr::getInt(static_cast<int64_t>(operands.size())));
    if (!expect(Tok::Arrow, "before the output list")) return false;
    if (!expect(Tok::LParen, "to begin the output list")) return false;
    if (!parseOperandList(operands, Tok::RParen)) return false;
    break;
  }
  default: {
    // Generic form: operands, then `name=value` attributes.
    std::vector<bool> seen(info.attrs.size(), false);
    Location firstAttr;
    auto startsItem = [&]() {
      if (tok_.is(Tok::ValueId)) return !atResultList();
      if (tok_.is(Tok::Symbol)) return true;
      return tok_.is(Tok::BareId) && peek().is(Tok::Equal);
    };
    if (startsItem()) {
      do {
        if (tok_.is(Tok::BareId) && peek().is(Tok::Equal)) {
          std::string name(tok_.text);
          Location aloc = tok_.loc;
          int idx = info.attrIndex(name);
          if (idx < 0) {
            std::string known;
            for (const AttrSpec &s : info.attrs) known += (known.empty() ? "" : ", ") + s.name;
            return error(aloc, "'" + std::string(info.mnemonic) + "' has no attribute '" + name +
                                   "'" + (known.empty() ? std::string(" (it takes none)")
                                                        : "; it takes: " + known));
          }
          if (seen[static_cast<size_t>(idx)])
            return error(aloc, "attribute '" + name + "' is given twice",
                         attrLocs[static_cast<size_t>(idx)], "first given here");
          if (!firstAttr.known()) firstAttr = aloc;
          seen[static_cast<size_t>(idx)] = true;
          attrLocs[static_cast<size_t>(idx)] = aloc;
          consume();
          consume(); // '='
          if (!parseAttrValue(info.attrs[static_cast<size_t>(idx)], attrs[static_cast<size_t>(idx)]))
            return false;
        } else {
          if (firstAttr.known())
            return error(tok_.loc, "operands must come before attributes", firstAttr,
                         "the first attribute is here");
          Value *v;
          if (!parseOperand(v)) return false;
          operands.push_back(v);
        }
      } while (consumeIf(Tok::Comma));
    }
    if (!parseOptionalTypes()) return false;
    break;
  }
  }
  if (tok_.isKeyword("loc") && peek().is(Tok::LParen)) {
    Location at = tok_.loc;
    if (!parseLoc(loc, &memberLocs_)) return false;
    if (!memberLocs_.empty() && *code != OpCode::Call && *code != OpCode::InvokeMut &&
        *code != OpCode::InvokeShapeFunc)
      return error(at, "members[...] locations are only for a call or invoke of a kernel, not '" +
                           std::string(info.mnemonic) + "'");
    // The op stands for text elsewhere: positions in this text would mix two
    // files in one diagnostic, so operands, attributes and targets fall back
    // to the op's location.
    operandLocs_.clear();
    attrLocs.assign(attrLocs.size(), Location());
    for (Successor &s : succs) s.loc = Location();
  }
  return buildOp(b, *code, loc, names, operands, std::move(types), typesGiven, std::move(attrs),
                 std::move(succs), attrLocs);
}

bool Parser::atResultList() {
  Lexer copy = lex_;
  Token t = tok_;
  while (t.is(Tok::ValueId)) {
    t = copy.lex();
    if (t.is(Tok::Equal)) return true;
    if (!t.is(Tok::Comma)) return false;
    t = copy.lex();
  }
  return false;
}

/// The entry of a forward-reference table whose first use comes first in the
/// text, so that the error reported is the one a reader meets first.
template <class Map> typename Map::const_iterator firstInText(const Map &m) {
  auto best = m.begin();
  for (auto it = m.begin(); it != m.end(); ++it) {
    const Location &a = it->second.firstUse, &b = best->second.firstUse;
    if (a.line < b.line || (a.line == b.line && a.col < b.col)) best = it;
  }
  return best;
}

bool Parser::finishFunction(Function &f) {
  if (!forwardValues_.empty()) {
    auto it = firstInText(forwardValues_);
    return error(it->second.firstUse, "use of undefined value %" + it->first);
  }
  if (!forwardBlocks_.empty()) {
    auto it = firstInText(forwardBlocks_);
    return error(it->second.firstUse, "use of undefined block ^" + it->first);
  }
  (void)f;
  return !failed_;
}

bool Parser::finishModule() {
  if (!forwardGlobals_.empty()) {
    auto it = firstInText(forwardGlobals_);
    return error(it->second.firstUse, "use of undefined constant @" + it->first);
  }
  for (const auto &[name, loc] : typeRefs_)
    if (!m_->lookupAdt(name))
      return error(loc, "unknown type @" + name + " (declare it with 'type @" + name +
                            " = Ctor(...) | ...')");
  // Structure first (terminators, successors, dominance): inference relies on
  // every operand being defined before its use.
  for (auto &f : m_->functions())
    if (failed(verifyStructure(*f, diag_))) return false;
  // Fill in omitted result types in dominance order.
  for (auto &f : m_->functions()) {
    std::vector<Block *> order = f->reversePostOrder();
    std::unordered_map<Block *, bool> inOrder;
    for (Block *b : order) inOrder[b] = true;
    for (auto &b : f->blocks())
      if (!inOrder.count(b.get())) order.push_back(b.get());
    for (Block *b : order) {
      for (Operation &op : *b) {
        bool untyped = op.numResults() > 0 && !op.result(0)->type();
        if (!untyped) continue;
        for (unsigned i = 0; i < op.numOperands(); ++i)
          if (!op.operand(i)->type())
            return error(op.loc(), "cannot infer the result type: operand " + std::to_string(i) +
                                       " is defined in unreachable code; give the type explicitly");
        InferredTypes inf = inferResultTypes(op, *m_);
        if (!inf.ok()) {
          diag_.emit(relationError(op, inf));
          failed_ = true;
          return false;
        }
        if (inf.types.size() != op.numResults())
          return error(op.loc(), "'" + std::string(op.name()) + "' produces " +
                                     std::to_string(inf.types.size()) + " results but " +
                                     std::to_string(op.numResults()) + " are named");
        for (unsigned i = 0; i < op.numResults(); ++i) op.result(i)->setType(inf.types[i]);
      }
    }
  }
  return true;
}

} // namespace detail

std::unique_ptr<Module> parseModule(std::string_view text, const std::string &fileName,
                                    Context &ctx, DiagnosticEngine &diag, uint32_t firstLine) {
  detail::Parser p(text, ctx.intern(fileName), ctx, diag, firstLine);
  return p.parseModule();
}

} // namespace nimble::ir
