//===- Printer.cpp - Writing a Module as .nir text ------------------------===//

#include "ir/Printer.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace nimble::ir {

namespace {

/// Shortest text that reads back to the same value, always lexed as a float.
std::string formatFloat(double v, DType t) {
  char buf[64];
  std::to_chars_result r;
  if (t == DType::F64) r = std::to_chars(buf, buf + sizeof buf, v);
  else r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string formatElement(const DenseValue &v, int64_t i) {
  DType t = v.dtype;
  if (isFloat(t)) {
    double d = v.getDouble(i);
    if (std::isfinite(d)) return formatFloat(d, t);
    // inf / nan: raw bits in hex, as MLIR does.
    size_t n = dtypeSize(t);
    int64_t idx = v.splat ? 0 : i;
    uint64_t bits = 0;
    for (size_t k = 0; k < n; ++k)
      bits |= static_cast<uint64_t>(v.bytes[static_cast<size_t>(idx) * n + k]) << (8 * k);
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, bits, 16);
    std::string hex(buf, r.ptr);
    for (char &c : hex) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return "0x" + hex;
  }
  if (t == DType::I1) return v.getInt(i) ? "true" : "false";
  if (t == DType::U64) return std::to_string(static_cast<uint64_t>(v.getInt(i)));
  return std::to_string(v.getInt(i));
}

void printElems(std::string &out, const DenseValue &v, size_t depth, int64_t &next) {
  if (depth == v.shape.size()) {
    out += formatElement(v, next++);
    return;
  }
  out += '[';
  for (int64_t k = 0; k < v.shape[depth]; ++k) {
    if (k) out += ", ";
    printElems(out, v, depth + 1, next);
  }
  out += ']';
}

std::string quote(const std::string &s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') { r += "\\n"; continue; }
    if (c == '\t') { r += "\\t"; continue; }
    r += c;
  }
  return r + "\"";
}

/// Unique names for the values and blocks of one function.
class NameTable {
public:
  explicit NameTable(const Function *f) {
    if (!f) return;
    for (auto &b : f->blocks()) {
      std::string want = b->label().empty() ? (b->isEntry() ? "entry" : "") : b->label();
      blocks_[b.get()] = pick(blockNames_, blockSuffix_, want, nextBlock_, "bb");
      for (Value *a : b->arguments()) name(a);
      for (Operation &op : *b)
        for (Value *r : op.results()) name(r);
    }
  }
  std::string value(const Value *v) {
    if (!v) return "%<<null>>";
    if (isa<Global>(v)) return "@" + v->name();
    auto it = values_.find(v);
    if (it != values_.end()) return "%" + it->second;
    return "%" + (v->name().empty() ? std::string("<<unnamed>>") : v->name());
  }
  std::string block(const Block *b) {
    if (!b) return "^<<null>>";
    auto it = blocks_.find(b);
    return "^" + (it != blocks_.end() ? it->second : b->label());
  }

private:
  void name(const Value *v) { values_[v] = pick(valueNames_, valueSuffix_, v->name(), nextValue_, ""); }
  /// `want`, else `want_k` for the smallest free k >= 1, else prefix + a
  /// counter. `suffix` remembers, per wanted name, the k to try next: every
  /// smaller k is taken for good (names are only ever added), so the result
  /// is the same as probing from 1, without the quadratic probing when a
  /// name repeats (inlined bodies all bring their %v_0).
  static std::string pick(std::unordered_set<std::string> &used,
                          std::unordered_map<std::string, unsigned> &suffix, std::string want,
                          unsigned &counter, const std::string &prefix) {
    // Names set through the API may hold characters the lexer does not take
    // after `%` / `^` ([a-zA-Z0-9_.$]); replace them so the output parses back.
    for (char &c : want)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '$')
        c = '_';
    if (!want.empty() && used.insert(want).second) return want;
    if (!want.empty()) {
      unsigned &k = suffix.try_emplace(want, 1).first->second;
      for (;; ++k) {
        std::string cand = want + "_" + std::to_string(k);
        if (used.insert(cand).second) return cand;
      }
    }
    for (;;) {
      std::string cand = prefix + std::to_string(counter++);
      if (used.insert(cand).second) return cand;
    }
  }
  std::unordered_map<const Value *, std::string> values_;
  std::unordered_map<const Block *, std::string> blocks_;
  std::unordered_set<std::string> valueNames_, blockNames_;
  std::unordered_map<std::string, unsigned> valueSuffix_, blockSuffix_;
  unsigned nextValue_ = 0, nextBlock_ = 0;
};

std::string typeList(const std::vector<Type> &ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].str();
  return s;
}

std::string resultTypes(const std::vector<Type> &ts) {
  if (ts.size() == 1 && !ts[0].isFunc()) return ts[0].str();
  return "(" + typeList(ts) + ")";
}

class Printer {
public:
  Printer(const PrintOptions &opts, NameTable &names) : opts_(opts), names_(names) {}

  std::string operands(const Operation &op, unsigned begin, unsigned end) {
    std::string s;
    for (unsigned i = begin; i < end; ++i) s += (i > begin ? ", " : "") + names_.value(op.operand(i));
    return s;
  }
  std::string successor(const Operation &op, unsigned k) {
    const Successor &s = op.successors()[k];
    std::string r = names_.block(s.block);
    if (s.operandCount)
      r += "(" + operands(op, s.operandBegin, s.operandBegin + s.operandCount) + ")";
    return r;
  }

  std::string op(const Operation &op) {
    std::string s;
    for (unsigned i = 0; i < op.numResults(); ++i)
      s += (i ? ", " : "") + names_.value(op.result(i));
    if (op.numResults()) s += " = ";
    s += op.name();
    std::vector<Type> rts;
    for (Value *r : op.results()) rts.push_back(r->type());
    switch (op.code()) {
    case OpCode::Constant:
      s += " " + printLiteral(op.attr("value").getDense());
      break;
    case OpCode::Call:
      s += " @" + op.strAttr("callee") + "(" + operands(op, 0, op.numOperands()) + ")";
      break;
    case OpCode::Construct:
      s += " @" + op.strAttr("adt") + "::" + op.strAttr("ctor");
      if (op.numOperands()) s += "(" + operands(op, 0, op.numOperands()) + ")";
      break;
    case OpCode::Br: s += " " + successor(op, 0); break;
    case OpCode::CondBr:
      s += " " + names_.value(op.operand(0)) + ", " + successor(op, 0) + ", " + successor(op, 1);
      break;
    case OpCode::Match: {
      s += " " + names_.value(op.operand(0)) + " [";
      for (size_t k = 0; k < op.successors().size(); ++k) {
        const Successor &c = op.successors()[k];
        s += (k ? ", " : "") + (c.label.empty() ? std::string("_") : c.label) + ": " +
             names_.block(c.block);
      }
      s += "]";
      break;
    }
    case OpCode::Ret:
      if (op.numOperands()) s += " " + operands(op, 0, op.numOperands());
      break;
    case OpCode::InvokeShapeFunc:
      s += " @" + op.strAttr("callee") + "(" + operands(op, 0, op.numOperands()) + ")";
      break;
    case OpCode::InvokeMut: {
      unsigned nin = static_cast<unsigned>(op.intAttr("num_inputs"));
      s += " @" + op.strAttr("callee") + "(" + operands(op, 0, nin) + ") -> (" +
           operands(op, nin, op.numOperands()) + ")";
      break;
    }
    default: {
      std::string items = operands(op, 0, op.numOperands());
      const OpInfo &info = op.info();
      for (size_t i = 0; i < info.attrs.size(); ++i) {
        const AttrSpec &spec = info.attrs[i];
        if (spec.defaultValue && *spec.defaultValue == op.attr(static_cast<unsigned>(i))) continue;
        items += (items.empty() ? "" : ", ") + spec.name + "=" + printAttr(op.attr(static_cast<unsigned>(i)));
      }
      if (!items.empty()) s += " " + items;
      break;
    }
    }
    if (!rts.empty()) s += " : " + typeList(rts);
    if (opts_.debugInfo && (op.loc().known() || !op.memberLocs().empty())) {
      auto fileLoc = [&](Location l) {
        return l.known() ? quote(l.file) + ":" + std::to_string(l.line) + ":" + std::to_string(l.col)
                         : std::string("unknown");
      };
      s += " loc(" + fileLoc(op.loc());
      if (!op.memberLocs().empty()) {
        s += ", members[";
        for (size_t i = 0; i < op.memberLocs().size(); ++i) s += (i ? ", " : "") + fileLoc(op.memberLocs()[i]);
        s += "]";
      }
      s += ")";
    }
    return s;
  }

  void function(const Function &f, std::ostream &os) {
    os << "func @" << f.name() << "(";
    Block *entry = f.entry();
    std::vector<Type> params = f.argTypes();
    for (size_t i = 0; i < params.size(); ++i) {
      os << (i ? ", " : "");
      if (entry && i < entry->numArguments()) os << names_.value(entry->argument(static_cast<unsigned>(i))) << ": ";
      else os << "%arg" << i << ": ";
      os << params[i].str();
    }
    os << ")";
    std::vector<Type> results = f.resultTypes();
    if (!results.empty()) os << " -> " << resultTypes(results);
    if (!f.fnAttrs().empty()) {
      os << " attributes {";
      for (size_t i = 0; i < f.fnAttrs().size(); ++i)
        os << (i ? ", " : "") << f.fnAttrs()[i].first << " = " << printAttr(f.fnAttrs()[i].second);
      os << "}";
    }
    os << " {\n";
    for (auto &b : f.blocks()) {
      os << names_.block(b.get());
      if (!b->isEntry() && b->numArguments()) {
        os << "(";
        for (unsigned i = 0; i < b->numArguments(); ++i)
          os << (i ? ", " : "") << names_.value(b->argument(i)) << ": "
             << b->argument(i)->type().str();
        os << ")";
      }
      os << ":\n";
      for (Operation &o : *b) os << "  " << op(o) << "\n";
    }
    os << "}\n";
  }

private:
  const PrintOptions &opts_;
  NameTable &names_;
};

} // namespace

std::string printLiteral(const DenseValue &v) {
  std::string out;
  if (v.splat || v.shape.empty()) return formatElement(v, 0);
  int64_t next = 0;
  printElems(out, v, 0, next);
  return out;
}

std::string printAttr(const Attr &a) {
  if (a.isNull()) return "<<null>>";
  switch (a.kind()) {
  case AttrKind::Bool: return a.getBool() ? "true" : "false";
  case AttrKind::Int: return std::to_string(a.getInt());
  case AttrKind::Float: {
    if (std::isfinite(a.getFloat())) return formatFloat(a.getFloat(), DType::F64);
    return std::isnan(a.getFloat()) ? "0.0" : "1e308"; // not representable; never produced
  }
  case AttrKind::Ints: {
    std::string s = "[";
    for (size_t i = 0; i < a.getInts().size(); ++i)
      s += (i ? ", " : "") + std::to_string(a.getInts()[i]);
    return s + "]";
  }
  case AttrKind::DType: return std::string(dtypeName(a.getDType()));
  case AttrKind::Str: return quote(a.getStr());
  case AttrKind::Sym: return "@" + a.getStr();
  case AttrKind::Dense: return printLiteral(a.getDense());
  }
  return "?";
}

std::string printOperation(const Operation &op) {
  NameTable names(nullptr);
  PrintOptions opts;
  Printer p(opts, names);
  return p.op(op);
}

struct FunctionNames::Impl {
  explicit Impl(const Function &f) : names(&f) {}
  NameTable names;
  PrintOptions opts;
};

FunctionNames::FunctionNames(const Function &f) : impl_(std::make_unique<Impl>(f)) {}
FunctionNames::~FunctionNames() = default;
std::string FunctionNames::value(const Value *v) const { return impl_->names.value(v); }
std::string FunctionNames::block(const Block *b) const { return impl_->names.block(b); }
std::string FunctionNames::op(const Operation &op) const {
  Printer p(impl_->opts, impl_->names);
  return p.op(op);
}

void printFunction(const Function &f, std::ostream &os, const PrintOptions &opts) {
  NameTable names(&f);
  Printer p(opts, names);
  p.function(f, os);
}

void printModule(const Module &m, std::ostream &os, const PrintOptions &opts) {
  bool first = true;
  auto sep = [&]() {
    if (!first) os << "\n";
    first = false;
  };
  if (!m.name().empty()) {
    sep();
    os << "module @" << m.name() << "\n";
  }
  for (auto &adt : m.adts()) {
    sep();
    os << "type @" << adt->name << " = ";
    for (size_t i = 0; i < adt->ctors.size(); ++i) {
      const auto &c = adt->ctors[i];
      os << (i ? " | " : "") << c.name;
      if (!c.fields.empty()) os << "(" << typeList(c.fields) << ")";
    }
    os << "\n";
  }
  for (auto &g : m.globals()) {
    sep();
    os << "const @" << g->name() << " : " << g->type().str() << " = ";
    if (g->isExternal()) os << "external(" << quote(g->file()) << ", " << quote(g->key()) << ")";
    else os << printAttr(g->literal());
    os << "\n";
  }
  for (auto &f : m.functions()) {
    sep();
    printFunction(*f, os, opts);
  }
}

std::string printModuleToString(const Module &m, const PrintOptions &opts) {
  std::ostringstream os;
  printModule(m, os, opts);
  return os.str();
}

} // namespace nimble::ir
