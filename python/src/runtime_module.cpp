//===- runtime_module.cpp - nimble._runtime: load and run from Python -----===//
//
// The Python face of the runtime driver (tools/driver/Runtime.h): `load`
// gives an Executable (a driver::Program: the verified .nbc, its native code
// and its tuning decisions, shared by every call), whose `run` and
// `run_many` lease a VM from the program's pool, convert the arguments,
// release the GIL for the run, and convert the results. Like nimble-run,
// this module links no compiler code and no LLVM.
//
// Values (docs/python.md):
//   tensor   a numpy array of the parameter's dtype (f32 float32, f64
//            float64, f16 float16, i1 bool, i8 int8, i32 int32, i64 int64;
//            bf16 has no numpy dtype: results come back as float32). A Python
//            scalar fills a rank-0 parameter. A C-contiguous, aligned,
//            writeable array in native byte order is borrowed, not copied
//            (nimblec's programs never write their arguments; the call holds
//            the array until it returns); anything else is copied once,
//            straight into the VM's tensor.
//   ADT      ("Node", left, right): the constructor's name, then its fields;
//            a constructor without fields is ("Nil",) (or "Nil" on input).
//   tuple    a Python tuple of its elements.
// Results: a tensor comes back as a numpy array over the VM's own buffer,
// which the array keeps alive (no copy), unless that buffer is shared with
// something the VM keeps (constants), is an argument's borrowed array, or is
// much larger than the tensor (a view into a planned arena): then one copy.
// Trees and lists are walked with explicit stacks, never the C++ stack.
//
// Thread safety: objects of the VM are reference counted without atomics
// (vm/Object.h), so each is touched by one thread at a time: arguments are
// made and results unwrapped under the GIL by the calling thread, which runs
// the VM in between; a result array's buffer is released by its capsule,
// under the GIL; the VM keeps no reference to a run's values after it.
//
//===----------------------------------------------------------------------===//

#include "ir/Limits.h"
#include "tools/driver/Runtime.h"
#include "vm/support/Allocator.h"
#include "vm/format/Disassembler.h"
#include "vm/io/ValueText.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <unordered_set>

namespace py = pybind11;
using namespace nimble;
using namespace nimble::vm;
using driver::Program;

namespace {

//===-- Errors ---------------------------------------------------------------===//

/// The exception classes of nimble/errors.py.
struct ErrorClasses {
  py::object load, input, execution, outOfMemory;
};
ErrorClasses &errors() {
  static ErrorClasses *e = nullptr; // set at import; never destroyed (no GIL at exit)
  if (!e) {
    py::module_ m = py::module_::import("nimble.errors");
    e = new ErrorClasses{m.attr("LoadError"), m.attr("InputError"), m.attr("ExecutionError"),
                         m.attr("OutOfMemoryError")};
  }
  return *e;
}

[[noreturn]] void raise(const py::object &cls, const std::string &msg) {
  PyErr_SetObject(cls.ptr(), py::str(msg).ptr());
  throw py::error_already_set();
}

/// A VM error: its message already starts with a location or `error:`.
[[noreturn]] void raiseRun(const std::string &msg) {
  bool oom = msg.find("error: out of memory") != std::string::npos;
  raise(oom ? errors().outOfMemory : errors().execution, msg);
}

//===-- dtypes -----------------------------------------------------------------===//

/// numpy's type character (dtype.char) of each DType; 0 for bf16.
char numpyChar(DType t) {
  switch (t) {
  case DType::F32: return 'f';
  case DType::F64: return 'd';
  case DType::F16: return 'e';
  case DType::BF16: return 0;
  case DType::I1: return '?';
  case DType::I8: return 'b';
  case DType::I32: return 'i';
  case DType::I64: return 'l';
  case DType::I16: return 'h';
  case DType::U8: return 'B';
  case DType::U16: return 'H';
  case DType::U32: return 'I';
  case DType::U64: return 'L';
  }
  return 0;
}

bool dtypeOfNumpy(const py::dtype &d, DType &out) {
  char k = d.kind();
  size_t n = static_cast<size_t>(d.itemsize());
  if (k == 'f' && n == 4) out = DType::F32;
  else if (k == 'f' && n == 8) out = DType::F64;
  else if (k == 'f' && n == 2) out = DType::F16;
  else if (k == 'b' && n == 1) out = DType::I1;
  else if (k == 'i' && n == 1) out = DType::I8;
  else if (k == 'i' && n == 4) out = DType::I32;
  else if (k == 'i' && n == 8) out = DType::I64;
  else if (k == 'i' && n == 2) out = DType::I16;
  else if (k == 'u' && n == 1) out = DType::U8;
  else if (k == 'u' && n == 2) out = DType::U16;
  else if (k == 'u' && n == 4) out = DType::U32;
  else if (k == 'u' && n == 8) out = DType::U64;
  else return false;
  return true;
}

py::dtype numpyDType(DType t) { return py::dtype(std::string(1, numpyChar(t == DType::BF16 ? DType::F32 : t))); }

//===-- Python -> VM -------------------------------------------------------------===//

/// Memory a run borrows from a numpy array: never returned anywhere (the
/// call holds the array until it ends).
class BorrowedMemory final : public Allocator {
public:
  void *allocate(size_t, size_t) override { return nullptr; }
  void deallocate(void *, size_t, size_t) override {}
  Device device() const override { return Device::CPU; }
  const char *kindName() const override { return "borrowed"; }
  AllocStats stats() const override { return {}; }
  void resetStats() override {}
};
BorrowedMemory gBorrowed;

/// What the arguments of one call hold on to.
struct Arguments {
  std::vector<py::object> keep;              // arrays made or borrowed
  std::unordered_set<const Storage *> borrowed; // their storages
};

/// A tensor of type `t` from `obj`, or an InputError naming `what`.
TensorRef toTensor(const Executable &exe, const TypeDesc &t, py::handle obj, const std::string &what, Arguments &args) {
  const std::string want = typeToString(exe, t);
  if (t.dtype == DType::BF16) raise(errors().input, what + " is " + want + ": bf16 has no numpy dtype");
  py::array arr;
  if (py::isinstance<py::array>(obj)) {
    arr = py::reinterpret_borrow<py::array>(obj);
  } else if (t.dims.empty() && (PyBool_Check(obj.ptr()) || PyLong_Check(obj.ptr()) || PyFloat_Check(obj.ptr()))) {
    // A Python number for a scalar parameter takes the parameter's dtype.
    try {
      arr = py::array(numpyDType(t.dtype), std::vector<py::ssize_t>{}, std::vector<py::ssize_t>{});
      arr.attr("__setitem__")(py::tuple(), obj);
    } catch (py::error_already_set &e) {
      raise(errors().input, what + " must be " + want + ": " + py::str(e.value()).cast<std::string>());
    }
  } else {
    try {
      // A DLPack producer (a torch tensor, a JAX array on the CPU) through
      // numpy.from_dlpack (no copy); anything else with the buffer protocol
      // or numpy's array interface through numpy.asarray.
      if (py::hasattr(obj, "__dlpack__"))
        arr = py::module_::import("numpy").attr("from_dlpack")(obj);
      else
        arr = py::array::ensure(obj);
    } catch (py::error_already_set &) {
    }
    if (!arr) {
      PyErr_Clear();
      raise(errors().input, what + " must be " + want + " (a numpy array), got " +
                                std::string(py::str(obj.get_type().attr("__name__"))));
    }
  }
  DType dt;
  if (!dtypeOfNumpy(arr.dtype(), dt))
    raise(errors().input, what + " must be " + want + ", got an array of numpy dtype " +
                              std::string(py::str(arr.dtype())) + " (no Nimble dtype)");
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  const int flags = arr.flags();
  const bool nativeOrder = arr.dtype().attr("isnative").cast<bool>();
  const bool borrowable = (flags & py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_) &&
                          (flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_) &&
                          (flags & py::detail::npy_api::NPY_ARRAY_WRITEABLE_) && nativeOrder;
  TensorRef x;
  if (borrowable) {
    size_t bytes = static_cast<size_t>(arr.nbytes());
    Ref<Storage> st(new Storage(&gBorrowed, arr.mutable_data(), bytes, Device::CPU));
    args.borrowed.insert(st.get());
    x = TensorRef(new Tensor(dt, std::move(shape), st, 0));
  } else {
    x = makeTensor(dt, shape);
    if (!x) raise(errors().outOfMemory, what + ": out of memory copying a " + std::string(py::str(arr.dtype())) +
                                            " array of " + std::to_string(arr.nbytes()) + " bytes");
    // One copy, by numpy, from whatever layout and byte order into the
    // tensor's C-order buffer.
    std::vector<py::ssize_t> strides(shape.size());
    py::ssize_t s = static_cast<py::ssize_t>(dtypeSize(dt));
    for (size_t i = shape.size(); i-- > 0;) {
      strides[i] = s;
      s *= static_cast<py::ssize_t>(shape[i]);
    }
    if (x->numBytes()) {
      // The view must not own (nor copy) the tensor's buffer: a capsule
      // without a destructor is its base.
      py::capsule noOwner(x->rawData(), [](void *) {});
      py::array view(py::dtype(std::string(1, numpyChar(dt))), std::vector<py::ssize_t>(shape.begin(), shape.end()),
                     strides, x->rawData(), noOwner);
      py::module_::import("numpy").attr("copyto")(view, arr, py::arg("casting") = "equiv");
    }
  }
  args.keep.push_back(std::move(arr));
  std::string error;
  if (!checkValue(exe, t, x.get(), what, error)) raise(errors().input, error);
  return x;
}

/// The value of type `t` from `obj`: tensors as above, ADT values as
/// (name, fields...), tuples as tuples. Top-down with a worklist: each ADT
/// value is made with empty fields, which its children then fill.
ObjectRef toValue(const Executable &exe, const TypeDesc &t, py::handle obj, const std::string &what,
                  Arguments &args) {
  struct Item {
    const TypeDesc *t;
    py::handle obj;
    ObjectRef *slot;
    int depth;
  };
  ObjectRef root;
  std::vector<Item> work{{&t, obj, &root, 0}};
  while (!work.empty()) {
    Item it = work.back();
    work.pop_back();
    if (it.t->kind == TypeDesc::Kind::Tensor) {
      *it.slot = ObjectRef(toTensor(exe, *it.t, it.obj, what, args).get());
      continue;
    }
    if (it.depth >= nimble::limits::kMaxValueDepth)
      raise(errors().input, what + ": the value is nested more than " + std::to_string(nimble::limits::kMaxValueDepth) +
                                " levels");
    const std::string want = typeToString(exe, *it.t);
    const std::vector<TypeDesc> *fields = nullptr;
    uint32_t tag = 0;
    py::sequence items;
    size_t first = 0; // index of the first field in `items`
    if (it.t->kind == TypeDesc::Kind::Tuple) {
      if (!py::isinstance<py::tuple>(it.obj) && !py::isinstance<py::list>(it.obj))
        raise(errors().input, what + " must be " + want + " (a tuple), got " +
                                  std::string(py::str(it.obj.get_type().attr("__name__"))));
      items = py::reinterpret_borrow<py::sequence>(it.obj);
      fields = &it.t->elems;
    } else if (it.t->kind == TypeDesc::Kind::Adt) {
      const AdtDesc &adt = exe.adts[it.t->adt];
      std::string name;
      if (py::isinstance<py::str>(it.obj)) {
        name = it.obj.cast<std::string>();
      } else if ((py::isinstance<py::tuple>(it.obj) || py::isinstance<py::list>(it.obj)) && py::len(it.obj) > 0 &&
                 py::isinstance<py::str>(it.obj[py::int_(0)])) {
        items = py::reinterpret_borrow<py::sequence>(it.obj);
        name = items[0].cast<std::string>();
        first = 1;
      } else {
        raise(errors().input, what + " must be " + want + ", a (constructor, fields...) tuple, got " +
                                  std::string(py::str(it.obj.get_type().attr("__name__"))));
      }
      size_t c = 0;
      while (c < adt.ctors.size() && adt.ctors[c].name != name) ++c;
      if (c == adt.ctors.size()) {
        std::string names;
        for (const auto &k : adt.ctors) names += (names.empty() ? "" : ", ") + k.name;
        raise(errors().input, what + ": @" + adt.name + " has no constructor '" + name + "' (it has " + names + ")");
      }
      tag = static_cast<uint32_t>(c);
      fields = &adt.ctors[c].fields;
    } else {
      raise(errors().input, what + " has type " + want + ", which Python cannot pass");
    }
    size_t given = items ? py::len(items) - first : 0;
    if (given != fields->size()) {
      const bool adt = it.t->kind == TypeDesc::Kind::Adt;
      std::string who = adt ? "constructor '" + exe.adts[it.t->adt].ctors[tag].name + "'" : want;
      const char *unit = adt ? " field" : " element";
      raise(errors().input, what + ": " + who + " takes " + std::to_string(fields->size()) + unit +
                                (fields->size() == 1 ? "" : "s") + ", got " + std::to_string(given));
    }
    Ref<Adt> a(new Adt(tag, std::vector<ObjectRef>(fields->size())));
    *it.slot = ObjectRef(a.get());
    for (size_t i = fields->size(); i-- > 0;) {
      py::object child = items[py::int_(first + i)];
      work.push_back({&(*fields)[i], child, &a->mutableFields()[i], it.depth + 1});
      args.keep.push_back(std::move(child)); // alive while the worklist holds it
    }
  }
  return root;
}

/// The arguments of a call of `fn`, checked as nimble-run checks --input.
std::vector<ObjectRef> toArguments(const Executable &exe, const VMFunction &fn, const py::sequence &inputs,
                                   Arguments &args) {
  if (py::len(inputs) != fn.paramTypes.size())
    raise(errors().input, "error: " + driver::inputCountError(exe, fn, py::len(inputs)));
  std::vector<ObjectRef> out;
  out.reserve(fn.paramTypes.size());
  for (size_t i = 0; i < fn.paramTypes.size(); ++i)
    out.push_back(toValue(exe, fn.paramTypes[i], inputs[i], "error: " + driver::inputName(fn, i), args));
  return out;
}

//===-- VM -> Python -------------------------------------------------------------===//

/// A numpy array of tensor `x`: over its buffer when that can be handed over
/// (see the header), else a copy.
py::object fromTensor(const TensorRef &x, const Arguments &args) {
  std::vector<py::ssize_t> shape(x->shape().begin(), x->shape().end());
  const Storage *st = x->storage().get();
  const size_t bytes = x->numBytes();
  if (x->dtype() == DType::BF16) {
    // No numpy dtype: widened to float32 (exact).
    py::array_t<float> out(shape);
    const uint16_t *src = x->data<uint16_t>();
    float *dst = out.mutable_data();
    for (int64_t i = 0; i < x->numElements(); ++i) {
      uint32_t bits = uint32_t(src[i]) << 16;
      std::memcpy(&dst[i], &bits, 4);
    }
    return out;
  }
  py::dtype dt = numpyDType(x->dtype());
  const bool handOver = bytes > 0 && st && !st->readOnly() && !args.borrowed.count(st) &&
                        st->size() <= 2 * bytes + 4096;
  if (!handOver) {
    py::array out(dt, shape);
    if (bytes) std::memcpy(out.mutable_data(), x->rawData(), bytes);
    return out;
  }
  auto *owner = new TensorRef(x);
  py::capsule base(owner, [](void *p) { delete static_cast<TensorRef *>(p); });
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t s = static_cast<py::ssize_t>(dtypeSize(x->dtype()));
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return py::array(dt, shape, strides, x->rawData(), base);
}

/// The Python value of `v` (type `t`): top-down, each tuple made with empty
/// slots that its children then fill.
py::object fromValue(const Executable &exe, const TypeDesc &t, const ObjectRef &v, const Arguments &args) {
  struct Item {
    const TypeDesc *t;
    Object *v;
    PyObject *tuple; // the slot: item `index` of `tuple` (null: the root)
    size_t index;
  };
  py::object root;
  std::vector<Item> work{{&t, v.get(), nullptr, 0}};
  while (!work.empty()) {
    Item it = work.back();
    work.pop_back();
    py::object made;
    const std::vector<TypeDesc> *fields = nullptr;
    Adt *a = nullptr;
    size_t first = 0;
    if (Tensor *x = asTensor(it.v)) {
      made = fromTensor(TensorRef(x), args);
    } else if ((a = asAdt(it.v))) {
      if (it.t->kind == TypeDesc::Kind::Tuple) {
        fields = &it.t->elems;
      } else {
        const AdtDesc &adt = exe.adts[it.t->adt];
        fields = &adt.ctors[a->tag()].fields;
        first = 1;
      }
      PyObject *tup = PyTuple_New(static_cast<py::ssize_t>(first + a->fields().size()));
      if (!tup) throw py::error_already_set();
      made = py::reinterpret_steal<py::object>(tup);
      if (first) PyTuple_SET_ITEM(tup, 0, py::str(exe.adts[it.t->adt].ctors[a->tag()].name).release().ptr());
      for (size_t i = a->fields().size(); i-- > 0;)
        work.push_back({&(*fields)[i], a->fields()[i].get(), tup, first + i});
    } else {
      raise(errors().execution, "error: a result holds a value Python cannot take");
    }
    if (it.tuple) PyTuple_SET_ITEM(it.tuple, static_cast<py::ssize_t>(it.index), made.release().ptr());
    else root = std::move(made);
  }
  return root;
}

/// One result as itself, several as a tuple.
py::object fromResults(const Executable &exe, const VMFunction &fn, const std::vector<ObjectRef> &results,
                       const Arguments &args) {
  if (results.size() == 1) return fromValue(exe, fn.resultTypes[0], results[0], args);
  py::tuple out(results.size());
  for (size_t i = 0; i < results.size(); ++i) out[i] = fromValue(exe, fn.resultTypes[i], results[i], args);
  return out;
}

//===-- Executable ----------------------------------------------------------------===//

KernelMode kernelMode(const std::string &s) {
  KernelMode m;
  if (!parseKernelMode(s, m))
    throw py::value_error("kernels takes 'auto', 'tune', 'native', 'library' or 'reference', got '" + s + "'");
  return m;
}

driver::RunSettings settingsOf(unsigned threads, const std::string &kernels, bool profile, uint32_t maxCallDepth,
                               uint64_t maxInstructions) {
  if (threads < 1 || threads > 256) throw py::value_error("threads takes a count from 1 to 256");
  if (maxCallDepth < 1) throw py::value_error("max_call_depth takes a positive count");
  driver::RunSettings s;
  s.kernels = kernelMode(kernels);
  s.threads = threads;
  s.profile = profile;
  s.maxCallDepth = maxCallDepth;
  s.maxInstructions = maxInstructions;
  return s;
}

/// Python's warnings for what the runtime could not use (native code on
/// this CPU, oneDNN), once each.
void warn(const std::vector<std::string> &warnings) {
  for (const std::string &w : warnings)
    if (PyErr_WarnEx(PyExc_RuntimeWarning, ("nimble: " + w).c_str(), 1) != 0) throw py::error_already_set();
}

py::dict profileDict(const VirtualMachine &vm, const LibraryKernels *library, bool batch) {
  const Executable &exe = vm.executable();
  const Profile &p = vm.profile();
  py::list kernels;
  double kernelSeconds = 0;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const KernelProfile &k = p.kernels[i];
    kernelSeconds += k.seconds;
    if (!k.calls) continue;
    py::dict shapes;
    for (const auto &[s, ss] : k.shapes) shapes[py::str(s)] = ss.calls;
    py::dict d;
    d["name"] = exe.kernels[i].name;
    d["impl"] = driver::implNames(k.implCalls, k.calls);
    d["calls"] = k.calls;
    d["seconds"] = k.seconds;
    d["shapes"] = shapes;
    kernels.append(d);
  }
  kernels.attr("sort")(py::arg("key") = py::cpp_function([](py::dict d) { return -d["seconds"].cast<double>(); }));
  py::dict out;
  out["kernels"] = kernels;
  out["kernel_seconds"] = kernelSeconds;
  out["shape_function_seconds"] = p.shapeFuncSeconds;
  out["shape_function_calls"] = p.shapeFuncCalls;
  out["total_seconds"] = p.totalSeconds;
  out["other_seconds"] = p.totalSeconds - kernelSeconds - p.shapeFuncSeconds;
  out["instructions"] = p.instructions;
  if (batch) {
    const BatchProfile &b = p.batch;
    py::dict d;
    d["instances"] = b.instances;
    d["suspensions"] = b.suspensions;
    d["row_launches"] = b.rowLaunches;
    d["row_calls"] = b.rowCalls;
    d["invariant_launches"] = b.invariantLaunches;
    d["invariant_calls"] = b.invariantCalls;
    d["single_calls"] = b.singleCalls;
    d["fallback_calls"] = b.fallbackCalls;
    d["max_group"] = b.maxGroup;
    d["forks"] = b.forks;
    d["schedule_seconds"] = b.scheduleSeconds;
    d["gather_seconds"] = b.gatherSeconds;
    d["in_flight"] = b.inFlight; // the most instances in flight at once (batch_window)
    out["batch"] = d;
  }
  // The text nimble-run --profile prints (memory counts are the process's
  // allocator's: other threads' runs included).
  std::string text = driver::profileText(vm, 1, library);
  if (batch) text += driver::batchProfileText(vm, 1);
  out["text"] = text;
  return out;
}

class PyExecutable {
public:
  PyExecutable(std::shared_ptr<Program> p, std::string name) : program_(std::move(p)), name_(std::move(name)) {}

  const std::string &name() const { return name_; }

  /// [(name, [(param, type)], [result type])]
  py::list functions() const {
    const Executable &exe = program_->executable();
    py::list out;
    for (const VMFunction &f : exe.functions) {
      py::list params, results;
      for (size_t i = 0; i < f.paramTypes.size(); ++i)
        params.append(py::make_tuple(f.paramNames[i], typeToString(exe, f.paramTypes[i])));
      for (const TypeDesc &t : f.resultTypes) results.append(typeToString(exe, t));
      out.append(py::make_tuple(f.name, params, results));
    }
    return out;
  }

  /// [(name, [(constructor, [field type])])]
  py::list adts() const {
    const Executable &exe = program_->executable();
    py::list out;
    for (const AdtDesc &a : exe.adts) {
      py::list ctors;
      for (const auto &c : a.ctors) {
        py::list fields;
        for (const TypeDesc &t : c.fields) fields.append(typeToString(exe, t));
        ctors.append(py::make_tuple(c.name, fields));
      }
      out.append(py::make_tuple(a.name, ctors));
    }
    return out;
  }

  const VMFunction &function(const std::string &name) const {
    std::string error;
    const VMFunction *f = program_->function(name, name_, error);
    if (!f) raise(errors().input, "error: " + error);
    return *f;
  }

  py::object run(const std::string &fname, const py::args &inputs, unsigned threads, const std::string &kernels,
                 bool profile, uint32_t maxCallDepth, uint64_t maxInstructions) {
    const Executable &exe = program_->executable();
    const VMFunction &fn = function(fname);
    driver::RunSettings rs = settingsOf(threads, kernels, profile, maxCallDepth, maxInstructions);
    checkDevice(rs);
    Arguments args;
    std::vector<ObjectRef> values = toArguments(exe, fn, inputs, args);
    std::vector<std::string> warnings;
    std::vector<ObjectRef> results;
    Status st;
    std::optional<Program::Lease> lease;
    {
      py::gil_scoped_release nogil;
      try {
        lease.emplace(program_->lease(rs, &warnings));
        if (profile) {
          lease->vm().resetProfile();
          defaultAllocator(Device::CPU).resetStats();
        }
        st = lease->vm().run(fn.name, std::move(values), results);
      } catch (const std::bad_alloc &) {
        results.clear();
        st = Status::error("error: out of memory");
      }
    }
    warn(warnings);
    if (!st.ok()) raiseRun(st.message);
    py::object out = fromResults(exe, fn, results, args);
    results.clear();
    if (!profile) return out;
    return py::make_tuple(out, profileDict(lease->vm(), lease->library(), false));
  }

  py::object runMany(const std::string &fname, const py::iterable &instances, unsigned threads,
                     const std::string &kernels, bool autoBatch, const std::string &errorsMode, bool profile,
                     int64_t batchWindow) {
    if (errorsMode != "raise" && errorsMode != "return")
      throw py::value_error("errors takes 'raise' or 'return', got '" + errorsMode + "'");
    if (batchWindow < 0 || batchWindow > 1000000000)
      throw py::value_error("batch_window takes a count (0: every instance at once), got " + std::to_string(batchWindow));
    const Executable &exe = program_->executable();
    const VMFunction &fn = function(fname);
    driver::RunSettings rs = settingsOf(threads, kernels, profile, 10000, 0);
    rs.batchWindow = static_cast<uint32_t>(batchWindow);
    checkDevice(rs);
    Arguments args;
    // A malformed instance fails alone (as a bad line of nimble-run
    // --instances): the others run.
    std::vector<std::vector<ObjectRef>> runnable;
    std::vector<size_t> index;
    std::vector<py::object> failed;
    size_t n = 0;
    for (py::handle inst : instances) {
      failed.emplace_back();
      try {
        if (!py::isinstance<py::tuple>(inst) && !py::isinstance<py::list>(inst))
          raise(errors().input, "error: " + driver::inputCountError(exe, fn, 1) +
                                    "\n(an instance is a tuple of the function's inputs)");
        runnable.push_back(toArguments(exe, fn, py::reinterpret_borrow<py::sequence>(inst), args));
        index.push_back(n);
      } catch (py::error_already_set &e) {
        if (!e.matches(errors().input)) throw;
        failed.back() = e.value();
      }
      ++n;
    }
    std::vector<std::string> warnings;
    std::vector<InstanceOutcome> outcomes;
    Status st;
    std::optional<Program::Lease> lease;
    {
      py::gil_scoped_release nogil;
      try {
        lease.emplace(program_->lease(rs, &warnings));
        if (profile) {
          lease->vm().resetProfile();
          defaultAllocator(Device::CPU).resetStats();
        }
        st = lease->vm().runInstances(fn.name, std::move(runnable), outcomes, autoBatch);
      } catch (const std::bad_alloc &) {
        outcomes.clear();
        st = Status::error("error: out of memory");
      }
    }
    warn(warnings);
    if (!st.ok()) raiseRun(st.message);
    py::list out;
    for (size_t i = 0; i < n; ++i) out.append(failed[i] ? failed[i] : py::none());
    for (size_t k = 0; k < index.size(); ++k) {
      InstanceOutcome &r = outcomes[k];
      if (r.status.ok()) {
        out[index[k]] = fromResults(exe, fn, r.results, args);
        continue;
      }
      bool oom = r.status.message.find("error: out of memory") != std::string::npos;
      out[index[k]] = (oom ? errors().outOfMemory : errors().execution)(r.status.message);
    }
    outcomes.clear();
    if (errorsMode == "raise")
      for (size_t i = 0; i < n; ++i)
        if (py::isinstance(out[i], py::handle(PyExc_Exception))) {
          py::object e = out[i];
          py::object cls = py::reinterpret_borrow<py::object>(e.get_type());
          raise(cls, "instance " + std::to_string(i) + ": " + py::str(e).cast<std::string>());
        }
    if (!profile) return out;
    return py::make_tuple(out, profileDict(lease->vm(), lease->library(), autoBatch));
  }

  /// A program compiled for cuda runs from Python on the host only.
  void checkDevice(const driver::RunSettings &rs) const {
    if (!program_->executable().cuda.empty() && rs.kernels != KernelMode::Reference)
      raise(errors().execution, "error: " + name_ + " is compiled for cuda: from Python it runs on the host, "
                                                    "with kernels='reference', only");
  }

  void loadTuning(const std::string &path) {
    std::string error;
    if (!program_->tuning().load(path, error)) raise(errors().load, "error: " + error);
  }
  void saveTuning(const std::string &path) {
    std::string error;
    if (!program_->tuning().save(path, error)) throw py::value_error("error: " + error);
  }
  size_t tuningSize() const { return program_->tuning().size(); }

private:
  std::shared_ptr<Program> program_;
  std::string name_;
};

PyExecutable *load(py::object source, std::optional<std::string> name) {
  std::string error;
  std::shared_ptr<Program> p;
  std::string shown;
  if (py::isinstance<py::bytes>(source) || py::isinstance<py::bytearray>(source) ||
      py::isinstance<py::memoryview>(source)) {
    py::buffer_info b = py::reinterpret_borrow<py::buffer>(source).request();
    shown = name.value_or("<bytes>");
    py::gil_scoped_release nogil;
    p = Program::fromBytes(static_cast<const uint8_t *>(b.ptr), static_cast<size_t>(b.size * b.itemsize), shown, error);
  } else {
    shown = py::str(py::module_::import("os").attr("fspath")(source)).cast<std::string>();
    py::gil_scoped_release nogil;
    p = Program::load(shown, error);
  }
  if (!p) raise(errors().load, "error: " + error);
  // A program compiled for cuda runs from Python on the host only
  // (kernels='reference', as nimble-run --kernels=reference): the device
  // runtime is not shared between threads yet.
  if (int rc = p->openDevice("cpu", KernelMode::Reference, shown, error); rc != 0)
    raise(errors().load, "error: " + error);
  return new PyExecutable(std::move(p), name.value_or(shown));
}

} // namespace

PYBIND11_MODULE(_runtime, m) {
  m.doc() = "Nimble's runtime: load a .nbc and run it (see the nimble package).";
  errors(); // import nimble.errors now: a missing one fails the import, not a call
  py::class_<PyExecutable>(m, "Executable")
      .def_property_readonly("name", &PyExecutable::name)
      .def("_functions", &PyExecutable::functions)
      .def("_adts", &PyExecutable::adts)
      .def("run", &PyExecutable::run, py::arg("function"), py::arg("threads") = 1,
           py::arg("kernels") = "auto", py::arg("profile") = false, py::arg("max_call_depth") = 10000,
           py::arg("max_instructions") = 0,
           "run(function, *inputs, threads=1, kernels='auto', profile=False, max_call_depth=10000, "
           "max_instructions=0)\n\nRuns `function` on `inputs` (numpy arrays; ADT values as ('Ctor', "
           "fields...) tuples) as nimble-run does. Returns the result, or a tuple of them when there "
           "are several; with profile=True, (results, profile dict). Raises nimble.Error subclasses. "
           "docs/python.md.")
      .def("run_many", &PyExecutable::runMany, py::arg("function"), py::arg("instances"), py::kw_only(),
           py::arg("threads") = 1, py::arg("kernels") = "auto", py::arg("auto_batch") = true,
           py::arg("errors") = "raise", py::arg("profile") = false, py::arg("batch_window") = 16,
           "run_many(function, instances, *, threads=1, kernels='auto', auto_batch=True, errors='raise', "
           "profile=False, batch_window=16)\n\nRuns `function` once per instance (a tuple of its inputs), the "
           "instances together with their kernel calls batched (nimble-run --instances), at most "
           "batch_window of them in flight (0: all at once; nimble-run --batch-window). Returns one entry per "
           "instance; a failed instance raises after all ran (errors='raise') or is its exception "
           "object (errors='return').")
      .def("load_tuning", &PyExecutable::loadTuning, py::arg("path"),
           "Reads stored dispatch decisions (nimble-run --tuning's file), obeyed by kernels='auto' and 'tune'.")
      .def("save_tuning", &PyExecutable::saveTuning, py::arg("path"),
           "Writes the dispatch decisions loaded or measured by kernels='tune' so far (nimble-run --tuning's file).")
      .def_property_readonly("tuning_decisions", &PyExecutable::tuningSize,
                             "How many stored or measured (kernel, shape bucket) decisions the executable holds.");
  m.def("load", &load, py::arg("source"), py::arg("name") = py::none(), py::return_value_policy::take_ownership,
        "Loads and verifies a .nbc from a path or bytes.");
}
