//===- Npy.cpp - Reading and writing numpy .npy files ---------------------===//
//
// The header dict is parsed by a small recursive-descent reader over the
// grammar numpy writes (and a little more: either quote style, optional
// trailing commas, any spacing):
//
//   header := '{' (entry (',' entry)* ','?)? '}'
//   entry  := string ':' value
//   value  := string | 'True' | 'False' | tuple
//   tuple  := '(' (int (',' int)* ','?)? ')'
//
// Exactly the keys descr, fortran_order and shape, each once (numpy's own
// rule). See Npy.h for the supported dtypes and the checks.
//
//===----------------------------------------------------------------------===//

#include "vm/io/Npy.h"

#include "ir/Limits.h"

#include "ir/ShapeFns.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

namespace nimble::vm {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

struct Descr {
  std::string_view text;
  DType dtype;
};
constexpr Descr kDescrs[] = {
    {"<f4", DType::F32}, {"<f2", DType::F16}, {"<f8", DType::F64}, {"|b1", DType::I1},
    {"|i1", DType::I8},  {"<i4", DType::I32}, {"<i8", DType::I64}, {"<b1", DType::I1},
    {"<i1", DType::I8},  {"<i2", DType::I16}, {"|u1", DType::U8},  {"<u2", DType::U16},
    {"<u4", DType::U32}, {"<u8", DType::U64}, {"<u1", DType::U8},
};

/// A parsed header.
struct Header {
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
};

/// The dict reader. Every failure sets `error` and returns false.
class HeaderParser {
public:
  explicit HeaderParser(std::string_view s) : s_(s) {}
  std::string error;

  bool parse(Header &h) {
    bool seenDescr = false, seenFortran = false, seenShape = false;
    skipSpace();
    if (!expect('{')) return false;
    for (;;) {
      skipSpace();
      if (peek() == '}') break;
      std::string key;
      if (!parseString(key)) return false;
      skipSpace();
      if (!expect(':')) return false;
      skipSpace();
      if (key == "descr") {
        if (seenDescr) return fail("key 'descr' appears twice");
        seenDescr = true;
        if (peek() == '[') return fail("structured dtypes are not supported");
        if (!parseString(h.descr)) return false;
      } else if (key == "fortran_order") {
        if (seenFortran) return fail("key 'fortran_order' appears twice");
        seenFortran = true;
        if (!parseBool(h.fortran)) return false;
      } else if (key == "shape") {
        if (seenShape) return fail("key 'shape' appears twice");
        seenShape = true;
        if (!parseTuple(h.shape)) return false;
      } else {
        return fail("unexpected key '" + key + "' (expected descr, fortran_order, shape)");
      }
      skipSpace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') return fail("expected ',' or '}'");
    }
    ++pos_; // '}'
    skipSpace();
    if (pos_ != s_.size()) return fail("unexpected text after the header dict");
    if (!seenDescr) return fail("missing key 'descr'");
    if (!seenFortran) return fail("missing key 'fortran_order'");
    if (!seenShape) return fail("missing key 'shape'");
    return true;
  }

private:
  std::string_view s_;
  size_t pos_ = 0;

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' ||
                                s_[pos_] == '\r'))
      ++pos_;
  }
  bool fail(std::string msg) {
    error = "malformed .npy header at offset " + std::to_string(pos_) + ": " + msg;
    return false;
  }
  bool expect(char c) {
    if (peek() != c) return fail(std::string("expected '") + c + "'");
    ++pos_;
    return true;
  }
  bool parseString(std::string &out) {
    char q = peek();
    if (q != '\'' && q != '"') return fail("expected a quoted string");
    size_t end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) return fail("unterminated string");
    out = std::string(s_.substr(pos_ + 1, end - pos_ - 1));
    if (out.find('\\') != std::string::npos) return fail("escapes in strings are not supported");
    pos_ = end + 1;
    return true;
  }
  bool parseBool(bool &out) {
    if (s_.substr(pos_, 4) == "True") {
      out = true;
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      out = false;
      pos_ += 5;
      return true;
    }
    return fail("expected True or False");
  }
  bool parseTuple(std::vector<int64_t> &out) {
    if (!expect('(')) return false;
    bool comma = false;
    for (;;) {
      skipSpace();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') return fail("expected a non-negative dimension");
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        int digit = peek() - '0';
        if (v > (std::numeric_limits<int64_t>::max() - digit) / 10)
          return fail("dimension too large");
        v = v * 10 + digit;
        ++pos_;
      }
      if (peek() == 'L') ++pos_; // Python 2 long suffix
      out.push_back(v);
      skipSpace();
      if (peek() == ',') {
        ++pos_;
        comma = true;
        continue;
      }
      if (peek() != ')') return fail("expected ',' or ')' in the shape");
    }
    // A one-element tuple needs its comma in Python: "(3)" is the int 3.
    if (out.size() == 1 && !comma) return fail("a 1-D shape is written '(n,)', not '(n)'");
    ++pos_;
    return true;
  }
};

uint32_t readLE(const uint8_t *p, size_t bytes) {
  uint32_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

std::string shapeTuple(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

} // namespace

std::optional<std::string_view> npyDescr(DType t) {
  if (t == DType::BF16) return std::nullopt;
  for (const Descr &d : kDescrs)
    if (d.dtype == t) return d.text;
  return std::nullopt;
}

std::optional<DType> dtypeFromNpyDescr(std::string_view descr) {
  for (const Descr &d : kDescrs)
    if (d.text == descr) return d.dtype;
  return std::nullopt;
}

namespace {

/// What the header of a .npy file says: the tensor and where its bytes are.
struct NpyLayout {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  size_t dataOffset = 0, dataBytes = 0;
};

/// Parses and checks the header of a .npy file of `size` bytes of which the
/// first `avail` are at `data` (at least the whole header, or all of a
/// shorter file).
Status parseNpyHeader(const uint8_t *data, size_t avail, size_t size, NpyLayout &layout) {
  if (avail < std::min(size, kMagicLen + 2) || size < kMagicLen + 2 ||
      std::memcmp(data, kMagic, kMagicLen) != 0)
    return Status::error("not a .npy file (missing the \\x93NUMPY magic)");
  unsigned major = data[6], minor = data[7];
  if (major < 1 || major > 3 || minor != 0)
    return Status::error("unsupported .npy format version " + std::to_string(major) + "." +
                         std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  size_t lenBytes = major == 1 ? 2 : 4;
  size_t start = kMagicLen + 2 + lenBytes;
  if (size < start)
    return Status::error("truncated .npy file: " + std::to_string(size) +
                         " bytes end inside the header length");
  size_t headerLen = readLE(data + 8, lenBytes);
  if (headerLen > size - start)
    return Status::error("truncated .npy file: the header declares " +
                         std::to_string(headerLen) + " bytes but only " +
                         std::to_string(size - start) + " follow");
  if (avail < start + headerLen)
    return Status::error("malformed .npy header: " + std::to_string(headerLen) +
                         " bytes long (at most " + std::to_string(avail - start) + ")");
  std::string_view text(reinterpret_cast<const char *>(data + start), headerLen);
  for (char c : text)
    if (static_cast<unsigned char>(c) >= 0x80 || (c < 0x20 && c != '\n' && c != '\t' && c != '\r'))
      return Status::error("malformed .npy header: it contains a non-ASCII or control byte");

  Header h;
  HeaderParser p(text);
  if (!p.parse(h)) return Status::error(p.error);
  std::optional<DType> dtype = dtypeFromNpyDescr(h.descr);
  if (!dtype) {
    if (!h.descr.empty() && h.descr[0] == '>')
      return Status::error("big-endian .npy data ('" + h.descr +
                           "') is not supported; save it little-endian");
    return Status::error("unsupported .npy dtype '" + h.descr +
                         "' (supported: <f4 <f2 <f8 |b1 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8)");
  }
  if (h.fortran)
    return Status::error(".npy file is in Fortran order (column-major), which is not "
                         "supported; save a C-ordered array (numpy.ascontiguousarray)");

  // Element count and byte size without overflow, bounded by the data present.
  size_t dataBytes = size - start - headerLen;
  size_t es = dtypeSize(*dtype);
  uint64_t count = 1;
  bool empty = false;
  uint64_t nonzeroProduct = 1; // must fit int64 even when another dim is 0
  for (int64_t d : h.shape) {
    empty |= d == 0;
    if (d == 0) continue;
    if (static_cast<uint64_t>(d) > static_cast<uint64_t>(INT64_MAX) / nonzeroProduct)
      return Status::error(".npy shape " + shapeTuple(h.shape) + " is too large");
    nonzeroProduct *= static_cast<uint64_t>(d);
  }
  if (!empty)
    for (int64_t d : h.shape) {
      if (static_cast<uint64_t>(d) > dataBytes / es / count)
        return Status::error(".npy data too short: shape " + shapeTuple(h.shape) + " of '" +
                             h.descr + "' needs more than the " + std::to_string(dataBytes) +
                             " bytes present");
      count *= static_cast<uint64_t>(d);
    }
  else
    count = 0;
  if (count * es != dataBytes)
    return Status::error(".npy data size mismatch: shape " + shapeTuple(h.shape) + " of '" +
                         h.descr + "' needs " + std::to_string(count * es) + " bytes, found " +
                         std::to_string(dataBytes));
  if (h.shape.size() > limits::kMaxRank)
    return Status::error(".npy shape " + shapeTuple(h.shape) + " has more than " +
                         std::to_string(limits::kMaxRank) + " dimensions (the rank limit)");
  layout.dtype = *dtype;
  layout.shape = std::move(h.shape);
  layout.dataOffset = start + headerLen;
  layout.dataBytes = dataBytes;
  return Status::success();
}

/// A fresh tensor for `layout`, or the out-of-memory error.
Status allocateNpy(const NpyLayout &layout, TensorRef &t) {
  t = makeTensor(layout.dtype, layout.shape);
  if (!t)
    return Status::error("out of memory allocating " + std::to_string(layout.dataBytes) +
                         " bytes for a .npy array");
  return Status::success();
}

void normalizeBools(const NpyLayout &layout, Tensor &t) {
  if (layout.dtype == DType::I1)
    for (size_t i = 0; i < layout.dataBytes; ++i) t.rawData()[i] = t.rawData()[i] != 0;
}

} // namespace

Status parseNpy(const uint8_t *data, size_t size, TensorRef &out) {
  NpyLayout layout;
  TensorRef t;
  if (Status s = parseNpyHeader(data, size, size, layout); !s.ok()) return s;
  if (Status s = allocateNpy(layout, t); !s.ok()) return s;
  if (layout.dataBytes) std::memcpy(t->rawData(), data + layout.dataOffset, layout.dataBytes);
  normalizeBools(layout, *t);
  out = std::move(t);
  return Status::success();
}

Status readNpy(const std::string &path, TensorRef &out) {
  // The header first, then the data straight into the tensor: a big input
  // is held once, not once as file bytes and again as a tensor.
  std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return Status::error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(::fileno(f.get()), &st) != 0 || !S_ISREG(st.st_mode)) {
    // Not a regular file (a pipe): read it whole, as before.
    std::vector<uint8_t> bytes;
    uint8_t buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f.get())) > 0) bytes.insert(bytes.end(), buf, buf + n);
    if (std::ferror(f.get())) return Status::error(path + ": read error");
    Status s = parseNpy(bytes.data(), bytes.size(), out);
    if (!s.ok()) return Status::error(path + ": " + s.message);
    return s;
  }
  size_t size = static_cast<size_t>(st.st_size);
  // Headers are short (numpy pads them to 64 bytes, and shapes are at most
  // 64 dims): 64 KiB holds any valid one.
  std::vector<uint8_t> head(std::min<size_t>(size, 1 << 16));
  if (std::fread(head.data(), 1, head.size(), f.get()) != head.size())
    return Status::error(path + ": read error");
  NpyLayout layout;
  TensorRef t;
  if (Status s = parseNpyHeader(head.data(), head.size(), size, layout); !s.ok())
    return Status::error(path + ": " + s.message);
  if (Status s = allocateNpy(layout, t); !s.ok()) return Status::error(path + ": " + s.message);
  if (std::fseek(f.get(), static_cast<long>(layout.dataOffset), SEEK_SET) != 0 ||
      std::fread(t->rawData(), 1, layout.dataBytes, f.get()) != layout.dataBytes)
    return Status::error(path + ": read error");
  normalizeBools(layout, *t);
  out = std::move(t);
  return Status::success();
}

Status npyHeader(const Tensor &t, std::string &out) {
  std::optional<std::string_view> descr = npyDescr(t.dtype());
  if (!descr)
    return Status::error("cannot write " + t.typeString() +
                         " as .npy: numpy has no bf16 dtype (cast to f32 first)");
  if (t.device() != Device::CPU)
    return Status::error("cannot write " + t.typeString() + " as .npy: not in CPU memory");
  std::string dict = "{'descr': '" + std::string(*descr) + "', 'fortran_order': False, 'shape': " +
                     shapeTuple(t.shape()) + ", }";
  // Pad with spaces so that magic + version + length + header + '\n' is a
  // multiple of 64.
  size_t prefix = kMagicLen + 2 + 2;
  unsigned major = 1;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  if (total - prefix > 0xffff) {
    major = 2;
    prefix += 2;
    total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  }
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  size_t lenBytes = major == 1 ? 2 : 4;
  size_t len = dict.size();
  out.assign(kMagic, kMagicLen);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < lenBytes; ++i) out += static_cast<char>(len >> (8 * i));
  out += dict;
  return Status::success();
}

Status serializeNpy(const Tensor &t, std::vector<uint8_t> &out) {
  std::string header;
  if (Status s = npyHeader(t, header); !s.ok()) return s;
  out.assign(header.begin(), header.end());
  if (t.numBytes()) out.insert(out.end(), t.rawData(), t.rawData() + t.numBytes());
  return Status::success();
}

Status writeNpy(const std::string &path, const Tensor &t) {
  std::vector<uint8_t> bytes;
  Status s = serializeNpy(t, bytes);
  if (!s.ok()) return Status::error(path + ": " + s.message);
  std::unique_ptr<FILE, int (*)(FILE *)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!f) return Status::error(path + ": cannot open for writing: " + std::strerror(errno));
  if (std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size())
    return Status::error(path + ": write error");
  if (std::fclose(f.release()) != 0) return Status::error(path + ": write error on close");
  return Status::success();
}

} // namespace nimble::vm
