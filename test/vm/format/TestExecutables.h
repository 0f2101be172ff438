//===- TestExecutables.h - Hand-built executables and a layout walker -*- C++ -*-===//
//
// Shared by the format tests:
//   - makeFullExecutable(): every opcode, every attribute kind a kernel member
//     can carry, ADTs (recursive, with tuples and storage), constants of
//     several dtypes (including an empty one), source maps; it passes verify().
//   - makeSmallExecutable(): a minimal valid executable that crafted-attack
//     tests mutate.
//   - walkLayout(): an independent reader of the byte layout documented in
//     docs/VM.md that records where every count and size field lives, so
//     tests can patch them; it shares no code with the library's reader.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_TEST_VM_FORMAT_TESTEXECUTABLES_H
#define NIMBLE_TEST_VM_FORMAT_TESTEXECUTABLES_H

#include "vm/format/Format.h"

#include <cstdint>
#include <string>
#include <vector>

namespace nimble::vm::test {

Executable makeFullExecutable();
Executable makeSmallExecutable();

/// Adds a constant whose data lives in exe.ownedData.
uint32_t addConstant(Executable &exe, std::string name, DType dtype, std::vector<int64_t> shape,
                     const std::vector<uint8_t> &bytes);

TypeDesc tensorType(DType dt, std::vector<int64_t> dims);
TypeDesc adtType(uint32_t index);

/// Copies `bytes` into a fresh 64-byte aligned buffer and deserializes it.
bool load(const std::vector<uint8_t> &bytes, Executable &out, std::string &error);

struct Field {
  size_t offset;
  unsigned width;   // 4 or 8
  bool recordCount; // a count of records or bytes: any other value breaks the layout
                    // (false for value fields such as register and input counts,
                    // where a nearby value can be legitimate)
  std::string what;
};

struct SectionInfo {
  uint32_t kind;
  uint64_t offset, size;
  size_t entryOffset; // of its section-table entry
};

struct Layout {
  std::vector<SectionInfo> sections;
  std::vector<Field> fields;                   // every u32 count/size and u64 offset/size field
  std::vector<size_t> constantOffsetFields;    // u64 absolute data offsets, per constant
  std::vector<std::pair<size_t, size_t>> code; // per function: (file offset of word 0, words)
};

/// Walks a valid serialized executable by the documented layout. Returns
/// false (with a message) if the bytes do not follow it.
bool walkLayout(const std::vector<uint8_t> &bytes, Layout &out, std::string &error);

/// Rebuilds `bytes` with an extra section of `kind` (placed after the table)
/// and version `major.minor`, relocating the constant pool; resealed.
std::vector<uint8_t> withExtraSection(const std::vector<uint8_t> &bytes, uint32_t kind,
                                      const std::vector<uint8_t> &payload, uint16_t minor);

template <class T> void put(std::vector<uint8_t> &b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof(T));
}
template <class T> T get(const std::vector<uint8_t> &b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

} // namespace nimble::vm::test

#endif // NIMBLE_TEST_VM_FORMAT_TESTEXECUTABLES_H
