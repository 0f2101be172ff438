//===- ValueText.h - Inputs and outputs as text (nimble-run) -------*- C++ -*-===//
//
// The text form of run-time values, for `nimble-run --input=...` and for
// printing results (docs/nimble-run.md):
//
//   value  ::= tensor | ctor | tuple
//   tensor ::= dims `x` dtype `=` number*       2x3xf32=1 2 3 4 5 6   (one number: splat)
//            | dtype `=` number                 i64=5                 (a scalar)
//            | `@` path                         @x.npy
//   ctor   ::= Name (`(` value (`,` value)* `)`)?   Node(Leaf(1x4xf32=1 2 3 4), Leaf(@l.npy))
//   tuple  ::= `(` value (`,` value)* `)`
//
// Which form applies is decided by the parameter's type: an algebraic data
// type reads constructor expressions (a whole expression may also come from a
// text file with `@tree.txt`), a tensor reads a literal or an .npy file.
// Values are checked against the type: constructor names and arity, dtypes,
// ranks and every static dimension.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_VALUETEXT_H
#define NIMBLE_VM_VALUETEXT_H

#include "vm/format/Executable.h"
#include "vm/Object.h"

#include <string>
#include <string_view>

namespace nimble::vm {

/// Parses `text` as a value of type `t`. Relative `@` paths are resolved
/// against `baseDir`. On failure returns false with a message in `error`.
bool parseValue(const Executable &exe, const TypeDesc &t, std::string_view text,
                const std::string &baseDir, ObjectRef &out, std::string &error);

/// Checks that `v` is a value of type `t`; `what` names it in the message
/// ("input 0 (%xs)").
bool checkValue(const Executable &exe, const TypeDesc &t, const Object *v,
                const std::string &what, std::string &error);

/// Prints `v`, a value of type `t`, in the text form above (tensors in
/// formatTensor's form, constructors by name).
std::string printValue(const Executable &exe, const TypeDesc &t, const Object &v);

} // namespace nimble::vm

#endif // NIMBLE_VM_VALUETEXT_H
