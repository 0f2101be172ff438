//===- LibraryConv.cpp - conv kernels through oneDNN ----------------------===//
//
// See LibraryConv.h. oneDNN 2.6's convolution_forward (and, for
// conv_transpose, deconvolution_forward) over plain layouts;
// every call that can throw dnnl::error is inside a try block.
//
//===----------------------------------------------------------------------===//

#include "vm/dispatch/LibraryConv.h"

#include "vm/dispatch/LibraryConvPlan.h"
#include "vm/dispatch/LibraryPostOps.h"
#include "vm/dispatch/NativeKernels.h"
#include "vm/format/Format.h"
#include "vm/support/FailAlloc.h"
#include "vm/support/ThreadPool.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <unordered_map>

extern "C" void omp_set_num_threads(int); // libgomp: oneDNN's threading runtime here
extern "C" int omp_get_max_threads(void);

namespace nimble::vm {

namespace {

using namespace library; // LibraryPostOps.h, LibraryConvPlan.h

struct Entry {
  bool usable = false;
  dnnl::primitive prim; // convolution_forward or deconvolution_forward
  dnnl::memory::desc src, weights, dst, bias; // the tensors' own (plain) layouts
  std::vector<int64_t> outShape;
  std::vector<dnnl::memory::desc> binaries; // one per binary post-op, in order
  std::vector<int> postIndex; // per Plan::post entry: its oneDNN post-op, -1 when folded into a clip
  bool packWeights = false;
  dnnl::memory::desc packedDesc;
  // Blocked form (LibraryConv.h, "Layouts"): the primitive reads and writes
  // its own layouts; src is reordered in, dst out, and a residual of the
  // output's shape is reordered into dst before the call (a `sum` post-op).
  bool blocked = false;
  int64_t sumInput = -1;
  dnnl::memory srcBlk, dstBlk;
  dnnl::reorder srcIn, dstOut, sumIn;
  // The call's memory objects and arguments, made at the first call and
  // given the tensors' addresses on every later one (set_data_handle):
  // creating five memory objects and a map per call was a few µs, and
  // MobileNetV2 runs 52 convolutions of 30-300 µs.
  bool bound = false;
  dnnl::memory srcMem, dstMem, resMem, wMem, biasMem;
  std::vector<dnnl::memory> binMems; // per binary post-op run as one (not the sum)
  std::unordered_map<int, dnnl::memory> args;
  // Split by images (LibraryConv.h, "Threads"): `slices` runs of equally
  // many images, each through `prim` (planned for one thread, its scratchpad
  // the caller's) on one thread of the pool; the memory objects and
  // arguments of each, made at the first call as above.
  int64_t slices = 1;
  size_t srcStep = 0, dstStep = 0; // bytes of one slice's images
  std::vector<std::vector<uint8_t>> scratch;
  std::vector<dnnl::memory> sliceSrc, sliceDst;
  std::vector<std::unordered_map<int, dnnl::memory>> sliceArgs;
  // A fused pair (LibraryConv.h, "Pairs"): the depthwise conv's weights
  // (its tensor's layout and the primitive's) and bias; srcBlk and dstBlk
  // point into buffers from the pool at each call.
  dnnl::memory::desc dwWeights, dwPacked, dwBias;
  dnnl::memory dwBiasMem;
};

/// A bound entry's weights, bias and binary post-op operands given this
/// call's addresses (the split and the whole-batch call alike).
void repointOperands(Entry &e, const Plan &p, const std::vector<Tensor *> &ins) {
  if (!e.packWeights) e.wMem.set_data_handle(ins[p.w]->rawData());
  if (p.bias >= 0) e.biasMem.set_data_handle(ins[p.bias]->rawData());
  size_t bi = 0;
  for (size_t i = 0; i < p.post.size(); ++i) {
    if (!p.post[i].binary || p.post[i].operand == e.sumInput || e.postIndex[i] < 0) continue;
    e.binMems[bi++].set_data_handle(ins[p.post[i].operand]->rawData());
  }
}

/// The last entry kernel k used and its key (ConvKernels::run): a CNN calls
/// each conv kernel with the same shapes every time, found without hashing.
struct Last {
  std::string key;
  Entry *entry = nullptr;
};

struct Packed {
  Ref<Storage> source; // kept alive: the address keeps standing for these bytes
  dnnl::memory::desc from, desc;
  dnnl::memory mem;
};

/// oneDNN's team for one call: one thread while alive when `serial`
/// (primitives created then split their work for one thread; run inline,
/// no parallel region), the VM's --threads again after.
class TeamOf {
public:
  explicit TeamOf(bool serial) : saved_(serial ? omp_get_max_threads() : 0) {
    if (saved_) omp_set_num_threads(1);
  }
  ~TeamOf() {
    if (saved_) omp_set_num_threads(saved_);
  }
  TeamOf(const TeamOf &) = delete;
  TeamOf &operator=(const TeamOf &) = delete;

private:
  int saved_;
};

double serialMacsFromEnv() {
  const char *e = std::getenv("NIMBLE_CONV_SERIAL_MACS");
  return e ? std::atof(e) : ConvKernels::kSerialMacs;
}

} // namespace

struct ConvKernels::Impl {
  const Executable *exe = nullptr;
  std::vector<Plan> plans;
  std::unordered_map<std::string, Entry> cache;
  std::vector<Last> last; // per kernel
  std::string key;        // run()'s, kept for its capacity
  std::unordered_map<const void *, std::vector<Packed>> packed;
  std::vector<dnnl::stream> sliceStreams; // one per slice of a split call
  uint64_t created = 0, packedCount = 0, packedBytes = 0, releasedBytes = 0, splitCalls = 0, pairsFused = 0;
  double creationSeconds = 0, packSeconds = 0;

  const dnnl::memory &packedCopy(const Tensor *t, const dnnl::memory::desc &from, const dnnl::memory::desc &desc,
                                 const dnnl::engine &engine, dnnl::stream &stream) {
    std::vector<Packed> &forms = packed[t->rawData()];
    for (const Packed &pk : forms)
      if (pk.from == from && pk.desc == desc) return pk.mem;
    auto t0 = std::chrono::steady_clock::now();
    Packed pk{t->storage(), from, desc, dnnl::memory(desc, engine)};
    dnnl::memory user(from, engine, t->rawData());
    {
      AllocationFailuresSuspended inOneDnnRegion; // vm/support/FailAlloc.h, "Not counted"
      dnnl::reorder(user, pk.mem).execute(stream, user, pk.mem);
      stream.wait();
    }
    ++packedCount;
    packedBytes += desc.get_size();
    // One resident copy (LibraryConv.h, "Weights"): the original's pages go
    // back to the mapped file once the packed copy holds its values.
    releasedBytes += releaseMappedPages(*exe, t->rawData(), t->numBytes());
    packSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    forms.push_back(std::move(pk));
    return forms.back().mem;
  }

  Status runSplit(Entry &e, const Plan &p, const std::vector<Tensor *> &ins, Tensor *out,
                  const dnnl::engine &engine, ThreadPool &pool, size_t *failedMember, bool *declined);

  /// The primitive for these shapes, in the blocked form when `blocked`
  /// (the chain then must be eltwise ops, broadcast binaries and at most one
  /// residual add); throws dnnl::error when oneDNN has none.
  Entry build(const Plan &p, const std::vector<Tensor *> &ins, const Tensor *out, const dnnl::engine &engine,
              bool blocked, int64_t slices = 1) {
    Entry e;
    const Tensor *x = ins[p.x], *w = ins[p.w];
    const size_t k = x->rank() - 2;
    if (k < 1 || k > 3) throw dnnl::error(dnnl_unimplemented, "spatial rank");
    // channels_last: the tensors' own layout is already one of the direct
    // kernels' (nhwc), no reorders around the call.
    if (blocked && p.last) throw dnnl::error(dnnl_unimplemented, "channels_last: plain");
    Dims xd(x->shape().begin(), x->shape().end()), od(out->shape().begin(), out->shape().end());
    Dims wd(w->shape().begin(), w->shape().end());
    const Dims fullOd = od;
    if (slices > 1) {
      // One slice's images; the primitive runs once per slice.
      if (blocked || !p.last || p.transpose || xd[0] % slices) throw dnnl::error(dnnl_unimplemented, "split");
      xd[0] /= slices;
      od[0] /= slices;
      e.slices = slices;
    }
    e.outShape = out->shape();
    e.src = user(xd, p.last);
    e.dst = user(od, p.last);
    Dims userW = wd;
    if (p.transpose) {
      // oneDNN's (G,) O, I, K.. over ONNX's C x M/G x K.. storage.
      if (blocked) throw dnnl::error(dnnl_unimplemented, "deconvolution: plain layouts");
      const int64_t g = p.groups, mg = wd[1], cg = wd[0] / g;
      int64_t taps = 1;
      for (size_t i = 2; i < wd.size(); ++i) taps *= wd[i];
      Dims spatial(wd.begin() + 2, wd.end()), spStrides = contiguous(spatial);
      Dims strides;
      if (g > 1) {
        userW = {g, mg, cg};
        strides = {cg * mg * taps, taps, mg * taps};
      } else {
        userW = {mg, cg};
        strides = {taps, mg * taps};
      }
      userW.insert(userW.end(), spatial.begin(), spatial.end());
      strides.insert(strides.end(), spStrides.begin(), spStrides.end());
      e.weights = dnnl::memory::desc(userW, dnnl::memory::data_type::f32, strides);
    } else {
      if (p.groups > 1) {
        userW = {p.groups, wd[0] / p.groups};
        userW.insert(userW.end(), wd.begin() + 1, wd.end());
      }
      e.weights = plain(userW);
    }
    Dims st(k, 1), dl(k, 0), pl(k, 0), pr(k, 0);
    for (size_t i = 0; i < k; ++i) {
      if (!p.strides.empty()) st[i] = p.strides[i];
      if (!p.dilations.empty()) dl[i] = p.dilations[i] - 1; // oneDNN counts the gaps
      if (!p.pads.empty()) {
        pl[i] = p.pads[i];
        pr[i] = p.pads[i + k];
      }
      if (p.transpose && !p.outPad.empty()) pr[i] -= p.outPad[i];
      if (pr[i] < 0) throw dnnl::error(dnnl_unimplemented, "output_padding past the end padding");
    }
    dnnl::post_ops ops;
    e.postIndex.assign(p.post.size(), -1);
    for (size_t i = 0; i < p.post.size(); ++i) {
      const PostOp &po = p.post[i];
      float lo, hi;
      if (clipAt(p, ins, i, lo, hi)) {
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, lo, hi);
        ++i;
        continue;
      }
      e.postIndex[i] = ops.len();
      if (!po.binary) {
        ops.append_eltwise(1.0f, po.alg, 0.0f, 0.0f);
        continue;
      }
      const std::vector<int64_t> &s = ins[po.operand]->shape();
      if (s.size() > od.size()) throw dnnl::error(dnnl_invalid_arguments, "rank");
      Dims d(od.size() - s.size(), 1);
      d.insert(d.end(), s.begin(), s.end());
      if ((blocked || p.last) && d == fullOd) {
        // A residual: summed from dst, where it is reordered (copied) first.
        if (po.alg != dnnl::algorithm::binary_add || e.sumInput >= 0)
          throw dnnl::error(dnnl_unimplemented, "blocked: one residual add");
        e.sumInput = po.operand;
        ops.append_sum(1.0f);
        continue;
      }
      // Split: every slice reads the same operand, which must not vary by image.
      if (slices > 1 && d[0] != 1) throw dnnl::error(dnnl_unimplemented, "split: an operand per image");
      dnnl::memory::desc md = user(d, p.last);
      ops.append_binary(po.alg, md);
      e.binaries.push_back(md);
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    // Split: the slices run the one primitive at once, each with its own
    // scratchpad.
    if (slices > 1) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const bool constant = w->storage()->readOnly();
    auto any = [](const Dims &d) {
      return dnnl::memory::desc(d, dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
    };
    dnnl::memory::desc wAny = constant ? any(userW) : e.weights;
    dnnl::memory::desc srcAny = blocked ? any(xd) : e.src, dstAny = blocked ? any(od) : e.dst;
    const auto kind = dnnl::prop_kind::forward_inference;
    if (p.transpose) {
      const int64_t m = od[1];
      std::unique_ptr<dnnl::deconvolution_forward::desc> d;
      const auto alg = dnnl::algorithm::deconvolution_direct;
      if (p.bias >= 0) {
        e.bias = plain({m});
        d.reset(new dnnl::deconvolution_forward::desc(kind, alg, e.src, wAny, e.bias, e.dst, st, dl, pl, pr));
      } else {
        d.reset(new dnnl::deconvolution_forward::desc(kind, alg, e.src, wAny, e.dst, st, dl, pl, pr));
      }
      dnnl::deconvolution_forward::primitive_desc pd(*d, attr, engine);
      if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) throw dnnl::error(dnnl_unimplemented, "reference only");
      if (constant && pd.weights_desc() != e.weights) {
        e.packWeights = true;
        e.packedDesc = pd.weights_desc();
      }
      e.prim = dnnl::deconvolution_forward(pd);
      e.usable = true;
      return e;
    }
    std::unique_ptr<dnnl::convolution_forward::desc> d;
    const auto alg = dnnl::algorithm::convolution_direct;
    if (p.bias >= 0) {
      e.bias = plain({wd[0]});
      d.reset(new dnnl::convolution_forward::desc(kind, alg, srcAny, wAny, e.bias, dstAny, st, dl, pl, pr));
    } else {
      d.reset(new dnnl::convolution_forward::desc(kind, alg, srcAny, wAny, dstAny, st, dl, pl, pr));
    }
    dnnl::convolution_forward::primitive_desc pd(*d, attr, engine);
    if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) throw dnnl::error(dnnl_unimplemented, "reference only");
    // LibraryConv.h, "Implementations": the first jit: implementation after
    // brgconv, or oneDNN's jit_dw for a depthwise conv on AMD, if oneDNN
    // has one for this chain over the same layouts.
    if (preferJit(p, xd, od, wd)) takeImpl(pd, "jit:");
    if (preferJitDw(p, xd, wd)) takeImpl(pd, "jit_dw:");
    if (constant && pd.weights_desc() != e.weights) {
      e.packWeights = true;
      e.packedDesc = pd.weights_desc();
    }
    if (slices > 1) {
      if (!(pd.src_desc() == e.src && pd.dst_desc() == e.dst)) throw dnnl::error(dnnl_unimplemented, "split");
      e.srcStep = e.src.get_size();
      e.dstStep = e.dst.get_size();
      e.scratch.assign(slices, std::vector<uint8_t>(pd.scratchpad_desc().get_size()));
    }
    if (blocked) {
      // Not worth it when oneDNN keeps the plain layouts anyway.
      if (pd.src_desc() == e.src && pd.dst_desc() == e.dst) throw dnnl::error(dnnl_unimplemented, "plain");
      e.blocked = true;
      e.srcBlk = dnnl::memory(pd.src_desc(), engine);
      e.dstBlk = dnnl::memory(pd.dst_desc(), engine);
      e.srcIn = dnnl::reorder(dnnl::reorder::primitive_desc(engine, e.src, engine, pd.src_desc()));
      e.dstOut = dnnl::reorder(dnnl::reorder::primitive_desc(engine, pd.dst_desc(), engine, e.dst));
      if (e.sumInput >= 0)
        e.sumIn = dnnl::reorder(dnnl::reorder::primitive_desc(engine, e.dst, engine, pd.dst_desc()));
    }
    e.prim = dnnl::convolution_forward(pd);
    e.usable = true;
    return e;
  }

  /// A pair as one primitive (LibraryConv.h, "Pairs"): the 1 x 1 conv with
  /// its chain, oneDNN's depthwise post-op and the second chain, over the
  /// layouts oneDNN picks (blocked), x reordered in and y out; throws
  /// dnnl::error when oneDNN has no such primitive other than its reference
  /// one, or only over channels-last layouts (there oneDNN 2.6's fused
  /// kernels compute wrong values: docs/perf.md).
  Entry buildPair(const Plan &p, const std::vector<Tensor *> &ins, const Tensor *out, const dnnl::engine &engine) {
    const Plan &a = p.parts[0], &b = p.parts[1];
    const Tensor *x = ins[a.x], *w1 = ins[a.w], *w2 = ins[b.w];
    if (x->rank() != 4 || w1->rank() != 4 || w2->rank() != 4 || out->rank() != 4)
      throw dnnl::error(dnnl_unimplemented, "pair: 2-D only");
    if (a.bias < 0 || b.bias < 0 || !w1->storage()->readOnly() || !w2->storage()->readOnly())
      throw dnnl::error(dnnl_unimplemented, "pair: constant weights and biases");
    const int64_t m = w1->dim(0), stride = b.strides.empty() ? 1 : b.strides[0];
    const Dims wd2(w2->shape().begin(), w2->shape().end());
    if (b.groups != m || wd2 != Dims{m, 1, 3, 3} || (stride != 1 && stride != 2))
      throw dnnl::error(dnnl_unimplemented, "pair: not a depthwise 3 x 3");
    for (size_t i = 0; i < 2; ++i)
      if ((!b.strides.empty() && b.strides[i] != stride) || (!b.dilations.empty() && b.dilations[i] != 1))
        throw dnnl::error(dnnl_unimplemented, "pair: strides or dilations");
    if (b.pads.size() != 4 || b.pads != std::vector<int64_t>{1, 1, 1, 1})
      throw dnnl::error(dnnl_unimplemented, "pair: padding other than 1");
    Entry e;
    const Dims xd(x->shape().begin(), x->shape().end()), od(out->shape().begin(), out->shape().end());
    const Dims midD = {xd[0], xd[1], xd[2], m};
    e.outShape = out->shape();
    e.src = user(xd, true);
    e.dst = user(od, true);
    const dnnl::memory::desc midUser = user(midD, true);
    e.weights = plain({m, xd[3], 1, 1});
    e.bias = plain({m});
    e.dwWeights = plain({m, 1, 1, 3, 3});
    dnnl::post_ops ops;
    appendPairChain(a, ins, ops);
    const auto f32 = dnnl::memory::data_type::f32;
    ops.append_dw(f32, f32, f32, 3, stride, 1, 0, {});
    appendPairChain(b, ins, ops);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    auto any = [](const dnnl::memory::desc &d) {
      return dnnl::memory::desc(d.dims(), dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
    };
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      any(e.src), any(e.weights), e.bias, any(midUser), {1, 1}, {0, 0}, {0, 0},
                                      {0, 0});
    dnnl::convolution_forward::primitive_desc pd(d, attr, engine);
    // The fused kernel is jit_1x1 (LibraryConv.h, "Pairs"), wherever oneDNN
    // lists it; its reference fusion (ref_fused_convolution: the two convs
    // as two primitives, all an Intel Xeon, Emerald Rapids, is offered, even
    // with oneDNN held to AVX2) is no fusion: the pair then runs as two convs.
    while (std::string(pd.impl_info_str()).rfind("jit_1x1", 0) != 0)
      if (!pd.next_impl()) throw dnnl::error(dnnl_unimplemented, "pair: no fused kernel");
    if (pd.src_desc() == e.src || pd.dst_desc() == e.dst) throw dnnl::error(dnnl_unimplemented, "pair: channels-last");
    if (pd.dst_desc().dims() != e.dst.dims()) throw dnnl::error(dnnl_unimplemented, "pair: output shape");
    e.dwPacked = pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
    e.dwBias = pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS);
    if (e.dwBias != e.bias) throw dnnl::error(dnnl_unimplemented, "pair: bias layout");
    e.packWeights = true;
    e.packedDesc = pd.weights_desc();
    e.blocked = true;
    e.srcIn = dnnl::reorder(dnnl::reorder::primitive_desc(engine, e.src, engine, pd.src_desc()));
    e.dstOut = dnnl::reorder(dnnl::reorder::primitive_desc(engine, pd.dst_desc(), engine, e.dst));
    e.srcBlk = dnnl::memory(pd.src_desc(), engine, DNNL_MEMORY_NONE);
    e.dstBlk = dnnl::memory(pd.dst_desc(), engine, DNNL_MEMORY_NONE);
    e.prim = dnnl::convolution_forward(pd);
    e.usable = true;
    return e;
  }

  Status runOne(uint32_t k, int part, const Plan &p, const std::vector<Tensor *> &ins,
                const std::vector<Tensor *> &outs, const std::vector<Tensor *> &kernelIns,
                const std::vector<Tensor *> &kernelOuts, const dnnl::engine &engine, dnnl::stream &stream,
                ThreadPool *pool, size_t *failedMember, bool *declined);
  Status runPair(uint32_t k, const Plan &p, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs,
                 const dnnl::engine &engine, dnnl::stream &stream, ThreadPool *pool, size_t *failedMember,
                 bool *declined);
};

/// A call split by images (LibraryConv.h, "Threads"): slice i reads and
/// writes images [i * n / slices, (i + 1) * n / slices) of x, the residual
/// and y, all slices at once on the pool's threads, each on its own stream
/// and scratchpad; every other operand (weights, bias, per-channel
/// operands) is the same for all. No exception leaves the parallel region:
/// a slice's failure is kept and reported after it.
Status ConvKernels::Impl::runSplit(Entry &e, const Plan &p, const std::vector<Tensor *> &ins, Tensor *out,
                                   const dnnl::engine &engine, ThreadPool &pool, size_t *failedMember,
                                   bool *declined) {
  const int64_t ns = e.slices;
  const Tensor *res = e.sumInput >= 0 ? ins[e.sumInput] : nullptr;
  uint8_t *y = out->rawData();
  const size_t outBytes = e.dstStep * ns;
  const bool inPlace = res && res->rawData() == y;
  // A residual that overlaps the output without being it: slices would read
  // what others have written (the planner does not do that; declined).
  if (res && !inPlace && res->rawData() < y + outBytes && y < res->rawData() + res->numBytes())
    return Status::success();
  *declined = false;
  while (sliceStreams.size() < static_cast<size_t>(ns)) sliceStreams.emplace_back(engine);
  try {
    AllocationFailuresSuspended inOneDnnRegion; // vm/support/FailAlloc.h, "Not counted"
    if (!e.bound) {
      if (!e.packWeights) e.wMem = dnnl::memory(e.weights, engine, ins[p.w]->rawData());
      if (p.bias >= 0) e.biasMem = dnnl::memory(e.bias, engine, ins[p.bias]->rawData());
      size_t bi = 0;
      for (size_t i = 0; i < p.post.size(); ++i) {
        if (!p.post[i].binary || p.post[i].operand == e.sumInput || e.postIndex[i] < 0) continue;
        e.binMems.push_back(dnnl::memory(e.binaries[bi++], engine, ins[p.post[i].operand]->rawData()));
      }
      e.sliceArgs.resize(ns);
      for (int64_t s = 0; s < ns; ++s) {
        e.sliceSrc.push_back(dnnl::memory(e.src, engine, ins[p.x]->rawData() + s * e.srcStep));
        e.sliceDst.push_back(dnnl::memory(e.dst, engine, y + s * e.dstStep));
        std::unordered_map<int, dnnl::memory> &args = e.sliceArgs[s];
        args.emplace(DNNL_ARG_SRC, e.sliceSrc[s]);
        args.emplace(DNNL_ARG_DST, e.sliceDst[s]);
        if (!e.packWeights) args.emplace(DNNL_ARG_WEIGHTS, e.wMem);
        if (p.bias >= 0) args.emplace(DNNL_ARG_BIAS, e.biasMem);
        size_t bj = 0;
        for (size_t i = 0; i < p.post.size(); ++i) {
          if (!p.post[i].binary || p.post[i].operand == e.sumInput || e.postIndex[i] < 0) continue;
          args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(e.postIndex[i]) | DNNL_ARG_SRC_1, e.binMems[bj++]);
        }
        std::vector<uint8_t> &scratch = e.scratch[s];
        if (!scratch.empty())
          args.emplace(DNNL_ARG_SCRATCHPAD,
                       dnnl::memory(dnnl::memory::desc({static_cast<int64_t>(scratch.size())},
                                                       dnnl::memory::data_type::u8, dnnl::memory::format_tag::a),
                                    engine, scratch.data()));
      }
      e.bound = true;
    } else {
      repointOperands(e, p, ins);
      for (int64_t s = 0; s < ns; ++s) {
        e.sliceSrc[s].set_data_handle(ins[p.x]->rawData() + s * e.srcStep);
        e.sliceDst[s].set_data_handle(y + s * e.dstStep);
      }
    }
    if (e.packWeights) {
      const dnnl::memory &w = packedCopy(ins[p.w], e.weights, e.packedDesc, engine, sliceStreams[0]);
      for (std::unordered_map<int, dnnl::memory> &args : e.sliceArgs) args[DNNL_ARG_WEIGHTS] = w;
    }
  } catch (const dnnl::error &err) {
    if (err.status == dnnl_out_of_memory) throw std::bad_alloc();
    if (failedMember) *failedMember = 0;
    return Status::error(std::string("oneDNN convolution failed: ") + err.what());
  }
  std::vector<dnnl_status_t> failed(ns, dnnl_success);
  std::vector<std::string> what(ns);
  pool.runEach(ns, [&](int64_t s) {
    // The slice's residual into its images of y for the `sum` post-op.
    if (res && !inPlace) std::memcpy(y + s * e.dstStep, res->rawData() + s * e.dstStep, e.dstStep);
    try {
      AllocationFailuresSuspended inOneDnnRegion; // vm/support/FailAlloc.h, "Not counted"
      e.prim.execute(sliceStreams[s], e.sliceArgs[s]);
      sliceStreams[s].wait();
    } catch (const dnnl::error &err) {
      failed[s] = err.status;
      what[s] = err.what();
    }
  });
  ++splitCalls;
  for (int64_t s = 0; s < ns; ++s) {
    if (failed[s] == dnnl_success) continue;
    if (failed[s] == dnnl_out_of_memory) throw std::bad_alloc(); // the VM's out-of-memory error
    if (failedMember) *failedMember = 0;
    return Status::error(std::string("oneDNN convolution failed: ") + what[s]);
  }
  return Status::success();
}

ConvKernels::ConvKernels(const Executable &exe) : impl_(new Impl) {
  impl_->exe = &exe;
  for (const KernelDesc &k : exe.kernels) {
    Plan p = analyze(k);
    impl_->plans.push_back(p.ok ? std::move(p) : analyzePair(k));
  }
  impl_->last.resize(impl_->plans.size() * 4); // per kernel and part (Impl::runOne)
}

ConvKernels::~ConvKernels() = default;

bool ConvKernels::supports(uint32_t k) const { return k < impl_->plans.size() && impl_->plans[k].ok; }

size_t ConvKernels::count() const {
  size_t n = 0;
  for (const Plan &p : impl_->plans) n += p.ok;
  return n;
}

uint64_t ConvKernels::primitivesCreated() const { return impl_->created; }
double ConvKernels::creationSeconds() const { return impl_->creationSeconds; }
double ConvKernels::packSeconds() const { return impl_->packSeconds; }
size_t ConvKernels::primitivesCached() const { return impl_->cache.size(); }
uint64_t ConvKernels::weightsPacked() const { return impl_->packedCount; }
uint64_t ConvKernels::packedBytes() const { return impl_->packedBytes; }
uint64_t ConvKernels::releasedBytes() const { return impl_->releasedBytes; }
uint64_t ConvKernels::splitCalls() const { return impl_->splitCalls; }
uint64_t ConvKernels::pairsFused() const { return impl_->pairsFused; }

Status ConvKernels::run(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs,
                        const dnnl::engine &engine, dnnl::stream &stream, ThreadPool *pool, size_t *failedMember,
                        bool *declined) {
  *declined = true;
  if (!supports(k) || outs.size() != 1) return Status::success();
  const Plan &p = impl_->plans[k];
  for (const Tensor *t : ins)
    if (t->dtype() != DType::F32) return Status::success();
  const Tensor *out = outs[0];
  if (out->dtype() != DType::F32 || out->rank() < 3 || out->storage()->readOnly()) return Status::success();
  for (const Tensor *t : ins)
    for (int64_t d : t->shape())
      if (d == 0) return Status::success();
  for (int64_t d : out->shape())
    if (d == 0) return Status::success();
  if (!p.parts.empty()) return impl_->runPair(k, p, ins, outs, engine, stream, pool, failedMember, declined);
  return impl_->runOne(k, 0, p, ins, outs, ins, outs, engine, stream, pool, failedMember, declined);
}

/// One conv and its chain: kernel k's own (`part` 0) or a pair's first or
/// second conv (1, 2), whose inputs and output are `ins` and `outs`; the
/// kernel's own are `kernelIns` and `kernelOuts` (the shape functions'
/// checks).
Status ConvKernels::Impl::runOne(uint32_t k, int part, const Plan &p, const std::vector<Tensor *> &ins,
                                 const std::vector<Tensor *> &outs, const std::vector<Tensor *> &kernelIns,
                                 const std::vector<Tensor *> &kernelOuts, const dnnl::engine &engine,
                                 dnnl::stream &stream, ThreadPool *pool, size_t *failedMember, bool *declined) {
  *declined = true;
  const Tensor *out = outs[0];
  // Threads (LibraryConv.h): a small conv runs on one thread.
  static const double serialMacs = serialMacsFromEnv();
  const bool serial = omp_get_max_threads() > 1 && convMacs(p, ins, out) < serialMacs;
  const int64_t slices = serial ? 1 : batchSlices(p, ins[p.x], pool ? pool->size() : 1);
  TeamOf team(serial);
  // The key: the kernel, its inputs' shapes, whether the weights are a
  // constant, a clip's bounds, as raw 8-byte words.
  std::string &key = this->key;
  key.clear();
  auto put = [&key](int64_t v) { key.append(reinterpret_cast<const char *>(&v), sizeof v); };
  put(k);
  put(part);
  put(serial);
  put(slices);
  for (const Tensor *t : ins) {
    put(-1 - static_cast<int64_t>(t->rank()));
    for (int64_t d : t->shape()) put(d);
  }
  put(ins[p.w]->storage()->readOnly());
  // A clip's bounds are part of the primitive.
  for (size_t i = 0; i < p.post.size(); ++i) {
    float lo, hi;
    if (clipAt(p, ins, i, lo, hi)) {
      put(static_cast<int64_t>(i));
      key.append(reinterpret_cast<const char *>(&lo), sizeof lo).append(reinterpret_cast<const char *>(&hi), sizeof hi);
      ++i;
    }
  }
  Last &seen = last[k * 4 + part];
  Entry *found = seen.entry && seen.key == key ? seen.entry : nullptr;
  if (!found) {
    auto it = cache.find(key);
    if (it == cache.end()) {
      // The shape functions' checks first (the reference path words a failure).
      std::vector<TensorSig> sigs;
      if (!kernelValueSigs(exe->kernels[k], kernelIns, kernelOuts, sigs)) return Status::success();
      auto t0 = std::chrono::steady_clock::now();
      Entry e;
      if (slices > 1) {
        // Split by images: a primitive planned for one thread (it runs on
        // one), or the whole call's below when oneDNN has none.
        TeamOf one(true);
        try {
          e = build(p, ins, out, engine, false, slices);
        } catch (const dnnl::error &err) {
          if (err.status == dnnl_out_of_memory) throw std::bad_alloc();
          e = Entry();
        }
      }
      // The blocked form first (faster: oneDNN's direct kernels), the plain
      // one when oneDNN has no blocked kernel for this chain.
      for (bool blocked : {true, false}) {
        if (e.usable) break;
        try {
          e = build(p, ins, out, engine, blocked);
          break;
        } catch (const dnnl::error &err) {
          if (err.status == dnnl_out_of_memory) throw std::bad_alloc();
          e = Entry();
        }
      }
      ++created;
      creationSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (cache.size() >= 256) { // a bound, as the matmuls' cache
        cache.clear();
        for (Last &l : last) l.entry = nullptr;
      }
      it = cache.emplace(key, std::move(e)).first;
    }
    found = &it->second;
    seen.key = key;
    seen.entry = found;
  }
  if (found->usable && out->shape() != found->outShape) return Status::success();
  Entry &e = *found;
  if (!e.usable) return Status::success();
  if (!e.blocked && e.sumInput >= 0) {
    // The residual is copied into dst before the call: dst must not
    // overlap another input (the planner does not do that; declined if so).
    const uint8_t *d0 = outs[0]->rawData(), *d1 = d0 + outs[0]->numBytes();
    for (size_t i = 0; i < ins.size(); ++i) {
      if (static_cast<int64_t>(i) == e.sumInput) continue;
      const uint8_t *a0 = ins[i]->rawData(), *a1 = a0 + ins[i]->numBytes();
      if (a0 < d1 && d0 < a1) return Status::success();
    }
  }
  if (e.slices > 1) return runSplit(e, p, ins, outs[0], engine, *pool, failedMember, declined);
  *declined = false;
  try {
    AllocationFailuresSuspended inOneDnnRegion; // vm/support/FailAlloc.h, "Not counted"
    std::unordered_map<int, dnnl::memory> &args = e.args;
    if (!e.bound) {
      e.srcMem = dnnl::memory(e.src, engine, ins[p.x]->rawData());
      e.dstMem = dnnl::memory(e.dst, engine, outs[0]->rawData());
      if (e.blocked && e.sumInput >= 0) e.resMem = dnnl::memory(e.dst, engine, ins[e.sumInput]->rawData());
      args.emplace(DNNL_ARG_SRC, e.blocked ? e.srcBlk : e.srcMem);
      args.emplace(DNNL_ARG_DST, e.blocked ? e.dstBlk : e.dstMem);
      if (!e.packWeights) {
        e.wMem = dnnl::memory(e.weights, engine, ins[p.w]->rawData());
        args.emplace(DNNL_ARG_WEIGHTS, e.wMem);
      }
      if (p.bias >= 0) {
        e.biasMem = dnnl::memory(e.bias, engine, ins[p.bias]->rawData());
        args.emplace(DNNL_ARG_BIAS, e.biasMem);
      }
      size_t bi = 0;
      for (size_t i = 0; i < p.post.size(); ++i) {
        if (!p.post[i].binary || p.post[i].operand == e.sumInput || e.postIndex[i] < 0) continue;
        e.binMems.push_back(dnnl::memory(e.binaries[bi++], engine, ins[p.post[i].operand]->rawData()));
        args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(e.postIndex[i]) | DNNL_ARG_SRC_1, e.binMems.back());
      }
      e.bound = true;
    } else {
      e.srcMem.set_data_handle(ins[p.x]->rawData());
      e.dstMem.set_data_handle(outs[0]->rawData());
      if (e.blocked && e.sumInput >= 0) e.resMem.set_data_handle(ins[e.sumInput]->rawData());
      repointOperands(e, p, ins);
    }
    if (e.blocked) {
      e.srcIn.execute(stream, e.srcMem, e.srcBlk);
      if (e.sumInput >= 0) e.sumIn.execute(stream, e.resMem, e.dstBlk);
    } else if (e.sumInput >= 0 && ins[e.sumInput]->rawData() != outs[0]->rawData()) {
      std::memcpy(outs[0]->rawData(), ins[e.sumInput]->rawData(), e.dst.get_size());
    }
    // The packed copy of this call's weight (a kernel may be called with
    // different constants).
    if (e.packWeights)
      args[DNNL_ARG_WEIGHTS] = packedCopy(ins[p.w], e.weights, e.packedDesc, engine, stream);
    e.prim.execute(stream, args);
    if (e.blocked) e.dstOut.execute(stream, e.dstBlk, e.dstMem);
    stream.wait();
  } catch (const dnnl::error &err) {
    if (err.status == dnnl_out_of_memory) throw std::bad_alloc();
    if (failedMember) *failedMember = 0;
    return Status::error(std::string("oneDNN convolution failed: ") + err.what());
  }
  return Status::success();
}

/// A conv pair (LibraryConv.h, "Pairs"): one fused primitive when
/// fusePair says so and oneDNN has one, else the two convs one after the
/// other through an intermediate from the pool.
Status ConvKernels::Impl::runPair(uint32_t k, const Plan &p, const std::vector<Tensor *> &ins,
                                  const std::vector<Tensor *> &outs, const dnnl::engine &engine,
                                  dnnl::stream &stream, ThreadPool *pool, size_t *failedMember, bool *declined) {
  *declined = true;
  const Plan &a = p.parts[0], &b = p.parts[1];
  const Tensor *x = ins[a.x], *w1 = ins[a.w];
  Tensor *out = outs[0];
  // The first conv is 1 x 1 with stride 1 and no padding (analyzePair): the
  // intermediate is x's shape with w1's output channels.
  if (x->rank() < 3 || w1->rank() != x->rank() || w1->dim(1) != x->shape().back()) return Status::success();
  for (int64_t i = 2; i < w1->rank(); ++i)
    if (w1->dim(i) != 1) return Status::success();
  std::vector<int64_t> mid = x->shape();
  mid.back() = w1->dim(0);
  if (fusePair(b, mid)) {
    std::string &key = this->key;
    key.clear();
    auto put = [&key](int64_t v) { key.append(reinterpret_cast<const char *>(&v), sizeof v); };
    put(k);
    put(3);
    put(ins[a.w]->storage()->readOnly());
    put(ins[b.w]->storage()->readOnly());
    for (const Tensor *t : ins) {
      put(-1 - static_cast<int64_t>(t->rank()));
      for (int64_t d : t->shape()) put(d);
    }
    for (const Plan *q : {&a, &b})
      for (size_t i = 0; i < q->post.size(); ++i) {
        float lo, hi;
        if (clipAt(*q, ins, i, lo, hi)) {
          put(static_cast<int64_t>(i));
          key.append(reinterpret_cast<const char *>(&lo), sizeof lo).append(reinterpret_cast<const char *>(&hi), sizeof hi);
          ++i;
        }
      }
    Last &l = last[k * 4 + 3];
    Entry *found = l.entry && l.key == key ? l.entry : nullptr;
    if (!found) {
      auto it = cache.find(key);
      if (it == cache.end()) {
        std::vector<TensorSig> sigs;
        if (!kernelValueSigs(exe->kernels[k], ins, outs, sigs)) return Status::success();
        auto t0 = std::chrono::steady_clock::now();
        Entry e;
        try {
          e = buildPair(p, ins, out, engine);
        } catch (const dnnl::error &err) {
          if (err.status == dnnl_out_of_memory) throw std::bad_alloc();
          e = Entry(); // the two convs, below
        }
        ++created;
        creationSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (cache.size() >= 256) {
          cache.clear();
          for (Last &m : last) m.entry = nullptr;
        }
        it = cache.emplace(key, std::move(e)).first;
      }
      found = &it->second;
      l.key = key;
      l.entry = found;
    }
    Entry &e = *found;
    if (e.usable && out->shape() == e.outShape) {
      // The blocked source and destination: buffers from the pool, for this call.
      TensorRef srcBuf = makeTensor(DType::U8, {static_cast<int64_t>(e.srcBlk.get_desc().get_size())});
      TensorRef dstBuf = makeTensor(DType::U8, {static_cast<int64_t>(e.dstBlk.get_desc().get_size())});
      if (!srcBuf || !dstBuf) throw std::bad_alloc();
      *declined = false;
      try {
        AllocationFailuresSuspended inOneDnnRegion; // vm/support/FailAlloc.h, "Not counted"
        std::unordered_map<int, dnnl::memory> &args = e.args;
        if (!e.bound) {
          e.srcMem = dnnl::memory(e.src, engine, ins[a.x]->rawData());
          e.dstMem = dnnl::memory(e.dst, engine, out->rawData());
          e.biasMem = dnnl::memory(e.bias, engine, ins[a.bias]->rawData());
          e.dwBiasMem = dnnl::memory(e.dwBias, engine, ins[b.bias]->rawData());
          args.emplace(DNNL_ARG_SRC, e.srcBlk);
          args.emplace(DNNL_ARG_DST, e.dstBlk);
          args.emplace(DNNL_ARG_BIAS, e.biasMem);
          args.emplace(DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, e.dwBiasMem);
          e.bound = true;
        } else {
          e.srcMem.set_data_handle(ins[a.x]->rawData());
          e.dstMem.set_data_handle(out->rawData());
          e.biasMem.set_data_handle(ins[a.bias]->rawData());
          e.dwBiasMem.set_data_handle(ins[b.bias]->rawData());
        }
        e.srcBlk.set_data_handle(srcBuf->rawData());
        e.dstBlk.set_data_handle(dstBuf->rawData());
        args[DNNL_ARG_WEIGHTS] = packedCopy(ins[a.w], e.weights, e.packedDesc, engine, stream);
        args[DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS] =
            packedCopy(ins[b.w], e.dwWeights, e.dwPacked, engine, stream);
        e.srcIn.execute(stream, e.srcMem, e.srcBlk);
        e.prim.execute(stream, args);
        e.dstOut.execute(stream, e.dstBlk, e.dstMem);
        stream.wait();
      } catch (const dnnl::error &err) {
        if (err.status == dnnl_out_of_memory) throw std::bad_alloc();
        if (failedMember) *failedMember = 0;
        return Status::error(std::string("oneDNN convolution failed: ") + err.what());
      }
      ++pairsFused;
      return Status::success();
    }
  }
  // The two convs: the intermediate from the pool, for this call.
  TensorRef m = makeTensor(DType::F32, mid);
  if (!m) throw std::bad_alloc();
  std::vector<Tensor *> midOuts{m.get()};
  Status s = runOne(k, 1, a, ins, midOuts, ins, outs, engine, stream, pool, failedMember, declined);
  if (!s.ok() || *declined) return s;
  std::vector<Tensor *> ins2 = ins;
  ins2.push_back(m.get());
  s = runOne(k, 2, b, ins2, outs, ins, outs, engine, stream, pool, failedMember, declined);
  if (!s.ok() && failedMember) *failedMember += p.second;
  // The first conv ran: a declined second one leaves the kernel to the
  // reference path, which computes both again.
  return s;
}

} // namespace nimble::vm
