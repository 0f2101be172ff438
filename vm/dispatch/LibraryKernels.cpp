//===- LibraryKernels.cpp - Dense kernels through oneDNN ------------------===//
//
// See LibraryKernels.h. oneDNN 2.6's C++ API (dnnl.hpp); every call that can
// throw dnnl::error is inside a try block, so a oneDNN failure is a declined
// call or an error message, never an abort.
//
//===----------------------------------------------------------------------===//

#include "vm/dispatch/LibraryKernels.h"

#include "vm/dispatch/LibraryAttention.h"
#include "vm/dispatch/LibraryConv.h"
#include "vm/dispatch/LibraryPostOps.h"
#include "vm/dispatch/PanelProduct.h"
#include "vm/format/Format.h"
#include "vm/support/FailAlloc.h"
#include "vm/dispatch/NativeKernels.h"
#include "vm/support/ThreadPool.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <list>
#include <new>
#include <unordered_map>
#include <unordered_set>

extern "C" void omp_set_num_threads(int); // libgomp: oneDNN's threading runtime here
extern "C" int omp_get_max_threads(void);

namespace nimble::vm {

namespace {

using library::PostOp;
using library::contiguous;

/// How kernel k runs on oneDNN, decided from its members alone.
struct Plan {
  bool ok = false;
  bool batch = false;
  bool transA = false, transB = false;
  uint32_t lhs = 0, rhs = 0; // kernel inputs
  std::vector<PostOp> post;
};

Plan analyze(const KernelDesc &k) {
  Plan p;
  if (k.members.empty() || k.outputs.size() != 1 || k.upperBound) return p;
  const KernelDesc::Member &mm = k.members[0];
  if (mm.op != OpCode::MatMul && mm.op != OpCode::BatchMatMul) return p;
  if (mm.operands.size() != 2 || mm.attrs.size() != 2 || mm.numResults != 1) return p;
  for (uint32_t v : mm.operands)
    if (!library::f32Input(k, v)) return p;
  p.batch = mm.op == OpCode::BatchMatMul;
  p.transA = mm.attrs[0].getBool();
  p.transB = mm.attrs[1].getBool();
  p.lhs = mm.operands[0];
  p.rhs = mm.operands[1];
  if (!library::matchPostOpChain(k, p.post)) return p;
  p.ok = true;
  return p;
}

using Dims = dnnl::memory::dims;

/// A matmul operand of physical shape `shape`, seen as `rank` dimensions
/// (leading ones added for broadcast batch), its last two swapped if
/// `trans`: the logical dims and their strides.
void operandLayout(const std::vector<int64_t> &shape, size_t rank, bool trans, Dims &dims, Dims &strides) {
  dims.assign(rank - shape.size(), 1);
  dims.insert(dims.end(), shape.begin(), shape.end());
  strides = contiguous(dims);
  if (trans) {
    std::swap(dims[rank - 1], dims[rank - 2]);
    std::swap(strides[rank - 1], strides[rank - 2]);
  }
}

dnnl::memory::desc operandDesc(const std::vector<int64_t> &shape, size_t rank, bool trans) {
  Dims dims, strides;
  operandLayout(shape, rank, trans, dims, strides);
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

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
void bindArg(std::unordered_map<int, dnnl::memory> &args, int arg, const dnnl::memory::desc &desc,
             const dnnl::engine &engine, void *data) {
  auto it = args.find(arg);
  if (it == args.end())
    args.emplace(arg, dnnl::memory(desc, engine, data));
  else if (it->second.get_data_handle() != data)
    it->second.set_data_handle(data);
}

/// Binds argument `arg` to an existing memory object (a packed weight).
void bindArg(std::unordered_map<int, dnnl::memory> &args, int arg, const dnnl::memory &mem) {
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
  std::shared_ptr<void> buffer; // the copy's bytes (HugeBuffer)
  dnnl::memory mem;
};

/// `bytes` of memory for a packed copy, aligned to 2 MiB and advised into
/// huge pages when that large: a GEMM streams its weights from memory, and
/// with 4 KiB pages every 4 KiB of them is a TLB miss (LibraryKernels.h,
/// "Weights"). Null when out of memory.
std::shared_ptr<void> hugeBuffer(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const bool huge = bytes >= kHuge;
  const size_t align = huge ? kHuge : 64;
  const size_t size = (bytes + align - 1) / align * align;
  void *p = std::aligned_alloc(align, size ? size : align);
  if (!p) return nullptr;
#ifdef MADV_HUGEPAGE
  // Advice only (fine if refused), and only for the huge pages the copy
  // fills: a huge page under the tail would be resident whole, and BERT-base's
  // 2.25 MiB weights (768 x 768) would each hold 4 MiB (94 MB more in all,
  // issue 52). The tail stays in small pages.
  if (huge) madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE);
#endif
  return std::shared_ptr<void>(p, [](void *q) { std::free(q); });
}

/// Whether oneDNN's f32 matmul here is its gemm:jit kernel (CPUs without
/// AVX-512: AMD Zen 2/3, Intel before Skylake-X), whose rate falls by half
/// when an output row is a multiple of a few KiB apart (issue 52, AMD EPYC
/// Zen 3, 128 rows by K = 768, one thread: 87-92 GFLOP/s at N = 384, 768,
/// 1152, 1280 and 2304; 46 at 1024, 45 at 3072 (BERT's FFN), 66 at 1536; at
/// K = 300, N = 2048 (the LSTM's input projection) 46 against 68 at 512:
/// cache-set conflicts of the output's rows). Such matmuls on a constant
/// weight run as slices of at most kNarrowSliceColumns columns, each
/// writing a dense block of its own (LibraryKernels.h, "Threads").
bool narrowSlices() {
  static const bool yes = [] {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::sse41 || isa == dnnl::cpu_isa::avx || isa == dnnl::cpu_isa::avx2 ||
           isa == dnnl::cpu_isa::avx2_vnni;
  }();
  return yes;
}

/// The slices of plan `p` on these shapes for `threads` threads (blocks of
/// a multiple of 16 columns, one AVX-512 register of f32), or none when the
/// matmul does not split: the post-ops have no strided-output form, or
/// oneDNN offers only its reference implementation for one. Each primitive
/// is planned for one thread (it runs on one). Throws dnnl::error.
std::vector<Slice> buildSlices(const Plan &p, const std::vector<Tensor *> &ins, const Tensor *out,
                               int64_t threads, const dnnl::engine &engine) {
  const size_t rank = out->shape().size();
  const std::vector<int64_t> &ls = ins[p.lhs]->shape(), &rs = ins[p.rhs]->shape();
  const Dims od(out->shape().begin(), out->shape().end());
  const int64_t n = od.back();
  // The post-ops' forms: a bias row first, then activations, at most one
  // residual of the output's own shape.
  int64_t biasInput = -1, sumInput = -1;
  dnnl::post_ops ops;
  for (size_t i = 0; i < p.post.size(); ++i) {
    const PostOp &po = p.post[i];
    if (!po.binary) {
      ops.append_eltwise(1.0f, po.alg, 0.0f, 0.0f);
      continue;
    }
    if (po.alg != dnnl::algorithm::binary_add) return {};
    const std::vector<int64_t> &s = ins[po.operand]->shape();
    if (s.size() > rank) return {};
    Dims d(rank - s.size(), 1);
    d.insert(d.end(), s.begin(), s.end());
    const bool row = d.back() == n && std::all_of(d.begin(), d.end() - 1, [](int64_t x) { return x == 1; });
    if (i == 0 && row) {
      biasInput = po.operand;
    } else if (d == od && sumInput < 0) {
      ops.append_sum(1.0f);
      sumInput = po.operand;
    } else {
      return {};
    }
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  Dims lhsDims, lhsStrides, rhsDims, rhsStrides;
  operandLayout(ls, rank, p.transA, lhsDims, lhsStrides);
  operandLayout(rs, rank, p.transB, rhsDims, rhsStrides);
  const Dims outStrides = contiguous(od);
  // Slices of whole panels (PanelProduct.h) read windows of the weight's
  // one packed copy, shared with the panel path and the whole primitive, at
  // every row count: blocked (the in-place form from kBlockedSliceRows rows
  // up keeps a row-major copy of its own; LibraryKernels.h, "Weights"). So
  // when the panel path runs here, the weight is 2-D, and whole panels
  // split the columns about evenly (the last slice at least half a share).
  int64_t per = (n / threads + 15) / 16 * 16;
  const bool narrow = narrowSlices();
  if (narrow) {
    // At least one slice a thread, none wider than kNarrowSliceColumns,
    // about even: BERT's 3072 columns as 4 x 768 on one thread and on two
    // (the same slices, so the same bits), the LSTM's 2048 as 688, 688, 672.
    const int64_t count = std::max(threads, (n + LibraryKernels::kNarrowSliceColumns - 1) /
                                                LibraryKernels::kNarrowSliceColumns);
    per = ((n + count - 1) / count + 15) / 16 * 16;
  }
  const int64_t perPanels = ((n + threads - 1) / threads + panel::kWidth - 1) / panel::kWidth * panel::kWidth;
  const bool panelSlices = !narrow && panel::sharedLayout() && rank == 2 && rs.size() == 2 && (threads - 1) * perPanels < n &&
                           2 * (n - (threads - 1) * perPanels) >= perPanels;
  if (panelSlices) per = perPanels;
  const bool blocked =
      narrow || panelSlices || (n ? out->numElements() / n : 0) < LibraryKernels::kBlockedSliceRows;
  std::vector<Slice> slices;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  try {
    for (int64_t b = 0; b < n; b += per) {
      Slice sl;
      sl.begin = b;
      sl.count = std::min(per, n - b);
      sl.biasInput = biasInput;
      sl.sumInput = sumInput;
      sl.lhs = dnnl::memory::desc(lhsDims, dnnl::memory::data_type::f32, lhsStrides);
      Dims rd = rhsDims, dd = od;
      rd.back() = dd.back() = sl.count;
      sl.rhs = dnnl::memory::desc(rd, dnnl::memory::data_type::f32, rhsStrides);
      sl.rhsOffset = b * rhsStrides.back();
      sl.packedDesc = blocked ? dnnl::memory::desc(rd, dnnl::memory::data_type::f32, dnnl::memory::format_tag::any)
                              : dnnl::memory::desc(rd, dnnl::memory::data_type::f32, contiguous(rd));
      sl.dst = dnnl::memory::desc(dd, dnnl::memory::data_type::f32, blocked ? contiguous(dd) : outStrides);
      sl.dstOffset = b;
      std::unique_ptr<dnnl::matmul::desc> d;
      if (biasInput >= 0) {
        Dims bd(rank, 1);
        bd.back() = sl.count;
        sl.bias = dnnl::memory::desc(bd, dnnl::memory::data_type::f32, contiguous(bd));
        sl.biasOffset = b;
        d.reset(new dnnl::matmul::desc(sl.lhs, sl.packedDesc, sl.bias, sl.dst));
      } else {
        d.reset(new dnnl::matmul::desc(sl.lhs, sl.packedDesc, sl.dst));
      }
      dnnl::matmul::primitive_desc pd(*d, attr, engine);
      if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) {
        slices.clear();
        break;
      }
      if (blocked) {
        sl.packedDesc = pd.weights_desc();
        sl.block.assign(sl.dst.get_size() / sizeof(float), 0.0f);
      }
      sl.packWeights = sl.packedDesc != sl.rhs;
      sl.scratch.assign(pd.scratchpad_desc().get_size(), 0);
      sl.prim = dnnl::matmul(pd);
      slices.push_back(std::move(sl));
    }
  } catch (...) {
    omp_set_num_threads(saved);
    throw;
  }
  omp_set_num_threads(saved);
  return slices;
}

} // namespace

struct LibraryKernels::Impl {
  const Executable *exe = nullptr;
  std::vector<Plan> plans;
  std::unique_ptr<ConvKernels> conv; // the conv groups (LibraryConv.h)
  std::unique_ptr<AttentionKernels> attention; // lone attention members (LibraryAttention.h)
  dnnl::engine engine;
  dnnl::stream stream;
  bool ready = false;
  std::unordered_map<std::string, Entry> cache;
  std::list<std::string> lru; // most recently used first
  uint64_t created = 0;
  double creationSeconds = 0;
  // Packed weights, by the constant's address (a few per constant at most:
  // one per layout the primitives of its shapes chose).
  std::unordered_map<const void *, std::vector<Packed>> packed;
  uint64_t packedCount = 0, packedBytes = 0;
  double packSeconds = 0;
  // One stream per slice of a split matmul (they run at once).
  std::vector<dnnl::stream> sliceStreams;
  uint64_t splitCalls = 0;

  /// The packed copy of the constant `t`'s bytes at `data` read as `from`,
  /// in layout `desc`: found, or made once (in huge pages, see below).
  const dnnl::memory &packedCopy(const Tensor *t, void *data, const dnnl::memory::desc &from,
                                 const dnnl::memory::desc &desc);
  bool runSlices(Entry &e, const Plan &p, const std::vector<Tensor *> &ins, Tensor *out, ThreadPool *pool,
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
  PanelPlan &panelPlan(uint32_t k, const Plan &p, const std::string &key, const std::vector<Tensor *> &ins,
                             const std::vector<Tensor *> &outs);
  bool runPanels(uint32_t k, const Plan &p, const std::string &key, const std::vector<Tensor *> &ins,
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

LibraryKernels::LibraryKernels(const Executable &exe) : impl_(new Impl) {
  impl_->exe = &exe;
  impl_->plans.reserve(exe.kernels.size());
  for (const KernelDesc &k : exe.kernels) impl_->plans.push_back(analyze(k));
  impl_->conv.reset(new ConvKernels(exe));
  impl_->attention.reset(new AttentionKernels(exe));
}

LibraryKernels::~LibraryKernels() = default;

bool LibraryKernels::init(std::string &reason) {
  try {
    impl_->engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
    impl_->stream = dnnl::stream(impl_->engine);
    impl_->ready = true;
    return true;
  } catch (const dnnl::error &e) {
    reason = std::string("oneDNN cannot create a CPU engine: ") + e.what();
    return false;
  }
}

bool LibraryKernels::supports(uint32_t k) const {
  return impl_->ready && k < impl_->plans.size() && (impl_->plans[k].ok || impl_->conv->supports(k) || impl_->attention->supports(k));
}

bool LibraryKernels::ruleChoosesLibrary(uint32_t k, const std::vector<Tensor *> &ins) const {
  if (!supports(k)) return false;
  const Plan &p = impl_->plans[k];
  // A conv group (LibraryConv.h) or an attention (LibraryAttention.h):
  // native code generation skips both, so the rule is asked only if that
  // changes; the library path is then the choice, as it is today by default.
  if (!p.ok) return true;
  if (ins.size() <= std::max(p.lhs, p.rhs)) return false;
  const std::vector<int64_t> &ls = ins[p.lhs]->shape(), &rs = ins[p.rhs]->shape();
  if (ls.size() < 2 || rs.size() < 2) return false;
  const size_t l = ls.size(), r = rs.size();
  const int64_t m = p.transA ? ls[l - 1] : ls[l - 2];
  const int64_t kk = p.transA ? ls[l - 2] : ls[l - 1];
  const int64_t n = p.transB ? rs[r - 2] : rs[r - 1];
  // Rows: a batch of lhs matrices against one 2-D weight is one GEMM of all
  // their rows (how oneDNN and the native kernel both run it).
  double rows = static_cast<double>(m);
  if (r == 2 && !p.transA)
    for (size_t i = 0; i + 2 < l; ++i) rows *= static_cast<double>(ls[i]);
  if (rows == 1 && r == 2 && !p.batch && !p.transA && ins[p.rhs]->storage()->readOnly() && panel::oneRow())
    return static_cast<double>(kk) * static_cast<double>(n) >= kRuleOneRowMinWeight; // "One row"
  if (rows < kRuleMinRows) return false;
  if (ins[p.rhs]->storage()->readOnly()) return true;
  return static_cast<double>(m) * static_cast<double>(kk) * static_cast<double>(n) >= kRuleMinComputedMacs;
}

size_t LibraryKernels::count() const {
  size_t n = 0;
  for (const Plan &p : impl_->plans) n += p.ok;
  return n + impl_->conv->count() + impl_->attention->count();
}

void LibraryKernels::setThreads(unsigned n) { omp_set_num_threads(static_cast<int>(n)); }

uint64_t LibraryKernels::primitivesCreated() const { return impl_->created + impl_->conv->primitivesCreated(); }
double LibraryKernels::creationSeconds() const { return impl_->creationSeconds + impl_->conv->creationSeconds(); }
size_t LibraryKernels::primitivesCached() const { return impl_->cache.size() + impl_->conv->primitivesCached(); }
uint64_t LibraryKernels::weightsPacked() const { return impl_->packedCount + impl_->conv->weightsPacked(); }
uint64_t LibraryKernels::packedBytes() const { return impl_->packedBytes + impl_->conv->packedBytes(); }
double LibraryKernels::packSeconds() const { return impl_->packSeconds + impl_->conv->packSeconds(); }
uint64_t LibraryKernels::releasedBytes() const { return impl_->releasedBytes + impl_->conv->releasedBytes(); }
uint64_t LibraryKernels::splitCalls() const { return impl_->splitCalls; }
uint64_t LibraryKernels::panelCalls() const { return impl_->panelCalls; }
uint64_t LibraryKernels::convSplitCalls() const { return impl_->conv->splitCalls(); }
uint64_t LibraryKernels::convPairsFused() const { return impl_->conv->pairsFused(); }

const dnnl::memory &LibraryKernels::Impl::packedCopy(const Tensor *t, void *data, const dnnl::memory::desc &from,
                                                    const dnnl::memory::desc &desc) {
  std::vector<Packed> &forms = packed[data];
  for (const Packed &pk : forms)
    if (pk.from == from && pk.desc == desc) return pk.mem;
  std::shared_ptr<void> owner;
  if (dnnl::memory shared = panelWindow(t, data, from, desc, owner)) {
    forms.push_back(Packed{t->storage(), from, desc, std::move(owner), shared});
    return forms.back().mem;
  }
  auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<void> buffer = hugeBuffer(desc.get_size());
  if (!buffer) throw std::bad_alloc();
  Packed pk{t->storage(), from, desc, buffer, dnnl::memory(desc, engine, buffer.get())};
  dnnl::memory plain(from, engine, data);
  {
    AllocationFailuresSuspended inOneDnnRegion; // vm/support/FailAlloc.h, "Not counted"
    dnnl::reorder(plain, pk.mem).execute(stream, plain, pk.mem);
    stream.wait();
  }
  ++packedCount;
  packedBytes += desc.get_size();
  packSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  forms.push_back(std::move(pk));
  return forms.back().mem;
}

const LibraryKernels::Impl::PanelCopy &LibraryKernels::Impl::panelCopy(const Tensor *t, bool transposed, int64_t k,
                                                                        int64_t n) {
  std::vector<PanelCopy> &forms = panelCopies[t->rawData()];
  for (const PanelCopy &pc : forms)
    if (pc.transposed == transposed && pc.k == k && pc.n == n) return pc;
  auto t0 = std::chrono::steady_clock::now();
  const size_t bytes = panel::packedFloats(k, n) * sizeof(float);
  std::shared_ptr<void> buffer = hugeBuffer(bytes);
  if (!buffer) throw std::bad_alloc();
  panel::pack(t->data<float>(), k, n, transposed, static_cast<float *>(buffer.get()));
  forms.push_back(PanelCopy{t->storage(), transposed, k, n, buffer});
  ++packedCount;
  packedBytes += bytes;
  packSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  releaseOriginal(t);
  return forms.back();
}

/// The panel copy of constant `t` (PanelProduct.h) as oneDNN's packed
/// weights `desc` of `from` (t's bytes at `data` read as K x C), when they
/// are the same bytes: `desc` is BA16a64b, and `from` is t read as K x N,
/// plain or transposed, or its columns [b, b + C) from a panel's first
/// column to a panel's end or N (a slice of a split). Null memory otherwise
/// (another layout, a CPU without the panel kernel, NIMBLE_PANEL_PRODUCT=0):
/// the caller packs a copy of its own. `owner` keeps the copy alive.
dnnl::memory LibraryKernels::Impl::panelWindow(const Tensor *t, const void *data, const dnnl::memory::desc &from,
                                               const dnnl::memory::desc &desc, std::shared_ptr<void> &owner) {
  const dnnl::memory::dims dims = from.dims();
  const std::vector<int64_t> &ts = t->shape();
  if (!panel::sharedLayout() || dims.size() != 2 || ts.size() != 2 || from.data_type() != dnnl::memory::data_type::f32 ||
      from.data.format_kind != dnnl_blocked || from.data.format_desc.blocking.inner_nblks != 0)
    return {};
  const int64_t k = dims[0], c = dims[1];
  if (desc != dnnl::memory::desc(dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::BA16a64b)) return {};
  const dnnl_dims_t &st = from.data.format_desc.blocking.strides;
  const int64_t offset = (static_cast<const float *>(data) - t->data<float>());
  bool transposed;
  int64_t n, b;
  if (ts[0] == k && st[0] == ts[1] && st[1] == 1) { // K x N row-major
    transposed = false, n = ts[1], b = offset;
  } else if (ts[1] == k && st[0] == 1 && st[1] == k && offset % k == 0) { // N x K, read as its transpose
    transposed = true, n = ts[0], b = offset / k;
  } else {
    return {};
  }
  if (b < 0 || b % panel::kWidth != 0 || b + c > n || (c % panel::kWidth != 0 && b + c != n)) return {};
  const PanelCopy &pc = panelCopy(t, transposed, k, n);
  owner = pc.buffer;
  float *window = static_cast<float *>(pc.buffer.get()) + (b / panel::kWidth) * panel::paddedRows(k) * panel::kWidth;
  return dnnl::memory(desc, engine, window);
}

/// Whether kernel `k` on these shapes is a few-row product the panel path
/// takes (PanelProduct.h): a 2-D constant weight, 1 to panel::kMaxSplitRows
/// rows (every dimension of x but the last; past kMaxRows only on an even
/// number of threads, which runPanels checks), x not transposed, and binary
/// post-op operands that are a row of N or of the output's own shape. The
/// members' shape checks are made once, as the oneDNN path makes them.
LibraryKernels::Impl::PanelPlan &LibraryKernels::Impl::panelPlan(uint32_t k, const Plan &p,
                                                                        const std::string &key,
                                                                        const std::vector<Tensor *> &ins,
                                                                        const std::vector<Tensor *> &outs) {
  auto it = panelPlans.find(key);
  if (it != panelPlans.end()) return it->second;
  PanelPlan pp;
  const Tensor *lhs = ins[p.lhs], *rhs = ins[p.rhs], *out = outs[0];
  const std::vector<int64_t> &ls = lhs->shape(), &rs = rhs->shape(), &os = out->shape();
  std::vector<TensorSig> sigs;
  const bool shapesOk = kernelValueSigs(exe->kernels[k], ins, outs, sigs);
  if (shapesOk && panel::enabled() && !p.batch && !p.transA && rs.size() == 2 && ls.size() >= 2 &&
      rhs->storage()->readOnly()) {
    pp.k = p.transB ? rs[1] : rs[0];
    pp.n = p.transB ? rs[0] : rs[1];
    pp.m = ls.back() == pp.k ? lhs->numElements() / pp.k : 0;
    std::vector<int64_t> want(ls.begin(), ls.end() - 1);
    want.push_back(pp.n);
    pp.usable = pp.m >= 1 && pp.m <= panel::kMaxSplitRows && os == want;
    for (const PostOp &po : p.post) {
      if (!pp.usable) break;
      if (!po.binary) {
        pp.rowOperand.push_back(false);
        continue;
      }
      const Tensor *t = ins[po.operand];
      const bool row = t->numElements() == pp.n && !t->shape().empty() && t->shape().size() <= os.size() &&
                       t->shape().back() == pp.n;
      pp.usable = row || t->shape() == os;
      pp.rowOperand.push_back(row);
    }
  }
  if (!pp.usable) pp = PanelPlan();
  if (panelPlans.size() >= 4 * kCacheCapacity) panelPlans.clear(); // bounded under ever-new shapes
  return panelPlans.emplace(key, std::move(pp)).first->second;
}

/// `alg` on every element of `out`, in place: oneDNN's eltwise primitive
/// (vectorized; one per activation and size, kept).
void LibraryKernels::Impl::applyEltwise(dnnl::algorithm alg, Tensor *out) {
  const int64_t count = out->numElements();
  const std::string key = std::to_string(static_cast<int>(alg)) + "|" + std::to_string(count);
  dnnl::memory::desc md({count}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  auto it = eltwise.find(key);
  if (it == eltwise.end()) {
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, alg, md, 0.0f, 0.0f);
    it = eltwise.emplace(key, dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, engine))).first;
  }
  dnnl::memory mem(md, engine, out->rawData());
  AllocationFailuresSuspended inOneDnnRegion; // vm/support/FailAlloc.h, "Not counted"
  it->second.execute(stream, {{DNNL_ARG_SRC, mem}, {DNNL_ARG_DST, mem}});
  stream.wait();
}

namespace {

/// The panel epilogue's form of a binary post-op (matchPostOpChain forms
/// no binary post-op other than these).
panel::Binary panelBinary(const PostOp &po) {
  switch (po.alg) {
  case dnnl::algorithm::binary_mul: return panel::Binary::Mul;
  case dnnl::algorithm::binary_sub: return panel::Binary::Sub;
  case dnnl::algorithm::binary_div: return panel::Binary::Div;
  case dnnl::algorithm::binary_max: return po.operandFirst ? panel::Binary::RMax : panel::Binary::Max;
  case dnnl::algorithm::binary_min: return po.operandFirst ? panel::Binary::RMin : panel::Binary::Min;
  default: return panel::Binary::Add;
  }
}

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
bool oneDnnExact(dnnl::algorithm alg) {
  return alg != dnnl::algorithm::binary_max && alg != dnnl::algorithm::binary_min &&
         alg != dnnl::algorithm::eltwise_relu && alg != dnnl::algorithm::eltwise_exp;
}

bool oneDnnPostOpsExact(const Plan &p) {
  for (const PostOp &po : p.post)
    if (!oneDnnExact(po.alg)) return false;
  return true;
}

} // namespace

/// Runs kernel `k` through the panel path when panelPlan takes it: the
/// product over the pool's threads (whole panels, each to whichever thread
/// is free; past panel::kMaxRows rows, two blocks of rows, each on half the
/// threads), each thread applying the binary post-ops before the first
/// activation to its panels' columns; the rest of the chain over the whole
/// output. False (nothing done) when the path does not take these shapes
/// (past kMaxRows rows: without an even number of threads), or a binary
/// operand overlaps the output (the product would overwrite it before it is
/// read).
bool LibraryKernels::Impl::runPanels(uint32_t k, const Plan &p, const std::string &key,
                                     const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs,
                                     ThreadPool *pool) {
  PanelPlan &pp = panelPlan(k, p, key, ins, outs);
  if (!pp.usable) return false;
  // Activations other than relu go through oneDNN's eltwise primitive
  // (applyEltwise): declined where that is not exact (exp; oneDnnExact).
  for (const PostOp &po : p.post)
    if (!po.binary && po.alg != dnnl::algorithm::eltwise_relu && !oneDnnExact(po.alg)) return false;
  const int64_t np = panel::panels(pp.n);
  const int64_t threads = pool ? std::min<int64_t>(pool->size(), np) : 1;
  if (pp.m > panel::kMaxRows && (threads < 2 || threads % 2)) return false; // oneDNN
  Tensor *out = outs[0];
  const uint8_t *o0 = out->rawData(), *o1 = o0 + out->numBytes();
  for (const PostOp &po : p.post) {
    if (!po.binary) continue;
    const uint8_t *b0 = ins[po.operand]->rawData(), *b1 = b0 + ins[po.operand]->numBytes();
    if (b0 < o1 && o0 < b1) return false;
  }
  const float *w = static_cast<const float *>(panelCopy(ins[p.rhs], p.transB, pp.k, pp.n).buffer.get());
  const float *x = ins[p.lhs]->data<float>();
  float *y = out->data<float>();
  size_t firstUnary = 0;
  while (firstUnary < p.post.size() && p.post[firstUnary].binary) ++firstUnary;
  // Rows [r0, r0 + rows) of panels [q0, q1): the product, then the binary
  // post-ops before the first activation over those columns.
  auto part = [&](int64_t r0, int64_t rows, int64_t q0, int64_t q1, int64_t then) {
    float *yr = y + r0 * pp.n;
    panel::multiply(x + r0 * pp.k, rows, pp.k, pp.n, w, yr, q0, q1, then);
    const int64_t c0 = q0 * panel::kWidth, c1 = std::min(pp.n, q1 * panel::kWidth);
    for (size_t i = 0; i < firstUnary; ++i) {
      const float *b = ins[p.post[i].operand]->data<float>();
      panel::apply(panelBinary(p.post[i]), yr, pp.rowOperand[i] ? b : b + r0 * pp.n, pp.rowOperand[i], rows,
                   pp.n, c0, c1);
    }
  };
  // Panels go to the threads one at a time, whichever is free: a static
  // half each left the first thread waiting at the region's end for 7-12%
  // of its time at BERT-base's 16 tokens (perf: the second thread took 4-7%
  // longer over the same number of cold panels, and starts later). Each
  // output is the same sum whichever thread computes it. Past kMaxRows
  // rows, two blocks of rows (PanelProduct.h, kMaxSplitRows), each on half
  // the threads, which take its panels one at a time.
  if (pp.m == 1) {
    // One row (PanelProduct.h, "One row"): each thread a fixed run of
    // panels, every other call backwards, so that the part of the weight a
    // core read last, still in its L2, is read first (the native kernel's
    // one-row stage does the same, codegen/llvm/KernelMatMul.cpp). Each
    // output is the same sum whatever the order of the panels.
    const bool back = (pp.calls++ & 1) != 0;
    auto run = [&](int64_t q0, int64_t q1) {
      for (int64_t i = q0; i < q1; ++i) {
        const int64_t q = back ? q0 + q1 - 1 - i : i;
        part(0, 1, q, q + 1, -1); // one row prefetches nothing (PanelProduct.h, "Ahead")
      }
    };
    if (threads > 1)
      pool->runEach(threads, [&](int64_t t) { run(np * t / threads, np * (t + 1) / threads); });
    else
      run(0, np);
  } else if (threads > 1) {
    const bool split = pp.m > panel::kMaxRows;
    const int64_t half = split ? (pp.m / 2 + 7) / 8 * 8 : pp.m;
    std::atomic<int64_t> next[2] = {0, 0};
    pool->runEach(threads, [&](int64_t t) {
      const int64_t rb = split ? t % 2 : 0, r0 = rb ? half : 0, rows = rb ? pp.m - half : half;
      // Each thread claims its next panel before it computes this one, so
      // that the product can prefetch it (PanelProduct.h, "Ahead").
      int64_t q = next[rb].fetch_add(1, std::memory_order_relaxed);
      while (q < np) {
        const int64_t after = next[rb].fetch_add(1, std::memory_order_relaxed);
        part(r0, rows, q, q + 1, after < np ? after : -1);
        q = after;
      }
    });
  } else {
    part(0, pp.m, 0, np, -1);
  }
  for (size_t i = firstUnary; i < p.post.size(); ++i) {
    if (p.post[i].binary)
      panel::apply(panelBinary(p.post[i]), y, ins[p.post[i].operand]->data<float>(), pp.rowOperand[i], pp.m,
                   pp.n, 0, pp.n);
    else if (p.post[i].alg == dnnl::algorithm::eltwise_relu)
      panel::relu(y, out->numElements()); // the IR's relu (oneDNN's: NaN -> 0)
    else
      applyEltwise(p.post[i].alg, out);
  }
  ++panelCalls;
  return true;
}

/// Runs the slices of `e` on the pool's threads, each on its own stream and
/// scratchpad; false (nothing done) when a residual overlaps the output
/// without being it (its columns would be overwritten before other slices
/// read them: the whole primitive runs then). No exception may leave the
/// parallel region: a slice's failure is kept and reported after it.
bool LibraryKernels::Impl::runSlices(Entry &e, const Plan &p, const std::vector<Tensor *> &ins, Tensor *out,
                                      ThreadPool *pool, size_t *failedMember, Status *st) {
  const Slice &first = e.slices.front();
  const Tensor *res = first.sumInput >= 0 ? ins[first.sumInput] : nullptr;
  const bool inPlace = res && res->rawData() == out->rawData();
  if (res && !inPlace && res->rawData() < out->rawData() + out->numBytes() &&
      out->rawData() < res->rawData() + res->numBytes())
    return false;
  const size_t ns = e.slices.size();
  while (sliceStreams.size() < ns) sliceStreams.emplace_back(engine);
  auto at = [](const Tensor *t, int64_t offset) {
    return static_cast<void *>(t->rawData() + offset * static_cast<int64_t>(sizeof(float)));
  };
  const uint64_t packedBefore = packedCount;
  for (size_t i = 0; i < ns; ++i) {
    Slice &sl = e.slices[i];
    std::unordered_map<int, dnnl::memory> &args = sl.args;
    bindArg(args, DNNL_ARG_SRC, sl.lhs, engine, at(ins[p.lhs], 0));
    if (sl.packWeights)
      bindArg(args, DNNL_ARG_WEIGHTS, packedCopy(ins[p.rhs], at(ins[p.rhs], sl.rhsOffset), sl.rhs, sl.packedDesc));
    else
      bindArg(args, DNNL_ARG_WEIGHTS, sl.rhs, engine, at(ins[p.rhs], sl.rhsOffset));
    bindArg(args, DNNL_ARG_DST, sl.dst, engine, sl.block.empty() ? at(out, sl.dstOffset) : sl.block.data());
    if (sl.biasInput >= 0) bindArg(args, DNNL_ARG_BIAS, sl.bias, engine, at(ins[sl.biasInput], sl.biasOffset));
    if (!sl.scratch.empty())
      bindArg(args, DNNL_ARG_SCRATCHPAD,
              dnnl::memory::desc({static_cast<int64_t>(sl.scratch.size())}, dnnl::memory::data_type::u8,
                                 dnnl::memory::format_tag::a),
              engine, sl.scratch.data());
  }
  // Every slice has its columns now (they share the original's pages).
  if (packedCount != packedBefore) releaseOriginal(ins[p.rhs]);
  // Rows of the output (every dimension but the last), for the residual's
  // copy into each slice's columns.
  const int64_t n = out->shape().back();
  const int64_t rows = n ? out->numElements() / n : 0;
  std::vector<dnnl_status_t> failed(ns, dnnl_success);
  std::vector<std::string> what(ns);
  auto slice = [&](int64_t i) {
    Slice &sl = e.slices[i];
    const size_t rowBytes = static_cast<size_t>(sl.count) * sizeof(float);
    float *to = out->data<float>() + sl.begin;
    if (res) {
      const float *from = res->data<float>() + sl.begin;
      if (!sl.block.empty())
        for (int64_t r = 0; r < rows; ++r) std::memcpy(sl.block.data() + r * sl.count, from + r * n, rowBytes);
      else if (!inPlace)
        for (int64_t r = 0; r < rows; ++r) std::memcpy(to + r * n, from + r * n, rowBytes);
    }
    try {
      AllocationFailuresSuspended inOneDnnRegion; // vm/support/FailAlloc.h, "Not counted"
      sl.prim.execute(sliceStreams[i], sl.args);
      sliceStreams[i].wait();
      if (!sl.block.empty())
        for (int64_t r = 0; r < rows; ++r) std::memcpy(to + r * n, sl.block.data() + r * sl.count, rowBytes);
    } catch (const dnnl::error &err) {
      failed[i] = err.status;
      what[i] = err.what();
    }
  };
  // One slice a thread, all at once; more slices than threads (narrow
  // slices) as even runs of them, thread t the t-th run.
  const int64_t teams = pool ? std::min<int64_t>(static_cast<int64_t>(pool->size()), static_cast<int64_t>(ns)) : 1;
  const int64_t total = static_cast<int64_t>(ns);
  auto run = [&](int64_t t) {
    for (int64_t i = t * total / teams; i < (t + 1) * total / teams; ++i) slice(i);
  };
  if (teams > 1) pool->runEach(teams, run);
  else run(0);
  ++splitCalls;
  for (size_t i = 0; i < ns; ++i) {
    if (failed[i] == dnnl_success) continue;
    if (failed[i] == dnnl_out_of_memory) throw std::bad_alloc(); // the VM's out-of-memory error
    if (failedMember) *failedMember = 0;
    *st = Status::error("oneDNN matmul failed: " + what[i]);
    return true;
  }
  *st = Status::success();
  return true;
}

Status LibraryKernels::run(uint32_t k, const std::vector<Tensor *> &ins,
                           const std::vector<Tensor *> &outs, ThreadPool *pool, size_t *failedMember,
                           bool *declined) {
  *declined = true;
  Status st = Status::success();
  if (!supports(k)) return Status::success();
  if (impl_->conv->supports(k))
    return impl_->conv->run(k, ins, outs, impl_->engine, impl_->stream, pool, failedMember, declined);
  if (impl_->attention->supports(k)) return impl_->attention->run(k, ins, outs, pool, declined);
  const Plan &p = impl_->plans[k];
  if (outs.size() != 1 || ins.size() <= std::max(p.lhs, p.rhs)) return Status::success();
  // The members' shape checks, exactly as the other paths make them; the
  // reference path words any failure.
  for (const Tensor *t : ins)
    if (t->dtype() != DType::F32) return Status::success();
  const Tensor *out = outs[0];
  if (out->dtype() != DType::F32 || out->rank() < 2 || out->storage()->readOnly()) return Status::success();
  for (const Tensor *t : ins)
    for (int64_t d : t->shape())
      if (d == 0) return Status::success();
  for (int64_t d : out->shape())
    if (d == 0) return Status::success();

  // The cache key: the kernel, every input's shape, and whether the weights
  // are a constant (packed, below: a weight computed by the program, e.g.
  // one a training loop updates, is read in its own layout, since its
  // memory is reused for other values).
  std::string key = std::to_string(k);
  for (const Tensor *t : ins) {
    key += '|';
    for (int64_t d : t->shape()) key += std::to_string(d) + ',';
  }
  if (ins[p.rhs]->storage()->readOnly()) key += "|const";
  try {
    if (impl_->runPanels(k, p, key, ins, outs, pool)) {
      *declined = false;
      return Status::success();
    }
  } catch (const dnnl::error &err) {
    if (err.status == dnnl_out_of_memory) throw std::bad_alloc(); // the VM's out-of-memory error
    *declined = false;
    if (failedMember) *failedMember = 0;
    return Status::error(std::string("oneDNN eltwise failed: ") + err.what());
  }
  if (!oneDnnPostOpsExact(p)) return Status::success(); // declined
  auto it = impl_->cache.find(key);
  if (it == impl_->cache.end()) {
    // Check the shapes with the shape functions before building anything.
    std::vector<TensorSig> sigs;
    if (!kernelValueSigs(impl_->exe->kernels[k], ins, outs, sigs)) return Status::success();
    Entry e;
    auto t0 = std::chrono::steady_clock::now();
    try {
      const size_t rank = out->shape().size();
      const std::vector<int64_t> &ls = ins[p.lhs]->shape(), &rs = ins[p.rhs]->shape();
      if (ls.size() > rank || rs.size() > rank || ls.size() < 2 || rs.size() < 2) throw dnnl::error(dnnl_invalid_arguments, "rank");
      Dims od(out->shape().begin(), out->shape().end());
      e.descs.push_back(operandDesc(ls, rank, p.transA));
      e.descs.push_back(operandDesc(rs, rank, p.transB));
      e.descs.push_back(dnnl::memory::desc(od, dnnl::memory::data_type::f32, contiguous(od)));
      dnnl::post_ops ops;
      for (const PostOp &po : p.post) {
        if (!po.binary) {
          ops.append_eltwise(1.0f, po.alg, 0.0f, 0.0f);
          continue;
        }
        const std::vector<int64_t> &s = ins[po.operand]->shape();
        if (s.size() > rank) throw dnnl::error(dnnl_invalid_arguments, "rank");
        Dims d(rank - s.size(), 1);
        d.insert(d.end(), s.begin(), s.end());
        dnnl::memory::desc md(d, dnnl::memory::data_type::f32, contiguous(d));
        ops.append_binary(po.alg, md);
        e.descs.push_back(md);
      }
      dnnl::primitive_attr attr;
      attr.set_post_ops(ops);
      // Weights that are a constant (the executable's read-only data: every
      // linear layer's W) are offered in any layout: oneDNN then picks its
      // blocked one, which its kernel streams without repacking each block
      // per call (at M = 128, 4-7% faster for BERT's weights, cold;
      // docs/perf.md). The constant is reordered into it once.
      dnnl::memory::desc weights = e.descs[1];
      const bool constant = ins[p.rhs]->storage()->readOnly();
      if (constant)
        weights = dnnl::memory::desc(e.descs[1].dims(), dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
      dnnl::matmul::desc d(e.descs[0], weights, e.descs[2]);
      dnnl::matmul::primitive_desc pd(d, attr, impl_->engine);
      if (constant && pd.weights_desc() != e.descs[1]) {
        e.packWeights = true;
        e.packedDesc = pd.weights_desc();
      }
      e.prim = dnnl::matmul(pd);
      // Split over the pool's threads when the weights are a constant and
      // every thread gets at least kMinSliceColumns columns.
      // Or, where oneDNN runs gemm:jit, in slices of at most
      // kNarrowSliceColumns whatever the thread count (narrowSlices()).
      const int64_t threads = pool ? pool->size() : 1;
      const int64_t cols = out->shape().back();
      if (constant && ((threads > 1 && cols >= threads * kMinSliceColumns) ||
                       (narrowSlices() && cols > kNarrowSliceColumns))) {
        try {
          e.slices = buildSlices(p, ins, out, threads, impl_->engine);
        } catch (const dnnl::error &err) {
          if (err.status == dnnl_out_of_memory) throw;
          e.slices.clear(); // the whole primitive then
        }
      }
      e.usable = true;
    } catch (const dnnl::error &err) {
      // Out of memory is the run's failure, not a property of these shapes:
      // the run ends with the error (a fallback would silently change which
      // kernel computes the result). Anything else is remembered: these
      // shapes stay on the other paths.
      if (err.status == dnnl_out_of_memory) throw std::bad_alloc();
      e.usable = false;
    }
    ++impl_->created;
    impl_->creationSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (impl_->cache.size() >= kCacheCapacity) {
      impl_->cache.erase(impl_->lru.back());
      impl_->lru.pop_back();
    }
    impl_->lru.push_front(key);
    e.lru = impl_->lru.begin();
    it = impl_->cache.emplace(key, std::move(e)).first;
  } else {
    impl_->lru.splice(impl_->lru.begin(), impl_->lru, it->second.lru);
    // A cached shape has passed the checks; the output must still match.
    if (it->second.usable && out->shape() != std::vector<int64_t>(it->second.descs[2].dims()))
      return Status::success();
  }
  Entry &e = it->second;
  if (!e.usable) return Status::success();
  *declined = false;
  try {
    if (!e.slices.empty() && impl_->runSlices(e, p, ins, outs[0], pool, failedMember, &st)) return st;
    std::unordered_map<int, dnnl::memory> &args = e.args;
    bindArg(args, DNNL_ARG_SRC, e.descs[0], impl_->engine, ins[p.lhs]->rawData());
    if (e.packWeights) {
      const uint64_t before = impl_->packedCount;
      bindArg(args, DNNL_ARG_WEIGHTS, impl_->packedCopy(ins[p.rhs], ins[p.rhs]->rawData(), e.descs[1], e.packedDesc));
      if (impl_->packedCount != before) impl_->releaseOriginal(ins[p.rhs]);
    } else {
      bindArg(args, DNNL_ARG_WEIGHTS, e.descs[1], impl_->engine, ins[p.rhs]->rawData());
    }
    bindArg(args, DNNL_ARG_DST, e.descs[2], impl_->engine, out->rawData());
    size_t bi = 3;
    for (size_t i = 0; i < p.post.size(); ++i) {
      if (!p.post[i].binary) continue;
      bindArg(args, DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1, e.descs[bi++],
              impl_->engine, ins[p.post[i].operand]->rawData());
    }
    AllocationFailuresSuspended inOneDnnRegion; // vm/support/FailAlloc.h, "Not counted"
    e.prim.execute(impl_->stream, args);
    impl_->stream.wait();
  } catch (const dnnl::error &err) {
    if (err.status == dnnl_out_of_memory) throw std::bad_alloc(); // the VM's out-of-memory error
    if (failedMember) *failedMember = 0;
    return Status::error(std::string("oneDNN matmul failed: ") + err.what());
  }
  return Status::success();
}

} // namespace nimble::vm
