//===- ElfCheck.cpp - Bounds of a native-code object before dlopen --------===//

#include "vm/dispatch/ElfCheck.h"

#include <elf.h>

#include <cstring>
#include <vector>

namespace nimble::vm {

namespace {

/// Reads a T at `off` of the object; false when it does not fit.
template <class T> bool readAt(const uint8_t *data, size_t size, uint64_t off, T &out) {
  if (off > size || sizeof(T) > size - off) return false;
  std::memcpy(&out, data + off, sizeof(T));
  return true;
}

/// [off, off + n * entsize) inside [0, size)?
bool tableFits(size_t size, uint64_t off, uint64_t n, uint64_t entsize) {
  uint64_t bytes, end;
  return !__builtin_mul_overflow(n, entsize, &bytes) && !__builtin_add_overflow(off, bytes, &end) &&
         end <= size;
}

class Checker {
public:
  Checker(const uint8_t *d, size_t n, std::string &reason) : d_(d), n_(n), reason_(reason) {}

  bool header();
  bool programHeaders();
  bool dynamic();
  bool sections();
  const std::vector<Elf64_Shdr> &shdrs() const { return shdrs_; }
  const Elf64_Ehdr &ehdr() const { return eh_; }

  bool fail(const std::string &why) {
    reason_ = "the native-code object is malformed: " + why;
    return false;
  }

private:
  /// The file offset of virtual range [addr, addr + len) when it lies in
  /// one PT_LOAD's file bytes.
  bool fileOffset(uint64_t addr, uint64_t len, uint64_t &off, bool writable = false) const {
    for (const Elf64_Phdr &p : loads_) {
      uint64_t end;
      if (addr < p.p_vaddr || __builtin_add_overflow(addr, len, &end) || end > p.p_vaddr + p.p_filesz) continue;
      if (writable && !(p.p_flags & PF_W)) continue;
      off = p.p_offset + (addr - p.p_vaddr);
      return true;
    }
    return false;
  }
  bool inSomeLoad(uint64_t addr) const {
    for (const Elf64_Phdr &p : loads_)
      if (addr >= p.p_vaddr && addr - p.p_vaddr < p.p_memsz) return true;
    return false;
  }
  bool relocations(uint64_t addr, uint64_t bytes, const char *what, uint64_t numSyms);

  const uint8_t *d_;
  size_t n_;
  std::string &reason_;
  Elf64_Ehdr eh_{};
  std::vector<Elf64_Phdr> loads_;
  Elf64_Phdr dyn_{};
  bool hasDyn_ = false;
  std::vector<Elf64_Shdr> shdrs_;
};

bool Checker::header() {
  if (!readAt(d_, n_, 0, eh_) || std::memcmp(eh_.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh_.e_ident[EI_CLASS] != ELFCLASS64)
    return fail("not a 64-bit ELF file");
  if (eh_.e_ident[EI_DATA] != ELFDATA2LSB || eh_.e_ident[EI_VERSION] != EV_CURRENT || eh_.e_version != EV_CURRENT)
    return fail("not a little-endian ELF file of version 1");
  if (eh_.e_machine != EM_X86_64 || eh_.e_type != ET_DYN) return fail("not an x86-64 shared object");
  if (eh_.e_ehsize != sizeof(Elf64_Ehdr)) return fail("ELF header size " + std::to_string(eh_.e_ehsize));
  if (eh_.e_phnum == 0 || eh_.e_phentsize != sizeof(Elf64_Phdr) ||
      !tableFits(n_, eh_.e_phoff, eh_.e_phnum, sizeof(Elf64_Phdr)))
    return fail("the program header table lies outside the file");
  if (eh_.e_shnum != 0 && (eh_.e_shentsize != sizeof(Elf64_Shdr) ||
                           !tableFits(n_, eh_.e_shoff, eh_.e_shnum, sizeof(Elf64_Shdr)) ||
                           eh_.e_shstrndx >= eh_.e_shnum))
    return fail("the section header table lies outside the file");
  return true;
}

bool Checker::programHeaders() {
  uint64_t mapped = 0;
  for (uint16_t i = 0; i < eh_.e_phnum; ++i) {
    Elf64_Phdr p{};
    readAt(d_, n_, eh_.e_phoff + uint64_t(i) * sizeof(Elf64_Phdr), p);
    const std::string at = "program header " + std::to_string(i);
    switch (p.p_type) {
    case PT_INTERP: return fail(at + " names an interpreter");
    case PT_LOAD: {
      uint64_t end;
      if (__builtin_add_overflow(p.p_offset, p.p_filesz, &end) || end > n_)
        return fail(at + " (PT_LOAD) lies outside the file");
      if (p.p_filesz > p.p_memsz) return fail(at + " (PT_LOAD) has more file bytes than memory bytes");
      if (p.p_align > 1 && ((p.p_align & (p.p_align - 1)) || (p.p_vaddr - p.p_offset) % p.p_align))
        return fail(at + " (PT_LOAD) has a bad alignment");
      if (__builtin_add_overflow(p.p_vaddr, p.p_memsz, &end) || __builtin_add_overflow(mapped, p.p_memsz, &mapped) ||
          mapped > kMaxMappedBytes)
        return fail("the segments map more than " + std::to_string(kMaxMappedBytes) + " bytes");
      loads_.push_back(p);
      break;
    }
    case PT_DYNAMIC:
      if (hasDyn_) return fail("two PT_DYNAMIC headers");
      dyn_ = p;
      hasDyn_ = true;
      break;
    default: break; // PT_PHDR, PT_GNU_*: read by nothing that could go out of bounds
    }
  }
  if (loads_.empty()) return fail("no PT_LOAD segment");
  if (!hasDyn_) return fail("no PT_DYNAMIC segment");
  return true;
}

bool Checker::relocations(uint64_t addr, uint64_t bytes, const char *what, uint64_t numSyms) {
  uint64_t off;
  if (bytes % sizeof(Elf64_Rela)) return fail(std::string(what) + " size is not a multiple of 24");
  if (!fileOffset(addr, bytes, off)) return fail(std::string(what) + " lies outside the segments");
  for (uint64_t i = 0; i < bytes / sizeof(Elf64_Rela); ++i) {
    Elf64_Rela r{};
    readAt(d_, n_, off + i * sizeof(Elf64_Rela), r);
    uint32_t type = ELF64_R_TYPE(r.r_info), sym = ELF64_R_SYM(r.r_info);
    if (type != R_X86_64_RELATIVE && type != R_X86_64_GLOB_DAT && type != R_X86_64_JUMP_SLOT &&
        type != R_X86_64_64 && type != R_X86_64_NONE)
      return fail(std::string(what) + " entry " + std::to_string(i) + " has relocation type " + std::to_string(type));
    if (sym >= numSyms) return fail(std::string(what) + " entry " + std::to_string(i) + " names no symbol");
    bool inWritable = false;
    for (const Elf64_Phdr &p : loads_)
      if ((p.p_flags & PF_W) && r.r_offset >= p.p_vaddr && r.r_offset - p.p_vaddr <= p.p_memsz &&
          p.p_memsz - (r.r_offset - p.p_vaddr) >= 8)
        inWritable = true;
    if (!inWritable) return fail(std::string(what) + " entry " + std::to_string(i) + " writes outside the writable segments");
  }
  return true;
}

bool Checker::dynamic() {
  uint64_t end;
  if (__builtin_add_overflow(dyn_.p_offset, dyn_.p_filesz, &end) || end > n_ ||
      dyn_.p_filesz % sizeof(Elf64_Dyn))
    return fail("the dynamic section lies outside the file");
  uint64_t dynOff;
  if (!fileOffset(dyn_.p_vaddr, dyn_.p_filesz, dynOff) || dynOff != dyn_.p_offset)
    return fail("the dynamic section lies outside the loaded segments");
  // The values the loader reads, by tag.
  uint64_t strtab = 0, strsz = 0, symtab = 0, syment = 0, hash = 0, gnuHash = 0;
  uint64_t rela = 0, relasz = 0, relaent = sizeof(Elf64_Rela), jmprel = 0, pltrelsz = 0, pltrel = DT_RELA;
  uint64_t initArr = 0, initArrSz = 0, finiArr = 0, finiArrSz = 0;
  bool null = false, hasStr = false, hasSym = false;
  std::vector<uint64_t> needed;
  for (uint64_t i = 0; i < dyn_.p_filesz / sizeof(Elf64_Dyn); ++i) {
    Elf64_Dyn e{};
    readAt(d_, n_, dyn_.p_offset + i * sizeof(Elf64_Dyn), e);
    const uint64_t v = e.d_un.d_val;
    switch (e.d_tag) {
    case DT_NULL: null = true; break;
    case DT_STRTAB: strtab = v; hasStr = true; break;
    case DT_STRSZ: strsz = v; break;
    case DT_SYMTAB: symtab = v; hasSym = true; break;
    case DT_SYMENT: syment = v; break;
    case DT_HASH: hash = v; break;
    case DT_GNU_HASH: gnuHash = v; break;
    case DT_RELA: rela = v; break;
    case DT_RELASZ: relasz = v; break;
    case DT_RELAENT: relaent = v; break;
    case DT_JMPREL: jmprel = v; break;
    case DT_PLTRELSZ: pltrelsz = v; break;
    case DT_PLTREL: pltrel = v; break;
    case DT_INIT_ARRAY: initArr = v; break;
    case DT_INIT_ARRAYSZ: initArrSz = v; break;
    case DT_FINI_ARRAY: finiArr = v; break;
    case DT_FINI_ARRAYSZ: finiArrSz = v; break;
    case DT_NEEDED: needed.push_back(v); break;
    case DT_REL:
    case DT_RELR:
    case DT_TEXTREL:
    case DT_INIT:
    case DT_FINI:
    case DT_VERSYM:
    case DT_VERDEF:
    case DT_VERNEED:
    case DT_PREINIT_ARRAY:
      return fail("dynamic tag " + std::to_string(e.d_tag) + ", which a kernel object never has");
    default: break;
    }
    if (null) break;
  }
  if (!null) return fail("the dynamic section has no DT_NULL");
  if (!hasStr || !hasSym) return fail("no dynamic symbol or string table");
  if (syment != sizeof(Elf64_Sym)) return fail("symbol entries of " + std::to_string(syment) + " bytes");
  if (relaent != sizeof(Elf64_Rela) || pltrel != DT_RELA) return fail("relocations other than RELA");
  uint64_t strOff;
  if (strsz == 0 || !fileOffset(strtab, strsz, strOff)) return fail("the string table lies outside the segments");
  if (d_[strOff + strsz - 1] != 0) return fail("the string table does not end with NUL");
  for (uint64_t s : needed)
    if (s >= strsz) return fail("a DT_NEEDED name lies outside the string table");
  if (hash == 0) return fail("no DT_HASH (nimblec links with --hash-style=both)");

  // DT_HASH: nbucket, nchain (= the number of symbols), buckets, chains.
  uint64_t hashOff;
  uint32_t hdr[2] = {0, 0};
  if (!fileOffset(hash, 8, hashOff)) return fail("DT_HASH lies outside the segments");
  readAt(d_, n_, hashOff, hdr);
  const uint64_t nbucket = hdr[0], nchain = hdr[1];
  if (!fileOffset(hash, 8 + 4 * (nbucket + nchain), hashOff)) return fail("DT_HASH lies outside the segments");
  for (uint64_t i = 0; i < nbucket + nchain; ++i) {
    uint32_t x = 0;
    readAt(d_, n_, hashOff + 8 + 4 * i, x);
    if (x >= nchain) return fail("a DT_HASH bucket or chain lies outside the symbol table");
  }
  uint64_t symOff;
  if (!fileOffset(symtab, nchain * sizeof(Elf64_Sym), symOff)) return fail("the symbol table lies outside the segments");
  for (uint64_t i = 0; i < nchain; ++i) {
    Elf64_Sym s{};
    readAt(d_, n_, symOff + i * sizeof(Elf64_Sym), s);
    if (s.st_name >= strsz) return fail("symbol " + std::to_string(i) + "'s name lies outside the string table");
    if (s.st_shndx != SHN_UNDEF && s.st_shndx != SHN_ABS && s.st_value != 0 && !inSomeLoad(s.st_value))
      return fail("symbol " + std::to_string(i) + " lies outside the segments");
  }

  // DT_GNU_HASH: nbuckets, symoffset, bloom words, shift; bloom, buckets,
  // then one chain word per symbol from symoffset; a chain ends at a word
  // with its low bit set.
  if (gnuHash) {
    uint64_t gOff;
    uint32_t g[4] = {0, 0, 0, 0};
    if (!fileOffset(gnuHash, 16, gOff)) return fail("DT_GNU_HASH lies outside the segments");
    readAt(d_, n_, gOff, g);
    const uint64_t nb = g[0], symoffset = g[1], bloom = g[2];
    if (symoffset > nchain || g[3] >= 64) return fail("a bad DT_GNU_HASH header");
    const uint64_t chains = nchain - symoffset;
    const uint64_t bytes = 16 + 8 * bloom + 4 * nb + 4 * chains;
    if (bloom > (uint64_t(1) << 24) || nb > (uint64_t(1) << 24) || !fileOffset(gnuHash, bytes, gOff))
      return fail("DT_GNU_HASH lies outside the segments");
    const uint64_t bucketsOff = gOff + 16 + 8 * bloom, chainOff = bucketsOff + 4 * nb;
    for (uint64_t b = 0; b < nb; ++b) {
      uint32_t idx = 0;
      readAt(d_, n_, bucketsOff + 4 * b, idx);
      if (idx == 0) continue;
      if (idx < symoffset || idx >= nchain) return fail("a DT_GNU_HASH bucket lies outside the symbol table");
      for (uint64_t i = idx;; ++i) {
        if (i >= nchain) return fail("a DT_GNU_HASH chain runs past the symbol table");
        uint32_t h = 1;
        readAt(d_, n_, chainOff + 4 * (i - symoffset), h);
        if (h & 1) break;
      }
    }
  }

  if (relasz && !relocations(rela, relasz, "DT_RELA", nchain)) return false;
  if (pltrelsz && !relocations(jmprel, pltrelsz, "DT_JMPREL", nchain)) return false;
  uint64_t off;
  struct Array {
    uint64_t addr, bytes;
    const char *what;
  };
  for (const Array &a : {Array{initArr, initArrSz, "DT_INIT_ARRAY"}, Array{finiArr, finiArrSz, "DT_FINI_ARRAY"}}) {
    const uint64_t arr = a.addr, sz = a.bytes;
    const char *what = a.what;
    if (!sz) continue;
    if (sz % 8 || !fileOffset(arr, sz, off)) return fail(std::string(what) + " lies outside the segments");
    for (uint64_t i = 0; i < sz / 8; ++i) {
      uint64_t fn = 0;
      readAt(d_, n_, off + 8 * i, fn);
      if (fn != 0 && fn != ~uint64_t(0) && !inSomeLoad(fn)) return fail(std::string(what) + " points outside the segments");
    }
  }
  return true;
}

bool Checker::sections() {
  shdrs_.clear();
  for (uint16_t i = 0; i < eh_.e_shnum; ++i) {
    Elf64_Shdr s{};
    readAt(d_, n_, eh_.e_shoff + uint64_t(i) * sizeof(Elf64_Shdr), s);
    uint64_t end;
    if (s.sh_type != SHT_NOBITS && s.sh_type != SHT_NULL &&
        (__builtin_add_overflow(s.sh_offset, s.sh_size, &end) || end > n_))
      return fail("section " + std::to_string(i) + " lies outside the file");
    shdrs_.push_back(s);
  }
  return true;
}

} // namespace

bool checkElfSharedObject(const uint8_t *data, size_t size, std::string &reason) {
  Checker c(data, size, reason);
  return c.header() && c.programHeaders() && c.dynamic() && c.sections();
}

bool findElfSection(const uint8_t *data, size_t size, std::string_view name, std::string_view &contents,
                    std::string &reason) {
  Checker c(data, size, reason);
  if (!c.header() || !c.sections()) return false;
  if (c.shdrs().empty()) {
    reason = "the native-code object has no section headers";
    return false;
  }
  const Elf64_Shdr &names = c.shdrs()[c.ehdr().e_shstrndx];
  if (names.sh_type != SHT_STRTAB) return c.fail("the section-name table is not a string table");
  for (const Elf64_Shdr &s : c.shdrs()) {
    if (s.sh_name >= names.sh_size) return c.fail("a section name lies outside the section-name table");
    const char *n = reinterpret_cast<const char *>(data + names.sh_offset + s.sh_name);
    size_t max = names.sh_size - s.sh_name;
    size_t len = strnlen(n, max);
    if (len == max) return c.fail("a section name is not NUL-terminated");
    if (std::string_view(n, len) != name) continue;
    if (s.sh_type == SHT_NOBITS) break;
    contents = std::string_view(reinterpret_cast<const char *>(data + s.sh_offset), s.sh_size);
    return true;
  }
  reason = "the native-code object has no " + std::string(name) + " section";
  return false;
}

} // namespace nimble::vm
