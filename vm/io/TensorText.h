//===- TensorText.h - Tensors as text literals (IREE convention) -*- C++ -*-===//
//
// The inline form of tensors on command lines and in test output, after
// IREE's iree-run-module:
//
//   literal := type '=' values
//   type    := (dim 'x')* dtype          e.g. 2x3xf32, 4xi64, f32 (a scalar)
//   values  := value*                     separated by spaces, tabs, newlines,
//                                         commas or brackets
//
// `2x3xf32=1 2 3 4 5 6` is a 2x3 tensor in row-major order. Exactly one value
// is a splat (`2x3xf32=0`); otherwise the count must equal the element count.
// Floats take the usual decimal / exponent forms and nan, inf, -inf; integers
// must be integral and fit the dtype; i1 takes true, false, 1, 0. The value
// list may be wrapped in one pair of double or single quotes (as typed in a
// shell where the quotes survived).
//
// The printer writes the same type prefix and then the values in numpy-like
// nested brackets, one pair per dimension, without separators between
// bracket groups:
//
//   2x3xf32=[[1 2 3][4 5 6]]     3xi64=[1 2 3]     f32=0.5     0x2xf32=[]
//
// Floats are printed with the fewest significant digits that read back to
// the same value of their dtype (so f32 0.1 prints as 0.1, not
// 0.100000001), in fixed notation for decimal exponents in [-5, 16) and
// scientific outside (100, 65504, 2.5e-08, 1e+20), nan / inf / -inf as
// such; i1 prints as true/false. Since brackets separate values for the
// parser, printed text parses back to the same tensor.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_TENSORTEXT_H
#define NIMBLE_VM_TENSORTEXT_H

#include "vm/Kernel.h"
#include "vm/Object.h"

#include <string>
#include <string_view>

namespace nimble::vm {

/// Parses `2x3xf32=1 2 3 4 5 6` into a fresh CPU tensor.
Status parseTensorLiteral(std::string_view text, TensorRef &out);

/// Prints `2x3xf32=[[1 2 3][4 5 6]]`.
std::string formatTensor(const Tensor &t);

/// One element as the printer writes it ("0.1", "-inf", "true", "42").
std::string formatElement(DType t, const uint8_t *elem);

} // namespace nimble::vm

#endif // NIMBLE_VM_TENSORTEXT_H
