//===- OpTable.cpp - Element types, attribute values and the op table ----===//

#include "ir/OpTable.h"

#include "ir/Limits.h"

#include <cassert>

#include <array>
#include <atomic>
#include <bit>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <unordered_set>

namespace nimble {

//===-- Element types ------------------------------------------------------===//

namespace {
constexpr std::array<std::string_view, kNumDTypes> kDTypeNames = {
    "f32", "f16", "bf16", "f64", "i1", "i8", "i32", "i64", "i16", "u8", "u16", "u32", "u64"};
constexpr std::array<size_t, kNumDTypes> kDTypeSizes = {4, 2, 2, 8, 1, 1, 4, 8, 2, 1, 2, 4, 8};
} // namespace

std::string_view dtypeName(DType t) { return kDTypeNames[static_cast<int>(t)]; }

std::optional<DType> parseDType(std::string_view s) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kDTypeNames[i] == s) return static_cast<DType>(i);
  return std::nullopt;
}

size_t dtypeSize(DType t) { return kDTypeSizes[static_cast<int>(t)]; }

uint16_t floatToHalf(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) // inf / nan
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else { // subnormal: renormalise
      int e = -1;
      do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(x);
}

uint16_t floatToBF16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float bf16ToFloat(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

//===-- DenseValue ---------------------------------------------------------===//

int64_t DenseValue::numElements() const {
  // Literals have types within the limits (ir/Limits.h), so this fits.
  int64_t n = 0;
  bool ok = limits::checkedNumElements(shape, n);
  assert(ok && "a dense value past the element limit");
  (void)ok;
  return n;
}

namespace {
template <class T> T load(const std::vector<uint8_t> &b, int64_t i) {
  T v;
  std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
  return v;
}
template <class T> void store(std::vector<uint8_t> &b, T v) {
  size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &v, sizeof(T));
}
} // namespace

double DenseValue::getDouble(int64_t i) const {
  if (splat) i = 0;
  switch (dtype) {
  case DType::F32: return load<float>(bytes, i);
  case DType::F64: return load<double>(bytes, i);
  case DType::F16: return halfToFloat(load<uint16_t>(bytes, i));
  case DType::BF16: return bf16ToFloat(load<uint16_t>(bytes, i));
  case DType::U64: return static_cast<double>(load<uint64_t>(bytes, i));
  default: return static_cast<double>(getInt(i));
  }
}

int64_t DenseValue::getInt(int64_t i) const {
  if (splat) i = 0;
  switch (dtype) {
  case DType::I1: return load<uint8_t>(bytes, i) != 0;
  case DType::I8: return load<int8_t>(bytes, i);
  case DType::I32: return load<int32_t>(bytes, i);
  case DType::I64: return load<int64_t>(bytes, i);
  case DType::I16: return load<int16_t>(bytes, i);
  case DType::U8: return load<uint8_t>(bytes, i);
  case DType::U16: return load<uint16_t>(bytes, i);
  case DType::U32: return load<uint32_t>(bytes, i);
  case DType::U64: return static_cast<int64_t>(load<uint64_t>(bytes, i)); // the bits
  default: return saturatingInt64(getDouble(i));
  }
}

int64_t saturatingInt64(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 0x1p63) return std::numeric_limits<int64_t>::max();
  if (v < -0x1p63) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

void DenseValue::appendDouble(double v) {
  switch (dtype) {
  case DType::F32: store<float>(bytes, static_cast<float>(v)); break;
  case DType::F64: store<double>(bytes, v); break;
  case DType::F16: store<uint16_t>(bytes, floatToHalf(static_cast<float>(v))); break;
  case DType::BF16: store<uint16_t>(bytes, floatToBF16(static_cast<float>(v))); break;
  case DType::U64:
    // Above INT64_MAX the signed detour would be undefined.
    if (v >= 9223372036854775808.0 && v < 18446744073709551616.0)
      store<uint64_t>(bytes, static_cast<uint64_t>(v));
    else appendInt(saturatingInt64(v));
    break;
  default: appendInt(saturatingInt64(v)); break;
  }
}

void DenseValue::appendInt(int64_t v) {
  switch (dtype) {
  case DType::I1: store<uint8_t>(bytes, v != 0); break;
  case DType::I8: store<int8_t>(bytes, static_cast<int8_t>(v)); break;
  case DType::I32: store<int32_t>(bytes, static_cast<int32_t>(v)); break;
  case DType::I64: store<int64_t>(bytes, v); break;
  case DType::I16: store<int16_t>(bytes, static_cast<int16_t>(v)); break;
  case DType::U8: store<uint8_t>(bytes, static_cast<uint8_t>(v)); break;
  case DType::U16: store<uint16_t>(bytes, static_cast<uint16_t>(v)); break;
  case DType::U32: store<uint32_t>(bytes, static_cast<uint32_t>(v)); break;
  case DType::U64: store<uint64_t>(bytes, static_cast<uint64_t>(v)); break;
  default: appendDouble(static_cast<double>(v)); break;
  }
}

bool DenseValue::operator==(const DenseValue &o) const {
  return dtype == o.dtype && shape == o.shape && splat == o.splat && bytes == o.bytes;
}

//===-- Attr ---------------------------------------------------------------===//

struct Attr::DenseBox {
  std::atomic<int64_t> refs{1};
  DenseValue value;
};

Attr Attr::getDense(DenseValue d) {
  Attr a(AttrKind::Dense, Rep::Dense);
  a.dense_ = new DenseBox;
  a.dense_->value = std::move(d);
  return a;
}

const DenseValue &Attr::getDense() const {
  check(Rep::Dense);
  return dense_->value;
}

void Attr::addRef(DenseBox *d) { d->refs.fetch_add(1, std::memory_order_relaxed); }

void Attr::dropRef(DenseBox *d) {
  if (d->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete d;
}

void Attr::wrongKind() {
  std::fprintf(stderr, "internal error: an attribute read as the wrong kind\n");
  std::abort();
}

namespace {

/// The process-wide pools of interned attribute payloads. Node-based sets:
/// an element never moves, so a pointer to it stays valid for the life of
/// the process (nothing is removed). Locked: the runtime may load modules
/// from several threads.
struct IntsHash {
  using is_transparent = void;
  size_t operator()(const std::vector<int64_t> &v) const {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ v.size();
    for (int64_t x : v) h = (h ^ static_cast<uint64_t>(x)) * 0xbf58476d1ce4e5b9ull, h ^= h >> 31;
    return static_cast<size_t>(h);
  }
};
struct StrHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
struct Pools {
  std::mutex mu;
  std::unordered_set<std::vector<int64_t>, IntsHash> ints;
  std::unordered_set<std::string, StrHash, std::equal_to<>> strings;
};
Pools &pools() {
  static Pools *p = new Pools; // never destroyed: attributes in static objects outlive any order
  return *p;
}

} // namespace

const std::vector<int64_t> *Attr::internInts(const std::vector<int64_t> &v) {
  Pools &p = pools();
  std::lock_guard<std::mutex> lock(p.mu);
  return &*p.ints.insert(v).first;
}

const std::string *Attr::internString(std::string_view s) {
  // Passes make the same few strings over and over (a callee name twice per
  // kernel call, "cpu" per storage): a direct-mapped cache per thread answers
  // those without the lock and without a probe of the whole pool. Entries
  // point into the pool, which never frees, so they never go stale.
  constexpr size_t kCacheSize = 1024;
  thread_local std::array<const std::string *, kCacheSize> cache{};
  const size_t h = StrHash()(s);
  const std::string *&slot = cache[h & (kCacheSize - 1)];
  if (slot && *slot == s) return slot;
  Pools &p = pools();
  std::lock_guard<std::mutex> lock(p.mu);
  auto it = p.strings.find(s);
  if (it == p.strings.end()) it = p.strings.emplace(s).first;
  slot = &*it;
  return slot;
}

bool Attr::operator==(const Attr &o) const {
  if (kind_ != o.kind_ || rep_ != o.rep_) return false;
  switch (rep_) {
  case Rep::Null: return true;
  case Rep::Bool: return b_ == o.b_;
  case Rep::Int: return i_ == o.i_;
  case Rep::Float: // bitwise, so that -0.0 and NaN payloads stay apart
    return std::bit_cast<uint64_t>(f_) == std::bit_cast<uint64_t>(o.f_);
  case Rep::DType: return dtype_ == o.dtype_;
  case Rep::Ints: return ints_ == o.ints_;  // interned
  case Rep::Str: return str_ == o.str_;     // interned
  case Rep::Dense: return dense_ == o.dense_ || dense_->value == o.dense_->value;
  }
  return false;
}

size_t Attr::hash() const {
  size_t h = std::hash<int>()(static_cast<int>(kind_));
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  if (isNull()) return h; // a required attribute not set yet: no payload to read
  switch (kind_) {
  case AttrKind::Bool: mix(getBool()); break;
  case AttrKind::Int: mix(std::hash<int64_t>()(getInt())); break;
  case AttrKind::Float: mix(std::bit_cast<uint64_t>(getFloat())); break;
  case AttrKind::Ints:
    for (int64_t v : getInts()) mix(std::hash<int64_t>()(v));
    break;
  case AttrKind::DType: mix(static_cast<size_t>(getDType())); break;
  case AttrKind::Str:
  case AttrKind::Sym: mix(std::hash<std::string>()(getStr())); break;
  case AttrKind::Dense: {
    const DenseValue &d = getDense();
    mix(static_cast<size_t>(d.dtype));
    for (int64_t v : d.shape) mix(std::hash<int64_t>()(v));
    mix(std::hash<std::string_view>()(std::string_view(
        reinterpret_cast<const char *>(d.bytes.data()), d.bytes.size())));
    break;
  }
  }
  return h;
}

std::string_view attrKindName(AttrKind k) {
  switch (k) {
  case AttrKind::Bool: return "bool";
  case AttrKind::Int: return "int";
  case AttrKind::Float: return "float";
  case AttrKind::Ints: return "ints";
  case AttrKind::DType: return "dtype";
  case AttrKind::Str: return "str";
  case AttrKind::Sym: return "sym";
  case AttrKind::Dense: return "dense";
  }
  return "?";
}

//===-- The op table -------------------------------------------------------===//

namespace {

std::optional<AttrKind> parseAttrKind(std::string_view s) {
  for (AttrKind k : {AttrKind::Bool, AttrKind::Int, AttrKind::Float, AttrKind::Ints,
                     AttrKind::DType, AttrKind::Str, AttrKind::Sym, AttrKind::Dense})
    if (attrKindName(k) == s) return k;
  return std::nullopt;
}

int64_t parseInt(std::string_view s) {
  int64_t v = 0;
  [[maybe_unused]] auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  assert(r.ec == std::errc() && "bad integer in Ops.def");
  return v;
}

// Parses the default of one attribute as written in Ops.def. The table is ours,
// so malformed entries are programming errors caught by the unit tests.
Attr parseDefault(AttrKind kind, std::string_view text) {
  switch (kind) {
  case AttrKind::Bool: return Attr::getBool(text == "true");
  case AttrKind::Int: return Attr::getInt(parseInt(text));
  case AttrKind::Float: {
    double v = 0;
    std::from_chars(text.data(), text.data() + text.size(), v);
    return Attr::getFloat(v);
  }
  case AttrKind::Ints: {
    std::vector<int64_t> vals;
    std::string_view body = text.substr(1, text.size() - 2);
    while (!body.empty()) {
      size_t comma = body.find(';');
      vals.push_back(parseInt(body.substr(0, comma)));
      body = comma == std::string_view::npos ? "" : body.substr(comma + 1);
    }
    return Attr::getInts(std::move(vals));
  }
  case AttrKind::DType: return Attr::getDType(*parseDType(text));
  case AttrKind::Str: return Attr::getStr(std::string(text.substr(1, text.size() - 2)));
  case AttrKind::Sym: return Attr::getSym(std::string(text));
  case AttrKind::Dense: break;
  }
  assert(false && "attribute kind has no textual default");
  return Attr();
}

// "name:kind[=default],..." -> specs. Lists in defaults use ';' inside [] so
// the top-level split on ',' stays trivial.
std::vector<AttrSpec> parseAttrSchema(std::string_view schema) {
  std::vector<AttrSpec> specs;
  while (!schema.empty()) {
    size_t comma = schema.find(',');
    std::string_view item = schema.substr(0, comma);
    schema = comma == std::string_view::npos ? "" : schema.substr(comma + 1);
    size_t colon = item.find(':');
    size_t eq = item.find('=');
    AttrSpec spec;
    spec.name = std::string(item.substr(0, colon));
    std::string_view kind = item.substr(colon + 1, eq == std::string_view::npos
                                                       ? std::string_view::npos
                                                       : eq - colon - 1);
    spec.kind = *parseAttrKind(kind);
    if (eq != std::string_view::npos)
      spec.defaultValue = parseDefault(spec.kind, item.substr(eq + 1));
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::vector<OpInfo> buildTable() {
  using namespace opflags;
  std::vector<OpInfo> table;
#define NIMBLE_OP(Id, Mnemonic, MinOps, MaxOps, NumResults, Attrs, Rel, Mode, Fusion,     \
                  DTypes, Flags)                                                            \
  table.push_back(OpInfo{OpCode::Id, Mnemonic, MinOps, MaxOps, NumResults,                  \
                         parseAttrSchema(Attrs), Relation::Rel, ShapeMode::Mode,            \
                         FusionPattern::Fusion, DTypeRule::DTypes, Flags});
#include "ir/Ops.def"
  return table;
}

const std::vector<OpInfo> &table() {
  static const std::vector<OpInfo> t = buildTable();
  return t;
}

} // namespace

int OpInfo::attrIndex(std::string_view name) const {
  // Names are a few bytes and ops have a few attributes: compared inline
  // (length, then bytes), not through memcmp; passes look attributes up by
  // name on every op they visit (issue 23).
  for (size_t i = 0; i < attrs.size(); ++i) {
    const std::string &n = attrs[i].name;
    if (n.size() != name.size()) continue;
    size_t k = 0;
    while (k < n.size() && n[k] == name[k]) ++k;
    if (k == n.size()) return static_cast<int>(i);
  }
  return -1;
}

const OpInfo &opInfo(OpCode code) { return table()[static_cast<size_t>(code)]; }

std::optional<OpCode> lookupOpCode(std::string_view mnemonic) {
  for (const OpInfo &info : table())
    if (info.mnemonic == mnemonic) return info.code;
  return std::nullopt;
}

std::string_view shapeModeName(ShapeMode m) {
  switch (m) {
  case ShapeMode::None: return "none";
  case ShapeMode::DataIndependent: return "data-independent";
  case ShapeMode::DataDependent: return "data-dependent";
  case ShapeMode::UpperBound: return "upper-bound";
  }
  return "?";
}

std::string_view fusionPatternName(FusionPattern p) {
  switch (p) {
  case FusionPattern::ElemWise: return "elementwise";
  case FusionPattern::Broadcast: return "broadcast";
  case FusionPattern::Injective: return "injective";
  case FusionPattern::Reduction: return "reduction";
  case FusionPattern::OutputFusable: return "output-fusable";
  case FusionPattern::Opaque: return "opaque";
  }
  return "?";
}

bool dtypeAllowed(DTypeRule rule, DType t) {
  switch (rule) {
  case DTypeRule::Any: return true;
  case DTypeRule::Float: return isFloat(t);
  case DTypeRule::Numeric: return !isBool(t);
  case DTypeRule::Int: return isInteger(t);
  case DTypeRule::Bool: return isBool(t);
  }
  return false;
}

std::string_view dtypeRuleDescription(DTypeRule rule) {
  switch (rule) {
  case DTypeRule::Any: return "any element type";
  case DTypeRule::Float: return "a floating-point element type (f16, bf16, f32, f64)";
  case DTypeRule::Numeric: return "a numeric element type (not i1)";
  case DTypeRule::Int: return "an integer element type (i8, i16, i32, i64, u8, u16, u32, u64)";
  case DTypeRule::Bool: return "element type i1";
  }
  return "?";
}

} // namespace nimble
