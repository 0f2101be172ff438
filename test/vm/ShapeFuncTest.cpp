//===- ShapeFuncTest.cpp - The two shape-function instructions ------------===//
//
// ShapeFunc (format 1.6, what nimblec emits) makes each output shape a new
// 1-D i64 tensor in its destination register; InvokeShapeFunc (what files of
// format 1.0 to 1.5 hold) writes them into tensors allocated beforehand, and
// keeps running for those files. A hand-built executable runs both on the
// same kernel and inputs: they must agree and give new tensors (not an
// input); shapes the kernel refuses fail at the instruction's location; and
// InvokeShapeFunc refuses a buffer of the wrong length.
//
//===----------------------------------------------------------------------===//

#include "vm/format/Bytecode.h"
#include "vm/format/Format.h"
#include "vm/interpreter/Interpreter.h"
#include "test/vm/format/TestExecutables.h"

#include <gtest/gtest.h>

#include <memory>

namespace nimble::vm {
namespace {

using test::tensorType;

/// @main(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>) -> (shape, shape): the
/// output shape of kernel "add"(%a, %b), by ShapeFunc and by InvokeShapeFunc
/// (into a buffer of `bufLen` i64s).
std::shared_ptr<const Executable> makeExecutable(int64_t bufLen = 2) {
  auto e = std::make_shared<Executable>();
  KernelDesc k;
  k.name = "add";
  k.numInputs = 2;
  KernelDesc::Member add;
  add.op = OpCode::Add;
  add.operands = {0, 1};
  add.numResults = 1;
  k.members = {add};
  k.outputs = {2};
  k.inputDTypes = {DType::F32, DType::F32};
  e->kernels = {k};
  VMFunction f;
  f.name = "main";
  f.paramNames = {"a", "b"};
  f.paramTypes = {tensorType(DType::F32, {-1, 4}), tensorType(DType::F32, {-1, 4})};
  f.resultTypes = {tensorType(DType::I64, {2}), tensorType(DType::I64, {2})};
  f.numRegisters = 9;
  e->strings = {"sf.nir"};
  Emitter m(f.code);
  m.begin(Opcode::ShapeOf);
  m.word(2).word(0);
  m.begin(Opcode::ShapeOf);
  m.word(3).word(1);
  f.sourceMap.push_back({m.begin(Opcode::ShapeFunc), 0, 3, 5});
  m.word(0).regs({2, 3}).regs({4});
  m.begin(Opcode::LoadConsti);
  m.word(5).word(64).word(0);
  m.begin(Opcode::AllocStorage);
  m.word(6).word(5).word(64).word(0);
  m.begin(Opcode::LoadConsti);
  m.word(7).word(0).word(0);
  m.begin(Opcode::AllocTensor);
  m.word(8).word(6).word(7).word(uint32_t(DType::I64)).word(1);
  m.word(static_cast<uint32_t>(bufLen)).word(0);
  f.sourceMap.push_back({m.begin(Opcode::InvokeShapeFunc), 0, 8, 5});
  m.word(0).regs({2, 3}).regs({8});
  m.begin(Opcode::Ret);
  m.regs({4, 8});
  e->functions = {std::move(f)};
  return e;
}

ObjectRef input(int64_t rows) {
  TensorRef t = makeTensor(DType::F32, {rows, 4});
  return ObjectRef(t.get());
}

/// Verifies `exe` and runs @main on `a` and `b` with the reference kernels.
Status runMain(const std::shared_ptr<const Executable> &exe, ObjectRef a, ObjectRef b,
               std::vector<ObjectRef> &results) {
  std::string error;
  if (!verify(*exe, error)) return Status::error("verify: " + error);
  VMOptions opts;
  opts.kernels = KernelMode::Reference;
  VirtualMachine vm(exe, opts);
  return vm.run("main", {std::move(a), std::move(b)}, results);
}

TEST(ShapeFunc, BothInstructionsGiveTheShape) {
  ObjectRef a = input(3), b = input(3);
  std::vector<ObjectRef> results;
  Status st = runMain(makeExecutable(), a, b, results);
  ASSERT_TRUE(st.ok()) << st.message;
  ASSERT_EQ(results.size(), 2u);
  for (const ObjectRef &r : results) {
    const Tensor *t = asTensor(r.get());
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype(), DType::I64);
    ASSERT_EQ(t->shape(), (std::vector<int64_t>{2}));
    EXPECT_EQ(t->data<int64_t>()[0], 3);
    EXPECT_EQ(t->data<int64_t>()[1], 4);
  }
  EXPECT_NE(results[0].get(), results[1].get());
  EXPECT_NE(results[0].get(), a.get());
}

TEST(ShapeFunc, BothInstructionsRefuseMismatchedShapes) {
  std::vector<ObjectRef> results;
  Status st = runMain(makeExecutable(), input(3), input(2), results);
  ASSERT_FALSE(st.ok());
  // ShapeFunc, the first, fails; the message is the add's shape function's.
  EXPECT_EQ(st.message.rfind("sf.nir:3:5: error: ", 0), 0u) << st.message;
  EXPECT_NE(st.message.find("add"), std::string::npos) << st.message;
}

TEST(ShapeFunc, InvokeShapeFuncChecksTheBufferItWrites) {
  std::vector<ObjectRef> results;
  Status st = runMain(makeExecutable(/*bufLen=*/3), input(3), input(3), results);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message.rfind("sf.nir:8:5: error: shape function output 0 of 'add' must be a 1-D i64 "
                             "tensor of length 2, got tensor<3xi64>", 0),
            0u)
      << st.message;
}

// A shape input longer than any rank the IR has is refused before the shape
// function runs (nbc-fuzzer: a hostile program's shape of 250 million
// entries reached the add's broadcast error, which formats every one).
TEST(ShapeFunc, ShapeInputsLongerThanTheRankLimitAreRefused) {
  std::shared_ptr<const Executable> exe = makeExecutable();
  for (int64_t rank : {int64_t(64), int64_t(65)}) {
    TensorRef a = makeTensor(DType::I64, {rank}), b = makeTensor(DType::I64, {rank});
    for (int64_t i = 0; i < rank; ++i) a->data<int64_t>()[i] = b->data<int64_t>()[i] = 1;
    std::vector<std::vector<int64_t>> shapes;
    Status st = computeShapes(exe->kernels[0], {a.get(), b.get()}, shapes, nullptr);
    if (rank == 64) {
      ASSERT_TRUE(st.ok()) << st.message;
      ASSERT_EQ(shapes.size(), 1u);
      EXPECT_EQ(shapes[0], std::vector<int64_t>(64, 1));
    } else {
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.message, "shape function input 0 of 'add' has 65 dimensions, more than the limit of 64");
    }
  }
}

} // namespace
} // namespace nimble::vm
