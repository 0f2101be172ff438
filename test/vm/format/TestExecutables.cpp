//===- TestExecutables.cpp - Hand-built executables and a layout walker ---===//

#include "test/vm/format/TestExecutables.h"

#include <cmath>
#include <cstring>

namespace nimble::vm::test {

TypeDesc tensorType(DType dt, std::vector<int64_t> dims) {
  TypeDesc t;
  t.kind = TypeDesc::Kind::Tensor;
  t.dtype = dt;
  t.dims = std::move(dims);
  return t;
}

TypeDesc adtType(uint32_t index) {
  TypeDesc t;
  t.kind = TypeDesc::Kind::Adt;
  t.adt = index;
  return t;
}

static TypeDesc tupleType(std::vector<TypeDesc> elems) {
  TypeDesc t;
  t.kind = TypeDesc::Kind::Tuple;
  t.elems = std::move(elems);
  return t;
}

static TypeDesc storageType() {
  TypeDesc t;
  t.kind = TypeDesc::Kind::Storage;
  return t;
}

uint32_t addConstant(Executable &exe, std::string name, DType dtype, std::vector<int64_t> shape,
                     const std::vector<uint8_t> &bytes) {
  exe.ownedData.push_back(bytes);
  ConstantDesc c;
  c.name = std::move(name);
  c.dtype = dtype;
  c.shape = std::move(shape);
  c.data = exe.ownedData.back().data();
  c.size = bytes.size();
  // ownedData may have reallocated: re-point every constant.
  exe.constants.push_back(c);
  for (size_t i = 0; i < exe.constants.size(); ++i) exe.constants[i].data = exe.ownedData[i].data();
  return static_cast<uint32_t>(exe.constants.size() - 1);
}

static std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

static KernelDesc::Member member(OpCode op, std::vector<Attr> attrs, std::vector<uint32_t> operands,
                                 uint32_t results = 1) {
  KernelDesc::Member m;
  m.op = op;
  m.attrs = std::move(attrs);
  m.operands = std::move(operands);
  m.numResults = results;
  return m;
}

// Kernels built above list members and outputs; their input dtypes (what
// InvokeShapeFunc needs) default to f32, i64 where a member reads an index.
static void fillInputDTypes(Executable &e) {
  for (KernelDesc &k : e.kernels)
    if (k.inputDTypes.size() != k.numInputs) k.inputDTypes.assign(k.numInputs, DType::F32);
}

Executable makeFullExecutable() {
  Executable e;
  e.strings = {"model.nir", "index out of range"};

  // ADTs: recursive through an index (Tree, List), tuples and storage in fields.
  e.adts.resize(3);
  e.adts[0].name = "Tree";
  e.adts[0].ctors = {{"Leaf", {tensorType(DType::F32, {1, 4})}},
                     {"Node", {adtType(0), adtType(0)}}};
  e.adts[1].name = "List";
  e.adts[1].ctors = {{"Nil", {}}, {"Cons", {tensorType(DType::I64, {kDynamic}), adtType(1)}}};
  e.adts[2].name = "Pair";
  e.adts[2].ctors = {
      {"MkPair", {tupleType({tensorType(DType::F32, {}), adtType(0)}), storageType()}}};

  addConstant(e, "w", DType::F32, {4, 4}, pattern(64, 1));
  addConstant(e, "", DType::I64, {}, pattern(8, 2));
  addConstant(e, "empty", DType::F16, {0, 3}, {});
  addConstant(e, "bias", DType::BF16, {4}, pattern(8, 3));
  addConstant(e, "mask", DType::I1, {3}, {1, 0, 1});
  addConstant(e, "big", DType::F64, {5}, pattern(40, 4));
  addConstant(e, "bytes", DType::I8, {2, 65}, pattern(130, 5));

  // Kernels: every attribute kind a member can carry (Bool, Int, Float, Ints,
  // DType, Str, Dense; no non-structural op takes a Sym), several outputs,
  // an upper-bound kernel and a multi-result split.
  KernelDesc k0{"fused_matmul_add",
                3,
                {member(OpCode::MatMul, {Attr::getBool(false), Attr::getBool(true)}, {0, 1}),
                 member(OpCode::Add, {}, {3, 2})},
                {4}};
  KernelDesc k1{"cast_softmax",
                1,
                {member(OpCode::Cast, {Attr::getDType(DType::F16)}, {0}),
                 member(OpCode::Softmax, {Attr::getInt(-1)}, {1})},
                {2}};
  KernelDesc k2{"norm",
                3,
                {member(OpCode::LayerNorm, {Attr::getFloat(1e-5)}, {0, 1, 2}),
                 member(OpCode::Transpose, {Attr::getInts({1, 0})}, {3}),
                 member(OpCode::Reshape, {Attr::getInts({-1})}, {4})},
                {4, 5}};
  KernelDesc k3{"copy",
                1,
                {member(OpCode::DeviceCopy, {Attr::getStr("cpu"), Attr::getStr("cuda")}, {0})},
                {1}};
  DenseValue dense;
  dense.dtype = DType::F32;
  dense.shape = {2, 2};
  for (double v : {1.0, 2.5, -3.0, 4.0}) dense.appendDouble(v);
  DenseValue splat;
  splat.dtype = DType::I32;
  splat.shape = {3};
  splat.splat = true;
  splat.appendInt(7);
  KernelDesc k4{"consts",
                0,
                {member(OpCode::Constant, {Attr::getDense(dense)}, {}),
                 member(OpCode::Constant, {Attr::getDense(splat)}, {})},
                {0, 1}};
  KernelDesc k5{"unique", 1, {member(OpCode::Unique, {}, {0})}, {1}, true};
  KernelDesc k6{
      "split", 1, {member(OpCode::Split, {Attr::getInt(1), Attr::getInt(2)}, {0}, 2)}, {1, 2}};
  // Float attributes compare bitwise: -0.0 and a NaN payload must survive.
  KernelDesc k7{"odd_floats",
                3,
                {member(OpCode::LayerNorm, {Attr::getFloat(-0.0)}, {0, 1, 2}),
                 member(OpCode::LayerNorm, {Attr::getFloat(std::nan("0x5"))}, {3, 1, 2})},
                {4}};
  e.kernels = {k0, k1, k2, k3, k4, k5, k6, k7};

  // @main: every opcode at least once.
  VMFunction main;
  main.name = "main";
  main.paramNames = {"x", "t"};
  main.paramTypes = {tensorType(DType::F32, {kDynamic, 4}), adtType(0)};
  main.resultTypes = {tensorType(DType::F32, {1, 4})};
  main.numRegisters = 21;
  Emitter m(main.code);
  auto loc = [&](uint32_t pc, uint32_t line, uint32_t col) {
    main.sourceMap.push_back({pc, 0, line, col});
  };
  loc(m.begin(Opcode::LoadConst), 3, 3);
  m.word(2).word(0);
  m.begin(Opcode::LoadConsti);
  m.word(3).imm64(256);
  m.begin(Opcode::LoadConsti);
  m.word(6).imm64(-1);
  m.begin(Opcode::AllocStorage);
  m.word(4).word(3).word(64).word(0);
  m.begin(Opcode::AllocTensor);
  m.word(5).word(4).word(6).word(uint32_t(DType::F32)).shape({1, 4});
  m.begin(Opcode::ShapeOf);
  m.word(7).word(0);
  m.begin(Opcode::StorageSize);
  m.word(3).word(7).word(uint32_t(DType::F16)).word(64);
  m.begin(Opcode::AllocTensorReg);
  m.word(8).word(4).word(6).word(uint32_t(DType::F32)).word(7);
  loc(m.begin(Opcode::InvokeShapeFunc), 5, 7);
  m.word(0).regs({0, 2, 5}).regs({9});
  const uint32_t sitePc0 = m.begin(Opcode::InvokePacked);
  loc(sitePc0, 5, 7);
  m.word(0).regs({0, 2, 5}).regs({8});
  m.begin(Opcode::InvokePacked);
  m.word(5).regs({0}).regs({17, 18});
  m.begin(Opcode::ReshapeTensor);
  m.word(10).word(8).word(9);
  m.begin(Opcode::DeviceCopy);
  m.word(11).word(10).word(0).word(1);
  m.begin(Opcode::AllocADT);
  m.word(12).word(1).regs({11, 10});
  m.begin(Opcode::GetField);
  m.word(13).word(12).word(0);
  m.begin(Opcode::GetTag);
  m.word(14).word(1);
  m.begin(Opcode::ScalarI64);
  m.word(uint32_t(ScalarOp::Lt)).word(19).word(3).word(6);
  const uint32_t sitePc1 = m.begin(Opcode::ShapeFunc);
  loc(sitePc1, 5, 7);
  m.word(0).regs({0, 2, 5}).regs({20});
  m.begin(Opcode::Move);
  m.word(15).word(13);
  loc(m.begin(Opcode::Invoke), 7, 10);
  m.word(1).regs({15}).regs({16});
  uint32_t ifPc = m.begin(Opcode::If);
  m.word(14);
  uint32_t ifThen = m.jump(0), ifElse = m.jump(0);
  uint32_t switchPc = m.begin(Opcode::Switch);
  m.word(1).word(2).word(0);
  uint32_t case0 = m.jump(0);
  m.word(1);
  uint32_t case1 = m.jump(0), caseDefault = m.jump(0);
  uint32_t gotoPc = m.begin(Opcode::Goto);
  uint32_t gotoTarget = m.jump(0);
  uint32_t retBlock = m.begin(Opcode::FreeTensor);
  m.word(8);
  m.begin(Opcode::FreeStorage);
  m.word(4);
  loc(m.begin(Opcode::Ret), 9, 3);
  m.regs({16});
  uint32_t fatalPc = m.begin(Opcode::Fatal);
  m.word(1);
  m.patchJump(ifThen, ifPc, switchPc);
  m.patchJump(ifElse, ifPc, gotoPc);
  m.patchJump(case0, switchPc, gotoPc);
  m.patchJump(case1, switchPc, retBlock);
  m.patchJump(caseDefault, switchPc, fatalPc);
  m.patchJump(gotoTarget, gotoPc, retBlock);
  // Format 1.7: two calls of the two-member kernel k0 with their own member
  // locations (one unknown).
  main.sites = {{sitePc0, 0, 2}, {sitePc1, 2, 2}};
  main.siteMemberLocs = {{0, 0, 11, 3}, {0, 0, 12, 5}, {0, 0, 13, 3}, {0, 0, 0, 0}};

  VMFunction helper;
  helper.name = "helper";
  helper.paramNames = {"a"};
  helper.paramTypes = {tensorType(DType::F32, {1, 4})};
  helper.resultTypes = {tensorType(DType::F32, {1, 4})};
  helper.numRegisters = 2;
  Emitter h(helper.code);
  h.begin(Opcode::Move);
  h.word(1).word(0);
  h.begin(Opcode::Ret);
  h.regs({1});

  e.functions = {std::move(main), std::move(helper)};
  fillInputDTypes(e);
  return e;
}

Executable makeSmallExecutable() {
  Executable e;
  e.strings = {"small.nir", "boom"};
  addConstant(e, "w", DType::F32, {2, 2}, pattern(16, 9));
  e.kernels = {KernelDesc{"add", 2, {member(OpCode::Add, {}, {0, 1})}, {2}}};
  VMFunction f;
  f.name = "main";
  f.paramNames = {"x"};
  f.paramTypes = {tensorType(DType::F32, {2, 2})};
  f.resultTypes = {tensorType(DType::F32, {2, 2})};
  f.numRegisters = 4;
  Emitter m(f.code);
  f.sourceMap.push_back({m.begin(Opcode::LoadConst), 0, 1, 1});
  m.word(1).word(0);
  f.sourceMap.push_back({m.begin(Opcode::InvokePacked), 0, 2, 5});
  m.word(0).regs({0, 1}).regs({2});
  uint32_t ifPc = m.begin(Opcode::If);
  m.word(2);
  uint32_t t = m.jump(0), el = m.jump(0);
  uint32_t ret = m.begin(Opcode::Ret);
  m.regs({2});
  uint32_t fatal = m.begin(Opcode::Fatal);
  m.word(1);
  m.patchJump(t, ifPc, ret);
  m.patchJump(el, ifPc, fatal);
  e.functions = {std::move(f)};
  fillInputDTypes(e);
  return e;
}

bool load(const std::vector<uint8_t> &bytes, Executable &out, std::string &error) {
  auto buf = AlignedBuffer::copyOf(bytes.data(), bytes.size());
  return deserialize(std::shared_ptr<const AlignedBuffer>(buf), out, error);
}

//===-- The layout walker --------------------------------------------------===//

namespace {

struct Walker {
  const std::vector<uint8_t> &b;
  Layout &out;
  std::string &error;
  size_t pos = 0, end = 0;

  bool need(size_t n) {
    if (pos + n > end) {
      error = "walker: truncated at " + std::to_string(pos);
      return false;
    }
    return true;
  }
  bool u8(uint8_t &v) {
    if (!need(1)) return false;
    v = b[pos++];
    return true;
  }
  bool u32(uint32_t &v, const char *countWhat = nullptr, bool record = true) {
    if (!need(4)) return false;
    if (countWhat) out.fields.push_back({pos, 4, record, countWhat});
    v = get<uint32_t>(b, pos);
    pos += 4;
    return true;
  }
  bool u64(uint64_t &v, const char *fieldWhat = nullptr, bool record = true) {
    if (!need(8)) return false;
    if (fieldWhat) out.fields.push_back({pos, 8, record, fieldWhat});
    v = get<uint64_t>(b, pos);
    pos += 8;
    return true;
  }
  bool skip(size_t n) {
    if (!need(n)) return false;
    pos += n;
    return true;
  }
  bool str() {
    uint32_t n;
    return u32(n, "string length") && skip(n);
  }
  bool type() {
    uint8_t k;
    if (!u8(k)) return false;
    uint32_t n;
    switch (k) {
    case 0: {
      uint8_t dt;
      return u8(dt) && u32(n, "tensor rank") && skip(size_t(n) * 8);
    }
    case 1:
      if (!u32(n, "tuple size")) return false;
      for (uint32_t i = 0; i < n; ++i)
        if (!type()) return false;
      return true;
    case 2: return u32(n);
    case 3: return true;
    }
    error = "walker: bad type kind";
    return false;
  }
  bool attr() {
    uint8_t k, x;
    uint32_t n;
    uint64_t nb;
    if (!u8(k)) return false;
    switch (k) {
    case 0: return u8(x);
    case 1:
    case 2: return skip(8);
    case 3: return u32(n, "ints length") && skip(size_t(n) * 8);
    case 4: return u8(x);
    case 5:
    case 6: return str();
    case 7:
      return u8(x) && u8(x) && u32(n, "dense rank") && skip(size_t(n) * 8) &&
             u64(nb, "dense byte count") && skip(nb);
    }
    error = "walker: bad attr kind";
    return false;
  }

  bool section(const SectionInfo &s) {
    pos = s.offset;
    end = s.offset + s.size;
    uint32_t n, m, k;
    switch (s.kind) {
    case 1: // strings
      if (!u32(n, "string count")) return false;
      for (uint32_t i = 0; i < n; ++i)
        if (!str()) return false;
      break;
    case 2: // adts
      if (!u32(n, "adt count")) return false;
      for (uint32_t i = 0; i < n; ++i) {
        if (!str() || !u32(m, "constructor count")) return false;
        for (uint32_t c = 0; c < m; ++c) {
          if (!str() || !u32(k, "field count")) return false;
          for (uint32_t f = 0; f < k; ++f)
            if (!type()) return false;
        }
      }
      break;
    case 3: // signatures
      if (!u32(n, "function count (signatures)")) return false;
      for (uint32_t i = 0; i < n; ++i) {
        if (!str() || !u32(m, "parameter count")) return false;
        for (uint32_t p = 0; p < m; ++p)
          if (!str() || !type()) return false;
        if (!u32(m, "result count")) return false;
        for (uint32_t r = 0; r < m; ++r)
          if (!type()) return false;
      }
      break;
    case 4: { // constants
      uint32_t reserved;
      if (!u32(n, "constant count") || !u32(reserved)) return false;
      for (uint32_t i = 0; i < n; ++i) {
        uint8_t dt;
        uint64_t off, size;
        if (!str() || !u8(dt) || !u32(m, "constant rank") || !skip(size_t(m) * 8)) return false;
        out.constantOffsetFields.push_back(pos);
        if (!u64(off, "constant data offset", false) || !u64(size, "constant data size"))
          return false;
      }
      pos = end; // the data region
      break;
    }
    case 5: // kernels
      if (!u32(n, "kernel count")) return false;
      for (uint32_t i = 0; i < n; ++i) {
        uint32_t numInputs;
        uint8_t ub;
        // The input count is followed by one dtype byte per input.
        if (!str() || !u32(numInputs, "kernel input count") || !skip(numInputs) || !u8(ub) ||
            !u32(m, "member count"))
          return false;
        for (uint32_t j = 0; j < m; ++j) {
          uint32_t results, na, no;
          if (!str() || !u32(results, "member result count") || !u32(na, "attribute count"))
            return false;
          for (uint32_t a = 0; a < na; ++a)
            if (!attr()) return false;
          if (!u32(no, "operand count") || !skip(size_t(no) * 4)) return false;
        }
        if (!u32(m, "output count") || !skip(size_t(m) * 4)) return false;
      }
      break;
    case 6: // functions
      if (!u32(n, "function count (bodies)")) return false;
      for (uint32_t i = 0; i < n; ++i) {
        uint32_t regs, words, locs;
        if (!u32(regs, "register count", false) || !u32(words, "code size")) return false;
        out.code.push_back({pos, words});
        if (!skip(size_t(words) * 4) || !u32(locs, "source map size") || !skip(size_t(locs) * 16))
          return false;
      }
      break;
    default: pos = end; break; // a section this walker does not know: skipped
    }
    if (pos != end) {
      error = "walker: section " + std::to_string(s.kind) + " not fully read";
      return false;
    }
    return true;
  }
};

} // namespace

bool walkLayout(const std::vector<uint8_t> &bytes, Layout &out, std::string &error) {
  out = Layout();
  if (bytes.size() < nbc::kHeaderSize) return error = "walker: short", false;
  uint32_t n = get<uint32_t>(bytes, 32);
  out.fields.push_back({16, 8, true, "header file size"});
  out.fields.push_back({32, 4, true, "header section count"});
  for (uint32_t i = 0; i < n; ++i) {
    size_t e = 40 + i * 24;
    out.sections.push_back(
        {get<uint32_t>(bytes, e), get<uint64_t>(bytes, e + 8), get<uint64_t>(bytes, e + 16), e});
    out.fields.push_back({e + 8, 8, true, "section offset"});
    out.fields.push_back({e + 16, 8, true, "section size"});
  }
  Walker w{bytes, out, error};
  for (const SectionInfo &s : out.sections)
    if (!w.section(s)) return false;
  return true;
}

std::vector<uint8_t> withExtraSection(const std::vector<uint8_t> &bytes, uint32_t kind,
                                      const std::vector<uint8_t> &payload, uint16_t minor) {
  Layout l;
  std::string err;
  if (!walkLayout(bytes, l, err)) return {};
  uint32_t n = static_cast<uint32_t>(l.sections.size()) + 1;
  std::vector<uint8_t> out(bytes.begin(), bytes.begin() + 40);
  put<uint16_t>(out, 10, minor);
  put<uint32_t>(out, 32, n);
  out.resize(40 + n * 24, 0);
  std::vector<SectionInfo> placed;
  auto place = [&](const uint8_t *data, size_t size, size_t align) {
    while (out.size() % align) out.push_back(0);
    size_t at = out.size();
    out.insert(out.end(), data, data + size);
    return at;
  };
  for (const SectionInfo &s : l.sections) {
    size_t align = s.kind == 4 ? 64 : 8;
    size_t at = place(bytes.data() + s.offset, s.size, align);
    if (s.kind == 4) // relocate the constant pool's absolute data offsets
      for (size_t f : l.constantOffsetFields) {
        size_t rel = f - s.offset;
        put<uint64_t>(out, at + rel, get<uint64_t>(bytes, f) - s.offset + at);
      }
    placed.push_back({s.kind, at, s.size, 0});
  }
  placed.push_back({kind, place(payload.data(), payload.size(), 8), payload.size(), 0});
  for (uint32_t i = 0; i < n; ++i) {
    put<uint32_t>(out, 40 + i * 24, placed[i].kind);
    put<uint64_t>(out, 40 + i * 24 + 8, placed[i].offset);
    put<uint64_t>(out, 40 + i * 24 + 16, placed[i].size);
  }
  put<uint64_t>(out, 16, out.size());
  resealChecksum(out.data(), out.size());
  return out;
}

} // namespace nimble::vm::test
