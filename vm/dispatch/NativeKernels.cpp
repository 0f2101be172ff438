//===- NativeKernels.cpp - Mapping and calling native kernels --------------===//

#include "vm/dispatch/NativeKernels.h"

#include "vm/dispatch/ElfCheck.h"
#include "vm/format/Format.h"

#include "ir/ShapeFns.h"
#include "vm/support/ThreadPool.h"

#include <algorithm>
#include <cpuid.h>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

namespace nimble::vm {

//===-- CPU features -------------------------------------------------------===//

namespace {

// cpuid leaf 7 / XCR0 for what __builtin_cpu_supports cannot name.
bool osSavesAMX() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24))) return false;
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & (3u << 17)) == (3u << 17);
}

} // namespace

bool cpuHasFeature(const std::string &f) {
  __builtin_cpu_init();
#define NIMBLE_FEATURE(name) \
  if (f == name) return __builtin_cpu_supports(name);
  NIMBLE_FEATURE("sse4.2")
  NIMBLE_FEATURE("avx")
  NIMBLE_FEATURE("avx2")
  NIMBLE_FEATURE("fma")
  NIMBLE_FEATURE("bmi")
  NIMBLE_FEATURE("bmi2")
  NIMBLE_FEATURE("avx512f")
  NIMBLE_FEATURE("avx512bw")
  NIMBLE_FEATURE("avx512dq")
  NIMBLE_FEATURE("avx512vl")
  NIMBLE_FEATURE("avx512vnni")
  NIMBLE_FEATURE("avx512bf16")
#undef NIMBLE_FEATURE
  if (f == "f16c") {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
  }
  if (f == "amx-tile") return osSavesAMX();
  return false;
}

//===-- Loading ------------------------------------------------------------===//

NativeKernels::~NativeKernels() {
  if (handle_) dlclose(handle_);
  if (fd_ >= 0) ::close(fd_);
}

bool NativeKernels::checkSignatures(const Executable &exe, std::string &reason) {
  const NativeCode &n = exe.native;
  std::string_view text;
  if (!findElfSection(n.object.data(), n.object.size(), kNativeSigSection, text, reason)) {
    if (reason.find("no " + std::string(kNativeSigSection)) != std::string::npos)
      reason += " (made by an older nimblec?): its kernels cannot be checked against the kernel table";
    return false;
  }
  std::string why;
  if (!parseNativeSignatures(text, sigs_, why)) {
    reason = "the native-code object's kernel signatures are malformed: " + why;
    return false;
  }
  sigIndex_.assign(exe.kernels.size(), -1);
  for (size_t i = 0; i < sigs_.size(); ++i) {
    const NativeSignature &s = sigs_[i];
    if (s.kernel >= exe.kernels.size() || sigIndex_[s.kernel] >= 0) {
      reason = "the native-code object's kernel signatures name kernel " + std::to_string(s.kernel) +
               " twice or out of range";
      return false;
    }
    sigIndex_[s.kernel] = static_cast<int32_t>(i);
  }
  for (const NativeCode::Entry &en : n.entries) {
    const KernelDesc &k = exe.kernels[en.kernel];
    const NativeSignature *s = signature(en.kernel);
    auto mismatch = [&](const std::string &what) {
      reason = "native kernel " + std::to_string(en.kernel) + " ('" + en.symbol +
               "') does not match the kernel table: " + what;
      return false;
    };
    if (!s) return mismatch("the object has no signature for it");
    if (s->symbol != en.symbol) return mismatch("the object's signature is for '" + s->symbol + "'");
    if (s->digest != kernelDigest(k)) return mismatch("its members differ from those it was compiled for");
    if (s->inputs.size() != k.numInputs || s->outputs.size() != k.outputs.size() + (k.upperBound ? 1 : 0))
      return mismatch("compiled for " + std::to_string(s->inputs.size()) + " inputs and " +
                      std::to_string(s->outputs.size()) + " outputs, the table has " +
                      std::to_string(k.numInputs) + " and " + std::to_string(k.outputs.size()));
    for (size_t i = 0; i < k.numInputs && i < k.inputDTypes.size(); ++i)
      if (s->inputs[i].dtype != k.inputDTypes[i])
        return mismatch("input " + std::to_string(i) + " is " + std::string(dtypeName(k.inputDTypes[i])) +
                        " in the table, " + std::string(dtypeName(s->inputs[i].dtype)) + " in the code");
  }
  return true;
}

size_t NativeKernels::count() const {
  size_t n = 0;
  for (auto f : fns_) n += f != nullptr;
  return n;
}

bool NativeKernels::load(const Executable &exe, std::string &reason) {
  const NativeCode &n = exe.native;
  if (n.empty()) return true;
  for (const std::string &f : n.features)
    if (!cpuHasFeature(f)) {
      reason = "the native kernels were compiled for " + n.cpu + " and need '" + f +
               "', which this CPU lacks";
      return false;
    }
  const std::vector<uint8_t> &o = n.object;
  if (o.size() < sizeof(Elf64_Ehdr) || std::memcmp(o.data(), ELFMAG, SELFMAG) != 0 ||
      o[EI_CLASS] != ELFCLASS64) {
    reason = "the native-code object is not a 64-bit ELF file";
    return false;
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, o.data(), sizeof eh);
  if (eh.e_machine != EM_X86_64 || eh.e_type != ET_DYN) {
    reason = "the native-code object is not an x86-64 shared object";
    return false;
  }
  // Before anything maps it: the structures dlopen and dlsym walk
  // (ElfCheck.h), then what each entry was compiled for against the table.
  if (!checkElfSharedObject(o.data(), o.size(), reason) || !checkSignatures(exe, reason)) return false;
  int fd = memfd_create("nimble-kernels", MFD_CLOEXEC);
  if (fd < 0) {
    reason = std::string("memfd_create failed: ") + std::strerror(errno);
    return false;
  }
  size_t done = 0;
  while (done < o.size()) {
    ssize_t w = ::write(fd, o.data() + done, o.size() - done);
    if (w <= 0) {
      ::close(fd);
      reason = std::string("cannot write the native code to memory: ") + std::strerror(errno);
      return false;
    }
    done += static_cast<size_t>(w);
  }
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    ::close(fd);
    const char *e = dlerror();
    reason = std::string("cannot map the native code: ") + (e ? e : "dlopen failed");
    return false;
  }
  fd_ = fd;
  fns_.assign(exe.kernels.size(), nullptr);
  for (const NativeCode::Entry &en : n.entries) {
    void *sym = dlsym(handle_, en.symbol.c_str());
    if (!sym) {
      reason = "the native code has no symbol '" + en.symbol + "' (kernel " +
               std::to_string(en.kernel) + ")";
      fns_.clear();
      dlclose(handle_);
      handle_ = nullptr;
      return false;
    }
    fns_[en.kernel] = reinterpret_cast<nimble_kernel_fn>(sym);
    // A batched variant's gather-fused entry is optional.
    if (void *g = dlsym(handle_, (en.symbol + NIMBLE_GATHER_SUFFIX).c_str())) {
      if (gatherFns_.empty()) gatherFns_.assign(exe.kernels.size(), nullptr);
      gatherFns_[en.kernel] = reinterpret_cast<nimble_kernel_fn>(g);
    }
  }
  return true;
}

//===-- Calling ------------------------------------------------------------===//

namespace {

// nimble_kernel_ctx::parallel_for over the VM's pool: the generated code
// hands over the whole range, and thread t of T runs the t-th of T equal
// contiguous parts, the same part on every call. The generated regions'
// parts cost alike (element-wise points and rows, a product's column blocks
// or batches), and a kernel called again (the LSTM's recurrent product once
// a token) then finds its part of a weight in the same core's L2: with the
// pool's dynamic chunks each token's halves moved between the cores and were
// read from L3 (issue 52).
void parallelForTrampoline(void *pool, int64_t n, nimble_parallel_body body, void *closure) {
  ThreadPool &p = *static_cast<ThreadPool *>(pool);
  const int64_t parts = std::min<int64_t>(n, p.size());
  p.runEach(parts, [&](int64_t t) { body(closure, n * t / parts, n * (t + 1) / parts); });
}

} // namespace

bool kernelValueSigs(const KernelDesc &k, const std::vector<Tensor *> &ins,
                     const std::vector<Tensor *> &outs, std::vector<TensorSig> &sigs) {
  sigs.clear();
  if (ins.size() != k.numInputs || outs.size() != k.outputs.size()) return false;
  sigs.reserve(k.numInputs + k.members.size() + 1);
  for (const Tensor *t : ins) sigs.push_back({t->dtype(), t->shape()});
  for (size_t mi = 0; mi < k.members.size(); ++mi) {
    const KernelDesc::Member &m = k.members[mi];
    std::vector<TensorSig> msigs;
    std::vector<DenseValue> owned;
    std::vector<const DenseValue *> vals;
    bool dataDep = opInfo(m.op).shapeMode == ShapeMode::DataDependent;
    owned.reserve(m.operands.size());
    for (uint32_t v : m.operands) {
      msigs.push_back(sigs[v]);
      if (dataDep) {
        if (v >= k.numInputs) return false; // a value computed inside the kernel sizes it
        DenseValue d;
        d.dtype = ins[v]->dtype();
        d.shape = ins[v]->shape();
        d.bytes.assign(ins[v]->rawData(), ins[v]->rawData() + ins[v]->numBytes());
        owned.push_back(std::move(d));
        vals.push_back(&owned.back());
      }
    }
    ShapeFnResult sr = inferShapes(m.op, msigs, m.attrs, vals);
    if (!sr.ok() || sr.results.size() != m.numResults || sr.upperBound) return false;
    for (TensorSig &s : sr.results) sigs.push_back(std::move(s));
  }
  for (size_t o = 0; o < k.outputs.size(); ++o) {
    const TensorSig &want = sigs[k.outputs[o]];
    if (outs[o]->dtype() != want.dtype || outs[o]->shape() != want.dims ||
        outs[o]->storage()->readOnly())
      return false;
  }
  return true;
}

void inputKey(const std::vector<Tensor *> &ins, std::vector<int64_t> &key) {
  key.clear();
  for (const Tensor *t : ins) {
    key.push_back(static_cast<int64_t>(t->dtype()));
    key.push_back(t->rank());
    key.insert(key.end(), t->shape().begin(), t->shape().end());
  }
}

bool sameInputKey(const std::vector<Tensor *> &ins, const std::vector<int64_t> &key) {
  size_t at = 0;
  for (const Tensor *t : ins) {
    const std::vector<int64_t> &s = t->shape();
    if (at + 2 + s.size() > key.size() || key[at] != static_cast<int64_t>(t->dtype()) ||
        key[at + 1] != static_cast<int64_t>(s.size()))
      return false;
    for (size_t d = 0; d < s.size(); ++d)
      if (key[at + 2 + d] != s[d]) return false;
    at += 2 + s.size();
  }
  return at == key.size();
}

namespace {

/// Fills memo.sigs (values, then outputs), memo.strides and memo.bufs (no
/// data pointers yet); false when a shape check fails.
bool describeCall(const KernelDesc &k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs,
                  NativeCallMemo &m) {
  if (!kernelValueSigs(k, ins, outs, m.sigs)) return false;
  for (const Tensor *o : outs) m.sigs.push_back({o->dtype(), o->shape()});
  size_t n = m.sigs.size();
  m.strides.assign(n, {});
  m.bufs.assign(n, nimble_buffer{});
  for (size_t i = 0; i < n; ++i) {
    const TensorSig &s = m.sigs[i];
    std::vector<int64_t> &st = m.strides[i];
    st.assign(s.dims.size(), 1);
    for (size_t d = s.dims.size(); d-- > 1;) st[d - 1] = st[d] * s.dims[d];
    m.bufs[i] = {nullptr, s.dims.data(), st.data(), static_cast<int32_t>(s.dims.size()),
                 static_cast<int32_t>(s.dtype)};
  }
  return true;
}

} // namespace

namespace {

/// `t` has the dtype, rank and static dims the code was compiled for.
bool matches(const Tensor &t, const NativeBufferSig &s) {
  if (t.dtype() != s.dtype || t.shape().size() != s.dims.size()) return false;
  for (size_t d = 0; d < s.dims.size(); ++d)
    if (s.dims[d] != kDynamic && s.dims[d] != t.shape()[d]) return false;
  return true;
}

bool matchesSignature(const NativeSignature &sig, const std::vector<Tensor *> &ins,
                      const std::vector<Tensor *> &outs) {
  if (sig.inputs.size() != ins.size() || sig.outputs.size() < outs.size()) return false;
  for (size_t i = 0; i < ins.size(); ++i)
    if (!matches(*ins[i], sig.inputs[i])) return false;
  for (size_t o = 0; o < outs.size(); ++o)
    if (!matches(*outs[o], sig.outputs[o])) return false;
  return true;
}

} // namespace

Status runNativeKernel(const KernelDesc &k, nimble_kernel_fn fn, const std::vector<Tensor *> &ins,
                       const std::vector<Tensor *> &outs, KernelContext &ctx,
                       size_t *failedMember, bool *rerun, NativeCallMemo *memo,
                       const std::vector<const void *> *gathered, const NativeSignature *sig) {
  *rerun = false;
  if (ins.size() != k.numInputs || outs.size() != k.outputs.size()) {
    *rerun = true; // the reference path words this error
    return Status::success();
  }
  NativeCallMemo local;
  NativeCallMemo &m = memo ? *memo : local;
  if (m.state == NativeCallMemo::Unknown) {
    m.state = NativeCallMemo::Cacheable;
    for (const KernelDesc::Member &mem : k.members)
      if (opInfo(mem.op).shapeMode == ShapeMode::DataDependent) m.state = NativeCallMemo::NotCacheable;
  }
  bool hit = false;
  if (memo && m.state == NativeCallMemo::Cacheable && m.valid) hit = sameInputKey(ins, m.key);
  if (hit) {
    // The shapes repeat: only the outputs need checking (the program may
    // pass other buffers).
    for (size_t o = 0; o < outs.size(); ++o) {
      const TensorSig &want = m.sigs[k.outputs[o]];
      if (outs[o]->dtype() != want.dtype || outs[o]->shape() != want.dims || outs[o]->storage()->readOnly()) {
        *rerun = true;
        return Status::success();
      }
    }
  } else {
    // Shapes of every value, by the members' shape functions; anything they
    // reject, the reference path words exactly.
    m.valid = false;
    if ((sig && !matchesSignature(*sig, ins, outs)) || !describeCall(k, ins, outs, m)) {
      *rerun = true;
      return Status::success();
    }
    if (memo && m.state == NativeCallMemo::Cacheable) {
      inputKey(ins, m.key);
      m.valid = true;
    }
  }
  const size_t nv = m.sigs.size() - outs.size(); // sigs: every value, then every output
  for (size_t v = 0; v < k.numInputs; ++v) m.bufs[v].data = ins[v]->rawData();
  for (size_t o = 0; o < outs.size(); ++o) m.bufs[nv + o].data = outs[o]->rawData();
  if (gathered) {
    for (size_t v = 0; v < k.numInputs && v < gathered->size(); ++v)
      if (const void *t = (*gathered)[v]) m.bufs[v].data = const_cast<void *>(t);
    for (size_t o = 0; o < outs.size() && k.numInputs + o < gathered->size(); ++o)
      if (const void *t = (*gathered)[k.numInputs + o]) m.bufs[nv + o].data = const_cast<void *>(t);
  }
  std::vector<nimble_buffer> &bufs = m.bufs;
  size_t nbufs = bufs.size();
  char msg[256] = {0};
  nimble_kernel_ctx c{nullptr, nullptr, msg, sizeof msg, -1};
  if (ctx.pool && ctx.pool->size() > 1) {
    c.parallel_for = parallelForTrampoline;
    c.pool = ctx.pool;
  }
  int32_t rc = fn(bufs.data(), static_cast<int32_t>(nbufs), &c);
  if (rc != 0) {
    *rerun = true;
    if (failedMember && c.failed_member >= 0) *failedMember = static_cast<size_t>(c.failed_member);
  }
  return Status::success();
}

} // namespace nimble::vm
