//===- Bytecode.cpp - Instruction decoding ----------------------------------===//
//
// decodeInstr walks an opcode's signature and records where each operand
// starts. All arithmetic is in 64 bits against the code size, so a hostile
// count word (0xffffffff) cannot wrap an index or send a read past the code.
//
//===----------------------------------------------------------------------===//
#include "vm/format/Bytecode.h"

#include <cstdio>

namespace nimble::vm {

namespace {

// Operand letters of Opcodes.def that occupy exactly one word.
constexpr const char kOneWordKinds[] = "rucfksdvj";
// All operand letters: the one-word ones, then I R S J.
constexpr const char kAllKinds[] = "rucfksdvjIRSJ";

constexpr bool contains(const char *set, char k) {
  for (; *set; ++set)
    if (*set == k) return true;
  return false;
}

constexpr bool signaturesWellFormed() {
  for (const char *s : {
#define VM_OPCODE(Name, Sig, Meaning) Sig,
#include "vm/format/Opcodes.def"
       })
    for (const char *p = s; *p; ++p)
      if (!contains(kAllKinds, *p)) return false;
  return true;
}
static_assert(signaturesWellFormed(),
              "Opcodes.def uses an operand letter decodeInstr does not know");

bool fail(std::string *error, std::string msg) {
  if (error) *error = std::move(msg);
  return false;
}

} // namespace

bool decodeInstr(const uint32_t *code, size_t size, uint32_t pc, DecodedInstr &out,
                 std::string *error) {
  if (pc >= size) return fail(error, "instruction starts past the end of the code");
  uint32_t w0 = code[pc];
  uint32_t opByte = w0 & kOpcodeMask;
  if (opByte >= static_cast<uint32_t>(kNumOpcodes))
    return fail(error, "unknown opcode " + std::to_string(opByte));
  if (w0 & ~kOpcodeMask) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "reserved bits of word 0 are not zero (word 0x%08x)", w0);
    return fail(error, buf);
  }
  const OpcodeInfo &info = opcodeInfo(static_cast<Opcode>(opByte));
  out.op = info.op;
  out.pc = pc;
  out.signature = info.signature;
  out.words = code + pc;
  out.numOperands = 0;

  const uint64_t avail = size - pc; // words from pc to the end of the code
  uint64_t at = 1;                  // next word, relative to pc
  auto need = [&](uint64_t words, const char *what) {
    if (at + words > avail)
      return fail(error, std::string(what) + " runs past the end of the code");
    return true;
  };
  for (const char *p = info.signature; *p; ++p) {
    char k = *p;
    out.offsets[out.numOperands++] = static_cast<uint32_t>(at);
    if (contains(kOneWordKinds, k)) {
      if (!need(1, "operand")) return false;
      at += 1;
      continue;
    }
    switch (k) {
    case 'I':
      if (!need(2, "64-bit immediate")) return false;
      at += 2;
      break;
    case 'R': {
      if (!need(1, "register list")) return false;
      uint64_t n = out.words[at];
      if (!need(1 + n, "register list")) return false;
      at += 1 + n;
      break;
    }
    case 'S': {
      if (!need(1, "shape list")) return false;
      uint64_t n = out.words[at];
      if (!need(1 + 2 * n, "shape list")) return false;
      at += 1 + 2 * n;
      break;
    }
    case 'J': {
      if (!need(1, "case list")) return false;
      uint64_t n = out.words[at];
      if (!need(1 + 2 * n + 1, "case list")) return false;
      at += 1 + 2 * n + 1;
      break;
    }
    default: return fail(error, "bad signature"); // excluded by the static_assert above
    }
  }
  out.size = static_cast<uint32_t>(at);
  return true;
}

} // namespace nimble::vm
