//===- Harness.cpp - Loading hostile bytes under watch --------------------===//

#include "test/vm/format/Harness.h"

#include "vm/format/Disassembler.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace nimble::vm::test {

namespace {
double gLargestRatio = 0;
} // namespace

/// What the interpreter relies on after a successful load, re-checked here
/// without verify(): the differential check for mutations that survive.
void checkRunnable(const Executable &e, const AlignedBuffer &buf) {
  const uint8_t *begin = buf.data(), *end = begin + buf.size();
  for (const ConstantDesc &c : e.constants) {
    ASSERT_LT(int(c.dtype), kNumDTypes);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(c.data) % 64, 0u);
    ASSERT_TRUE(c.data >= begin && c.size <= uint64_t(end - c.data));
    uint64_t n = dtypeSize(c.dtype);
    for (int64_t d : c.shape) {
      ASSERT_GE(d, 0);
      ASSERT_FALSE(__builtin_mul_overflow(n, uint64_t(d), &n));
    }
    // A splat (format 1.8) holds one element of a shape of more than one.
    ASSERT_EQ(c.splat, ConstantDesc::isSplatForm(c.dtype, c.shape, c.size));
    if (!c.splat) {
      ASSERT_EQ(n, c.size);
    }
  }
  for (const KernelDesc &k : e.kernels) {
    uint64_t values = k.numInputs;
    for (const auto &m : k.members) {
      ASSERT_LT(int(m.op), kNumOpCodes);
      const OpInfo &info = opInfo(m.op);
      ASSERT_NE(info.relation, Relation::Structural);
      ASSERT_EQ(m.attrs.size(), info.attrs.size());
      for (size_t a = 0; a < m.attrs.size(); ++a) ASSERT_EQ(m.attrs[a].kind(), info.attrs[a].kind);
      for (uint32_t v : m.operands) ASSERT_LT(v, values);
      values += m.numResults;
    }
    ASSERT_FALSE(k.outputs.empty());
    for (uint32_t v : k.outputs) ASSERT_LT(v, values);
  }
  for (const VMFunction &f : e.functions) {
    ASSERT_FALSE(f.code.empty());
    ASSERT_GE(f.numRegisters, f.paramTypes.size());
    std::vector<char> start(f.code.size(), 0);
    std::vector<int64_t> targets;
    DecodedInstr in;
    Opcode last = Opcode::Move;
    for (uint32_t pc = 0; pc < f.code.size(); pc += in.size) {
      ASSERT_TRUE(decodeInstr(f.code.data(), f.code.size(), pc, in));
      start[pc] = 1;
      last = in.op;
      for (int i = 0; i < in.numOperands; ++i) {
        switch (in.kind(i)) {
        case 'r': ASSERT_LT(in.word(i), f.numRegisters); break;
        case 'c': ASSERT_LT(in.word(i), e.constants.size()); break;
        case 'k': ASSERT_LT(in.word(i), e.kernels.size()); break;
        case 'f': ASSERT_LT(in.word(i), e.functions.size()); break;
        case 's': ASSERT_LT(in.word(i), e.strings.size()); break;
        case 'd': ASSERT_LT(in.word(i), uint32_t(kNumDTypes)); break;
        case 'v': ASSERT_LT(in.word(i), uint32_t(kNumDevices)); break;
        case 'j': targets.push_back(in.target(i)); break;
        case 'R':
          for (uint32_t r : in.regs(i)) ASSERT_LT(r, f.numRegisters);
          break;
        case 'J': {
          CaseList c = in.cases(i);
          for (uint32_t k = 0; k < c.count; ++k) targets.push_back(c.target(k));
          targets.push_back(c.defaultTarget());
          break;
        }
        default: break;
        }
      }
      if (in.op == Opcode::Invoke) {
        const VMFunction &callee = e.functions[in.word(0)];
        ASSERT_EQ(in.regs(1).count, callee.paramTypes.size());
        ASSERT_EQ(in.regs(2).count, callee.resultTypes.size());
      }
      if (in.op == Opcode::InvokePacked) {
        const KernelDesc &k = e.kernels[in.word(0)];
        ASSERT_EQ(in.regs(1).count, k.numInputs);
        ASSERT_EQ(in.regs(2).count, k.outputs.size() + (k.upperBound ? 1 : 0));
      }
      if (in.op == Opcode::Ret) {
        ASSERT_EQ(in.regs(0).count, f.resultTypes.size());
      }
    }
    ASSERT_TRUE(isTerminator(last));
    for (int64_t t : targets) {
      ASSERT_TRUE(t >= 0 && t < int64_t(f.code.size()));
      ASSERT_TRUE(start[t]);
    }
    for (const SourceLoc &l : f.sourceMap) {
      ASSERT_TRUE(l.pc < f.code.size() && start[l.pc]);
      if (l.line != 0) { // line 0: no location, no file
        ASSERT_LT(l.file, e.strings.size());
      }
    }
    for (const VMFunction::Site &s : f.sites) {
      ASSERT_TRUE(s.pc < f.code.size() && start[s.pc]);
      DecodedInstr in;
      ASSERT_TRUE(decodeInstr(f.code.data(), f.code.size(), s.pc, in, nullptr));
      ASSERT_TRUE(in.op == Opcode::InvokePacked || in.op == Opcode::ShapeFunc || in.op == Opcode::InvokeShapeFunc);
      ASSERT_EQ(s.count, e.kernels[in.word(0)].members.size());
      ASSERT_LE(uint64_t(s.first) + s.count, f.siteMemberLocs.size());
    }
  }
}

Outcome tryLoad(const std::vector<uint8_t> &bytes) {
  auto buf = AlignedBuffer::copyOf(bytes.data(), bytes.size());
  Executable e;
  Outcome o;
  resetLargestAllocation();
  o.ok = deserialize(buf->data(), buf->size(), buf, e, o.error);
  if (allocationsTracked()) {
    // Vectors of decoded records may be a few dozen times larger than their
    // encoding (a 1-byte type becomes a ~80-byte TypeDesc), never more.
    EXPECT_LE(largestAllocation(), 128 * bytes.size() + 4096);
    if (bytes.size() >= 1024)
      gLargestRatio = std::max(gLargestRatio, double(largestAllocation()) / bytes.size());
  }
  if (o.ok) {
    checkRunnable(e, *buf);
    (void)disassemble(e, DisasmOptions{true, true});
  } else {
    EXPECT_FALSE(o.error.empty());
  }
  return o;
}

double largestAllocationRatio() { return gLargestRatio; }

std::vector<uint8_t> resealed(std::vector<uint8_t> b) {
  resealChecksum(b.data(), b.size());
  return b;
}

} // namespace nimble::vm::test
