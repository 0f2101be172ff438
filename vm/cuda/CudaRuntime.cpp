//===- CudaRuntime.cpp - Device memory, copies, launches and cuBLAS calls -===//
//
// See CudaRuntime.h. Seed 000 §3.3 / appendix B (heterogeneous execution:
// device placement, device_copy, shape functions kept on the CPU).
//
//===----------------------------------------------------------------------===//

#include "vm/cuda/CudaRuntime.h"

#include "ir/Limits.h"
#include "vm/KernelABI.h"
#include "vm/dispatch/NativeKernels.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <unordered_map>

namespace nimble::vm::cuda {

namespace {

constexpr unsigned kThreadsPerBlock = 256;
constexpr unsigned kMaxBlocks = 1u << 20; // grid-stride loops cover the rest
constexpr int64_t kMaxRowBlocks = 65535;  // block-per-row kernels loop over rows past it
constexpr size_t kStatusWords = 4096;     // launches between two status checks
constexpr size_t kRingBytes = size_t(4) << 20;
constexpr CUresult kOutOfMemory = 2;      // CUDA_ERROR_OUT_OF_MEMORY

CUdeviceptr devicePtr(const void *p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }
CUdeviceptr devicePtr(const Tensor &t) { return devicePtr(t.rawData()); }

/// The device's pool: size classes over cuMemAlloc (vm/support/Allocator.h's
/// poolSizeClass). cuMemAlloc aligns to 256 bytes; a request aligned to more
/// is over-allocated and its base remembered.
class DevicePool final : public Allocator {
public:
  explicit DevicePool(const Driver *d) : drv_(d) {}
  ~DevicePool() override { releaseAll(); }

  void *allocate(size_t size, size_t align) override {
    const size_t cls = poolSizeClass(std::max<size_t>(size, 1));
    const bool pooled = align <= 256 && cls >= size;
    ++stats_.allocations;
    stats_.bytesAllocated += size;
    stats_.bytesLive += size;
    stats_.peakBytes = std::max(stats_.peakBytes, stats_.bytesLive);
    if (pooled) {
      std::vector<CUdeviceptr> &list = free_[cls];
      if (!list.empty()) {
        CUdeviceptr p = list.back();
        list.pop_back();
        ++stats_.poolHits;
        return reinterpret_cast<void *>(static_cast<uintptr_t>(p));
      }
    }
    const size_t bytes = pooled ? cls : size + align;
    CUdeviceptr base = 0;
    CUresult r = drv_->memAlloc(&base, bytes);
    if (r == kOutOfMemory) {
      releaseCached();
      r = drv_->memAlloc(&base, bytes);
    }
    if (r != 0 || !base) {
      stats_.bytesLive -= size;
      return nullptr;
    }
    ++stats_.systemAllocations;
    stats_.bytesReserved += bytes;
    stats_.peakReserved = std::max(stats_.peakReserved, stats_.bytesReserved);
    if (pooled) return reinterpret_cast<void *>(static_cast<uintptr_t>(base));
    CUdeviceptr aligned = (base + align - 1) / align * align;
    unpooled_[aligned] = {base, bytes};
    return reinterpret_cast<void *>(static_cast<uintptr_t>(aligned));
  }

  void deallocate(void *p, size_t size, size_t align) override {
    if (!p) return;
    stats_.bytesLive -= size;
    CUdeviceptr d = devicePtr(p);
    if (auto it = unpooled_.find(d); it != unpooled_.end()) {
      drv_->memFree(it->second.first);
      stats_.bytesReserved -= it->second.second;
      unpooled_.erase(it);
      return;
    }
    (void)align;
    free_[poolSizeClass(std::max<size_t>(size, 1))].push_back(d);
  }

  vm::Device device() const override { return vm::Device::CUDA; }
  const char *kindName() const override { return "cuda-pool"; }
  AllocStats stats() const override { return stats_; }
  void resetStats() override {
    AllocStats s;
    s.bytesLive = stats_.bytesLive;
    s.peakBytes = stats_.bytesLive;
    s.bytesReserved = stats_.bytesReserved;
    s.peakReserved = stats_.bytesReserved;
    stats_ = s;
  }
  void releaseCached() override {
    for (auto &[cls, list] : free_) {
      for (CUdeviceptr p : list) drv_->memFree(p);
      stats_.bytesReserved -= cls * list.size();
      list.clear();
    }
  }

private:
  void releaseAll() {
    releaseCached();
    for (auto &[p, base] : unpooled_) drv_->memFree(base.first);
    unpooled_.clear();
  }
  const Driver *drv_;
  std::unordered_map<size_t, std::vector<CUdeviceptr>> free_;
  std::unordered_map<CUdeviceptr, std::pair<CUdeviceptr, size_t>> unpooled_;
  AllocStats stats_;
};

/// Rows and columns of a matmul operand's matrices as stored (the last two
/// dimensions), and the number of matrices it holds.
struct Operand {
  int64_t rows = 0, cols = 0, batch = 1;
};

Operand operandOf(const Tensor &t) {
  Operand o;
  const auto &s = t.shape();
  o.rows = s[s.size() - 2];
  o.cols = s[s.size() - 1];
  for (size_t i = 0; i + 2 < s.size(); ++i) o.batch *= s[i];
  return o;
}

bool fitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

} // namespace

std::unique_ptr<DeviceRuntime> DeviceRuntime::open(const Executable &exe, int ordinal, std::string &error) {
  std::unique_ptr<DeviceRuntime> rt(new DeviceRuntime);
  rt->exe_ = &exe;
  rt->drv_ = loadDriver(error);
  if (!rt->drv_ || !openDevice(ordinal, rt->device_, error)) return nullptr;
  rt->pool_ = std::make_unique<DevicePool>(rt->drv_);
  rt->entryOf_.assign(exe.kernels.size(), -1);
  bool needsCublas = false;
  for (size_t i = 0; i < exe.cuda.entries.size(); ++i) {
    const CudaCode::Entry &en = exe.cuda.entries[i];
    if (en.kernel < rt->entryOf_.size()) rt->entryOf_[en.kernel] = static_cast<int>(i);
    needsCublas |= en.kind != CudaCode::Kind::Generated;
  }
  if (!exe.cuda.empty() && !loadModule(exe.cuda, rt->module_, rt->functions_, error)) return nullptr;
  if (needsCublas) {
    rt->blas_ = loadCublas(error);
    if (!rt->blas_) return nullptr;
    if (cublasStatus s = rt->blas_->create(&rt->blasHandle_); s != 0) {
      error = "cuBLAS " + rt->blas_->path + " cannot create a handle: " + rt->blas_->statusName(s);
      return nullptr;
    }
    if (cublasStatus s = rt->blas_->setStream(rt->blasHandle_, nullptr); s != 0) {
      error = "cuBLAS cannot use the default stream: " + rt->blas_->statusName(s);
      return nullptr;
    }
  }
  // The argument ring and the status words, zeroed.
  if (CUresult r = rt->drv_->memAlloc(&rt->ring_, kRingBytes); r != 0) {
    error = "cannot allocate " + std::to_string(kRingBytes) + " bytes on cuda:" + std::to_string(ordinal) +
            " for kernel arguments: " + rt->drv_->errorName(r);
    return nullptr;
  }
  rt->ringSize_ = kRingBytes;
  if (CUresult r = rt->drv_->memAlloc(&rt->status_, kStatusWords * sizeof(int32_t)); r != 0) {
    error = "cannot allocate the kernels' status words on cuda:" + std::to_string(ordinal) + ": " +
            rt->drv_->errorName(r);
    return nullptr;
  }
  if (Status st = rt->zero(rt->status_, kStatusWords * sizeof(int32_t)); !st.ok()) {
    error = st.message;
    return nullptr;
  }
  if (CUresult r = rt->drv_->ctxSynchronize(); r != 0) {
    error = "cuda:" + std::to_string(ordinal) + " failed: " + rt->drv_->errorName(r);
    return nullptr;
  }
  return rt;
}

DeviceRuntime::~DeviceRuntime() {
  if (!drv_) return;
  drv_->ctxSynchronize();
  constants_.clear(); // their blocks go back to the pool, which then frees everything
  pool_.reset();
  if (blas_ && blasHandle_) blas_->destroy(blasHandle_);
  if (ring_) drv_->memFree(ring_);
  if (status_) drv_->memFree(status_);
}

Allocator &DeviceRuntime::allocator() { return *pool_; }

bool DeviceRuntime::runsOnDevice(uint32_t k) const { return k < entryOf_.size() && entryOf_[k] >= 0; }

Status DeviceRuntime::driverError(const char *what, CUresult r) const {
  return Status::error(std::string(what) + " on cuda:" + std::to_string(device_.ordinal) + " failed: " +
                       drv_->errorName(r));
}

Status DeviceRuntime::zero(CUdeviceptr p, size_t bytes) {
  static const std::vector<uint8_t> zeros(64 << 10, 0);
  for (size_t done = 0; done < bytes;) {
    size_t n = std::min(bytes - done, zeros.size());
    if (CUresult r = drv_->memcpyHtoDAsync(p + done, zeros.data(), n, nullptr); r != 0)
      return driverError("clearing device memory", r);
    done += n;
  }
  return Status::success();
}

Status DeviceRuntime::copy(const Tensor &src, vm::Device to, TensorRef &out, LaunchSite *earlier) {
  const size_t bytes = src.numBytes();
  Allocator &dst = to == vm::Device::CUDA ? *pool_ : defaultAllocator(vm::Device::CPU);
  void *p = dst.allocate(bytes, 64);
  if (!p)
    return Status::error("out of memory allocating " + std::to_string(bytes) + " bytes on " +
                         (to == vm::Device::CUDA ? "cuda:" + std::to_string(device_.ordinal) : std::string("cpu")));
  out = TensorRef(new Tensor(src.dtype(), src.shape(), Ref<Storage>(new Storage(&dst, p, bytes, to)), 0));
  return copyInto(src, *out, earlier);
}

Status DeviceRuntime::copyInto(const Tensor &src, Tensor &dstTensor, LaunchSite *earlier) {
  const size_t bytes = src.numBytes();
  if (dstTensor.numBytes() != bytes || dstTensor.dtype() != src.dtype())
    return Status::error("device_copy of " + src.typeString() + " into " + dstTensor.typeString());
  if (bytes == 0) return Status::success();
  void *p = dstTensor.rawData();
  const vm::Device to = dstTensor.device();
  if (src.device() == vm::Device::CPU && to == vm::Device::CUDA) {
    stats_.bytesToDevice += bytes;
    if (CUresult r = drv_->memcpyHtoDAsync(devicePtr(p), src.rawData(), bytes, nullptr); r != 0)
      return driverError("device_copy from cpu", r);
  } else if (src.device() == vm::Device::CUDA && to == vm::Device::CPU) {
    // Kernels launched before the copy report their failures first.
    if (Status st = synchronize(earlier); !st.ok()) return st;
    stats_.bytesToHost += bytes;
    if (CUresult r = drv_->memcpyDtoH(p, devicePtr(src), bytes); r != 0) return driverError("device_copy to cpu", r);
  } else if (src.device() == vm::Device::CUDA && to == vm::Device::CUDA) {
    if (CUresult r = drv_->memcpyDtoDAsync(devicePtr(p), devicePtr(src), bytes, nullptr); r != 0)
      return driverError("device_copy", r);
  } else {
    std::memcpy(p, src.rawData(), bytes);
  }
  return Status::success();
}

Status DeviceRuntime::synchronize(LaunchSite *failed) {
  ++stats_.synchronizations;
  if (CUresult r = drv_->ctxSynchronize(); r != 0) return driverError("a kernel", r);
  ringUsed_ = 0;
  if (pending_.empty()) return Status::success();
  std::vector<int32_t> words(pending_.size());
  if (CUresult r = drv_->memcpyDtoH(words.data(), status_, words.size() * sizeof(int32_t)); r != 0)
    return driverError("reading the kernels' status", r);
  std::vector<LaunchSite> sites;
  sites.swap(pending_);
  if (Status st = zero(status_, words.size() * sizeof(int32_t)); !st.ok()) return st;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == 0) continue;
    if (failed) {
      *failed = sites[i];
      failed->set = true;
    }
    const KernelDesc &k = exe_->kernels[sites[i].kernel];
    return Status::error("kernel '" + k.name + "' failed on cuda:" + std::to_string(device_.ordinal) +
                         " (its status word is " + std::to_string(words[i]) + ")");
  }
  return Status::success();
}

Status DeviceRuntime::launch(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs,
                             const LaunchSite &site, LaunchSite *earlier, bool *declined) {
  const KernelDesc &kd = exe_->kernels[k];
  if (!runsOnDevice(k)) return Status::error("kernel '" + kd.name + "' has no device code");
  // Operands in host memory: place-devices leaves constants (weights, and
  // scalars such as an arange's bounds) where they are, for the runtime to
  // upload. A constant (read-only storage: the executable's data) is
  // uploaded once and kept; anything else is copied for this call, and a
  // host output is written back after the kernel.
  bool staged = false;
  for (const Tensor *t : ins) staged |= t->device() != vm::Device::CUDA;
  for (const Tensor *t : outs) staged |= t->device() != vm::Device::CUDA;
  *declined = false;
  if (!staged) return launchOnDevice(k, ins, outs, site, earlier, declined);
  std::vector<TensorRef> keep;
  std::vector<Tensor *> dins(ins), douts(outs);
  for (Tensor *&t : dins) {
    if (t->device() == vm::Device::CUDA) continue;
    ++stats_.stagedOperands;
    TensorRef d;
    if (t->storage()->readOnly()) {
      ConstantKey key{t->rawData(), t->numBytes()};
      auto it = constants_.find(key);
      if (it == constants_.end()) {
        TensorRef whole;
        if (Status st = copy(*t, vm::Device::CUDA, whole, earlier); !st.ok()) return st;
        // The host storage is kept with its copy: read-only bytes that stay
        // alive cannot change, and their address cannot be reused for other
        // bytes (a scalar the VM does not cache is freed with its tensor).
        it = constants_.emplace(key, CachedConstant{whole, t->storage()}).first;
      }
      // The cached bytes under this call's dtype and shape.
      d = TensorRef(new Tensor(t->dtype(), t->shape(), it->second.device->storage(), it->second.device->offset()));
    } else if (Status st = copy(*t, vm::Device::CUDA, d, earlier); !st.ok()) {
      return st;
    }
    keep.push_back(d);
    t = d.get();
  }
  for (Tensor *&t : douts) {
    if (t->device() == vm::Device::CUDA) continue;
    ++stats_.stagedOperands;
    void *p = pool_->allocate(t->numBytes(), 64);
    if (!p) return Status::error("out of memory allocating " + std::to_string(t->numBytes()) + " bytes on cuda");
    TensorRef d(new Tensor(t->dtype(), t->shape(), Ref<Storage>(new Storage(pool_.get(), p, t->numBytes(), vm::Device::CUDA)), 0));
    keep.push_back(d);
    t = d.get();
  }
  if (Status st = launchOnDevice(k, dins, douts, site, earlier, declined); !st.ok() || *declined) return st;
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i] != douts[i])
      if (Status st = copyInto(*douts[i], *outs[i], earlier); !st.ok()) return st;
  return Status::success();
}

Status DeviceRuntime::launchOnDevice(uint32_t k, const std::vector<Tensor *> &ins,
                                     const std::vector<Tensor *> &outs, const LaunchSite &site,
                                     LaunchSite *earlier, bool *declined) {
  const KernelDesc &kd = exe_->kernels[k];
  const CudaCode::Entry &en = exe_->cuda.entries[static_cast<size_t>(entryOf_[k])];
  if (en.kind != CudaCode::Kind::Generated) {
    std::vector<TensorSig> sigs; // the shape check (no data read: matmul's shapes are static relations)
    if (!kernelValueSigs(kd, ins, outs, sigs)) {
      *declined = true;
      return Status::success();
    }
    return gemm(k, ins, outs);
  }

  // The descriptors (vm/KernelABI.h, as runNativeKernel passes them): one
  // per value of the kernel (its inputs, then every member's results, with
  // the types the members' shape functions give on these inputs; the
  // kernel computes the intermediate ones itself, so their data is null),
  // then one per output; then each descriptor's shape and strides.
  // kernelValueSigs reads the inputs of data-dependent members (a shape
  // operand): those on the device are read through host copies.
  std::vector<Tensor *> sigIns(ins);
  std::vector<TensorRef> hostCopies;
  for (const KernelDesc::Member &m : kd.members) {
    if (opInfo(m.op).shapeMode != ShapeMode::DataDependent) continue;
    for (uint32_t v : m.operands) {
      if (v >= ins.size() || sigIns[v]->device() == vm::Device::CPU) continue;
      TensorRef h;
      if (Status st = copy(*ins[v], vm::Device::CPU, h, earlier); !st.ok()) return st;
      hostCopies.push_back(h);
      sigIns[v] = h.get();
    }
  }
  std::vector<TensorSig> sigs;
  if (!kernelValueSigs(kd, sigIns, outs, sigs)) {
    // A shape check failed (the host path words it exactly) or a member's
    // shape depends on a value computed inside the kernel.
    *declined = true;
    return Status::success();
  }
  const size_t nv = sigs.size();
  for (const Tensor *o : outs) sigs.push_back({o->dtype(), o->shape()});
  const size_t n = sigs.size();
  size_t bytes = n * NIMBLE_BUFFER_SIZE;
  for (const TensorSig &sg : sigs) bytes += 2 * sizeof(int64_t) * sg.dims.size();
  bytes = (bytes + 255) / 256 * 256;
  if (pending_.size() == kStatusWords || ringUsed_ + bytes > ringSize_)
    if (Status st = synchronize(earlier); !st.ok()) return st; // an earlier launch failed
  if (bytes > ringSize_) {
    drv_->memFree(ring_);
    ring_ = 0;
    ringSize_ = 0;
    if (CUresult r = drv_->memAlloc(&ring_, bytes); r != 0) return driverError("allocating kernel arguments", r);
    ringSize_ = bytes;
  }
  const CUdeviceptr base = ring_ + ringUsed_;
  block_.assign(bytes, 0);
  size_t extra = n * NIMBLE_BUFFER_SIZE;
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int64_t> &shape = sigs[i].dims;
    const Tensor *t = i < ins.size() ? ins[i] : i >= nv ? outs[i - nv] : nullptr;
    nimble_buffer b{};
    b.data = t ? reinterpret_cast<void *>(static_cast<uintptr_t>(devicePtr(*t))) : nullptr;
    b.rank = static_cast<int32_t>(shape.size());
    b.dtype = static_cast<int32_t>(sigs[i].dtype);
    b.shape = reinterpret_cast<const int64_t *>(static_cast<uintptr_t>(base + extra));
    if (!shape.empty()) std::memcpy(block_.data() + extra, shape.data(), shape.size() * sizeof(int64_t));
    extra += shape.size() * sizeof(int64_t);
    b.strides = reinterpret_cast<const int64_t *>(static_cast<uintptr_t>(base + extra));
    int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      std::memcpy(block_.data() + extra + d * sizeof(int64_t), &stride, sizeof stride);
      stride *= shape[d];
    }
    extra += shape.size() * sizeof(int64_t);
    std::memcpy(block_.data() + i * NIMBLE_BUFFER_SIZE, &b, sizeof b);
  }
  if (CUresult r = drv_->memcpyHtoDAsync(base, block_.data(), bytes, nullptr); r != 0)
    return driverError("passing a kernel's arguments", r);
  ringUsed_ += bytes;

  // The grid (the kernels loop over whatever grid they get: this is speed).
  unsigned blocks = 1;
  const int64_t elems = outs.empty() ? 1 : outs[0]->numElements();
  if (en.flags & CudaCode::kMultiBlock) {
    int64_t want = (elems + kThreadsPerBlock - 1) / kThreadsPerBlock;
    blocks = static_cast<unsigned>(std::clamp<int64_t>(want, 1, kMaxBlocks));
  } else if (en.flags & CudaCode::kBlockPerOutput) {
    blocks = static_cast<unsigned>(std::clamp<int64_t>(elems, 1, kMaxRowBlocks));
  } else if (en.flags & CudaCode::kBlockPerRow) {
    const int64_t last = outs.empty() || outs[0]->rank() == 0 ? 1 : outs[0]->shape().back();
    blocks = static_cast<unsigned>(std::clamp<int64_t>(last ? elems / last : 0, 1, kMaxRowBlocks));
  }
  CUdeviceptr bufs = base;
  int32_t count = static_cast<int32_t>(n);
  CUdeviceptr status = status_ + pending_.size() * sizeof(int32_t);
  void *params[] = {&bufs, &count, &status};
  CUfunction f = functions_[static_cast<size_t>(entryOf_[k])];
  if (CUresult r = drv_->launchKernel(f, blocks, 1, 1, kThreadsPerBlock, 1, 1, 0, nullptr, params, nullptr); r != 0)
    return driverError(("launching kernel '" + kd.name + "'").c_str(), r);
  pending_.push_back(site);
  ++stats_.launches;
  return Status::success();
}

Status DeviceRuntime::gemm(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs) {
  const KernelDesc &kd = exe_->kernels[k];
  const KernelDesc::Member &m = kd.members[0];
  if (ins.size() != 2 || outs.size() != 1 || m.attrs.size() != 2 || m.operands.size() != 2 ||
      m.operands[0] >= 2 || m.operands[1] >= 2)
    return Status::error("kernel '" + kd.name + "' is not a matmul cuBLAS can run");
  const Tensor &a = *ins[m.operands[0]], &b = *ins[m.operands[1]], &c = *outs[0];
  if (a.dtype() != DType::F32 || b.dtype() != DType::F32 || c.dtype() != DType::F32 || a.rank() < 2 ||
      a.rank() != b.rank() || c.rank() != a.rank())
    return Status::error("kernel '" + kd.name + "' is not an f32 matmul of equal ranks");
  const bool ta = m.attrs[0].getBool(), tb = m.attrs[1].getBool();
  const Operand A = operandOf(a), B = operandOf(b), C = operandOf(c);
  const int64_t M = ta ? A.cols : A.rows, K = ta ? A.rows : A.cols, N = tb ? B.rows : B.cols;
  if ((tb ? B.cols : B.rows) != K || C.rows != M || C.cols != N)
    return Status::error("kernel '" + kd.name + "': shapes " + a.typeString() + ", " + b.typeString() + " -> " +
                         c.typeString() + " do not multiply");
  if (!fitsInt(M) || !fitsInt(N) || !fitsInt(K) || !fitsInt(A.cols) || !fitsInt(B.cols) || !fitsInt(C.batch))
    return Status::error("kernel '" + kd.name + "': a dimension of " + a.typeString() + " x " + b.typeString() +
                         " exceeds cuBLAS's int range");
  if (C.batch == 0 || M == 0 || N == 0) return Status::success();
  if (K == 0) return zero(devicePtr(c), c.numBytes());
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B first,
  // each operand's stored row length its leading dimension.
  const int opA = ta ? kCublasOpT : kCublasOpN, opB = tb ? kCublasOpT : kCublasOpN;
  const float one = 1.0f, zeroF = 0.0f;
  const auto *pa = reinterpret_cast<const float *>(static_cast<uintptr_t>(devicePtr(a)));
  const auto *pb = reinterpret_cast<const float *>(static_cast<uintptr_t>(devicePtr(b)));
  auto *pc = reinterpret_cast<float *>(static_cast<uintptr_t>(devicePtr(c)));
  const int m_ = static_cast<int>(N), n_ = static_cast<int>(M), k_ = static_cast<int>(K);
  const int lda = static_cast<int>(A.cols), ldb = static_cast<int>(B.cols), ldc = static_cast<int>(N);
  auto fail = [&](cublasStatus s) {
    return Status::error("cuBLAS failed on kernel '" + kd.name + "' (" + a.typeString() + " x " + b.typeString() +
                         "): " + blas_->statusName(s));
  };
  ++stats_.cublasCalls;
  if (C.batch == 1) {
    if (cublasStatus s = blas_->sgemm(blasHandle_, opB, opA, m_, n_, k_, &one, pb, ldb, pa, lda, &zeroF, pc, ldc))
      return fail(s);
    return Status::success();
  }
  // Each operand's batch is the output's (stride: a matrix) or broadcast
  // whole (stride 0): one strided-batched call. Otherwise one call per
  // matrix, with the broadcast index of each operand.
  const long long sa = A.rows * A.cols, sb = B.rows * B.cols, sc = C.rows * C.cols;
  if ((A.batch == C.batch || A.batch == 1) && (B.batch == C.batch || B.batch == 1)) {
    if (cublasStatus s = blas_->sgemmStridedBatched(blasHandle_, opB, opA, m_, n_, k_, &one, pb, ldb,
                                                    B.batch == 1 ? 0 : sb, pa, lda, A.batch == 1 ? 0 : sa, &zeroF,
                                                    pc, ldc, sc, static_cast<int>(C.batch)))
      return fail(s);
    return Status::success();
  }
  const size_t batchRank = static_cast<size_t>(c.rank()) - 2;
  std::vector<int64_t> idx(batchRank, 0);
  for (int64_t i = 0; i < C.batch; ++i) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < batchRank; ++d) {
      oa = oa * a.dim(d) + (a.dim(d) == 1 ? 0 : idx[d]);
      ob = ob * b.dim(d) + (b.dim(d) == 1 ? 0 : idx[d]);
    }
    if (cublasStatus s = blas_->sgemm(blasHandle_, opB, opA, m_, n_, k_, &one, pb + ob * sb, ldb, pa + oa * sa, lda,
                                      &zeroF, pc + i * sc, ldc))
      return fail(s);
    for (size_t d = batchRank; d-- > 0;) {
      if (++idx[d] < c.dim(d)) break;
      idx[d] = 0;
    }
  }
  return Status::success();
}

} // namespace nimble::vm::cuda
