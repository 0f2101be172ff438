//===- DisassemblerTest.cpp - Golden text of the disassembler --------------===//

#include "vm/format/Disassembler.h"
#include "test/vm/format/TestExecutables.h"

#include <gtest/gtest.h>

namespace nimble::vm {
namespace {

using namespace test;

TEST(Disassembler, SmallExecutableGolden) {
  Executable e = makeSmallExecutable();
  EXPECT_EQ(disassemble(e), R"(; nimble executable, format 1.10

strings:
  s0 = "small.nir"
  s1 = "boom"

constants:
  c0 @w : tensor<2x2xf32>, 16 bytes

kernels:
  k0 "add" (%0, %1) -> (%2)
    %2 = add %0, %1

func @main(%x: tensor<2x2xf32>) -> tensor<2x2xf32> registers=4
  0: LoadConst r1, c0  ; @w
  3: InvokePacked k0 (r0, r1) -> (r2)  ; kernel "add"
  10: If r2, then 14, else 17
  14: Ret (r2)
  17: Fatal s1  ; "boom"
)");
}

TEST(Disassembler, SourceLocationsAndNoTables) {
  Executable e = makeSmallExecutable();
  DisasmOptions o;
  o.sourceLocations = true;
  o.tables = false;
  EXPECT_EQ(disassemble(e, o), R"(; nimble executable, format 1.10

func @main(%x: tensor<2x2xf32>) -> tensor<2x2xf32> registers=4
  0: LoadConst r1, c0  ; @w, small.nir:1:1
  3: InvokePacked k0 (r0, r1) -> (r2)  ; kernel "add", small.nir:2:5
  10: If r2, then 14, else 17  ; small.nir:2:5
  14: Ret (r2)  ; small.nir:2:5
  17: Fatal s1  ; "boom", small.nir:2:5
)");
}

TEST(Disassembler, EveryOpcodeOfTheFullExecutable) {
  Executable e = makeFullExecutable();
  std::string text = disassembleFunction(e, 0);
  for (const char *line : {
           "func @main(%x: tensor<?x4xf32>, %t: @Tree) -> tensor<1x4xf32> registers=21\n",
           "  0: LoadConst r2, c0  ; @w\n",
           "  3: LoadConsti r3, 256\n",
           "  7: LoadConsti r6, -1\n",
           "  11: AllocStorage r4, r3, align 64, cpu\n",
           "  16: AllocTensor r5, r4, r6, f32, [1, 4]\n",
           "  26: ShapeOf r7, r0\n",
           "  29: StorageSize r3, r7, f16, align 64\n",
           "  34: AllocTensorReg r8, r4, r6, f32, r7\n",
           "  40: InvokeShapeFunc k0 (r0, r2, r5) -> (r9)  ; kernel \"fused_matmul_add\"\n",
           "  56: InvokePacked k5 (r0) -> (r17, r18)  ; kernel \"unique\"\n",
           "  63: ReshapeTensor r10, r8, r9\n",
           "  67: DeviceCopy r11, r10, cpu -> cuda\n",
           "  72: AllocADT r12, tag 1, (r11, r10)\n",
           "  78: GetField r13, r12, 0\n",
           "  82: GetTag r14, r1\n",
           "  85: ScalarI64 lt r19, r3, r6\n",
           "  90: ShapeFunc k0 (r0, r2, r5) -> (r20)  ; kernel \"fused_matmul_add\"\n",
           "  98: Move r15, r13\n",
           "  101: Invoke f1 (r15) -> (r16)  ; @helper\n",
           "  107: If r14, then 111, else 119\n",
           "  111: Switch r1, [0: 119, 1: 121], default 128\n",
           "  119: Goto 121\n",
           "  121: FreeTensor r8\n",
           "  123: FreeStorage r4\n",
           "  125: Ret (r16)\n",
           "  128: Fatal s1  ; \"index out of range\"\n",
       })
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "in:\n" << text;
}

TEST(Disassembler, Tables) {
  std::string text = disassemble(makeFullExecutable());
  for (const char *line : {
           "  type @Tree = Leaf(tensor<1x4xf32>) | Node(@Tree, @Tree)\n",
           "  type @List = Nil | Cons(tensor<?xi64>, @List)\n",
           "  type @Pair = MkPair(tuple<tensor<f32>, @Tree>, storage)\n",
           "  c1 : tensor<i64>, 8 bytes\n",
           "  c2 @empty : tensor<0x3xf16>, 0 bytes\n",
           "  k0 \"fused_matmul_add\" (%0, %1, %2) -> (%4)\n",
           "    %3 = matmul %0, %1, transpose_b=true\n",
           "    %1 = cast %0, dtype=f16\n",
           "    %2 = softmax %1\n", // default axis left out
           "    %4 = transpose %3, perm=[1, 0]\n",
           "    %1 = device_copy %0, src=\"cpu\", dst=\"cuda\"\n",
           "    %0 = constant value=dense<tensor<2x2xf32>: [1.0, 2.5, -3.0, 4.0]>\n",
           "    %1 = constant value=dense<tensor<3xi32>: splat 7>\n",
           "  k5 \"unique\" (%0) -> (%1) upper_bound\n",
           "    %1, %2 = split %0, axis=1, sections=2\n",
           "    %3 = layer_norm %0, %1, %2, eps=-0.0\n",
       })
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "in:\n" << text;
}

TEST(Disassembler, OneInstructionForTheTracer) {
  Executable e = makeSmallExecutable();
  uint32_t size = 0;
  EXPECT_EQ(disassembleInstr(e, e.functions[0], 3, false, &size),
            "InvokePacked k0 (r0, r1) -> (r2)  ; kernel \"add\"");
  EXPECT_EQ(size, 7u);
  EXPECT_EQ(disassembleInstr(e, e.functions[0], 3, true),
            "InvokePacked k0 (r0, r1) -> (r2)  ; kernel \"add\", small.nir:2:5");
}

// With locations, a call that has its own member locations (site-locs)
// lists them; an unknown one is '?'.
TEST(Disassembler, CallSiteMemberLocations) {
  Executable e = makeFullExecutable();
  const VMFunction &f = e.functions[0];
  ASSERT_EQ(f.sites.size(), 2u);
  EXPECT_EQ(disassembleInstr(e, f, f.sites[0].pc, true),
            "InvokePacked k0 (r0, r2, r5) -> (r8)  ; kernel \"fused_matmul_add\", model.nir:5:7, members at "
            "model.nir:11:3 model.nir:12:5");
  EXPECT_EQ(disassembleInstr(e, f, f.sites[1].pc, true),
            "ShapeFunc k0 (r0, r2, r5) -> (r20)  ; kernel \"fused_matmul_add\", model.nir:5:7, members at "
            "model.nir:13:3 ?");
  // Without locations, none.
  EXPECT_EQ(disassembleInstr(e, f, f.sites[0].pc, false),
            "InvokePacked k0 (r0, r2, r5) -> (r8)  ; kernel \"fused_matmul_add\"");
}

TEST(Disassembler, UnverifiedCodeDoesNotCrash) {
  Executable e = makeSmallExecutable();
  VMFunction &f = e.functions[0];
  f.code[4] = 99;          // kernel index out of range: no annotation
  f.code.push_back(0xff);  // unknown opcode after the last instruction
  f.name = "bad\x1b name"; // escaped, quoted
  std::string text = disassembleFunction(e, 0);
  EXPECT_NE(text.find("func @\"bad\\x1b name\"("), std::string::npos) << text;
  EXPECT_NE(text.find("  3: InvokePacked k99 (r0, r1) -> (r2)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  19: <invalid: unknown opcode 255>\n"), std::string::npos) << text;
  uint32_t size = 1;
  EXPECT_EQ(disassembleInstr(e, f, 1000, false, &size),
            "<invalid: instruction starts past the end of the code>");
  EXPECT_EQ(size, 0u);
}

TEST(Disassembler, Types) {
  Executable e = makeFullExecutable();
  EXPECT_EQ(typeToString(e, tensorType(DType::BF16, {kDynamic, 3, kDynamic})),
            "tensor<?x3x?xbf16>");
  EXPECT_EQ(typeToString(e, adtType(1)), "@List");
  EXPECT_EQ(typeToString(e, adtType(7)), "@<adt 7>");
  EXPECT_EQ(functionHeader(e, e.functions[1]),
            "func @helper(%a: tensor<1x4xf32>) -> tensor<1x4xf32> registers=2");
  VMFunction f;
  f.name = "multi";
  f.paramTypes = {tensorType(DType::I1, {})};
  f.paramNames = {""};
  f.resultTypes = {};
  EXPECT_EQ(functionHeader(e, f), "func @multi(%0: tensor<i1>) -> () registers=0");
}

} // namespace
} // namespace nimble::vm
