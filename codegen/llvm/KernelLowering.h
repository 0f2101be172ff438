//===- KernelLowering.h - The kernel generator's lowering class (internal) --===//
//
// KernelLowering turns one vm::KernelDesc into one LLVM function (the design
// is in KernelGen.cpp's header). Its members are defined in five files:
//
//   KernelAnalysis.cpp  analyze() (can the kernel be generated, and why not)
//                       and each stage's form (lanes, masked tail)
//   KernelGen.cpp       buffers and shapes, loops, memory, values,
//                       element-wise stages, residue dispatch, emit()
//   KernelParallel.cpp  the thread pool's parallel regions (CPU) and the
//                       NVPTX target hooks (thread ids, temporaries)
//   KernelReduce.cpp    reductions, softmax and layer_norm rows
//   KernelMatMul.cpp    matmul / batch_matmul: the dot product and the
//                       register-tiled stage
//
// Not a public API: only codegen/llvm includes it.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_CODEGEN_LLVM_KERNELLOWERING_H
#define NIMBLE_CODEGEN_LLVM_KERNELLOWERING_H

#include "codegen/llvm/KernelGen.h"
#include "codegen/llvm/Lowering.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <functional>
#include <unordered_set>
#include <string>
#include <vector>

namespace nimble::codegen::detail {

using llvm::Value;

inline bool isReductionLike(OpCode op) {
  switch (op) {
  case OpCode::Sum: case OpCode::Mean: case OpCode::Max: case OpCode::Min: case OpCode::ArgMax:
  case OpCode::Prod: case OpCode::MatMul: case OpCode::BatchMatMul: case OpCode::Softmax: case OpCode::LayerNorm:
    return true;
  default: return false;
  }
}

inline int64_t normAxis(int64_t a, int64_t rank) { return a < 0 ? a + rank : a; }

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
                 const KernelTarget &target, std::vector<bool> gathered = {})
      : mod_(mod), ctx_(mod.getContext()), b_(ctx_), k_(k), f_(f),
        vf_(target.gpu() ? 1 : target.vectorWidth), gpu_(target.gpu()),
        gatherBuf_(std::move(gathered)) {}
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
  // `work`: a rough count of the stage's inner operations; the region runs
  // on the pool from `minWork` on (KernelParallel.cpp).
  static constexpr int64_t kParallelWork = 1 << 16;
  static constexpr int64_t kParallelMatMulWork = 1 << 18;
  void parallel(const char *name, Value *n, Value *work, std::vector<Value *> &carry,
                const std::function<void(Value *, Value *)> &body, int64_t minWork = kParallelWork);
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
  /// Element offset of idx in a dense buffer laid out like v, from axis
  /// `from` on (axes before it contribute nothing).
  Value *offsetOf(uint32_t v, const Index &idx, Value *&laneStep, size_t from = 0);
  Value *load(uint32_t v, const Index &idx, unsigned lanes) { return loadFrom(v, data_[v], idx, lanes); }
  /// Loads idx of a buffer laid out like v at `base` (dense, or a row table).
  Value *loadFrom(uint32_t v, Value *base, const Index &idx, unsigned lanes);
  void store(uint32_t v, Value *ptr, const Index &idx, Value *val, unsigned lanes);
  // --- gather fusion (lowerGatheredKernel): pointers that are row tables
  bool isGathered(Value *p) const { return p && gatheredPtrs_.count(p) != 0; }
  void markGathered(Value *p) { gatheredPtrs_.insert(p); }
  /// The address of row `row` of the row table `table` (an invariant load).
  Value *rowOf(Value *table, Value *row);
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
  // Float matmul tiles. With a `sibling` (matMulSibling(v)), its product
  // too, in the same tiles: each row of B read once for both.
  bool emitMatMulStage(uint32_t v, Value *dest, uint32_t sibling = kNoSibling, Value *siblingDest = nullptr);
  static constexpr uint32_t kNoSibling = ~0u;
  uint32_t matMulSibling(uint32_t v) const;
  void emitVectorRow(const vm::KernelDesc::Member &m, uint32_t x, uint32_t v, Value *dest,
                     Index idx, int64_t axis);
  unsigned stageLanes(uint32_t v);
  bool prefersScalarPoints(uint32_t v);
  /// Whether the innermost loop (axis `axis`) of stage v, stored to `dests`,
  /// may end in one masked vector step in place of the residue dispatch:
  /// every member inline in v computes a lane with the ops of a scalar point
  /// (no per-lane libm call, no error branch a masked-off lane could take,
  /// nothing computed lane by lane) and every buffer it touches has 4- or
  /// 8-byte elements (AVX2 and AVX-512F mask those).
  bool maskedTailOk(uint32_t v, const std::vector<Value *> &dests, size_t axis);
  bool maskableValue(uint32_t v);

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
  // The lanes that are points in a masked tail step (<VF x i1>), null
  // elsewhere: loads and stores of that step are masked by it.
  Value *tailMask_ = nullptr;
  bool inParallel_ = false; // emitting the body of a parallel() region
  std::vector<std::pair<Value *, Value *>> assumptions_; // dims assumed equal
  std::vector<llvm::AllocaInst *> temps_; // allocas holding malloc'd temporaries
  std::vector<bool> gatherBuf_;           // per ABI buffer: its data is a row table
  std::unordered_set<Value *> gatheredPtrs_;
};

} // namespace nimble::codegen::detail

#endif // NIMBLE_CODEGEN_LLVM_KERNELLOWERING_H
