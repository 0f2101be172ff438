//===- Parser.cpp - Reading .nir text into a Module -----------------------===//
//
// Recursive descent, one function per grammar rule (the rule is written above
// each). This file reads the module level (declarations of types, constants
// and functions) and finishes scopes; the other parts of the parser are
// ParserTypes.cpp (types), ParserOps.cpp (function bodies: blocks, operands,
// operations) and ParserLiterals.cpp (attribute values and dense literals);
// the class they share is in ParserImpl.h. Forward references (values used
// before their definition in the text, blocks, globals) get placeholders that
// are replaced once defined; what is still undefined at the end of its scope
// is an error at its first use.
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

#include "ir/Inference.h"
#include "ir/Lexer.h"
#include "ir/Limits.h"
#include "ir/ParserImpl.h"
#include "ir/Verifier.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

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
// End of scopes
//===----------------------------------------------------------------------===//

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
