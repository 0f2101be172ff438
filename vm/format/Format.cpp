//===- Format.cpp - The .nbc writer, reader, checksum and file I/O ---------===//
//
// Writer and reader are kept side by side, record by record, so that a change
// to one is seen next to the other; docs/VM.md has the same layout as prose.
//
// The reader is written for hostile input:
//   - every read goes through Cursor, which checks it against the end of the
//     current section (positions are 64-bit, sizes are checked before adding);
//   - every count is checked against the bytes that remain times the smallest
//     size its elements can have *before* anything is reserved, so a count of
//     0xffffffff in a small file is an error, not a 4-billion-element vector;
//   - TypeDesc recursion is bounded (nbc::kMaxTypeDepth), and nothing else
//     recurses;
//   - enum-valued bytes (dtypes, type kinds, attribute kinds, booleans) are
//     range-checked as they are read, so no out-of-range enum ever exists in
//     a decoded Executable;
//   - after decoding, verify() checks the executable as a program.
//
// Multi-byte values are little-endian. The code assumes a little-endian host
// (static_assert below), which lets code words be copied with memcpy.
//
//===----------------------------------------------------------------------===//
#include "vm/format/Format.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define NIMBLE_CRC32C_X86 1
#endif

namespace nimble::vm {

static_assert(std::endian::native == std::endian::little,
              "the .nbc reader and writer assume a little-endian host");
static_assert(static_cast<int>(AttrKind::Bool) == 0 && static_cast<int>(AttrKind::Int) == 1 &&
                  static_cast<int>(AttrKind::Float) == 2 && static_cast<int>(AttrKind::Ints) == 3 &&
                  static_cast<int>(AttrKind::DType) == 4 && static_cast<int>(AttrKind::Str) == 5 &&
                  static_cast<int>(AttrKind::Sym) == 6 && static_cast<int>(AttrKind::Dense) == 7,
              "AttrKind values are attribute tags in .nbc files: changing them is a major "
              "format change");
static_assert(static_cast<int>(TypeDesc::Kind::Tensor) == nbc::kTypeTensor &&
                  static_cast<int>(TypeDesc::Kind::Tuple) == nbc::kTypeTuple &&
                  static_cast<int>(TypeDesc::Kind::Adt) == nbc::kTypeAdt &&
                  static_cast<int>(TypeDesc::Kind::Storage) == nbc::kTypeStorage,
              "TypeDesc kinds are stored in .nbc files");
static_assert(static_cast<int>(DType::F32) == 0 && static_cast<int>(DType::F16) == 1 &&
                  static_cast<int>(DType::BF16) == 2 && static_cast<int>(DType::F64) == 3 &&
                  static_cast<int>(DType::I1) == 4 && static_cast<int>(DType::I8) == 5 &&
                  static_cast<int>(DType::I32) == 6 && static_cast<int>(DType::I64) == 7 &&
                  static_cast<int>(DType::I16) == 8 && static_cast<int>(DType::U8) == 9 &&
                  static_cast<int>(DType::U16) == 10 && static_cast<int>(DType::U32) == 11 &&
                  static_cast<int>(DType::U64) == 12 && kNumDTypes == 13,
              "DType values are dtype codes in .nbc files and in instructions: changing them "
              "is a major format change");
static_assert(static_cast<int>(Device::CPU) == 0 && static_cast<int>(Device::CUDA) == 1 &&
                  kNumDevices == 2,
              "Device values are device codes in instructions");

const char *nbc::sectionName(SectionKind k) {
  switch (k) {
  case SectionKind::Strings: return "strings";
  case SectionKind::Adts: return "adts";
  case SectionKind::Signatures: return "signatures";
  case SectionKind::Constants: return "constants";
  case SectionKind::Kernels: return "kernels";
  case SectionKind::Functions: return "functions";
  case SectionKind::KernelLocs: return "kernel-locs";
  case SectionKind::NativeCode: return "native-code";
  case SectionKind::CudaCode: return "cuda-code";
  case SectionKind::Batching: return "batching";
  case SectionKind::SiteLocs: return "site-locs";
  case SectionKind::BatchPhases: return "batch-phases";
  }
  return "unknown";
}

//===-- CRC-32C ------------------------------------------------------------===//
//
// Castagnoli polynomial, reflected (0x82F63B78), initial value and final xor
// 0xFFFFFFFF: the iSCSI / ext4 / Python `crc32c` package checksum, so
// crc32c("123456789") == 0xE3069283. Software: slicing-by-8 tables; x86 with
// SSE 4.2: the crc32 instruction, 8 bytes at a time.

namespace {

struct Crc32cTables {
  uint32_t t[8][256];
  constexpr Crc32cTables() : t() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
};
constexpr Crc32cTables kCrcTables;

uint32_t crc32cSoftware(const uint8_t *p, size_t n, uint32_t crc) {
  const auto &t = kCrcTables.t;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    w ^= crc;
    crc = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^ t[4][(w >> 24) & 0xff] ^
          t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^ t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
  return crc;
}

#ifdef NIMBLE_CRC32C_X86
__attribute__((target("sse4.2"))) uint32_t crc32cHardware(const uint8_t *p, size_t n,
                                                          uint32_t crc) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}
#endif

} // namespace

uint32_t crc32c(const uint8_t *data, size_t size, uint32_t crc) {
  crc = ~crc;
#ifdef NIMBLE_CRC32C_X86
  static const bool hw = __builtin_cpu_supports("sse4.2");
  if (hw) return ~crc32cHardware(data, size, crc);
#endif
  return ~crc32cSoftware(data, size, crc);
}

uint32_t crc32cPortable(const uint8_t *data, size_t size, uint32_t crc) {
  return ~crc32cSoftware(data, size, ~crc);
}

namespace {

void store64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }

} // namespace

void resealChecksum(uint8_t *data, size_t size) {
  if (size < nbc::kHeaderSize) return;
  store64(data + nbc::kOffChecksum, crc32c(data + nbc::kHeaderSize, size - nbc::kHeaderSize));
}

//===-- Writer -------------------------------------------------------------===//

namespace {

/// Appends the file's bytes: into `b` (serialize), or through `b` as a
/// buffer of kFlushAt bytes into a file (writeExecutable: the file is never
/// whole in memory, issue 23). Positions are absolute file offsets; a patch
/// of bytes already flushed is written with pwrite at the end (finish).
class ByteWriter {
public:
  ByteWriter() = default;
  explicit ByteWriter(int fd) : fd_(fd) {}
  std::vector<uint8_t> b; // the bytes not yet flushed (all of them in memory)
  void u8(uint8_t v) { raw(&v, 1); }
  void u16(uint16_t v) { raw(&v, 2); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void f64(double v) { u64(std::bit_cast<uint64_t>(v)); }
  void raw(const void *p, size_t n) {
    const uint8_t *c = static_cast<const uint8_t *>(p);
    if (fd_ >= 0 && n >= kFlushAt) { // a constant's or an object's bytes: not copied
      flush();
      put(c, n);
      return;
    }
    b.insert(b.end(), c, c + n);
    if (fd_ >= 0 && b.size() >= kFlushAt) flush();
  }
  void str(const std::string &s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  void pad(size_t align) {
    static const uint8_t zeros[64] = {};
    if (size_t r = size() % align) raw(zeros, align - r);
  }
  size_t size() const { return flushed_ + b.size(); }
  bool streaming() const { return fd_ >= 0; }
  /// Overwrites bytes written before, at absolute offset `pos`.
  void patch(size_t pos, const void *p, size_t n) {
    const uint8_t *c = static_cast<const uint8_t *>(p);
    if (pos >= flushed_) {
      std::memcpy(b.data() + (pos - flushed_), c, n);
      return;
    }
    deferred_.push_back({pos, std::vector<uint8_t>(c, c + n)});
  }
  void patch32(size_t pos, uint32_t v) { patch(pos, &v, 4); }
  void patch64(size_t pos, uint64_t v) { patch(pos, &v, 8); }
  /// Streaming: flushes the buffer and applies the deferred patches; false
  /// (errno set) if a write failed.
  bool finish() {
    flush();
    for (const auto &[pos, bytes] : deferred_)
      for (size_t off = 0; ok_ && off < bytes.size();) {
        ssize_t w = ::pwrite(fd_, bytes.data() + off, bytes.size() - off, static_cast<off_t>(pos + off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) ok_ = false;
        else off += static_cast<size_t>(w);
      }
    deferred_.clear();
    return ok_;
  }

private:
  static constexpr size_t kFlushAt = size_t(1) << 20;
  void flush() {
    if (fd_ < 0 || b.empty()) return;
    put(b.data(), b.size());
    b.clear();
  }
  void put(const uint8_t *p, size_t n) {
    flushed_ += n;
    while (ok_ && n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        ok_ = false;
        break;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  int fd_ = -1;
  size_t flushed_ = 0;
  bool ok_ = true;
  std::vector<std::pair<size_t, std::vector<uint8_t>>> deferred_;
};

void writeType(ByteWriter &w, const TypeDesc &t) {
  w.u8(static_cast<uint8_t>(t.kind));
  switch (t.kind) {
  case TypeDesc::Kind::Tensor:
    w.u8(static_cast<uint8_t>(t.dtype));
    w.u32(static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) w.i64(d);
    break;
  case TypeDesc::Kind::Tuple:
    w.u32(static_cast<uint32_t>(t.elems.size()));
    for (const TypeDesc &e : t.elems) writeType(w, e);
    break;
  case TypeDesc::Kind::Adt: w.u32(t.adt); break;
  case TypeDesc::Kind::Storage: break;
  }
}

void writeAttr(ByteWriter &w, const Attr &a) {
  if (a.isNull()) {
    w.u8(nbc::kAttrNull);
    return;
  }
  w.u8(static_cast<uint8_t>(a.kind()));
  switch (a.kind()) {
  case AttrKind::Bool: w.u8(a.getBool() ? 1 : 0); break;
  case AttrKind::Int: w.i64(a.getInt()); break;
  case AttrKind::Float: w.f64(a.getFloat()); break;
  case AttrKind::Ints:
    w.u32(static_cast<uint32_t>(a.getInts().size()));
    for (int64_t v : a.getInts()) w.i64(v);
    break;
  case AttrKind::DType: w.u8(static_cast<uint8_t>(a.getDType())); break;
  case AttrKind::Str:
  case AttrKind::Sym: w.str(a.getStr()); break;
  case AttrKind::Dense: {
    const DenseValue &d = a.getDense();
    w.u8(static_cast<uint8_t>(d.dtype));
    w.u8(d.splat ? 1 : 0);
    w.u32(static_cast<uint32_t>(d.shape.size()));
    for (int64_t s : d.shape) w.i64(s);
    w.u64(d.bytes.size());
    w.raw(d.bytes.data(), d.bytes.size());
    break;
  }
  }
}

void writeStrings(ByteWriter &w, const Executable &e) {
  w.u32(static_cast<uint32_t>(e.strings.size()));
  for (const std::string &s : e.strings) w.str(s);
}

void writeAdts(ByteWriter &w, const Executable &e) {
  w.u32(static_cast<uint32_t>(e.adts.size()));
  for (const AdtDesc &a : e.adts) {
    w.str(a.name);
    w.u32(static_cast<uint32_t>(a.ctors.size()));
    for (const AdtDesc::Ctor &c : a.ctors) {
      w.str(c.name);
      w.u32(static_cast<uint32_t>(c.fields.size()));
      for (const TypeDesc &t : c.fields) writeType(w, t);
    }
  }
}

void writeSignatures(ByteWriter &w, const Executable &e) {
  w.u32(static_cast<uint32_t>(e.functions.size()));
  for (const VMFunction &f : e.functions) {
    w.str(f.name);
    w.u32(static_cast<uint32_t>(f.paramTypes.size()));
    for (size_t i = 0; i < f.paramTypes.size(); ++i) {
      w.str(i < f.paramNames.size() ? f.paramNames[i] : std::string());
      writeType(w, f.paramTypes[i]);
    }
    w.u32(static_cast<uint32_t>(f.resultTypes.size()));
    for (const TypeDesc &t : f.resultTypes) writeType(w, t);
  }
}

// One kernel's record without its name (writeKernels; kernelDigest).
void writeKernelBody(ByteWriter &w, const KernelDesc &k) {
    w.u32(k.numInputs);
    // One dtype byte per input. A malformed in-memory kernel (fewer dtypes
    // than inputs) writes what it has, which the reader then refuses; it never
    // writes numInputs bytes it does not have.
    for (DType t : k.inputDTypes) w.u8(static_cast<uint8_t>(t));
    w.u8(k.upperBound ? 1 : 0);
    w.u32(static_cast<uint32_t>(k.members.size()));
    for (const KernelDesc::Member &m : k.members) {
      // By mnemonic (see FormatReader.cpp); an invalid op writes "", which
      // the reader refuses.
      w.str(static_cast<unsigned>(m.op) < static_cast<unsigned>(kNumOpCodes)
                ? std::string(opInfo(m.op).mnemonic)
                : std::string());
      w.u32(m.numResults);
      w.u32(static_cast<uint32_t>(m.attrs.size()));
      for (const Attr &a : m.attrs) writeAttr(w, a);
      w.u32(static_cast<uint32_t>(m.operands.size()));
      for (uint32_t v : m.operands) w.u32(v);
    }
    w.u32(static_cast<uint32_t>(k.outputs.size()));
    for (uint32_t v : k.outputs) w.u32(v);
}

void writeKernels(ByteWriter &w, const Executable &e) {
  w.u32(static_cast<uint32_t>(e.kernels.size()));
  for (const KernelDesc &k : e.kernels) {
    w.str(k.name);
    writeKernelBody(w, k);
  }
}

// Per kernel, its member count and each member's location (all zero when the
// kernel has none).
void writeKernelLocs(ByteWriter &w, const Executable &e) {
  w.u32(static_cast<uint32_t>(e.kernels.size()));
  for (const KernelDesc &k : e.kernels) {
    w.u32(static_cast<uint32_t>(k.members.size()));
    for (size_t m = 0; m < k.members.size(); ++m) {
      SourceLoc l = m < k.memberLocs.size() ? k.memberLocs[m] : SourceLoc{};
      w.u32(l.file);
      w.u32(l.line);
      w.u32(l.col);
    }
  }
}

// Format 1.7: the member locations of the kernel calls that have their own
// (VMFunction::sites), one record per function that has any: its location
// table, then its sites by pc, each a range of the table (a call's ShapeFunc
// and InvokePacked share one).
void writeSiteLocs(ByteWriter &w, const Executable &e) {
  uint32_t n = 0;
  for (const VMFunction &f : e.functions) n += !f.sites.empty();
  w.u32(n);
  for (size_t fi = 0; fi < e.functions.size(); ++fi) {
    const VMFunction &f = e.functions[fi];
    if (f.sites.empty()) continue;
    w.u32(static_cast<uint32_t>(fi));
    w.u32(static_cast<uint32_t>(f.siteMemberLocs.size()));
    for (const SourceLoc &l : f.siteMemberLocs) {
      w.u32(l.file);
      w.u32(l.line);
      w.u32(l.col);
    }
    w.u32(static_cast<uint32_t>(f.sites.size()));
    for (const VMFunction::Site &s : f.sites) {
      w.u32(s.pc);
      w.u32(s.first);
      w.u32(s.count);
    }
  }
}

bool hasSiteLocs(const Executable &e) {
  for (const VMFunction &f : e.functions)
    if (!f.sites.empty()) return true;
  return false;
}

// Format 1.2: target triple, cpu, features, the (kernel, symbol) table, then
// the shared object's bytes at the next 64-byte boundary (u64 offset from the
// section start, u64 size), so that a reader can hand them to the loader
// without copying.
void writeNativeCode(ByteWriter &w, const Executable &e) {
  const NativeCode &n = e.native;
  size_t start = w.size();
  w.str(n.triple);
  w.str(n.cpu);
  w.u32(static_cast<uint32_t>(n.features.size()));
  for (const std::string &f : n.features) w.str(f);
  w.u32(static_cast<uint32_t>(n.entries.size()));
  for (const NativeCode::Entry &en : n.entries) {
    w.u32(en.kernel);
    w.str(en.symbol);
  }
  size_t offsetField = w.size();
  w.u64(0);
  w.u64(n.object.size());
  w.pad(nbc::kConstantAlign);
  w.patch64(offsetField, w.size() - start);
  w.raw(n.object.data(), n.object.size());
}

// Format 1.3: the GPU architecture, the (kernel, kind, flags, symbol) table,
// then (u64 offset from the section start, u64 size) of the PTX text and of
// the cubin, each at a 64-byte boundary: the PTX first, the cubin (possibly
// empty) ending the section.
void writeCudaCode(ByteWriter &w, const Executable &e) {
  const CudaCode &c = e.cuda;
  size_t start = w.size();
  w.str(c.arch);
  w.u32(static_cast<uint32_t>(c.entries.size()));
  for (const CudaCode::Entry &en : c.entries) {
    w.u32(en.kernel);
    w.u8(static_cast<uint8_t>(en.kind));
    w.u8(en.flags);
    w.str(en.symbol);
  }
  size_t fields = w.size();
  w.u64(0);
  w.u64(c.ptx.size());
  w.u64(0);
  w.u64(c.cubin.size());
  w.pad(nbc::kConstantAlign);
  w.patch64(fields, w.size() - start);
  w.raw(c.ptx.data(), c.ptx.size());
  w.pad(nbc::kConstantAlign);
  w.patch64(fields + 16, w.size() - start);
  w.raw(c.cubin.data(), c.cubin.size());
}

void writeFunctions(ByteWriter &w, const Executable &e) {
  w.u32(static_cast<uint32_t>(e.functions.size()));
  for (const VMFunction &f : e.functions) {
    w.u32(f.numRegisters);
    w.u32(static_cast<uint32_t>(f.code.size()));
    w.raw(f.code.data(), f.code.size() * 4);
    w.u32(static_cast<uint32_t>(f.sourceMap.size()));
    for (const SourceLoc &l : f.sourceMap) {
      w.u32(l.pc);
      w.u32(l.file);
      w.u32(l.line);
      w.u32(l.col);
    }
  }
}

// Metadata records, then each constant's bytes at the next 64-byte boundary
// of the file (the section itself starts on one).
void writeConstants(ByteWriter &w, const Executable &e) {
  w.u32(static_cast<uint32_t>(e.constants.size()));
  w.u32(0);
  std::vector<size_t> offsetFields;
  for (const ConstantDesc &c : e.constants) {
    w.str(c.name);
    w.u8(static_cast<uint8_t>(c.dtype));
    w.u32(static_cast<uint32_t>(c.shape.size()));
    for (int64_t d : c.shape) w.i64(d);
    offsetFields.push_back(w.size());
    w.u64(0); // offset, patched below
    w.u64(c.size);
  }
  for (size_t i = 0; i < e.constants.size(); ++i) {
    const ConstantDesc &c = e.constants[i];
    w.pad(nbc::kConstantAlign);
    w.patch64(offsetFields[i], w.size());
    // A constant without data (a producer's bug) writes no bytes; the reader
    // then rejects the file instead of this call reading through null.
    if (c.data) w.raw(c.data, c.size);
  }
}

} // namespace

// Format 1.4: per kernel its batching mode, batched variant and the shared
// flag of each input (docs/autobatch.md).
void writeBatching(ByteWriter &w, const Executable &e) {
  w.u32(static_cast<uint32_t>(e.batching.size()));
  for (const KernelBatching &b : e.batching) {
    w.u32(static_cast<uint32_t>(b.mode));
    w.u32(b.batched);
    w.u32(static_cast<uint32_t>(b.shared.size()));
    for (uint8_t s : b.shared) w.u32(s);
  }
}

// Format 1.10: per kernel the program phase of its calls (seed 001 §4.1;
// docs/autobatch.md). A 1.9 reader skips the section and runs without phases.
static void writeBatchPhases(ByteWriter &w, const Executable &e) {
  w.u32(static_cast<uint32_t>(e.batching.size()));
  for (const KernelBatching &b : e.batching) w.u32(b.phase);
}

static bool hasBatchPhases(const Executable &e) {
  for (const KernelBatching &b : e.batching)
    if (b.phase) return true;
  return false;
}

bool hasBatching(const Executable &e) {
  for (const KernelBatching &b : e.batching)
    if (b.mode != KernelBatching::Mode::None) return true;
  return false;
}

// An upper bound of the bytes that the sections after the kernels section
// take (functions, kernel-locs, batching, native code, cuda code, constants,
// with their padding). serialize reserves it before writing the first of
// them, so that the bulk of a big .nbc is written once into one buffer: a
// vector that doubled would hold the old and the new buffer at once, 1.5 to 3
// times the file (issue 23: 164 MB of bytecode at a million ops).
size_t bulkSizeBound(const Executable &e) {
  const size_t pad = nbc::kConstantAlign;
  size_t n = 8 * pad + 64;
  for (const VMFunction &f : e.functions) n += 16 + f.code.size() * 4 + f.sourceMap.size() * 16;
  for (const KernelDesc &k : e.kernels) n += 4 + k.members.size() * 12;
  for (const VMFunction &f : e.functions) n += 12 + f.sites.size() * 12 + f.siteMemberLocs.size() * 12;
  for (const KernelBatching &b : e.batching) n += 16 + b.shared.size() * 4;
  const NativeCode &nc = e.native;
  n += 32 + pad + nc.triple.size() + nc.cpu.size() + nc.object.size();
  for (const std::string &f : nc.features) n += 4 + f.size();
  for (const NativeCode::Entry &en : nc.entries) n += 8 + en.symbol.size();
  const CudaCode &cc = e.cuda;
  n += 40 + 2 * pad + cc.arch.size() + cc.ptx.size() + cc.cubin.size();
  for (const CudaCode::Entry &en : cc.entries) n += 10 + en.symbol.size();
  for (const ConstantDesc &c : e.constants) n += 33 + pad + c.name.size() + c.shape.size() * 8 + c.size;
  return n;
}

// The whole file but its checksum, through `w`.
static void writeFile(ByteWriter &w, const Executable &exe) {
  using nbc::SectionKind;
  w.raw(nbc::kMagic, 8);
  w.u16(Executable::kMajor);
  w.u16(Executable::kMinor);
  w.u32(0); // flags
  w.u64(0); // file size, patched
  w.u64(0); // checksum, patched
  // The native-code, cuda-code and batching sections exist only when there
  // is such code or a kernel that batches, so a program without any keeps
  // the section count (and bytes) of format 1.1.
  const bool batches = hasBatching(exe), siteLocs = hasSiteLocs(exe), phases = batches && hasBatchPhases(exe);
  auto present = [&](SectionKind k) {
    if (k == SectionKind::NativeCode) return !exe.native.empty();
    if (k == SectionKind::CudaCode) return !exe.cuda.empty();
    if (k == SectionKind::Batching) return batches;
    if (k == SectionKind::SiteLocs) return siteLocs;
    if (k == SectionKind::BatchPhases) return phases;
    return true;
  };
  uint32_t numSections = 0;
  for (uint32_t k = 1; k <= nbc::kNumSectionKinds; ++k) numSections += present(static_cast<SectionKind>(k));
  w.u32(numSections);
  w.u32(0);
  size_t table = w.size();
  for (uint32_t i = 0; i < numSections * nbc::kSectionEntrySize; i += 8) w.u64(0);

  struct Placed {
    SectionKind kind;
    void (*write)(ByteWriter &, const Executable &);
    size_t align;
  };
  // The constant pool goes last: the bulk of the file, contiguous at its end.
  const Placed order[] = {
      {SectionKind::Strings, writeStrings, nbc::kSectionAlign},
      {SectionKind::Adts, writeAdts, nbc::kSectionAlign},
      {SectionKind::Signatures, writeSignatures, nbc::kSectionAlign},
      {SectionKind::Kernels, writeKernels, nbc::kSectionAlign},
      {SectionKind::Functions, writeFunctions, nbc::kSectionAlign},
      {SectionKind::KernelLocs, writeKernelLocs, nbc::kSectionAlign},
      {SectionKind::SiteLocs, writeSiteLocs, nbc::kSectionAlign},
      {SectionKind::Batching, writeBatching, nbc::kSectionAlign},
      {SectionKind::BatchPhases, writeBatchPhases, nbc::kSectionAlign},
      {SectionKind::NativeCode, writeNativeCode, nbc::kConstantAlign},
      {SectionKind::CudaCode, writeCudaCode, nbc::kConstantAlign},
      {SectionKind::Constants, writeConstants, nbc::kConstantAlign},
  };
  static_assert(sizeof(order) / sizeof(order[0]) == nbc::kNumSectionKinds);
  size_t reserved = 0;
  for (const Placed &p : order) {
    if (!present(p.kind)) continue;
    if (p.kind == SectionKind::Functions && !w.streaming()) {
      w.b.reserve(w.size() + bulkSizeBound(exe));
      reserved = w.b.capacity();
    }
    w.pad(p.align);
    size_t start = w.size();
    p.write(w, exe);
    // The table lists the present sections in kind order, whatever their
    // file order.
    uint32_t slot = 0;
    for (uint32_t k = 1; k < static_cast<uint32_t>(p.kind); ++k) slot += present(static_cast<SectionKind>(k));
    const size_t entry = table + slot * nbc::kSectionEntrySize;
    w.patch32(entry, static_cast<uint32_t>(p.kind));
    w.patch64(entry + 8, start);
    w.patch64(entry + 16, w.size() - start);
  }
  assert((w.streaming() || w.b.capacity() == reserved) && "bulkSizeBound is below what the sections took");
  (void)reserved;
  w.patch64(nbc::kOffFileSize, w.size());
}

uint64_t kernelDigest(const KernelDesc &k) {
  ByteWriter w;
  writeKernelBody(w, k);
  // FNV-1a, 64 bits: a check against skew and bad builds, not against an
  // adversary (who could change the native code itself; docs/VM.md).
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : w.b) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

std::vector<uint8_t> serialize(const Executable &exe) {
  ByteWriter w;
  writeFile(w, exe);
  resealChecksum(w.b.data(), w.b.size());
  return std::move(w.b);
}

bool writeExecutable(int fd, const Executable &exe, std::string &error) {
  auto fail = [&](const char *) {
    error = std::strerror(errno);
    return false;
  };
  ByteWriter w(fd);
  writeFile(w, exe);
  if (!w.finish()) return fail("cannot write the executable");
  // The checksum covers the bytes after the header, written by now: read
  // back (from the page cache) in pieces.
  const size_t size = w.size();
  std::vector<uint8_t> buf(size_t(1) << 20);
  uint32_t crc = 0;
  for (size_t pos = nbc::kHeaderSize; pos < size;) {
    ssize_t r = ::pread(fd, buf.data(), std::min(buf.size(), size - pos), static_cast<off_t>(pos));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) errno = EIO; // shorter than written
    if (r <= 0) return fail("cannot read the executable back");
    crc = crc32c(buf.data(), static_cast<size_t>(r), crc);
    pos += static_cast<size_t>(r);
  }
  uint64_t sum = crc;
  for (size_t off = 0; off < 8;) {
    ssize_t wr = ::pwrite(fd, reinterpret_cast<const uint8_t *>(&sum) + off, 8 - off,
                          static_cast<off_t>(nbc::kOffChecksum + off));
    if (wr < 0 && errno == EINTR) continue;
    if (wr <= 0) return fail("cannot write the executable");
    off += static_cast<size_t>(wr);
  }
  return true;
}

bool writeExecutableFile(const std::string &path, const Executable &exe, std::string &error) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    error = "cannot open '" + path + "' for writing: " + std::strerror(errno);
    return false;
  }
  std::string why;
  bool ok = writeExecutable(fd, exe, why);
  if (::close(fd) != 0 && ok) {
    ok = false;
    why = std::strerror(errno);
  }
  if (!ok) error = "cannot write '" + path + "': " + why;
  return ok;
}

//===-- Aligned buffers ----------------------------------------------------===//

std::shared_ptr<AlignedBuffer> AlignedBuffer::create(size_t size) {
  void *p = ::operator new(size ? size : 1, std::align_val_t(nbc::kConstantAlign), std::nothrow);
  if (!p) return nullptr;
  return std::shared_ptr<AlignedBuffer>(new AlignedBuffer(static_cast<uint8_t *>(p), size));
}

std::shared_ptr<AlignedBuffer> AlignedBuffer::copyOf(const uint8_t *data, size_t size) {
  auto b = create(size);
  if (b && size) std::memcpy(b->data(), data, size);
  return b;
}

AlignedBuffer::~AlignedBuffer() { ::operator delete(data_, std::align_val_t(nbc::kConstantAlign)); }

} // namespace nimble::vm
