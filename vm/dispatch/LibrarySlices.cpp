//===- LibrarySlices.cpp - A oneDNN matmul split into column slices -------===//
//
// The column split of a matmul on a constant weight (LibraryKernels.h,
// "Threads"): one one-thread oneDNN primitive per block of output columns,
// all run at once on the pool's threads (buildSlices, Impl::runSlices).
// Private parts: LibraryMatMul.h.
//
//===----------------------------------------------------------------------===//

#include "vm/dispatch/LibraryMatMul.h"
#include "vm/dispatch/PanelProduct.h"
#include "vm/support/FailAlloc.h"
#include "vm/support/ThreadPool.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstring>
#include <new>

namespace nimble::vm {

namespace gemm {

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

} // namespace gemm

using namespace gemm;

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

} // namespace nimble::vm
