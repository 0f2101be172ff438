//===- Npy.h - Reading and writing numpy .npy files ----------------*- C++ -*-===//
//
// Tensors enter and leave the runtime as .npy files (nimble-run --input=@x.npy
// --output=@y.npy), the format every numpy can read and write:
//
//   "\x93NUMPY" major minor  header-length (u16 LE for 1.x, u32 LE for 2.x/3.x)
//   header: a Python dict literal
//           {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//           padded with spaces and ended by '\n'
//   data:   the elements, C order
//
// Supported element types: '<f4' f32, '<f2' f16, '<f8' f64, '|b1' i1,
// '|i1' i8, '<i4' i32, '<i8' i64 ('<' and '|' are both accepted for the
// one-byte types). bf16 has no numpy dtype: writing a bf16 tensor is an error
// (cast it to f32). Big-endian data, Fortran order, structured dtypes and
// object arrays are refused with a message saying so.
//
// The reader treats its input as hostile: every field is checked (magic,
// version, header length, the dict's syntax and keys, the dtype, each dimension
// and their product against the bytes actually present), and any problem is a
// Status message, never a crash or an out-of-bounds read. The data must be
// exactly as long as the header says (trailing bytes are an error too).
// Booleans are normalised to 0/1 on reading.
//
// The writer uses format 1.0 (2.0 only when the header exceeds 64 KiB) and
// pads the header so that the data starts at a multiple of 64 bytes, as numpy
// does.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_NPY_H
#define NIMBLE_VM_NPY_H

#include "vm/Kernel.h"
#include "vm/Object.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nimble::vm {

/// Parses a whole .npy file held in memory into a fresh CPU tensor.
Status parseNpy(const uint8_t *data, size_t size, TensorRef &out);
/// Reads a .npy file; messages start with the path.
Status readNpy(const std::string &path, TensorRef &out);

/// The .npy header (magic, version, dict, padding) of `t`: its bytes follow
/// it in the file. For writers that stream the data without a copy.
Status npyHeader(const Tensor &t, std::string &out);
/// Serialises `t` (which must be CPU, not bf16) into .npy bytes.
Status serializeNpy(const Tensor &t, std::vector<uint8_t> &out);
Status writeNpy(const std::string &path, const Tensor &t);

/// '<f4' for f32 etc.; nullopt for bf16.
std::optional<std::string_view> npyDescr(DType t);
/// The dtype of a numpy descr, or nullopt if unsupported.
std::optional<DType> dtypeFromNpyDescr(std::string_view descr);

} // namespace nimble::vm

#endif // NIMBLE_VM_NPY_H
