//===- Interpreter.cpp - The dispatch loop ---------------------------------===//
//
// One loop behind FETCH / DISPATCH / NEXT (STYLE.md habit 10): with
// NIMBLE_VM_COMPUTED_GOTO defined (the default with GCC/Clang) DISPATCH jumps
// through a label table; otherwise it is a switch. Operands are read straight
// from the code words at the offsets Opcodes.def fixes; the loader verified
// them, so only what depends on run-time values is checked here.
//
//===----------------------------------------------------------------------===//

#include "vm/interpreter/Interpreter.h"

#include "vm/dispatch/NativeKernels.h"

#include "ir/Limits.h"
#include "ir/ShapeFns.h"
#include "vm/format/Bytecode.h"
#include "vm/cuda/CudaRuntime.h"
#include "vm/format/Disassembler.h"
#include "vm/format/Format.h"
#include "vm/support/ThreadPool.h"
#include "vm/io/ValueText.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <new>
#include <ostream>

#if !defined(NIMBLE_VM_SWITCH_DISPATCH) && (defined(__GNUC__) || defined(__clang__))
#define NIMBLE_VM_COMPUTED_GOTO 1
#endif

namespace nimble::vm {

using Clock = std::chrono::steady_clock;

VirtualMachine::VirtualMachine(std::shared_ptr<const Executable> exe, VMOptions opts)
    : exe_(std::move(exe)), opts_(opts),
      dispatch_(*exe_, opts_.kernels, opts_.native, opts_.library, opts_.tuning ? opts_.tuning : &ownTuning_) {
  if (opts_.threads > 1) pool_ = std::make_unique<ThreadPool>(opts_.threads);
  kctx_.pool = pool_.get();
  constants_.resize(exe_->constants.size());
  profile_.kernels.resize(exe_->kernels.size());
}

VirtualMachine::~VirtualMachine() = default;

void VirtualMachine::resetProfile() {
  profile_ = Profile{};
  profile_.kernels.resize(exe_->kernels.size());
}

TensorRef VirtualMachine::constant(uint32_t index) {
  TensorRef &t = constants_[index];
  if (!t) {
    const ConstantDesc &c = exe_->constants[index];
    if (c.splat) {
      // The dense form of a splat (format 1.8), made once per VM on first
      // use: the kernels read dense tensors. Null when out of memory.
      TensorRef d = makeTensor(c.dtype, c.shape);
      if (!d) return d;
      const size_t es = c.size;
      uint8_t *out = d->rawData();
      const size_t n = d->numBytes() / es;
      // Doubling copies: log2(n) memcpy calls, not n.
      std::memcpy(out, c.data, es);
      for (size_t have = 1; have < n;) {
        size_t take = std::min(have, n - have);
        std::memcpy(out + have * es, out, take * es);
        have += take;
      }
      d->storage()->markReadOnly();
      t = std::move(d);
    } else {
      // Zero-copy: the storage borrows the executable's bytes.
      Ref<Storage> st(new Storage(c.data, c.size, exe_->buffer));
      t = TensorRef(new Tensor(c.dtype, c.shape, st, 0));
    }
  }
  return t;
}

ObjectRef VirtualMachine::scalarConstant(int64_t v) {
  // The small non-negative values (offsets into a frame's arena, loop
  // bounds, steps, axes) from an array, the others from a map; one
  // reference count taken, for the register.
  const bool small = v >= 0 && v < static_cast<int64_t>(kSmallScalars);
  if (small && smallScalars_[static_cast<size_t>(v)])
    return ObjectRef(smallScalars_[static_cast<size_t>(v)].get());
  if (!small) {
    auto it = scalars_.find(v);
    if (it != scalars_.end()) return ObjectRef(it->second.get());
  }
  // Read-only, like the constant pool: no kernel may take it as an output.
  auto bytes = std::make_shared<int64_t>(v);
  Ref<Storage> st(new Storage(bytes.get(), sizeof(int64_t), bytes));
  TensorRef t(new Tensor(DType::I64, {}, st, 0));
  if (small) smallScalars_[static_cast<size_t>(v)] = t;
  else if (scalars_.size() < 4096) scalars_.emplace(v, t);
  return ObjectRef(t.get());
}

const SourceLoc *VirtualMachine::memberLoc(uint32_t kernel, uint32_t func, uint32_t pc, size_t member) const {
  const KernelDesc &k = exe_->kernels[kernel];
  if (k.members.size() <= 1 || member >= k.members.size()) return nullptr;
  const VMFunction &fn = exe_->functions[func];
  // A batched variant of another member count may run at the same pc.
  if (const VMFunction::Site *s = fn.siteAt(pc); s && s->count == k.members.size())
    return &fn.siteMemberLocs[size_t(s->first) + member];
  return member < k.memberLocs.size() ? &k.memberLocs[member] : nullptr;
}

Status VirtualMachine::errorAt(uint32_t func, uint32_t pc, const std::string &msg,
                               const SourceLoc *at) const {
  const VMFunction &fn = exe_->functions[func];
  std::string where;
  if (at && at->line != 0 && at->file < exe_->strings.size())
    where = exe_->strings[at->file] + ":" + std::to_string(at->line) + ":" +
            std::to_string(at->col) + ": ";
  else if (const SourceLoc *loc = findSourceLoc(fn, pc); loc && loc->line != 0)
    where = exe_->strings[loc->file] + ":" + std::to_string(loc->line) + ":" +
            std::to_string(loc->col) + ": ";
  std::string s = where + "error: " + msg;
  // The call stack, innermost first (the callers' Invoke locations); deep
  // recursion shows the innermost frames and a count of the rest. A forked
  // call's stack continues in its parents'.
  constexpr size_t kShown = 4;
  std::vector<Frame> chain;
  if (cur_->parent) chain = stackOf(*cur_);
  const std::vector<Frame> &stack = cur_->parent ? chain : cur_->frames;
  size_t depth = stack.size();
  for (size_t i = depth; i-- > 1;) {
    if (depth - 1 - i == kShown && i > 1) {
      s += "\n  ... " + std::to_string(i - 1) + " more frames";
      i = 2; // continue with the outermost call
      continue;
    }
    const Frame &callee = stack[i], &caller = stack[i - 1];
    const VMFunction &cf = exe_->functions[caller.func];
    std::string at;
    if (const SourceLoc *loc = findSourceLoc(cf, callee.callPc); loc && loc->line != 0)
      at = " at " + exe_->strings[loc->file] + ":" + std::to_string(loc->line) + ":" +
           std::to_string(loc->col);
    s += "\n  in @" + exe_->functions[callee.func].name + ", called from @" + cf.name + at;
  }
  return Status::error(s);
}

std::vector<VirtualMachine::Frame> VirtualMachine::stackOf(const Fiber &f) const {
  std::vector<Frame> s;
  if (f.parent) {
    s = stackOf(*f.parent);
    s.resize(std::min(s.size(), f.depthBase));
  }
  s.insert(s.end(), f.frames.begin(), f.frames.end());
  return s;
}

Status VirtualMachine::run(const std::string &name, std::vector<ObjectRef> args,
                           std::vector<ObjectRef> &results) {
  int f = exe_->findFunction(name);
  if (f < 0) return Status::error("no function @" + name + " in the executable");
  const VMFunction &fn = exe_->functions[static_cast<size_t>(f)];
  if (args.size() != fn.paramTypes.size())
    return Status::error("@" + name + " takes " + std::to_string(fn.paramTypes.size()) +
                         " arguments, got " + std::to_string(args.size()));
  cur_ = &main_;
  main_.regs.assign(fn.numRegisters, ObjectRef());
  for (size_t i = 0; i < args.size(); ++i) main_.regs[i] = std::move(args[i]);
  main_.frames.assign(1, Frame{static_cast<uint32_t>(f), 0, 0});
  main_.resumePc = 0;
  instructionLimit_ = opts_.maxInstructions ? profile_.instructions + opts_.maxInstructions : UINT64_MAX;
  auto t0 = Clock::now();
  // A failed allocation of the VM itself (a frame, the register file, an
  // object, a shape vector) throws std::bad_alloc from `new`: it ends the
  // run with one error at the instruction that was executing. Tensor and
  // storage memory comes from the allocators, which return null instead,
  // and the instructions report that themselves ("out of memory allocating
  // N bytes").
  uint32_t func = static_cast<uint32_t>(f), pc = 0;
  Status st;
  try {
    st = execute(results, func, pc);
  } catch (const std::bad_alloc &) {
    // Memory is short: give back what the run holds (its registers, hence
    // its tensors) before the message is built, or building it fails too.
    // The frames stay: they locate the error and name the calls.
    results.clear();
    main_.regs.clear();
    main_.regs.shrink_to_fit();
    st = errorAt(func, pc, "out of memory");
  }
  if (opts_.device || opts_.hostDevices) {
    // The device's last kernels, and results still on the device.
    if (st.ok()) {
      st = finishDevice(results);
    } else if (opts_.device) {
      cuda::LaunchSite ignored;
      (void)opts_.device->synchronize(&ignored);
    }
  }
  profile_.totalSeconds += std::chrono::duration<double>(Clock::now() - t0).count();
  // What leaves the VM has the function's declared result types (the
  // compiler's promise; a hostile executable may break it).
  if (st.ok() && results.size() != fn.resultTypes.size())
    st = Status::error("error: @" + name + " returned " + std::to_string(results.size()) +
                       " values, its signature declares " + std::to_string(fn.resultTypes.size()));
  for (size_t i = 0; st.ok() && i < results.size(); ++i) {
    std::string err;
    if (!checkValue(*exe_, fn.resultTypes[i], results[i].get(), "result " + std::to_string(i) + " of @" + name, err))
      st = Status::error("error: " + err);
  }
  if (!st.ok()) results.clear();
  // Release everything the run still holds.
  main_.regs.clear();
  main_.frames.clear();
  return st;
}

namespace {

/// The error for a run-time shape past the size limit (ir/Limits.h).
std::string tooLarge(const std::vector<int64_t> &dims, DType dt) {
  return "tensor of shape " + formatDims(dims) + "x" + std::string(dtypeName(dt)) +
         " holds more than " + std::to_string(limits::kMaxTensorBytes) +
         " bytes (2^48, the limit)";
}
/// The value of a scalar integer tensor (one element: a scalar or a 1-element
/// tensor) for the instructions that take one as an operand (sizes, offsets,
/// conditions); false with a message for anything else.
bool scalarIntOf(const Tensor &t, const char *what, int64_t &v, std::string &error) {
  if (t.numElements() != 1 || !(isInteger(t.dtype()) || isBool(t.dtype()))) {
    error = std::string(what) + " must be an integer scalar, got " + t.typeString();
    return false;
  }
  v = t.scalarInt();
  return true;
}

std::string shapesKey(const std::vector<Tensor *> &ts) {
  std::string s = "(";
  for (size_t i = 0; i < ts.size(); ++i)
    s += (i ? ", " : "") + (ts[i]->rank() ? formatDims(ts[i]->shape()) + "x" : std::string()) +
         std::string(dtypeName(ts[i]->dtype()));
  return s + ")";
}
} // namespace

Status VirtualMachine::finishDevice(std::vector<ObjectRef> &results) {
  cuda::LaunchSite failed;
  if (opts_.device)
    if (Status st = opts_.device->synchronize(&failed); !st.ok())
      return failed.set ? errorAt(failed.func, failed.pc, st.message) : Status::error("error: " + st.message);
  // Tensors on the device, at the top or inside ADT values (an explicit
  // stack: values may be deep trees).
  std::vector<ObjectRef *> stack;
  for (ObjectRef &r : results) stack.push_back(&r);
  while (!stack.empty()) {
    ObjectRef *slot = stack.back();
    stack.pop_back();
    if (Tensor *t = asTensor(slot->get()); t && t->device() != Device::CPU) {
      TensorRef host;
      cuda::LaunchSite earlier;
      if (opts_.device) {
        if (Status st = opts_.device->copy(*t, Device::CPU, host, &earlier); !st.ok())
          return earlier.set ? errorAt(earlier.func, earlier.pc, st.message) : Status::error("error: " + st.message);
      } else {
        // hostDevices: the bytes are in host memory already; the copy is
        // what makes the result a cpu tensor.
        host = makeTensor(t->dtype(), t->shape());
        if (!host) return Status::error("error: out of memory allocating " + std::to_string(t->numBytes()) + " bytes");
        if (t->numBytes()) std::memcpy(host->rawData(), t->rawData(), t->numBytes());
      }
      *slot = ObjectRef(host.get());
    } else if (Adt *a = asAdt(slot->get())) {
      for (ObjectRef &f : a->mutableFields()) stack.push_back(&f);
    }
  }
  return Status::success();
}

Status VirtualMachine::callDeviceKernel(uint32_t kernel, const std::vector<Tensor *> &ti,
                                        const std::vector<Tensor *> &to, uint32_t &func, uint32_t &pc,
                                        KernelImpl &ran, size_t &failed) {
  cuda::DeviceRuntime &dev = *opts_.device;
  cuda::LaunchSite earlier;
  // An error that is an earlier launch's failure is reported at that launch.
  auto located = [&](Status st) {
    if (!st.ok() && earlier.set) {
      func = earlier.func;
      pc = earlier.pc;
      failed = SIZE_MAX;
    }
    return st;
  };
  // A kernel that reads only its inputs' shapes (dim, shape_of: a loop's
  // bound, a sequence length) runs on the host, where the shapes are, with
  // no launch and no copy of its inputs; only its result goes to the device.
  const KernelDesc &kd = exe_->kernels[kernel];
  bool shapeOnly = !kd.members.empty();
  for (const KernelDesc::Member &m : kd.members) {
    shapeOnly &= m.op == OpCode::Dim || m.op == OpCode::ShapeOf;
    for (uint32_t v : m.operands) shapeOnly &= v < kd.numInputs;
  }
  if (dev.runsOnDevice(kernel) && !shapeOnly) {
    ran = KernelImpl::Cuda;
    bool declined = false;
    Status st = dev.launch(kernel, ti, to, cuda::LaunchSite{kernel, func, pc, false}, &earlier, &declined);
    if (!st.ok() || !declined) return located(st);
  }
  // No device form (nimblec --stats counts these), or the device path
  // declined the operands: the host runs it on copies of its operands (the
  // reference path words any error), and its outputs go back into their
  // device storages.
  std::vector<TensorRef> hostIns, hostOuts;
  std::vector<Tensor *> hi, ho;
  for (size_t i = 0; i < ti.size() + to.size(); ++i) {
    Tensor *t = i < ti.size() ? ti[i] : to[i - ti.size()];
    TensorRef h(t);
    if (t->device() != Device::CPU && !(shapeOnly && i < ti.size())) {
      if (i < ti.size()) {
        if (Status st = dev.copy(*t, Device::CPU, h, &earlier); !st.ok()) return located(st);
      } else {
        h = makeTensor(t->dtype(), t->shape());
        if (!h) return Status::error("out of memory allocating " + std::to_string(t->numBytes()) + " bytes");
      }
    }
    (i < ti.size() ? hostIns : hostOuts).push_back(h);
    (i < ti.size() ? hi : ho).push_back(h.get());
  }
  Status st = dispatch_.run(kernel, hi, ho, kctx_, &failed, &ran);
  if (!st.ok()) return st;
  for (size_t i = 0; i < to.size(); ++i)
    if (to[i]->device() != Device::CPU)
      if (Status c = dev.copyInto(*ho[i], *to[i], &earlier); !c.ok()) return located(c);
  if (!shapeOnly) dev.noteHostFallback();
  return Status::success();
}

void VirtualMachine::profileKernelCall(uint32_t kernel, KernelImpl ran, double seconds, const std::string &key) {
  KernelProfile &kp = profile_.kernels[kernel];
  ++kp.calls;
  ++kp.implCalls[static_cast<unsigned>(ran)];
  kp.seconds += seconds;
  if (kp.shapes.size() < 16 || kp.shapes.count(key)) {
    KernelProfile::ShapeStats &ss = kp.shapes[key];
    ++ss.calls;
    ++ss.implCalls[static_cast<unsigned>(ran)];
  }
}

Status VirtualMachine::callKernel(uint32_t kernel, const std::vector<Tensor *> &ti,
                                  const std::vector<Tensor *> &to, uint32_t func, uint32_t pc) {
  auto t0 = opts_.profile ? Clock::now() : Clock::time_point();
  size_t failed = SIZE_MAX;
  KernelImpl ran = KernelImpl::Reference;
  bool onDevice = false;
  if (opts_.device) {
    for (const Tensor *t : ti) onDevice |= t->device() != Device::CPU;
    for (const Tensor *t : to) onDevice |= t->device() != Device::CPU;
  }
  // A device kernel reports no failing member: its error is located at the
  // instruction, or at the earlier launch callDeviceKernel names; a kernel
  // it ran on the host reports its member as here.
  Status st = onDevice ? callDeviceKernel(kernel, ti, to, func, pc, ran, failed)
                       : dispatch_.run(kernel, ti, to, kctx_, &failed, &ran);
  if (opts_.profile) profileKernelCall(kernel, ran, std::chrono::duration<double>(Clock::now() - t0).count(), shapesKey(ti));
  // In a kernel of several members (a fused group), the failing member's
  // own location (memberLoc).
  if (!st.ok()) return errorAt(func, pc, st.message, memberLoc(kernel, func, pc, failed));
  return st;
}

Status VirtualMachine::execute(std::vector<ObjectRef> &results, uint32_t &func, uint32_t &pc) {
  Fiber &fiber = *cur_;
  std::vector<ObjectRef> &regs = fiber.regs;
  std::vector<Frame> &frames = fiber.frames;
  func = frames.back().func;
  const VMFunction *fn = &exe_->functions[func];
  const uint32_t *code = fn->code.data();
  size_t base = frames.back().base;
  pc = fiber.resumePc;

#define R(i) regs[base + (i)]
#define FAIL(msg) return errorAt(func, pc, (msg))
#define SCALAR_OR_FAIL(var, tensor, what)                                                           \
  int64_t var;                                                                                     \
  if (!hostReadable(*(tensor))) FAIL(std::string(what) + " is on " + deviceName((tensor)->device()) + ", not on the cpu"); \
  if (std::string serr; !scalarIntOf(*(tensor), what, var, serr)) FAIL(serr);
// A scalar i64 result into register `reg` (out of memory ends the run).
#define SCALAR_TO(reg, value)                                                                      \
  do {                                                                                             \
    TensorRef scalar_ = makeScalarI64(value);                                                      \
    if (!scalar_) FAIL("out of memory");                                                           \
    R(reg) = ObjectRef(scalar_.get());                                                             \
  } while (0)
#define TENSOR_OR_FAIL(var, reg)                                                                   \
  Tensor *var = asTensor(R(reg).get());                                                            \
  if (!var) FAIL("register r" + std::to_string(reg) + (R(reg) ? " does not hold a tensor" : " holds no value"));

#if NIMBLE_VM_COMPUTED_GOTO
  static void *const labels[] = {
#define VM_OPCODE(Name, Sig, Meaning) &&L_##Name,
#include "vm/format/Opcodes.def"
  };
#define CASE(Name) L_##Name:
#define DISPATCH() goto *labels[code[pc] & kOpcodeMask]
#else
#define CASE(Name) case Opcode::Name:
#define DISPATCH() goto dispatch
#endif
#define FETCH()                                                                                    \
  do {                                                                                             \
    if (++profile_.instructions > instructionLimit_)                                               \
      FAIL("instruction limit (" + std::to_string(opts_.maxInstructions) + ") reached; raise it "      \
           "with --max-instructions");                                                             \
    if (opts_.trace && opts_.traceStream)                                                          \
      *opts_.traceStream << "[" << frames.size() << "] @" << fn->name << " "                      \
                         << disassembleInstr(*exe_, *fn, pc) << "\n";                              \
  } while (0)
#define NEXT(size)                                                                                 \
  do {                                                                                             \
    pc += (size);                                                                                  \
    FETCH();                                                                                       \
    DISPATCH();                                                                                    \
  } while (0)
#define JUMP(target)                                                                               \
  do {                                                                                             \
    pc = static_cast<uint32_t>(static_cast<int64_t>(pc) + static_cast<int32_t>(target));           \
    FETCH();                                                                                       \
    DISPATCH();                                                                                    \
  } while (0)

  FETCH();
#if NIMBLE_VM_COMPUTED_GOTO
  DISPATCH();
#else
dispatch:
  switch (opcodeOf(code[pc])) {
#endif

  CASE(Move) {
    R(code[pc + 1]) = R(code[pc + 2]);
    NEXT(3);
  }
  CASE(Ret) {
    uint32_t n = code[pc + 1];
    const uint32_t *rs = code + pc + 2;
    for (uint32_t i = 0; i < n; ++i)
      if (!R(rs[i])) FAIL("returns register r" + std::to_string(rs[i]) + ", which holds no value");
    if (frames.size() == 1) {
      results.clear();
      for (uint32_t i = 0; i < n; ++i) results.push_back(R(rs[i]));
      return Status::success();
    }
    Frame done = frames.back();
    frames.pop_back();
    const Frame &caller = frames.back();
    const VMFunction &cf = exe_->functions[caller.func];
    const uint32_t *ccode = cf.code.data();
    // The caller's Invoke: f, [nargs args...], [ndst dsts...].
    uint32_t nargs = ccode[done.callPc + 2];
    uint32_t ndst = ccode[done.callPc + 3 + nargs];
    const uint32_t *dsts = ccode + done.callPc + 4 + nargs;
    if (ndst != n) {
      frames.push_back(done);
      FAIL("returns " + std::to_string(n) + " values to a call expecting " + std::to_string(ndst));
    }
    {
      // The results move to the caller's registers through a small array
      // (a vector here was an allocation per return: one per tree node).
      constexpr uint32_t kInline = 8;
      std::array<ObjectRef, kInline> few;
      std::vector<ObjectRef> many;
      ObjectRef *vals = few.data();
      if (n > kInline) {
        many.resize(n);
        vals = many.data();
      }
      for (uint32_t i = 0; i < n; ++i) vals[i] = R(rs[i]); // a register may be returned twice
      // Release the callee's registers.
      for (size_t i = done.base; i < done.base + fn->numRegisters && i < regs.size(); ++i) regs[i].reset();
      func = caller.func;
      fn = &cf;
      code = ccode;
      base = caller.base;
      for (uint32_t i = 0; i < n; ++i) R(dsts[i]) = std::move(vals[i]);
    } // destroy the locals before jumping (computed goto skips destructors)
    pc = done.callPc + 4 + nargs + ndst;
    FETCH();
    DISPATCH();
  }
  CASE(Invoke) {
    uint32_t callee = code[pc + 1];
    uint32_t nargs = code[pc + 2];
    const uint32_t *args = code + pc + 3;
    uint32_t ndst = code[pc + 3 + nargs];
    uint32_t size = 4 + nargs + ndst;
    if (batching_) {
      // The join of a call forked earlier: its results, its error, or wait.
      if (!fiber.joins.empty() && fiber.joins.back().pc == pc && fiber.joins.back().depth == frames.size()) {
        Fiber::Join &j = fiber.joins.back();
        if (!j.done) {
          fiber.waiting = true;
          fiber.resumePc = pc;
          return Status::success();
        }
        if (!j.status.ok()) {
          Status err = std::move(j.status);
          fiber.joins.pop_back();
          return err;
        }
        if (j.results.size() != ndst)
          FAIL("returns " + std::to_string(j.results.size()) + " values to a call expecting " + std::to_string(ndst));
        for (uint32_t i = 0; i < ndst; ++i) R(args[nargs + 1 + i]) = std::move(j.results[i]);
        // The emptied list goes back for the next fiber's results (no
        // allocation per forked call: AutoBatch.cpp, step).
        j.results.clear();
        if (spareResults_.size() < spareResults_.capacity()) spareResults_.push_back(std::move(j.results));
        fiber.joins.pop_back();
        NEXT(size);
      }
      // Instance parallelism: a call right after this one that needs none
      // of its results runs concurrently in a child fiber (seed 001 §4.1:
      // ACROBAT takes such calls from annotations; the IR's calls are pure,
      // so independence is what the registers say).
      uint32_t pc2 = pc + size;
      if (pc2 < fn->code.size() && opcodeOf(code[pc2]) == Opcode::Invoke) {
        const uint32_t *dsts = args + nargs + 1;
        uint32_t callee2 = code[pc2 + 1], nargs2 = code[pc2 + 2];
        const uint32_t *args2 = code + pc2 + 3;
        uint32_t ndst2 = code[pc2 + 3 + nargs2];
        const uint32_t *dsts2 = args2 + nargs2 + 1;
        bool independent = fiber.depthBase + frames.size() + 1 < opts_.maxCallDepth;
        for (uint32_t i = 0; independent && i < nargs2; ++i) {
          independent = static_cast<bool>(R(args2[i]));
          for (uint32_t d = 0; independent && d < ndst; ++d) independent = args2[i] != dsts[d];
        }
        for (uint32_t i = 0; independent && i < ndst2; ++i)
          for (uint32_t d = 0; independent && d < ndst; ++d) independent = dsts2[i] != dsts[d];
        if (independent) {
          const VMFunction &f2 = exe_->functions[callee2];
          // Every allocation first: once the join records the child, the
          // child must be in spawned_ (an out-of-memory between the two
          // left a join pointing at a freed fiber).
          fiber.joins.reserve(fiber.joins.size() + 1);
          spawned_.reserve(spawned_.size() + 1);
          Fiber *child = newFiber();
          child->regs.resize(std::max<size_t>(f2.numRegisters, nargs2));
          for (uint32_t i = 0; i < nargs2; ++i) child->regs[i] = R(args2[i]);
          child->frames.push_back(Frame{callee2, 0, pc2});
          child->parent = &fiber;
          child->index = fiber.index;
          child->depth = fiber.depth;
          child->depthBase = fiber.depthBase + frames.size();
          Fiber::Join j;
          j.pc = pc2;
          j.depth = frames.size();
          j.child = child;
          fiber.joins.push_back(std::move(j));
          spawned_.push_back(child);
          ++profile_.batch.forks;
        }
      }
    }
    if (fiber.depthBase + frames.size() >= opts_.maxCallDepth)
      FAIL("call depth limit (" + std::to_string(opts_.maxCallDepth) + ") exceeded calling @" +
           exe_->functions[callee].name + "; raise it with --max-call-depth");
    const VMFunction &cfn = exe_->functions[callee];
    size_t newBase = base + fn->numRegisters;
    if (regs.size() < newBase + cfn.numRegisters) regs.resize(newBase + cfn.numRegisters);
    for (uint32_t i = 0; i < nargs; ++i)
      if (!R(args[i])) FAIL("passes register r" + std::to_string(args[i]) + ", which holds no value, to @" + cfn.name);
    for (uint32_t i = 0; i < nargs; ++i) regs[newBase + i] = R(args[i]);
    (void)size;
    frames.push_back(Frame{callee, newBase, pc});
    func = callee;
    fn = &cfn;
    code = cfn.code.data();
    base = newBase;
    pc = 0;
    FETCH();
    DISPATCH();
  }
  CASE(InvokePacked) {
    uint32_t step;
    { // locals die here: computed goto would skip their destructors
      uint32_t kidx = code[pc + 1];
      uint32_t nin = code[pc + 2];
      const uint32_t *ins = code + pc + 3;
      uint32_t nout = code[pc + 3 + nin];
      const uint32_t *outs = code + pc + 4 + nin;
      // Scratch vectors kept by the VM: no allocation per kernel call (a
      // kernel never re-enters the interpreter).
      std::vector<Tensor *> &ti = scratchIn_, &to = scratchOut_;
      ti.clear();
      to.clear();
      for (uint32_t i = 0; i < nin; ++i) {
        TENSOR_OR_FAIL(t, ins[i]);
        ti.push_back(t);
      }
      for (uint32_t i = 0; i < nout; ++i) {
        TENSOR_OR_FAIL(t, outs[i]);
        to.push_back(t);
      }
      step = 4 + nin + nout;
      if (batching_ && kidx < exe_->batching.size() &&
          exe_->batching[kidx].mode != KernelBatching::Mode::None) {
        // Auto-batching: the scheduler runs this call with others'.
        fiber.suspended = true;
        fiber.kernel = kidx;
        fiber.callPc = pc;
        fiber.ins = ti;
        fiber.outs = to;
        fiber.resumePc = pc + step;
        return Status::success();
      }
      Status st = callKernel(kidx, ti, to, func, pc);
      if (!st.ok()) return st;
    }
    NEXT(step);
  }
  // ShapeFunc (format 1.6) puts each output shape in its destination as a
  // new tensor; InvokeShapeFunc (1.0 to 1.5) writes it into the tensor there.
  CASE(InvokeShapeFunc)
  CASE(ShapeFunc) {
    uint32_t step;
    { // locals die here: computed goto would skip their destructors
      const bool fresh = opcodeOf(code[pc]) == Opcode::ShapeFunc;
      const KernelDesc &k = exe_->kernels[code[pc + 1]];
      uint32_t nin = code[pc + 2];
      const uint32_t *ins = code + pc + 3;
      uint32_t nout = code[pc + 3 + nin];
      const uint32_t *outs = code + pc + 4 + nin;
      std::vector<Tensor *> &ti = scratchIn_, &to = scratchOut_;
      ti.clear();
      to.clear();
      for (uint32_t i = 0; i < nin; ++i) {
        TENSOR_OR_FAIL(t, ins[i]);
        if (!hostReadable(*t)) FAIL("a shape function's input is on " + std::string(deviceName(t->device())) + ", not on the cpu");
        ti.push_back(t);
      }
      for (uint32_t i = 0; !fresh && i < nout; ++i) {
        TENSOR_OR_FAIL(t, outs[i]);
        if (!hostReadable(*t)) FAIL("a shape function's output is on " + std::string(deviceName(t->device())) + ", not on the cpu");
        to.push_back(t);
      }
      step = 4 + nin + nout;
      auto t0 = opts_.profile ? Clock::now() : Clock::time_point();
      size_t failed = SIZE_MAX;
      std::vector<std::vector<int64_t>> &shapes = scratchShapes_;
      Status st = computeShapes(k, ti, shapes, &failed);
      if (opts_.profile) {
        profile_.shapeFuncSeconds += std::chrono::duration<double>(Clock::now() - t0).count();
        ++profile_.shapeFuncCalls;
      }
      if (!st.ok() && memberLoc(code[pc + 1], func, pc, failed))
        return errorAt(func, pc, st.message, memberLoc(code[pc + 1], func, pc, failed));
      if (!st.ok()) FAIL(st.message);
      // The verifier checked nout against the kernel's outputs.
      for (uint32_t o = 0; o < nout; ++o) {
        const std::vector<int64_t> &s = shapes[o];
        const int64_t len = static_cast<int64_t>(s.size());
        Tensor *t;
        TensorRef made;
        if (fresh) {
          made = makeTensor(DType::I64, {len});
          if (!made) FAIL("out of memory");
          t = made.get();
        } else {
          t = to[o];
          if (t->dtype() != DType::I64 || t->rank() != 1 || t->dim(0) != len)
            FAIL("shape function output " + std::to_string(o) + " of '" + k.name +
                 "' must be a 1-D i64 tensor of length " + std::to_string(len) + ", got " + t->typeString());
          if (t->storage()->readOnly()) FAIL("shape function output is a read-only constant");
        }
        if (len) std::memcpy(t->rawData(), s.data(), s.size() * sizeof(int64_t));
        if (fresh) R(outs[o]) = ObjectRef(made.get());
      }
    }
    NEXT(step);
  }
  CASE(AllocStorage) {
    TENSOR_OR_FAIL(sz, code[pc + 2]);
    SCALAR_OR_FAIL(size, sz, "storage size");
    uint32_t align = code[pc + 3];
    Device dev = static_cast<Device>(code[pc + 4]);
    if (size < 0) FAIL("storage size " + std::to_string(size) + " is negative");
    // The tensor size limit (ir/Limits.h, 2^48 bytes): a corrupt size is an
    // error rather than a request the allocator (or a sanitizer) aborts on.
    if (size > limits::kMaxTensorBytes)
      FAIL("storage size " + std::to_string(size) + " bytes is more than the limit of " +
           std::to_string(limits::kMaxTensorBytes) + " (2^48)");
    // A device storage lives on the device (nimble-run --device), or in
    // host memory when every kernel runs on the host (hostDevices).
    if (dev != Device::CPU && !opts_.device && !opts_.hostDevices)
      FAIL(std::string("device ") + deviceName(dev) + " is not available in this run (nimble-run --device)");
    Allocator &a = dev != Device::CPU && opts_.device ? opts_.device->allocator() : defaultAllocator(Device::CPU);
    void *p = a.allocate(static_cast<size_t>(size), align);
    if (!p)
      FAIL("out of memory allocating " + std::to_string(size) + " bytes" +
           (dev != Device::CPU && opts_.device ? std::string(" on ") + deviceName(dev) : std::string()));
    R(code[pc + 1]) = ObjectRef(Storage::make(&a, p, static_cast<size_t>(size), dev, align));
    NEXT(5);
  }
  CASE(StorageSize) {
    TENSOR_OR_FAIL(sh, code[pc + 2]);
    DType dt = static_cast<DType>(code[pc + 3]);
    uint64_t align = code[pc + 4];
    if (sh->rank() != 1 || sh->dtype() != DType::I64) FAIL("storage_size needs a 1-D i64 shape, got " + sh->typeString());
    if (!hostReadable(*sh)) FAIL("storage_size: the shape is on " + std::string(deviceName(sh->device())) + ", not on the cpu");
    int64_t bytes = 0;
    { // locals die here: computed goto would skip their destructors
      std::vector<int64_t> dims(sh->data<int64_t>(), sh->data<int64_t>() + sh->dim(0));
      for (int64_t d : dims)
        if (d < 0) FAIL("negative dimension " + std::to_string(d) + " in shape");
      if (!limits::checkedByteSize(dims, static_cast<int64_t>(dtypeSize(dt)), bytes))
        FAIL(tooLarge(dims, dt));
    }
    uint64_t b = static_cast<uint64_t>(bytes);
    if (align > 1) b = (b + align - 1) / align * align;
    SCALAR_TO(code[pc + 1], static_cast<int64_t>(b));
    NEXT(5);
  }
  CASE(AllocTensor)
  CASE(AllocTensorReg) {
    uint32_t step;
    { // locals die here: computed goto would skip their destructors
      bool fromReg = opcodeOf(code[pc]) == Opcode::AllocTensorReg;
      Storage *st = asStorage(R(code[pc + 2]).get());
      if (!st) FAIL("register r" + std::to_string(code[pc + 2]) + " does not hold a storage");
      TENSOR_OR_FAIL(off, code[pc + 3]);
      DType dt = static_cast<DType>(code[pc + 4]);
      // The dims on the stack (rank <= kMaxRank, checked here for a shape in
      // a register and by the verifier for an immediate one): Tensor::make
      // copies them into a recycled tensor's buffer, no allocation per call.
      int64_t dims[limits::kMaxRank];
      size_t rank;
      uint32_t size;
      if (fromReg) {
        TENSOR_OR_FAIL(sh, code[pc + 5]);
        if (sh->rank() != 1 || sh->dtype() != DType::I64) FAIL("alloc_tensor needs a 1-D i64 shape, got " + sh->typeString());
    if (!hostReadable(*sh)) FAIL("alloc_tensor: the shape is on " + std::string(deviceName(sh->device())) + ", not on the cpu");
        if (sh->dim(0) > int64_t(limits::kMaxRank))
          FAIL("alloc_tensor shape of rank " + std::to_string(sh->dim(0)) + " is more than the limit of " +
               std::to_string(limits::kMaxRank));
        rank = static_cast<size_t>(sh->dim(0));
        if (rank) std::memcpy(dims, sh->data<int64_t>(), rank * sizeof(int64_t));
        size = 6;
      } else {
        uint32_t r = code[pc + 5];
        if (r > limits::kMaxRank)
          FAIL("alloc_tensor shape of rank " + std::to_string(r) + " is more than the limit of " +
               std::to_string(limits::kMaxRank));
        for (uint32_t i = 0; i < r; ++i)
          dims[i] = static_cast<int64_t>(uint64_t(code[pc + 6 + 2 * i]) | (uint64_t(code[pc + 7 + 2 * i]) << 32));
        rank = r;
        size = 6 + 2 * r;
      }
      auto shapeText = [&] { return formatDims(std::vector<int64_t>(dims, dims + rank)); };
      for (size_t i = 0; i < rank; ++i)
        if (dims[i] < 0) FAIL("negative dimension in alloc_tensor shape " + shapeText());
      int64_t elems = 0, bytes = 0, end = 0;
      if (!limits::checkedNumElements(dims, rank, elems) ||
          !limits::checkedMul(elems, static_cast<int64_t>(dtypeSize(dt)), bytes) || bytes > limits::kMaxTensorBytes)
        FAIL(tooLarge(std::vector<int64_t>(dims, dims + rank), dt));
      SCALAR_OR_FAIL(offset, off, "tensor offset");
      if (offset < 0 || !limits::checkedAdd(offset, bytes, end) || static_cast<uint64_t>(end) > st->size())
        FAIL("tensor of shape " + shapeText() + "x" + std::string(dtypeName(dt)) + " at offset " +
             std::to_string(offset) + " does not fit its storage of " + std::to_string(st->size()) + " bytes");
      // Storages are at least 8-byte aligned (the allocators' minimum), so an
      // offset that is a multiple of the element size keeps every element
      // naturally aligned; planned arenas use multiples of 64.
      if (offset % static_cast<int64_t>(dtypeSize(dt)) != 0)
        FAIL("tensor of dtype " + std::string(dtypeName(dt)) + " at offset " + std::to_string(offset) +
             " is not aligned to its element size (" + std::to_string(dtypeSize(dt)) + " bytes)");
      R(code[pc + 1]) = ObjectRef(Tensor::make(dt, dims, rank, Ref<Storage>(st), static_cast<size_t>(offset)));
      step = size;
    }
    NEXT(step);
  }
  CASE(AllocADT) {
    uint32_t step;
    { // locals die here: computed goto would skip their destructors
      uint32_t tag = code[pc + 2];
      uint32_t n = code[pc + 3];
      std::vector<ObjectRef> fields;
      fields.reserve(n);
      for (uint32_t i = 0; i < n; ++i) {
        const ObjectRef &o = R(code[pc + 4 + i]);
        if (!o) FAIL("register r" + std::to_string(code[pc + 4 + i]) + " is empty");
        fields.push_back(o);
      }
      R(code[pc + 1]) = ObjectRef(new Adt(tag, std::move(fields)));
      step = 4 + n;
    }
    NEXT(step);
  }
  CASE(GetField) {
    Adt *a = asAdt(R(code[pc + 2]).get());
    if (!a) FAIL("register r" + std::to_string(code[pc + 2]) + " does not hold a constructor value");
    uint32_t i = code[pc + 3];
    if (i >= a->fields().size()) FAIL("field " + std::to_string(i) + " of a value with " + std::to_string(a->fields().size()) + " fields");
    R(code[pc + 1]) = a->fields()[i];
    NEXT(4);
  }
  CASE(GetTag) {
    Adt *a = asAdt(R(code[pc + 2]).get());
    if (!a) FAIL("register r" + std::to_string(code[pc + 2]) + " does not hold a constructor value");
    SCALAR_TO(code[pc + 1], a->tag());
    NEXT(3);
  }
  CASE(If) {
    TENSOR_OR_FAIL(c, code[pc + 1]);
    SCALAR_OR_FAIL(cv, c, "branch condition");
    JUMP(cv != 0 ? code[pc + 2] : code[pc + 3]);
  }
  CASE(Switch) {
    Adt *a = asAdt(R(code[pc + 1]).get());
    if (!a) FAIL("match on a register that does not hold a constructor value");
    uint32_t n = code[pc + 2];
    for (uint32_t i = 0; i < n; ++i)
      if (code[pc + 3 + 2 * i] == a->tag()) JUMP(code[pc + 4 + 2 * i]);
    JUMP(code[pc + 3 + 2 * n]);
  }
  CASE(Goto) { JUMP(code[pc + 1]); }
  CASE(LoadConst) {
    { // locals die here: computed goto would skip their destructors
      TensorRef t = constant(code[pc + 2]);
      if (!t) {
        const ConstantDesc &c = exe_->constants[code[pc + 2]];
        int64_t bytes = 0;
        (void)limits::checkedByteSize(c.shape, static_cast<int64_t>(dtypeSize(c.dtype)), bytes);
        FAIL("out of memory allocating " + std::to_string(bytes) + " bytes for " + formatSig({c.dtype, c.shape}));
      }
      R(code[pc + 1]) = ObjectRef(t.get());
    }
    NEXT(3);
  }
  CASE(LoadConsti) {
    int64_t v = static_cast<int64_t>(uint64_t(code[pc + 2]) | (uint64_t(code[pc + 3]) << 32));
    R(code[pc + 1]) = scalarConstant(v);
    NEXT(4);
  }
  CASE(ShapeOf) {
    uint32_t step;
    { // locals die here: computed goto would skip their destructors
      TENSOR_OR_FAIL(t, code[pc + 2]);
      TensorRef s = makeTensor(DType::I64, {t->rank()});
      if (!s) FAIL("out of memory");
      if (t->rank()) std::memcpy(s->rawData(), t->shape().data(), t->shape().size() * sizeof(int64_t));
      R(code[pc + 1]) = ObjectRef(s.get());
      step = 3;
    }
    NEXT(step);
  }
  CASE(ReshapeTensor) {
    uint32_t step;
    { // locals die here: computed goto would skip their destructors
      TENSOR_OR_FAIL(t, code[pc + 2]);
      TENSOR_OR_FAIL(sh, code[pc + 3]);
      if (sh->rank() != 1 || !isInteger(sh->dtype())) FAIL("reshape needs a 1-D integer shape, got " + sh->typeString());
      if (!hostReadable(*sh)) FAIL("reshape: the shape is on " + std::string(deviceName(sh->device())) + ", not on the cpu");
      if (sh->dim(0) > int64_t(limits::kMaxRank))
        FAIL("reshape target of rank " + std::to_string(sh->dim(0)) + " is more than the limit of " +
             std::to_string(limits::kMaxRank));
      std::vector<int64_t> shape;
      int infer = -1;
      int64_t known = 1;
      for (int64_t i = 0; i < sh->dim(0); ++i) {
        int64_t d = sh->intAt(i);
        if (d == -1 && infer < 0) infer = static_cast<int>(i);
        else if (d < 0) FAIL("invalid reshape target dimension " + std::to_string(d));
        else if (!limits::checkedMul(known, d, known)) FAIL("reshape target shape is too large");
        shape.push_back(d);
      }
      int64_t n = t->numElements();
      if (infer >= 0) {
        if (known == 0 || n % known != 0) FAIL("cannot reshape " + t->typeString() + " to " + formatDims(shape));
        shape[static_cast<size_t>(infer)] = n / known;
      } else if (known != n) {
        FAIL("cannot reshape " + t->typeString() + " (" + std::to_string(n) + " elements) to " + formatDims(shape));
      }
      R(code[pc + 1]) = ObjectRef(Tensor::make(t->dtype(), shape, t->storage(), t->offset()));
      step = 4;
    }
    NEXT(step);
  }
  CASE(DeviceCopy) {
    uint32_t step;
    { // locals die here: computed goto would skip their destructors
      TENSOR_OR_FAIL(t, code[pc + 2]);
      Device from = static_cast<Device>(code[pc + 3]), to = static_cast<Device>(code[pc + 4]);
      if ((from != Device::CPU || to != Device::CPU) && !opts_.device && !opts_.hostDevices)
        FAIL(std::string("device_copy from ") + deviceName(from) + " to " + deviceName(to) +
             ": device " + deviceName(from != Device::CPU ? from : to) + " is not available in this run (nimble-run --device)");
      // The tensor's own device is the source: place-devices leaves
      // constants where they are (a constant may reach a copy "from cuda"
      // through a block argument while still in the executable's memory).
      from = t->device();
      TensorRef c;
      if (opts_.device && (from != Device::CPU || to != Device::CPU)) {
        cuda::LaunchSite earlier;
        Status st = opts_.device->copy(*t, to, c, &earlier);
        if (!st.ok()) return earlier.set ? errorAt(earlier.func, earlier.pc, st.message) : errorAt(func, pc, st.message);
      } else {
        // Host memory on both sides (hostDevices keeps the device's tag).
        Allocator &a = defaultAllocator(Device::CPU);
        void *p = a.allocate(t->numBytes(), 64);
        if (!p) FAIL("out of memory allocating " + std::to_string(t->numBytes()) + " bytes");
        c = TensorRef(new Tensor(t->dtype(), t->shape(), Ref<Storage>(new Storage(&a, p, t->numBytes(), to)), 0));
        if (t->numBytes()) std::memcpy(c->rawData(), t->rawData(), t->numBytes());
      }
      ++profile_.copies;
      profile_.copiedBytes += t->numBytes();
      R(code[pc + 1]) = ObjectRef(c.get());
      step = 5;
    }
    NEXT(step);
  }
  CASE(FreeStorage)
  CASE(FreeTensor) {
    R(code[pc + 1]).reset();
    NEXT(2);
  }
  CASE(Fatal) { FAIL(exe_->strings[code[pc + 1]]); }
  CASE(ScalarI64) {
    { // locals die here: computed goto would skip their destructors
      const uint32_t sop = code[pc + 1];
      TENSOR_OR_FAIL(out, code[pc + 2]);
      TENSOR_OR_FAIL(a, code[pc + 3]);
      TENSOR_OR_FAIL(b, code[pc + 4]);
      const bool cmp = scalarOpCompares(sop);
      auto scalarI64 = [this](const Tensor *t) {
        return t->dtype() == DType::I64 && t->rank() == 0 && hostReadable(*t);
      };
      if (!scalarI64(a) || !scalarI64(b))
        FAIL(std::string("ScalarI64 ") + scalarOpName(sop) + " needs scalar i64 operands, got " +
             a->typeString() + " and " + b->typeString());
      if (out->dtype() != (cmp ? DType::I1 : DType::I64) || out->rank() != 0 || !hostReadable(*out) ||
          out->storage()->readOnly())
        FAIL(std::string("ScalarI64 ") + scalarOpName(sop) + " writes a writable scalar " +
             (cmp ? "i1" : "i64") + " tensor, got " + out->typeString() +
             (out->storage()->readOnly() ? " (read-only)" : ""));
      int64_t x, y;
      std::memcpy(&x, a->rawData(), sizeof x);
      std::memcpy(&y, b->rawData(), sizeof y);
      const uint64_t ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
      int64_t v = 0;
      switch (static_cast<ScalarOp>(sop)) {
      case ScalarOp::Add: v = static_cast<int64_t>(ux + uy); break;
      case ScalarOp::Sub: v = static_cast<int64_t>(ux - uy); break;
      case ScalarOp::Mul: v = static_cast<int64_t>(ux * uy); break;
      case ScalarOp::Eq: v = x == y; break;
      case ScalarOp::Ne: v = x != y; break;
      case ScalarOp::Lt: v = x < y; break;
      case ScalarOp::Le: v = x <= y; break;
      case ScalarOp::Gt: v = x > y; break;
      case ScalarOp::Ge: v = x >= y; break;
      case ScalarOp::Min: v = x < y ? x : y; break;
      case ScalarOp::Max: v = x < y ? y : x; break;
      }
      if (cmp) *out->rawData() = static_cast<uint8_t>(v);
      else std::memcpy(out->rawData(), &v, sizeof v);
    }
    NEXT(5);
  }

#if !NIMBLE_VM_COMPUTED_GOTO
  }
  FAIL("invalid opcode");
#endif
#undef R
#undef FAIL
#undef TENSOR_OR_FAIL
#undef SCALAR_TO
#undef SCALAR_OR_FAIL
#undef CASE
#undef DISPATCH
#undef FETCH
#undef NEXT
#undef JUMP
}

} // namespace nimble::vm
