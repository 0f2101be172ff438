//===- Verifier.cpp - Checking an Executable as a program -----------------===//
//
// verify() is what makes "a file that loads can run" true: the interpreter
// reads operands straight from the code words and indexes tables with them,
// without checks of its own. The rules (docs/VM.md, "Verification"):
//
//   Types      kind valid; dtype < kNumDTypes; dims >= 0 or `?`; rank <= 64;
//              nesting <= 32; ADT indices in range.
//   ADTs       at least one constructor; every ADT has a finite value (some
//              constructor whose fields do not all lead back to uninhabited
//              ADTs): recursion through an ADT index is fine (a list, a tree),
//              a type that is *only* recursion is not.
//   Constants  dtype valid; concrete dims; size == numel * dtypeSize with no
//              overflow; data present when size > 0.
//   Kernels    0..4096 members (none: every output copies an input), numInputs + results <= 65536; each member's
//              op valid and not structural, operand count within the op's
//              arity, attributes matching the op's schema in count and kind
//              (dense payloads consistent), result count the op's (split: its
//              `sections`), operands naming inputs or earlier results; at
//              least one output, each naming a value; upperBound only for a
//              lone unique / nonzero with one output; member locations
//              absent or one per member, with valid file indices.
//   Functions  non-empty, unique names; one name per parameter; params <=
//              numRegisters <= 2^20; code non-empty, every instruction
//              decodes (Bytecode.h) and its operands obey Opcodes.def (see
//              checkOperand); control cannot fall off the end; jumps land on
//              instruction starts; call arities match; the source map is
//              sorted by pc, on instruction starts, with valid file indices.
//
// Messages name the place: "function 'main', pc 12 (InvokePacked): register
// 40 out of range (function has 17 registers)".
//
//===----------------------------------------------------------------------===//
#include "vm/format/Format.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace nimble::vm {

namespace {

bool fail(std::string &error, std::string msg) {
  error = std::move(msg);
  return false;
}

std::string quoted(const std::string &s) { return "'" + s + "'"; }

std::string named(const char *what, size_t i, const std::string &name) {
  std::string r = std::string(what) + " " + std::to_string(i);
  if (!name.empty()) r += " " + quoted(name);
  return r;
}

bool validDType(DType t) { return static_cast<unsigned>(t) < static_cast<unsigned>(kNumDTypes); }

/// Elements of a concrete shape, or false on a negative dim, on overflow or
/// past the element limit (ir/Limits.h).
bool numElements(const std::vector<int64_t> &dims, int64_t &n) {
  return limits::checkedNumElements(dims, n);
}

bool checkType(const Executable &e, const TypeDesc &t, int depth, std::string &error) {
  if (depth > nbc::kMaxTypeDepth)
    return fail(error, "type nested deeper than " + std::to_string(nbc::kMaxTypeDepth) + " levels");
  switch (t.kind) {
  case TypeDesc::Kind::Tensor:
    if (!validDType(t.dtype))
      return fail(error, "invalid dtype code " + std::to_string(static_cast<int>(t.dtype)));
    if (t.dims.size() > nbc::kMaxRank)
      return fail(error, "tensor rank " + std::to_string(t.dims.size()) + " exceeds the limit");
    for (int64_t d : t.dims)
      if (d < 0 && d != kDynamic) return fail(error, "invalid dimension " + std::to_string(d));
    return true;
  case TypeDesc::Kind::Tuple:
    for (const TypeDesc &el : t.elems)
      if (!checkType(e, el, depth + 1, error)) return false;
    return true;
  case TypeDesc::Kind::Adt:
    if (t.adt >= e.adts.size())
      return fail(error, "adt index " + std::to_string(t.adt) + " out of range (" +
                             std::to_string(e.adts.size()) + " adts)");
    return true;
  case TypeDesc::Kind::Storage: return true;
  }
  return fail(error, "invalid type kind " + std::to_string(static_cast<int>(t.kind)));
}

// Collects the ADT indices a type refers to outside any ADT (through tuples).
void adtRefs(const TypeDesc &t, std::vector<uint32_t> &out) {
  if (t.kind == TypeDesc::Kind::Adt) out.push_back(t.adt);
  for (const TypeDesc &el : t.elems) adtRefs(el, out);
}

// An ADT is inhabited if one of its constructors has only inhabited fields
// (tensors and storage always are). Linear-time propagation (Horn clauses):
// each constructor counts its references to not-yet-inhabited ADTs; when an
// ADT becomes inhabited, every constructor that mentions it counts down.
bool checkAdtsInhabited(const Executable &e, std::string &error) {
  size_t n = e.adts.size();
  std::vector<uint32_t> ctorOwner, pending;
  std::vector<std::vector<uint32_t>> mentionedBy(n); // adt -> ctor ids (with repeats)
  std::vector<char> inhabited(n, 0);
  std::vector<uint32_t> work;
  for (size_t a = 0; a < n; ++a)
    for (const AdtDesc::Ctor &c : e.adts[a].ctors) {
      uint32_t id = static_cast<uint32_t>(ctorOwner.size());
      std::vector<uint32_t> refs;
      for (const TypeDesc &f : c.fields) adtRefs(f, refs);
      ctorOwner.push_back(static_cast<uint32_t>(a));
      pending.push_back(static_cast<uint32_t>(refs.size()));
      for (uint32_t r : refs) mentionedBy[r].push_back(id);
      if (refs.empty() && !inhabited[a]) {
        inhabited[a] = 1;
        work.push_back(static_cast<uint32_t>(a));
      }
    }
  while (!work.empty()) {
    uint32_t a = work.back();
    work.pop_back();
    for (uint32_t id : mentionedBy[a]) {
      if (--pending[id] != 0) continue;
      uint32_t owner = ctorOwner[id];
      if (!inhabited[owner]) {
        inhabited[owner] = 1;
        work.push_back(owner);
      }
    }
  }
  for (size_t a = 0; a < n; ++a)
    if (!inhabited[a])
      return fail(error, named("adt", a, e.adts[a].name) +
                             ": has no finite value (every constructor needs a value of an "
                             "ADT that has none, e.g. itself)");
  return true;
}

bool checkAdts(const Executable &e, std::string &error) {
  for (size_t a = 0; a < e.adts.size(); ++a) {
    const AdtDesc &adt = e.adts[a];
    if (adt.ctors.empty()) return fail(error, named("adt", a, adt.name) + ": no constructors");
    for (size_t c = 0; c < adt.ctors.size(); ++c)
      for (size_t f = 0; f < adt.ctors[c].fields.size(); ++f)
        if (!checkType(e, adt.ctors[c].fields[f], 1, error))
          return fail(error, named("adt", a, adt.name) + ", " +
                                 named("constructor", c, adt.ctors[c].name) + ", field " +
                                 std::to_string(f) + ": " + error);
  }
  return checkAdtsInhabited(e, error);
}

bool checkConstants(const Executable &e, std::string &error) {
  for (size_t i = 0; i < e.constants.size(); ++i) {
    const ConstantDesc &c = e.constants[i];
    auto bad = [&](const std::string &m) {
      return fail(error, named("constant", i, c.name) + ": " + m);
    };
    if (!validDType(c.dtype))
      return bad("invalid dtype code " + std::to_string(static_cast<int>(c.dtype)));
    if (c.shape.size() > nbc::kMaxRank) return bad("rank exceeds the limit");
    int64_t numel;
    uint64_t bytes;
    if (!numElements(c.shape, numel) ||
        __builtin_mul_overflow(static_cast<uint64_t>(numel), dtypeSize(c.dtype), &bytes))
      return bad("invalid or overflowing shape");
    if (c.splat && !ConstantDesc::isSplatForm(c.dtype, c.shape, c.size))
      return bad("is marked splat but holds " + std::to_string(c.size) + " bytes for " +
                 std::to_string(numel) + " elements (a splat is one element of a shape of more than one)");
    if (!c.splat && bytes != c.size)
      return bad("holds " + std::to_string(c.size) + " bytes but its type needs " +
                 std::to_string(numel) + " x " + std::to_string(dtypeSize(c.dtype)) + " = " +
                 std::to_string(bytes));
    if (c.size && !c.data) return bad("has no data");
  }
  return true;
}

bool checkAttr(const Attr &a, const AttrSpec &spec, std::string &error) {
  if (a.isNull()) return fail(error, "attribute '" + spec.name + "' is missing");
  if (a.kind() != spec.kind)
    return fail(error, "attribute '" + spec.name + "' is " + std::string(attrKindName(a.kind())) +
                           ", the op wants " + std::string(attrKindName(spec.kind)));
  if (a.kind() == AttrKind::DType && !validDType(a.getDType()))
    return fail(error, "attribute '" + spec.name + "': invalid dtype");
  if (a.kind() == AttrKind::Dense) {
    const DenseValue &d = a.getDense();
    int64_t numel;
    uint64_t want;
    if (!validDType(d.dtype) || !numElements(d.shape, numel) ||
        __builtin_mul_overflow(static_cast<uint64_t>(d.splat ? 1 : numel), dtypeSize(d.dtype),
                               &want) ||
        want != d.bytes.size())
      return fail(error, "attribute '" + spec.name + "': dense payload of " +
                             std::to_string(d.bytes.size()) + " bytes does not match its type");
  }
  return true;
}

bool checkKernel(const KernelDesc &k, std::string &error) {
  if (k.members.size() > nbc::kMaxKernelMembers) return fail(error, "too many members");
  uint64_t values = k.numInputs;
  if (values > nbc::kMaxKernelValues)
    return fail(error, std::to_string(k.numInputs) + " inputs exceed the limit of " +
                           std::to_string(nbc::kMaxKernelValues) + " values");
  for (size_t m = 0; m < k.members.size(); ++m) {
    const KernelDesc::Member &mem = k.members[m];
    auto bad = [&](const std::string &msg) {
      return fail(error, "member " + std::to_string(m) + ": " + msg);
    };
    if (static_cast<unsigned>(mem.op) >= static_cast<unsigned>(kNumOpCodes))
      return bad("invalid op code " + std::to_string(static_cast<unsigned>(mem.op)));
    const OpInfo &info = opInfo(mem.op);
    std::string opName(info.mnemonic);
    if (info.relation == Relation::Structural)
      return bad("'" + opName + "' is a structural op and cannot be a kernel member");
    size_t nops = mem.operands.size();
    if (nops < size_t(info.minOperands) ||
        (info.maxOperands >= 0 && nops > size_t(info.maxOperands)))
      return bad("'" + opName + "' with " + std::to_string(nops) + " operands");
    if (mem.attrs.size() != info.attrs.size())
      return bad("'" + opName + "' has " + std::to_string(mem.attrs.size()) +
                 " attributes, its schema " + std::to_string(info.attrs.size()));
    for (size_t a = 0; a < mem.attrs.size(); ++a)
      if (!checkAttr(mem.attrs[a], info.attrs[a], error)) return bad("'" + opName + "': " + error);
    uint32_t wantResults = info.numResults >= 0 ? uint32_t(info.numResults) : 0;
    if (mem.op == OpCode::Split) {
      int64_t sections = mem.attrs[info.attrIndex("sections")].getInt();
      if (sections < 1 || sections > int64_t(nbc::kMaxKernelValues))
        return bad("split into " + std::to_string(sections) + " sections");
      wantResults = static_cast<uint32_t>(sections);
    }
    if (mem.numResults != wantResults)
      return bad("'" + opName + "' with " + std::to_string(mem.numResults) + " results, expected " +
                 std::to_string(wantResults));
    for (uint32_t v : mem.operands)
      if (v >= values)
        return bad("operand %" + std::to_string(v) + " is not an input or an earlier result (" +
                   std::to_string(values) + " values so far)");
    values += mem.numResults;
    if (values > nbc::kMaxKernelValues)
      return bad("more than " + std::to_string(nbc::kMaxKernelValues) + " values");
  }
  if (k.outputs.empty()) return fail(error, "no outputs");
  for (uint32_t v : k.outputs)
    if (v >= values)
      return fail(error, "output %" + std::to_string(v) + " out of range (" +
                             std::to_string(values) + " values)");
  if (k.upperBound &&
      (k.members.size() != 1 || opInfo(k.members[0].op).shapeMode != ShapeMode::UpperBound ||
       k.outputs.size() != 1))
    return fail(error, "marked upper-bound but is not a lone unique / nonzero with one output");
  if (k.inputDTypes.size() != k.numInputs)
    return fail(error, std::to_string(k.inputDTypes.size()) + " input dtypes for " +
                           std::to_string(k.numInputs) + " inputs");
  for (DType t : k.inputDTypes)
    if (static_cast<unsigned>(t) >= static_cast<unsigned>(kNumDTypes))
      return fail(error, "invalid input dtype");
  return true;
}

//===-- Code ---------------------------------------------------------------===//

class CodeChecker {
public:
  CodeChecker(const Executable &e, const VMFunction &f, std::string &error)
      : e_(e), f_(f), error_(error) {}

  bool run() {
    const std::vector<uint32_t> &code = f_.code;
    if (code.empty()) return failFn("has no code");
    if (code.size() > UINT32_MAX) return failFn("more than 2^32 - 1 code words");
    std::vector<char> starts(code.size(), 0);
    DecodedInstr in;
    Opcode last = Opcode::Move;
    for (uint32_t pc = 0; pc < code.size(); pc += in.size) {
      std::string why;
      if (!decodeInstr(code.data(), code.size(), pc, in, &why)) {
        // Name the opcode when word 0 was at least readable.
        uint32_t op = code[pc] & kOpcodeMask;
        return failAt(pc, op < uint32_t(kNumOpcodes) ? opcodeInfo(Opcode(op)).name : nullptr, why);
      }
      starts[pc] = 1;
      last = in.op;
      if (!checkInstr(in)) return false;
    }
    if (!isTerminator(last))
      return failFn(std::string("control falls off the end of the code (the last instruction, ") +
                    opcodeInfo(last).name + ", is not Ret, Goto, If, Switch or Fatal)");
    for (const Jump &j : jumps_) {
      if (j.target < 0 || j.target >= int64_t(code.size()))
        return failAt(j.pc, opcodeInfo(j.op).name,
                      "jump target " + std::to_string(j.target) + " is outside the function (" +
                          std::to_string(code.size()) + " code words)");
      if (!starts[j.target])
        return failAt(j.pc, opcodeInfo(j.op).name,
                      "jump target " + std::to_string(j.target) +
                          " is not the start of an instruction");
    }
    for (size_t i = 0; i < f_.sourceMap.size(); ++i) {
      const SourceLoc &l = f_.sourceMap[i];
      auto where = [i] { return "source map entry " + std::to_string(i) + ": "; }; // built on failure only
      if (l.pc >= code.size() || !starts[l.pc])
        return failFn(where() + "pc " + std::to_string(l.pc) + " is not the start of an instruction");
      if (i && l.pc <= f_.sourceMap[i - 1].pc)
        return failFn(where() + "pcs are not strictly increasing");
      if (l.line != 0 && l.file >= e_.strings.size()) // line 0: no location from this pc on
        return failFn(where() + "file string " + std::to_string(l.file) + " out of range (" +
                      std::to_string(e_.strings.size()) + " strings)");
    }
    return checkSites(starts);
  }

private:
  /// The calls' own member locations (format 1.7): each at a kernel call,
  /// by increasing pc, one location per member of that call's kernel.
  bool checkSites(const std::vector<char> &starts) {
    const std::vector<uint32_t> &code = f_.code;
    for (size_t i = 0; i < f_.sites.size(); ++i) {
      const VMFunction::Site &s = f_.sites[i];
      auto where = [i] { return "site-locs entry " + std::to_string(i) + ": "; }; // built on failure only
      if (s.pc >= code.size() || !starts[s.pc])
        return failFn(where() + "pc " + std::to_string(s.pc) + " is not the start of an instruction");
      if (i && s.pc <= f_.sites[i - 1].pc) return failFn(where() + "pcs are not strictly increasing");
      DecodedInstr in;
      decodeInstr(code.data(), code.size(), s.pc, in, nullptr); // decoded and checked by run()
      if (in.op != Opcode::InvokePacked && in.op != Opcode::ShapeFunc && in.op != Opcode::InvokeShapeFunc)
        return failAt(s.pc, opcodeInfo(in.op).name, where() + "not a kernel call");
      const KernelDesc &k = e_.kernels[in.word(0)];
      if (s.count != k.members.size())
        return failAt(s.pc, opcodeInfo(in.op).name,
                      where() + std::to_string(s.count) + " member locations for kernel '" + k.name + "' of " +
                          std::to_string(k.members.size()) + " members");
      if (uint64_t(s.first) + s.count > f_.siteMemberLocs.size())
        return failFn(where() + "locations [" + std::to_string(s.first) + ", +" + std::to_string(s.count) +
                      ") outside the table of " + std::to_string(f_.siteMemberLocs.size()));
    }
    for (size_t m = 0; m < f_.siteMemberLocs.size(); ++m) {
      const SourceLoc &l = f_.siteMemberLocs[m];
      if (l.line != 0 && l.file >= e_.strings.size())
        return failFn("site-locs location " + std::to_string(m) + ": file string " + std::to_string(l.file) +
                      " out of range (" + std::to_string(e_.strings.size()) + " strings)");
    }
    return true;
  }

  struct Jump {
    uint32_t pc;
    Opcode op;
    int64_t target;
  };

  bool failFn(const std::string &msg) {
    return fail(error_, "function " + quoted(f_.name) + ": " + msg);
  }
  bool failAt(uint32_t pc, const char *opName, const std::string &msg) {
    std::string where = "function " + quoted(f_.name) + ", pc " + std::to_string(pc);
    if (opName) where += std::string(" (") + opName + ")";
    return fail(error_, where + ": " + msg);
  }

  bool index(const DecodedInstr &in, uint32_t v, size_t limit, const char *what,
             const char *plural) {
    if (v < limit) return true;
    std::string have = std::to_string(limit) + " " + plural;
    if (what == std::string("register")) have = "function has " + have;
    return failAt(in.pc, opcodeInfo(in.op).name,
                  std::string(what) + " " + std::to_string(v) + " out of range (" + have + ")");
  }
  bool reg(const DecodedInstr &in, uint32_t r) {
    return index(in, r, f_.numRegisters, "register", "registers");
  }
  bool count(const DecodedInstr &in, const char *what, size_t got, size_t want) {
    if (got == want) return true;
    return failAt(in.pc, opcodeInfo(in.op).name,
                  std::string(what) + ": " + std::to_string(got) + " registers, expected " +
                      std::to_string(want));
  }

  bool checkOperand(const DecodedInstr &in, int i) {
    switch (in.kind(i)) {
    case 'r': return reg(in, in.word(i));
    case 'u': return true; // meaning per opcode; checked in checkInstr
    case 'c': return index(in, in.word(i), e_.constants.size(), "constant", "constants");
    case 'k': return index(in, in.word(i), e_.kernels.size(), "kernel", "kernels");
    case 'f': return index(in, in.word(i), e_.functions.size(), "function", "functions");
    case 's': return index(in, in.word(i), e_.strings.size(), "string", "strings");
    case 'd': return index(in, in.word(i), kNumDTypes, "dtype code", "dtypes");
    case 'v': return index(in, in.word(i), kNumDevices, "device code", "devices");
    case 'j': jumps_.push_back({in.pc, in.op, in.target(i)}); return true;
    case 'I': return true;
    case 'R':
      for (uint32_t r : in.regs(i))
        if (!reg(in, r)) return false;
      return true;
    case 'S': {
      ShapeList s = in.shape(i);
      if (s.count > nbc::kMaxRank)
        return failAt(in.pc, opcodeInfo(in.op).name,
                      "shape rank " + std::to_string(s.count) + " exceeds the limit");
      int64_t n = 1;
      for (uint32_t d = 0; d < s.count; ++d)
        if (s[d] < 0 || __builtin_mul_overflow(n, s[d], &n))
          return failAt(in.pc, opcodeInfo(in.op).name,
                        "static shape has a negative dimension or overflows");
      return true;
    }
    case 'J': {
      CaseList c = in.cases(i);
      std::vector<uint32_t> tags(c.count);
      for (uint32_t k = 0; k < c.count; ++k) {
        tags[k] = c.tag(k);
        jumps_.push_back({in.pc, in.op, c.target(k)});
      }
      jumps_.push_back({in.pc, in.op, c.defaultTarget()});
      std::sort(tags.begin(), tags.end());
      if (std::adjacent_find(tags.begin(), tags.end()) != tags.end())
        return failAt(in.pc, opcodeInfo(in.op).name, "two cases for the same tag");
      return true;
    }
    }
    return failAt(in.pc, opcodeInfo(in.op).name, "bad signature");
  }

  bool checkInstr(const DecodedInstr &in) {
    for (int i = 0; i < in.numOperands; ++i)
      if (!checkOperand(in, i)) return false;
    switch (in.op) {
    case Opcode::Ret: return count(in, "result count", in.regs(0).count, f_.resultTypes.size());
    case Opcode::Invoke: {
      const VMFunction &callee = e_.functions[in.word(0)];
      return count(in, [&] { return "argument count of @" + callee.name; }, in.regs(1).count,
                   callee.paramTypes.size()) &&
             count(in, [&] { return "destination count of @" + callee.name; }, in.regs(2).count,
                   callee.resultTypes.size());
    }
    case Opcode::InvokePacked:
    case Opcode::InvokeShapeFunc:
    case Opcode::ShapeFunc: {
      const KernelDesc &k = e_.kernels[in.word(0)];
      size_t outs = k.outputs.size() + (in.op == Opcode::InvokePacked && k.upperBound ? 1 : 0);
      return count(in, [&] { return "input count of kernel '" + k.name + "'"; }, in.regs(1).count, k.numInputs) &&
             count(in, [&] { return "output count of kernel '" + k.name + "'"; }, in.regs(2).count, outs);
    }
    case Opcode::ScalarI64:
      if (in.word(0) >= kNumScalarOps)
        return failAt(in.pc, "ScalarI64",
                      "operation " + std::to_string(in.word(0)) + " is not one of the " +
                          std::to_string(kNumScalarOps) + " scalar operations");
      return true;
    case Opcode::AllocStorage: {
      uint32_t align = in.word(2);
      if (align == 0 || (align & (align - 1)))
        return failAt(in.pc, "AllocStorage",
                      "alignment " + std::to_string(align) + " is not a power of two");
      return true;
    }
    default: return true;
    }
  }

  /// `what()` names the count; it is built only on a mismatch (a kernel or
  /// function call per instruction: issue 23).
  template <class What, class = decltype(std::declval<const What &>()())>
  bool count(const DecodedInstr &in, const What &what, size_t got, size_t want) {
    if (got == want) return true;
    return count(in, what().c_str(), got, want);
  }

  const Executable &e_;
  const VMFunction &f_;
  std::string &error_;
  std::vector<Jump> jumps_;
};

bool checkFunctions(const Executable &e, std::string &error) {
  std::vector<std::string> names;
  for (size_t i = 0; i < e.functions.size(); ++i) {
    const VMFunction &f = e.functions[i];
    if (f.name.empty()) return fail(error, "function " + std::to_string(i) + " has no name");
    names.push_back(f.name);
    auto bad = [&](const std::string &m) {
      return fail(error, "function " + quoted(f.name) + ": " + m);
    };
    if (f.paramNames.size() != f.paramTypes.size())
      return bad(std::to_string(f.paramNames.size()) + " parameter names for " +
                 std::to_string(f.paramTypes.size()) + " parameters");
    for (size_t p = 0; p < f.paramTypes.size(); ++p)
      if (!checkType(e, f.paramTypes[p], 1, error))
        return bad("parameter " + std::to_string(p) + ": " + error);
    for (size_t r = 0; r < f.resultTypes.size(); ++r)
      if (!checkType(e, f.resultTypes[r], 1, error))
        return bad("result " + std::to_string(r) + ": " + error);
    if (f.numRegisters > nbc::kMaxRegisters)
      return bad(std::to_string(f.numRegisters) + " registers exceed the limit of " +
                 std::to_string(nbc::kMaxRegisters));
    if (f.numRegisters < f.paramTypes.size())
      return bad(std::to_string(f.numRegisters) + " registers cannot hold its " +
                 std::to_string(f.paramTypes.size()) + " parameters");
  }
  std::sort(names.begin(), names.end());
  auto dup = std::adjacent_find(names.begin(), names.end());
  if (dup != names.end()) return fail(error, "two functions named " + quoted(*dup));
  // Bodies last: Invoke checks need every callee's signature checked.
  for (const VMFunction &f : e.functions)
    if (!CodeChecker(e, f, error).run()) return false;
  return true;
}

bool isCIdentifier(const std::string &s) {
  bool ident = !s.empty() && !std::isdigit(static_cast<unsigned char>(s[0]));
  for (char ch : s) ident &= std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
  return ident;
}

// An entry of a code table (native, cuda) names an existing kernel after the
// previous entry's (`previous` -1 for the first).
// `where()` names the entry; it is built only for an error (a table has an
// entry per kernel: issue 23).
template <typename Where>
bool checkEntryKernel(const Executable &e, const Where &where, uint32_t kernel, int64_t previous,
                      std::string &error) {
  if (kernel >= e.kernels.size())
    return fail(error, where() + ": kernel " + std::to_string(kernel) + " out of range (" +
                           std::to_string(e.kernels.size()) + " kernels)");
  if (int64_t(kernel) <= previous)
    return fail(error, where() + ": kernel " + std::to_string(kernel) + " is not after the previous entry's");
  return true;
}

// The native-code table against the kernel table: every entry names a kernel
// that exists, once, in increasing order, with a C identifier as its symbol,
// and there is an object when there are entries. (The object's contents are
// checked when it is mapped: vm/NativeKernels.cpp.)
bool checkNativeCode(const Executable &e, std::string &error) {
  const NativeCode &n = e.native;
  if (n.entries.empty()) {
    if (!n.object.empty()) return fail(error, "native-code section: an object but no kernels");
    return true;
  }
  if (n.object.empty()) return fail(error, "native-code section: kernels but no object");
  for (size_t i = 0; i < n.entries.size(); ++i) {
    const NativeCode::Entry &en = n.entries[i];
    auto where = [i] { return "native-code section, entry " + std::to_string(i); };
    if (!checkEntryKernel(e, where, en.kernel, i > 0 ? int64_t(n.entries[i - 1].kernel) : -1, error)) return false;
    if (!isCIdentifier(en.symbol)) return fail(error, where() + ": symbol '" + en.symbol + "' is not a C identifier");
    if (e.kernels[en.kernel].upperBound)
      return fail(error, where() + ": kernel " + std::to_string(en.kernel) +
                             " is an upper-bound kernel, which has no native form");
  }
  return true;
}

// The cuda-code table against the kernel table, as for native code, plus:
// the architecture is sm_<digits>; a generated entry names a PTX entry (a C
// identifier); a cuBLAS entry has no symbol and implements a kernel that is
// exactly one f32 matmul (CublasGemm) or batch_matmul (CublasBatched); flags
// hold at most one of the launch flags, and only on a generated entry. (The PTX and cubin are checked by the driver when
// nimble-run loads them: vm/CudaRuntime.cpp.)
bool checkCudaCode(const Executable &e, std::string &error) {
  const CudaCode &c = e.cuda;
  if (c.entries.empty()) {
    if (!c.ptx.empty() || !c.cubin.empty()) return fail(error, "cuda-code section: code but no kernels");
    return true;
  }
  bool archOk = c.arch.size() > 3 && c.arch.compare(0, 3, "sm_") == 0;
  for (size_t i = 3; i < c.arch.size(); ++i) archOk &= std::isdigit(static_cast<unsigned char>(c.arch[i])) != 0;
  if (!archOk) return fail(error, "cuda-code section: architecture '" + c.arch + "' is not sm_<number>");
  if (c.ptx.empty()) return fail(error, "cuda-code section: kernels but no PTX");
  for (size_t i = 0; i < c.entries.size(); ++i) {
    const CudaCode::Entry &en = c.entries[i];
    auto where = [i] { return "cuda-code section, entry " + std::to_string(i); };
    if (!checkEntryKernel(e, where, en.kernel, i > 0 ? int64_t(c.entries[i - 1].kernel) : -1, error)) return false;
    if ((en.flags & ~CudaCode::kLaunchFlags) || (en.flags & (en.flags - 1)))
      return fail(error, where() + ": unknown flags " + std::to_string(en.flags));
    const KernelDesc &k = e.kernels[en.kernel];
    if (k.upperBound)
      return fail(error, where() + ": kernel " + std::to_string(en.kernel) + " is an upper-bound kernel, which has no device form");
    if (en.kind == CudaCode::Kind::Generated) {
      if (!isCIdentifier(en.symbol)) return fail(error, where() + ": symbol '" + en.symbol + "' is not a C identifier");
      continue;
    }
    OpCode want = en.kind == CudaCode::Kind::CublasGemm ? OpCode::MatMul : OpCode::BatchMatMul;
    if (!en.symbol.empty()) return fail(error, where() + ": a cuBLAS entry has a symbol");
    if (en.flags) return fail(error, where() + ": a cuBLAS entry has launch flags " + std::to_string(en.flags));
    if (k.members.size() != 1 || k.members[0].op != want || k.inputDTypes.size() != 2 ||
        k.inputDTypes[0] != DType::F32 || k.inputDTypes[1] != DType::F32)
      return fail(error, where() + ": kernel " + std::to_string(en.kernel) + " is not a single f32 " +
                             (want == OpCode::MatMul ? "matmul" : "batch_matmul") + " (cuBLAS entry)");
  }
  return true;
}

// The batching table against the kernel table (format 1.4, docs/autobatch.md):
// one entry per kernel; a `rows` kernel names another kernel of the same
// signature as its batched variant (which batches no further) and has at
// least one per-instance input; an `invariant` kernel shares every input.
bool checkBatching(const Executable &e, std::string &error) {
  if (e.batching.empty()) return true;
  if (e.batching.size() != e.kernels.size())
    return fail(error, "batching section: " + std::to_string(e.batching.size()) + " entries for " +
                           std::to_string(e.kernels.size()) + " kernels");
  for (size_t k = 0; k < e.batching.size(); ++k) {
    const KernelBatching &b = e.batching[k];
    const KernelDesc &kd = e.kernels[k];
    auto where = [&] { return "batching section, " + named("kernel", k, kd.name); };
    if (static_cast<uint32_t>(b.mode) >= kNumBatchingModes)
      return fail(error, where() + ": unknown batching mode " + std::to_string(static_cast<uint32_t>(b.mode)));
    for (size_t i = 0; i < b.shared.size(); ++i)
      if (b.shared[i] > 1)
        return fail(error, where() + ": shared flag of input " + std::to_string(i) + " is " +
                               std::to_string(b.shared[i]) + ", not 0 or 1");
    if (b.mode == KernelBatching::Mode::None) {
      if (!b.shared.empty()) return fail(error, where() + ": shared flags on a kernel that does not batch");
      if (b.phase) return fail(error, where() + ": phase " + std::to_string(b.phase) + " on a kernel that does not batch");
      continue;
    }
    if (b.shared.size() != kd.numInputs)
      return fail(error, where() + ": " + std::to_string(b.shared.size()) + " shared flags for " +
                             std::to_string(kd.numInputs) + " inputs");
    if (kd.upperBound) return fail(error, where() + ": an upper-bound kernel cannot batch");
    size_t perInstance = std::count(b.shared.begin(), b.shared.end(), uint8_t(0));
    if (b.mode == KernelBatching::Mode::Invariant) {
      if (perInstance) return fail(error, where() + ": an invariant kernel with a per-instance input");
      continue;
    }
    if (!perInstance) return fail(error, where() + ": batches rows but has no per-instance input");
    if (b.batched >= e.kernels.size() || b.batched == k)
      return fail(error, where() + ": batched variant " + std::to_string(b.batched) + " is not another kernel (" +
                             std::to_string(e.kernels.size()) + " kernels)");
    const KernelDesc &v = e.kernels[b.batched];
    if (e.batching[b.batched].mode != KernelBatching::Mode::None)
      return fail(error, where() + ": its batched variant " + named("kernel", b.batched, v.name) + " batches too");
    if (v.numInputs != kd.numInputs || v.outputs.size() != kd.outputs.size() || v.inputDTypes != kd.inputDTypes ||
        v.upperBound)
      return fail(error, where() + ": its batched variant " + named("kernel", b.batched, v.name) +
                             " does not have the kernel's inputs and outputs");
  }
  return true;
}

} // namespace

bool verify(const Executable &e, std::string &error) {
  if (!checkAdts(e, error) || !checkConstants(e, error)) return false;
  for (size_t k = 0; k < e.kernels.size(); ++k)
    if (!checkKernel(e.kernels[k], error))
      return fail(error, named("kernel", k, e.kernels[k].name) + ": " + error);
  for (size_t k = 0; k < e.kernels.size(); ++k) {
    const KernelDesc &kd = e.kernels[k];
    if (!kd.memberLocs.empty() && kd.memberLocs.size() != kd.members.size())
      return fail(error, named("kernel", k, kd.name) + ": " + std::to_string(kd.memberLocs.size()) +
                             " member locations for " + std::to_string(kd.members.size()) +
                             " members");
    for (const SourceLoc &l : kd.memberLocs)
      if (l.line != 0 && l.file >= e.strings.size())
        return fail(error, named("kernel", k, kd.name) + ": member location file string " +
                               std::to_string(l.file) + " out of range (" +
                               std::to_string(e.strings.size()) + " strings)");
  }
  if (!checkNativeCode(e, error) || !checkCudaCode(e, error)) return false;
  if (!checkBatching(e, error)) return false;
  return checkFunctions(e, error);
}

const SourceLoc *findSourceLoc(const VMFunction &fn, uint32_t pc) {
  auto it = std::upper_bound(fn.sourceMap.begin(), fn.sourceMap.end(), pc,
                             [](uint32_t p, const SourceLoc &l) { return p < l.pc; });
  if (it == fn.sourceMap.begin()) return nullptr;
  return &*(it - 1);
}

} // namespace nimble::vm
