//===- CraftedTest.cpp - Specific attacks on the .nbc reader --------------===//
//
// One case per rule of the reader and the verifier (docs/VM.md,
// "Verification"): each crafted file must be refused with the message
// naming the place and the problem. Most cases mutate a valid in-memory
// executable and serialize it (the writer writes whatever it is given);
// the rest patch bytes and recompute the checksum.
//
//===----------------------------------------------------------------------===//

#include "test/vm/format/Harness.h"
#include "test/vm/format/TestExecutables.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

namespace nimble::vm {
namespace {

using namespace test;

//===-- Helpers ------------------------------------------------------------===//

/// Serializes `e` after `mutate` and expects a refusal containing `message`.
void expectRefused(const std::function<void(Executable &)> &mutate, const std::string &message) {
  Executable e = makeSmallExecutable();
  mutate(e);
  Outcome o = tryLoad(serialize(e));
  EXPECT_FALSE(o.ok) << "expected: " << message;
  EXPECT_NE(o.error.find(message), std::string::npos)
      << "expected: " << message << "\n     got: " << o.error;
  // The in-memory verifier says the same.
  std::string err;
  EXPECT_FALSE(verify(e, err));
}

void expectBytesRefused(const std::vector<uint8_t> &b, const std::string &message) {
  Outcome o = tryLoad(b);
  EXPECT_FALSE(o.ok) << "expected: " << message;
  EXPECT_NE(o.error.find(message), std::string::npos)
      << "expected: " << message << "\n     got: " << o.error;
}

std::vector<uint8_t> smallBytes() { return serialize(makeSmallExecutable()); }

TEST(Crafted, SmallExecutableIsValid) { EXPECT_TRUE(tryLoad(smallBytes()).ok); }

TEST(Crafted, Header) {
  std::vector<uint8_t> b = smallBytes();
  std::vector<uint8_t> x = b;
  x[0] = 'X';
  expectBytesRefused(x, "not a Nimble executable (bad magic");
  expectBytesRefused({}, "too small for the 40-byte header");
  expectBytesRefused(std::vector<uint8_t>(b.begin(), b.begin() + 39), "too small");

  x = b;
  put<uint16_t>(x, nbc::kOffMajor, 2);
  put<uint16_t>(x, nbc::kOffMinor, 3);
  expectBytesRefused(x, "this .nbc needs format 2.x; this nimble-run reads 1.x");
  x = b;
  put<uint16_t>(x, nbc::kOffMajor, 0);
  put<uint16_t>(x, nbc::kOffMinor, 0);
  expectBytesRefused(x, "unsupported .nbc version 0.0");

  x = b;
  put<uint32_t>(x, nbc::kOffFlags, 4);
  expectBytesRefused(x, "unknown header flags 0x4");
  x = b;
  put<uint64_t>(x, nbc::kOffFileSize, b.size() + 1);
  expectBytesRefused(x, "the header gives a file size of");
  x = b;
  x.push_back(0);
  expectBytesRefused(x, "truncated or padded");
  x = b;
  x[b.size() - 1] ^= 1;
  expectBytesRefused(x, "checksum mismatch");
  x = b;
  put<uint32_t>(x, 36, 1);
  expectBytesRefused(resealed(x), "reserved header word");
  x = b;
  put<uint32_t>(x, nbc::kOffSectionCount, 65);
  expectBytesRefused(resealed(x), "section count 65 exceeds the limit");
  x = b;
  put<uint32_t>(x, nbc::kOffSectionCount, 5);
  expectBytesRefused(resealed(x), "missing functions section");
}

TEST(Crafted, SectionTable) {
  std::vector<uint8_t> b = smallBytes();
  Layout l;
  std::string err;
  ASSERT_TRUE(walkLayout(b, l, err)) << err;
  const SectionInfo &strings = l.sections[0];
  const SectionInfo &adts = l.sections[1];
  std::vector<uint8_t> x = b;
  put<uint64_t>(x, strings.entryOffset + 8, b.size()); // offset at the end, size > 0
  expectBytesRefused(resealed(x), "is outside the file's section area");
  x = b;
  put<uint64_t>(x, strings.entryOffset + 8, ~uint64_t(0) - 7); // offset + size overflows
  expectBytesRefused(resealed(x), "is outside the file's section area");
  x = b;
  put<uint64_t>(x, strings.entryOffset + 8, 8); // inside the header
  expectBytesRefused(resealed(x), "is outside the file's section area");
  x = b;
  put<uint64_t>(x, strings.entryOffset + 8, strings.offset + 4);
  expectBytesRefused(resealed(x), "is not a multiple of 8");
  x = b;
  put<uint64_t>(x, adts.entryOffset + 8, strings.offset); // adts on top of strings
  put<uint64_t>(x, adts.entryOffset + 16, strings.size);
  expectBytesRefused(resealed(x), "overlap");
  x = b;
  put<uint32_t>(x, adts.entryOffset, 1); // two strings sections
  expectBytesRefused(resealed(x), "duplicate strings section");
  x = b;
  put<uint32_t>(x, adts.entryOffset, 77);
  expectBytesRefused(resealed(x), "unknown section kind 77");
  x = b;
  put<uint32_t>(x, adts.entryOffset + 4, 1);
  expectBytesRefused(resealed(x), "reserved word is not 0");
  // Constants must start on a 64-byte boundary.
  const SectionInfo &constants = l.sections[3];
  ASSERT_EQ(constants.kind, 4u);
  x = b;
  put<uint64_t>(x, constants.entryOffset + 8, constants.offset - 8);
  put<uint64_t>(x, constants.entryOffset + 16, constants.size + 8);
  expectBytesRefused(resealed(x), "is not a multiple of 64");
  // Trailing bytes inside a section.
  x = b;
  put<uint64_t>(x, strings.entryOffset + 16, strings.size + 1);
  expectBytesRefused(resealed(x), "strings section: 1 unread bytes at its end");
}

TEST(Crafted, MinorVersions) {
  std::vector<uint8_t> b = smallBytes();
  // A newer minor of the same major may add sections this reader skips.
  std::vector<uint8_t> newer = withExtraSection(b, 99, {1, 2, 3, 4, 5}, Executable::kMinor + 1);
  ASSERT_FALSE(newer.empty());
  Outcome o = tryLoad(newer);
  EXPECT_TRUE(o.ok) << o.error;
  // In a version this reader knows, an unknown section is damage.
  std::vector<uint8_t> same = withExtraSection(b, 99, {1, 2, 3, 4, 5}, Executable::kMinor);
  expectBytesRefused(same, "unknown section kind 99");
}

TEST(Crafted, ConstantData) {
  std::vector<uint8_t> b = smallBytes();
  Layout l;
  std::string err;
  ASSERT_TRUE(walkLayout(b, l, err)) << err;
  size_t off = l.constantOffsetFields[0];
  std::vector<uint8_t> x = b;
  put<uint64_t>(x, off, get<uint64_t>(b, off) + 4);
  expectBytesRefused(resealed(x), "is not a multiple of 64");
  x = b;
  put<uint64_t>(x, off, b.size() + 64 - b.size() % 64); // past the end
  expectBytesRefused(resealed(x), "lies outside the section's data region");
  x = b;
  put<uint64_t>(x, off, 0); // points at the header
  expectBytesRefused(resealed(x), "lies outside the section's data region");
  x = b;
  put<uint64_t>(x, off + 8, ~uint64_t(0)); // offset + size overflows
  expectBytesRefused(resealed(x), "lies outside the section's data region");
}

TEST(Crafted, ConstantSizeMismatch) {
  expectRefused(
      [](Executable &e) {
        e.constants[0].shape = {2, 3};
      },
      "constant 0 'w': holds 16 bytes but its type needs 6 x 4 = 24");
  expectRefused(
      [](Executable &e) {
        e.constants[0].shape = {1LL << 62, 1LL << 62};
      },
      "constant 0 'w': invalid or overflowing shape");
  expectRefused(
      [](Executable &e) {
        e.constants[0].shape = {1LL << 62, 2};
      },
      "constant 0 'w': invalid or overflowing shape"); // numel fits, bytes do not
  expectRefused([](Executable &e) { e.constants[0].shape = {-4, -1}; }, "invalid dimension -4");
}

TEST(Crafted, Registers) {
  // The example of the message format in the brief.
  expectRefused(
      [](Executable &e) {
        e.functions[0].code[6] = 40; // InvokePacked's first input
        e.functions[0].numRegisters = 17;
      },
      "function 'main', pc 3 (InvokePacked): register 40 out of range (function has 17 "
      "registers)");
  expectRefused([](Executable &e) { e.functions[0].code[1] = 4; },
                "function 'main', pc 0 (LoadConst): register 4 out of range (function has 4 "
                "registers)");
  expectRefused([](Executable &e) { e.functions[0].numRegisters = 0; },
                "0 registers cannot hold its 1 parameters");
  expectRefused([](Executable &e) { e.functions[0].numRegisters = nbc::kMaxRegisters + 1; },
                "registers exceed the limit");
}

TEST(Crafted, Jumps) {
  // If at pc 10: word 12 is `then` (-> 14), word 13 `else` (-> 17).
  expectRefused([](Executable &e) { e.functions[0].code[12] = 1; },
                "function 'main', pc 10 (If): jump target 11 is not the start of an instruction");
  expectRefused([](Executable &e) { e.functions[0].code[13] = uint32_t(-11); },
                "pc 10 (If): jump target -1 is outside the function");
  expectRefused([](Executable &e) { e.functions[0].code[13] = 0x7fffffff; },
                "is outside the function (19 code words)");
  expectRefused([](Executable &e) { e.functions[0].code[12] = 0x80000000u; },
                "is outside the function");
}

TEST(Crafted, Instructions) {
  expectRefused([](Executable &e) { e.functions[0].code[0] = 200; },
                "function 'main', pc 0: unknown opcode 200");
  expectRefused([](Executable &e) { e.functions[0].code[0] |= 0x0100; },
                "pc 0 (LoadConst): reserved bits of word 0 are not zero");
  expectRefused([](Executable &e) { e.functions[0].code[2] = 1; },
                "pc 0 (LoadConst): constant 1 out of range (1 constants)");
  expectRefused([](Executable &e) { e.functions[0].code[4] = 3; },
                "pc 3 (InvokePacked): kernel 3 out of range (1 kernels)");
  expectRefused([](Executable &e) { e.functions[0].code.back() = 2; },
                "pc 17 (Fatal): string 2 out of range (2 strings)");
  // A register list whose count runs past the end of the code.
  expectRefused([](Executable &e) { e.functions[0].code[5] = 0xfffffff0u; },
                "pc 3 (InvokePacked): register list runs past the end of the code");
  expectRefused([](Executable &e) { e.functions[0].code.pop_back(); },
                "pc 17 (Fatal): operand runs past the end of the code");
  expectRefused([](Executable &e) { e.functions[0].code.resize(10); },
                "control falls off the end of the code (the last instruction, InvokePacked,");
  expectRefused(
      [](Executable &e) {
        e.functions[0].code.clear();
        e.functions[0].sourceMap.clear();
      },
      "function 'main': has no code");
}

TEST(Crafted, OperandCodes) {
  auto withInstr = [](std::function<void(Emitter &)> emit) {
    return [emit](Executable &e) {
      VMFunction &f = e.functions[0];
      f.code.clear();
      f.sourceMap.clear();
      Emitter m(f.code);
      emit(m);
      m.begin(Opcode::Ret);
      m.regs({0});
    };
  };
  expectRefused(withInstr([](Emitter &m) {
                  m.begin(Opcode::AllocTensor);
                  m.word(1).word(0).word(0).word(13).shape({2});
                }),
                "pc 0 (AllocTensor): dtype code 13 out of range (13 dtypes)");
  expectRefused(withInstr([](Emitter &m) {
                  m.begin(Opcode::AllocStorage);
                  m.word(1).word(0).word(64).word(2);
                }),
                "pc 0 (AllocStorage): device code 2 out of range (2 devices)");
  expectRefused(withInstr([](Emitter &m) {
                  m.begin(Opcode::AllocStorage);
                  m.word(1).word(0).word(48).word(0);
                }),
                "alignment 48 is not a power of two");
  expectRefused(withInstr([](Emitter &m) {
                  m.begin(Opcode::AllocTensor);
                  m.word(1).word(0).word(0).word(0).shape({2, -1});
                }),
                "static shape has a negative dimension or overflows");
  expectRefused(withInstr([](Emitter &m) {
                  m.begin(Opcode::AllocTensor);
                  m.word(1).word(0).word(0).word(0).shape({1LL << 40, 1LL << 40});
                }),
                "static shape has a negative dimension or overflows");
  expectRefused(withInstr([](Emitter &m) {
                  uint32_t pc = m.begin(Opcode::Switch);
                  m.word(0).word(2).word(3);
                  m.jump(pc);
                  m.word(3);
                  m.jump(pc);
                  m.jump(pc);
                }),
                "two cases for the same tag");
  expectRefused(withInstr([](Emitter &m) {
                  m.begin(Opcode::Invoke);
                  m.word(0).regs({0, 0}).regs({1});
                }),
                "pc 0 (Invoke): argument count of @main: 2 registers, expected 1");
  expectRefused(withInstr([](Emitter &m) {
                  m.begin(Opcode::Invoke);
                  m.word(0).regs({0}).regs({});
                }),
                "destination count of @main: 0 registers, expected 1");
  expectRefused(withInstr([](Emitter &m) {
                  m.begin(Opcode::Invoke);
                  m.word(1).regs({0}).regs({1});
                }),
                "function 1 out of range (1 functions)");
  expectRefused(withInstr([](Emitter &m) {
                  m.begin(Opcode::InvokePacked);
                  m.word(0).regs({0}).regs({1});
                }),
                "pc 0 (InvokePacked): input count of kernel 'add': 1 registers, expected 2");
  expectRefused(withInstr([](Emitter &m) {
                  m.begin(Opcode::InvokeShapeFunc);
                  m.word(0).regs({0, 0}).regs({1, 2});
                }),
                "output count of kernel 'add': 2 registers, expected 1");
  expectRefused(withInstr([](Emitter &m) {
                  m.begin(Opcode::ShapeFunc);
                  m.word(0).regs({0}).regs({1});
                }),
                "pc 0 (ShapeFunc): input count of kernel 'add': 1 registers, expected 2");
  expectRefused(withInstr([](Emitter &m) {
                  m.begin(Opcode::ShapeFunc);
                  m.word(0).regs({0, 0}).regs({});
                }),
                "pc 0 (ShapeFunc): output count of kernel 'add': 0 registers, expected 1");
  expectRefused(
      [](Executable &e) { e.functions[0].resultTypes.push_back(tensorType(DType::I1, {})); },
      "pc 14 (Ret): result count: 1 registers, expected 2");
  expectRefused(withInstr([](Emitter &m) {
                  m.begin(Opcode::ScalarI64);
                  m.word(kNumScalarOps).word(1).word(0).word(0);
                }),
                "pc 0 (ScalarI64): operation 11 is not one of the 11 scalar operations");
  expectRefused(withInstr([](Emitter &m) {
                  m.begin(Opcode::ScalarI64);
                  m.word(0).word(99).word(0).word(0);
                }),
                "pc 0 (ScalarI64): register 99 out of range");
}

// Format 1.7: a call's own member locations. The full executable has two
// (k0's InvokePacked and ShapeFunc); each damage is refused by the reader and
// by the in-memory verifier, with the entry named.
TEST(Crafted, SiteLocs) {
  auto refusedFull = [](const std::function<void(Executable &)> &mutate, const std::string &message) {
    Executable e = makeFullExecutable();
    mutate(e);
    std::string err;
    EXPECT_FALSE(verify(e, err)) << "expected: " << message;
    EXPECT_NE(err.find(message), std::string::npos) << "expected: " << message << "\n     got: " << err;
    Outcome o = tryLoad(serialize(e));
    EXPECT_FALSE(o.ok) << "expected: " << message;
    EXPECT_NE(o.error.find(message), std::string::npos) << "expected: " << message << "\n     got: " << o.error;
  };
  {
    Executable e = makeFullExecutable();
    ASSERT_EQ(e.functions[0].sites.size(), 2u);
    Outcome o = tryLoad(serialize(e));
    EXPECT_TRUE(o.ok) << o.error;
  }
  refusedFull([](Executable &e) { e.functions[0].sites[0].pc += 1; },
              "site-locs entry 0: pc 49 is not the start of an instruction");
  refusedFull([](Executable &e) { e.functions[0].sites[1].pc = 0; },
              "1: pcs are not strictly increasing");
  refusedFull([](Executable &e) { e.functions[0].sites[0].pc = 3; },
              "pc 3 (LoadConsti): site-locs entry 0: not a kernel call");
  refusedFull(
      [](Executable &e) {
        e.functions[0].sites[0].count = 1;
      },
      "site-locs entry 0: 1 member locations for kernel 'fused_matmul_add' of 2 members");
  refusedFull([](Executable &e) { e.functions[0].siteMemberLocs[1].file = 7; },
              "location 1: file string 7 out of range (2 strings)");
  // A line-0 location has no file to check.
  Executable ok = makeFullExecutable();
  ok.functions[0].siteMemberLocs[3].file = 7;
  std::string err;
  EXPECT_TRUE(verify(ok, err)) << err;
  // A range outside the table; two sites may share one.
  refusedFull([](Executable &e) { e.functions[0].sites[1].first = 3; }, "locations [3, +2) outside the table of 4");
  Executable shared = makeFullExecutable();
  shared.functions[0].sites[1].first = 0;
  EXPECT_TRUE(verify(shared, err)) << err;
  Outcome o = tryLoad(serialize(shared));
  EXPECT_TRUE(o.ok) << o.error;
}

TEST(Crafted, SourceMap) {
  expectRefused([](Executable &e) { e.functions[0].sourceMap[1].pc = 4; },
                "function 'main': source map entry 1: pc 4 is not the start of an instruction");
  expectRefused(
      [](Executable &e) { std::swap(e.functions[0].sourceMap[0], e.functions[0].sourceMap[1]); },
      "source map entry 1: pcs are not strictly increasing");
  expectRefused([](Executable &e) { e.functions[0].sourceMap[0].file = 9; },
                "source map entry 0: file string 9 out of range (2 strings)");
  expectRefused([](Executable &e) { e.functions[0].sourceMap[0].pc = 1000; },
                "pc 1000 is not the start of an instruction");
  // A line-0 entry (no location from its pc on) has no file to check.
  Executable e = makeSmallExecutable();
  e.functions[0].sourceMap[1] = {e.functions[0].sourceMap[1].pc, 9, 0, 0};
  std::string err;
  EXPECT_TRUE(verify(e, err)) << err;
  EXPECT_TRUE(tryLoad(serialize(e)).ok);
}

/// The small executable with a batched variant of its kernel and a rows
/// entry for it (format 1.4, docs/VM.md "Batching").
void addBatching(Executable &e) {
  KernelDesc v = e.kernels[0];
  v.name += ".batched";
  e.kernels.push_back(v);
  e.batching.assign(e.kernels.size(), KernelBatching{});
  e.batching[0].mode = KernelBatching::Mode::Rows;
  e.batching[0].batched = 1;
  e.batching[0].shared.assign(e.kernels[0].numInputs, 0);
  e.batching[0].shared.back() = 1;
}

void expectBatchingRefused(const std::function<void(Executable &)> &mutate, const std::string &message) {
  expectRefused(
      [&](Executable &e) {
        addBatching(e);
        mutate(e);
      },
      message);
}

TEST(Crafted, Batching) {
  {
    Executable e = makeSmallExecutable();
    addBatching(e);
    Executable back;
    std::string err;
    ASSERT_TRUE(load(serialize(e), back, err)) << err;
    ASSERT_EQ(back.batching.size(), 2u);
    EXPECT_EQ(back.batching[0].mode, KernelBatching::Mode::Rows);
    EXPECT_EQ(back.batching[0].batched, 1u);
    EXPECT_EQ(back.batching[0].shared, e.batching[0].shared);
    EXPECT_EQ(back.batching[1].mode, KernelBatching::Mode::None);
    EXPECT_EQ(back.minor, Executable::kMinor);
  }
  // No entry batches: no section, and nothing read back.
  {
    Executable e = makeSmallExecutable();
    e.batching.assign(e.kernels.size(), KernelBatching{});
    Executable back;
    std::string err;
    ASSERT_TRUE(load(serialize(e), back, err)) << err;
    EXPECT_TRUE(back.batching.empty());
  }
  expectBatchingRefused([](Executable &e) { e.batching.pop_back(); },
                        "batching section: 1 kernels, the kernels section has 2");
  expectBatchingRefused([](Executable &e) { e.batching[0].mode = static_cast<KernelBatching::Mode>(7); },
                        "batching section: kernel 0 'add': unknown batching mode 7");
  expectBatchingRefused([](Executable &e) { e.batching[0].shared[0] = 2; },
                        "batching section: kernel 0 'add': shared flag of input 0 is 2, not 0 or 1");
  expectBatchingRefused([](Executable &e) { e.batching[1].shared = {1}; },
                        "batching section, kernel 1 'add.batched': shared flags on a kernel that does not batch");
  expectBatchingRefused([](Executable &e) { e.batching[0].shared.pop_back(); },
                        "batching section, kernel 0 'add': 1 shared flags for 2 inputs");
  expectBatchingRefused([](Executable &e) { e.batching[0].batched = 0; },
                        "batching section, kernel 0 'add': batched variant 0 is not another kernel (2 kernels)");
  expectBatchingRefused([](Executable &e) { e.batching[0].batched = 9; },
                        "batching section, kernel 0 'add': batched variant 9 is not another kernel (2 kernels)");
  expectBatchingRefused(
      [](Executable &e) {
        e.batching[1] = e.batching[0];
        e.batching[1].batched = 0;
      },
      "batching section, kernel 0 'add': its batched variant kernel 1 'add.batched' batches too");
  expectBatchingRefused([](Executable &e) { e.kernels[1].inputDTypes[0] = DType::I64; },
                        "its batched variant kernel 1 'add.batched' does not have the kernel's inputs and outputs");
  expectBatchingRefused([](Executable &e) { e.batching[0].shared.assign(2, 1); },
                        "batching section, kernel 0 'add': batches rows but has no per-instance input");
  expectBatchingRefused(
      [](Executable &e) { e.batching[0].mode = KernelBatching::Mode::Invariant; },
      "batching section, kernel 0 'add': an invariant kernel with a per-instance input");
}

// Format 1.10: the batch-phases section (program phases, docs/autobatch.md).
TEST(Crafted, BatchPhases) {
  {
    Executable e = makeSmallExecutable();
    addBatching(e);
    e.batching[0].phase = 3;
    Executable back;
    std::string err;
    ASSERT_TRUE(load(serialize(e), back, err)) << err;
    ASSERT_EQ(back.batching.size(), 2u);
    EXPECT_EQ(back.batching[0].phase, 3u);
    EXPECT_EQ(back.batching[1].phase, 0u);
  }
  expectBatchingRefused([](Executable &e) { e.batching[1].phase = 1; },
                        "batching section, kernel 1 'add.batched': phase 1 on a kernel that does not batch");
  auto u32s = [](std::initializer_list<uint32_t> v) {
    std::vector<uint8_t> b;
    for (uint32_t x : v)
      for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(x >> (8 * i)));
    return b;
  };
  // Phases without a batching section.
  std::vector<uint8_t> lone = withExtraSection(smallBytes(), 12, u32s({1, 0}), Executable::kMinor);
  ASSERT_FALSE(lone.empty());
  expectBytesRefused(lone, "batch-phases section: there is no batching section");
  // A phase per kernel, no more, no less.
  Executable e = makeSmallExecutable();
  addBatching(e);
  std::vector<uint8_t> batching = serialize(e);
  expectBytesRefused(withExtraSection(batching, 12, u32s({1, 0}), Executable::kMinor),
                     "batch-phases section: 1 kernels, the kernels section has 2");
  expectBytesRefused(withExtraSection(batching, 12, u32s({2, 0}), Executable::kMinor), "phase");
  expectBytesRefused(withExtraSection(batching, 12, u32s({2, 0, 0, 0}), Executable::kMinor),
                     "batch-phases section: 4 unread bytes at its end");
  std::vector<uint8_t> ok = withExtraSection(batching, 12, u32s({2, 5, 0}), Executable::kMinor);
  Executable back;
  std::string err;
  ASSERT_TRUE(load(ok, back, err)) << err;
  EXPECT_EQ(back.batching[0].phase, 5u);
}

TEST(Crafted, Kernels) {
  expectRefused(
      [](Executable &e) {
        e.kernels[0].members[0].op = OpCode::MatMul;
        e.kernels[0].members[0].attrs = {Attr::getBool(false), Attr::getInt(1)};
      },
      "kernel 0 'add': member 0: 'matmul': attribute 'transpose_b' is int, the op "
      "wants bool");
  // A Sym goes through the codec and reaches the verifier as a Sym.
  expectRefused(
      [](Executable &e) {
        e.kernels[0].members[0].op = OpCode::Cast;
        e.kernels[0].members[0].operands = {0};
        e.kernels[0].members[0].attrs = {Attr::getSym("f32")};
      },
      "attribute 'dtype' is sym, the op wants dtype");
  expectRefused([](Executable &e) { e.kernels[0].members[0].attrs = {Attr::getInt(1)}; },
                "'add' has 1 attributes, its schema 0");
  expectRefused(
      [](Executable &e) {
        e.kernels[0].members[0].op = OpCode::Softmax;
        e.kernels[0].members[0].operands = {0};
        e.kernels[0].members[0].attrs = {Attr()};
      },
      "null attribute");
  expectRefused([](Executable &e) { e.kernels[0].members[0].op = OpCode::Call; },
                "'call' is a structural op and cannot be a kernel member");
  expectRefused([](Executable &e) { e.kernels[0].members[0].op = static_cast<OpCode>(9999); },
                "kernel 0 'add', member 0: unknown op ''");
  {
    // An op name the table does not know (a file from a newer compiler).
    std::vector<uint8_t> b = smallBytes();
    std::string add = "add";
    auto it = std::search(b.begin() + 40, b.end(), add.begin(), add.end());
    ASSERT_NE(it, b.end());
    // The kernel is also named "add": the second occurrence is the op.
    it = std::search(it + 1, b.end(), add.begin(), add.end());
    ASSERT_NE(it, b.end());
    *it = 'x';
    expectBytesRefused(resealed(b), "kernels section: kernel 0 'add', member 0: unknown op 'xdd'");
  }
  expectRefused(
      [](Executable &e) {
        e.kernels[0].members[0].operands = {0, 2};
      },
      "operand %2 is not an input or an earlier result (2 values so far)");
  expectRefused([](Executable &e) { e.kernels[0].members[0].operands = {0}; },
                "'add' with 1 operands");
  expectRefused([](Executable &e) { e.kernels[0].members[0].numResults = 2; },
                "'add' with 2 results, expected 1");
  expectRefused([](Executable &e) { e.kernels[0].outputs = {3}; }, "output %3 out of range");
  expectRefused([](Executable &e) { e.kernels[0].outputs = {}; }, "kernel 0 'add': no outputs");
  // A kernel without members is valid (its outputs copy inputs), but not one
  // whose output names a member result that is gone.
  expectRefused([](Executable &e) { e.kernels[0].members.clear(); },
                "kernel 0 'add': output %2 out of range (2 values)");
  expectRefused([](Executable &e) { e.kernels[0].upperBound = true; },
                "marked upper-bound but is not a lone unique / nonzero");
  expectRefused([](Executable &e) { e.kernels[0].numInputs = 0xffffffffu; },
                "input count 4294967295 is impossible");
  expectRefused(
      [](Executable &e) {
        e.kernels[0].members.resize(nbc::kMaxKernelMembers + 1, e.kernels[0].members[0]);
      },
      "4097 members exceed the limit of 4096");
  expectRefused(
      [](Executable &e) {
        DenseValue d;
        d.dtype = DType::F32;
        d.shape = {3};
        d.bytes = {1, 2, 3, 4};
        e.kernels[0].members[0] = {OpCode::Constant, {Attr::getDense(d)}, {}, 1};
        e.kernels[0].numInputs = 0;
        e.kernels[0].inputDTypes.clear();
        e.kernels[0].outputs = {0};
      },
      "dense payload of 4 bytes does not match its type");
  expectRefused(
      [](Executable &e) {
        e.kernels[0].members[0] = {OpCode::Split, {Attr::getInt(0), Attr::getInt(3)}, {0}, 2};
      },
      "'split' with 2 results, expected 3");
}

TEST(Crafted, Types) {
  // Nesting deeper than the limit: refused by the reader before recursion
  // gets anywhere near the stack's limits.
  expectRefused(
      [](Executable &e) {
        TypeDesc t = tensorType(DType::F32, {1});
        for (int i = 0; i < 1000; ++i) {
          TypeDesc outer;
          outer.kind = TypeDesc::Kind::Tuple;
          outer.elems.push_back(std::move(t));
          t = std::move(outer);
        }
        e.functions[0].resultTypes[0] = t;
      },
      "function 0 'main', result 0: type nested deeper than 32 levels");
  expectRefused([](Executable &e) { e.functions[0].paramTypes[0] = adtType(0); },
                "adt index 0 out of range (0 adts)");
  expectRefused([](Executable &e) { e.functions[0].paramTypes[0].dims = {-7}; },
                "invalid dimension -7");
  expectRefused([](Executable &e) { e.functions[0].paramTypes[0].dtype = static_cast<DType>(13); },
                "invalid dtype code 13");
  {
    // The file stores one name per parameter, so this only exists in memory.
    Executable e = makeSmallExecutable();
    e.functions[0].paramNames.push_back("extra");
    std::string err;
    EXPECT_FALSE(verify(e, err));
    EXPECT_NE(err.find("2 parameter names for 1 parameters"), std::string::npos) << err;
  }
  expectRefused([](Executable &e) { e.functions.push_back(e.functions[0]); },
                "two functions named 'main'");
  expectRefused([](Executable &e) { e.functions[0].name.clear(); }, "function 0 has no name");
}

TEST(Crafted, DeeplyNestedTypeBytes) {
  // 100000 nested tuple headers written as raw bytes into an ADT field:
  // no writer could produce it, the reader must stop at depth 32.
  Executable e = makeSmallExecutable();
  e.adts.push_back({"Deep", {{"Mk", {tensorType(DType::F32, {})}}}});
  std::vector<uint8_t> b = serialize(e);
  Layout l;
  std::string err;
  ASSERT_TRUE(walkLayout(b, l, err)) << err;
  const SectionInfo &adts = l.sections[1];
  // The ADT section is: count, name, ctor count, ctor name, field count, type.
  std::vector<uint8_t> payload(b.begin() + adts.offset, b.begin() + adts.offset + adts.size - 6);
  for (int i = 0; i < 100000; ++i) {
    payload.push_back(1); // tuple
    for (int k = 0; k < 4; ++k) payload.push_back(k == 0 ? 1 : 0);
  }
  // Splice it in as a replacement adts section, appended as an extra section
  // with kind 2 after turning the original entry into an unknown kind that a
  // newer minor would skip.
  std::vector<uint8_t> x = b;
  put<uint32_t>(x, adts.entryOffset, 50);
  std::vector<uint8_t> spliced = withExtraSection(x, 2, payload, Executable::kMinor + 1);
  ASSERT_FALSE(spliced.empty());
  expectBytesRefused(spliced, "adts section: adt 0 'Deep', constructor 0 'Mk', field 0: type "
                              "nested deeper than 32 levels");
}

TEST(Crafted, Adts) {
  auto withAdts = [](std::vector<AdtDesc> adts) {
    return [adts](Executable &e) { e.adts = adts; };
  };
  // Self-reference with a base case is an ordinary recursive type...
  {
    Executable e = makeSmallExecutable();
    e.adts = {{"List", {{"Nil", {}}, {"Cons", {tensorType(DType::F32, {}), adtType(0)}}}}};
    std::string err;
    EXPECT_TRUE(verify(e, err)) << err;
    EXPECT_TRUE(tryLoad(serialize(e)).ok);
  }
  // ...without one, the type has no finite value.
  expectRefused(withAdts({{"Loop", {{"Mk", {adtType(0)}}}}}), "adt 0 'Loop': has no finite value");
  expectRefused(withAdts({{"A", {{"MkA", {adtType(1)}}}}, {"B", {{"MkB", {adtType(0)}}}}}),
                "adt 0 'A': has no finite value");
  // Through a tuple, too.
  {
    TypeDesc tup;
    tup.kind = TypeDesc::Kind::Tuple;
    tup.elems = {tensorType(DType::F32, {}), adtType(0)};
    expectRefused(withAdts({{"T", {{"Mk", {tup}}}}}), "adt 0 'T': has no finite value");
  }
  expectRefused(withAdts({{"Bad", {{"Mk", {adtType(5)}}}}}),
                "adt 0 'Bad', constructor 0 'Mk', field 0: adt index 5 out of range (1 adts)");
  expectRefused(withAdts({{"Bad", {{"Mk", {adtType(0xffffffffu)}}}}}),
                "adt index 4294967295 out of range");
  expectRefused(withAdts({{"Empty", {}}}), "adt 0 'Empty': no constructors");
}

TEST(Crafted, AdtChainIsLinear) {
  // 20000 ADTs each needing the next, the last one a leaf: inhabited, and
  // checked in linear time (a naive fixpoint would take 20000 passes).
  Executable e = makeSmallExecutable();
  const uint32_t n = 20000;
  for (uint32_t i = 0; i < n; ++i)
    e.adts.push_back({"A" + std::to_string(i),
                      {{"Mk", {i + 1 < n ? adtType(i + 1) : tensorType(DType::F32, {})}}}});
  std::string err;
  EXPECT_TRUE(verify(e, err)) << err;
  e.adts.back().ctors[0].fields[0] = adtType(0); // now a cycle with no way out
  EXPECT_FALSE(verify(e, err));
  EXPECT_NE(err.find("has no finite value"), std::string::npos) << err;
}

} // namespace
} // namespace nimble::vm
