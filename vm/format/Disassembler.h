//===- Disassembler.h - Executables as readable text ------------*- C++ -*-===//
//
// The text behind `nimblec --emit=asm` and `nimble-run --trace`, written to
// be read by people and matched by FileCheck (STYLE.md habit 11):
//
//   func @main(%x: tensor<?x4xf32>) -> tensor<1x4xf32> registers=12
//     0: LoadConst r3, c0  ; @w_ih
//     3: InvokePacked k2 (r0, r3) -> (r4)  ; kernel "fused_matmul_add"
//     12: If r5, then 16, else 20
//
// preceded (optionally) by the tables an instruction's indices point into:
// strings, ADTs, constants (name, type, bytes) and kernels (one line per
// member: `%2 = matmul %0, %1, transpose_b=true`). The syntax is specified in
// docs/VM.md ("Disassembly").
//
// Safe on any Executable, verified or not: unknown opcodes, truncated
// operands and out-of-range indices print as `<invalid: ...>` or without
// their annotation, so a compiler can print what it produced before
// verify() has judged it.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_DISASSEMBLER_H
#define NIMBLE_VM_DISASSEMBLER_H

#include "vm/format/Executable.h"

#include <cstdint>
#include <string>

namespace nimble::vm {

struct DisasmOptions {
  /// Trailing `model.nir:12:3` on each instruction that has a source location.
  bool sourceLocations = false;
  /// Print the strings, adts, constants and kernels tables before the functions.
  bool tables = true;
};

/// The whole executable.
std::string disassemble(const Executable &exe, const DisasmOptions &opts = {});

/// One function: its header line, then one line per instruction.
std::string disassembleFunction(const Executable &exe, size_t fn, const DisasmOptions &opts = {});

/// The instruction at `pc` of `fn` on one line, without pc, indentation or
/// newline (the tracer's form): `InvokePacked k2 (r0, r3) -> (r4)  ; kernel
/// "fused_matmul_add"`. Sets `size` (if non-null) to the instruction's length
/// in words, or 0 if it does not decode.
std::string disassembleInstr(const Executable &exe, const VMFunction &fn, uint32_t pc,
                             bool sourceLocation = false, uint32_t *size = nullptr);

/// `tensor<?x4xf32>`, `tuple<tensor<f32>, @Tree>`, `@Tree`, `storage`: the
/// .nir spelling.
std::string typeToString(const Executable &exe, const TypeDesc &t);

/// A kernel member in one line: `%2 = matmul %0, %1, transpose_b=true`
/// (attributes equal to the op's default are left out). `firstResult` is the
/// value number of the member's first result.
std::string kernelMemberToString(const KernelDesc::Member &m, uint32_t firstResult);

/// An attribute value in .nir spelling (dense payloads abbreviated).
std::string attrToString(const Attr &a);

/// A function header: `func @main(%x: tensor<?x4xf32>) -> tensor<1x4xf32>
/// registers=12`.
std::string functionHeader(const Executable &exe, const VMFunction &fn);

} // namespace nimble::vm

#endif // NIMBLE_VM_DISASSEMBLER_H
