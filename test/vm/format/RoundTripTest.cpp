//===- RoundTripTest.cpp - serialize -> deserialize keeps everything ------===//

#include "test/vm/format/TestExecutables.h"
#include "vm/format/Bytecode.h"
#include "vm/format/Disassembler.h"
#include "vm/format/Format.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <set>

namespace nimble::vm {
namespace {

using namespace test;

void expectSameAdts(const Executable &a, const Executable &b) {
  ASSERT_EQ(a.adts.size(), b.adts.size());
  for (size_t i = 0; i < a.adts.size(); ++i) {
    EXPECT_EQ(a.adts[i].name, b.adts[i].name);
    ASSERT_EQ(a.adts[i].ctors.size(), b.adts[i].ctors.size());
    for (size_t c = 0; c < a.adts[i].ctors.size(); ++c) {
      EXPECT_EQ(a.adts[i].ctors[c].name, b.adts[i].ctors[c].name);
      EXPECT_EQ(a.adts[i].ctors[c].fields, b.adts[i].ctors[c].fields);
    }
  }
}

void expectSameExecutable(const Executable &a, const Executable &b) {
  EXPECT_EQ(a.strings, b.strings);
  expectSameAdts(a, b);
  ASSERT_EQ(a.constants.size(), b.constants.size());
  for (size_t i = 0; i < a.constants.size(); ++i) {
    const ConstantDesc &x = a.constants[i], &y = b.constants[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.dtype, y.dtype);
    EXPECT_EQ(x.shape, y.shape);
    ASSERT_EQ(x.size, y.size);
    if (x.size) {
      EXPECT_EQ(std::memcmp(x.data, y.data, x.size), 0) << "constant " << i;
    }
  }
  ASSERT_EQ(a.kernels.size(), b.kernels.size());
  for (size_t i = 0; i < a.kernels.size(); ++i) {
    const KernelDesc &x = a.kernels[i], &y = b.kernels[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.numInputs, y.numInputs);
    EXPECT_EQ(x.upperBound, y.upperBound);
    EXPECT_EQ(x.outputs, y.outputs);
    ASSERT_EQ(x.members.size(), y.members.size());
    for (size_t m = 0; m < x.members.size(); ++m) {
      EXPECT_EQ(x.members[m].op, y.members[m].op);
      EXPECT_EQ(x.members[m].attrs, y.members[m].attrs) << "kernel " << i << " member " << m;
      EXPECT_EQ(x.members[m].operands, y.members[m].operands);
      EXPECT_EQ(x.members[m].numResults, y.members[m].numResults);
    }
  }
  ASSERT_EQ(a.functions.size(), b.functions.size());
  for (size_t i = 0; i < a.functions.size(); ++i) {
    const VMFunction &x = a.functions[i], &y = b.functions[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.paramNames, y.paramNames);
    EXPECT_EQ(x.paramTypes, y.paramTypes);
    EXPECT_EQ(x.resultTypes, y.resultTypes);
    EXPECT_EQ(x.numRegisters, y.numRegisters);
    EXPECT_EQ(x.code, y.code);
    ASSERT_EQ(x.sourceMap.size(), y.sourceMap.size());
    for (size_t s = 0; s < x.sourceMap.size(); ++s) {
      EXPECT_EQ(x.sourceMap[s].pc, y.sourceMap[s].pc);
      EXPECT_EQ(x.sourceMap[s].file, y.sourceMap[s].file);
      EXPECT_EQ(x.sourceMap[s].line, y.sourceMap[s].line);
      EXPECT_EQ(x.sourceMap[s].col, y.sourceMap[s].col);
    }
    ASSERT_EQ(x.sites.size(), y.sites.size());
    for (size_t s = 0; s < x.sites.size(); ++s) {
      EXPECT_EQ(x.sites[s].pc, y.sites[s].pc);
      ASSERT_EQ(x.sites[s].count, y.sites[s].count);
      for (uint32_t m = 0; m < x.sites[s].count; ++m) {
        const SourceLoc &p = *x.siteMemberLoc(x.sites[s].pc, m), &q = *y.siteMemberLoc(y.sites[s].pc, m);
        EXPECT_EQ(p.line, q.line);
        EXPECT_EQ(p.col, q.col);
        if (p.line) {
          EXPECT_EQ(p.file, q.file);
        }
      }
    }
  }
}

TEST(Format, FullExecutableVerifies) {
  Executable e = makeFullExecutable();
  std::string err;
  EXPECT_TRUE(verify(e, err)) << err;
}

TEST(Format, FullExecutableCoversEveryOpcodeAndAttrKind) {
  Executable e = makeFullExecutable();
  std::set<Opcode> ops;
  for (const VMFunction &f : e.functions) {
    DecodedInstr in;
    for (uint32_t pc = 0; pc < f.code.size(); pc += in.size) {
      ASSERT_TRUE(decodeInstr(f.code.data(), f.code.size(), pc, in));
      ops.insert(in.op);
    }
  }
  EXPECT_EQ(ops.size(), size_t(kNumOpcodes));
  std::set<AttrKind> kinds;
  for (const KernelDesc &k : e.kernels)
    for (const auto &m : k.members)
      for (const Attr &a : m.attrs) kinds.insert(a.kind());
  // Every kind but Sym: no op a kernel may contain takes a symbol (see the
  // AttrKindMismatch test in HostileTest.cpp for Sym going through the codec).
  EXPECT_EQ(kinds.size(), 7u);
  EXPECT_FALSE(kinds.count(AttrKind::Sym));
}

TEST(Format, RoundTripFull) {
  Executable e = makeFullExecutable();
  std::vector<uint8_t> bytes = serialize(e);
  Executable r;
  std::string err;
  ASSERT_TRUE(load(bytes, r, err)) << err;
  expectSameExecutable(e, r);
  EXPECT_EQ(r.major, Executable::kMajor);
  EXPECT_EQ(r.minor, Executable::kMinor);
  // Writing what was read gives the same bytes.
  EXPECT_EQ(serialize(r), bytes);
}

// Format 1.3: the cuda-code section (architecture, the kernel table with
// generated and cuBLAS entries, PTX, cubin) survives the round trip, with and
// without a cubin, beside a file without it that keeps its old bytes.
TEST(Format, CudaCodeRoundTrip) {
  Executable e = makeFullExecutable();
  const size_t plain = serialize(e).size();
  KernelDesc g;
  g.name = "gemm";
  g.numInputs = 2;
  g.outputs = {2};
  e.kernels.push_back(g);
  KernelDesc::Member mm;
  mm.op = OpCode::MatMul;
  mm.attrs = {Attr::getBool(false), Attr::getBool(false)};
  mm.operands = {0, 1};
  e.kernels.back().members.push_back(mm);
  e.kernels.back().inputDTypes = {DType::F32, DType::F32};
  const uint32_t gemm = static_cast<uint32_t>(e.kernels.size() - 1);
  e.cuda.arch = "sm_90";
  e.cuda.ptx = ".version 8.0\n.target sm_90\n";
  CudaCode::Entry gen, blas;
  gen.kernel = 1;
  gen.flags = CudaCode::kMultiBlock;
  gen.symbol = "nimble_k1_cast_softmax";
  blas.kernel = gemm;
  blas.kind = CudaCode::Kind::CublasGemm;
  e.cuda.entries = {gen, blas};
  for (bool withCubin : {false, true}) {
    e.cuda.cubin = withCubin ? std::vector<uint8_t>{0x7f, 'E', 'L', 'F', 2, 1} : std::vector<uint8_t>{};
    std::vector<uint8_t> bytes = serialize(e);
    EXPECT_GT(bytes.size(), plain);
    Executable r;
    std::string err;
    ASSERT_TRUE(load(bytes, r, err)) << err;
    EXPECT_EQ(r.cuda.arch, "sm_90");
    EXPECT_EQ(r.cuda.ptx, e.cuda.ptx);
    EXPECT_EQ(r.cuda.cubin, e.cuda.cubin);
    ASSERT_EQ(r.cuda.entries.size(), 2u);
    EXPECT_EQ(r.cuda.entries[0].symbol, "nimble_k1_cast_softmax");
    EXPECT_EQ(r.cuda.entries[0].flags, CudaCode::kMultiBlock);
    EXPECT_EQ(r.cuda.entries[1].kind, CudaCode::Kind::CublasGemm);
    EXPECT_EQ(serialize(r), bytes);
  }
  // The verifier: a cuBLAS entry must be a lone f32 matmul.
  e.cuda.entries[1].kernel = 0;
  std::swap(e.cuda.entries[0], e.cuda.entries[1]);
  std::string err;
  EXPECT_FALSE(verify(e, err));
  EXPECT_EQ(err, "cuda-code section, entry 0: kernel 0 is not a single f32 matmul (cuBLAS entry)");
}

// Format 1.1: each kernel member's .nir location (the kernel-locs section)
// survives the round trip; a location list that does not match the members,
// or names a string that does not exist, is refused.
TEST(Format, KernelMemberLocationsRoundTrip) {
  Executable e = makeFullExecutable();
  ASSERT_FALSE(e.kernels.empty());
  e.strings.push_back("model.nir");
  uint32_t file = static_cast<uint32_t>(e.strings.size() - 1);
  KernelDesc &k = e.kernels.back();
  for (uint32_t m = 0; m < k.members.size(); ++m) k.memberLocs.push_back({0, file, 10 + m, 3});
  std::vector<uint8_t> bytes = serialize(e);
  Executable r;
  std::string err;
  ASSERT_TRUE(load(bytes, r, err)) << err;
  const KernelDesc &rk = r.kernels.back();
  ASSERT_EQ(rk.memberLocs.size(), k.members.size());
  for (uint32_t m = 0; m < k.members.size(); ++m) {
    EXPECT_EQ(rk.memberLocs[m].file, file);
    EXPECT_EQ(rk.memberLocs[m].line, 10 + m);
    EXPECT_EQ(rk.memberLocs[m].col, 3u);
  }
  // Kernels without locations read back as unknown (line 0) ones.
  ASSERT_EQ(r.kernels.front().memberLocs.size(), e.kernels.front().members.size());
  EXPECT_EQ(r.kernels.front().memberLocs[0].line, 0u);
  EXPECT_EQ(serialize(r), bytes);

  Executable bad = r;
  bad.kernels.back().memberLocs.pop_back();
  EXPECT_FALSE(verify(bad, err));
  EXPECT_NE(err.find("member locations for"), std::string::npos) << err;
  bad = r;
  bad.kernels.back().memberLocs[0].file = static_cast<uint32_t>(bad.strings.size());
  EXPECT_FALSE(verify(bad, err));
  EXPECT_NE(err.find("member location file string"), std::string::npos) << err;
  // The same damage in the bytes: the reader refuses it too.
  std::vector<uint8_t> damaged = serialize(bad);
  EXPECT_FALSE(load(damaged, r, err));
  EXPECT_NE(err.find("kernel-locs section"), std::string::npos) << err;
}

// The kernel-locs section is optional: a file without it (here: its table
// entry turned into a kind this reader does not know, in a newer minor, which
// the reader skips) loads, with no member locations.
TEST(Format, KernelLocsSectionIsOptional) {
  std::vector<uint8_t> bytes = serialize(makeFullExecutable());
  uint32_t n = get<uint32_t>(bytes, nbc::kOffSectionCount);
  bool found = false;
  for (uint32_t i = 0; i < n; ++i)
    if (get<uint32_t>(bytes, 40 + 24 * i) == static_cast<uint32_t>(nbc::SectionKind::KernelLocs)) {
      put<uint32_t>(bytes, 40 + 24 * i, 99);
      found = true;
    }
  ASSERT_TRUE(found);
  put<uint16_t>(bytes, nbc::kOffMinor, Executable::kMinor + 1);
  resealChecksum(bytes.data(), bytes.size());
  Executable r;
  std::string err;
  ASSERT_TRUE(load(bytes, r, err)) << err;
  ASSERT_FALSE(r.kernels.empty());
  for (const KernelDesc &k : r.kernels) EXPECT_TRUE(k.memberLocs.empty()) << k.name;
}

TEST(Format, ConstantsPointIntoTheAlignedBuffer) {
  Executable e = makeFullExecutable();
  std::vector<uint8_t> bytes = serialize(e);
  auto buf = AlignedBuffer::copyOf(bytes.data(), bytes.size());
  ASSERT_TRUE(buf);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % 64, 0u);
  const uint8_t *begin = buf->data(), *end = begin + buf->size();
  Executable r;
  std::string err;
  ASSERT_TRUE(deserialize(std::shared_ptr<const AlignedBuffer>(buf), r, err)) << err;
  for (const ConstantDesc &c : r.constants) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c.data) % 64, 0u) << c.name;
    EXPECT_GE(c.data, begin) << c.name; // no copy: inside the loaded buffer
    EXPECT_LE(c.data + c.size, end) << c.name;
  }
  // The executable keeps the buffer alive on its own.
  std::weak_ptr<AlignedBuffer> weak = buf;
  buf.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(std::memcmp(r.constants[0].data, e.constants[0].data, e.constants[0].size), 0);
  r = Executable();
  EXPECT_TRUE(weak.expired());
}

TEST(Format, ConstantsAreAlignedInTheFile) {
  std::vector<uint8_t> bytes = serialize(makeFullExecutable());
  Layout l;
  std::string err;
  ASSERT_TRUE(walkLayout(bytes, l, err)) << err;
  ASSERT_EQ(l.constantOffsetFields.size(), 7u);
  for (size_t f : l.constantOffsetFields) EXPECT_EQ(get<uint64_t>(bytes, f) % 64, 0u);
}

TEST(Format, HeaderLayout) {
  std::vector<uint8_t> bytes = serialize(makeSmallExecutable());
  ASSERT_GE(bytes.size(), 40u);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "NIMBLEBC");
  EXPECT_EQ(get<uint16_t>(bytes, 8), Executable::kMajor);
  EXPECT_EQ(get<uint16_t>(bytes, 10), Executable::kMinor);
  EXPECT_EQ(get<uint32_t>(bytes, 12), 0u);
  EXPECT_EQ(get<uint64_t>(bytes, 16), bytes.size());
  EXPECT_EQ(get<uint64_t>(bytes, 24), crc32c(bytes.data() + 40, bytes.size() - 40));
  EXPECT_EQ(get<uint32_t>(bytes, 32), 7u); // 1.1: the kernel-locs section
  for (uint32_t i = 0; i < 7; ++i) EXPECT_EQ(get<uint32_t>(bytes, 40 + 24 * i), i + 1);
}

TEST(Format, EmptyExecutableRoundTrips) {
  Executable e;
  std::vector<uint8_t> bytes = serialize(e);
  Executable r;
  std::string err;
  ASSERT_TRUE(load(bytes, r, err)) << err;
  EXPECT_TRUE(r.functions.empty());
}

TEST(Format, FileRoundTrip) {
  const char *tmp = std::getenv("TEST_TMPDIR");
  std::string path = std::string(tmp ? tmp : "/tmp") + "/full.nbc";
  Executable e = makeFullExecutable();
  std::string err;
  ASSERT_TRUE(writeExecutableFile(path, e, err)) << err;
  Executable r;
  ASSERT_TRUE(readExecutableFile(path, r, err)) << err;
  expectSameExecutable(e, r);
  for (const ConstantDesc &c : r.constants) EXPECT_EQ(reinterpret_cast<uintptr_t>(c.data) % 64, 0u);
  EXPECT_FALSE(readExecutableFile(path + ".missing", r, err));
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
}

// The file writer streams: past 1 MiB of buffered bytes it writes them out,
// a large constant goes straight from its data, and the section table,
// header fields and offsets inside flushed bytes are patched at the end, the
// checksum from reading the file back. Its bytes are serialize()'s.
TEST(Format, StreamedFileEqualsSerializedBytes) {
  const char *tmp = std::getenv("TEST_TMPDIR");
  std::string path = std::string(tmp ? tmp : "/tmp") + "/big.nbc";
  Executable e = makeFullExecutable();
  // A function of 2 Mi code words (its Ret last) and constants after it of
  // 3 MiB and of a few bytes: patches fall in flushed bytes and in the buffer.
  VMFunction &h = e.functions[1]; // Move r1, r0; Ret (r1)
  ASSERT_EQ(h.code.size(), 6u);
  std::vector<uint32_t> move(h.code.begin(), h.code.begin() + 3), ret(h.code.begin() + 3, h.code.end());
  h.code.clear();
  while (h.code.size() < (size_t(2) << 20)) h.code.insert(h.code.end(), move.begin(), move.end());
  h.code.insert(h.code.end(), ret.begin(), ret.end());
  std::vector<uint8_t> big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7 + 1);
  addConstant(e, "huge", DType::I8, {int64_t(big.size())}, big);
  addConstant(e, "tail", DType::I8, {3}, {1, 2, 3});
  std::string err;
  ASSERT_TRUE(verify(e, err)) << err;
  ASSERT_TRUE(writeExecutableFile(path, e, err)) << err;
  std::vector<uint8_t> expected = serialize(e);
  std::FILE *f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::vector<uint8_t> got(expected.size() + 1);
  size_t n = std::fread(got.data(), 1, got.size(), f);
  std::fclose(f);
  got.resize(n);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
  Executable r;
  ASSERT_TRUE(readExecutableFile(path, r, err)) << err;
  expectSameExecutable(e, r);
  // A directory that does not exist: the error names the file.
  EXPECT_FALSE(writeExecutableFile(path + ".d/x.nbc", e, err));
  EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
}

TEST(Format, UnalignedBufferIsRefused) {
  std::vector<uint8_t> bytes = serialize(makeSmallExecutable());
  auto buf = AlignedBuffer::create(bytes.size() + 1);
  std::memcpy(buf->data() + 1, bytes.data(), bytes.size());
  Executable r;
  std::string err;
  EXPECT_FALSE(deserialize(buf->data() + 1, bytes.size(), buf, r, err));
  EXPECT_NE(err.find("64-byte aligned"), std::string::npos) << err;
}

TEST(Format, FindFunctionAndInternString) {
  Executable e = makeFullExecutable();
  EXPECT_EQ(e.findFunction("main"), 0);
  EXPECT_EQ(e.findFunction("helper"), 1);
  EXPECT_EQ(e.findFunction("nope"), -1);
  EXPECT_EQ(e.internString("model.nir"), 0u);
  EXPECT_EQ(e.internString("new"), 2u);
  EXPECT_EQ(e.internString("new"), 2u);
  EXPECT_EQ(e.strings.size(), 3u);
}

TEST(Format, OpcodeTable) {
  EXPECT_STREQ(opcodeInfo(Opcode::Move).name, "Move");
  EXPECT_STREQ(opcodeInfo(Opcode::Move).signature, "rr");
  EXPECT_STREQ(opcodeInfo(Opcode::Fatal).name, "Fatal");
  EXPECT_STREQ(opcodeInfo(Opcode::Switch).signature, "rJ");
  for (int i = 0; i < kNumOpcodes; ++i) EXPECT_EQ(int(opcodeInfo(Opcode(i)).op), i);
  EXPECT_STREQ(opcodeInfo(Opcode(200)).name, "<invalid>");
  EXPECT_STREQ(deviceName(Device::CPU), "cpu");
  EXPECT_STREQ(deviceName(Device::CUDA), "cuda");
  EXPECT_EQ(kMaxOperands, 5);
}

TEST(Format, FindSourceLoc) {
  Executable e = makeSmallExecutable();
  const VMFunction &f = e.functions[0];
  ASSERT_NE(findSourceLoc(f, 0), nullptr);
  EXPECT_EQ(findSourceLoc(f, 0)->line, 1u);
  EXPECT_EQ(findSourceLoc(f, 3)->line, 2u);  // InvokePacked
  EXPECT_EQ(findSourceLoc(f, 12)->line, 2u); // later instructions inherit it
  // A line-0 entry ends the previous location: the disassembly notes none.
  Executable u = makeSmallExecutable();
  u.functions[0].sourceMap[1].line = 0;
  EXPECT_EQ(findSourceLoc(u.functions[0], 3)->line, 0u);
  EXPECT_NE(disassembleInstr(e, e.functions[0], 3, true).find(":2:5"), std::string::npos) << disassembleInstr(e, e.functions[0], 3, true);
  EXPECT_EQ(disassembleInstr(u, u.functions[0], 3, true).find(":2:5"), std::string::npos) << disassembleInstr(u, u.functions[0], 3, true);
  VMFunction empty;
  EXPECT_EQ(findSourceLoc(empty, 0), nullptr);
}

//===-- CRC-32C ------------------------------------------------------------===//

uint32_t crcBitwise(const uint8_t *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

TEST(Checksum, KnownValues) {
  const char *check = "123456789";
  EXPECT_EQ(crc32c(reinterpret_cast<const uint8_t *>(check), 9), 0xE3069283u);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu); // RFC 3720 B.4
}

TEST(Checksum, MatchesBitwiseReferenceAtEveryLengthAndAlignment) {
  std::mt19937 rng(42);
  std::vector<uint8_t> data(300);
  for (auto &b : data) b = static_cast<uint8_t>(rng());
  for (size_t off = 0; off < 8; ++off)
    for (size_t n = 0; n + off <= data.size(); n += 7) {
      uint32_t want = crcBitwise(data.data() + off, n);
      ASSERT_EQ(crc32c(data.data() + off, n), want) << "offset " << off << " length " << n;
      ASSERT_EQ(crc32cPortable(data.data() + off, n), want) << "offset " << off << " length " << n;
    }
  // Continuation: crc(a ++ b) == crc(b, crc(a)).
  uint32_t first = crc32c(data.data(), 100);
  EXPECT_EQ(crc32c(data.data() + 100, 200, first), crc32c(data.data(), 300));
  EXPECT_EQ(crc32cPortable(data.data() + 100, 200, first), crc32c(data.data(), 300));
}

//===-- Decoding -----------------------------------------------------------===//

TEST(Bytecode, DecodeOperandsOfEveryInstruction) {
  std::vector<uint32_t> code;
  Emitter m(code);
  m.begin(Opcode::AllocTensor);
  m.word(1).word(2).word(3).word(uint32_t(DType::I64)).shape({-5, 1LL << 40});
  m.begin(Opcode::Invoke);
  m.word(7).regs({1, 2, 3}).regs({4});
  uint32_t sw = m.begin(Opcode::Switch);
  m.word(9).word(2).word(4);
  m.jump(0);
  m.word(8);
  m.jump(sw);
  m.jump(100);
  m.begin(Opcode::LoadConsti);
  m.word(2).imm64(-123456789012345LL);

  DecodedInstr in;
  ASSERT_TRUE(decodeInstr(code.data(), code.size(), 0, in));
  EXPECT_EQ(in.op, Opcode::AllocTensor);
  EXPECT_EQ(in.size, 1u + 4 + 1 + 4);
  EXPECT_EQ(in.numOperands, 5);
  EXPECT_EQ(in.word(0), 1u);
  EXPECT_EQ(in.word(3), uint32_t(DType::I64));
  ASSERT_EQ(in.shape(4).count, 2u);
  EXPECT_EQ(in.shape(4)[0], -5);
  EXPECT_EQ(in.shape(4)[1], 1LL << 40);

  ASSERT_TRUE(decodeInstr(code.data(), code.size(), 10, in));
  EXPECT_EQ(in.op, Opcode::Invoke);
  EXPECT_EQ(in.word(0), 7u);
  EXPECT_EQ(std::vector<uint32_t>(in.regs(1).begin(), in.regs(1).end()),
            (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(in.regs(2).count, 1u);
  EXPECT_EQ(in.regs(2)[0], 4u);
  EXPECT_EQ(in.size, 1u + 1 + 4 + 2);

  ASSERT_TRUE(decodeInstr(code.data(), code.size(), 18, in));
  EXPECT_EQ(in.op, Opcode::Switch);
  EXPECT_EQ(in.pc, 18u);
  CaseList c = in.cases(1);
  ASSERT_EQ(c.count, 2u);
  EXPECT_EQ(c.tag(0), 4u);
  EXPECT_EQ(c.target(0), 0);
  EXPECT_EQ(c.tag(1), 8u);
  EXPECT_EQ(c.target(1), 18);
  EXPECT_EQ(c.defaultTarget(), 100);
  EXPECT_EQ(in.size, 1u + 1 + 1 + 4 + 1);

  ASSERT_TRUE(decodeInstr(code.data(), code.size(), 26, in));
  EXPECT_EQ(in.op, Opcode::LoadConsti);
  EXPECT_EQ(in.imm64(1), -123456789012345LL);
  EXPECT_EQ(26u + in.size, code.size());
}

TEST(Bytecode, DecodeRejectsBadWords) {
  std::string why;
  DecodedInstr in;
  std::vector<uint32_t> code = {uint32_t(kNumOpcodes)};
  EXPECT_FALSE(decodeInstr(code.data(), code.size(), 0, in, &why));
  EXPECT_NE(why.find("unknown opcode"), std::string::npos) << why;
  code = {uint32_t(Opcode::Goto) | 0x100u, 0};
  EXPECT_FALSE(decodeInstr(code.data(), code.size(), 0, in, &why));
  EXPECT_NE(why.find("reserved bits"), std::string::npos) << why;
  code = {uint32_t(Opcode::Move), 1};
  EXPECT_FALSE(decodeInstr(code.data(), code.size(), 0, in, &why));
  EXPECT_NE(why.find("past the end"), std::string::npos) << why;
  code = {uint32_t(Opcode::Ret), 0xffffffffu, 1, 2};
  EXPECT_FALSE(decodeInstr(code.data(), code.size(), 0, in, &why));
  EXPECT_NE(why.find("register list runs past the end"), std::string::npos) << why;
  code = {uint32_t(Opcode::AllocTensor), 0, 0, 0, 0, 0x80000000u};
  EXPECT_FALSE(decodeInstr(code.data(), code.size(), 0, in, &why));
  code = {uint32_t(Opcode::Switch), 0, 0xffffffffu};
  EXPECT_FALSE(decodeInstr(code.data(), code.size(), 0, in, &why));
  EXPECT_FALSE(decodeInstr(code.data(), code.size(), 3, in, &why));
}

} // namespace
} // namespace nimble::vm
