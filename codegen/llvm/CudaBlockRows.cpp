//===- CudaBlockRows.cpp - Block-per-row CUDA kernels for reductions, softmax, layer_norm -===//
//
// The generic NVPTX lowering (KernelGen.cpp) gives each output point to one
// thread: right for element-wise groups, and for reductions over leading
// axes (adjacent threads read adjacent elements), but a reduction over the
// innermost axes then has each thread walk a whole row alone: uncoalesced
// reads and, for BERT's softmax and layer_norm rows, a few hundred busy
// threads on a device that wants tens of thousands. Here a lone f32
// reduction over trailing axes (sum, mean, max, min), softmax over the last
// axis and layer_norm get a block per row instead (the issue's "block
// reductions"): the block's threads stride over the row together (coalesced),
// combine their partials in a shared-memory tree, and thread 0 (reductions)
// or every thread (softmax, layer_norm) writes the row. Rows are a
// block-stride loop (row = ctaid, ctaid + nctaid, ...), so any grid is
// correct; nimble-run launches one block per row (vm::CudaCode's
// kBlockPerOutput / kBlockPerRow flags), at most 65535.
//
// Arithmetic follows the reference kernels (vm/kernels/Reduce.cpp,
// Normalize.cpp): sums, means, softmax's exponentials and layer_norm's
// moments in double (exp from libdevice's __nv_exp), max / min with a NaN
// that sticks (the reference's "first NaN wins"; which NaN is not kept),
// softmax's max ignoring NaN as std::max does. The order of additions is
// the tree's, not the reference's left-to-right: results agree to rounding.
//
// The block must be a power of two of at most 256 threads (the shared tree);
// nimble-run launches 256. Another size stores 1 to the status word.
//
//===----------------------------------------------------------------------===//

#include "codegen/llvm/KernelGen.h"

#include "ir/OpTable.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <functional>

namespace nimble::codegen {

namespace {

using llvm::Value;

constexpr unsigned kMaxThreads = 256;

enum class RowOp { Sum, Mean, Max, Min, Softmax, LayerNorm };

struct RowPlan {
  RowOp op = RowOp::Sum;
  size_t rank = 0;
  size_t trailing = 1; // reduced trailing axes (reductions); 1 otherwise
  double eps = 0;      // layer_norm
};

/// Whether kernel `k` (primitive function `f`) is a lone op this file
/// lowers, and how.
bool plan(const vm::KernelDesc &k, const ir::Function &f, RowPlan &p) {
  if (k.members.size() != 1 || k.outputs.size() != 1 || k.upperBound) return false;
  const vm::KernelDesc::Member &m = k.members[0];
  if (m.numResults != 1 || k.outputs[0] != k.numInputs) return false;
  for (uint32_t i = 0; i < k.numInputs; ++i)
    if (i >= k.inputDTypes.size() || k.inputDTypes[i] != DType::F32 || m.operands.size() <= i || m.operands[i] != i)
      return false;
  std::vector<ir::Type> args = f.argTypes();
  if (args.empty() || !args[0].isTensor()) return false;
  p.rank = static_cast<size_t>(args[0].rank());
  if (p.rank == 0) return false;
  const OpInfo &info = opInfo(m.op);
  switch (m.op) {
  case OpCode::Sum: p.op = RowOp::Sum; break;
  case OpCode::Mean: p.op = RowOp::Mean; break;
  case OpCode::Max: p.op = RowOp::Max; break;
  case OpCode::Min: p.op = RowOp::Min; break;
  case OpCode::Softmax: p.op = RowOp::Softmax; break;
  case OpCode::LayerNorm: p.op = RowOp::LayerNorm; break;
  default: return false;
  }
  if (p.op == RowOp::LayerNorm) {
    if (k.numInputs != 3) return false;
    for (size_t i = 0; i < info.attrs.size() && i < m.attrs.size(); ++i)
      if (info.attrs[i].name == "eps") p.eps = m.attrs[i].getFloat();
    return true;
  }
  if (k.numInputs != 1) return false;
  std::vector<bool> reduced(p.rank, false);
  const int64_t rank = static_cast<int64_t>(p.rank);
  auto mark = [&](int64_t a) {
    a = a < 0 ? a + rank : a;
    if (a < 0 || a >= rank) return false;
    reduced[static_cast<size_t>(a)] = true;
    return true;
  };
  for (size_t i = 0; i < info.attrs.size() && i < m.attrs.size(); ++i) {
    const std::string &name = info.attrs[i].name;
    if (name == "axis" && !mark(m.attrs[i].getInt())) return false;
    if (name == "axes") {
      const auto &axes = m.attrs[i].getInts();
      if (axes.empty()) reduced.assign(p.rank, true);
      for (int64_t a : axes)
        if (!mark(a)) return false;
    }
  }
  if (p.op == RowOp::Softmax) return reduced == [&] { std::vector<bool> r(p.rank, false); r.back() = true; return r; }();
  // Reductions: the reduced axes are exactly the last `trailing` ones.
  size_t t = 0;
  while (t < p.rank && reduced[p.rank - 1 - t]) ++t;
  for (size_t d = 0; d + t < p.rank; ++d)
    if (reduced[d]) return false;
  if (t == 0) return false;
  p.trailing = t;
  return true;
}

class Emitter {
public:
  Emitter(llvm::Module &mod, const vm::KernelDesc &k, const RowPlan &p)
      : mod_(mod), ctx_(mod.getContext()), b_(ctx_), k_(k), p_(p) {}

  llvm::Function *emit(const std::string &symbol) {
    llvm::Type *ptr = llvm::PointerType::get(ctx_, 0);
    bufTy_ = llvm::StructType::get(ctx_, {ptr, ptr, ptr, b_.getInt32Ty(), b_.getInt32Ty()});
    auto *fty = llvm::FunctionType::get(b_.getVoidTy(), {ptr, b_.getInt32Ty(), ptr}, false);
    fn_ = llvm::Function::Create(fty, llvm::GlobalValue::ExternalLinkage, symbol, mod_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    fn_->setCallingConv(llvm::CallingConv::PTX_Kernel);
    Value *bufs = fn_->getArg(0);
    bufs->setName("bufs");
    fn_->getArg(2)->setName("status");
    auto *shared = llvm::ArrayType::get(b_.getDoubleTy(), kMaxThreads);
    smem_ = new llvm::GlobalVariable(mod_, shared, false, llvm::GlobalValue::InternalLinkage,
                                     llvm::PoisonValue::get(shared), symbol + ".partials", nullptr,
                                     llvm::GlobalValue::NotThreadLocal, 3);
    llvm::BasicBlock *entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    errBB_ = llvm::BasicBlock::Create(ctx_, "error", fn_);
    llvm::BasicBlock *exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
    b_.SetInsertPoint(entry);

    // Operands: descriptors 0..n-1 the inputs, n the result value (no
    // data), n + 1 the output (vm/KernelABI.h, one per value then outputs).
    auto field = [&](unsigned buf, unsigned f) {
      return b_.CreateLoad(bufTy_->getElementType(f), b_.CreateConstInBoundsGEP2_32(bufTy_, bufs, buf, f));
    };
    x_ = field(0, 0);
    out_ = field(k_.numInputs + 1, 0);
    if (p_.op == RowOp::LayerNorm) {
      gamma_ = field(1, 0);
      beta_ = field(2, 0);
    }
    Value *shape = field(0, 1);
    std::vector<Value *> dims;
    for (size_t d = 0; d < p_.rank; ++d)
      dims.push_back(b_.CreateLoad(b_.getInt64Ty(), b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), shape, d)));
    const size_t lead = p_.rank - (p_.op == RowOp::Sum || p_.op == RowOp::Mean || p_.op == RowOp::Max || p_.op == RowOp::Min ? p_.trailing : 1);
    Value *rows = i64(1), *len = i64(1);
    for (size_t d = 0; d < p_.rank; ++d) (d < lead ? rows : len) = b_.CreateMul(d < lead ? rows : len, dims[d]);
    len_ = len;
    tid_ = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x);
    nt_ = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x);
    // The block: a power of two of at most kMaxThreads threads.
    Value *badBlock = b_.CreateOr(b_.CreateICmpUGT(nt_, i64(kMaxThreads)),
                                  b_.CreateICmpNE(b_.CreateAnd(nt_, b_.CreateSub(nt_, i64(1))), i64(0)));
    // max / min of an empty row is the accumulator's start, -inf / +inf,
    // as in the reference (ONNX's empty ReduceMax / ReduceMin).
    Value *bad = badBlock;
    llvm::BasicBlock *body = llvm::BasicBlock::Create(ctx_, "rows", fn_);
    b_.CreateCondBr(bad, errBB_, body);
    b_.SetInsertPoint(body);
    loop(sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x), rows, sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x),
         "row", [&](Value *row) { emitRow(row); });
    b_.CreateBr(exit);
    b_.SetInsertPoint(exit);
    b_.CreateRetVoid();
    b_.SetInsertPoint(errBB_);
    b_.CreateStore(b_.getInt32(1), fn_->getArg(2));
    b_.CreateRetVoid();
    return fn_;
  }

private:
  Value *i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }
  Value *f64(double v) { return llvm::ConstantFP::get(b_.getDoubleTy(), v); }
  Value *sreg(llvm::Intrinsic::ID id) { return b_.CreateZExt(b_.CreateIntrinsic(id, {}, {}), b_.getInt64Ty()); }
  void barrier() { b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {}); }

  /// for (iv = begin; iv < end; iv += step) body(iv), with loop-carried
  /// values `carry` (returned after the loop).
  std::vector<Value *> loop(Value *begin, Value *end, Value *step, const char *name,
                            const std::function<void(Value *)> &body, std::vector<Value *> carry = {},
                            const std::function<std::vector<Value *>(Value *, const std::vector<Value *> &)> &next = {}) {
    llvm::BasicBlock *pre = b_.GetInsertBlock();
    llvm::BasicBlock *head = llvm::BasicBlock::Create(ctx_, std::string(name) + ".head", fn_);
    llvm::BasicBlock *bb = llvm::BasicBlock::Create(ctx_, std::string(name) + ".body", fn_);
    llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx_, std::string(name) + ".done", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode *iv = b_.CreatePHI(b_.getInt64Ty(), 2, name);
    iv->addIncoming(begin, pre);
    std::vector<llvm::PHINode *> phis;
    for (Value *c : carry) {
      phis.push_back(b_.CreatePHI(c->getType(), 2));
      phis.back()->addIncoming(c, pre);
    }
    b_.CreateCondBr(b_.CreateICmpSLT(iv, end), bb, done);
    b_.SetInsertPoint(bb);
    std::vector<Value *> cur(phis.begin(), phis.end());
    if (body) body(iv);
    std::vector<Value *> nxt = next ? next(iv, cur) : cur;
    llvm::BasicBlock *latch = b_.GetInsertBlock();
    iv->addIncoming(b_.CreateAdd(iv, step), latch);
    for (size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(nxt[i], latch);
    b_.CreateBr(head);
    b_.SetInsertPoint(done);
    return cur;
  }

  Value *load(Value *base, Value *index) {
    Value *v = b_.CreateLoad(b_.getFloatTy(), b_.CreateInBoundsGEP(b_.getFloatTy(), base, index));
    return b_.CreateFPExt(v, b_.getDoubleTy());
  }
  Value *isNaN(Value *v) { return b_.CreateFCmpUNO(v, v); }
  Value *exp(Value *v) {
    llvm::FunctionCallee f = mod_.getOrInsertFunction(
        "__nv_exp", llvm::FunctionType::get(b_.getDoubleTy(), {b_.getDoubleTy()}, false));
    return b_.CreateCall(f, {v});
  }

  using Combine = std::function<Value *(Value *, Value *)>;

  /// Each thread's partial over the row's elements tid, tid + nt, ...
  Value *partial(Value *base, Value *init, const std::function<Value *(Value *)> &term, const Combine &comb) {
    return loop(tid_, len_, nt_, "part", nullptr, {init}, [&](Value *j, const std::vector<Value *> &acc) {
             return std::vector<Value *>{comb(acc[0], term(b_.CreateAdd(base, j)))};
           })[0];
  }

  /// The block's combination of every thread's `v`, in every thread: the
  /// shared-memory tree (strides nt/2, nt/4, ..., 1), then a barrier so that
  /// the next reduction may reuse the slots.
  Value *blockReduce(Value *v, const Combine &comb) {
    auto slot = [&](Value *i) {
      return b_.CreateInBoundsGEP(smem_->getValueType(), smem_, {i64(0), i});
    };
    b_.CreateStore(v, slot(tid_));
    barrier();
    // for (s = nt / 2; s > 0; s /= 2) { if (tid < s) p[tid] = comb(p[tid], p[tid + s]); barrier }
    Value *half = b_.CreateLShr(nt_, 1);
    llvm::BasicBlock *pre = b_.GetInsertBlock();
    llvm::BasicBlock *head = llvm::BasicBlock::Create(ctx_, "tree.head", fn_);
    llvm::BasicBlock *step = llvm::BasicBlock::Create(ctx_, "tree.step", fn_);
    llvm::BasicBlock *add = llvm::BasicBlock::Create(ctx_, "tree.add", fn_);
    llvm::BasicBlock *sync = llvm::BasicBlock::Create(ctx_, "tree.sync", fn_);
    llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx_, "tree.done", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode *s = b_.CreatePHI(b_.getInt64Ty(), 2, "s");
    s->addIncoming(half, pre);
    b_.CreateCondBr(b_.CreateICmpUGT(s, i64(0)), step, done);
    b_.SetInsertPoint(step);
    b_.CreateCondBr(b_.CreateICmpULT(tid_, s), add, sync);
    b_.SetInsertPoint(add);
    Value *mine = b_.CreateLoad(b_.getDoubleTy(), slot(tid_));
    Value *other = b_.CreateLoad(b_.getDoubleTy(), slot(b_.CreateAdd(tid_, s)));
    b_.CreateStore(comb(mine, other), slot(tid_));
    b_.CreateBr(sync);
    b_.SetInsertPoint(sync);
    barrier();
    s->addIncoming(b_.CreateLShr(s, 1), sync);
    b_.CreateBr(head);
    b_.SetInsertPoint(done);
    Value *total = b_.CreateLoad(b_.getDoubleTy(), slot(i64(0)));
    barrier();
    return total;
  }

  void emitRow(Value *row) {
    Value *base = b_.CreateMul(row, len_);
    auto xAt = [&](Value *i) { return load(x_, i); };
    Combine add = [&](Value *a, Value *c) { return b_.CreateFAdd(a, c); };
    auto store = [&](Value *i, Value *v) {
      b_.CreateStore(b_.CreateFPTrunc(v, b_.getFloatTy()), b_.CreateInBoundsGEP(b_.getFloatTy(), out_, i));
    };
    // Thread 0 writes a reduction's one value per row.
    auto storeFirst = [&](Value *i, Value *v) {
      llvm::BasicBlock *w = llvm::BasicBlock::Create(ctx_, "write", fn_);
      llvm::BasicBlock *j = llvm::BasicBlock::Create(ctx_, "written", fn_);
      b_.CreateCondBr(b_.CreateICmpEQ(tid_, i64(0)), w, j);
      b_.SetInsertPoint(w);
      store(i, v);
      b_.CreateBr(j);
      b_.SetInsertPoint(j);
    };
    switch (p_.op) {
    case RowOp::Sum:
    case RowOp::Mean: {
      Value *t = blockReduce(partial(base, f64(0), xAt, add), add);
      if (p_.op == RowOp::Mean) t = b_.CreateFDiv(t, b_.CreateSIToFP(len_, b_.getDoubleTy()));
      storeFirst(row, t);
      return;
    }
    case RowOp::Max:
    case RowOp::Min: {
      const bool mx = p_.op == RowOp::Max;
      // A NaN sticks; otherwise the larger (smaller).
      Combine comb = [&, mx](Value *a, Value *c) {
        Value *better = mx ? b_.CreateFCmpOGT(c, a) : b_.CreateFCmpOLT(c, a);
        Value *takeC = b_.CreateAnd(b_.CreateNot(isNaN(a)), b_.CreateOr(better, isNaN(c)));
        return b_.CreateSelect(takeC, c, a);
      };
      Value *init = llvm::ConstantFP::getInfinity(b_.getDoubleTy(), mx);
      storeFirst(row, blockReduce(partial(base, init, xAt, comb), comb));
      return;
    }
    case RowOp::Softmax: {
      // max ignoring NaN (std::max(m, x) keeps m when x is NaN).
      Combine mx = [&](Value *a, Value *c) { return b_.CreateSelect(b_.CreateFCmpOGT(c, a), c, a); };
      Value *m = blockReduce(partial(base, llvm::ConstantFP::getInfinity(b_.getDoubleTy(), true), xAt, mx), mx);
      auto e = [&](Value *i) { return exp(b_.CreateFSub(xAt(i), m)); };
      Value *sum = blockReduce(partial(base, f64(0), e, add), add);
      loop(tid_, len_, nt_, "out", [&](Value *j) {
        Value *i = b_.CreateAdd(base, j);
        store(i, b_.CreateFDiv(e(i), sum));
      });
      return;
    }
    case RowOp::LayerNorm: {
      Value *n = b_.CreateSIToFP(len_, b_.getDoubleTy());
      Value *mean = b_.CreateFDiv(blockReduce(partial(base, f64(0), xAt, add), add), n);
      auto dev2 = [&](Value *i) {
        Value *d = b_.CreateFSub(xAt(i), mean);
        return b_.CreateFMul(d, d);
      };
      Value *var = b_.CreateFDiv(blockReduce(partial(base, f64(0), dev2, add), add), n);
      Value *sq = b_.CreateIntrinsic(llvm::Intrinsic::sqrt, {b_.getDoubleTy()}, {b_.CreateFAdd(var, f64(p_.eps))});
      Value *inv = b_.CreateFDiv(f64(1), sq);
      loop(tid_, len_, nt_, "out", [&](Value *j) {
        Value *i = b_.CreateAdd(base, j);
        Value *y = b_.CreateFMul(b_.CreateFMul(b_.CreateFSub(xAt(i), mean), inv), load(gamma_, j));
        store(i, b_.CreateFAdd(y, load(beta_, j)));
      });
      return;
    }
    }
  }

  llvm::Module &mod_;
  llvm::LLVMContext &ctx_;
  llvm::IRBuilder<> b_;
  const vm::KernelDesc &k_;
  RowPlan p_;
  llvm::StructType *bufTy_ = nullptr;
  llvm::Function *fn_ = nullptr;
  llvm::GlobalVariable *smem_ = nullptr;
  llvm::BasicBlock *errBB_ = nullptr;
  Value *x_ = nullptr, *out_ = nullptr, *gamma_ = nullptr, *beta_ = nullptr;
  Value *len_ = nullptr, *tid_ = nullptr, *nt_ = nullptr;
};

} // namespace

BlockRows lowerBlockRowKernel(llvm::Module &mod, const vm::KernelDesc &k, const ir::Function &f,
                              const std::string &symbol, bool *perOutput, std::string &reason) {
  RowPlan p;
  if (!plan(k, f, p)) return BlockRows::NotApplicable;
  llvm::Function *fn = Emitter(mod, k, p).emit(symbol);
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyFunction(*fn, &os)) {
    reason = "internal error: the generated block-per-row function is invalid: " + os.str();
    llvm::GlobalVariable *partials = mod.getGlobalVariable(symbol + ".partials", true);
    fn->eraseFromParent();
    if (partials) partials->eraseFromParent();
    return BlockRows::Failed;
  }
  *perOutput = p.op != RowOp::Softmax && p.op != RowOp::LayerNorm;
  return BlockRows::Done;
}

} // namespace nimble::codegen
