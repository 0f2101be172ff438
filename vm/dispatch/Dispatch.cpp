//===- Dispatch.cpp - Choosing a kernel's implementation per shape ------===//
//
// See Dispatch.h.
//
//===----------------------------------------------------------------------===//

#include "vm/dispatch/Dispatch.h"

#include "vm/interpreter/Interpreter.h"
#include "vm/dispatch/LibraryKernels.h"
#include "vm/dispatch/NativeKernels.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>
#include <fstream>
#include <sstream>

namespace nimble::vm {

const char *kernelImplName(KernelImpl i) {
  switch (i) {
  case KernelImpl::Reference: return "reference";
  case KernelImpl::Native: return "native";
  case KernelImpl::Library: return "library";
  case KernelImpl::Cuda: return "cuda";
  }
  return "?";
}

bool parseKernelMode(const std::string &s, KernelMode &m) {
  if (s == "reference") m = KernelMode::Reference;
  else if (s == "native") m = KernelMode::Native;
  else if (s == "library") m = KernelMode::Library;
  else if (s == "auto") m = KernelMode::Auto;
  else if (s == "tune") m = KernelMode::Tune;
  else return false;
  return true;
}

// ---- TuningTable ----------------------------------------------------------

namespace {
constexpr const char *kTuningHeader = "# nimble-run tuning v1: <kernel> <shape bucket> <reference|native|library>";

bool parseImpl(const std::string &s, KernelImpl &i) {
  if (s == "reference") i = KernelImpl::Reference;
  else if (s == "native") i = KernelImpl::Native;
  else if (s == "library") i = KernelImpl::Library;
  else return false;
  return true;
}
} // namespace

// Read with stdio and split by hand, not with iostreams: a stream turns a
// failed allocation inside getline or >> into a "read error" or a format
// error (it catches bad_alloc and sets badbit), and the out-of-memory tests
// (NIMBLE_FAIL_ALLOC) need out of memory to stay out of memory.
bool TuningTable::load(const std::string &path, std::string &error) {
  std::string text;
  if (!readTextFile(path, text, error)) return false;
  size_t lineNo = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++lineNo;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string_view> words;
    for (size_t i = 0; i < line.size();) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
      size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
      if (j > i) words.push_back(line.substr(i, j - i));
      i = j;
    }
    if (words.size() != 3) {
      error = path + ":" + std::to_string(lineNo) + ": expected '<kernel> <shape bucket> <implementation>'";
      return false;
    }
    KernelImpl i;
    if (!parseImpl(std::string(words[2]), i)) {
      error = path + ":" + std::to_string(lineNo) + ": unknown implementation '" + std::string(words[2]) +
              "' (expected reference, native or library)";
      return false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    decisions_[{std::string(words[0]), std::string(words[1])}] = i;
  }
  return true;
}

bool readTextFile(const std::string &path, std::string &text, std::string &error) {
  std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) text.append(buf, n);
  if (std::ferror(f.get())) {
    error = path + ": read error";
    return false;
  }
  return true;
}

bool TuningTable::save(const std::string &path, std::string &error) const {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) {
      error = path + ": cannot write the tuning file";
      return false;
    }
    out << kTuningHeader << "\n";
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto &[key, impl] : decisions_)
      out << key.first << " " << key.second << " " << kernelImplName(impl) << "\n";
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      error = path + ": cannot write the tuning file";
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    error = path + ": cannot write the tuning file";
    return false;
  }
  return true;
}

bool TuningTable::lookup(const std::string &kernel, const std::string &bucket, KernelImpl &impl) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = decisions_.find({kernel, bucket});
  if (it == decisions_.end()) return false;
  impl = it->second;
  return true;
}

void TuningTable::set(const std::string &kernel, const std::string &bucket, KernelImpl impl) {
  std::lock_guard<std::mutex> lock(mu_);
  decisions_[{kernel, bucket}] = impl;
}

std::string shapeBucket(const std::vector<Tensor *> &ins) {
  std::string b;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (i) b += ',';
    const std::vector<int64_t> &s = ins[i]->shape();
    if (s.empty()) b += "s"; // a scalar
    for (size_t d = 0; d < s.size(); ++d) {
      uint64_t v = s[d] <= 0 ? 0 : 1;
      while (v && v < static_cast<uint64_t>(s[d])) v <<= 1;
      if (d) b += 'x';
      b += std::to_string(v);
    }
  }
  return b;
}

// ---- KernelDispatcher -------------------------------------------------------

KernelDispatcher::KernelDispatcher(const Executable &exe, KernelMode mode, const NativeKernels *native,
                                   LibraryKernels *library, TuningTable *tuning)
    : exe_(exe), mode_(mode), native_(mode == KernelMode::Reference ? nullptr : native),
      library_(mode == KernelMode::Reference || mode == KernelMode::Native ? nullptr : library),
      tuning_(tuning), memos_(exe.kernels.size()), last_(exe.kernels.size()) {}

bool KernelDispatcher::runImpl(KernelImpl impl, uint32_t k, const std::vector<Tensor *> &ins,
                               const std::vector<Tensor *> &outs, KernelContext &ctx,
                               size_t *failedMember, Status &st) {
  switch (impl) {
  case KernelImpl::Reference:
    st = runKernel(exe_.kernels[k], ins, outs, ctx, failedMember);
    return true;
  case KernelImpl::Native: {
    nimble_kernel_fn fn = native_ ? native_->get(k) : nullptr;
    if (!fn) return false;
    bool rerun = true;
    st = runNativeKernel(exe_.kernels[k], fn, ins, outs, ctx, failedMember, &rerun, &memos_[k], nullptr,
                         native_->signature(k));
    return !rerun;
  }
  case KernelImpl::Library: {
    if (!library_ || !library_->supports(k)) return false;
    bool declined = true;
    st = library_->run(k, ins, outs, ctx.pool, failedMember, &declined);
    return !declined;
  }
  case KernelImpl::Cuda: return false; // the VM launches device kernels itself
  }
  return false;
}

KernelImpl KernelDispatcher::tune(uint32_t k, const std::vector<Tensor *> &ins,
                                  const std::vector<Tensor *> &outs, KernelContext &ctx,
                                  bool *outputsWritten) {
  using Clock = std::chrono::steady_clock;
  *outputsWritten = false;
  // Outputs that overlap an input would make a second run read its own
  // results: keep the rule's order then, unmeasured.
  for (const Tensor *o : outs)
    for (const Tensor *i : ins)
      if (o->storage().get() == i->storage().get() && o->rawData() < i->rawData() + i->numBytes() &&
          i->rawData() < o->rawData() + o->numBytes())
        return KernelImpl::Library;
  // Each candidate runs once untimed (caches, oneDNN's primitive, the
  // thread team), then kTimedRounds timed runs, the candidates alternating
  // so that a drift of the machine affects both; each candidate's fastest
  // run decides. With a single timed run, a disturbance during it decided:
  // at 2 threads the LSTM's GEMV went to oneDNN, 4x slower there, in one of
  // six runs.
  constexpr int kTimedRounds = 3;
  const KernelImpl cands[2] = {KernelImpl::Native, KernelImpl::Library};
  bool ok[2];
  double fastest[2] = {0, 0};
  for (int c = 0; c < 2; ++c) {
    Status st;
    size_t failed = SIZE_MAX;
    ok[c] = runImpl(cands[c], k, ins, outs, ctx, &failed, st) && st.ok();
  }
  KernelImpl last = KernelImpl::Reference;
  for (int round = 0; round < kTimedRounds; ++round)
    for (int c = 0; c < 2; ++c) {
      if (!ok[c]) continue;
      Status st;
      size_t failed = SIZE_MAX;
      auto t0 = Clock::now();
      ok[c] = runImpl(cands[c], k, ins, outs, ctx, &failed, st) && st.ok();
      double t = std::chrono::duration<double>(Clock::now() - t0).count();
      if (!ok[c]) continue;
      last = cands[c];
      if (round == 0 || t < fastest[c]) fastest[c] = t;
    }
  KernelImpl best = KernelImpl::Reference;
  double bestTime = 0;
  for (int c = 0; c < 2; ++c)
    if (ok[c] && (best == KernelImpl::Reference || fastest[c] < bestTime)) {
      best = cands[c];
      bestTime = fastest[c];
    }
  *outputsWritten = best != KernelImpl::Reference && best == last;
  return best;
}

Status KernelDispatcher::run(uint32_t k, const std::vector<Tensor *> &ins, const std::vector<Tensor *> &outs,
                             KernelContext &ctx, size_t *failedMember, KernelImpl *ran) {
  const bool hasNative = native_ && native_->get(k);
  const bool hasLibrary = library_ && library_->supports(k);
  KernelImpl choice = hasLibrary ? KernelImpl::Library : hasNative ? KernelImpl::Native : KernelImpl::Reference;
  if (mode_ == KernelMode::Native && !hasNative) choice = KernelImpl::Reference;
  if ((mode_ == KernelMode::Auto || mode_ == KernelMode::Tune) && hasNative && hasLibrary) {
    LastChoice &last = last_[k];
    if (last.valid && sameInputKey(ins, last.key)) {
      choice = last.impl;
    } else {
      const std::string &name = exe_.kernels[k].name;
      bool written = false;
      bool stored = false;
      // A stored decision (--tuning) first, for either mode; the table is
      // empty unless one was loaded or `tune` has measured, so `auto` builds
      // no bucket name then.
      if (tuning_ && (mode_ == KernelMode::Tune || tuning_->size() > 0))
        stored = tuning_->lookup(name, shapeBucket(ins), choice);
      if (!stored && mode_ == KernelMode::Auto) {
        // The fixed rule (Dispatch.h): no clock, so every process agrees.
        choice = library_->ruleChoosesLibrary(k, ins) ? KernelImpl::Library : KernelImpl::Native;
      } else if (!stored) {
        choice = tune(k, ins, outs, ctx, &written);
        if (tuning_ && choice != KernelImpl::Reference) {
          tuning_->set(name, shapeBucket(ins), choice);
          tuning_->noteMeasured();
        }
      }
      // Remembered once decided (the same shapes give the same bucket and
      // the same rule, so the same answer); a measurement that found no
      // implementation is retried by the next call, as before.
      last.valid = false;
      if (choice != KernelImpl::Reference && (mode_ == KernelMode::Auto || tuning_)) {
        inputKey(ins, last.key);
        last.impl = choice;
        last.valid = true;
      }
      if (written) {
        *ran = choice;
        return Status::success();
      }
    }
  }
  // The choice, then the fallbacks: library -> native -> reference.
  Status st;
  if (choice == KernelImpl::Library && runImpl(KernelImpl::Library, k, ins, outs, ctx, failedMember, st)) {
    *ran = KernelImpl::Library;
    return st;
  }
  if ((choice == KernelImpl::Library || choice == KernelImpl::Native) &&
      runImpl(KernelImpl::Native, k, ins, outs, ctx, failedMember, st)) {
    *ran = KernelImpl::Native;
    return st;
  }
  *ran = KernelImpl::Reference;
  return runKernel(exe_.kernels[k], ins, outs, ctx, failedMember);
}

} // namespace nimble::vm
