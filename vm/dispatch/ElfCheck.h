//===- ElfCheck.h - Bounds of a native-code object before dlopen -*- C++ -*-===//
//
// glibc's dynamic loader trusts the object it maps: a program header whose
// range leaves the file, a dynamic entry pointing outside every segment, a
// hash chain that runs past the symbol table, or a relocation that writes
// outside the writable segments crash the process inside dlopen or dlsym
// (issue 51 §3: one flipped bit in the .nbc's object, checksum resealed).
// Native code is trusted code (docs/VM.md), so this is no sandbox: it checks
// the structures the loader walks before it runs any code, so that a damaged
// or mismatched object becomes one warning and a reference run, as a missing
// symbol does. What it checks:
//
//   - the ELF header: 64-bit little-endian x86-64 ET_DYN, header sizes,
//     the program and section header tables inside the file;
//   - every PT_LOAD inside the file (filesz <= memsz, alignment a power of
//     two with vaddr and offset congruent, at most kMaxMappedBytes mapped);
//     one PT_DYNAMIC, inside a PT_LOAD's file bytes, ending with DT_NULL;
//     no PT_INTERP;
//   - every address the dynamic section gives (symbol, string, hash and
//     relocation tables, init/fini arrays) inside a PT_LOAD's file bytes,
//     with its size; entry sizes as the ABI says;
//   - DT_HASH and DT_GNU_HASH: buckets and chains inside the symbol table,
//     every GNU chain ending inside it; every symbol's name inside the
//     string table and a defined symbol's value inside a PT_LOAD;
//   - every relocation: its target inside a writable PT_LOAD, its symbol
//     inside the table, its type one of those a kernel object has
//     (RELATIVE, GLOB_DAT, JUMP_SLOT, 64);
//   - the section headers (for findElfSection): each inside the file, names
//     inside the section-name table.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_ELFCHECK_H
#define NIMBLE_VM_ELFCHECK_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nimble::vm {

/// Mapped bytes (the sum of PT_LOAD memsz) above this are refused: a kernel
/// object of a large model is a few megabytes.
inline constexpr uint64_t kMaxMappedBytes = uint64_t(1) << 30;

/// Checks what dlopen and dlsym will walk in the x86-64 shared object
/// `data[0, size)`. False with a one-line reason.
bool checkElfSharedObject(const uint8_t *data, size_t size, std::string &reason);

/// The file bytes of the section named `name` (by the section headers).
/// False with a reason when the headers are malformed or there is no such
/// section (then `reason` says so).
bool findElfSection(const uint8_t *data, size_t size, std::string_view name, std::string_view &contents,
                    std::string &reason);

} // namespace nimble::vm

#endif // NIMBLE_VM_ELFCHECK_H
