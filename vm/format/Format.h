//===- Format.h - Writing, reading and verifying .nbc executables -*- C++ -*-===//
//
// The .nbc file is an Executable in little-endian bytes (docs/VM.md, "The .nbc
// format", has the byte-by-byte layout):
//
//   header (40 bytes)   magic "NIMBLEBC", u16 major, u16 minor, u32 flags,
//                       u64 file size, u64 checksum, u32 section count, u32 0
//   section table       per section: u32 kind, u32 0, u64 offset, u64 size
//   sections            strings, adts, signatures, kernels, functions,
//                       constants (metadata, then 64-byte aligned data)
//
// The checksum is CRC-32C (Castagnoli) of every byte after the 40-byte
// header, zero-extended to 64 bits: hardware-accelerated on x86 (SSE 4.2) and
// ARMv8, with a table-driven fallback.
//
// Loading is zero-copy for the constant pool: deserialize() takes a 64-byte
// aligned buffer and leaves every ConstantDesc::data pointing into it, kept
// alive through Executable::buffer. Constants sit at 64-byte aligned file
// offsets, so their data is 64-byte aligned in memory.
//
// Nothing is trusted: deserialize() checks the header, the checksum, every
// offset and count against the bytes that remain (before reserving memory),
// and then runs verify(), which checks the executable as a program (indices,
// kernels against the op table, every instruction against its signature,
// jumps, registers, call arities). A file that passes can be run without
// further checks of the bytecode; a file that does not gets one message
// naming the place and the problem, never a crash.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_VM_FORMAT_H
#define NIMBLE_VM_FORMAT_H

#include "ir/Limits.h"
#include "vm/format/Bytecode.h"
#include "vm/format/Executable.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nimble::vm {

namespace nbc {

inline constexpr char kMagic[8] = {'N', 'I', 'M', 'B', 'L', 'E', 'B', 'C'};
inline constexpr size_t kHeaderSize = 40;
inline constexpr size_t kSectionEntrySize = 24;
/// Alignment of every constant's data, in the file and in memory.
inline constexpr size_t kConstantAlign = 64;
/// Alignment of every section's start.
inline constexpr size_t kSectionAlign = 8;

/// Header field offsets.
inline constexpr size_t kOffMajor = 8, kOffMinor = 10, kOffFlags = 12, kOffFileSize = 16,
                        kOffChecksum = 24, kOffSectionCount = 32;

enum class SectionKind : uint32_t {
  Strings = 1,
  Adts = 2,
  Signatures = 3,
  Constants = 4,
  Kernels = 5,
  Functions = 6,
  KernelLocs = 7, // format 1.1; optional
  NativeCode = 8, // format 1.2; optional (written only when there is native code)
  CudaCode = 9,   // format 1.3; optional (written only when there is device code)
  Batching = 10,  // format 1.4; optional (written only when some kernel batches)
  SiteLocs = 11,  // format 1.7; optional (written only when some call has its own member locations)
  BatchPhases = 12, // format 1.10; optional (written only when some kernel has a phase other than 0)
};
inline constexpr uint32_t kNumSectionKinds = 12;
/// Kinds 1..kNumRequiredSectionKinds must appear in every file.
inline constexpr uint32_t kNumRequiredSectionKinds = 6;
const char *sectionName(SectionKind k);

/// TypeDesc kind bytes and Attr kind tags as stored (the enums' values,
/// pinned here so that reordering an enum is a format change one notices).
inline constexpr uint8_t kTypeTensor = 0, kTypeTuple = 1, kTypeAdt = 2, kTypeStorage = 3;
inline constexpr uint8_t kAttrNull = 0xff; // a null Attr: written, always rejected

//===-- Limits: what the reader refuses however many bytes back it ----------===//
// Those the IR shares come from ir/Limits.h, so that the verifier of the IR
// refuses a program the format could not hold (docs/LangRef.md, "Limits").
inline constexpr uint32_t kMaxSections = 64;
inline constexpr int kMaxTypeDepth = limits::kMaxTypeDepth;
inline constexpr uint32_t kMaxRank = limits::kMaxRank;
/// Symbol names and CPU feature strings of the native-code section.
inline constexpr uint32_t kMaxSymbolLength = 256;
/// GPU architecture names of the cuda-code section (sm_80).
inline constexpr uint32_t kMaxArchLength = 16;
inline constexpr uint32_t kMaxRegisters = limits::kMaxRegisters;
inline constexpr uint32_t kMaxKernelMembers = limits::kMaxKernelMembers;
inline constexpr uint32_t kMaxKernelValues = limits::kMaxKernelValues;

} // namespace nbc

/// CRC-32C of `size` bytes, continuing from `crc` (0 to start). Uses the
/// CPU's crc32 instruction when it has one.
uint32_t crc32c(const uint8_t *data, size_t size, uint32_t crc = 0);
/// The same with the portable table-driven code only (for tests of the
/// fallback on machines that never take it).
uint32_t crc32cPortable(const uint8_t *data, size_t size, uint32_t crc = 0);

/// A digest of kernel `k`'s table record without its name (FNV-1a over the
/// bytes the kernels section stores for it): the native code carries the
/// digest of the entry it was generated from, and the loader compares
/// (vm/dispatch/NativeKernels.cpp; issue 51 §3).
uint64_t kernelDigest(const KernelDesc &k);

/// Recomputes the header checksum of a serialized executable in place (for
/// tools and tests that patch bytes). Does nothing if `size` is too small to
/// hold a header.
void resealChecksum(uint8_t *data, size_t size);

//===-- Writing ------------------------------------------------------------===//

/// The .nbc bytes of `exe`, format kMajor.kMinor. It writes a malformed
/// executable too (null attributes, invalid ops and missing constant data
/// become bytes the reader refuses) as long as every non-null constant `data`
/// holds `size` bytes; only an executable that passes verify() reads back, so
/// run verify() first to catch a producer's mistake at its source.
std::vector<uint8_t> serialize(const Executable &exe);

/// The same bytes written to `fd`, an empty regular file open for reading
/// and writing, without holding them in memory: the sections go out as they
/// are made (in pieces of 1 MiB; a constant's or an object's bytes straight
/// from where they are), the section table and the header fields are
/// written last, and the checksum from reading the file back. At a million
/// ops the bytecode alone is 164 MB, and a model's weights may be gigabytes:
/// serialize() would hold a second copy of either (issue 23). Returns false
/// with strerror's message on an I/O error.
bool writeExecutable(int fd, const Executable &exe, std::string &error);

/// writeExecutable() to a file. Returns false with a message on an I/O error.
bool writeExecutableFile(const std::string &path, const Executable &exe, std::string &error);

//===-- Reading ------------------------------------------------------------===//

/// Heap bytes whose start is 64-byte aligned: what deserialize() needs for
/// zero-copy constants.
class AlignedBuffer {
public:
  /// `size` uninitialised bytes, or null if the allocation fails.
  static std::shared_ptr<AlignedBuffer> create(size_t size);
  static std::shared_ptr<AlignedBuffer> copyOf(const uint8_t *data, size_t size);
  ~AlignedBuffer();
  AlignedBuffer(const AlignedBuffer &) = delete;
  AlignedBuffer &operator=(const AlignedBuffer &) = delete;

  uint8_t *data() { return data_; }
  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }

private:
  AlignedBuffer(uint8_t *d, size_t n) : data_(d), size_(n) {}
  uint8_t *data_;
  size_t size_;
};

/// Reads and verifies an executable from `size` bytes at `data`, which must
/// be 64-byte aligned and stay alive as long as `keepalive` (stored in
/// out.buffer) does. Constants point into `data`. On failure returns false,
/// sets `error` and leaves `out` untouched.
bool deserialize(const uint8_t *data, size_t size, std::shared_ptr<const void> keepalive,
                 Executable &out, std::string &error);

/// The same, over an AlignedBuffer (which the executable keeps alive).
bool deserialize(std::shared_ptr<const AlignedBuffer> buffer, Executable &out, std::string &error);

/// Reads a .nbc file and deserializes it. The file is mapped (mmap,
/// MAP_PRIVATE, read-only) rather than copied, so that the constants' pages
/// are the page cache's: a weight that oneDNN has packed into a copy of its
/// own can give its original pages back (releaseMappedPages) and keep one
/// resident copy (issue 52: BERT-base peaked at twice its weights). Pages
/// dropped that way are read from the file again if touched, which is why
/// the mapping is private and read-only: its bytes are always the file's.
/// The file must not be truncated or rewritten in place while it is mapped
/// (reading a page past a truncation is SIGBUS, as for a shared library);
/// nimblec, like every tool here, writes a new file and renames it over the
/// old, which leaves a running process its own bytes. When the file cannot
/// be mapped it is read into an AlignedBuffer, as before.
bool readExecutableFile(const std::string &path, Executable &out, std::string &error);

/// Drops the resident pages wholly inside [data, data + bytes) when they lie
/// in `exe`'s mapped file (Executable::mappedBegin): madvise(MADV_DONTNEED)
/// on the page-aligned inner range. Returns the bytes dropped (0 when the
/// executable is not mapped, the range is outside it, or madvise refuses).
size_t releaseMappedPages(const Executable &exe, const void *data, size_t bytes);

//===-- Verifying ----------------------------------------------------------===//

/// Checks an in-memory executable as a program; deserialize() runs it on
/// every file, and a compiler should run it before writing. The rules are
/// listed in docs/VM.md ("Verification") and at the top of Verifier.cpp.
bool verify(const Executable &exe, std::string &error);

/// The source location of the instruction at `pc`: the source-map entry with
/// the greatest pc not after it (a line table), or null. An entry of line 0
/// means the instructions from its pc on have no location.
const SourceLoc *findSourceLoc(const VMFunction &fn, uint32_t pc);

} // namespace nimble::vm

#endif // NIMBLE_VM_FORMAT_H
