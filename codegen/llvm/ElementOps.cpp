//===- ElementOps.cpp - Element-wise op semantics in LLVM IR -------------===//
//
// The native twin of vm/kernels/Elementwise.cpp and Binary.cpp: the same
// rules, written once for scalars and vectors. Choices that keep native and
// reference results bit-identical where no approximation is involved:
//
//   integer add/sub/mul/neg/abs wrap (plain LLVM arithmetic, no nsw);
//   integer div truncates, INT_MIN / -1 wraps to INT_MIN (computed as 0 - a),
//     a zero divisor branches to the kernel's error exit (the VM then reruns
//     the reference kernel for its message);
//   relu is `x < 0 ? 0 : x` (NaN and -0 pass through);
//   maximum / minimum propagate NaN like numpy;
//   comparisons are ordered except not_equal (NaN != NaN);
//   rsqrt is 1 / sqrt(x) (two correctly rounded operations, as the reference);
//   sqrt is the IEEE instruction; exp, tanh and sigmoid of f32 are inline
//     f32 polynomials, log, erf, gelu and pow of f32 inline polynomials
//     evaluated in f64 (MathApprox.cpp); f64 calls libm per lane, as the
//     reference does, and NVPTX calls libdevice;
//   gelu is 0.5 x erfc(-x / sqrt(2)) (f32 evaluated in f64), the reference's
//     formula;
//   sin .. atanh call libm per lane (sinf / sin, ...), the functions the
//     reference calls, so they agree bit for bit (libdevice's on NVPTX);
//   fmod of floats is `frem` (C's fmod, exact); of integers `srem` with the
//     reference's guards: a zero divisor is the error exit, a -1 divisor
//     gives 0 (INT_MIN srem -1 is undefined in LLVM).
//
//===----------------------------------------------------------------------===//

#include "codegen/llvm/Lowering.h"

#include <llvm/TargetParser/Triple.h>

#include <llvm/IR/Intrinsics.h>

namespace nimble::codegen::lowering {

using llvm::Value;

llvm::Type *elementType(llvm::LLVMContext &c, DType t) {
  switch (t) {
  case DType::F32: return llvm::Type::getFloatTy(c);
  case DType::F64: return llvm::Type::getDoubleTy(c);
  case DType::F16: return llvm::Type::getHalfTy(c);
  case DType::BF16: return llvm::Type::getBFloatTy(c);
  case DType::I1: return llvm::Type::getInt1Ty(c);
  case DType::I8: return llvm::Type::getInt8Ty(c);
  case DType::I32: return llvm::Type::getInt32Ty(c);
  case DType::I64: return llvm::Type::getInt64Ty(c);
  case DType::I16: return llvm::Type::getInt16Ty(c);
  case DType::U8: return llvm::Type::getInt8Ty(c);
  case DType::U16: return llvm::Type::getInt16Ty(c);
  case DType::U32: return llvm::Type::getInt32Ty(c);
  case DType::U64: return llvm::Type::getInt64Ty(c);
  }
  return nullptr;
}

llvm::Type *memoryType(llvm::LLVMContext &c, DType t) {
  return t == DType::I1 ? llvm::Type::getInt8Ty(c) : elementType(c, t);
}

llvm::Type *withLanes(llvm::Type *elem, unsigned lanes) {
  return lanes == 1 ? elem : llvm::FixedVectorType::get(elem, lanes);
}

Value *constLike(Value *like, double v) {
  llvm::Type *t = like->getType();
  llvm::Type *e = t->getScalarType();
  if (e->isFloatingPointTy()) return llvm::ConstantFP::get(t, v);
  return llvm::ConstantInt::get(t, static_cast<uint64_t>(static_cast<int64_t>(v)), true);
}

bool elementOpSupported(OpCode op, DType in, DType out, std::string &reason) {
  auto halfOrBf = [](DType t) { return t == DType::F16 || t == DType::BF16; };
  if (halfOrBf(in) || halfOrBf(out)) {
    reason = "f16/bf16 element types have no native form yet";
    return false;
  }
  switch (op) {
  case OpCode::Neg: case OpCode::Abs: case OpCode::Exp: case OpCode::Log: case OpCode::Sqrt:
  case OpCode::Rsqrt: case OpCode::Tanh: case OpCode::Sigmoid: case OpCode::Relu:
  case OpCode::Gelu: case OpCode::Erf: case OpCode::LogicalNot:
  case OpCode::Sin: case OpCode::Cos: case OpCode::Tan: case OpCode::Asin: case OpCode::Acos:
  case OpCode::Atan: case OpCode::Sinh: case OpCode::Cosh: case OpCode::Asinh: case OpCode::Acosh:
  case OpCode::Atanh: case OpCode::Fmod:
  case OpCode::Add: case OpCode::Sub: case OpCode::Mul: case OpCode::Div: case OpCode::Pow:
  case OpCode::Maximum: case OpCode::Minimum: case OpCode::Equal: case OpCode::NotEqual:
  case OpCode::Less: case OpCode::LessEqual: case OpCode::Greater: case OpCode::GreaterEqual:
  case OpCode::LogicalAnd: case OpCode::LogicalOr: case OpCode::Select: case OpCode::Cast:
    return true;
  default:
    reason = "'" + std::string(opInfo(op).mnemonic) + "' is not element-wise";
    return false;
  }
}

namespace {


// numpy.maximum / minimum with the reference's exact choices: a NaN operand
// is returned itself (the first one if both are), otherwise `a < b ? b : a`
// for maximum and `b < a ? b : a` for minimum, so a tie (-0 and +0) keeps a.
Value *maxMin(llvm::IRBuilder<> &b, bool isMax, Value *x, Value *y, bool isFloat, bool isUns) {
  if (!isFloat) {
    auto lt = [&](Value *p, Value *q) { return isUns ? b.CreateICmpULT(p, q) : b.CreateICmpSLT(p, q); };
    return isMax ? b.CreateSelect(lt(x, y), y, x) : b.CreateSelect(lt(y, x), y, x);
  }
  Value *pick = isMax ? b.CreateSelect(b.CreateFCmpOLT(x, y), y, x)
                      : b.CreateSelect(b.CreateFCmpOLT(y, x), y, x);
  Value *nanPick = b.CreateSelect(isNaN(b, x), x, y);
  return b.CreateSelect(b.CreateOr(isNaN(b, x), isNaN(b, y)), nanPick, pick);
}

} // namespace

Value *isNaN(llvm::IRBuilder<> &b, Value *x) { return b.CreateFCmpUNO(x, x); }

Value *intrinsic(llvm::IRBuilder<> &b, llvm::Intrinsic::ID id, llvm::ArrayRef<Value *> args) {
  return b.CreateIntrinsic(id, {args[0]->getType()}, args);
}

Value *emitLibmCall(llvm::IRBuilder<> &b, const char *f32Name, const char *f64Name,
                    llvm::ArrayRef<Value *> args) {
  llvm::Type *t = args[0]->getType();
  llvm::Type *e = t->getScalarType();
  llvm::Module *m = b.GetInsertBlock()->getModule();
  std::vector<llvm::Type *> params(args.size(), e);
  // Device code cannot call libm: on NVPTX the same function comes from
  // libdevice (__nv_expf, __nv_erf, ...), linked into the module by
  // CudaCodegen.cpp.
  std::string name = e->isDoubleTy() ? f64Name : f32Name;
  if (llvm::Triple(m->getTargetTriple()).isNVPTX()) name = "__nv_" + name;
  llvm::FunctionCallee f = m->getOrInsertFunction(name, llvm::FunctionType::get(e, params, false));
  if (auto *fn = llvm::dyn_cast<llvm::Function>(f.getCallee())) {
    fn->setDoesNotThrow();
    fn->setOnlyAccessesInaccessibleMemory(); // errno only
  }
  auto *vt = llvm::dyn_cast<llvm::FixedVectorType>(t);
  if (!vt) return b.CreateCall(f, args);
  Value *r = llvm::PoisonValue::get(t);
  for (unsigned l = 0; l < vt->getNumElements(); ++l) {
    std::vector<Value *> lane;
    for (Value *a : args) lane.push_back(b.CreateExtractElement(a, l));
    r = b.CreateInsertElement(r, b.CreateCall(f, lane), l);
  }
  return r;
}

Value *emitCast(llvm::IRBuilder<> &b, Value *v, DType from, DType to) {
  if (from == to) return v;
  llvm::Type *vt = v->getType();
  unsigned lanes = vt->isVectorTy() ? llvm::cast<llvm::FixedVectorType>(vt)->getNumElements() : 1;
  llvm::Type *dst = withLanes(elementType(b.getContext(), to), lanes);
  bool fromF = isFloat(from), toF = isFloat(to);
  if (to == DType::I1)
    return fromF ? b.CreateFCmpUNE(v, llvm::ConstantFP::get(vt, 0.0))
                 : b.CreateICmpNE(v, llvm::ConstantInt::get(vt, 0));
  if (from == DType::I1) return toF ? b.CreateUIToFP(v, dst) : b.CreateZExt(v, dst);
  if (fromF && toF) return b.CreateFPCast(v, dst);
  // Integers extend by the source's signedness (then wrap by truncation).
  if (!fromF && !toF) return isUnsigned(from) ? b.CreateZExtOrTrunc(v, dst) : b.CreateSExtOrTrunc(v, dst);
  if (!fromF) return isUnsigned(from) ? b.CreateUIToFP(v, dst) : b.CreateSIToFP(v, dst);
  // Float to integer saturates, NaN to 0 (llvm.fpto[su]i.sat have exactly that).
  return b.CreateIntrinsic(isUnsigned(to) ? llvm::Intrinsic::fptoui_sat : llvm::Intrinsic::fptosi_sat,
                           {dst, vt}, {v});
}

Value *emitElementOp(llvm::IRBuilder<> &b, OpCode op, DType in, DType out,
                     llvm::ArrayRef<Value *> a, const std::vector<Attr> &attrs,
                     llvm::BasicBlock *onError) {
  const bool f = isFloat(in);
  const bool u = isUnsigned(in); // unsigned integers: no sign, unsigned order
  Value *x = a[0];
  // f32 log/erf/gelu/pow inline on CPUs; the device has libdevice.
  const bool inlineF32 =
      in == DType::F32 && !llvm::Triple(b.GetInsertBlock()->getModule()->getTargetTriple()).isNVPTX();
  switch (op) {
  case OpCode::Neg: return f ? b.CreateFNeg(x) : b.CreateSub(constLike(x, 0), x);
  case OpCode::Abs:
    if (f) return intrinsic(b, llvm::Intrinsic::fabs, {x});
    if (u) return x;
    return b.CreateSelect(b.CreateICmpSLT(x, constLike(x, 0)), b.CreateSub(constLike(x, 0), x), x);
  case OpCode::Relu:
    if (u) return x;
    return b.CreateSelect(f ? b.CreateFCmpOLT(x, constLike(x, 0)) : b.CreateICmpSLT(x, constLike(x, 0)),
                          constLike(x, 0), x);
  case OpCode::LogicalNot: return b.CreateNot(x);
  case OpCode::Sqrt: return intrinsic(b, llvm::Intrinsic::sqrt, {x});
  case OpCode::Rsqrt: return b.CreateFDiv(constLike(x, 1), intrinsic(b, llvm::Intrinsic::sqrt, {x}));
  case OpCode::Exp:
    return in == DType::F32 ? emitExp(b, x) : emitLibmCall(b, "expf", "exp", {x});
  case OpCode::Tanh:
    return in == DType::F32 ? emitTanh(b, x) : emitLibmCall(b, "tanhf", "tanh", {x});
  case OpCode::Sigmoid: {
    if (in == DType::F32) return emitSigmoid(b, x);
    // The reference's two branches, neither of which overflows.
    Value *e = emitLibmCall(b, "expf", "exp", {b.CreateFNeg(intrinsic(b, llvm::Intrinsic::fabs, {x}))});
    Value *one = constLike(x, 1);
    return b.CreateSelect(b.CreateFCmpOLT(x, constLike(x, 0)), b.CreateFDiv(e, b.CreateFAdd(one, e)),
                          b.CreateFDiv(one, b.CreateFAdd(one, e)));
  }
  case OpCode::Log: return inlineF32 ? emitLogF32(b, x) : emitLibmCall(b, "logf", "log", {x});
  case OpCode::Erf: return inlineF32 ? emitErfF32(b, x) : emitLibmCall(b, "erff", "erf", {x});
  case OpCode::Sin: return emitLibmCall(b, "sinf", "sin", {x});
  case OpCode::Cos: return emitLibmCall(b, "cosf", "cos", {x});
  case OpCode::Tan: return emitLibmCall(b, "tanf", "tan", {x});
  case OpCode::Asin: return emitLibmCall(b, "asinf", "asin", {x});
  case OpCode::Acos: return emitLibmCall(b, "acosf", "acos", {x});
  case OpCode::Atan: return emitLibmCall(b, "atanf", "atan", {x});
  case OpCode::Sinh: return emitLibmCall(b, "sinhf", "sinh", {x});
  case OpCode::Cosh: return emitLibmCall(b, "coshf", "cosh", {x});
  case OpCode::Asinh: return emitLibmCall(b, "asinhf", "asinh", {x});
  case OpCode::Acosh: return emitLibmCall(b, "acoshf", "acosh", {x});
  case OpCode::Atanh: return emitLibmCall(b, "atanhf", "atanh", {x});
  case OpCode::Gelu: {
    if (inlineF32) return emitGeluF32(b, x);
    // 0.5 * x * erfc(-x / sqrt(2)), in the reference's order (which computes
    // f32 in f64; libdevice's erfcf on the device).
    Value *c = emitLibmCall(b, "erfcf", "erfc", {b.CreateFMul(b.CreateFNeg(x), constLike(x, 0.70710678118654752440))});
    return b.CreateFMul(b.CreateFMul(constLike(x, 0.5), x), c);
  }
  default: break;
  }
  Value *y = a.size() > 1 ? a[1] : nullptr;
  switch (op) {
  case OpCode::Add: return f ? b.CreateFAdd(x, y) : b.CreateAdd(x, y);
  case OpCode::Sub: return f ? b.CreateFSub(x, y) : b.CreateSub(x, y);
  case OpCode::Mul: return f ? b.CreateFMul(x, y) : b.CreateMul(x, y);
  case OpCode::Div: {
    if (f) return b.CreateFDiv(x, y);
    // Any zero lane is an error; -1 divisors wrap (0 - x) instead of trapping.
    Value *zero = b.CreateICmpEQ(y, constLike(y, 0));
    if (zero->getType()->isVectorTy()) zero = b.CreateOrReduce(zero);
    llvm::BasicBlock *ok = llvm::BasicBlock::Create(b.getContext(), "div.ok", b.GetInsertBlock()->getParent());
    b.CreateCondBr(zero, onError, ok);
    b.SetInsertPoint(ok);
    if (u) return b.CreateUDiv(x, y);
    Value *minus1 = b.CreateICmpEQ(y, constLike(y, -1));
    Value *safeY = b.CreateSelect(minus1, constLike(y, 1), y);
    return b.CreateSelect(minus1, b.CreateSub(constLike(x, 0), x), b.CreateSDiv(x, safeY));
  }
  case OpCode::Fmod: {
    if (f) return b.CreateFRem(x, y);
    // The reference's rules: a zero lane is an error, a -1 divisor gives 0.
    Value *zero = b.CreateICmpEQ(y, constLike(y, 0));
    if (zero->getType()->isVectorTy()) zero = b.CreateOrReduce(zero);
    llvm::BasicBlock *ok = llvm::BasicBlock::Create(b.getContext(), "fmod.ok", b.GetInsertBlock()->getParent());
    b.CreateCondBr(zero, onError, ok);
    b.SetInsertPoint(ok);
    if (u) return b.CreateURem(x, y); // unsigned: no -1 divisor
    Value *minus1 = b.CreateICmpEQ(y, constLike(y, -1));
    Value *safeY = b.CreateSelect(minus1, constLike(y, 1), y);
    return b.CreateSelect(minus1, constLike(x, 0), b.CreateSRem(x, safeY));
  }
  case OpCode::Pow: return inlineF32 ? emitPowF32(b, x, y) : emitLibmCall(b, "powf", "pow", {x, y});
  case OpCode::Maximum: return maxMin(b, true, x, y, f, u);
  case OpCode::Minimum: return maxMin(b, false, x, y, f, u);
  case OpCode::Equal: return f ? b.CreateFCmpOEQ(x, y) : b.CreateICmpEQ(x, y);
  case OpCode::NotEqual: return f ? b.CreateFCmpUNE(x, y) : b.CreateICmpNE(x, y);
  case OpCode::Less: return f ? b.CreateFCmpOLT(x, y) : u ? b.CreateICmpULT(x, y) : b.CreateICmpSLT(x, y);
  case OpCode::LessEqual: return f ? b.CreateFCmpOLE(x, y) : u ? b.CreateICmpULE(x, y) : b.CreateICmpSLE(x, y);
  case OpCode::Greater: return f ? b.CreateFCmpOGT(x, y) : u ? b.CreateICmpUGT(x, y) : b.CreateICmpSGT(x, y);
  case OpCode::GreaterEqual: return f ? b.CreateFCmpOGE(x, y) : u ? b.CreateICmpUGE(x, y) : b.CreateICmpSGE(x, y);
  case OpCode::LogicalAnd: return b.CreateAnd(x, y);
  case OpCode::LogicalOr: return b.CreateOr(x, y);
  case OpCode::Select: return b.CreateSelect(x, a[1], a[2]);
  case OpCode::Cast: return emitCast(b, x, in, out);
  default: break;
  }
  (void)attrs;
  return nullptr;
}

} // namespace nimble::codegen::lowering
