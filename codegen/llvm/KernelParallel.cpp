//===- KernelParallel.cpp - Parallel regions and NVPTX hooks --------------===//
//
// KernelLowering's parallel regions (an outer loop split over the VM's
// thread pool through the ABI's ctx, or over the grid on NVPTX) and the NVPTX
// target hooks. The design: KernelGen.cpp.
//
//===----------------------------------------------------------------------===//

#include "codegen/llvm/KernelLowering.h"

namespace nimble::codegen::detail {

using namespace lowering;

//===-- Threads ------------------------------------------------------------===//

// Runs body(begin, end) over a partition of [0, n) on the VM's thread pool.
// The body is emitted into its own function, `<kernel>.<name>(closure,
// begin, end)`, which re-derives what it needs from a closure {bufs, the
// data pointer of every value stored so far, an error flag, the pointers in
// `carry` (which the body sees replaced by their reloaded copies)}: shapes and
// strides are loaded again from the descriptors, so no value of the caller
// is used across the function boundary. The caller calls
// ctx->parallel_for(pool, n, body, closure) when the pool exists and `work`
// (a rough count of inner operations) is at least minWork, and the body
// directly with [0, n) otherwise; an error in any part sets the flag, which
// the caller turns into its own error exit.
// minWork: kParallelWork (2^16) for element-wise and row stages, whose
// points cost a few cycles each; kParallelMatMulWork (2^18 multiply-adds,
// a 1 MiB f32 weight at one row) for matmuls: a region costs about a
// microsecond to start even on spinning threads and splits a product whose
// operands sit in one core's cache, which a one-row product of a few
// microseconds never wins back (Tree-LSTM's 1x300 . (450x300)^T, 2^17, split
// over two threads made a node 13.8 us against 6.0 on one; docs/perf.md).
// From a megabyte of weights on, a split keeps each thread's part in its
// own L2 across the steps of a recurrence: the imported GRU's 1x512 .
// (1536x512)^T (3 MiB, 2^19.6) went from 14.1 to 4.6 ms a 128-token
// sequence at two threads when the threshold came down from 2^20.
// &closure.field[index] of a {ptr, [V x ptr], i32, [C x ptr]} closure.
Value *KernelLowering::closureField(llvm::StructType *ty, Value *closure, unsigned field, size_t index) {
  return b_.CreateInBoundsGEP(ty, closure, {b_.getInt32(0), b_.getInt32(field), b_.getInt32(static_cast<uint32_t>(index))});
}

void KernelLowering::parallel(const char *name, Value *n, Value *work, std::vector<Value *> &carry,
                              const std::function<void(Value *, Value *)> &body, int64_t minWork) {
  if (inParallel_) { // no nesting: a body runs its inner loops itself
    body(i64(0), n);
    return;
  }
  if (gpu_) {
    // A grid-stride loop: thread t of T runs points t, t + T, ... of [0, n),
    // whatever the grid the runtime chose.
    inParallel_ = true;
    Value *stride = gridThreads();
    forLoop(globalThreadId(), n, stride, "gs", [&](Value *iv) { body(iv, b_.CreateAdd(iv, i64(1))); });
    inParallel_ = false;
    return; // emit() puts the barrier after the stage

  }
  llvm::Type *ptr = llvm::PointerType::get(ctx_, 0);
  const size_t V = vals_.size();
  const size_t C = carry.size();
  llvm::StructType *closureTy = llvm::StructType::get(
      ctx_, {ptr, llvm::ArrayType::get(ptr, V), b_.getInt32Ty(), llvm::ArrayType::get(ptr, C)});
  // The closure, in the caller.
  llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  llvm::AllocaInst *closure = eb.CreateAlloca(closureTy);
  b_.CreateStore(bufs_, b_.CreateStructGEP(closureTy, closure, 0));
  for (size_t v = k_.numInputs; v < V; ++v)
    if (data_[v]) b_.CreateStore(data_[v], closureField(closureTy, closure, 1, v));
  for (size_t i = 0; i < C; ++i) b_.CreateStore(carry[i], closureField(closureTy, closure, 3, i));
  Value *errFlag = b_.CreateStructGEP(closureTy, closure, 2);
  b_.CreateStore(b_.getInt32(0), errFlag);

  // The body function.
  auto *bodyTy = llvm::FunctionType::get(b_.getVoidTy(), {ptr, b_.getInt64Ty(), b_.getInt64Ty()}, false);
  llvm::Function *bodyFn = llvm::Function::Create(bodyTy, llvm::GlobalValue::InternalLinkage,
                                                  fn_->getName() + "." + name, mod_);
  bodyFn->addFnAttr(llvm::Attribute::NoUnwind);
  auto savedFn = fn_;
  auto savedBufs = bufs_;
  auto savedErr = errBB_;
  auto savedDims = dims_, savedStrides = strides_;
  auto savedData = data_;
  llvm::IRBuilderBase::InsertPoint savedIP = b_.saveIP();
  fn_ = bodyFn;
  llvm::BasicBlock *entry = llvm::BasicBlock::Create(ctx_, "entry", bodyFn);
  llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx_, "done", bodyFn);
  errBB_ = llvm::BasicBlock::Create(ctx_, "error", bodyFn);
  b_.SetInsertPoint(entry);
  Value *cl = bodyFn->getArg(0);
  bufs_ = b_.CreateLoad(ptr, b_.CreateStructGEP(closureTy, cl, 0), "bufs");
  loadShapes();
  // A reloaded row table is still one (gather fusion).
  for (size_t v = k_.numInputs; v < V; ++v)
    if (savedData[v]) {
      data_[v] = b_.CreateLoad(ptr, closureField(closureTy, cl, 1, v));
      if (isGathered(savedData[v])) markGathered(data_[v]);
    }
  inParallel_ = true;
  std::vector<Value *> savedCarry = carry;
  for (size_t i = 0; i < C; ++i) {
    carry[i] = b_.CreateLoad(ptr, closureField(closureTy, cl, 3, i));
    if (isGathered(savedCarry[i])) markGathered(carry[i]);
  }
  body(bodyFn->getArg(1), bodyFn->getArg(2));
  carry = std::move(savedCarry);
  inParallel_ = false;
  b_.CreateBr(done);
  b_.SetInsertPoint(errBB_);
  b_.CreateStore(b_.getInt32(1), b_.CreateStructGEP(closureTy, cl, 2));
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  b_.CreateRetVoid();
  fn_ = savedFn;
  bufs_ = savedBufs;
  errBB_ = savedErr;
  dims_ = std::move(savedDims);
  strides_ = std::move(savedStrides);
  data_ = std::move(savedData);
  b_.restoreIP(savedIP);

  // The call: through the pool when it pays, else directly.
  Value *kctx = fn_->getArg(2);
  auto *ctxTy = llvm::StructType::get(ctx_, {ptr, ptr, ptr, b_.getInt32Ty(), b_.getInt32Ty()});
  Value *pf = b_.CreateLoad(ptr, b_.CreateStructGEP(ctxTy, kctx, 0));
  Value *pool = b_.CreateLoad(ptr, b_.CreateStructGEP(ctxTy, kctx, 1));
  Value *usePool = b_.CreateAnd(b_.CreateIsNotNull(pf),
                                b_.CreateAnd(b_.CreateICmpSGE(work, i64(minWork)), b_.CreateICmpSGT(n, i64(1))));
  llvm::BasicBlock *viaPool = llvm::BasicBlock::Create(ctx_, "par.pool", fn_);
  llvm::BasicBlock *direct = llvm::BasicBlock::Create(ctx_, "par.direct", fn_);
  llvm::BasicBlock *after = llvm::BasicBlock::Create(ctx_, "par.after", fn_);
  b_.CreateCondBr(usePool, viaPool, direct);
  b_.SetInsertPoint(viaPool);
  auto *pfTy = llvm::FunctionType::get(b_.getVoidTy(), {ptr, b_.getInt64Ty(), ptr, ptr}, false);
  b_.CreateCall(pfTy, pf, {pool, n, bodyFn, closure});
  b_.CreateBr(after);
  b_.SetInsertPoint(direct);
  b_.CreateCall(bodyTy, bodyFn, {closure, i64(0), n});
  b_.CreateBr(after);
  b_.SetInsertPoint(after);
  llvm::BasicBlock *ok = llvm::BasicBlock::Create(ctx_, "par.ok", fn_);
  b_.CreateCondBr(b_.CreateICmpNE(b_.CreateLoad(b_.getInt32Ty(), errFlag), b_.getInt32(0)), errBB_, ok);
  b_.SetInsertPoint(ok);
}

//===-- NVPTX ------------------------------------------------------------===//

Value *KernelLowering::globalThreadId() {
  using namespace llvm;
  return b_.CreateAdd(b_.CreateMul(sreg(Intrinsic::nvvm_read_ptx_sreg_ctaid_x), sreg(Intrinsic::nvvm_read_ptx_sreg_ntid_x)),
                      sreg(Intrinsic::nvvm_read_ptx_sreg_tid_x), "gtid");
}

Value *KernelLowering::gridThreads() {
  using namespace llvm;
  return b_.CreateMul(sreg(Intrinsic::nvvm_read_ptx_sreg_nctaid_x), sreg(Intrinsic::nvvm_read_ptx_sreg_ntid_x), "gthreads");
}

// A temporary every thread of the block shares: thread 0 calls the device
// malloc (a PTX system call, served from the driver's device heap) and
// publishes the pointer in a shared-memory slot; the block waits, then every
// thread reads it. Kernels with temporaries run on one block (lowerKernel).
Value *KernelLowering::deviceTemporary(Value *bytes, llvm::FunctionCallee mallocFn) {
  llvm::Type *ptr = llvm::PointerType::get(ctx_, 0);
  auto *slot = new llvm::GlobalVariable(mod_, ptr, false, llvm::GlobalValue::InternalLinkage,
                                        llvm::PoisonValue::get(ptr), fn_->getName() + ".temp",
                                        nullptr, llvm::GlobalValue::NotThreadLocal, 3);
  Value *isFirst = b_.CreateICmpEQ(sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x), i64(0));
  llvm::BasicBlock *first = llvm::BasicBlock::Create(ctx_, "temp.alloc", fn_);
  llvm::BasicBlock *join = llvm::BasicBlock::Create(ctx_, "temp.shared", fn_);
  b_.CreateCondBr(isFirst, first, join);
  b_.SetInsertPoint(first);
  b_.CreateStore(b_.CreateCall(mallocFn, {bytes}), slot);
  b_.CreateBr(join);
  b_.SetInsertPoint(join);
  barrier();
  return b_.CreateLoad(ptr, slot);
}

} // namespace nimble::codegen::detail
