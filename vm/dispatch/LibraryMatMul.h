//===- LibraryMatMul.h - The oneDNN matmul path's private parts -*- C++ -*-===//
//
// Private to vm/dispatch/ (LibraryKernels.cpp, LibrarySlices.cpp,
// LibraryPanels.cpp): how a matmul kernel runs on oneDNN (gemm::Plan), the
// cached primitive of one set of shapes (gemm::Entry) and the column slices
// it may split into (gemm::Slice), packed copies of constant weights
// (gemm::Packed), and LibraryKernels::Impl, which holds them. The three files
// are one component split by concern: the whole primitive and the cache
// (LibraryKernels.cpp), the column split over threads (LibrarySlices.cpp),
// and the few-row panel product with its shared weight copies
// (LibraryPanels.cpp, PanelProduct.h). LibraryKernels.h documents the
// behaviour.
//
//===----------------------------------------------------------------------===//

#ifndef NIMBLE_VM_DISPATCH_LIBRARYMATMUL_H
#define NIMBLE_VM_DISPATCH_LIBRARYMATMUL_H

#include "vm/dispatch/LibraryAttention.h"
#include "vm/dispatch/LibraryConv.h"
#include "vm/dispatch/LibraryKernels.h"
#include "vm/dispatch/LibraryPostOps.h"
#include "vm/format/Format.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

extern "C" void omp_set_num_threads(int); // libgomp: oneDNN's threading runtime here
extern "C" int omp_get_max_threads(void);

namespace nimble::vm {
namespace gemm {

using library::PostOp;
using library::contiguous;
using Dims = dnnl::memory::dims;

/// How kernel k runs on oneDNN, decided from its members alone.
struct Plan {
  bool ok = false;
  bool batch = false;
  bool transA = false, transB = false;
  uint32_t lhs = 0, rhs = 0; // kernel inputs
  std::vector<PostOp> post;
};

/// Kernel k's plan: `ok` when it qualifies (LibraryKernels.h).
Plan analyze(const KernelDesc &k);

/// A matmul operand of physical shape `shape`, seen as `rank` dimensions
/// (leading ones added for broadcast batch), its last two swapped if
/// `trans`: the logical dims and their strides.
void operandLayout(const std::vector<int64_t> &shape, size_t rank, bool trans, Dims &dims, Dims &strides);

/// operandLayout's dims and strides as an f32 memory descriptor.
dnnl::memory::desc operandDesc(const std::vector<int64_t> &shape, size_t rank, bool trans);

/// One block of output columns [begin, begin + count) of a split matmul
/// (LibraryKernels.h, "Threads"): a one-thread primitive over a copy of the
/// weights' columns, writing the output's columns either in place
/// (strided) or, below kBlockedSliceRows rows, into a dense block of its
/// own that is then copied into them. The post-ops: a bias row as the
/// primitive's bias, activations as eltwise post-ops, a residual of the
/// output's shape as a `sum` post-op (its columns copied into the output,
/// or the block, first).
struct Slice {
  int64_t begin = 0, count = 0;
  dnnl::matmul prim;
  dnnl::memory::desc lhs, rhs, dst, bias;
  // The weights' columns copied once: in place, into a row-major
  // [..., K, count] block (what the strided-output GEMM reads fastest);
  // blocked, into the layout the primitive chose (format `any`). None when
  // they are that already.
  bool packWeights = false;
  dnnl::memory::desc packedDesc;
  int64_t rhsOffset = 0, dstOffset = 0, biasOffset = 0; // elements
  int64_t biasInput = -1, sumInput = -1;                 // kernel inputs, or -1
  std::vector<uint8_t> scratch; // scratchpad_mode::user: the slices run at once
  // Blocked: the dense [rows, count] output, else empty. A strided output
  // (the columns in place) rules out oneDNN's brgemm kernel, and the
  // gemm:jit that takes it repacks the weights on every call: with few rows
  // that costs more than the second thread gains (docs/perf.md, "BERT-base
  // at two threads: the column split").
  std::vector<float> block;
  // The call's arguments, made at the first call and kept (bindArg).
  std::unordered_map<int, dnnl::memory> args;
};

struct Entry {
  bool usable = false; // false: oneDNN declined these shapes
  dnnl::matmul prim;
  std::vector<dnnl::memory::desc> descs; // lhs, rhs, dst, then one per binary post-op
  // A constant right-hand side (weights) in the layout the primitive chose
  // (format `any`), when that is not the tensor's own: reordered once per
  // constant and kept (Impl::packed).
  bool packWeights = false;
  dnnl::memory::desc packedDesc;
  // Non-empty: the output's columns split over the pool's threads, each
  // block a one-thread primitive, all run at once (used unless the
  // residual overlaps the output other than exactly).
  std::vector<Slice> slices;
  // The whole primitive's arguments, made at the first call and kept
  // (bindArg).
  std::unordered_map<int, dnnl::memory> args;
  std::list<std::string>::iterator lru;
};

/// Points argument `arg` of a call at `data`: the memory object is created
/// at the first call of a cached primitive (or slice) and kept, and a later
/// call only changes its address when the tensor moved. Creating every
/// dnnl::memory and the argument map anew on each call cost about 2 us
/// (allocations, oneDNN's checks), paid on the calling thread before the
/// slices start: at 16 tokens BERT-base makes about 90 such calls a
/// sequence, each of a few hundred microseconds (docs/perf.md, "BERT-base
/// at two threads: fewer costs a call").
inline void bindArg(std::unordered_map<int, dnnl::memory> &args, int arg, const dnnl::memory::desc &desc,
             const dnnl::engine &engine, void *data) {
  auto it = args.find(arg);
  if (it == args.end())
    args.emplace(arg, dnnl::memory(desc, engine, data));
  else if (it->second.get_data_handle() != data)
    it->second.set_data_handle(data);
}

/// Binds argument `arg` to an existing memory object (a packed weight).
inline void bindArg(std::unordered_map<int, dnnl::memory> &args, int arg, const dnnl::memory &mem) {
  auto it = args.find(arg);
  if (it == args.end())
    args.emplace(arg, mem);
  else if (it->second.get() != mem.get())
    it->second = mem;
}

/// A constant's bytes, seen as `from` (its dims and strides in this use: a
/// square weight may be read transposed by one kernel and not by another),
/// in one packed layout `desc`.
struct Packed {
  Ref<Storage> source; // kept alive: the address keeps standing for these bytes
  dnnl::memory::desc from, desc;
  std::shared_ptr<void> buffer; // the copy's bytes (hugeBuffer)
  dnnl::memory mem;
};

/// `bytes` of memory for a packed copy, aligned to 2 MiB and advised into
/// huge pages when that large: a GEMM streams its weights from memory, and
/// with 4 KiB pages every 4 KiB of them is a TLB miss (LibraryKernels.h,
/// "Weights"). Null when out of memory.
std::shared_ptr<void> hugeBuffer(size_t bytes);

/// Whether oneDNN's f32 matmul here is its gemm:jit kernel (CPUs without
/// AVX-512: AMD Zen 2/3, Intel before Skylake-X), whose rate falls by half
/// when an output row is a multiple of a few KiB apart (issue 52, AMD EPYC
/// Zen 3, 128 rows by K = 768, one thread: 87-92 GFLOP/s at N = 384, 768,
/// 1152, 1280 and 2304; 46 at 1024, 45 at 3072 (BERT's FFN), 66 at 1536; at
/// K = 300, N = 2048 (the LSTM's input projection) 46 against 68 at 512:
/// cache-set conflicts of the output's rows). Such matmuls on a constant
/// weight run as slices of at most kNarrowSliceColumns columns, each
/// writing a dense block of its own (LibraryKernels.h, "Threads").
bool narrowSlices();

/// The slices of plan `p` on these shapes for `threads` threads (blocks of
/// a multiple of 16 columns, one AVX-512 register of f32), or none when the
/// matmul does not split: the post-ops have no strided-output form, or
/// oneDNN offers only its reference implementation for one. Each primitive
/// is planned for one thread (it runs on one). Throws dnnl::error.
std::vector<Slice> buildSlices(const Plan &p, const std::vector<Tensor *> &ins, const Tensor *out,
                               int64_t threads, const dnnl::engine &engine);

/// Whether oneDNN computes post-op `alg` as the IR's op does,
/// and so whether its matmul may run plan `p`'s post-ops: not a maximum or
/// minimum, whose oneDNN form (vmaxps / vminps) drops a NaN of one operand
/// and picks between +0 and -0 by position, where the IR's ops give the NaN
/// and the first operand (vm/kernels/Binary.cpp); not a relu, which oneDNN
/// computes as max(x, 0) with a NaN x giving 0 (the IR's relu keeps the
/// NaN, vm/kernels/Elementwise.cpp); not an exp, whose oneDNN form clamps
/// its argument first, so that exp(NaN) is inf. (Its gelu_erf, tanh and
/// logistic keep a NaN: test/codegen/library-nan.test.) Such kernels run on
/// the panel path (PanelProduct.h, which has the IR's max, min and relu) or
/// are declined to native code.
bool oneDnnExact(dnnl::algorithm alg);

/// Whether oneDnnExact holds for every post-op of `p`.
bool oneDnnPostOpsExact(const Plan &p);

} // namespace gemm

struct LibraryKernels::Impl {
  const Executable *exe = nullptr;
  std::vector<gemm::Plan> plans;
  std::unique_ptr<ConvKernels> conv; // the conv groups (LibraryConv.h)
  std::unique_ptr<AttentionKernels> attention; // lone attention members (LibraryAttention.h)
  dnnl::engine engine;
  dnnl::stream stream;
  bool ready = false;
  std::unordered_map<std::string, gemm::Entry> cache;
  std::list<std::string> lru; // most recently used first
  uint64_t created = 0;
  double creationSeconds = 0;
  // gemm::Packed weights, by the constant's address (a few per constant at most:
  // one per layout the primitives of its shapes chose).
  std::unordered_map<const void *, std::vector<gemm::Packed>> packed;
  uint64_t packedCount = 0, packedBytes = 0;
  double packSeconds = 0;
  // One stream per slice of a split matmul (they run at once).
  std::vector<dnnl::stream> sliceStreams;
  uint64_t splitCalls = 0;

  /// The packed copy of the constant `t`'s bytes at `data` read as `from`,
  /// in layout `desc`: found, or made once (in huge pages, see below).
  const dnnl::memory &packedCopy(const Tensor *t, void *data, const dnnl::memory::desc &from,
                                 const dnnl::memory::desc &desc);
  bool runSlices(gemm::Entry &e, const gemm::Plan &p, const std::vector<Tensor *> &ins, Tensor *out, ThreadPool *pool,
                 size_t *failedMember, Status *st);
  // Few-row products on a constant weight (PanelProduct.h): per kernel and
  // shapes, whether the path takes them; the weights' panel copies by the
  // constant's address; one oneDNN eltwise primitive per activation and size.
  struct PanelPlan {
    bool usable = false;
    int64_t m = 0, k = 0, n = 0;
    uint64_t calls = 0; // one-row calls, for the direction of each thread's panels
    std::vector<bool> rowOperand; // per post-op: a binary operand broadcast over the rows
  };
  std::unordered_map<std::string, PanelPlan> panelPlans;
  struct PanelCopy {
    Ref<Storage> source; // kept alive: the address keeps standing for these bytes
    bool transposed;
    int64_t k, n;
    std::shared_ptr<void> buffer;
  };
  std::unordered_map<const void *, std::vector<PanelCopy>> panelCopies;
  std::unordered_map<std::string, dnnl::eltwise_forward> eltwise;
  uint64_t panelCalls = 0;
  const PanelCopy &panelCopy(const Tensor *t, bool transposed, int64_t k, int64_t n);
  dnnl::memory panelWindow(const Tensor *t, const void *data, const dnnl::memory::desc &from,
                           const dnnl::memory::desc &desc, std::shared_ptr<void> &owner);
  PanelPlan &panelPlan(uint32_t k, const gemm::Plan &p, const std::string &key, const std::vector<Tensor *> &ins,
                             const std::vector<Tensor *> &outs);
  bool runPanels(uint32_t k, const gemm::Plan &p, const std::string &key, const std::vector<Tensor *> &ins,
                 const std::vector<Tensor *> &outs, ThreadPool *pool);
  void applyEltwise(dnnl::algorithm alg, Tensor *out);

  /// Once constant `t` has a packed copy, its original pages leave memory
  /// when they are the mapped file's (LibraryKernels.h, "Weights"). Again
  /// after each later packing, which read them back from the file; counted
  /// once per constant.
  void releaseOriginal(const Tensor *t) {
    const size_t bytes = releaseMappedPages(*exe, t->rawData(), t->numBytes());
    if (released.insert(t->rawData()).second) releasedBytes += bytes;
  }
  std::unordered_set<const void *> released;
  uint64_t releasedBytes = 0;
};

} // namespace nimble::vm

#endif // NIMBLE_VM_DISPATCH_LIBRARYMATMUL_H
