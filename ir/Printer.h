//===- Printer.h - Writing a Module as .nir text -------------------*- C++ -*-===//
//
// The printer's output parses back to the same module and prints identically
// (enforced on every .nir file by the lit round-trip check). Result types are
// always printed; attributes at their default value are not. Value and block
// names are kept where unique in their function and numbered otherwise.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_IR_PRINTER_H
#define NIMBLE_IR_PRINTER_H

#include "ir/IR.h"

#include <memory>
#include <ostream>
#include <string>

namespace nimble::ir {

struct PrintOptions {
  /// Print `loc("file":line:col)` after each operation so locations survive a
  /// textual pipeline (nimble-opt --print-debuginfo | nimblec).
  bool debugInfo = false;
};

void printModule(const Module &m, std::ostream &os, const PrintOptions &opts = {});
void printFunction(const Function &f, std::ostream &os, const PrintOptions &opts = {});
std::string printModuleToString(const Module &m, const PrintOptions &opts = {});
/// One operation on one line, with the names its values were given.
std::string printOperation(const Operation &op);
/// A function's value and block names as printFunction prints them
/// (numbered where unnamed or taken), for what shows parts of a function
/// (the Graphviz views, passes/analysis/DotGraph.h).
class FunctionNames {
public:
  explicit FunctionNames(const Function &f);
  ~FunctionNames();
  std::string value(const Value *v) const; // %a, @g
  std::string block(const Block *b) const; // ^bb
  /// One op of the function on one line, as printFunction prints it.
  std::string op(const Operation &op) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
/// An attribute value as written in .nir (`[0, 1]`, `true`, `"cpu"`, `@f`, ...).
std::string printAttr(const Attr &a);
/// A dense literal (`[[1.0, 2.0], [3.0, 4.0]]`, or one element for a splat).
std::string printLiteral(const DenseValue &v);

} // namespace nimble::ir

#endif // NIMBLE_IR_PRINTER_H
