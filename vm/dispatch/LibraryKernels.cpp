//===- LibraryKernels.cpp - Dense kernels through oneDNN ------------------===//
//
// See LibraryKernels.h. oneDNN 2.6's C++ API (dnnl.hpp); every call that can
// throw dnnl::error is inside a try block, so a oneDNN failure is a declined
// call or an error message, never an abort.
//
//===----------------------------------------------------------------------===//

#include "vm/dispatch/LibraryKernels.h"

#include "vm/dispatch/LibraryMatMul.h"
#include "vm/dispatch/PanelProduct.h"
#include "vm/support/FailAlloc.h"
#include "vm/dispatch/NativeKernels.h"
#include "vm/support/ThreadPool.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <new>

namespace nimble::vm {

namespace gemm {

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

bool narrowSlices() {
  static const bool yes = [] {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::sse41 || isa == dnnl::cpu_isa::avx || isa == dnnl::cpu_isa::avx2 ||
           isa == dnnl::cpu_isa::avx2_vnni;
  }();
  return yes;
}

bool oneDnnExact(dnnl::algorithm alg) {
  return alg != dnnl::algorithm::binary_max && alg != dnnl::algorithm::binary_min &&
         alg != dnnl::algorithm::eltwise_relu && alg != dnnl::algorithm::eltwise_exp;
}

bool oneDnnPostOpsExact(const Plan &p) {
  for (const PostOp &po : p.post)
    if (!oneDnnExact(po.alg)) return false;
  return true;
}

} // namespace gemm

using namespace gemm;

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
