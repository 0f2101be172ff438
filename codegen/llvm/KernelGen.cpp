//===- KernelGen.cpp - One fused kernel to one LLVM function --------------===//
//
// Symbolic code generation (Nimble paper §3.4, seed 000): a primitive function
// (a fused group or a single op) becomes one function of the vm/KernelABI.h
// ABI. The design, in TVM's compute-inline style:
//
// * Stages. The values that live in memory are the kernel's inputs, its
//   outputs, and the results of reductions (sum, mean, max, min, argmax,
//   matmul, softmax, layer_norm) that other members read. Every other member
//   is computed in registers, inline, at the point where it is needed: one
//   loop nest per stored value, over that value's shape, with no intermediate
//   buffers for element-wise, broadcast or injective members.
// * Points and lanes. emitValue(v, index, lanes) computes member v at an
//   index whose innermost component may advance with the vector lane (each
//   index component is `base + coeff * lane`). Injective members (transpose,
//   split, slice, expand_dims, squeeze, broadcast, dynamic_slice) rewrite the
//   index; reshape, concat and take, whose lane structure is irregular,
//   compute their lanes one by one. A load whose lane step is 0 is a scalar
//   load and a splat, 1 a vector load, anything else a gather.
// * Symbolic shapes. Static dimensions are constants (LLVM folds and unrolls
//   them); each `?` is read from the buffer descriptors, which the VM fills
//   with the shapes its shape functions computed for every value of the kernel
//   (inputs, each member result, outputs). The shape logic therefore exists
//   once (ir/ShapeFns), shared by the compiler, the VM and these kernels.
// * Residue dispatch (§3.4, Fig. 3). The innermost loop of a vectorized stage
//   runs n - n % VF points VF at a time; the remaining n % VF points are
//   dispatched by a switch on the run-time residue to variants with a constant
//   trip count (no bounds checks, fully unrolled by LLVM). With a static n
//   the switch folds to the one variant that can run.
// * Reductions whose innermost reduced axis is contiguous (a row sum, matmul
//   with transpose_b, the LSTM's x · Wᵀ) compute one output point at a time
//   and vectorize the reduction itself (vector accumulators, a horizontal
//   reduction at the end, a scalar tail); the others vectorize over output
//   points and keep a vector of accumulators.
// * Errors (integer division by zero, an index out of range, max of nothing)
//   branch to one exit that returns 1: the VM then runs the reference kernel,
//   which reports the exact message at the member's .nir location.
//
//===----------------------------------------------------------------------===//

#include "codegen/llvm/KernelGen.h"

#include "codegen/llvm/Lowering.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <functional>
#include <unordered_map>

namespace nimble::codegen {

using namespace lowering;
using llvm::Value;

namespace {

bool isReductionLike(OpCode op) {
  switch (op) {
  case OpCode::Sum: case OpCode::Mean: case OpCode::Max: case OpCode::Min: case OpCode::ArgMax:
  case OpCode::MatMul: case OpCode::BatchMatMul: case OpCode::Softmax: case OpCode::LayerNorm:
    return true;
  default: return false;
  }
}

int64_t normAxis(int64_t a, int64_t rank) { return a < 0 ? a + rank : a; }

/// One index component: base + coeff * lane (both i64).
struct Ix {
  Value *base;
  Value *coeff;
};

struct ValueInfo {
  DType dtype = DType::F32;
  std::vector<int64_t> dims; // kDynamic for `?`
  int member = -1;           // defining member, -1 for inputs
  unsigned result = 0;
  unsigned uses = 0;
  int singleUser = -1; // the member using it when uses == 1
};

class KernelLowering {
public:
  KernelLowering(llvm::Module &mod, const vm::KernelDesc &k, const ir::Function &f,
                 const KernelTarget &target)
      : mod_(mod), ctx_(mod.getContext()), b_(ctx_), k_(k), f_(f),
        vf_(target.gpu() ? 1 : target.vectorWidth), gpu_(target.gpu()) {}
  /// One loop nest per stage, and whether a temporary is needed (NVPTX: a
  /// kernel of one stage without temporaries may run on many blocks).
  unsigned stages() const { return stages_; }
  bool hasTemporaries() const { return !temps_.empty(); }

  bool analyze(std::string &reason);
  llvm::Function *emit(const std::string &symbol);

private:
  using Index = std::vector<Ix>;

  // --- setup
  Value *i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }
  Value *bufField(unsigned buf, unsigned field);
  void loadShapes();
  Value *dim(uint32_t v, size_t d) { return dims_[v][d]; }
  Value *numElements(uint32_t v);
  // --- threads
  void parallel(const char *name, Value *n, Value *work, std::vector<Value *> &carry,
                const std::function<void(Value *, Value *)> &body);
  Value *closureField(llvm::StructType *ty, Value *closure, unsigned field, size_t index);
  // --- NVPTX: thread ids and barriers (target hooks, docs/codegen.md "CUDA")
  Value *sreg(llvm::Intrinsic::ID id) { return b_.CreateZExt(b_.CreateIntrinsic(id, {}, {}), b_.getInt64Ty()); }
  Value *globalThreadId();
  Value *gridThreads();
  void barrier() { b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {}); }
  Value *deviceTemporary(Value *bytes, llvm::FunctionCallee mallocFn);
  // --- loops
  void forLoop(Value *begin, Value *end, Value *step, const char *name,
               const std::function<void(Value *)> &body);
  std::vector<Value *> forLoopCarried(Value *begin, Value *end, Value *step,
                                      std::vector<Value *> init, const char *name,
                                      const std::function<std::vector<Value *>(Value *, const std::vector<Value *> &)> &body);
  // --- memory
  Value *offsetOf(uint32_t v, const Index &idx, Value *&laneStep);
  Value *load(uint32_t v, const Index &idx, unsigned lanes);
  void store(uint32_t v, Value *ptr, const Index &idx, Value *val, unsigned lanes);
  // --- values
  Value *emitValue(uint32_t v, const Index &idx, unsigned lanes);
  Value *scalarized(uint32_t v, const Index &idx, unsigned lanes);
  Value *emitMember(uint32_t v, const vm::KernelDesc::Member &m, const Index &idx, unsigned lanes);
  Index broadcastIndex(uint32_t operand, uint32_t consumer, const Index &idx);
  Value *emitReduce(uint32_t v, const vm::KernelDesc::Member &m, const Index &idx, unsigned lanes);
  Value *emitMatMul(uint32_t v, const vm::KernelDesc::Member &m, const Index &idx, unsigned lanes);
  /// `cond ? 0 : v`, kept a constant when v is the constant 0 (a lane step
  /// must stay recognisably 0 or 1 for load() to use a splat or vector load).
  Value *selectZero(Value *cond, Value *v) {
    if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(v); c && c->isZero()) return v;
    return b_.CreateSelect(cond, i64(0), v);
  }
  Value *splat(Value *s, unsigned lanes) { return lanes == 1 ? s : b_.CreateVectorSplat(lanes, s); }
  Value *laneIota(unsigned lanes);
  // --- stages
  void emitStage(uint32_t v, const std::vector<Value *> &dests);
  void emitRowStage(uint32_t v, Value *dest); // softmax, layer_norm
  bool emitMatMulStage(uint32_t v, Value *dest); // float matmul tiles
  void emitVectorRow(const vm::KernelDesc::Member &m, uint32_t x, uint32_t v, Value *dest,
                     Index idx, int64_t axis);
  unsigned stageLanes(uint32_t v);
  bool prefersScalarPoints(uint32_t v);

  llvm::Module &mod_;
  llvm::LLVMContext &ctx_;
  llvm::IRBuilder<> b_;
  const vm::KernelDesc &k_;
  const ir::Function &f_;
  unsigned vf_;
  bool gpu_;
  unsigned stages_ = 0;
  llvm::Function *fn_ = nullptr;
  llvm::StructType *bufTy_ = nullptr;
  Value *bufs_ = nullptr;
  llvm::BasicBlock *errBB_ = nullptr;
  std::vector<ValueInfo> vals_;
  std::vector<bool> materialize_;
  std::vector<std::vector<Value *>> dims_, strides_;
  std::vector<Value *> data_; // memory of a stored value, null until computed
  bool speculating_ = false;
  bool inParallel_ = false; // emitting the body of a parallel() region
  std::vector<std::pair<Value *, Value *>> assumptions_; // dims assumed equal
  std::vector<llvm::AllocaInst *> temps_; // allocas holding malloc'd temporaries
};

//===-- Analysis -----------------------------------------------------------===//

bool KernelLowering::analyze(std::string &reason) {
  if (k_.upperBound) {
    reason = "upper-bound kernels (unique, nonzero) return their true shape: reference only";
    return false;
  }
  const ir::Block *body = f_.entry();
  for (unsigned i = 0; i < body->numArguments(); ++i) {
    ir::Type t = body->argument(i)->type();
    if (!t.isTensor()) {
      reason = "a non-tensor input";
      return false;
    }
    vals_.push_back({t.dtype(), t.dims()});
  }
  size_t mi = 0;
  for (const ir::Operation &op : *body) {
    if (op.is(OpCode::Ret)) break;
    if (mi >= k_.members.size() || k_.members[mi].op != op.code()) {
      reason = "the kernel table does not match the IR";
      return false;
    }
    for (unsigned r = 0; r < op.numResults(); ++r) {
      ir::Type t = op.result(r)->type();
      if (!t.isTensor()) {
        reason = "a non-tensor value";
        return false;
      }
      ValueInfo vi{t.dtype(), t.dims()};
      vi.member = static_cast<int>(mi);
      vi.result = r;
      vals_.push_back(vi);
    }
    ++mi;
  }
  if (mi != k_.members.size()) {
    reason = "the kernel table does not match the IR";
    return false;
  }
  for (const ValueInfo &vi : vals_)
    if (vi.dtype == DType::F16 || vi.dtype == DType::BF16) {
      reason = "f16/bf16 values have no native form yet";
      return false;
    }
  for (size_t m = 0; m < k_.members.size(); ++m) {
    const auto &mem = k_.members[m];
    for (uint32_t o : mem.operands) {
      ++vals_[o].uses;
      vals_[o].singleUser = static_cast<int>(m);
    }
    switch (mem.op) {
    case OpCode::Unique: case OpCode::Nonzero: case OpCode::DeviceCopy: case OpCode::Constant:
      reason = "'" + std::string(opInfo(mem.op).mnemonic) + "' has no native form";
      return false;
    case OpCode::Sum: case OpCode::Mean: case OpCode::Max: case OpCode::Min: case OpCode::ArgMax:
    case OpCode::MatMul: case OpCode::BatchMatMul: case OpCode::Softmax: case OpCode::LayerNorm:
    case OpCode::Reshape: case OpCode::DynReshape: case OpCode::Transpose: case OpCode::Concat:
    case OpCode::Split: case OpCode::Slice: case OpCode::DynamicSlice: case OpCode::Take:
    case OpCode::ExpandDims: case OpCode::Squeeze: case OpCode::BroadcastTo: case OpCode::Zeros:
    case OpCode::Full: case OpCode::Arange: case OpCode::ShapeOf: case OpCode::Dim:
      break;
    default: {
      DType in = vals_[mem.operands.empty() ? 0 : mem.operands.back()].dtype;
      if (mem.op == OpCode::Select) in = vals_[mem.operands[1]].dtype;
      if (!elementOpSupported(mem.op, in, in, reason)) return false;
    }
    }
  }
  for (uint32_t o : k_.outputs) ++vals_[o].uses;
  materialize_.assign(vals_.size(), false);
  for (size_t v = k_.numInputs; v < vals_.size(); ++v) {
    const ValueInfo &vi = vals_[v];
    OpCode op = k_.members[static_cast<size_t>(vi.member)].op;
    if (!isReductionLike(op)) continue;
    bool usedByMember = false;
    for (const auto &mem : k_.members)
      for (uint32_t o : mem.operands) usedByMember |= o == v;
    if (!usedByMember) continue;
    // An integer matmul read once by an element-wise epilogue of its own
    // shape stays inline; float matmuls are stored by the register-blocked
    // tile loops (emitMatMulStage) and their epilogue reads them back.
    bool epilogue = (op == OpCode::MatMul || op == OpCode::BatchMatMul) && !isFloat(vi.dtype) &&
                    vi.uses == 1 &&
                    vi.singleUser >= 0 &&
                    (opInfo(k_.members[vi.singleUser].op).fusion == FusionPattern::ElemWise ||
                     opInfo(k_.members[vi.singleUser].op).fusion == FusionPattern::Broadcast);
    if (epilogue) {
      // the user's result must have the matmul's shape, or the dot products
      // would be recomputed per broadcast point.
      for (size_t u = k_.numInputs; u < vals_.size(); ++u)
        if (vals_[u].member == vi.singleUser) epilogue &= vals_[u].dims == vi.dims;
    }
    materialize_[v] = !epilogue || op == OpCode::Softmax || op == OpCode::LayerNorm;
  }
  return true;
}

//===-- Buffers and shapes -------------------------------------------------===//

Value *KernelLowering::bufField(unsigned buf, unsigned field) {
  Value *p = b_.CreateConstInBoundsGEP2_32(bufTy_, bufs_, buf, field);
  return b_.CreateLoad(bufTy_->getElementType(field), p);
}

// Descriptors: one per value (KernelDesc numbering), then one per output.
void KernelLowering::loadShapes() {
  dims_.assign(vals_.size(), {});
  strides_.assign(vals_.size(), {});
  data_.assign(vals_.size(), nullptr);
  for (uint32_t v = 0; v < vals_.size(); ++v) {
    const auto &d = vals_[v].dims;
    Value *shape = nullptr;
    for (size_t i = 0; i < d.size(); ++i) {
      if (d[i] != kDynamic) {
        dims_[v].push_back(i64(d[i]));
        continue;
      }
      if (!shape) shape = bufField(v, 1);
      Value *p = b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), shape, i);
      dims_[v].push_back(b_.CreateLoad(b_.getInt64Ty(), p, "dim"));
    }
    strides_[v].assign(d.size(), nullptr);
    Value *s = i64(1);
    for (size_t i = d.size(); i-- > 0;) {
      strides_[v][i] = s;
      s = b_.CreateMul(s, dims_[v][i]);
    }
    if (v < k_.numInputs) data_[v] = bufField(v, 0);
  }
}

Value *KernelLowering::numElements(uint32_t v) {
  Value *n = i64(1);
  for (Value *d : dims_[v]) n = b_.CreateMul(n, d);
  return n;
}

//===-- Loops --------------------------------------------------------------===//

void KernelLowering::forLoop(Value *begin, Value *end, Value *step, const char *name,
                             const std::function<void(Value *)> &body) {
  forLoopCarried(begin, end, step, {}, name, [&](Value *iv, const std::vector<Value *> &) {
    body(iv);
    return std::vector<Value *>{};
  });
}

std::vector<Value *> KernelLowering::forLoopCarried(
    Value *begin, Value *end, Value *step, std::vector<Value *> init, const char *name,
    const std::function<std::vector<Value *>(Value *, const std::vector<Value *> &)> &body) {
  llvm::BasicBlock *pre = b_.GetInsertBlock();
  llvm::BasicBlock *head = llvm::BasicBlock::Create(ctx_, std::string(name) + ".head", fn_);
  llvm::BasicBlock *bodyBB = llvm::BasicBlock::Create(ctx_, std::string(name) + ".body", fn_);
  llvm::BasicBlock *exit = llvm::BasicBlock::Create(ctx_, std::string(name) + ".exit", fn_);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  llvm::PHINode *iv = b_.CreatePHI(b_.getInt64Ty(), 2, name);
  iv->addIncoming(begin, pre);
  std::vector<llvm::PHINode *> phis;
  std::vector<Value *> carried;
  for (Value *v : init) {
    llvm::PHINode *p = b_.CreatePHI(v->getType(), 2);
    p->addIncoming(v, pre);
    phis.push_back(p);
    carried.push_back(p);
  }
  b_.CreateCondBr(b_.CreateICmpSLT(iv, end), bodyBB, exit);
  b_.SetInsertPoint(bodyBB);
  std::vector<Value *> next = body(iv, carried);
  Value *ivNext = b_.CreateAdd(iv, step);
  llvm::BasicBlock *latch = b_.GetInsertBlock();
  b_.CreateBr(head);
  iv->addIncoming(ivNext, latch);
  for (size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(next[i], latch);
  b_.SetInsertPoint(exit);
  return carried;
}

//===-- Threads ------------------------------------------------------------===//

// Runs body(begin, end) over a partition of [0, n) on the VM's thread pool.
// The body is emitted into its own function, `<kernel>.<name>(closure,
// begin, end)`, which re-derives what it needs from a closure {bufs, the
// data pointer of every value stored so far, an error flag, the pointers in
// `carry` (which the body sees replaced by their reloaded copies)}: shapes and
// strides are loaded again from the descriptors, so no value of the caller
// is used across the function boundary. The caller calls
// ctx->parallel_for(pool, n, body, closure) when the pool exists and `work`
// (a rough count of inner operations) is at least kParallelWork, and the body
// directly with [0, n) otherwise; an error in any part sets the flag, which
// the caller turns into its own error exit.
// &closure.field[index] of a {ptr, [V x ptr], i32, [C x ptr]} closure.
Value *KernelLowering::closureField(llvm::StructType *ty, Value *closure, unsigned field, size_t index) {
  return b_.CreateInBoundsGEP(ty, closure, {b_.getInt32(0), b_.getInt32(field), b_.getInt32(static_cast<uint32_t>(index))});
}

void KernelLowering::parallel(const char *name, Value *n, Value *work, std::vector<Value *> &carry,
                              const std::function<void(Value *, Value *)> &body) {
  constexpr int64_t kParallelWork = 1 << 16;
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
  for (size_t v = k_.numInputs; v < V; ++v)
    if (savedData[v]) data_[v] = b_.CreateLoad(ptr, closureField(closureTy, cl, 1, v));
  inParallel_ = true;
  std::vector<Value *> savedCarry = carry;
  for (size_t i = 0; i < C; ++i) carry[i] = b_.CreateLoad(ptr, closureField(closureTy, cl, 3, i));
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
                                b_.CreateAnd(b_.CreateICmpSGE(work, i64(kParallelWork)), b_.CreateICmpSGT(n, i64(1))));
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

//===-- Memory -------------------------------------------------------------===//

Value *KernelLowering::offsetOf(uint32_t v, const Index &idx, Value *&laneStep) {
  Value *off = i64(0);
  laneStep = i64(0);
  for (size_t d = 0; d < idx.size(); ++d) {
    off = b_.CreateAdd(off, b_.CreateMul(idx[d].base, strides_[v][d]));
    if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(idx[d].coeff); c && c->isZero()) continue;
    laneStep = b_.CreateAdd(laneStep, b_.CreateMul(idx[d].coeff, strides_[v][d]));
  }
  return off;
}

Value *KernelLowering::laneIota(unsigned lanes) {
  std::vector<llvm::Constant *> c;
  for (unsigned l = 0; l < lanes; ++l) c.push_back(b_.getInt64(l));
  return llvm::ConstantVector::get(c);
}

Value *KernelLowering::load(uint32_t v, const Index &idx, unsigned lanes) {
  DType dt = vals_[v].dtype;
  llvm::Type *mt = memoryType(ctx_, dt);
  Value *step;
  Value *off = offsetOf(v, idx, step);
  Value *base = data_[v];
  auto fromMemory = [&](Value *x) {
    return dt == DType::I1 ? b_.CreateICmpNE(x, llvm::Constant::getNullValue(x->getType())) : x;
  };
  if (lanes == 1) return fromMemory(b_.CreateLoad(mt, b_.CreateInBoundsGEP(mt, base, off)));
  auto *cs = llvm::dyn_cast<llvm::ConstantInt>(step);
  if (cs && cs->isZero())
    return splat(fromMemory(b_.CreateLoad(mt, b_.CreateInBoundsGEP(mt, base, off))), lanes);
  if (cs && cs->isOne()) {
    llvm::Type *vt = withLanes(mt, lanes);
    return fromMemory(b_.CreateAlignedLoad(vt, b_.CreateInBoundsGEP(mt, base, off),
                                           llvm::Align(mt->getPrimitiveSizeInBits() / 8)));
  }
  Value *offs = b_.CreateAdd(splat(off, lanes), b_.CreateMul(splat(step, lanes), laneIota(lanes)));
  Value *ptrs = b_.CreateInBoundsGEP(mt, base, offs);
  return fromMemory(b_.CreateMaskedGather(withLanes(mt, lanes), ptrs,
                                          llvm::Align(mt->getPrimitiveSizeInBits() / 8)));
}

// Stores `val` at idx of a buffer laid out like value v (innermost coeff is
// 1 when lanes > 1: stages only vectorize their own innermost dimension).
void KernelLowering::store(uint32_t v, Value *ptr, const Index &idx, Value *val, unsigned lanes) {
  DType dt = vals_[v].dtype;
  llvm::Type *mt = memoryType(ctx_, dt);
  Value *step;
  Value *off = offsetOf(v, idx, step);
  if (dt == DType::I1) val = b_.CreateZExt(val, withLanes(mt, lanes));
  b_.CreateAlignedStore(val, b_.CreateInBoundsGEP(mt, ptr, off),
                        llvm::Align(mt->getPrimitiveSizeInBits() / 8));
}

//===-- Values -------------------------------------------------------------===//

// The index of `operand` when `consumer` (of rank idx.size()) reads it with
// numpy broadcasting. A `?` operand dimension broadcasts when it is 1 at run
// time; along the vectorized axis that would turn vector loads into gathers,
// so in the speculative version of a loop (emitStage) it is assumed equal to
// the consumer's dimension and the assumption is recorded as a condition the
// loop is guarded by.
KernelLowering::Index KernelLowering::broadcastIndex(uint32_t operand, uint32_t consumer,
                                                     const Index &idx) {
  const auto &od = vals_[operand].dims;
  size_t r = od.size(), R = idx.size();
  Index out(r);
  for (size_t j = 0; j < r; ++j) {
    const Ix &ix = idx[j + R - r];
    auto *cc = llvm::dyn_cast<llvm::ConstantInt>(ix.coeff);
    if (od[j] == 1) {
      out[j] = {i64(0), i64(0)};
    } else if (od[j] != kDynamic) {
      out[j] = ix;
    } else if (speculating_ && !(cc && cc->isZero())) {
      out[j] = ix;
      assumptions_.push_back({dims_[operand][j], dims_[consumer][j + R - r]});
    } else { // a `?` of size 1 broadcasts at run time
      Value *one = b_.CreateICmpEQ(dims_[operand][j], i64(1));
      out[j] = {b_.CreateSelect(one, i64(0), ix.base), selectZero(one, ix.coeff)};
    }
  }
  return out;
}

Value *KernelLowering::scalarized(uint32_t v, const Index &idx, unsigned lanes) {
  llvm::Type *et = elementType(ctx_, vals_[v].dtype);
  Value *r = llvm::PoisonValue::get(withLanes(et, lanes));
  for (unsigned l = 0; l < lanes; ++l) {
    Index li;
    for (const Ix &ix : idx) li.push_back({b_.CreateAdd(ix.base, b_.CreateMul(ix.coeff, i64(l))), i64(0)});
    r = b_.CreateInsertElement(r, emitValue(v, li, 1), l);
  }
  return r;
}

Value *KernelLowering::emitValue(uint32_t v, const Index &idx, unsigned lanes) {
  if (data_[v]) return load(v, idx, lanes);
  const ValueInfo &vi = vals_[v];
  const auto &m = k_.members[static_cast<size_t>(vi.member)];
  return emitMember(v, m, idx, lanes);
}

Value *KernelLowering::emitMember(uint32_t v, const vm::KernelDesc::Member &m, const Index &idx,
                                  unsigned lanes) {
  const ValueInfo &vi = vals_[v];
  auto attr = [&](const char *name) -> const Attr & {
    const OpInfo &info = opInfo(m.op);
    for (size_t i = 0; i < info.attrs.size(); ++i)
      if (info.attrs[i].name == name) return m.attrs[i];
    static Attr none;
    return none;
  };
  const size_t R = idx.size();
  switch (m.op) {
  case OpCode::Sum: case OpCode::Mean: case OpCode::Max: case OpCode::Min: case OpCode::ArgMax:
    return emitReduce(v, m, idx, lanes);
  case OpCode::MatMul: case OpCode::BatchMatMul: return emitMatMul(v, m, idx, lanes);
  case OpCode::Split: {
    uint32_t x = m.operands[0];
    int64_t axis = normAxis(attr("axis").getInt(), static_cast<int64_t>(R));
    Index xi = idx;
    xi[axis].base = b_.CreateAdd(xi[axis].base, b_.CreateMul(i64(vi.result), dims_[v][axis]));
    return emitValue(x, xi, lanes);
  }
  case OpCode::Slice: {
    uint32_t x = m.operands[0];
    Index xi = idx;
    const auto &axes = attr("axes").getInts();
    const auto &starts = attr("starts").getInts();
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = normAxis(axes[i], static_cast<int64_t>(R));
      Value *d = dims_[x][a];
      Value *s = i64(starts[i]);
      if (starts[i] < 0) s = b_.CreateAdd(s, d);
      // numpy clamps starts to [0, dim].
      s = b_.CreateSelect(b_.CreateICmpSLT(s, i64(0)), i64(0), s);
      s = b_.CreateSelect(b_.CreateICmpSGT(s, d), d, s);
      xi[a].base = b_.CreateAdd(xi[a].base, s);
    }
    return emitValue(x, xi, lanes);
  }
  case OpCode::DynamicSlice: {
    uint32_t x = m.operands[0];
    int64_t axis = normAxis(attr("axis").getInt(), static_cast<int64_t>(R));
    Value *start = emitCast(b_, emitValue(m.operands[1], Index(vals_[m.operands[1]].dims.size(), {i64(0), i64(0)}), 1),
                            vals_[m.operands[1]].dtype, DType::I64);
    Value *hi = b_.CreateSub(dims_[x][axis], i64(attr("size").getInt()));
    Value *bad = b_.CreateOr(b_.CreateICmpSLT(start, i64(0)), b_.CreateICmpSGT(start, hi));
    llvm::BasicBlock *ok = llvm::BasicBlock::Create(ctx_, "dslice.ok", fn_);
    b_.CreateCondBr(bad, errBB_, ok);
    b_.SetInsertPoint(ok);
    Index xi = idx;
    xi[axis].base = b_.CreateAdd(xi[axis].base, start);
    return emitValue(x, xi, lanes);
  }
  case OpCode::Transpose: {
    uint32_t x = m.operands[0];
    std::vector<int64_t> perm = attr("perm").getInts();
    if (perm.empty())
      for (size_t i = 0; i < R; ++i) perm.push_back(static_cast<int64_t>(R - 1 - i));
    Index xi(R);
    for (size_t d = 0; d < R; ++d) xi[normAxis(perm[d], R)] = idx[d];
    return emitValue(x, xi, lanes);
  }
  case OpCode::ExpandDims: {
    int64_t axis = normAxis(attr("axis").getInt(), static_cast<int64_t>(R));
    Index xi;
    for (size_t d = 0; d < R; ++d)
      if (static_cast<int64_t>(d) != axis) xi.push_back(idx[d]);
    return emitValue(m.operands[0], xi, lanes);
  }
  case OpCode::Squeeze: {
    uint32_t x = m.operands[0];
    const auto &xd = vals_[x].dims;
    std::vector<bool> squeezed(xd.size(), false);
    const auto &axes = attr("axes").getInts();
    if (axes.empty()) {
      for (size_t d = 0; d < xd.size(); ++d) squeezed[d] = xd[d] == 1;
    } else {
      for (int64_t a : axes) squeezed[normAxis(a, static_cast<int64_t>(xd.size()))] = true;
    }
    Index xi;
    size_t j = 0;
    for (size_t d = 0; d < xd.size(); ++d) xi.push_back(squeezed[d] ? Ix{i64(0), i64(0)} : idx[j++]);
    return emitValue(x, xi, lanes);
  }
  case OpCode::BroadcastTo: return emitValue(m.operands[0], broadcastIndex(m.operands[0], v, idx), lanes);
  case OpCode::Reshape: case OpCode::DynReshape: {
    if (lanes > 1) return scalarized(v, idx, lanes);
    uint32_t x = m.operands[0];
    Value *flat = i64(0);
    for (size_t d = 0; d < R; ++d) flat = b_.CreateAdd(flat, b_.CreateMul(idx[d].base, strides_[v][d]));
    Index xi(vals_[x].dims.size());
    for (size_t d = 0; d < xi.size(); ++d) {
      xi[d] = {b_.CreateURem(b_.CreateUDiv(flat, strides_[x][d]), dims_[x][d]), i64(0)};
    }
    return emitValue(x, xi, 1);
  }
  case OpCode::Concat: {
    if (lanes > 1) return scalarized(v, idx, lanes);
    int64_t axis = normAxis(attr("axis").getInt(), static_cast<int64_t>(R));
    // A chain of blocks: the first operand whose extent covers the index.
    llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx_, "concat.done", fn_);
    std::vector<std::pair<Value *, llvm::BasicBlock *>> incoming;
    Value *pos = idx[axis].base;
    for (size_t i = 0; i < m.operands.size(); ++i) {
      uint32_t x = m.operands[i];
      Value *ext = dims_[x][axis];
      llvm::BasicBlock *here = llvm::BasicBlock::Create(ctx_, "concat.in", fn_);
      llvm::BasicBlock *next = llvm::BasicBlock::Create(ctx_, "concat.next", fn_);
      b_.CreateCondBr(b_.CreateICmpSLT(pos, ext), here, next);
      b_.SetInsertPoint(here);
      Index xi = idx;
      xi[axis].base = pos;
      Value *val = emitValue(x, xi, 1);
      incoming.push_back({val, b_.GetInsertBlock()});
      b_.CreateBr(done);
      b_.SetInsertPoint(next);
      pos = b_.CreateSub(pos, ext);
    }
    b_.CreateBr(errBB_); // unreachable for a checked shape
    b_.SetInsertPoint(done);
    llvm::PHINode *phi = b_.CreatePHI(elementType(ctx_, vi.dtype), static_cast<unsigned>(incoming.size()));
    for (auto &[val, bb] : incoming) phi->addIncoming(val, bb);
    return phi;
  }
  case OpCode::Take: {
    if (lanes > 1) return scalarized(v, idx, lanes);
    uint32_t x = m.operands[0], ind = m.operands[1];
    int64_t xr = static_cast<int64_t>(vals_[x].dims.size());
    int64_t axis = normAxis(attr("axis").getInt(), xr);
    size_t ir = vals_[ind].dims.size();
    Index ii(idx.begin() + axis, idx.begin() + axis + static_cast<int64_t>(ir));
    Value *i = emitCast(b_, emitValue(ind, ii, 1), vals_[ind].dtype, DType::I64);
    Value *n = dims_[x][axis];
    i = b_.CreateSelect(b_.CreateICmpSLT(i, i64(0)), b_.CreateAdd(i, n), i);
    Value *bad = b_.CreateOr(b_.CreateICmpSLT(i, i64(0)), b_.CreateICmpSGE(i, n));
    llvm::BasicBlock *ok = llvm::BasicBlock::Create(ctx_, "take.ok", fn_);
    b_.CreateCondBr(bad, errBB_, ok);
    b_.SetInsertPoint(ok);
    Index xi;
    for (int64_t d = 0; d < axis; ++d) xi.push_back(idx[d]);
    xi.push_back({i, i64(0)});
    for (size_t d = static_cast<size_t>(axis) + ir; d < R; ++d) xi.push_back(idx[d]);
    return emitValue(x, xi, 1);
  }
  case OpCode::Zeros: return splat(llvm::Constant::getNullValue(elementType(ctx_, vi.dtype)), lanes);
  case OpCode::Full: {
    uint32_t s = m.operands[1];
    Value *val = emitValue(s, Index(vals_[s].dims.size(), {i64(0), i64(0)}), 1);
    return splat(emitCast(b_, val, vals_[s].dtype, vi.dtype), lanes);
  }
  case OpCode::Arange: {
    auto scalar = [&](uint32_t o) {
      return emitCast(b_, emitValue(o, Index(vals_[o].dims.size(), {i64(0), i64(0)}), 1), vals_[o].dtype, vi.dtype);
    };
    Value *start = scalar(m.operands[0]), *step = scalar(m.operands[2]);
    Value *i = b_.CreateAdd(splat(idx[0].base, lanes),
                            lanes == 1 ? b_.CreateMul(idx[0].coeff, i64(0)) : b_.CreateMul(splat(idx[0].coeff, lanes), laneIota(lanes)));
    Value *iv = emitCast(b_, i, DType::I64, vi.dtype);
    return isFloat(vi.dtype) ? b_.CreateFAdd(splat(start, lanes), b_.CreateFMul(iv, splat(step, lanes)))
                             : b_.CreateAdd(splat(start, lanes), b_.CreateMul(iv, splat(step, lanes)));
  }
  case OpCode::Dim: {
    uint32_t x = m.operands[0];
    int64_t axis = normAxis(attr("axis").getInt(), static_cast<int64_t>(vals_[x].dims.size()));
    return splat(emitCast(b_, dims_[x][axis], DType::I64, vi.dtype), lanes);
  }
  case OpCode::ShapeOf: {
    uint32_t x = m.operands[0];
    if (lanes > 1) return scalarized(v, idx, lanes);
    // The index selects the axis: a small switch over the rank.
    Value *r = i64(0);
    for (size_t d = 0; d < dims_[x].size(); ++d)
      r = b_.CreateSelect(b_.CreateICmpEQ(idx[0].base, i64(static_cast<int64_t>(d))), dims_[x][d], r);
    return r;
  }
  default: break;
  }
  // Element-wise: every operand broadcast to this value's index.
  std::vector<Value *> args;
  for (uint32_t o : m.operands) args.push_back(emitValue(o, broadcastIndex(o, v, idx), lanes));
  DType in = vals_[m.operands[0]].dtype;
  if (m.op == OpCode::Select) in = vals_[m.operands[1]].dtype;
  return emitElementOp(b_, m.op, in, vi.dtype, args, m.attrs, errBB_);
}

//===-- Reductions -----------------------------------------------------------===//

Value *KernelLowering::emitReduce(uint32_t v, const vm::KernelDesc::Member &m, const Index &idx,
                                  unsigned lanes) {
  const ValueInfo &vi = vals_[v];
  uint32_t x = m.operands[0];
  const size_t Rx = vals_[x].dims.size();
  const OpInfo &info = opInfo(m.op);
  std::vector<bool> reduced(Rx, false);
  bool keep = false;
  for (size_t i = 0; i < info.attrs.size(); ++i) {
    if (info.attrs[i].name == "keepdims") keep = m.attrs[i].getBool();
    if (info.attrs[i].name == "axes") {
      const auto &axes = m.attrs[i].getInts();
      if (axes.empty()) reduced.assign(Rx, true);
      for (int64_t a : axes) reduced[normAxis(a, static_cast<int64_t>(Rx))] = true;
    }
    if (info.attrs[i].name == "axis" && Rx > 0) reduced[normAxis(m.attrs[i].getInt(), static_cast<int64_t>(Rx))] = true;
  }
  const bool isArg = m.op == OpCode::ArgMax;
  const DType dt = vals_[x].dtype;
  const bool fl = isFloat(dt);
  std::vector<size_t> axes;
  Index xi(Rx);
  for (size_t d = 0, o = 0; d < Rx; ++d) {
    if (reduced[d]) {
      axes.push_back(d);
      if (keep) ++o;
    } else {
      xi[d] = idx[o++];
    }
  }
  Value *count = i64(1);
  for (size_t a : axes) count = b_.CreateMul(count, dims_[x][a]);
  if (m.op == OpCode::Max || m.op == OpCode::Min || isArg) {
    llvm::BasicBlock *ok = llvm::BasicBlock::Create(ctx_, "nonempty", fn_);
    b_.CreateCondBr(b_.CreateICmpEQ(count, i64(0)), errBB_, ok);
    b_.SetInsertPoint(ok);
  }
  llvm::Type *et = elementType(ctx_, dt);
  // Sums and means of f32 accumulate in double, like the reference (no
  // overflow of intermediate sums; one rounding at the end).
  const bool wideSum = dt == DType::F32 && (m.op == OpCode::Sum || m.op == OpCode::Mean);
  llvm::Type *accTy = wideSum ? b_.getDoubleTy() : et;
  // Combine (acc, x) -> acc with the reference's rules.
  auto better = [&](Value *xv, Value *acc) -> Value * {
    bool mx = m.op != OpCode::Min;
    if (!fl) return mx ? b_.CreateICmpSGT(xv, acc) : b_.CreateICmpSLT(xv, acc);
    Value *c = mx ? b_.CreateFCmpOGT(xv, acc) : b_.CreateFCmpOLT(xv, acc);
    // The first NaN wins and then stays.
    return b_.CreateAnd(b_.CreateNot(b_.CreateFCmpUNO(acc, acc)), b_.CreateOr(c, b_.CreateFCmpUNO(xv, xv)));
  };
  auto initFor = [&](unsigned ln) -> Value * {
    if (m.op == OpCode::Sum || m.op == OpCode::Mean) return llvm::Constant::getNullValue(withLanes(accTy, ln));
    bool mx = m.op != OpCode::Min;
    Value *s = fl ? static_cast<Value *>(llvm::ConstantFP::getInfinity(et, mx))
                  : static_cast<Value *>(mx ? llvm::ConstantInt::get(et, llvm::APInt::getSignedMinValue(et->getIntegerBitWidth()))
                                            : llvm::ConstantInt::get(et, llvm::APInt::getSignedMaxValue(et->getIntegerBitWidth())));
    return splat(s, ln);
  };
  // Vectorize the innermost reduced axis when it is the contiguous one and
  // this point is computed alone.
  const bool vecInner = lanes == 1 && !isArg && !axes.empty() && axes.back() == Rx - 1 && vf_ > 1 &&
                        dt != DType::I1;
  std::vector<Value *> acc = {initFor(lanes)};
  if (isArg) acc.push_back(splat(i64(0), lanes));
  std::function<std::vector<Value *>(size_t, std::vector<Value *>)> nest =
      [&](size_t level, std::vector<Value *> in) -> std::vector<Value *> {
    size_t a = axes[level];
    bool last = level + 1 == axes.size();
    auto step = [&](Value *iv, const std::vector<Value *> &cur, unsigned ln) -> std::vector<Value *> {
      // Lanes run along the reduced axis only in the vectorized inner
      // reduction; otherwise they run along the output's innermost axis and
      // every lane reads the same reduced index.
      xi[a] = {iv, i64(vecInner && ln > 1 ? 1 : 0)};
      if (!last) return nest(level + 1, cur);
      Value *xv = emitValue(x, xi, ln);
      if (wideSum) xv = b_.CreateFPExt(xv, withLanes(accTy, ln));
      if (m.op == OpCode::Sum || m.op == OpCode::Mean)
        return {fl ? b_.CreateFAdd(cur[0], xv) : b_.CreateAdd(cur[0], xv)};
      Value *bt = better(xv, cur[0]);
      std::vector<Value *> r = {b_.CreateSelect(bt, xv, cur[0])};
      if (isArg) r.push_back(b_.CreateSelect(bt, splat(iv, ln), cur[1]));
      return r;
    };
    if (!(last && vecInner))
      return forLoopCarried(i64(0), dims_[x][a], i64(1), in, "red",
                            [&](Value *iv, const std::vector<Value *> &cur) { return step(iv, cur, lanes); });
    // Vector body over n - n % VF, horizontal reduction, scalar tail.
    Value *n = dims_[x][a];
    Value *nMain = b_.CreateSub(n, b_.CreateSRem(n, i64(vf_)));
    std::vector<Value *> vacc = forLoopCarried(i64(0), nMain, i64(vf_), {initFor(vf_)}, "redv",
                                               [&](Value *iv, const std::vector<Value *> &cur) { return step(iv, cur, vf_); });
    Value *h;
    if (m.op == OpCode::Sum || m.op == OpCode::Mean) {
      if (fl) {
        llvm::FastMathFlags fmf;
        fmf.setAllowReassoc();
        h = b_.CreateFAddReduce(llvm::ConstantFP::get(accTy, 0.0), vacc[0]);
        llvm::cast<llvm::Instruction>(h)->setFastMathFlags(fmf);
        h = b_.CreateFAdd(in[0], h);
      } else {
        h = b_.CreateAdd(in[0], b_.CreateAddReduce(vacc[0]));
      }
    } else {
      // Lane by lane with the scalar rule (keeps NaN and tie behaviour).
      h = in[0];
      for (unsigned l = 0; l < vf_; ++l) {
        Value *xv = b_.CreateExtractElement(vacc[0], l);
        h = b_.CreateSelect(better(xv, h), xv, h);
      }
    }
    return forLoopCarried(nMain, n, i64(1), {h}, "redt",
                          [&](Value *iv, const std::vector<Value *> &cur) { return step(iv, cur, 1); });
  };
  if (axes.empty()) return emitCast(b_, emitValue(x, xi, lanes), dt, vi.dtype);
  std::vector<Value *> r = nest(0, acc);
  if (isArg) return r[1];
  Value *res = r[0];
  if (m.op == OpCode::Mean) res = b_.CreateFDiv(res, splat(b_.CreateSIToFP(count, accTy), lanes));
  return wideSum ? b_.CreateFPTrunc(res, withLanes(et, lanes)) : res;
}

Value *KernelLowering::emitMatMul(uint32_t v, const vm::KernelDesc::Member &m, const Index &idx,
                                  unsigned lanes) {
  uint32_t a = m.operands[0], bb = m.operands[1];
  bool ta = m.attrs[0].getBool(), tb = m.attrs[1].getBool();
  const size_t R = idx.size();
  const DType dt = vals_[v].dtype;
  const bool fl = isFloat(dt);
  // Batch dimensions broadcast like element-wise operands.
  Index batch(idx.begin(), idx.end() - 2);
  auto operandIndex = [&](uint32_t o, Ix row, Ix col, bool t) {
    Index bi;
    const auto &od = vals_[o].dims;
    for (size_t d = 0; d + 2 < R; ++d) {
      if (od[d] == 1) bi.push_back({i64(0), i64(0)});
      else if (od[d] != kDynamic) bi.push_back(batch[d]);
      else {
        Value *one = b_.CreateICmpEQ(dims_[o][d], i64(1));
        bi.push_back({b_.CreateSelect(one, i64(0), batch[d].base), selectZero(one, batch[d].coeff)});
      }
    }
    if (t) std::swap(row, col);
    bi.push_back(row);
    bi.push_back(col);
    return bi;
  };
  Value *K = ta ? dims_[a][R - 2] : dims_[a][R - 1];
  const Ix i = idx[R - 2], j = idx[R - 1];
  auto step = [&](Value *kv, Value *acc, unsigned ln, bool kLanes) {
    Ix k = {kv, i64(kLanes ? 1 : 0)};
    Value *x = emitValue(a, operandIndex(a, i, k, ta), ln);
    Value *y = emitValue(bb, operandIndex(bb, k, j, tb), ln);
    return fl ? b_.CreateFAdd(acc, b_.CreateFMul(x, y)) : b_.CreateAdd(acc, b_.CreateMul(x, y));
  };
  llvm::Type *et = elementType(ctx_, dt);
  Value *zero = llvm::Constant::getNullValue(et);
  if (lanes == 1 && !ta && vf_ > 1) {
    // One output point; the contracted axis is contiguous in lhs (and in rhs
    // when tb): vector accumulators over k, then a horizontal sum.
    Value *kMain = b_.CreateSub(K, b_.CreateSRem(K, i64(vf_)));
    std::vector<Value *> vacc = forLoopCarried(i64(0), kMain, i64(vf_), {splat(zero, vf_)}, "dotv",
                                               [&](Value *kv, const std::vector<Value *> &c) {
                                                 return std::vector<Value *>{step(kv, c[0], vf_, true)};
                                               });
    Value *h;
    if (fl) {
      h = b_.CreateFAddReduce(llvm::ConstantFP::get(et, 0.0), vacc[0]);
      llvm::FastMathFlags fmf;
      fmf.setAllowReassoc();
      llvm::cast<llvm::Instruction>(h)->setFastMathFlags(fmf);
    } else {
      h = b_.CreateAddReduce(vacc[0]);
    }
    return forLoopCarried(kMain, K, i64(1), {h}, "dott", [&](Value *kv, const std::vector<Value *> &c) {
      return std::vector<Value *>{step(kv, c[0], 1, false)};
    })[0];
  }
  return forLoopCarried(i64(0), K, i64(1), {splat(zero, lanes)}, "dot",
                        [&](Value *kv, const std::vector<Value *> &c) {
                          return std::vector<Value *>{step(kv, c[0], lanes, false)};
                        })[0];
}

//===-- Stages -------------------------------------------------------------===//

// Whether the value's inline expression contains a reduction that prefers
// computing one output point at a time (contiguous innermost reduced axis).
bool KernelLowering::prefersScalarPoints(uint32_t v) {
  if (v < k_.numInputs || data_[v]) return false;
  const auto &m = k_.members[static_cast<size_t>(vals_[v].member)];
  switch (m.op) {
  case OpCode::MatMul: case OpCode::BatchMatMul: return !m.attrs[0].getBool();
  case OpCode::Sum: case OpCode::Mean: case OpCode::Max: case OpCode::Min: {
    const auto &axes = m.attrs[0].getInts();
    int64_t rx = static_cast<int64_t>(vals_[m.operands[0]].dims.size());
    if (axes.empty()) return true;
    for (int64_t a : axes)
      if (normAxis(a, rx) == rx - 1) return true;
    return false;
  }
  default: break;
  }
  for (uint32_t o : m.operands)
    if (prefersScalarPoints(o)) return true;
  return false;
}

unsigned KernelLowering::stageLanes(uint32_t v) {
  if (vf_ <= 1 || vals_[v].dims.empty()) return 1;
  return prefersScalarPoints(v) ? 1 : vf_;
}

void KernelLowering::emitStage(uint32_t v, const std::vector<Value *> &destsIn) {
  const size_t R = vals_[v].dims.size();
  bool parallelized = false;
  std::vector<Value *> dests = destsIn; // replaced inside a parallel body
  unsigned lanes = stageLanes(v);
  Index idx(R);
  auto point = [&](unsigned ln) {
    Value *val = emitValue(v, idx, ln);
    for (Value *d : dests) store(v, d, idx, val, ln);
  };
  std::function<void(size_t)> nest = [&](size_t d) {
    if (d == 0 && R == 1 && gpu_ && !parallelized) {
      // NVPTX: a vector's points over the grid (CPU: one loop, vectorized).
      parallelized = true;
      parallel("points", dims_[v][0], numElements(v), dests, [&](Value *begin, Value *end) {
        forLoop(begin, end, i64(1), "j", [&](Value *iv) {
          idx[0] = {iv, i64(0)};
          point(1);
        });
      });
      return;
    }
    if (d == 0 && R >= 2 && !parallelized) {
      // The outermost dimension in parts on the thread pool.
      parallelized = true;
      parallel("rows", dims_[v][0], numElements(v), dests, [&](Value *begin, Value *end) {
        forLoop(begin, end, i64(1), "i", [&](Value *iv) {
          idx[0] = {iv, i64(0)};
          nest(1);
        });
      });
      return;
    }
    if (d + 1 < R) {
      forLoop(i64(0), dims_[v][d], i64(1), "i", [&](Value *iv) {
        idx[d] = {iv, i64(0)};
        nest(d + 1);
      });
      return;
    }
    Value *n = dims_[v][d];
    if (lanes == 1) {
      forLoop(i64(0), n, i64(1), "j", [&](Value *iv) {
        idx[d] = {iv, i64(0)};
        point(1);
      });
      return;
    }
    Value *rem = b_.CreateSRem(n, i64(lanes));
    Value *nMain = b_.CreateSub(n, rem);
    auto inner = [&] {
      forLoop(i64(0), nMain, i64(lanes), "jv", [&](Value *iv) {
        idx[d] = {iv, i64(1)};
        point(lanes);
      });
      // Residue dispatch: one variant per residue, each a constant-count loop.
      llvm::BasicBlock *after = llvm::BasicBlock::Create(ctx_, "residue.done", fn_);
      llvm::SwitchInst *sw = b_.CreateSwitch(rem, after, lanes - 1);
      for (unsigned r = 1; r < lanes; ++r) {
        llvm::BasicBlock *cs = llvm::BasicBlock::Create(ctx_, "residue." + std::to_string(r), fn_);
        sw->addCase(b_.getInt64(r), cs);
        b_.SetInsertPoint(cs);
        forLoop(nMain, b_.CreateAdd(nMain, i64(r)), i64(1), "jr", [&](Value *iv) {
          idx[d] = {iv, i64(0)};
          point(1);
        });
        b_.CreateBr(after);
      }
      b_.SetInsertPoint(after);
    };
    // The speculative version first (no run-time broadcasting along this
    // axis), then, if it assumed anything, the general one and the guard.
    llvm::BasicBlock *guard = llvm::BasicBlock::Create(ctx_, "bcast.guard", fn_);
    llvm::BasicBlock *fast = llvm::BasicBlock::Create(ctx_, "bcast.none", fn_);
    llvm::BasicBlock *join = llvm::BasicBlock::Create(ctx_, "bcast.join", fn_);
    b_.CreateBr(guard);
    b_.SetInsertPoint(fast);
    speculating_ = true;
    assumptions_.clear();
    inner();
    speculating_ = false;
    b_.CreateBr(join);
    std::vector<std::pair<Value *, Value *>> assumed = std::move(assumptions_);
    assumptions_.clear();
    llvm::IRBuilder<> gb(guard);
    if (assumed.empty()) {
      gb.CreateBr(fast);
    } else {
      llvm::BasicBlock *general = llvm::BasicBlock::Create(ctx_, "bcast.any", fn_);
      Value *ok = gb.getTrue();
      for (auto &[a, c] : assumed) ok = gb.CreateAnd(ok, gb.CreateICmpEQ(a, c));
      gb.CreateCondBr(ok, fast, general);
      b_.SetInsertPoint(general);
      inner();
      b_.CreateBr(join);
    }
    b_.SetInsertPoint(join);
  };
  if (R == 0) {
    point(1);
    return;
  }
  nest(0);
}

// One f32 row of softmax or layer_norm along the innermost axis, in vector
// passes (VF lanes, scalar tails) with f32 accumulators and the inline exp:
//   softmax:    max (ordered compares: NaN ignored as by the reference's
//               std::max, then propagated by exp), e = exp(x - max) stored and
//               summed, e / sum;
//   layer_norm: mean, mean of squared deviations, (x - mean) * rsqrt * g + b.
void KernelLowering::emitVectorRow(const vm::KernelDesc::Member &m, uint32_t x, uint32_t v,
                                   Value *dest, Index idx, int64_t axis) {
  llvm::Type *et = b_.getFloatTy();
  Value *n = dims_[x][axis];
  Value *nMain = b_.CreateSub(n, b_.CreateSRem(n, i64(vf_)));
  auto at = [&](Value *j, unsigned ln) {
    idx[axis] = {j, i64(ln > 1 ? 1 : 0)};
    return emitValue(x, idx, ln);
  };
  auto put = [&](Value *j, Value *val, unsigned ln) {
    idx[axis] = {j, i64(ln > 1 ? 1 : 0)};
    store(v, dest, idx, val, ln);
  };
  auto loaded = [&](Value *j, unsigned ln) {
    idx[axis] = {j, i64(ln > 1 ? 1 : 0)};
    Value *step;
    Value *off = offsetOf(v, idx, step);
    return b_.CreateAlignedLoad(withLanes(et, ln), b_.CreateInBoundsGEP(et, dest, off), llvm::Align(4));
  };
  // pass(body(j, lanes, acc) -> acc): vector body, horizontal combine, tail.
  auto pass = [&](const char *name, Value *init, bool isMax,
                  const std::function<Value *(Value *, unsigned, Value *)> &body) {
    std::vector<Value *> vacc = forLoopCarried(i64(0), nMain, i64(vf_), {splat(init, vf_)}, name,
                                               [&](Value *j, const std::vector<Value *> &c) {
                                                 return std::vector<Value *>{body(j, vf_, c[0])};
                                               });
    Value *h = init;
    for (unsigned l = 0; l < vf_; ++l) {
      Value *e = b_.CreateExtractElement(vacc[0], l);
      h = isMax ? b_.CreateSelect(b_.CreateFCmpOGT(e, h), e, h) : b_.CreateFAdd(h, e);
    }
    return forLoopCarried(nMain, n, i64(1), {h}, name, [&](Value *j, const std::vector<Value *> &c) {
      return std::vector<Value *>{body(j, 1, c[0])};
    })[0];
  };
  auto both = [&](const char *name, const std::function<void(Value *, unsigned)> &body) {
    forLoop(i64(0), nMain, i64(vf_), name, [&](Value *j) { body(j, vf_); });
    forLoop(nMain, n, i64(1), name, [&](Value *j) { body(j, 1); });
  };
  Value *zero = llvm::ConstantFP::get(et, 0.0);
  if (m.op == OpCode::Softmax) {
    Value *mx = pass("vsmax", llvm::ConstantFP::getInfinity(et, true), true, [&](Value *j, unsigned ln, Value *acc) {
      Value *xv = at(j, ln);
      return b_.CreateSelect(b_.CreateFCmpOGT(xv, acc), xv, acc);
    });
    Value *sum = pass("vssum", zero, false, [&](Value *j, unsigned ln, Value *acc) {
      Value *e = emitExp(b_, b_.CreateFSub(at(j, ln), splat(mx, ln)));
      put(j, e, ln);
      return b_.CreateFAdd(acc, e);
    });
    both("vsnorm", [&](Value *j, unsigned ln) { put(j, b_.CreateFDiv(loaded(j, ln), splat(sum, ln)), ln); });
    return;
  }
  Value *fn = b_.CreateSIToFP(n, et);
  Value *mean = b_.CreateFDiv(pass("vlmean", zero, false, [&](Value *j, unsigned ln, Value *acc) {
                                return b_.CreateFAdd(acc, at(j, ln));
                              }),
                              fn);
  Value *var = b_.CreateFDiv(pass("vlvar", zero, false, [&](Value *j, unsigned ln, Value *acc) {
                               Value *d = b_.CreateFSub(at(j, ln), splat(mean, ln));
                               return b_.CreateFAdd(acc, b_.CreateFMul(d, d));
                             }),
                             fn);
  Value *eps = llvm::ConstantFP::get(et, m.attrs[0].getFloat());
  Value *inv = b_.CreateFDiv(llvm::ConstantFP::get(et, 1.0),
                             b_.CreateIntrinsic(llvm::Intrinsic::sqrt, {et}, {b_.CreateFAdd(var, eps)}));
  both("vlnorm", [&](Value *j, unsigned ln) {
    Index gi = {Ix{j, i64(ln > 1 ? 1 : 0)}};
    Value *g = emitValue(m.operands[1], gi, ln);
    Value *bt = emitValue(m.operands[2], gi, ln);
    Value *y = b_.CreateFMul(b_.CreateFMul(b_.CreateFSub(at(j, ln), splat(mean, ln)), splat(inv, ln)), g);
    put(j, b_.CreateFAdd(y, bt), ln);
  });
}

// softmax and layer_norm: per row (all axes but one), three passes in
// double like the reference (vm/kernels/Normalize.cpp), or in f32 vectors
// (emitVectorRow) along a contiguous f32 axis.
void KernelLowering::emitRowStage(uint32_t v, Value *dest) {
  const auto &m = k_.members[static_cast<size_t>(vals_[v].member)];
  uint32_t x = m.operands[0];
  const size_t R = vals_[v].dims.size();
  int64_t axis = m.op == OpCode::Softmax ? normAxis(m.attrs[0].getInt(), static_cast<int64_t>(R))
                                         : static_cast<int64_t>(R) - 1;
  llvm::Type *et = elementType(ctx_, vals_[v].dtype);
  llvm::Type *dt = b_.getDoubleTy();
  Index idx(R);
  auto at = [&](Value *j) {
    idx[axis] = {j, i64(0)};
    return b_.CreateFPExt(emitValue(x, idx, 1), dt);
  };
  Value *n = dims_[x][axis];
  // f32 rows along the contiguous axis: vectorized passes (emitVectorRow).
  const bool vectorRows = vals_[v].dtype == DType::F32 && axis == static_cast<int64_t>(R) - 1 && vf_ > 1;
  const size_t outerRow = axis == 0 ? 1 : 0; // NVPTX: rows over the grid
  std::function<void(size_t)> rows = [&](size_t d) {
    if (d < R) {
      if (static_cast<int64_t>(d) == axis) return rows(d + 1);
      if (gpu_ && d == outerRow) {
        std::vector<Value *> none;
        parallel("rows", dims_[v][d], numElements(v), none, [&](Value *begin, Value *end) {
          forLoop(begin, end, i64(1), "row", [&](Value *iv) {
            idx[d] = {iv, i64(0)};
            rows(d + 1);
          });
        });
        return;
      }
      forLoop(i64(0), dims_[v][d], i64(1), "row", [&](Value *iv) {
        idx[d] = {iv, i64(0)};
        rows(d + 1);
      });
      return;
    }
    if (vectorRows) {
      emitVectorRow(m, x, v, dest, idx, axis);
      return;
    }
    if (m.op == OpCode::Softmax) {
      Value *mx = forLoopCarried(i64(0), n, i64(1), {llvm::ConstantFP::getInfinity(dt, true)}, "smax",
                                 [&](Value *j, const std::vector<Value *> &c) {
                                   Value *xv = at(j);
                                   return std::vector<Value *>{b_.CreateSelect(b_.CreateFCmpOGT(xv, c[0]), xv, c[0])};
                                 })[0];
      Value *sum = forLoopCarried(i64(0), n, i64(1), {llvm::ConstantFP::get(dt, 0.0)}, "ssum",
                                  [&](Value *j, const std::vector<Value *> &c) {
                                    Value *e = emitLibmCall(b_, "exp", "exp", {b_.CreateFSub(at(j), mx)});
                                    return std::vector<Value *>{b_.CreateFAdd(c[0], e)};
                                  })[0];
      forLoop(i64(0), n, i64(1), "snorm", [&](Value *j) {
        Value *e = emitLibmCall(b_, "exp", "exp", {b_.CreateFSub(at(j), mx)});
        store(v, dest, idx, b_.CreateFPTrunc(b_.CreateFDiv(e, sum), et), 1);
      });
      return;
    }
    // layer_norm %x, %gamma, %beta, eps
    Value *dn = b_.CreateSIToFP(n, dt);
    Value *mean = b_.CreateFDiv(forLoopCarried(i64(0), n, i64(1), {llvm::ConstantFP::get(dt, 0.0)}, "lmean",
                                               [&](Value *j, const std::vector<Value *> &c) {
                                                 return std::vector<Value *>{b_.CreateFAdd(c[0], at(j))};
                                               })[0],
                                dn);
    Value *var = b_.CreateFDiv(forLoopCarried(i64(0), n, i64(1), {llvm::ConstantFP::get(dt, 0.0)}, "lvar",
                                              [&](Value *j, const std::vector<Value *> &c) {
                                                Value *dlt = b_.CreateFSub(at(j), mean);
                                                return std::vector<Value *>{b_.CreateFAdd(c[0], b_.CreateFMul(dlt, dlt))};
                                              })[0],
                               dn);
    Value *eps = llvm::ConstantFP::get(dt, m.attrs[0].getFloat());
    Value *inv = b_.CreateFDiv(llvm::ConstantFP::get(dt, 1.0),
                               b_.CreateIntrinsic(llvm::Intrinsic::sqrt, {dt}, {b_.CreateFAdd(var, eps)}));
    forLoop(i64(0), n, i64(1), "lnorm", [&](Value *j) {
      Value *xv = at(j);
      Index gi = {Ix{j, i64(0)}};
      Value *g = b_.CreateFPExt(emitValue(m.operands[1], gi, 1), dt);
      Value *bt = b_.CreateFPExt(emitValue(m.operands[2], gi, 1), dt);
      Value *y = b_.CreateFAdd(b_.CreateFMul(b_.CreateFMul(b_.CreateFSub(xv, mean), inv), g), bt);
      store(v, dest, idx, b_.CreateFPTrunc(y, et), 1);
    });
  };
  rows(0);
}

// Register-blocked matmul (float): the output is covered by MR x NR tiles
// whose accumulators live in registers for the whole k loop, so each loaded
// operand element feeds several FMAs instead of one.
//  * rhs not transposed (B[k, j] contiguous in j): outer-product tiles of
//    MR rows x NV vectors of VF columns: per k, MR broadcasts of A, NV vector
//    loads of B, MR * NV vector FMAs.
//  * rhs transposed, lhs not (both contiguous in k, the x . W^T of every
//    model here): dot-product tiles of MR rows x NC columns: per k step of VF,
//    MR + NC vector loads, MR * NC vector FMAs, then MR * NC horizontal sums.
// Rows and columns left over at the edges (M % MR, N % NR) and the k tail go
// through the same loops with smaller tiles or scalar steps; full-tile columns
// are cache-blocked so that each block of B is read from memory once. Returns false
// (the caller then uses the per-point path) for layouts without a tile form.
bool KernelLowering::emitMatMulStage(uint32_t v, Value *dest) {
  const auto &m = k_.members[static_cast<size_t>(vals_[v].member)];
  const DType dt = vals_[v].dtype;
  if (!isFloat(dt) || vf_ <= 1) return false;
  uint32_t a = m.operands[0], bb = m.operands[1];
  const bool ta = m.attrs[0].getBool(), tb = m.attrs[1].getBool();
  if (tb && ta) return false;
  const size_t R = vals_[v].dims.size();
  llvm::Type *et = elementType(ctx_, dt);
  llvm::Type *vt = withLanes(et, vf_);
  const unsigned esize = et->getPrimitiveSizeInBits() / 8;
  llvm::Align align(esize);
  // Sizes and row strides, (re)derived in whichever function is being
  // emitted (the kernel or the body of a parallel region); the lambdas below
  // capture these variables, not their values.
  std::vector<Value *> carry = {dest};
  Value *M, *N, *K, *aRow, *bRow;
  auto derive = [&] {
    M = dims_[v][R - 2];
    N = dims_[v][R - 1];
    K = ta ? dims_[a][R - 2] : dims_[a][R - 1];
    aRow = strides_[a][R - 2];
    bRow = strides_[bb][R - 2];
  };
  derive();
  Index batch(R - 2);
  // Element pointers of A[i, k] / B[k, j] for the current batch index.
  auto batchOffset = [&](uint32_t o) {
    Value *off = i64(0);
    const auto &od = vals_[o].dims;
    for (size_t d = 0; d + 2 < R; ++d) {
      Value *bi = batch[d].base;
      if (od[d] == 1) continue;
      if (od[d] == kDynamic) bi = b_.CreateSelect(b_.CreateICmpEQ(dims_[o][d], i64(1)), i64(0), bi);
      off = b_.CreateAdd(off, b_.CreateMul(bi, strides_[o][d]));
    }
    return off;
  };
  auto ptrAt = [&](Value *base, Value *off) { return b_.CreateInBoundsGEP(et, base, off); };
  auto fma = [&](Value *x, Value *y, Value *acc) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {acc->getType()}, {x, y, acc});
  };
  // One tile at (i0, j0) of mr x nc, as loops over k; writes C.
  auto tile = [&](Value *aOff, Value *bOff, Value *cOff, Value *i0, Value *j0, unsigned mr, unsigned nc) {
    if (!tb) {
      // nc vectors of VF columns; accumulators [r][c].
      std::vector<Value *> init(mr * nc, llvm::Constant::getNullValue(vt));
      std::vector<Value *> acc = forLoopCarried(i64(0), K, i64(1), init, "mmk",
          [&](Value *k, const std::vector<Value *> &cur) {
            std::vector<Value *> bv(nc);
            Value *bk = b_.CreateAdd(bOff, b_.CreateAdd(b_.CreateMul(k, bRow), j0));
            for (unsigned c = 0; c < nc; ++c)
              bv[c] = b_.CreateAlignedLoad(vt, ptrAt(data_[bb], b_.CreateAdd(bk, i64(c * vf_))), align);
            std::vector<Value *> out(cur.size());
            for (unsigned r = 0; r < mr; ++r) {
              Value *ai = b_.CreateAdd(i0, i64(r));
              Value *ao = ta ? b_.CreateAdd(b_.CreateMul(k, aRow), ai) : b_.CreateAdd(b_.CreateMul(ai, aRow), k);
              Value *as = splat(b_.CreateLoad(et, ptrAt(data_[a], b_.CreateAdd(aOff, ao))), vf_);
              for (unsigned c = 0; c < nc; ++c) out[r * nc + c] = fma(as, bv[c], cur[r * nc + c]);
            }
            return out;
          });
      for (unsigned r = 0; r < mr; ++r)
        for (unsigned c = 0; c < nc; ++c) {
          Value *co = b_.CreateAdd(cOff, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(i0, i64(r)), N),
                                                      b_.CreateAdd(j0, i64(c * vf_))));
          b_.CreateAlignedStore(acc[r * nc + c], ptrAt(carry[0], co), align);
        }
      return;
    }
    // Dot-product tile: mr rows of A x nc rows of B (= columns of C).
    Value *kMain = b_.CreateSub(K, b_.CreateSRem(K, i64(vf_)));
    std::vector<Value *> init(mr * nc, llvm::Constant::getNullValue(vt));
    auto rowPtr = [&](uint32_t o, Value *off, Value *row, Value *stride, Value *k) {
      return ptrAt(data_[o], b_.CreateAdd(off, b_.CreateAdd(b_.CreateMul(row, stride), k)));
    };
    std::vector<Value *> vacc = forLoopCarried(i64(0), kMain, i64(vf_), init, "mmdot",
        [&](Value *k, const std::vector<Value *> &cur) {
          std::vector<Value *> av(mr), bv(nc), out(cur.size());
          for (unsigned r = 0; r < mr; ++r)
            av[r] = b_.CreateAlignedLoad(vt, rowPtr(a, aOff, b_.CreateAdd(i0, i64(r)), aRow, k), align);
          for (unsigned c = 0; c < nc; ++c)
            bv[c] = b_.CreateAlignedLoad(vt, rowPtr(bb, bOff, b_.CreateAdd(j0, i64(c)), bRow, k), align);
          for (unsigned r = 0; r < mr; ++r)
            for (unsigned c = 0; c < nc; ++c) out[r * nc + c] = fma(av[r], bv[c], cur[r * nc + c]);
          return out;
        });
    llvm::FastMathFlags fmf;
    fmf.setAllowReassoc();
    std::vector<Value *> sums(mr * nc);
    for (unsigned i = 0; i < mr * nc; ++i) {
      sums[i] = b_.CreateFAddReduce(llvm::ConstantFP::get(et, 0.0), vacc[i]);
      llvm::cast<llvm::Instruction>(sums[i])->setFastMathFlags(fmf);
    }
    sums = forLoopCarried(kMain, K, i64(1), sums, "mmtail", [&](Value *k, const std::vector<Value *> &cur) {
      std::vector<Value *> out(cur.size());
      for (unsigned r = 0; r < mr; ++r) {
        Value *x = b_.CreateLoad(et, rowPtr(a, aOff, b_.CreateAdd(i0, i64(r)), aRow, k));
        for (unsigned c = 0; c < nc; ++c) {
          Value *y = b_.CreateLoad(et, rowPtr(bb, bOff, b_.CreateAdd(j0, i64(c)), bRow, k));
          out[r * nc + c] = fma(x, y, cur[r * nc + c]);
        }
      }
      return out;
    });
    for (unsigned r = 0; r < mr; ++r)
      for (unsigned c = 0; c < nc; ++c) {
        Value *co = b_.CreateAdd(cOff, b_.CreateAdd(b_.CreateMul(b_.CreateAdd(i0, i64(r)), N),
                                                    b_.CreateAdd(j0, i64(c))));
        b_.CreateStore(sums[r * nc + c], ptrAt(carry[0], co));
      }
  };
  // Tile sizes: 4 rows x 2 vectors (outer product: 8 accumulators + 2 loads
  // + 1 broadcast of 16 vector registers), 4 x 4 dot products (16
  // accumulators + 8 loads: fits AVX-512's 32 registers; on AVX2 LLVM spills
  // a few, still ahead of one dot product at a time).
  const unsigned MR = 4, NV = 2, NC = tb ? 4 : NV * vf_;
  const unsigned colStep = tb ? NC : NV * vf_;
  // A column-block size whose slice of B fits in 256 KiB (a multiple of the
  // tile width), and the full-tile extent of the rows and columns.
  Value *jb, *mMain, *nMain;
  auto blocking = [&] {
    Value *jbRaw = b_.CreateSDiv(i64(65536), b_.CreateAdd(K, i64(1)));
    jb = b_.CreateSub(jbRaw, b_.CreateSRem(jbRaw, i64(colStep)));
    jb = b_.CreateSelect(b_.CreateICmpSLT(jb, i64(colStep)), i64(colStep), jb);
    mMain = b_.CreateSub(M, b_.CreateSRem(M, i64(MR)));
    nMain = b_.CreateSub(N, b_.CreateSRem(N, i64(colStep)));
  };
  // Column blocks [bBegin, bEnd) of one batch element: every row tile of a
  // block before the next (cache blocking: B streams from memory once).
  auto blocks = [&](Value *aOff, Value *bOff, Value *cOff, Value *bBegin, Value *bEnd) {
    forLoop(bBegin, bEnd, i64(1), "mmjb", [&](Value *blk) {
      Value *j1 = b_.CreateMul(blk, jb);
      Value *jEnd = b_.CreateAdd(j1, jb);
      jEnd = b_.CreateSelect(b_.CreateICmpSLT(jEnd, nMain), jEnd, nMain);
      auto block = [&](Value *i0, unsigned mr) {
        forLoop(j1, jEnd, i64(colStep), "mmj", [&](Value *j0) { tile(aOff, bOff, cOff, i0, j0, mr, tb ? NC : NV); });
      };
      forLoop(i64(0), mMain, i64(MR), "mmi", [&](Value *i0) { block(i0, MR); });
      forLoop(mMain, M, i64(1), "mmir", [&](Value *i0) { block(i0, 1); });
    });
  };
  // The columns after the full tiles: (outer product) single vectors, then
  // scalar points, for every row.
  auto edges = [&](Value *aOff, Value *bOff, Value *cOff) {
    forLoop(i64(0), M, i64(1), "mmedge", [&](Value *i0) {
      Value *j = nMain;
      if (!tb) {
        Value *vMain = b_.CreateSub(N, b_.CreateSRem(N, i64(vf_)));
        forLoop(nMain, vMain, i64(vf_), "mmjv", [&](Value *j0) { tile(aOff, bOff, cOff, i0, j0, 1, 1); });
        j = vMain;
      }
      forLoop(j, N, i64(1), "mmjs", [&](Value *j0) {
        Index idx = batch;
        idx.push_back({i0, i64(0)});
        idx.push_back({j0, i64(0)});
        store(v, carry[0], idx, emitMatMul(v, m, idx, 1), 1);
      });
    });
  };
  Value *work = b_.CreateMul(numElements(v), K);
  if (R == 2) {
    // One matrix: its column blocks in parts on the thread pool, then the
    // edge columns.
    blocking();
    Value *numBlocks = b_.CreateSDiv(b_.CreateAdd(nMain, b_.CreateSub(jb, i64(1))), jb);
    parallel("cols", numBlocks, work, carry, [&](Value *begin, Value *end) {
      derive();
      blocking();
      blocks(i64(0), i64(0), i64(0), begin, end);
    });
    derive();
    blocking();
    edges(i64(0), i64(0), i64(0));
    return true;
  }
  // Batches: the outermost batch dimension in parts on the thread pool.
  std::function<void(size_t)> batches = [&](size_t d) {
    if (d + 2 < R) {
      forLoop(i64(0), dims_[v][d], i64(1), "mmb", [&](Value *iv) {
        batch[d] = {iv, i64(0)};
        batches(d + 1);
      });
      return;
    }
    blocking();
    Value *numBlocks = b_.CreateSDiv(b_.CreateAdd(nMain, b_.CreateSub(jb, i64(1))), jb);
    Value *aOff = batchOffset(a), *bOff = batchOffset(bb);
    Value *cOff = i64(0);
    for (size_t dd = 0; dd + 2 < R; ++dd) cOff = b_.CreateAdd(cOff, b_.CreateMul(batch[dd].base, strides_[v][dd]));
    blocks(aOff, bOff, cOff, i64(0), numBlocks);
    edges(aOff, bOff, cOff);
  };
  parallel("batch", dims_[v][0], work, carry, [&](Value *begin, Value *end) {
    derive();
    forLoop(begin, end, i64(1), "mmb", [&](Value *iv) {
      batch[0] = {iv, i64(0)};
      batches(1);
    });
  });
  return true;
}

llvm::Function *KernelLowering::emit(const std::string &symbol) {
  llvm::Type *ptr = llvm::PointerType::get(ctx_, 0);
  bufTy_ = llvm::StructType::get(ctx_, {ptr, ptr, ptr, b_.getInt32Ty(), b_.getInt32Ty()});
  // CPU: int32_t f(bufs, num_bufs, ctx) (vm/KernelABI.h). NVPTX: a kernel
  // entry void f(bufs, num_bufs, status), every pointer a device pointer;
  // an error stores 1 to *status (the runtime then reports it).
  auto *fty = llvm::FunctionType::get(gpu_ ? b_.getVoidTy() : b_.getInt32Ty(), {ptr, b_.getInt32Ty(), ptr}, false);
  fn_ = llvm::Function::Create(fty, llvm::GlobalValue::ExternalLinkage, symbol, mod_);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  if (gpu_) fn_->setCallingConv(llvm::CallingConv::PTX_Kernel);
  bufs_ = fn_->getArg(0);
  fn_->getArg(0)->setName("bufs");
  fn_->getArg(2)->setName(gpu_ ? "status" : "ctx");
  llvm::BasicBlock *entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  llvm::BasicBlock *okExit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
  errBB_ = llvm::BasicBlock::Create(ctx_, "error", fn_);
  b_.SetInsertPoint(entry);
  loadShapes();
  llvm::FunctionCallee mallocFn =
      mod_.getOrInsertFunction("malloc", llvm::FunctionType::get(ptr, {b_.getInt64Ty()}, false));
  llvm::FunctionCallee freeFn =
      mod_.getOrInsertFunction("free", llvm::FunctionType::get(b_.getVoidTy(), {ptr}, false));
  // Output descriptors follow the value descriptors.
  std::vector<std::vector<Value *>> outDests(vals_.size());
  for (size_t o = 0; o < k_.outputs.size(); ++o)
    outDests[k_.outputs[o]].push_back(bufField(static_cast<unsigned>(vals_.size() + o), 0));
  // Outputs that are inputs are copies; then each stored member in order.
  for (uint32_t v = 0; v < k_.numInputs; ++v)
    if (!outDests[v].empty()) emitStage(v, outDests[v]);
  for (uint32_t v = k_.numInputs; v < vals_.size(); ++v) {
    if (outDests[v].empty() && !materialize_[v]) continue;
    std::vector<Value *> dests = outDests[v];
    if (dests.empty()) {
      llvm::Type *mt = memoryType(ctx_, vals_[v].dtype);
      Value *bytes = b_.CreateMul(numElements(v), i64(mt->getPrimitiveSizeInBits() / 8));
      llvm::IRBuilder<> eb(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
      llvm::AllocaInst *slot = eb.CreateAlloca(ptr);
      eb.CreateStore(llvm::ConstantPointerNull::get(llvm::PointerType::get(ctx_, 0)), slot);
      temps_.push_back(slot);
      Value *mem = gpu_ ? deviceTemporary(b_.CreateAdd(bytes, i64(1)), mallocFn)
                        : b_.CreateCall(mallocFn, {b_.CreateAdd(bytes, i64(1))});
      b_.CreateStore(mem, slot);
      llvm::BasicBlock *ok = llvm::BasicBlock::Create(ctx_, "alloc.ok", fn_);
      b_.CreateCondBr(b_.CreateIsNull(mem), errBB_, ok);
      b_.SetInsertPoint(ok);
      dests.push_back(mem);
    }
    OpCode op = k_.members[static_cast<size_t>(vals_[v].member)].op;
    stages_ += static_cast<unsigned>(dests.size()); // row and matmul stages copy the rest
    if (op == OpCode::Softmax || op == OpCode::LayerNorm) {
      emitRowStage(v, dests[0]);
      for (size_t i = 1; i < dests.size(); ++i) {
        data_[v] = dests[0];
        emitStage(v, {dests[i]});
      }
    } else if ((op == OpCode::MatMul || op == OpCode::BatchMatMul) && emitMatMulStage(v, dests[0])) {
      data_[v] = dests[0];
      for (size_t i = 1; i < dests.size(); ++i) emitStage(v, {dests[i]});
    } else {
      emitStage(v, dests);
    }
    data_[v] = dests[0];
    // NVPTX: the next stage may read any point of this one, so the block
    // waits for all its threads (a stage outside a grid-stride loop is
    // computed by every thread, each storing the same values).
    if (gpu_) barrier();
  }
  b_.CreateBr(okExit);
  if (gpu_) {
    // Thread 0 frees the temporaries once the block is done with them. An
    // error exit leaves them to the device heap (other threads may still
    // read them): the runtime ends the run on any kernel error.
    b_.SetInsertPoint(okExit);
    if (!temps_.empty()) {
      llvm::BasicBlock *freeBB = llvm::BasicBlock::Create(ctx_, "temp.free", fn_);
      llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx_, "done", fn_);
      b_.CreateCondBr(b_.CreateICmpEQ(sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x), i64(0)), freeBB, done);
      b_.SetInsertPoint(freeBB);
      for (llvm::AllocaInst *slot : temps_) b_.CreateCall(freeFn, {b_.CreateLoad(ptr, slot)});
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
    }
    b_.CreateRetVoid();
    b_.SetInsertPoint(errBB_);
    b_.CreateStore(b_.getInt32(1), fn_->getArg(2));
    b_.CreateRetVoid();
    return fn_;
  }
  auto freeTemps = [&](llvm::BasicBlock *bb, int32_t rc) {
    b_.SetInsertPoint(bb);
    for (llvm::AllocaInst *slot : temps_) b_.CreateCall(freeFn, {b_.CreateLoad(ptr, slot)});
    b_.CreateRet(b_.getInt32(rc));
  };
  freeTemps(okExit, 0);
  freeTemps(errBB_, 1);
  return fn_;
}

} // namespace

std::string kernelSymbol(size_t index, const std::string &name) {
  std::string s = "nimble_k" + std::to_string(index) + "_";
  for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return s.substr(0, 200);
}

bool lowerKernel(llvm::Module &mod, const vm::KernelDesc &k, const ir::Function &f,
                 const KernelTarget &target, const std::string &symbol, std::string &reason,
                 bool *multiBlock) {
  KernelLowering kl(mod, k, f, target);
  if (!kl.analyze(reason)) return false;
  llvm::Function *fn = kl.emit(symbol);
  if (multiBlock) *multiBlock = kl.stages() <= 1 && !kl.hasTemporaries();
  std::string err;
  llvm::raw_string_ostream os(err);
  // The kernel and the bodies of its parallel regions (internal functions
  // named after it) are checked together.
  bool broken = false;
  std::vector<llvm::Function *> made;
  for (llvm::Function &f : mod)
    if (&f == fn || f.getName().starts_with((symbol + ".").c_str())) made.push_back(&f);
  for (llvm::Function *f : made) broken |= llvm::verifyFunction(*f, &os);
  if (broken) {
    reason = "internal error: the generated function is invalid: " + os.str();
    for (llvm::Function *f : made) f->dropAllReferences();
    for (llvm::Function *f : made) f->eraseFromParent();
    return false;
  }
  return true;
}

} // namespace nimble::codegen
