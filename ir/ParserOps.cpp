//===- ParserOps.cpp - Function bodies of the .nir parser ----------------===//
//
// The part of the .nir parser (ir/Parser.cpp, whose header describes it) that
// reads function bodies: blocks and their arguments, operands (with forward
// references), successors, source locations, and operations in generic and
// custom syntax, built into the IR as they are read. The grammar rule of each
// function is written above it (test/docs/grammar-matches-parser.test checks
// them against docs/LangRef.md).
//
//===----------------------------------------------------------------------===//

#include "ir/Inference.h"
#include "ir/Lexer.h"
#include "ir/Limits.h"
#include "ir/ParserImpl.h"
#include "ir/Verifier.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace nimble::ir::detail {

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

} // namespace nimble::ir::detail
