//===- FormatReader.cpp - Decoding .nbc bytes into an Executable -----------===//
//
// The reading half of Format.cpp (see the rules for hostile input there).
// Order of checks: header fields, file size, checksum, section table (bounds,
// alignment, overlap, duplicates), then each section's records, then
// verify(). A file that is merely corrupt fails at the checksum; the later
// checks are what stand between a deliberately crafted file and the
// interpreter.
//
//===----------------------------------------------------------------------===//
#include "vm/format/Format.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace nimble::vm {

namespace {

uint16_t load16(const uint8_t *p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t load32(const uint8_t *p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t load64(const uint8_t *p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

bool fail(std::string &error, std::string msg) {
  error = std::move(msg);
  return false;
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

/// Bounds-checked little-endian reads within [pos, end) of one section.
class Cursor {
public:
  Cursor(const uint8_t *base, uint64_t begin, uint64_t end, std::string &err)
      : base_(base), pos_(begin), end_(end), err_(err) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return end_ - pos_; }
  bool atEnd() const { return pos_ == end_; }

  bool fail(std::string msg) {
    err_ = std::move(msg);
    return false;
  }
  /// Prefixes the current error with where it happened; returns false.
  bool wrap(const std::string &where) {
    err_ = where + ": " + err_;
    return false;
  }
  bool take(uint64_t n, const char *what) {
    if (n > remaining())
      return fail(std::string("truncated ") + what + " at offset " + std::to_string(pos_) +
                  " (needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) +
                  " left in the section)");
    return true;
  }
  template <class T> bool scalar(T &v, const char *what) {
    if (!take(sizeof(T), what)) return false;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool u8(uint8_t &v, const char *what) { return scalar(v, what); }
  bool u32(uint32_t &v, const char *what) { return scalar(v, what); }
  bool u64(uint64_t &v, const char *what) { return scalar(v, what); }
  bool i64(int64_t &v, const char *what) { return scalar(v, what); }
  bool boolean(bool &v, const char *what) {
    uint8_t b;
    if (!u8(b, what)) return false;
    if (b > 1) return fail(std::string(what) + " is " + std::to_string(b) + ", not 0 or 1");
    v = b;
    return true;
  }
  bool dtype(DType &t, const char *what) {
    uint8_t b;
    if (!u8(b, what)) return false;
    if (b >= kNumDTypes) return fail("invalid dtype code " + std::to_string(b) + " in " + what);
    t = static_cast<DType>(b);
    return true;
  }
  /// A u32 count of elements that each take at least `minBytes`: checked
  /// against what remains before the caller reserves anything.
  bool count(uint32_t &n, uint64_t minBytes, const char *what) {
    if (!u32(n, what)) return false;
    if (uint64_t(n) * minBytes > remaining())
      return fail(std::string(what) + " " + std::to_string(n) +
                  " is impossible: " + std::to_string(remaining()) + " bytes left in the section");
    return true;
  }
  bool str(std::string &s, const char *what) {
    uint32_t n;
    if (!u32(n, what) || !take(n, what)) return false;
    s.assign(reinterpret_cast<const char *>(base_ + pos_), n);
    pos_ += n;
    return true;
  }
  const uint8_t *here() const { return base_ + pos_; }
  void skip(uint64_t n) { pos_ += n; } // after take()

private:
  const uint8_t *base_;
  uint64_t pos_, end_;
  std::string &err_;
};

bool readDims(Cursor &c, std::vector<int64_t> &dims, bool allowDynamic, const char *what) {
  uint32_t rank;
  if (!c.count(rank, 8, what)) return false;
  if (rank > nbc::kMaxRank)
    return c.fail(std::string(what) + " " + std::to_string(rank) + " exceeds the limit of " +
                  std::to_string(nbc::kMaxRank));
  dims.resize(rank);
  for (int64_t &d : dims) {
    if (!c.i64(d, "dimension")) return false;
    if (d < 0 && !(allowDynamic && d == kDynamic))
      return c.fail("invalid dimension " + std::to_string(d));
  }
  return true;
}

bool readType(Cursor &c, TypeDesc &t, int depth) {
  if (depth > nbc::kMaxTypeDepth)
    return c.fail("type nested deeper than " + std::to_string(nbc::kMaxTypeDepth) + " levels");
  uint8_t kind;
  if (!c.u8(kind, "type kind")) return false;
  switch (kind) {
  case nbc::kTypeTensor:
    t.kind = TypeDesc::Kind::Tensor;
    return c.dtype(t.dtype, "tensor type") && readDims(c, t.dims, true, "tensor rank");
  case nbc::kTypeTuple: {
    t.kind = TypeDesc::Kind::Tuple;
    uint32_t n;
    if (!c.count(n, 1, "tuple size")) return false;
    t.elems.resize(n);
    for (TypeDesc &e : t.elems)
      if (!readType(c, e, depth + 1)) return false;
    return true;
  }
  case nbc::kTypeAdt: t.kind = TypeDesc::Kind::Adt; return c.u32(t.adt, "adt index");
  case nbc::kTypeStorage: t.kind = TypeDesc::Kind::Storage; return true;
  default: return c.fail("invalid type kind " + std::to_string(kind));
  }
}

bool readAttr(Cursor &c, Attr &a) {
  uint8_t tag;
  if (!c.u8(tag, "attribute kind")) return false;
  if (tag == nbc::kAttrNull) return c.fail("null attribute");
  switch (tag) {
  case static_cast<uint8_t>(AttrKind::Bool): {
    bool b;
    if (!c.boolean(b, "bool attribute")) return false;
    a = Attr::getBool(b);
    return true;
  }
  case static_cast<uint8_t>(AttrKind::Int): {
    int64_t v;
    if (!c.i64(v, "int attribute")) return false;
    a = Attr::getInt(v);
    return true;
  }
  case static_cast<uint8_t>(AttrKind::Float): {
    uint64_t bits;
    if (!c.u64(bits, "float attribute")) return false;
    a = Attr::getFloat(std::bit_cast<double>(bits));
    return true;
  }
  case static_cast<uint8_t>(AttrKind::Ints): {
    uint32_t n;
    if (!c.count(n, 8, "ints attribute length")) return false;
    std::vector<int64_t> v(n);
    for (int64_t &x : v)
      if (!c.i64(x, "ints attribute")) return false;
    a = Attr::getInts(std::move(v));
    return true;
  }
  case static_cast<uint8_t>(AttrKind::DType): {
    DType t;
    if (!c.dtype(t, "dtype attribute")) return false;
    a = Attr::getDType(t);
    return true;
  }
  case static_cast<uint8_t>(AttrKind::Str):
  case static_cast<uint8_t>(AttrKind::Sym): {
    std::string s;
    if (!c.str(s, "string attribute")) return false;
    a = tag == static_cast<uint8_t>(AttrKind::Str) ? Attr::getStr(std::move(s))
                                                   : Attr::getSym(std::move(s));
    return true;
  }
  case static_cast<uint8_t>(AttrKind::Dense): {
    DenseValue d;
    uint64_t n;
    if (!c.dtype(d.dtype, "dense attribute") || !c.boolean(d.splat, "dense splat flag") ||
        !readDims(c, d.shape, false, "dense rank") || !c.u64(n, "dense byte count") ||
        !c.take(n, "dense attribute data"))
      return false;
    d.bytes.assign(c.here(), c.here() + n);
    c.skip(n);
    a = Attr::getDense(std::move(d));
    return true;
  }
  default: return c.fail("invalid attribute kind " + std::to_string(tag));
  }
}

std::string named(const char *what, uint32_t i, const std::string &name) {
  std::string r = std::string(what) + " " + std::to_string(i);
  if (!name.empty()) r += " '" + name + "'";
  return r;
}

bool readStrings(Cursor &c, Executable &e) {
  uint32_t n;
  if (!c.count(n, 4, "string count")) return false;
  e.strings.resize(n);
  for (uint32_t i = 0; i < n; ++i)
    if (!c.str(e.strings[i], "string")) return c.wrap("string " + std::to_string(i));
  return true;
}

bool readAdts(Cursor &c, Executable &e) {
  uint32_t n;
  if (!c.count(n, 8, "adt count")) return false;
  e.adts.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    AdtDesc &a = e.adts[i];
    uint32_t nc;
    if (!c.str(a.name, "adt name") || !c.count(nc, 8, "constructor count"))
      return c.wrap(named("adt", i, a.name));
    a.ctors.resize(nc);
    for (uint32_t k = 0; k < nc; ++k) {
      AdtDesc::Ctor &ctor = a.ctors[k];
      uint32_t nf;
      if (!c.str(ctor.name, "constructor name") || !c.count(nf, 1, "field count"))
        return c.wrap(named("adt", i, a.name) + ", " + named("constructor", k, ctor.name));
      ctor.fields.resize(nf);
      for (uint32_t f = 0; f < nf; ++f)
        if (!readType(c, ctor.fields[f], 1))
          return c.wrap(named("adt", i, a.name) + ", " + named("constructor", k, ctor.name) +
                        ", field " + std::to_string(f));
    }
  }
  return true;
}

bool readSignatures(Cursor &c, Executable &e) {
  uint32_t n;
  if (!c.count(n, 12, "function count")) return false;
  e.functions.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    VMFunction &f = e.functions[i];
    uint32_t np, nr;
    if (!c.str(f.name, "function name") || !c.count(np, 5, "parameter count"))
      return c.wrap(named("function", i, f.name));
    f.paramNames.resize(np);
    f.paramTypes.resize(np);
    for (uint32_t p = 0; p < np; ++p)
      if (!c.str(f.paramNames[p], "parameter name") || !readType(c, f.paramTypes[p], 1))
        return c.wrap(named("function", i, f.name) + ", parameter " + std::to_string(p));
    if (!c.count(nr, 1, "result count")) return c.wrap(named("function", i, f.name));
    f.resultTypes.resize(nr);
    for (uint32_t r = 0; r < nr; ++r)
      if (!readType(c, f.resultTypes[r], 1))
        return c.wrap(named("function", i, f.name) + ", result " + std::to_string(r));
  }
  return true;
}

bool readKernels(Cursor &c, Executable &e) {
  uint32_t n;
  // name length, input count, upperBound, member count, output count
  if (!c.count(n, 17, "kernel count")) return false;
  e.kernels.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    KernelDesc &k = e.kernels[i];
    uint32_t nm, no;
    if (!c.str(k.name, "kernel name") || !c.count(k.numInputs, 1, "input count"))
      return c.wrap(named("kernel", i, k.name));
    k.inputDTypes.resize(k.numInputs);
    for (DType &t : k.inputDTypes)
      if (!c.dtype(t, "kernel input dtype")) return c.wrap(named("kernel", i, k.name));
    if (!c.boolean(k.upperBound, "upper-bound flag") || !c.count(nm, 16, "member count"))
      return c.wrap(named("kernel", i, k.name));
    if (nm > nbc::kMaxKernelMembers)
      return c.fail(named("kernel", i, k.name) + ": " + std::to_string(nm) +
                    " members exceed the limit of " + std::to_string(nbc::kMaxKernelMembers));
    k.members.resize(nm);
    for (uint32_t m = 0; m < nm; ++m) {
      KernelDesc::Member &mem = k.members[m];
      std::string mnemonic;
      uint32_t na, nops;
      auto where = [&] { return named("kernel", i, k.name) + ", member " + std::to_string(m); };
      if (!c.str(mnemonic, "op name") || !c.u32(mem.numResults, "result count") ||
          !c.count(na, 1, "attribute count"))
        return c.wrap(where());
      // Ops are stored by mnemonic, not by their position in ir/Ops.def, so
      // that adding an op to the table does not change the meaning of files.
      std::optional<OpCode> op = lookupOpCode(mnemonic);
      if (!op) return c.fail(where() + ": unknown op '" + mnemonic + "'");
      mem.op = *op;
      mem.attrs.resize(na);
      for (uint32_t a = 0; a < na; ++a)
        if (!readAttr(c, mem.attrs[a])) return c.wrap(where() + ", attribute " + std::to_string(a));
      if (!c.count(nops, 4, "operand count")) return c.wrap(where());
      mem.operands.resize(nops);
      for (uint32_t &v : mem.operands)
        if (!c.u32(v, "operand")) return c.wrap(where());
    }
    if (!c.count(no, 4, "output count")) return c.wrap(named("kernel", i, k.name));
    k.outputs.resize(no);
    for (uint32_t &v : k.outputs)
      if (!c.u32(v, "output")) return c.wrap(named("kernel", i, k.name));
  }
  return true;
}

// Format 1.2: the native code and its symbol table (Format.cpp,
// writeNativeCode). The object's bytes are copied out of the file buffer:
// the loader hands them to memfd_create anyway.
bool readNativeCode(Cursor &c, Executable &e, uint64_t sectionStart, uint64_t sectionEnd) {
  NativeCode &n = e.native;
  auto shortStr = [&](std::string &s, const char *what) {
    if (!c.str(s, what)) return false;
    if (s.size() > nbc::kMaxSymbolLength)
      return c.fail(std::string(what) + " is " + std::to_string(s.size()) +
                    " bytes long (the limit is " + std::to_string(nbc::kMaxSymbolLength) + ")");
    return true;
  };
  if (!shortStr(n.triple, "target triple") || !shortStr(n.cpu, "cpu")) return false;
  uint32_t nf;
  if (!c.count(nf, 4, "feature count")) return false;
  n.features.resize(nf);
  for (std::string &f : n.features)
    if (!shortStr(f, "cpu feature")) return false;
  uint32_t ne;
  if (!c.count(ne, 8, "native kernel count")) return false;
  n.entries.resize(ne);
  for (uint32_t i = 0; i < ne; ++i) {
    NativeCode::Entry &en = n.entries[i];
    if (!c.u32(en.kernel, "kernel index") || !shortStr(en.symbol, "symbol"))
      return c.wrap("native kernel " + std::to_string(i));
  }
  uint64_t offset, size;
  if (!c.u64(offset, "object offset") || !c.u64(size, "object size")) return false;
  uint64_t begin = sectionStart + offset;
  if (offset > sectionEnd - sectionStart || begin < c.pos() || size != sectionEnd - begin)
    return c.fail("the object [" + std::to_string(offset) + ", +" + std::to_string(size) +
                  ") does not end the section (" + std::to_string(sectionEnd - sectionStart) +
                  " bytes)");
  if (begin % nbc::kConstantAlign)
    return c.fail("the object's offset is not 64-byte aligned");
  c.skip(begin - c.pos());
  n.object.assign(c.here(), c.here() + size);
  c.skip(size);
  return true;
}

// Format 1.3: the device code and its kernel table (Format.cpp,
// writeCudaCode). PTX and cubin are copied out of the file buffer (the driver
// copies them again when it loads the module).
bool readCudaCode(Cursor &c, Executable &e, uint64_t sectionStart, uint64_t sectionEnd) {
  CudaCode &cu = e.cuda;
  if (!c.str(cu.arch, "architecture")) return false;
  if (cu.arch.size() > nbc::kMaxArchLength)
    return c.fail("architecture is " + std::to_string(cu.arch.size()) + " bytes long (the limit is " +
                  std::to_string(nbc::kMaxArchLength) + ")");
  uint32_t ne;
  if (!c.count(ne, 10, "cuda kernel count")) return false;
  cu.entries.resize(ne);
  for (uint32_t i = 0; i < ne; ++i) {
    CudaCode::Entry &en = cu.entries[i];
    uint8_t kind;
    if (!c.u32(en.kernel, "kernel index") || !c.u8(kind, "kind") || !c.u8(en.flags, "flags") ||
        !c.str(en.symbol, "symbol"))
      return c.wrap("cuda kernel " + std::to_string(i));
    if (kind >= CudaCode::kNumKinds)
      return c.fail("cuda kernel " + std::to_string(i) + ": unknown kind " + std::to_string(kind));
    en.kind = static_cast<CudaCode::Kind>(kind);
    if (en.symbol.size() > nbc::kMaxSymbolLength)
      return c.fail("cuda kernel " + std::to_string(i) + ": symbol is " + std::to_string(en.symbol.size()) +
                    " bytes long (the limit is " + std::to_string(nbc::kMaxSymbolLength) + ")");
  }
  uint64_t ptxOff, ptxSize, cubinOff, cubinSize;
  if (!c.u64(ptxOff, "ptx offset") || !c.u64(ptxSize, "ptx size") || !c.u64(cubinOff, "cubin offset") ||
      !c.u64(cubinSize, "cubin size"))
    return false;
  const uint64_t len = sectionEnd - sectionStart, meta = c.pos() - sectionStart;
  if (ptxOff < meta || ptxOff > len || ptxSize > len - ptxOff)
    return c.fail("the PTX [" + std::to_string(ptxOff) + ", +" + std::to_string(ptxSize) +
                  ") lies outside the section's data (" + std::to_string(meta) + ".." + std::to_string(len) + ")");
  if (cubinOff < ptxOff + ptxSize || cubinOff > len || cubinSize != len - cubinOff)
    return c.fail("the cubin [" + std::to_string(cubinOff) + ", +" + std::to_string(cubinSize) +
                  ") does not follow the PTX and end the section (" + std::to_string(len) + " bytes)");
  if ((sectionStart + ptxOff) % nbc::kConstantAlign || (sectionStart + cubinOff) % nbc::kConstantAlign)
    return c.fail("the PTX or cubin offset is not 64-byte aligned");
  if (ptxSize == 0) return c.fail("the PTX is empty");
  c.skip(ptxOff - meta);
  cu.ptx.assign(reinterpret_cast<const char *>(c.here()), ptxSize);
  c.skip(cubinOff - ptxOff);
  cu.cubin.assign(c.here(), c.here() + cubinSize);
  c.skip(cubinSize);
  return true;
}

// Format 1.1: one location per kernel member, matching the kernels section.
bool readKernelLocs(Cursor &c, Executable &e) {
  uint32_t n;
  if (!c.count(n, 4, "kernel count")) return false;
  if (n != e.kernels.size())
    return c.fail(std::to_string(n) + " kernels, the kernels section has " +
                  std::to_string(e.kernels.size()));
  for (uint32_t i = 0; i < n; ++i) {
    KernelDesc &k = e.kernels[i];
    uint32_t nm;
    if (!c.count(nm, 12, "member count")) return c.wrap(named("kernel", i, k.name));
    if (nm != k.members.size())
      return c.fail(named("kernel", i, k.name) + ": " + std::to_string(nm) + " member locations for " +
                    std::to_string(k.members.size()) + " members");
    k.memberLocs.resize(nm);
    for (uint32_t m = 0; m < nm; ++m) {
      SourceLoc &l = k.memberLocs[m];
      if (!c.u32(l.file, "file string") || !c.u32(l.line, "line") || !c.u32(l.col, "column"))
        return c.wrap(named("kernel", i, k.name) + ", member " + std::to_string(m));
      if (l.line != 0 && l.file >= e.strings.size())
        return c.fail(named("kernel", i, k.name) + ", member " + std::to_string(m) +
                      ": file string " + std::to_string(l.file) + " out of range (" +
                      std::to_string(e.strings.size()) + " strings)");
    }
  }
  return true;
}

// Format 1.7: per function with any, its location table and its sites (pc,
// range of the table), functions and pcs in increasing order. Whether a pc
// is a kernel call of that many members is the verifier's to check (it
// decodes the code).
bool readSiteLocs(Cursor &c, Executable &e) {
  uint32_t n;
  if (!c.count(n, 12, "function count")) return false;
  int64_t lastFn = -1;
  for (uint32_t i = 0; i < n; ++i) {
    auto where = [i] { return "record " + std::to_string(i); }; // built on failure only
    uint32_t fn, nlocs, nsites;
    if (!c.u32(fn, "function")) return c.wrap(where());
    if (fn >= e.functions.size())
      return c.fail(where() + ": function " + std::to_string(fn) + " out of range (" +
                    std::to_string(e.functions.size()) + " functions)");
    if (int64_t(fn) <= lastFn) return c.fail(where() + ": functions are not in increasing order");
    lastFn = fn;
    VMFunction &f = e.functions[fn];
    if (!c.count(nlocs, 12, "location count")) return c.wrap(where());
    f.siteMemberLocs.resize(nlocs);
    for (uint32_t m = 0; m < nlocs; ++m) {
      SourceLoc &l = f.siteMemberLocs[m];
      if (!c.u32(l.file, "file string") || !c.u32(l.line, "line") || !c.u32(l.col, "column"))
        return c.wrap(where() + ", location " + std::to_string(m));
      if (l.line != 0 && l.file >= e.strings.size())
        return c.fail(where() + ", location " + std::to_string(m) + ": file string " + std::to_string(l.file) +
                      " out of range (" + std::to_string(e.strings.size()) + " strings)");
    }
    if (!c.count(nsites, 12, "site count")) return c.wrap(where());
    f.sites.resize(nsites);
    for (uint32_t s = 0; s < nsites; ++s) {
      VMFunction::Site &st = f.sites[s];
      if (!c.u32(st.pc, "pc") || !c.u32(st.first, "first location") || !c.u32(st.count, "location count"))
        return c.wrap(where() + ", site " + std::to_string(s));
      if (s && st.pc <= f.sites[s - 1].pc)
        return c.fail(where() + ", site " + std::to_string(s) + ": pcs are not strictly increasing");
      if (uint64_t(st.first) + st.count > nlocs)
        return c.fail(where() + ", site " + std::to_string(s) + ": locations [" + std::to_string(st.first) + ", +" +
                      std::to_string(st.count) + ") outside the table of " + std::to_string(nlocs));
    }
  }
  return true;
}

// Format 1.10: one phase per kernel, after the batching section (which
// must be there); the verifier checks that kernels that do not batch have
// phase 0.
static bool readBatchPhases(Cursor &c, Executable &e) {
  if (e.batching.empty()) return c.fail("there is no batching section");
  uint32_t n;
  if (!c.count(n, 4, "kernel count")) return false;
  if (n != e.batching.size())
    return c.fail(std::to_string(n) + " kernels, the kernels section has " + std::to_string(e.batching.size()));
  for (uint32_t i = 0; i < n; ++i)
    if (!c.u32(e.batching[i].phase, "phase")) return c.wrap(named("kernel", i, e.kernels[i].name));
  return true;
}

// Format 1.3: one entry per kernel; what the entries mean is checked by the
// verifier (vm/format/Verifier.cpp).
bool readBatching(Cursor &c, Executable &e) {
  uint32_t n;
  if (!c.count(n, 12, "kernel count")) return false;
  if (n != e.kernels.size())
    return c.fail(std::to_string(n) + " kernels, the kernels section has " +
                  std::to_string(e.kernels.size()));
  e.batching.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    KernelBatching &b = e.batching[i];
    uint32_t mode, ns;
    if (!c.u32(mode, "mode") || !c.u32(b.batched, "batched kernel") || !c.count(ns, 4, "input count"))
      return c.wrap(named("kernel", i, e.kernels[i].name));
    if (mode >= kNumBatchingModes)
      return c.fail(named("kernel", i, e.kernels[i].name) + ": unknown batching mode " + std::to_string(mode));
    b.mode = static_cast<KernelBatching::Mode>(mode);
    b.shared.resize(ns);
    for (uint32_t j = 0; j < ns; ++j) {
      uint32_t v;
      if (!c.u32(v, "shared flag")) return c.wrap(named("kernel", i, e.kernels[i].name));
      if (v > 1)
        return c.fail(named("kernel", i, e.kernels[i].name) + ": shared flag of input " + std::to_string(j) +
                      " is " + std::to_string(v) + ", not 0 or 1");
      b.shared[j] = static_cast<uint8_t>(v);
    }
  }
  return true;
}

bool readFunctions(Cursor &c, Executable &e) {
  uint32_t n;
  if (!c.count(n, 12, "function count")) return false;
  if (n != e.functions.size())
    return c.fail(std::to_string(n) + " function bodies for " + std::to_string(e.functions.size()) +
                  " signatures");
  for (uint32_t i = 0; i < n; ++i) {
    VMFunction &f = e.functions[i];
    uint32_t nw, ns;
    if (!c.u32(f.numRegisters, "register count") || !c.count(nw, 4, "code size"))
      return c.wrap(named("function", i, f.name));
    f.code.resize(nw);
    if (nw) std::memcpy(f.code.data(), c.here(), uint64_t(nw) * 4);
    c.skip(uint64_t(nw) * 4);
    if (!c.count(ns, 16, "source map size")) return c.wrap(named("function", i, f.name));
    f.sourceMap.resize(ns);
    for (SourceLoc &l : f.sourceMap)
      if (!c.u32(l.pc, "source map") || !c.u32(l.file, "source map") ||
          !c.u32(l.line, "source map") || !c.u32(l.col, "source map"))
        return c.wrap(named("function", i, f.name));
  }
  return true;
}

// Metadata records, then data at 64-byte aligned absolute file offsets inside
// the section, after the metadata. Data ranges may overlap (a producer may
// share identical constants); they are read-only.
bool readConstants(Cursor &c, Executable &e, const uint8_t *base, uint64_t sectionEnd) {
  uint32_t n, reserved;
  // name length, dtype, rank, offset, size
  if (!c.count(n, 25, "constant count") || !c.u32(reserved, "reserved word")) return false;
  if (reserved != 0) return c.fail("reserved word is " + std::to_string(reserved) + ", not 0");
  e.constants.resize(n);
  std::vector<uint64_t> offsets(n);
  for (uint32_t i = 0; i < n; ++i) {
    ConstantDesc &k = e.constants[i];
    if (!c.str(k.name, "constant name") || !c.dtype(k.dtype, "constant") ||
        !readDims(c, k.shape, false, "constant rank") || !c.u64(offsets[i], "data offset") ||
        !c.u64(k.size, "data size"))
      return c.wrap(named("constant", i, k.name));
  }
  const uint64_t dataStart = c.pos();
  for (uint32_t i = 0; i < n; ++i) {
    ConstantDesc &k = e.constants[i];
    uint64_t off = offsets[i], end;
    if (off % nbc::kConstantAlign)
      return c.fail(named("constant", i, k.name) + ": data offset " + std::to_string(off) +
                    " is not a multiple of 64");
    if (off < dataStart || __builtin_add_overflow(off, k.size, &end) || end > sectionEnd)
      return c.fail(named("constant", i, k.name) + ": data [" + std::to_string(off) + ", +" +
                    std::to_string(k.size) + ") lies outside the section's data region [" +
                    std::to_string(dataStart) + ", " + std::to_string(sectionEnd) + ")");
    k.data = base + off;
    k.splat = ConstantDesc::isSplatForm(k.dtype, k.shape, k.size);
  }
  return true;
}

struct SectionEntry {
  uint32_t kind;
  uint64_t offset, size;
};

} // namespace

bool deserialize(const uint8_t *data, size_t size, std::shared_ptr<const void> keepalive,
                 Executable &out, std::string &error) {
  using nbc::SectionKind;
  if (reinterpret_cast<uintptr_t>(data) % nbc::kConstantAlign)
    return fail(error, "the buffer holding the executable is not 64-byte aligned (use an "
                       "AlignedBuffer)");
  if (size < nbc::kHeaderSize)
    return fail(error, "not a Nimble executable: " + std::to_string(size) +
                           " bytes is too small for the 40-byte header");
  if (std::memcmp(data, nbc::kMagic, 8) != 0)
    return fail(error, "not a Nimble executable (bad magic; expected \"NIMBLEBC\")");
  uint16_t major = load16(data + nbc::kOffMajor), minor = load16(data + nbc::kOffMinor);
  if (major > Executable::kMajor)
    return fail(error, "unsupported .nbc version " + std::to_string(major) + "." +
                           std::to_string(minor) + ": this .nbc needs format " +
                           std::to_string(major) + ".x; this nimble-run reads " +
                           std::to_string(Executable::kMajor) + ".x");
  if (major < Executable::kMajor)
    return fail(error, "unsupported .nbc version " + std::to_string(major) + "." +
                           std::to_string(minor) + ": this nimble-run reads " +
                           std::to_string(Executable::kMajor) + ".x only");
  uint32_t flags = load32(data + nbc::kOffFlags);
  if (flags != 0) return fail(error, "unknown header flags " + hex(flags));
  uint64_t fileSize = load64(data + nbc::kOffFileSize);
  if (fileSize != size)
    return fail(error, "the header gives a file size of " + std::to_string(fileSize) +
                           " bytes but there are " + std::to_string(size) +
                           " (truncated or padded file)");
  if (load32(data + 36) != 0) return fail(error, "reserved header word is not 0");
  uint64_t stored = load64(data + nbc::kOffChecksum);
  uint64_t computed = crc32c(data + nbc::kHeaderSize, size - nbc::kHeaderSize);
  if (stored != computed)
    return fail(error, "checksum mismatch (header " + hex(stored) + ", contents " + hex(computed) +
                           "): the file is corrupt");

  // Section table.
  uint32_t numSections = load32(data + nbc::kOffSectionCount);
  if (numSections > nbc::kMaxSections)
    return fail(error, "section count " + std::to_string(numSections) + " exceeds the limit of " +
                           std::to_string(nbc::kMaxSections));
  const uint64_t tableEnd = nbc::kHeaderSize + uint64_t(numSections) * nbc::kSectionEntrySize;
  if (tableEnd > size)
    return fail(error, "the section table (" + std::to_string(numSections) +
                           " entries) runs past the end of the file");
  std::vector<SectionEntry> sections;
  const SectionEntry *byKind[nbc::kNumSectionKinds + 1] = {};
  sections.reserve(numSections);
  for (uint32_t i = 0; i < numSections; ++i) {
    const uint8_t *p = data + nbc::kHeaderSize + i * nbc::kSectionEntrySize;
    SectionEntry s{load32(p), load64(p + 8), load64(p + 16)};
    std::string where =
        "section table entry " + std::to_string(i) + " (kind " + std::to_string(s.kind) + ")";
    uint64_t end;
    if (load32(p + 4) != 0) return fail(error, where + ": reserved word is not 0");
    if (s.offset < tableEnd || __builtin_add_overflow(s.offset, s.size, &end) || end > size)
      return fail(error, where + ": [" + std::to_string(s.offset) + ", +" + std::to_string(s.size) +
                             ") is outside the file's section area [" + std::to_string(tableEnd) +
                             ", " + std::to_string(size) + ")");
    size_t align = s.kind == static_cast<uint32_t>(SectionKind::Constants) ||
                           s.kind == static_cast<uint32_t>(SectionKind::NativeCode) ||
                           s.kind == static_cast<uint32_t>(SectionKind::CudaCode)
                       ? nbc::kConstantAlign
                       : nbc::kSectionAlign;
    if (s.offset % align)
      return fail(error, where + ": offset " + std::to_string(s.offset) + " is not a multiple of " +
                             std::to_string(align));
    sections.push_back(s);
  }
  for (const SectionEntry &s : sections) {
    if (s.kind >= 1 && s.kind <= nbc::kNumSectionKinds) {
      if (byKind[s.kind])
        return fail(error, std::string("duplicate ") +
                               nbc::sectionName(static_cast<SectionKind>(s.kind)) + " section");
      byKind[s.kind] = &s;
    } else if (minor <= Executable::kMinor) {
      // A newer minor version may add sections that this reader skips;
      // in a file of a version this reader knows, an unknown kind is damage.
      return fail(error, "unknown section kind " + std::to_string(s.kind));
    }
  }
  for (uint32_t k = 1; k <= nbc::kNumRequiredSectionKinds; ++k)
    if (!byKind[k])
      return fail(error, std::string("missing ") + nbc::sectionName(static_cast<SectionKind>(k)) +
                             " section");
  {
    std::vector<SectionEntry> sorted = sections;
    std::sort(sorted.begin(), sorted.end(),
              [](const SectionEntry &a, const SectionEntry &b) { return a.offset < b.offset; });
    for (size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i - 1].offset + sorted[i - 1].size > sorted[i].offset)
        return fail(error, "sections of kinds " + std::to_string(sorted[i - 1].kind) + " and " +
                               std::to_string(sorted[i].kind) + " overlap");
  }

  // Records, in dependency order (functions after signatures).
  Executable exe;
  exe.major = major;
  exe.minor = minor;
  std::string err;
  auto section = [&](SectionKind k, auto &&reader) {
    const SectionEntry &s = *byKind[static_cast<uint32_t>(k)];
    Cursor c(data, s.offset, s.offset + s.size, err);
    if (!reader(c, s)) {
      error = std::string(nbc::sectionName(k)) + " section: " + err;
      return false;
    }
    if (k != SectionKind::Constants && !c.atEnd()) {
      error = std::string(nbc::sectionName(k)) + " section: " + std::to_string(c.remaining()) +
              " unread bytes at its end";
      return false;
    }
    return true;
  };
  if (!section(SectionKind::Strings, [&](Cursor &c, auto &) { return readStrings(c, exe); }) ||
      !section(SectionKind::Adts, [&](Cursor &c, auto &) { return readAdts(c, exe); }) ||
      !section(SectionKind::Signatures,
               [&](Cursor &c, auto &) { return readSignatures(c, exe); }) ||
      !section(SectionKind::Kernels, [&](Cursor &c, auto &) { return readKernels(c, exe); }) ||
      !section(SectionKind::Functions, [&](Cursor &c, auto &) { return readFunctions(c, exe); }) ||
      (byKind[static_cast<uint32_t>(SectionKind::KernelLocs)] &&
       !section(SectionKind::KernelLocs, [&](Cursor &c, auto &) { return readKernelLocs(c, exe); })) ||
      (byKind[static_cast<uint32_t>(SectionKind::SiteLocs)] &&
       !section(SectionKind::SiteLocs, [&](Cursor &c, auto &) { return readSiteLocs(c, exe); })) ||
      (byKind[static_cast<uint32_t>(SectionKind::Batching)] &&
       !section(SectionKind::Batching, [&](Cursor &c, auto &) { return readBatching(c, exe); })) ||
      (byKind[static_cast<uint32_t>(SectionKind::BatchPhases)] &&
       !section(SectionKind::BatchPhases, [&](Cursor &c, auto &) { return readBatchPhases(c, exe); })) ||
      (byKind[static_cast<uint32_t>(SectionKind::NativeCode)] &&
       !section(SectionKind::NativeCode, [&](Cursor &c, const SectionEntry &s) {
         return readNativeCode(c, exe, s.offset, s.offset + s.size);
       })) ||
      (byKind[static_cast<uint32_t>(SectionKind::CudaCode)] &&
       !section(SectionKind::CudaCode, [&](Cursor &c, const SectionEntry &s) {
         return readCudaCode(c, exe, s.offset, s.offset + s.size);
       })) ||
      !section(SectionKind::Constants, [&](Cursor &c, const SectionEntry &s) {
        return readConstants(c, exe, data, s.offset + s.size);
      }))
    return false;

  if (!verify(exe, err)) {
    error = err;
    return false;
  }
  exe.buffer = std::move(keepalive);
  out = std::move(exe);
  return true;
}

bool deserialize(std::shared_ptr<const AlignedBuffer> buffer, Executable &out, std::string &error) {
  if (!buffer) return fail(error, "no buffer");
  const uint8_t *data = buffer->data();
  size_t size = buffer->size();
  return deserialize(data, size, std::move(buffer), out, error);
}

bool readExecutableFile(const std::string &path, Executable &out, std::string &error) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) return fail(error, "cannot open '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fclose(f);
    return fail(error, "'" + path + "' is not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  // Mapped (Format.h): page-aligned, so 64-byte aligned as deserialize()
  // needs; unmapped when the last holder of Executable::buffer lets go.
  if (size >= nbc::kHeaderSize) {
    void *m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fileno(f), 0);
    if (m != MAP_FAILED) {
      std::fclose(f);
      // Should the control block's allocation throw, shared_ptr unmaps.
      std::shared_ptr<const void> mapping(m, [size](const void *p) { munmap(const_cast<void *>(p), size); });
      const uint8_t *bytes = static_cast<const uint8_t *>(m);
      if (!deserialize(bytes, size, std::move(mapping), out, error)) {
        error = path + ": " + error;
        return false;
      }
      out.mappedBegin = bytes;
      out.mappedEnd = bytes + size;
      return true;
    }
  }
  std::shared_ptr<AlignedBuffer> buf = AlignedBuffer::create(size);
  if (!buf) {
    std::fclose(f);
    return fail(error, "cannot allocate " + std::to_string(size) + " bytes to read '" + path + "'");
  }
  size_t got = size ? std::fread(buf->data(), 1, size, f) : 0;
  std::fclose(f);
  if (got != size) return fail(error, "cannot read '" + path + "': short read");
  if (!deserialize(std::shared_ptr<const AlignedBuffer>(std::move(buf)), out, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

size_t releaseMappedPages(const Executable &exe, const void *data, size_t bytes) {
  const uint8_t *p = static_cast<const uint8_t *>(data);
  if (!exe.mappedBegin || p < exe.mappedBegin || p + bytes > exe.mappedEnd || p + bytes < p) return 0;
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
  if (end <= begin) return 0;
  if (madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED) != 0) return 0;
  return end - begin;
}

} // namespace nimble::vm
