//===- Create.cpp - constant, zeros, full, arange, unique, nonzero, shapes ==//
//
//   constant     copies the literal attribute into the output; a splat
//                literal (one element) fills it.
//   zeros/full   fill; the output's shape came from the run-time shape operand
//                (data-dependent shape functions, paper §3.1).
//   arange       element i is start + i * step, computed in double for floats
//                (rounded once) and in wrapping int64 for integers; the length
//                ceil((stop - start) / step) is the shape function's.
//   unique       sorted distinct values (numpy.unique: NaNs sort last and
//                count as one value).
//   nonzero      the coordinates of the non-zero elements, row-major, as a
//                [count, rank] i64 matrix (numpy.argwhere).
//   shape_of/dim the input's shape as i64.
//   device_copy  the reference kernel copies CPU -> CPU only.
//
// unique and nonzero are upper-bound ops (paper §3.2, Kernel.h): output 0 has
// the bound shape, the kernel writes the true elements compactly at its start
// and the true shape into the extra output 1.
//
//===----------------------------------------------------------------------===//

#include "vm/kernels/KernelUtil.h"
#include "vm/kernels/Kernels.h"

#include <algorithm>
#include <cmath>

namespace nimble::vm::kernels {

namespace {

/// Fills `y` with copies of the element at `elem`.
void fill(Tensor &y, const uint8_t *elem) {
  size_t es = dtypeSize(y.dtype());
  int64_t n = y.numElements();
  uint8_t *out = y.rawData();
  for (int64_t i = 0; i < n; ++i) std::memcpy(out + static_cast<size_t>(i) * es, elem, es);
}

Status constantImpl(const KernelArgs &args) {
  const DenseValue &v = args.attr(OpCode::Constant, "value").getDense();
  Tensor &y = *args.outputs[0];
  size_t es = dtypeSize(y.dtype());
  if (v.splat) {
    if (v.bytes.size() != es)
      return Status::error("splat literal has " + std::to_string(v.bytes.size()) +
                           " bytes, expected one " + std::string(dtypeName(y.dtype())) +
                           " element (" + std::to_string(es) + " bytes)");
    fill(y, v.bytes.data());
    return Status::success();
  }
  if (v.bytes.size() != y.numBytes())
    return Status::error("literal has " + std::to_string(v.bytes.size()) +
                         " bytes, expected " + std::to_string(y.numBytes()) + " for " + sig(y));
  if (!v.bytes.empty()) std::memcpy(y.rawData(), v.bytes.data(), v.bytes.size());
  return Status::success();
}

Status zerosImpl(const KernelArgs &args) {
  Tensor &y = *args.outputs[0];
  // All-zero bytes are 0 / 0.0 / false in every dtype.
  if (y.numBytes()) std::memset(y.rawData(), 0, y.numBytes());
  return Status::success();
}

Status fullImpl(const KernelArgs &args) {
  fill(*args.outputs[0], args.inputs[1]->rawData());
  return Status::success();
}

Status arangeImpl(const KernelArgs &args) {
  const Tensor &start = *args.inputs[0], &step = *args.inputs[2];
  Tensor &y = *args.outputs[0];
  return visitType(y.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (!(kIsFloat<T> || kIsInt<T>)) {
      return Status::error("arange has no kernel for " + sig(y));
    } else {
      T *out = y.data<T>();
      int64_t n = y.numElements();
      if constexpr (kIsFloat<T>) {
        double s = double(start.data<T>()[0]), d = double(step.data<T>()[0]);
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(s + double(i) * d);
      } else {
        int64_t s = loadInt(start, 0), d = loadInt(step, 0);
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(wrapAdd(s, wrapMul(i, d)));
      }
      return Status::success();
    }
  });
}

/// Writes the true shape of an upper-bound result into the extra output.
void setTrueShape(const KernelArgs &args, std::initializer_list<int64_t> dims) {
  int64_t *s = args.outputs[1]->data<int64_t>();
  for (int64_t d : dims) *s++ = d;
}

Status uniqueImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  Tensor &y = *args.outputs[0];
  return visitType(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, uint16_t>) {
      return Status::error("unique has no kernel for " + sig(x));
    } else {
      std::vector<T> v(x.data<T>(), x.data<T>() + x.numElements());
      if constexpr (kIsBool<T>)
        for (T &b : v) b = b != 0;
      auto less = [](T a, T b) {
        if constexpr (kIsFloat<T>)
          if (std::isnan(a) || std::isnan(b)) return !std::isnan(a) && std::isnan(b);
        return a < b;
      };
      auto same = [](T a, T b) {
        if constexpr (kIsFloat<T>)
          if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
        return a == b;
      };
      std::sort(v.begin(), v.end(), less);
      v.erase(std::unique(v.begin(), v.end(), same), v.end());
      if (!v.empty()) std::memcpy(y.rawData(), v.data(), v.size() * sizeof(T));
      setTrueShape(args, {static_cast<int64_t>(v.size())});
      return Status::success();
    }
  });
}

Status nonzeroImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  int64_t *out = args.outputs[0]->data<int64_t>();
  size_t rank = static_cast<size_t>(x.rank());
  int64_t n = x.numElements(), count = 0;
  visitType(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *in = x.data<T>();
    std::vector<int64_t> idx(rank, 0);
    for (int64_t i = 0; i < n; ++i) {
      bool nz;
      if constexpr (std::is_same_v<T, uint16_t>)
        nz = (in[i] & 0x7fffu) != 0; // f16/bf16: only +-0 have all other bits 0
      else
        nz = in[i] != T(0);
      if (nz) {
        std::copy(idx.begin(), idx.end(), out + count * static_cast<int64_t>(rank));
        ++count;
      }
      for (size_t d = rank; d-- > 0;) { // row-major increment
        if (++idx[d] < x.dim(d)) break;
        idx[d] = 0;
      }
    }
  });
  setTrueShape(args, {count, static_cast<int64_t>(rank)});
  return Status::success();
}

Status shapeOfImpl(const KernelArgs &args) {
  const std::vector<int64_t> &s = args.inputs[0]->shape();
  std::copy(s.begin(), s.end(), args.outputs[0]->data<int64_t>());
  return Status::success();
}

Status dimImpl(const KernelArgs &args) {
  const Tensor &x = *args.inputs[0];
  int64_t axis = normAxis(intAttr(args, OpCode::Dim, "axis"), x.rank());
  *args.outputs[0]->data<int64_t>() = x.dim(static_cast<size_t>(axis));
  return Status::success();
}

// storage_size: bytes of a dense tensor of the given shape, rounded up to the
// alignment (the VM's StorageSize instruction computes the same).
Status storageSizeImpl(const KernelArgs &args) {
  const Tensor &shape = *args.inputs[0];
  DType dt = args.attr(OpCode::StorageSize, "dtype").getDType();
  int64_t align = intAttr(args, OpCode::StorageSize, "alignment");
  uint64_t bytes = dtypeSize(dt);
  for (int64_t i = 0; i < shape.numElements(); ++i) {
    int64_t d = loadInt(shape, i);
    if (d < 0) return Status::error("negative dimension " + std::to_string(d) + " in the shape");
    if (d != 0 && bytes > (uint64_t(1) << 62) / static_cast<uint64_t>(d))
      return Status::error("the size of the shape does not fit in 64 bits");
    bytes *= static_cast<uint64_t>(d);
  }
  uint64_t a = static_cast<uint64_t>(align);
  bytes = (bytes + a - 1) / a * a;
  *args.outputs[0]->data<int64_t>() = static_cast<int64_t>(bytes);
  return Status::success();
}

Status deviceCopyImpl(const KernelArgs &args) {
  const std::string &src = args.attr(OpCode::DeviceCopy, "src").getStr();
  const std::string &dst = args.attr(OpCode::DeviceCopy, "dst").getStr();
  const Tensor &x = *args.inputs[0];
  Tensor &y = *args.outputs[0];
  if (src != "cpu" || dst != "cpu" || x.device() != Device::CPU || y.device() != Device::CPU)
    return Status::error("the reference kernel copies cpu -> cpu only, got " +
                         src + " -> " + dst);
  if (y.numBytes() && y.rawData() != x.rawData())
    std::memcpy(y.rawData(), x.rawData(), y.numBytes());
  return Status::success();
}

} // namespace

#define NIMBLE_CREATE_KERNEL(Id, Impl)                                                       \
  Status ref##Id(const KernelArgs &args) {                                                   \
    checkOutputShapes(OpCode::Id, args);                                                     \
    return Impl(args);                                                                       \
  }
NIMBLE_CREATE_KERNEL(Constant, constantImpl)
NIMBLE_CREATE_KERNEL(Zeros, zerosImpl)
NIMBLE_CREATE_KERNEL(Full, fullImpl)
NIMBLE_CREATE_KERNEL(Nonzero, nonzeroImpl)
NIMBLE_CREATE_KERNEL(ShapeOf, shapeOfImpl)
NIMBLE_CREATE_KERNEL(Dim, dimImpl)
NIMBLE_CREATE_KERNEL(DeviceCopy, deviceCopyImpl)
NIMBLE_CREATE_KERNEL(StorageSize, storageSizeImpl)
#undef NIMBLE_CREATE_KERNEL

Status refArange(const KernelArgs &args) {
  checkOutputShapes(OpCode::Arange, args);
  return withF32(args, &arangeImpl);
}

Status refUnique(const KernelArgs &args) {
  checkOutputShapes(OpCode::Unique, args);
  return withF32(args, &uniqueImpl);
}

} // namespace nimble::vm::kernels
