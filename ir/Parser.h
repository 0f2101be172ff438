//===- Parser.h - Reading .nir text into a Module -----------------*- C++ -*-===//
//
// A recursive-descent parser over Lexer tokens. The grammar rule each function
// parses is written above it in Parser*.cpp; docs/LangRef.md collects them.
// On the first error the parser reports `file:line:col: error: ...` through the
// DiagnosticEngine and returns null. After parsing it fills in omitted result
// types (in dominance order, so every operand is typed first); callers then
// run the verifier.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_IR_PARSER_H
#define NIMBLE_IR_PARSER_H

#include "ir/IR.h"

#include <memory>
#include <string_view>

namespace nimble::ir {

/// Parses `text` as file `fileName`; line numbers start at `firstLine` (for
/// chunks of a --split-input-file input). Every function of the module it
/// returns has passed verifyStructure (inference of omitted result types
/// needs it), so verifyModule may skip that (VerifyOptions::structureVerified).
std::unique_ptr<Module> parseModule(std::string_view text, const std::string &fileName,
                                    Context &ctx, DiagnosticEngine &diag,
                                    uint32_t firstLine = 1);

} // namespace nimble::ir

#endif // NIMBLE_IR_PARSER_H
