//===- Bytecode.h - Decoding and emitting VM instructions ---------*- C++ -*-===//
//
// The one place that knows how an instruction's words map to its operands.
// The rules are the operand signatures of Opcodes.def; everything here is
// derived from those strings, so adding an opcode is one .def line.
//
// Three users:
//   - the loader's verifier decodes every instruction with decodeInstr()
//     (bounds-checked) before anything runs;
//   - the interpreter, on verified code, reads operands straight from the code
//     words through DecodedInstr's accessors (or, for opcodes whose signature
//     has no list before an operand, at the fixed word 1 + operand index);
//   - the compiler and the tests build code with Emitter.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_BYTECODE_H
#define NIMBLE_VM_BYTECODE_H

#include "vm/format/Executable.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace nimble::vm {

//===-- Instruction word 0 -------------------------------------------------===//
//
//    31                      8 7          0
//   +-------------------------+------------+
//   |   reserved, must be 0   |   opcode   |
//   +-------------------------+------------+

inline constexpr uint32_t kOpcodeMask = 0xffu;
inline Opcode opcodeOf(uint32_t word0) { return static_cast<Opcode>(word0 & kOpcodeMask); }
inline uint32_t encodeOpcode(Opcode op) { return static_cast<uint32_t>(op); }

/// The number of operands of the longest signature in Opcodes.def.
inline constexpr int kMaxOperands = [] {
  int best = 0;
  for (const char *s : {
#define VM_OPCODE(Name, Sig, Meaning) Sig,
#include "vm/format/Opcodes.def"
       }) {
    int n = 0;
    while (s[n]) ++n;
    best = n > best ? n : best;
  }
  return best;
}();

/// Whether control never falls through to the next instruction: the last
/// instruction of a function must be one of these.
inline bool isTerminator(Opcode op) {
  return op == Opcode::Ret || op == Opcode::Goto || op == Opcode::If || op == Opcode::Switch ||
         op == Opcode::Fatal;
}

//===-- Views of list operands (valid while the code vector lives) ---------===//

/// `R`: a count word n, then n register words.
struct RegList {
  const uint32_t *regs = nullptr;
  uint32_t count = 0;
  uint32_t operator[](uint32_t i) const { return regs[i]; }
  const uint32_t *begin() const { return regs; }
  const uint32_t *end() const { return regs + count; }
};

/// `S`: a count word n, then n dims, each a signed 64-bit pair (low word first).
struct ShapeList {
  const uint32_t *words = nullptr; // the first dim's low word
  uint32_t count = 0;
  int64_t operator[](uint32_t i) const {
    uint64_t v = uint64_t(words[2 * i]) | (uint64_t(words[2 * i + 1]) << 32);
    return static_cast<int64_t>(v);
  }
};

/// `J`: a count word n, then n (tag, jump) pairs, then the default jump. Jumps
/// are relative to the instruction; the accessors return absolute pcs.
struct CaseList {
  const uint32_t *words = nullptr; // the first case's tag
  uint32_t count = 0;
  uint32_t pc = 0; // of the Switch
  uint32_t tag(uint32_t i) const { return words[2 * i]; }
  int64_t target(uint32_t i) const { return pc + int64_t(static_cast<int32_t>(words[2 * i + 1])); }
  int64_t defaultTarget() const { return pc + int64_t(static_cast<int32_t>(words[2 * count])); }
};

//===-- A decoded instruction ----------------------------------------------===//

/// One instruction of a function's code. `words` points at its first word
/// (code[pc]); `offsets[i]` is the word offset from there of operand i, in
/// signature order, so reading an operand is one load.
struct DecodedInstr {
  Opcode op = Opcode::Move;
  uint32_t pc = 0;
  uint32_t size = 0; // words, including word 0
  const char *signature = "";
  const uint32_t *words = nullptr;
  int numOperands = 0;
  uint32_t offsets[kMaxOperands] = {};

  char kind(int i) const { return signature[i]; }
  /// A one-word operand (r u c k f s d v), raw.
  uint32_t word(int i) const { return words[offsets[i]]; }
  /// `j`: the absolute target pc (may be out of range before verification).
  int64_t target(int i) const { return pc + int64_t(static_cast<int32_t>(word(i))); }
  /// `I`.
  int64_t imm64(int i) const {
    const uint32_t *w = words + offsets[i];
    return static_cast<int64_t>(uint64_t(w[0]) | (uint64_t(w[1]) << 32));
  }
  RegList regs(int i) const { return {words + offsets[i] + 1, words[offsets[i]]}; }
  ShapeList shape(int i) const { return {words + offsets[i] + 1, words[offsets[i]]}; }
  CaseList cases(int i) const { return {words + offsets[i] + 1, words[offsets[i]], pc}; }
};

/// Decodes the instruction at code[pc] of a function whose code has `size`
/// words. Checks what decoding itself needs: a known opcode, reserved bits
/// zero, every operand word (and every list element) within the code. It
/// does not check operand values; that is the verifier's job. On failure
/// returns false and, if `error` is non-null, says why (without the function
/// name or pc, which the caller adds).
bool decodeInstr(const uint32_t *code, size_t size, uint32_t pc, DecodedInstr &out,
                 std::string *error = nullptr);

//===-- Emitting -----------------------------------------------------------===//

/// Appends instructions to a code vector, operand by operand in signature
/// order. It does not check signatures: run verify() (Format.h) on the result.
class Emitter {
public:
  explicit Emitter(std::vector<uint32_t> &code) : code_(code) {}

  /// Starts an instruction; returns its pc.
  uint32_t begin(Opcode op) {
    start_ = static_cast<uint32_t>(code_.size());
    code_.push_back(encodeOpcode(op));
    return start_;
  }
  /// r u c k f s d v operands.
  Emitter &word(uint32_t w) {
    code_.push_back(w);
    return *this;
  }
  Emitter &imm64(int64_t v) {
    code_.push_back(static_cast<uint32_t>(static_cast<uint64_t>(v)));
    code_.push_back(static_cast<uint32_t>(static_cast<uint64_t>(v) >> 32));
    return *this;
  }
  Emitter &regs(const std::vector<uint32_t> &rs) {
    code_.push_back(static_cast<uint32_t>(rs.size()));
    code_.insert(code_.end(), rs.begin(), rs.end());
    return *this;
  }
  Emitter &shape(const std::vector<int64_t> &dims) {
    code_.push_back(static_cast<uint32_t>(dims.size()));
    for (int64_t d : dims) imm64(d);
    return *this;
  }
  /// A `j` operand to an absolute pc (possibly not yet emitted: patch it
  /// later with patchJump). Returns the word's index.
  uint32_t jump(uint32_t targetPc) {
    code_.push_back(static_cast<uint32_t>(static_cast<int32_t>(int64_t(targetPc) - start_)));
    return static_cast<uint32_t>(code_.size() - 1);
  }
  /// Re-targets the jump word at `wordIndex`, emitted by the instruction at
  /// `instrPc`, to `targetPc`.
  void patchJump(uint32_t wordIndex, uint32_t instrPc, uint32_t targetPc) {
    code_[wordIndex] = static_cast<uint32_t>(static_cast<int32_t>(int64_t(targetPc) - instrPc));
  }
  uint32_t pc() const { return static_cast<uint32_t>(code_.size()); }

private:
  std::vector<uint32_t> &code_;
  uint32_t start_ = 0;
};

} // namespace nimble::vm

#endif // NIMBLE_VM_BYTECODE_H
