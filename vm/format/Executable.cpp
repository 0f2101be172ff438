//===- Executable.cpp - Opcode table and executable helpers ---------------===//
//
// The opcode table is generated from Opcodes.def, the same list that defines
// the Opcode enum, so the two cannot disagree; the static_assert below catches
// an edit that breaks the X-macro itself (STYLE.md habit 9).
//
//===----------------------------------------------------------------------===//
#include "vm/format/Executable.h"

#include <algorithm>

namespace nimble::vm {

namespace {

constexpr OpcodeInfo kOpcodeTable[] = {
#define VM_OPCODE(Name, Sig, Meaning) {Opcode::Name, #Name, Sig, Meaning},
#include "vm/format/Opcodes.def"
};
static_assert(sizeof(kOpcodeTable) / sizeof(kOpcodeTable[0]) == kNumOpcodes,
              "opcode table out of step with Opcodes.def");
static_assert(kNumOpcodes <= 256, "the opcode field of an instruction word is 8 bits");

constexpr bool tableInOrder() {
  for (int i = 0; i < kNumOpcodes; ++i)
    if (static_cast<int>(kOpcodeTable[i].op) != i) return false;
  return true;
}
static_assert(tableInOrder(), "opcode table must be indexed by opcode");

// What opcodeInfo answers for a value outside the enum (a corrupt byte cast to
// Opcode): callers that print unverified code get a name instead of a wild read.
constexpr OpcodeInfo kInvalidOpcode = {static_cast<Opcode>(0xff), "<invalid>", "", ""};

} // namespace

const OpcodeInfo &opcodeInfo(Opcode op) {
  unsigned i = static_cast<unsigned>(op);
  return i < static_cast<unsigned>(kNumOpcodes) ? kOpcodeTable[i] : kInvalidOpcode;
}

const char *scalarOpName(uint32_t op) {
  static const char *const kNames[] = {"add", "sub", "mul", "eq", "ne", "lt", "le", "gt", "ge", "min", "max"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kNumScalarOps);
  return op < kNumScalarOps ? kNames[op] : "<invalid>";
}

const char *deviceName(Device d) {
  switch (d) {
  case Device::CPU: return "cpu";
  case Device::CUDA: return "cuda";
  }
  return "<invalid device>";
}

const char *batchingModeName(KernelBatching::Mode m) {
  switch (m) {
  case KernelBatching::Mode::None: return "none";
  case KernelBatching::Mode::Rows: return "rows";
  case KernelBatching::Mode::Invariant: return "invariant";
  }
  return "<invalid batching mode>";
}

// Only on an error path (a kernel member failed): a binary search.
const VMFunction::Site *VMFunction::siteAt(uint32_t pc) const {
  auto it = std::lower_bound(sites.begin(), sites.end(), pc,
                             [](const Site &s, uint32_t p) { return s.pc < p; });
  return it == sites.end() || it->pc != pc ? nullptr : &*it;
}

const SourceLoc *VMFunction::siteMemberLoc(uint32_t pc, size_t member) const {
  const Site *s = siteAt(pc);
  return s && member < s->count ? &siteMemberLocs[size_t(s->first) + member] : nullptr;
}

int Executable::findFunction(const std::string &name) const {
  for (size_t i = 0; i < functions.size(); ++i)
    if (functions[i].name == name) return static_cast<int>(i);
  return -1;
}

// A linear scan: the table holds source file names and Fatal messages, a
// handful of entries, and a side index would go stale whenever a caller edits
// `strings` directly.
uint32_t Executable::internString(const std::string &s) {
  for (size_t i = 0; i < strings.size(); ++i)
    if (strings[i] == s) return static_cast<uint32_t>(i);
  strings.push_back(s);
  return static_cast<uint32_t>(strings.size() - 1);
}

} // namespace nimble::vm
