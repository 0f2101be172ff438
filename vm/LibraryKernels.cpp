//===- LibraryKernels.cpp - Dense kernels through oneDNN ------------------===//
//
// See LibraryKernels.h. oneDNN 2.6's C++ API (dnnl.hpp); every call that can
// throw dnnl::error is inside a try block, so a oneDNN failure is a declined
// call or an error message, never an abort.
//
//===----------------------------------------------------------------------===//

#include "vm/LibraryKernels.h"

#include "vm/NativeKernels.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <list>
#include <new>
#include <unordered_map>

extern "C" void omp_set_num_threads(int); // libgomp: oneDNN's threading runtime here

namespace nimble::vm {

namespace {

/// One post-op of the chain after the matmul.
struct PostOp {
  bool binary = false;
  dnnl::algorithm alg = dnnl::algorithm::undef;
  uint32_t operand = 0; // binary: the kernel input it reads
};

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
    if (v >= k.numInputs || v >= k.inputDTypes.size() || k.inputDTypes[v] != DType::F32) return p;
  p.batch = mm.op == OpCode::BatchMatMul;
  p.transA = mm.attrs[0].getBool();
  p.transB = mm.attrs[1].getBool();
  p.lhs = mm.operands[0];
  p.rhs = mm.operands[1];
  uint32_t chain = k.numInputs; // value number of the matmul's result
  // Every value computed inside the kernel is used exactly once, by the next
  // member of the chain, and the last one is the output.
  std::vector<unsigned> uses(k.numInputs + k.members.size(), 0);
  for (const KernelDesc::Member &m : k.members)
    for (uint32_t v : m.operands)
      if (v < uses.size()) ++uses[v];
  for (size_t i = 1; i < k.members.size(); ++i) {
    const KernelDesc::Member &m = k.members[i];
    if (m.numResults != 1 || uses[chain] != 1) return p;
    PostOp po;
    auto unary = [&](dnnl::algorithm a) {
      if (m.operands.size() != 1 || m.operands[0] != chain) return false;
      po.alg = a;
      return true;
    };
    auto binary = [&](dnnl::algorithm a, bool commutative) {
      if (m.operands.size() != 2) return false;
      uint32_t other;
      if (m.operands[0] == chain && m.operands[1] != chain) other = m.operands[1];
      else if (commutative && m.operands[1] == chain && m.operands[0] != chain) other = m.operands[0];
      else return false;
      if (other >= k.numInputs || other >= k.inputDTypes.size() || k.inputDTypes[other] != DType::F32)
        return false;
      po.binary = true;
      po.alg = a;
      po.operand = other;
      return true;
    };
    bool ok = false;
    switch (m.op) {
    case OpCode::Add: ok = binary(dnnl::algorithm::binary_add, true); break;
    case OpCode::Mul: ok = binary(dnnl::algorithm::binary_mul, true); break;
    case OpCode::Sub: ok = binary(dnnl::algorithm::binary_sub, false); break;
    case OpCode::Div: ok = binary(dnnl::algorithm::binary_div, false); break;
    case OpCode::Relu: ok = unary(dnnl::algorithm::eltwise_relu); break;
    case OpCode::Gelu: ok = unary(dnnl::algorithm::eltwise_gelu_erf); break;
    case OpCode::Tanh: ok = unary(dnnl::algorithm::eltwise_tanh); break;
    case OpCode::Sigmoid: ok = unary(dnnl::algorithm::eltwise_logistic); break;
    case OpCode::Exp: ok = unary(dnnl::algorithm::eltwise_exp); break;
    default: break;
    }
    if (!ok) return p;
    p.post.push_back(po);
    chain = k.numInputs + static_cast<uint32_t>(i);
  }
  if (k.outputs[0] != chain) return p;
  p.ok = true;
  return p;
}

using Dims = dnnl::memory::dims;

/// Row-major strides of `d`.
Dims contiguous(const Dims &d) {
  Dims s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

/// A matmul operand of physical shape `shape`, seen as `rank` dimensions
/// (leading ones added for broadcast batch), its last two swapped if `trans`.
dnnl::memory::desc operandDesc(const std::vector<int64_t> &shape, size_t rank, bool trans) {
  Dims phys(rank - shape.size(), 1);
  phys.insert(phys.end(), shape.begin(), shape.end());
  Dims strides = contiguous(phys);
  if (trans) {
    std::swap(phys[rank - 1], phys[rank - 2]);
    std::swap(strides[rank - 1], strides[rank - 2]);
  }
  return dnnl::memory::desc(phys, dnnl::memory::data_type::f32, strides);
}

struct Entry {
  bool usable = false; // false: oneDNN declined these shapes
  dnnl::matmul prim;
  std::vector<dnnl::memory::desc> descs; // lhs, rhs, dst, then one per binary post-op
  // A constant right-hand side (weights) in the layout the primitive chose
  // (format `any`), when that is not the tensor's own: reordered once per
  // constant and kept (Impl::packed).
  bool packWeights = false;
  dnnl::memory::desc packedDesc;
  std::list<std::string>::iterator lru;
};

/// A constant's bytes, seen as `from` (its dims and strides in this use: a
/// square weight may be read transposed by one kernel and not by another),
/// in one packed layout `desc`.
struct Packed {
  Ref<Storage> source; // kept alive: the address keeps standing for these bytes
  dnnl::memory::desc from, desc;
  dnnl::memory mem;
};

} // namespace

struct LibraryKernels::Impl {
  const Executable *exe = nullptr;
  std::vector<Plan> plans;
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
};

LibraryKernels::LibraryKernels(const Executable &exe) : impl_(new Impl) {
  impl_->exe = &exe;
  impl_->plans.reserve(exe.kernels.size());
  for (const KernelDesc &k : exe.kernels) impl_->plans.push_back(analyze(k));
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
  return impl_->ready && k < impl_->plans.size() && impl_->plans[k].ok;
}

size_t LibraryKernels::count() const {
  size_t n = 0;
  for (const Plan &p : impl_->plans) n += p.ok;
  return n;
}

void LibraryKernels::setThreads(unsigned n) { omp_set_num_threads(static_cast<int>(n)); }

uint64_t LibraryKernels::primitivesCreated() const { return impl_->created; }
double LibraryKernels::creationSeconds() const { return impl_->creationSeconds; }
size_t LibraryKernels::primitivesCached() const { return impl_->cache.size(); }
uint64_t LibraryKernels::weightsPacked() const { return impl_->packedCount; }
uint64_t LibraryKernels::packedBytes() const { return impl_->packedBytes; }
double LibraryKernels::packSeconds() const { return impl_->packSeconds; }

Status LibraryKernels::run(uint32_t k, const std::vector<Tensor *> &ins,
                           const std::vector<Tensor *> &outs, size_t *failedMember, bool *declined) {
  *declined = true;
  if (!supports(k)) return Status::success();
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
    std::unordered_map<int, dnnl::memory> args;
    args.emplace(DNNL_ARG_SRC, dnnl::memory(e.descs[0], impl_->engine, ins[p.lhs]->rawData()));
    if (e.packWeights) {
      const void *data = ins[p.rhs]->rawData();
      std::vector<Packed> &forms = impl_->packed[data];
      auto f = std::find_if(forms.begin(), forms.end(),
                            [&](const Packed &pk) { return pk.from == e.descs[1] && pk.desc == e.packedDesc; });
      if (f == forms.end()) {
        auto t0 = std::chrono::steady_clock::now();
        Packed pk{ins[p.rhs]->storage(), e.descs[1], e.packedDesc, dnnl::memory(e.packedDesc, impl_->engine)};
        dnnl::memory plain(e.descs[1], impl_->engine, ins[p.rhs]->rawData());
        dnnl::reorder(plain, pk.mem).execute(impl_->stream, plain, pk.mem);
        impl_->stream.wait();
        ++impl_->packedCount;
        impl_->packedBytes += e.packedDesc.get_size();
        impl_->packSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        forms.push_back(std::move(pk));
        f = forms.end() - 1;
      }
      args.emplace(DNNL_ARG_WEIGHTS, f->mem);
    } else {
      args.emplace(DNNL_ARG_WEIGHTS, dnnl::memory(e.descs[1], impl_->engine, ins[p.rhs]->rawData()));
    }
    args.emplace(DNNL_ARG_DST, dnnl::memory(e.descs[2], impl_->engine, out->rawData()));
    size_t bi = 3;
    for (size_t i = 0; i < p.post.size(); ++i) {
      if (!p.post[i].binary) continue;
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1,
                   dnnl::memory(e.descs[bi++], impl_->engine, ins[p.post[i].operand]->rawData()));
    }
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
