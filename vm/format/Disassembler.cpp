//===- Disassembler.cpp - Printing executables ------------------------------===//
//
// Instructions print generically from their Opcodes.def signature (operand
// letters map to `r3`, `c0`, `k2`, `f1`, `s4`, dtype and device names, jump
// targets as absolute pcs, lists in parentheses or brackets); the few
// opcodes whose operands read better with words (`then`, `else`, `tag`,
// `align`, `->`) have a case of their own. Indices are annotated with what
// they name when they are in range.
//
//===----------------------------------------------------------------------===//
#include "vm/format/Disassembler.h"

#include "vm/format/Bytecode.h"
#include "vm/format/Format.h"

#include <cctype>
#include <charconv>
#include <cstdio>

namespace nimble::vm {

namespace {

std::string quote(const std::string &s) {
  std::string r = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      r += '\\';
      r += static_cast<char>(c);
    } else if (c == '\n') {
      r += "\\n";
    } else if (c == '\t') {
      r += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      r += buf;
    } else {
      r += static_cast<char>(c);
    }
  }
  return r + "\"";
}

/// `@name`, or `@"odd name"` when the name is not an identifier.
std::string symbol(const std::string &name) {
  bool plain = !name.empty();
  for (unsigned char c : name)
    if (!(std::isalnum(c) || c == '_' || c == '.' || c == '$' || c == '-')) plain = false;
  return "@" + (plain ? name : quote(name));
}

std::string dtypeStr(uint32_t code) {
  if (code < static_cast<uint32_t>(kNumDTypes)) return std::string(dtypeName(DType(code)));
  return "dtype(" + std::to_string(code) + ")";
}

std::string deviceStr(uint32_t code) {
  if (code < static_cast<uint32_t>(kNumDevices)) return deviceName(Device(code));
  return "device(" + std::to_string(code) + ")";
}

std::string formatDouble(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0"; // keep it a float: 1.0
  return s;
}

std::string tensorStr(DType dtype, const std::vector<int64_t> &dims) {
  std::string r = "tensor<";
  for (int64_t d : dims) r += (d == kDynamic ? "?" : std::to_string(d)) + "x";
  return r + dtypeStr(static_cast<uint32_t>(dtype)) + ">";
}

std::string typeStr(const Executable &exe, const TypeDesc &t, int depth) {
  if (depth > 64) return "...";
  switch (t.kind) {
  case TypeDesc::Kind::Tensor: return tensorStr(t.dtype, t.dims);
  case TypeDesc::Kind::Tuple: {
    std::string r = "tuple<";
    for (size_t i = 0; i < t.elems.size(); ++i)
      r += (i ? ", " : "") + typeStr(exe, t.elems[i], depth + 1);
    return r + ">";
  }
  case TypeDesc::Kind::Adt:
    if (t.adt < exe.adts.size()) return symbol(exe.adts[t.adt].name);
    return "@<adt " + std::to_string(t.adt) + ">";
  case TypeDesc::Kind::Storage: return "storage";
  }
  return "<invalid type>";
}

std::string regList(const RegList &l) {
  std::string r = "(";
  for (uint32_t i = 0; i < l.count; ++i) r += (i ? ", r" : "r") + std::to_string(l[i]);
  return r + ")";
}

std::string operand(const DecodedInstr &in, int i) {
  switch (in.kind(i)) {
  case 'r': return "r" + std::to_string(in.word(i));
  case 'c': return "c" + std::to_string(in.word(i));
  case 'k': return "k" + std::to_string(in.word(i));
  case 'f': return "f" + std::to_string(in.word(i));
  case 's': return "s" + std::to_string(in.word(i));
  case 'd': return dtypeStr(in.word(i));
  case 'v': return deviceStr(in.word(i));
  case 'j': return std::to_string(in.target(i));
  case 'I': return std::to_string(in.imm64(i));
  case 'R': return regList(in.regs(i));
  case 'S': {
    ShapeList s = in.shape(i);
    std::string r = "[";
    for (uint32_t k = 0; k < s.count; ++k) r += (k ? ", " : "") + std::to_string(s[k]);
    return r + "]";
  }
  case 'J': {
    CaseList c = in.cases(i);
    std::string r = "[";
    for (uint32_t k = 0; k < c.count; ++k)
      r += (k ? ", " : "") + std::to_string(c.tag(k)) + ": " + std::to_string(c.target(k));
    return r + "], default " + std::to_string(c.defaultTarget());
  }
  default: return std::to_string(in.word(i)); // 'u'
  }
}

std::string locStr(const Executable &exe, const SourceLoc &l) {
  std::string file = l.file < exe.strings.size() ? exe.strings[l.file] : "<file?>";
  return file + ":" + std::to_string(l.line) + ":" + std::to_string(l.col);
}

} // namespace

std::string typeToString(const Executable &exe, const TypeDesc &t) { return typeStr(exe, t, 0); }

std::string attrToString(const Attr &a) {
  if (a.isNull()) return "<null>";
  switch (a.kind()) {
  case AttrKind::Bool: return a.getBool() ? "true" : "false";
  case AttrKind::Int: return std::to_string(a.getInt());
  case AttrKind::Float: return formatDouble(a.getFloat());
  case AttrKind::Ints: {
    std::string r = "[";
    for (size_t i = 0; i < a.getInts().size(); ++i)
      r += (i ? ", " : "") + std::to_string(a.getInts()[i]);
    return r + "]";
  }
  case AttrKind::DType: return dtypeStr(static_cast<uint32_t>(a.getDType()));
  case AttrKind::Str: return quote(a.getStr());
  case AttrKind::Sym: return symbol(a.getStr());
  case AttrKind::Dense: {
    // `dense<tensor<2x2xf32>: [1.0, 2.0, 3.0, 4.0]>`, at most 8 elements shown;
    // values only when the payload matches the type (it may be unverified).
    const DenseValue &d = a.getDense();
    std::string r = "dense<" + tensorStr(d.dtype, d.shape);
    int64_t n = 1;
    bool ok = static_cast<uint32_t>(d.dtype) < static_cast<uint32_t>(kNumDTypes);
    for (int64_t s : d.shape)
      if (s < 0 || __builtin_mul_overflow(n, s, &n)) ok = false;
    int64_t stored = d.splat ? 1 : n;
    if (!ok || uint64_t(stored) * dtypeSize(d.dtype) != d.bytes.size())
      return r + ": <bad payload>>";
    r += d.splat ? ": splat " : ": [";
    for (int64_t i = 0; i < stored && i < 8; ++i)
      r += (i ? ", " : "") +
           (isFloat(d.dtype) ? formatDouble(d.getDouble(i)) : std::to_string(d.getInt(i)));
    if (!d.splat) r += stored > 8 ? ", ...]" : "]";
    return r + ">";
  }
  }
  return "<invalid attribute>";
}

std::string kernelMemberToString(const KernelDesc::Member &m, uint32_t firstResult) {
  std::string r;
  for (uint32_t i = 0; i < m.numResults && i < 64; ++i)
    r += (i ? ", %" : "%") + std::to_string(firstResult + i);
  if (m.numResults > 64) r += ", ...";
  if (m.numResults) r += " = ";
  if (static_cast<unsigned>(m.op) >= static_cast<unsigned>(kNumOpCodes))
    return r + "<invalid op " + std::to_string(static_cast<unsigned>(m.op)) + ">";
  const OpInfo &info = opInfo(m.op);
  r += info.mnemonic;
  bool first = true;
  auto sep = [&] {
    r += first ? " " : ", ";
    first = false;
  };
  for (uint32_t v : m.operands) {
    sep();
    r += "%" + std::to_string(v);
  }
  for (size_t i = 0; i < m.attrs.size(); ++i) {
    const AttrSpec *spec = i < info.attrs.size() ? &info.attrs[i] : nullptr;
    if (spec && spec->defaultValue && *spec->defaultValue == m.attrs[i]) continue;
    sep();
    r += (spec ? spec->name : "attr" + std::to_string(i)) + "=" + attrToString(m.attrs[i]);
  }
  return r;
}

std::string functionHeader(const Executable &exe, const VMFunction &fn) {
  std::string r = "func " + symbol(fn.name) + "(";
  for (size_t i = 0; i < fn.paramTypes.size(); ++i) {
    std::string name = i < fn.paramNames.size() && !fn.paramNames[i].empty() ? fn.paramNames[i]
                                                                             : std::to_string(i);
    r += (i ? ", %" : "%") + name + ": " + typeToString(exe, fn.paramTypes[i]);
  }
  r += ") -> ";
  if (fn.resultTypes.size() == 1) {
    r += typeToString(exe, fn.resultTypes[0]);
  } else {
    r += "(";
    for (size_t i = 0; i < fn.resultTypes.size(); ++i)
      r += (i ? ", " : "") + typeToString(exe, fn.resultTypes[i]);
    r += ")";
  }
  return r + " registers=" + std::to_string(fn.numRegisters);
}

std::string disassembleInstr(const Executable &exe, const VMFunction &fn, uint32_t pc,
                             bool sourceLocation, uint32_t *size) {
  DecodedInstr in;
  std::string why;
  if (size) *size = 0;
  if (!decodeInstr(fn.code.data(), fn.code.size(), pc, in, &why)) return "<invalid: " + why + ">";
  if (size) *size = in.size;

  std::string r = opcodeInfo(in.op).name;
  std::vector<std::string> notes;
  switch (in.op) {
  case Opcode::Invoke: {
    r += " " + operand(in, 0) + " " + operand(in, 1) + " -> " + operand(in, 2);
    if (in.word(0) < exe.functions.size()) notes.push_back(symbol(exe.functions[in.word(0)].name));
    break;
  }
  case Opcode::InvokePacked:
  case Opcode::InvokeShapeFunc:
  case Opcode::ShapeFunc:
    r += " " + operand(in, 0) + " " + operand(in, 1) + " -> " + operand(in, 2);
    if (in.word(0) < exe.kernels.size())
      notes.push_back("kernel " + quote(exe.kernels[in.word(0)].name));
    break;
  case Opcode::If:
    r += " " + operand(in, 0) + ", then " + operand(in, 1) + ", else " + operand(in, 2);
    break;
  case Opcode::AllocStorage:
    r += " " + operand(in, 0) + ", " + operand(in, 1) + ", align " + operand(in, 2) + ", " +
         operand(in, 3);
    break;
  case Opcode::ScalarI64:
    r += " " + std::string(scalarOpName(in.word(0))) + " " + operand(in, 1) + ", " + operand(in, 2) + ", " +
         operand(in, 3);
    break;
  case Opcode::StorageSize:
    r += " " + operand(in, 0) + ", " + operand(in, 1) + ", " + operand(in, 2) + ", align " +
         operand(in, 3);
    break;
  case Opcode::AllocADT:
    r += " " + operand(in, 0) + ", tag " + operand(in, 1) + ", " + operand(in, 2);
    break;
  case Opcode::DeviceCopy:
    r += " " + operand(in, 0) + ", " + operand(in, 1) + ", " + operand(in, 2) + " -> " +
         operand(in, 3);
    break;
  default:
    for (int i = 0; i < in.numOperands; ++i) r += (i ? ", " : " ") + operand(in, i);
    break;
  }
  if (in.op == Opcode::LoadConst && in.word(1) < exe.constants.size() &&
      !exe.constants[in.word(1)].name.empty())
    notes.push_back(symbol(exe.constants[in.word(1)].name));
  if (in.op == Opcode::Fatal && in.word(0) < exe.strings.size())
    notes.push_back(quote(exe.strings[in.word(0)]));
  if (sourceLocation)
    if (const SourceLoc *l = findSourceLoc(fn, pc); l && l->line != 0) notes.push_back(locStr(exe, *l));
  // A call's own member locations (site-locs): where each member of the
  // shared kernel was written for this call.
  if (sourceLocation && fn.siteMemberLoc(pc, 0)) {
    std::string members = "members at";
    for (size_t m = 0; const SourceLoc *l = fn.siteMemberLoc(pc, m); ++m)
      members += " " + (l->line ? locStr(exe, *l) : std::string("?"));
    notes.push_back(members);
  }
  for (size_t i = 0; i < notes.size(); ++i) r += (i ? ", " : "  ; ") + notes[i];
  return r;
}

std::string disassembleFunction(const Executable &exe, size_t fnIndex, const DisasmOptions &opts) {
  if (fnIndex >= exe.functions.size()) return "";
  const VMFunction &fn = exe.functions[fnIndex];
  std::string r = functionHeader(exe, fn) + "\n";
  for (uint32_t pc = 0; pc < fn.code.size();) {
    uint32_t size;
    r += "  " + std::to_string(pc) + ": " +
         disassembleInstr(exe, fn, pc, opts.sourceLocations, &size) + "\n";
    if (!size) break; // cannot find the next instruction
    pc += size;
  }
  return r;
}

std::string disassemble(const Executable &exe, const DisasmOptions &opts) {
  std::string r = "; nimble executable, format " + std::to_string(exe.major) + "." +
                  std::to_string(exe.minor) + "\n";
  if (opts.tables) {
    if (!exe.strings.empty()) {
      r += "\nstrings:\n";
      for (size_t i = 0; i < exe.strings.size(); ++i)
        r += "  s" + std::to_string(i) + " = " + quote(exe.strings[i]) + "\n";
    }
    if (!exe.adts.empty()) {
      r += "\nadts:\n";
      for (const AdtDesc &a : exe.adts) {
        r += "  type " + symbol(a.name) + " =";
        for (size_t c = 0; c < a.ctors.size(); ++c) {
          r += (c ? " | " : " ") + a.ctors[c].name;
          if (a.ctors[c].fields.empty()) continue;
          r += "(";
          for (size_t f = 0; f < a.ctors[c].fields.size(); ++f)
            r += (f ? ", " : "") + typeToString(exe, a.ctors[c].fields[f]);
          r += ")";
        }
        r += "\n";
      }
    }
    if (!exe.constants.empty()) {
      r += "\nconstants:\n";
      for (size_t i = 0; i < exe.constants.size(); ++i) {
        const ConstantDesc &c = exe.constants[i];
        r += "  c" + std::to_string(i) + (c.name.empty() ? "" : " " + symbol(c.name)) + " : " +
             tensorStr(c.dtype, c.shape) + ", " + std::to_string(c.size) + " bytes" +
             (c.splat ? " (splat)" : "") + "\n";
      }
    }
    if (!exe.native.empty()) {
      r += "\nnative code: " + std::to_string(exe.native.entries.size()) + " kernels, " +
           std::to_string(exe.native.object.size()) + "-byte shared object for " + exe.native.triple +
           ", cpu " + exe.native.cpu + ", features";
      for (const std::string &f : exe.native.features) r += " " + f;
      r += "\n";
    }
    if (!exe.cuda.empty()) {
      r += "\ncuda code: " + std::to_string(exe.cuda.entries.size()) + " kernels for " + exe.cuda.arch + ", " +
           std::to_string(exe.cuda.ptx.size()) + "-byte PTX, " +
           (exe.cuda.cubin.empty() ? std::string("no cubin (the driver compiles the PTX at load)")
                                   : std::to_string(exe.cuda.cubin.size()) + "-byte cubin") +
           "\n";
    }
    if (!exe.kernels.empty()) {
      r += "\nkernels:\n";
      for (size_t i = 0; i < exe.kernels.size(); ++i) {
        const KernelDesc &k = exe.kernels[i];
        r += "  k" + std::to_string(i) + " " + quote(k.name) + " (";
        for (uint32_t v = 0; v < k.numInputs && v < 1024; ++v)
          r += (v ? ", %" : "%") + std::to_string(v);
        if (k.numInputs > 1024) r += ", ...";
        r += ") -> (";
        for (size_t o = 0; o < k.outputs.size(); ++o)
          r += (o ? ", %" : "%") + std::to_string(k.outputs[o]);
        r += k.upperBound ? ") upper_bound" : ")";
        for (const NativeCode::Entry &en : exe.native.entries)
          if (en.kernel == i) r += " native " + quote(en.symbol);
        for (const CudaCode::Entry &en : exe.cuda.entries) {
          if (en.kernel != i) continue;
          if (en.kind == CudaCode::Kind::Generated)
            r += " cuda " + quote(en.symbol) +
                 ((en.flags & CudaCode::kMultiBlock)       ? " multi-block"
                  : (en.flags & CudaCode::kBlockPerOutput) ? " block-per-output"
                  : (en.flags & CudaCode::kBlockPerRow)    ? " block-per-row"
                                                           : " one-block");
          else
            r += en.kind == CudaCode::Kind::CublasGemm ? " cuda cublasSgemm" : " cuda cublasSgemmStridedBatched";
        }
        if (i < exe.batching.size() && exe.batching[i].mode != KernelBatching::Mode::None) {
          const KernelBatching &b = exe.batching[i];
          r += std::string(" batch ") + batchingModeName(b.mode);
          if (b.mode == KernelBatching::Mode::Rows) r += " k" + std::to_string(b.batched);
          r += " shared [";
          for (size_t s = 0; s < b.shared.size() && s < 1024; ++s) r += (s ? ", " : "") + std::to_string(b.shared[s]);
          r += "]";
          if (b.phase) r += " phase " + std::to_string(b.phase);
        }
        r += "\n";
        uint64_t next = k.numInputs;
        for (const KernelDesc::Member &m : k.members) {
          r += "    " + kernelMemberToString(m, static_cast<uint32_t>(next)) + "\n";
          next += m.numResults;
        }
      }
    }
  }
  for (size_t f = 0; f < exe.functions.size(); ++f) r += "\n" + disassembleFunction(exe, f, opts);
  return r;
}

} // namespace nimble::vm
