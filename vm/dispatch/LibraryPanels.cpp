//===- LibraryPanels.cpp - Few-row matmuls as streamed weight panels -----===//
//
// The panel path of the library matmul (LibraryKernels.h, "Few rows";
// PanelProduct.h): a constant weight's one panel copy, shared with oneDNN's
// primitives as their packed weights (Impl::panelCopy, Impl::panelWindow),
// which products of few rows take (Impl::panelPlan), run over the pool's
// threads with the post-op chain (Impl::runPanels). Private parts:
// LibraryMatMul.h.
//
//===----------------------------------------------------------------------===//

#include "vm/dispatch/LibraryMatMul.h"
#include "vm/dispatch/NativeKernels.h"
#include "vm/dispatch/PanelProduct.h"
#include "vm/support/FailAlloc.h"
#include "vm/support/ThreadPool.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <new>

namespace nimble::vm {

using namespace gemm;

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
/// takes (PanelProduct.h): a 2-D constant weight, one row or more (every
/// dimension of x but the last; how many the kernel takes on how many
/// threads, panel::takesRows, runPanels checks), x not transposed, and binary
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
    pp.usable = pp.m >= 1 && os == want;
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
  if (!panel::takesRows(pp.m, threads)) return false; // oneDNN
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
    const int64_t c0 = q0 * panel::width(), c1 = std::min(pp.n, q1 * panel::width());
    for (size_t i = 0; i < firstUnary; ++i) {
      const float *b = ins[p.post[i].operand]->data<float>();
      panel::apply(panelBinary(p.post[i]), yr, pp.rowOperand[i] ? b : b + r0 * pp.n, pp.rowOperand[i], rows,
                   pp.n, c0, c1);
    }
  };
  // Panels go to the threads a claim at a time (below), whichever is free: a static
  // half each left the first thread waiting at the region's end for 7-12%
  // of its time at BERT-base's 16 tokens (perf: the second thread took 4-7%
  // longer over the same number of cold panels, and starts later). Each
  // output is the same sum whichever thread computes it. Past kMaxRows
  // rows with AVX-512, two blocks of rows (PanelProduct.h, kMaxSplitRows),
  // each on half the threads, which take its panels a claim at a time.
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
    const bool split = panel::wide() && pp.m > panel::kMaxRows; // AVX2: whole panels, every row
    const int64_t half = split ? (pp.m / 2 + 7) / 8 * 8 : pp.m;
    std::atomic<int64_t> next[2] = {0, 0};
    pool->runEach(threads, [&](int64_t t) {
      const int64_t rb = split ? t % 2 : 0, r0 = rb ? half : 0, rows = rb ? pp.m - half : half;
      // Each thread claims its next panel before it computes this one, so
      // that the product can prefetch it (PanelProduct.h, "Ahead").
      // A claim is 64 columns: one AVX-512 panel, four AVX2 ones (claims
      // of one 16-column panel, 48 KiB of BERT-base's weights, alternate
      // the two cores' streams more often; 2-4% slower at 74 tokens).
      const int64_t claim = panel::kWidth / panel::width();
      int64_t q = next[rb].fetch_add(claim, std::memory_order_relaxed);
      while (q < np) {
        const int64_t after = next[rb].fetch_add(claim, std::memory_order_relaxed);
        part(r0, rows, q, std::min(np, q + claim), after < np ? after : -1);
        q = after;
      }
    });
  } else {
    // A claim at a time here too, so that the binary post-ops read the
    // claim's columns while they are in L2: over the whole output (BERT-base's
    // 128 x 3072, 1.5 MiB) they were a pass from L3.
    const int64_t claim = panel::kWidth / panel::width();
    for (int64_t q = 0; q < np; q += claim)
      part(0, pp.m, q, std::min(np, q + claim), q + claim < np ? q + claim : -1);
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

} // namespace nimble::vm
