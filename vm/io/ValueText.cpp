//===- ValueText.cpp - Inputs and outputs as text (nimble-run) ------------===//

#include "vm/io/ValueText.h"

#include "ir/Limits.h"

#include "ir/ShapeFns.h"
#include "vm/format/Disassembler.h"
#include "vm/format/Format.h"
#include "vm/io/Npy.h"
#include "vm/io/TensorText.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace nimble::vm {

namespace {

constexpr int kMaxDepth = limits::kMaxValueDepth; // ir/Limits.h
constexpr int kMaxPrintDepth = 1000;

class ValueParser {
public:
  ValueParser(const Executable &exe, std::string_view text, const std::string &baseDir,
              std::string &error)
      : exe_(exe), s_(text), dir_(baseDir), error_(error) {}

  bool parse(const TypeDesc &t, ObjectRef &out) {
    if (!value(t, out)) return false;
    skip();
    if (pos_ != s_.size()) return fail("unexpected '" + std::string(1, s_[pos_]) + "' after the value");
    return true;
  }

private:
  bool fail(std::string msg) {
    error_ = msg + " (at offset " + std::to_string(pos_) + ")";
    return false;
  }
  /// A message that needs no offset (it names its file or literal).
  bool failPlain(std::string msg) {
    error_ = std::move(msg);
    return false;
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  /// The text of a tensor: up to the next ',' or ')' (or the end).
  std::string_view tensorText() {
    size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != ')') ++pos_;
    std::string_view t = s_.substr(start, pos_ - start);
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
    return t;
  }

  /// A tuple or constructor whose fields are being read.
  struct Open {
    const std::vector<TypeDesc> *fields;
    uint32_t tag;
    std::string ctor; // "" for a tuple
    std::vector<ObjectRef> vals;
  };

  bool expectClose(const Open &o) {
    skip();
    if (pos_ >= s_.size() || s_[pos_] != ')')
      return o.ctor.empty() ? fail("expected ')' to close the tuple")
                            : fail("constructor '" + o.ctor + "' takes " + std::to_string(o.fields->size()) +
                                   " fields; expected ')'");
    ++pos_;
    return true;
  }

  /// value ::= tensor | ctor | tuple, read with an explicit stack of the
  /// open tuples and constructors: a list of any length nests as deep as it
  /// is long, and the C++ stack must not depend on it (under ASan ~3,000
  /// recursive levels overflowed 8 MiB; found by the input fuzzer's harness).
  bool value(const TypeDesc &root, ObjectRef &out) {
    std::vector<Open> open;
    const TypeDesc *t = &root;
    for (;;) {
      // Read the start of a value of type *t: a whole tensor or nullary
      // constructor (`done`), or the opening of a tuple or constructor.
      if (open.size() > static_cast<size_t>(kMaxDepth)) return fail("value nested too deeply");
      skip();
      ObjectRef done;
      switch (t->kind) {
      case TypeDesc::Kind::Tensor: {
        std::string_view txt = tensorText();
        if (txt.empty()) return fail("expected a tensor");
        TensorRef tensor;
        if (txt[0] == '@') {
          std::string path(txt.substr(1));
          if (!path.empty() && path[0] != '/') path = dir_ + "/" + path;
          if (Status st = readNpy(path, tensor); !st.ok()) return failPlain(st.message);
        } else if (Status st = parseTensorLiteral(txt, tensor); !st.ok()) {
          return failPlain(st.message);
        }
        done = ObjectRef(tensor.get());
        break;
      }
      case TypeDesc::Kind::Tuple: {
        if (pos_ >= s_.size() || s_[pos_] != '(') return fail("expected '(' for a tuple");
        ++pos_;
        open.push_back({&t->elems, 0, "", {}});
        break;
      }
      case TypeDesc::Kind::Adt: {
        const AdtDesc &adt = exe_.adts[t->adt];
        size_t start = pos_;
        while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
        std::string name(s_.substr(start, pos_ - start));
        if (name.empty()) return fail("expected a constructor of @" + adt.name);
        int tag = -1;
        for (size_t i = 0; i < adt.ctors.size(); ++i)
          if (adt.ctors[i].name == name) tag = static_cast<int>(i);
        if (tag < 0) {
          std::string known;
          for (auto &c : adt.ctors) known += (known.empty() ? "" : ", ") + c.name;
          pos_ = start;
          return fail("@" + adt.name + " has no constructor '" + name + "' (it has " + known + ")");
        }
        const auto &fields = adt.ctors[static_cast<size_t>(tag)].fields;
        skip();
        bool paren = pos_ < s_.size() && s_[pos_] == '(';
        if (fields.empty() && !paren) {
          done = ObjectRef(new Adt(static_cast<uint32_t>(tag), {}));
          break;
        }
        if (!paren)
          return fail("constructor '" + name + "' takes " + std::to_string(fields.size()) + " fields: expected '('");
        ++pos_;
        open.push_back({&fields, static_cast<uint32_t>(tag), name, {}});
        break;
      }
      case TypeDesc::Kind::Storage: return fail("storage values cannot be given as input");
      }
      // Close every open value that is now complete, and find the type of
      // the next field to read, if any.
      t = nullptr;
      while (!t) {
        if (done) {
          if (open.empty()) {
            out = std::move(done);
            return true;
          }
          open.back().vals.push_back(std::move(done));
        }
        Open &o = open.back();
        size_t n = o.vals.size();
        if (n < o.fields->size()) {
          if (n) {
            skip();
            if (pos_ >= s_.size() || s_[pos_] != ',')
              return o.ctor.empty() ? fail("expected ',' in a tuple")
                                    : fail("constructor '" + o.ctor + "' takes " +
                                           std::to_string(o.fields->size()) + " fields; expected ','");
            ++pos_;
          }
          t = &(*o.fields)[n];
        } else {
          if (!expectClose(o)) return false;
          done = ObjectRef(new Adt(o.tag, std::move(o.vals)));
          open.pop_back();
        }
      }
    }
  }

  const Executable &exe_;
  std::string_view s_;
  size_t pos_ = 0;
  std::string dir_;
  std::string &error_;
};

} // namespace

bool parseValue(const Executable &exe, const TypeDesc &t, std::string_view text,
                const std::string &baseDir, ObjectRef &out, std::string &error) {
  std::string fileText;
  // A whole ADT or tuple value may come from a text file.
  if (t.kind != TypeDesc::Kind::Tensor && !text.empty() && text[0] == '@') {
    std::string path(text.substr(1));
    if (!path.empty() && path[0] != '/') path = baseDir + "/" + path;
    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) {
      error = "cannot open '" + path + "': " + std::strerror(errno);
      return false;
    }
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) fileText.append(buf, n);
    bool readFailed = std::ferror(f);
    int err = errno;
    std::fclose(f);
    if (readFailed) {
      error = "cannot read '" + path + "': " + std::strerror(err);
      return false;
    }
    text = fileText;
    size_t slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    ValueParser p(exe, text, dir, error);
    return p.parse(t, out);
  }
  ValueParser p(exe, text, baseDir, error);
  return p.parse(t, out);
}

bool checkValue(const Executable &exe, const TypeDesc &t, const Object *v, const std::string &what,
                std::string &error) {
  // A worklist, not recursion: a program may return a list of any length, and
  // checking it must not depend on the C++ stack.
  struct Item {
    const TypeDesc *t;
    const Object *v;
    std::string what;
    int depth;
  };
  std::vector<Item> work;
  work.push_back({&t, v, what, 0});
  while (!work.empty()) {
    Item it = std::move(work.back());
    work.pop_back();
    if (!it.v) {
      error = it.what + " holds no value";
      return false;
    }
    switch (it.t->kind) {
    case TypeDesc::Kind::Tensor: {
      const Tensor *x = asTensor(const_cast<Object *>(it.v));
      if (!x) {
        error = it.what + " must be " + typeToString(exe, *it.t) + ", got a constructor value";
        return false;
      }
      bool ok = x->dtype() == it.t->dtype && x->rank() == static_cast<int64_t>(it.t->dims.size());
      for (size_t i = 0; ok && i < it.t->dims.size(); ++i)
        ok = it.t->dims[i] == kDynamic || it.t->dims[i] == x->dim(i);
      if (!ok) {
        error = it.what + " must be " + typeToString(exe, *it.t) + ", got " + x->typeString();
        return false;
      }
      break;
    }
    case TypeDesc::Kind::Adt:
    case TypeDesc::Kind::Tuple: {
      const Adt *a = asAdt(const_cast<Object *>(it.v));
      if (!a) {
        error = it.what + " must be " + typeToString(exe, *it.t) + ", got a tensor";
        return false;
      }
      const std::vector<TypeDesc> *fields;
      if (it.t->kind == TypeDesc::Kind::Tuple) {
        fields = &it.t->elems;
      } else {
        const AdtDesc &adt = exe.adts[it.t->adt];
        if (a->tag() >= adt.ctors.size()) {
          error = it.what + ": constructor tag " + std::to_string(a->tag()) + " is not one of @" + adt.name;
          return false;
        }
        fields = &adt.ctors[a->tag()].fields;
      }
      if (fields->size() != a->fields().size()) {
        error = it.what + " has " + std::to_string(a->fields().size()) + " fields, " +
                typeToString(exe, *it.t) + " needs " + std::to_string(fields->size());
        return false;
      }
      // Reversed, so fields are checked in order. The path in messages names
      // the first levels only (it would grow with the depth).
      for (size_t i = fields->size(); i-- > 0;)
        work.push_back({&(*fields)[i], a->fields()[i].get(),
                        it.depth < 8    ? it.what + " field " + std::to_string(i)
                        : it.depth == 8 ? it.what + " ..."
                                        : it.what,
                        it.depth + 1});
      break;
    }
    case TypeDesc::Kind::Storage:
      error = it.what + ": storage values are not accepted";
      return false;
    }
  }
  return true;
}

namespace {
std::string printValueAt(const Executable &exe, const TypeDesc &t, const Object &v, int depth);
}

std::string printValue(const Executable &exe, const TypeDesc &t, const Object &v) {
  return printValueAt(exe, t, v, 0);
}

namespace {
std::string printValueAt(const Executable &exe, const TypeDesc &t, const Object &v, int depth) {
  // Deeper values (a very long list) are elided rather than recursed into.
  // Printing recurses; deeper values (a long list) print as "..." so the
  // C++ stack stays small even under sanitizers.
  if (depth > kMaxPrintDepth) return "...";
  if (const Tensor *x = asTensor(const_cast<Object *>(&v))) return formatTensor(*x);
  const Adt *a = asAdt(const_cast<Object *>(&v));
  if (!a) return "<storage>";
  std::string s;
  const std::vector<TypeDesc> *fields = nullptr;
  if (t.kind == TypeDesc::Kind::Adt && t.adt < exe.adts.size() && a->tag() < exe.adts[t.adt].ctors.size()) {
    s = exe.adts[t.adt].ctors[a->tag()].name;
    fields = &exe.adts[t.adt].ctors[a->tag()].fields;
  } else if (t.kind == TypeDesc::Kind::Tuple) {
    fields = &t.elems;
  } else {
    s = "#" + std::to_string(a->tag());
  }
  if (!a->fields().empty() || t.kind == TypeDesc::Kind::Tuple) {
    s += "(";
    for (size_t i = 0; i < a->fields().size(); ++i) {
      TypeDesc ft = fields && i < fields->size() ? (*fields)[i] : TypeDesc{};
      s += (i ? ", " : "") + printValueAt(exe, ft, *a->fields()[i], depth + 1);
    }
    s += ")";
  }
  return s;
}

} // namespace

} // namespace nimble::vm
