//===- OpTable.h - Element types, attribute values and the op table -*- C++ -*-===//
//
// The dependency-free core that the compiler (ir/, passes/, codegen/) and the
// runtime (vm/) share: element types, plain attribute values, dense literals,
// and the operation table generated from Ops.def. It holds no IR classes and no
// compiler logic, which is what lets the runtime link it (ARCHITECTURE.md:
// "parser, printer, verifier, inference, fusion and the runtime all read that
// one table") without linking the compiler.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_IR_OPTABLE_H
#define NIMBLE_IR_OPTABLE_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nimble {

//===-- Element types ------------------------------------------------------===//

/// Element types. The values are dtype codes in `.nbc` files (docs/VM.md):
/// new types go at the end. i16 and the unsigned u8..u64 wrap around like
/// numpy's and ONNX's integers (docs/LangRef.md, "Element types").
enum class DType : uint8_t { F32, F16, BF16, F64, I1, I8, I32, I64, I16, U8, U16, U32, U64 };
inline constexpr int kNumDTypes = 13;

std::string_view dtypeName(DType t);
std::optional<DType> parseDType(std::string_view s);
size_t dtypeSize(DType t);
inline bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}
inline bool isUnsigned(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}
inline bool isSignedInt(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
}
/// Signed or unsigned integers (not i1).
inline bool isInteger(DType t) { return isSignedInt(t) || isUnsigned(t); }
inline bool isBool(DType t) { return t == DType::I1; }

/// A dimension that is unknown until run time: the paper's `Any`, written `?`.
inline constexpr int64_t kDynamic = -1;

/// Half-precision conversions (round to nearest even), used for literals.
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);
uint16_t floatToBF16(float f);
float bf16ToFloat(uint16_t h);

//===-- Dense literal data -------------------------------------------------===//

/// The payload of a `constant`: element type, shape, and the elements as raw
/// little-endian bytes of that type (i1 as one byte per element). A splat holds
/// `v` truncated toward zero to an int64, saturated at int64's range (the
/// infinities included) and NaN as 0: C++'s own conversion is undefined for
/// all of those.
int64_t saturatingInt64(double v);

/// one element that stands for every element of the shape.
struct DenseValue {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  bool splat = false;

  int64_t numElements() const;
  /// Element `i` (modulo splat) converted to double / int64 (a u64 above
  /// INT64_MAX comes back as its bits, negative; appendInt takes it so).
  double getDouble(int64_t i) const;
  int64_t getInt(int64_t i) const;
  /// Appends one element given as double (floats) or int64 (integers, bool).
  /// A double appended to an integer type goes through saturatingInt64 and
  /// then appendInt (which wraps to a narrower type).
  void appendDouble(double v);
  void appendInt(int64_t v);
  bool operator==(const DenseValue &o) const;
};

//===-- Attribute values ---------------------------------------------------===//

enum class AttrKind : uint8_t { Bool, Int, Float, Ints, DType, Str, Sym, Dense };

/// A plain attribute value. `Sym` holds a symbol name without the `@`.
///
/// 16 bytes (issue 23: ops carry one per schema attribute, and a 48-byte
/// variant made attributes a third of an op's memory): the kind, which
/// payload is set, and the payload itself. Strings and integer lists are
/// interned for the life of the process (equal values share one copy, as
/// MLIR's uniqued attributes do: copying an attribute copies a pointer and
/// comparing two compares pointers); a dense literal is reference counted
/// (it may be a model's weights, so it is freed with its last user).
class Attr {
public:
  Attr() : i_(0) {}
  Attr(const Attr &o) : kind_(o.kind_), rep_(o.rep_), i_(o.i_) { retain(); }
  Attr(Attr &&o) noexcept : kind_(o.kind_), rep_(o.rep_), i_(o.i_) { o.rep_ = Rep::Null; }
  Attr &operator=(const Attr &o) {
    if (this != &o) {
      o.retain();
      release();
      kind_ = o.kind_;
      rep_ = o.rep_;
      i_ = o.i_;
    }
    return *this;
  }
  Attr &operator=(Attr &&o) noexcept {
    if (this != &o) {
      release();
      kind_ = o.kind_;
      rep_ = o.rep_;
      i_ = o.i_;
      o.rep_ = Rep::Null;
    }
    return *this;
  }
  ~Attr() { release(); }

  static Attr getBool(bool b) {
    Attr a(AttrKind::Bool, Rep::Bool);
    a.b_ = b;
    return a;
  }
  static Attr getInt(int64_t i) {
    Attr a(AttrKind::Int, Rep::Int);
    a.i_ = i;
    return a;
  }
  static Attr getFloat(double f) {
    Attr a(AttrKind::Float, Rep::Float);
    a.f_ = f;
    return a;
  }
  static Attr getInts(const std::vector<int64_t> &v) {
    Attr a(AttrKind::Ints, Rep::Ints);
    a.ints_ = internInts(v);
    return a;
  }
  static Attr getDType(DType t) {
    Attr a(AttrKind::DType, Rep::DType);
    a.dtype_ = t;
    return a;
  }
  static Attr getStr(std::string_view s) {
    Attr a(AttrKind::Str, Rep::Str);
    a.str_ = internString(s);
    return a;
  }
  static Attr getSym(std::string_view s) {
    Attr a(AttrKind::Sym, Rep::Str);
    a.str_ = internString(s);
    return a;
  }
  static Attr getDense(DenseValue d);

  AttrKind kind() const { return kind_; }
  bool isNull() const { return rep_ == Rep::Null; }
  bool getBool() const { return check(Rep::Bool), b_; }
  int64_t getInt() const { return check(Rep::Int), i_; }
  double getFloat() const { return check(Rep::Float), f_; }
  const std::vector<int64_t> &getInts() const { return check(Rep::Ints), *ints_; }
  DType getDType() const { return check(Rep::DType), dtype_; }
  const std::string &getStr() const { return check(Rep::Str), *str_; }
  /// The interned copy of a string or symbol attribute's text: equal texts
  /// give the same pointer, so it keys pointer tables (Module's symbol
  /// index: a callee resolves with one probe, no hash of its name).
  const std::string *internedStr() const { return check(Rep::Str), str_; }
  /// The interned copy of `s` (what internedStr returns for an attribute of
  /// that text).
  static const std::string *intern(std::string_view s) { return internString(s); }
  const DenseValue &getDense() const;
  bool operator==(const Attr &o) const;
  bool operator!=(const Attr &o) const { return !(*this == o); }
  /// Hash for CSE (of the contents, so that it does not vary between runs).
  size_t hash() const;

private:
  enum class Rep : uint8_t { Null, Bool, Int, Float, Ints, DType, Str, Dense };
  struct DenseBox; // a DenseValue and its reference count (OpTable.cpp)
  Attr(AttrKind k, Rep r) : kind_(k), rep_(r), i_(0) {}
  /// A wrong getter is a bug in the caller (the variant this replaced threw).
  void check(Rep r) const {
    if (rep_ != r) wrongKind();
  }
  [[noreturn]] static void wrongKind();
  static const std::vector<int64_t> *internInts(const std::vector<int64_t> &v);
  static const std::string *internString(std::string_view s);
  void retain() const {
    if (rep_ == Rep::Dense) addRef(dense_);
  }
  void release() {
    if (rep_ == Rep::Dense) dropRef(dense_);
    rep_ = Rep::Null;
  }
  static void addRef(DenseBox *d);
  static void dropRef(DenseBox *d);

  AttrKind kind_ = AttrKind::Bool;
  Rep rep_ = Rep::Null;
  union {
    bool b_;
    int64_t i_;
    double f_;
    DType dtype_;
    const std::vector<int64_t> *ints_;
    const std::string *str_;
    DenseBox *dense_;
  };
};

std::string_view attrKindName(AttrKind k);

//===-- The operation table ------------------------------------------------===//

enum class OpCode : uint16_t {
#define NIMBLE_OP(Id, ...) Id,
#include "ir/Ops.def"
};
inline constexpr int kNumOpCodes = 0
#define NIMBLE_OP(...) +1
#include "ir/Ops.def"
    ;

enum class Relation : uint8_t {
  Unary, Broadcast, Compare, Select, Cast, MatMul, BatchMatMul, Reduce, ArgReduce,
  LayerNorm, Reshape, DynReshape, Transpose, Concat, Split, Slice, DynamicSlice,
  DynamicUpdateSlice, Take, ExpandDims, Squeeze, BroadcastTo, Constant, Zeros, Full, Arange, Unique,
  Nonzero, ShapeOf, Dim, StorageSize, Conv, Pool, CumSum, Tile, Pad,
  GatherND, ScatterElements, ScatterND, OneHot, Attention, TopK, ConvTranspose, NonMaxSuppression,
  Resize, GridSample, Structural,
};
enum class ShapeMode : uint8_t { None, DataIndependent, DataDependent, UpperBound };
enum class FusionPattern : uint8_t {
  ElemWise, Broadcast, Injective, Reduction, OutputFusable, Opaque,
};
enum class DTypeRule : uint8_t { Any, Float, Numeric, Int, Bool };

namespace opflags {
enum : unsigned {
  Pure = 1u << 0,        // no side effect: CSE may merge, DCE may delete
  Alloc = 1u << 1,       // allocates: DCE may delete, CSE must not merge
  Effect = 1u << 2,      // observable effect (or unknown): keep and keep order
  Terminator = 1u << 3,  // ends a block
  Commutative = 1u << 4, // operands may be swapped
};
/// Each op's flags (the last column of Ops.def), indexed by OpCode: the
/// checks every walk makes (is it a terminator, is it pure) read this
/// without a call into the op table.
inline constexpr unsigned kFlagsOf[] = {
#define NIMBLE_OP(Id, Mnemonic, MinOps, MaxOps, NumResults, Attrs, Rel, Mode, Fusion, DTypes, \
                  Flags)                                                                     \
  Flags,
#include "ir/Ops.def"
};
static_assert(sizeof(kFlagsOf) / sizeof(kFlagsOf[0]) == kNumOpCodes, "one entry per op");
} // namespace opflags

/// opInfo(code).hasFlag(f), inline.
inline bool opHasFlag(OpCode code, unsigned f) {
  return (opflags::kFlagsOf[static_cast<size_t>(code)] & f) != 0;
}

struct AttrSpec {
  std::string name;
  AttrKind kind;
  std::optional<Attr> defaultValue; // none: the attribute is required
};

struct OpInfo {
  OpCode code;
  std::string_view mnemonic;
  int minOperands, maxOperands; // max -1: variadic
  int numResults;               // -1: decided by the relation / syntax
  std::vector<AttrSpec> attrs;
  Relation relation;
  ShapeMode shapeMode;
  FusionPattern fusion;
  DTypeRule dtypes;
  unsigned flags;

  bool hasFlag(unsigned f) const { return (flags & f) != 0; }
  /// Index of attribute `name` in `attrs`, or -1.
  int attrIndex(std::string_view name) const;
};

const OpInfo &opInfo(OpCode code);
std::optional<OpCode> lookupOpCode(std::string_view mnemonic);
std::string_view shapeModeName(ShapeMode m);
std::string_view fusionPatternName(FusionPattern p);
bool dtypeAllowed(DTypeRule rule, DType t);
std::string_view dtypeRuleDescription(DTypeRule rule);

} // namespace nimble

#endif // NIMBLE_IR_OPTABLE_H
