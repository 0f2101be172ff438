//===- OpTableTest.cpp - The op table, element types, attributes ----------===//
//
// Every row of Ops.def is checked for internal consistency (mnemonic round
// trip, attribute schemas, operand counts, shape modes and flags as the Nimble
// paper §3.2 labels them), then the element-type helpers, the f16/bf16
// conversions against hand-computed bit patterns, DenseValue storage and Attr
// equality/hashing.
//
//===----------------------------------------------------------------------===//

#include "ir/OpTable.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>

namespace nimble {
namespace {

std::vector<OpCode> allOpCodes() {
  std::vector<OpCode> codes;
  for (int i = 0; i < kNumOpCodes; ++i) codes.push_back(static_cast<OpCode>(i));
  return codes;
}

//===-- Rows of Ops.def ---------------------------------------------------===//

TEST(OpTable, EveryRowRoundTripsThroughItsMnemonic) {
  std::set<std::string_view> seen;
  for (OpCode c : allOpCodes()) {
    const OpInfo &info = opInfo(c);
    EXPECT_EQ(info.code, c) << "row " << static_cast<int>(c) << " is out of place";
    EXPECT_FALSE(info.mnemonic.empty());
    EXPECT_TRUE(seen.insert(info.mnemonic).second) << "duplicate mnemonic " << info.mnemonic;
    std::optional<OpCode> back = lookupOpCode(info.mnemonic);
    ASSERT_TRUE(back.has_value()) << info.mnemonic;
    EXPECT_EQ(*back, c) << info.mnemonic;
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kNumOpCodes));
}

TEST(OpTable, UnknownMnemonicsAreNotFound) {
  EXPECT_FALSE(lookupOpCode("").has_value());
  EXPECT_FALSE(lookupOpCode("Add").has_value()); // case-sensitive
  EXPECT_FALSE(lookupOpCode("add ").has_value());
  EXPECT_FALSE(lookupOpCode("frobnicate").has_value());
  EXPECT_EQ(lookupOpCode("add"), OpCode::Add);
  EXPECT_EQ(lookupOpCode("batch_matmul"), OpCode::BatchMatMul);
  EXPECT_EQ(lookupOpCode("invoke_shape_func"), OpCode::InvokeShapeFunc);
}

TEST(OpTable, AttributeSchemasAreWellFormed) {
  for (OpCode c : allOpCodes()) {
    const OpInfo &info = opInfo(c);
    std::set<std::string> names;
    for (size_t i = 0; i < info.attrs.size(); ++i) {
      const AttrSpec &s = info.attrs[i];
      EXPECT_FALSE(s.name.empty()) << info.mnemonic;
      EXPECT_TRUE(names.insert(s.name).second)
          << info.mnemonic << ": attribute " << s.name << " is declared twice";
      EXPECT_EQ(info.attrIndex(s.name), static_cast<int>(i)) << info.mnemonic << "." << s.name;
      EXPECT_NE(attrKindName(s.kind), "?");
      if (s.defaultValue) {
        EXPECT_FALSE(s.defaultValue->isNull()) << info.mnemonic << "." << s.name;
        EXPECT_EQ(s.defaultValue->kind(), s.kind)
            << info.mnemonic << "." << s.name << ": default of the wrong kind";
      }
    }
    EXPECT_EQ(info.attrIndex("no_such_attribute"), -1) << info.mnemonic;
  }
}

// A few schemas spelled out, so a parse of "name:kind=default" that drops or
// garbles a default is caught.
TEST(OpTable, SelectedAttributeDefaults) {
  auto spec = [](OpCode c, const char *name) -> const AttrSpec & {
    const OpInfo &info = opInfo(c);
    int i = info.attrIndex(name);
    EXPECT_GE(i, 0) << info.mnemonic << "." << name;
    return info.attrs.at(static_cast<size_t>(i));
  };
  const AttrSpec &ta = spec(OpCode::MatMul, "transpose_a");
  ASSERT_TRUE(ta.defaultValue);
  EXPECT_EQ(ta.kind, AttrKind::Bool);
  EXPECT_FALSE(ta.defaultValue->getBool());

  const AttrSpec &axes = spec(OpCode::Sum, "axes");
  ASSERT_TRUE(axes.defaultValue);
  EXPECT_TRUE(axes.defaultValue->getInts().empty());

  const AttrSpec &argAxis = spec(OpCode::ArgMax, "axis");
  ASSERT_TRUE(argAxis.defaultValue);
  EXPECT_EQ(argAxis.defaultValue->getInt(), -1);

  const AttrSpec &eps = spec(OpCode::LayerNorm, "eps");
  ASSERT_TRUE(eps.defaultValue);
  EXPECT_EQ(eps.kind, AttrKind::Float);
  EXPECT_DOUBLE_EQ(eps.defaultValue->getFloat(), 1e-5);

  const AttrSpec &align = spec(OpCode::AllocStorage, "alignment");
  ASSERT_TRUE(align.defaultValue);
  EXPECT_EQ(align.defaultValue->getInt(), 64);
  const AttrSpec &device = spec(OpCode::AllocStorage, "device");
  ASSERT_TRUE(device.defaultValue);
  EXPECT_EQ(device.kind, AttrKind::Str);
  EXPECT_EQ(device.defaultValue->getStr(), "cpu"); // quotes stripped

  const AttrSpec &zdt = spec(OpCode::Zeros, "dtype");
  ASSERT_TRUE(zdt.defaultValue);
  EXPECT_EQ(zdt.defaultValue->getDType(), DType::F32);

  // Required attributes have no default.
  EXPECT_FALSE(spec(OpCode::Split, "sections").defaultValue);
  EXPECT_EQ(spec(OpCode::Split, "axis").defaultValue->getInt(), 0);
  EXPECT_FALSE(spec(OpCode::Reshape, "shape").defaultValue);
  EXPECT_FALSE(spec(OpCode::Cast, "dtype").defaultValue);
  EXPECT_FALSE(spec(OpCode::Call, "callee").defaultValue);
  EXPECT_EQ(spec(OpCode::Call, "callee").kind, AttrKind::Sym);
  EXPECT_EQ(spec(OpCode::Constant, "value").kind, AttrKind::Dense);
  EXPECT_TRUE(opInfo(OpCode::Add).attrs.empty());
}

TEST(OpTable, OperandAndResultCountsAreConsistent) {
  for (OpCode c : allOpCodes()) {
    const OpInfo &info = opInfo(c);
    EXPECT_GE(info.minOperands, 0) << info.mnemonic;
    EXPECT_TRUE(info.maxOperands == -1 || info.minOperands <= info.maxOperands)
        << info.mnemonic << ": min " << info.minOperands << " > max " << info.maxOperands;
    EXPECT_GE(info.numResults, -1) << info.mnemonic;
  }
  EXPECT_EQ(opInfo(OpCode::Concat).maxOperands, -1);
  EXPECT_EQ(opInfo(OpCode::Select).minOperands, 3);
  EXPECT_EQ(opInfo(OpCode::Split).numResults, -1);
  EXPECT_EQ(opInfo(OpCode::AllocTensor).minOperands, 2);
  EXPECT_EQ(opInfo(OpCode::AllocTensor).maxOperands, 3);
}

TEST(OpTable, StructuralOpsHaveNoShapeFunction) {
  for (OpCode c : allOpCodes()) {
    const OpInfo &info = opInfo(c);
    bool structural = info.relation == Relation::Structural;
    EXPECT_EQ(structural, info.shapeMode == ShapeMode::None)
        << info.mnemonic << ": Structural ops and only they have ShapeMode None";
    EXPECT_NE(shapeModeName(info.shapeMode), "?");
    EXPECT_NE(fusionPatternName(info.fusion), "?");
  }
}

// Nimble paper §3.2: dyn_reshape, zeros, full and arange need input values to
// size their output (and tile, pad, one_hot, top_k and resize, whose counts
// are run-time tensors);
// unique, nonzero and non_max_suppression only know an upper bound.
TEST(OpTable, ShapeModesFollowThePaper) {
  std::set<OpCode> dataDependent, upperBound;
  for (OpCode c : allOpCodes()) {
    if (opInfo(c).shapeMode == ShapeMode::DataDependent) dataDependent.insert(c);
    if (opInfo(c).shapeMode == ShapeMode::UpperBound) upperBound.insert(c);
  }
  EXPECT_EQ(dataDependent,
            (std::set<OpCode>{OpCode::DynReshape, OpCode::Zeros, OpCode::Full, OpCode::Arange,
                               OpCode::StorageSize, OpCode::Tile, OpCode::Pad,
                               OpCode::OneHot, OpCode::TopK, OpCode::Resize}));
  EXPECT_EQ(upperBound, (std::set<OpCode>{OpCode::Unique, OpCode::Nonzero, OpCode::NonMaxSuppression}));
  EXPECT_EQ(shapeModeName(ShapeMode::DataDependent), "data-dependent");
  EXPECT_EQ(shapeModeName(ShapeMode::UpperBound), "upper-bound");
}

TEST(OpTable, TerminatorsAreExactlyBranchesMatchRetAndUnreachable) {
  std::set<OpCode> terms;
  for (OpCode c : allOpCodes()) {
    const OpInfo &info = opInfo(c);
    if (!info.hasFlag(opflags::Terminator)) continue;
    terms.insert(c);
    EXPECT_EQ(info.numResults, 0) << info.mnemonic << ": terminators produce no values";
  }
  EXPECT_EQ(terms,
            (std::set<OpCode>{OpCode::Br, OpCode::CondBr, OpCode::Match, OpCode::Ret, OpCode::Unreachable}));
}

TEST(OpTable, EffectFlagsAreExclusive) {
  using namespace opflags;
  for (OpCode c : allOpCodes()) {
    const OpInfo &info = opInfo(c);
    int kinds = info.hasFlag(Pure) + info.hasFlag(Alloc) + info.hasFlag(Effect);
    if (info.hasFlag(Terminator)) EXPECT_EQ(kinds, 0) << info.mnemonic;
    else EXPECT_EQ(kinds, 1) << info.mnemonic << ": exactly one of Pure, Alloc, Effect";
    if (info.hasFlag(Commutative)) {
      EXPECT_EQ(info.minOperands, 2) << info.mnemonic;
      EXPECT_EQ(info.maxOperands, 2) << info.mnemonic;
    }
  }
  EXPECT_TRUE(opInfo(OpCode::Add).hasFlag(Commutative));
  EXPECT_FALSE(opInfo(OpCode::Sub).hasFlag(Commutative));
  EXPECT_TRUE(opInfo(OpCode::AllocStorage).hasFlag(Alloc));
  EXPECT_TRUE(opInfo(OpCode::Call).hasFlag(Effect));
}

//===-- Element types -----------------------------------------------------===//

TEST(DTypes, NamesSizesAndParsing) {
  struct Row {
    DType t;
    const char *name;
    size_t size;
  };
  const Row rows[] = {{DType::F32, "f32", 4}, {DType::F16, "f16", 2}, {DType::BF16, "bf16", 2},
                      {DType::F64, "f64", 8}, {DType::I1, "i1", 1},   {DType::I8, "i8", 1},
                      {DType::I32, "i32", 4}, {DType::I64, "i64", 8}, {DType::I16, "i16", 2},
                      {DType::U8, "u8", 1},   {DType::U16, "u16", 2}, {DType::U32, "u32", 4},
                      {DType::U64, "u64", 8}};
  static_assert(sizeof(rows) / sizeof(rows[0]) == kNumDTypes);
  for (const Row &r : rows) {
    EXPECT_EQ(dtypeName(r.t), r.name);
    EXPECT_EQ(dtypeSize(r.t), r.size) << r.name;
    EXPECT_EQ(parseDType(r.name), r.t) << r.name;
    // Exactly one class per type.
    EXPECT_EQ(isFloat(r.t) + isInteger(r.t) + isBool(r.t), 1) << r.name;
  }
  EXPECT_FALSE(parseDType("").has_value());
  EXPECT_FALSE(parseDType("F32").has_value());
  EXPECT_FALSE(parseDType("f33").has_value());
  EXPECT_FALSE(parseDType("f32 ").has_value());
  EXPECT_FALSE(parseDType("i4").has_value());
  EXPECT_FALSE(parseDType("u1").has_value());
  EXPECT_TRUE(isFloat(DType::BF16));
  EXPECT_TRUE(isInteger(DType::I8));
  EXPECT_FALSE(isInteger(DType::I1));
  for (DType u : {DType::U8, DType::U16, DType::U32, DType::U64}) {
    EXPECT_TRUE(isInteger(u) && isUnsigned(u) && !isSignedInt(u)) << dtypeName(u);
  }
  for (DType i : {DType::I8, DType::I16, DType::I32, DType::I64}) {
    EXPECT_TRUE(isInteger(i) && isSignedInt(i) && !isUnsigned(i)) << dtypeName(i);
  }
  EXPECT_FALSE(isUnsigned(DType::I1));
}

TEST(DTypes, RulesAdmitTheRightTypes) {
  for (int i = 0; i < kNumDTypes; ++i) {
    DType t = static_cast<DType>(i);
    std::string_view n = dtypeName(t);
    bool fl = n[0] == 'f' || n[0] == 'b';
    bool bl = n == "i1";
    EXPECT_TRUE(dtypeAllowed(DTypeRule::Any, t)) << n;
    EXPECT_EQ(dtypeAllowed(DTypeRule::Float, t), fl) << n;
    EXPECT_EQ(dtypeAllowed(DTypeRule::Numeric, t), !bl) << n;
    EXPECT_EQ(dtypeAllowed(DTypeRule::Int, t), !fl && !bl) << n;
    EXPECT_EQ(dtypeAllowed(DTypeRule::Bool, t), bl) << n;
  }
}

//===-- f16 / bf16 --------------------------------------------------------===//

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

TEST(Half, EveryNonNaNHalfRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    float f = halfToFloat(static_cast<uint16_t>(h));
    if (nan) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      continue;
    }
    ASSERT_EQ(floatToHalf(f), h) << std::hex << "half 0x" << h << " -> " << f;
  }
}

TEST(Half, HandCheckedValues) {
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(0.5f), 0x3800);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);     // largest finite half
  EXPECT_EQ(floatToHalf(0.1f), 0x2e66);         // 0.0999755859375
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14)), 0x0400); // smallest normal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001); // smallest subnormal
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfToFloat(0x03ff), std::ldexp(1023.0f, -24)); // largest subnormal
  EXPECT_EQ(halfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(halfToFloat(0xc000), -2.0f);
}

TEST(Half, RoundsToNearestEven) {
  // Between 1 (0x3c00) and 1 + 2^-10 (0x3c01): the half-way point goes to the
  // even mantissa, anything above it up.
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11) - std::ldexp(1.0f, -20)), 0x3c00);
  // 1 + 3*2^-11 lies half-way between 0x3c01 and 0x3c02: even is 0x3c02.
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Subnormals: 2^-25 is half of the smallest subnormal (ties to 0),
  // 3*2^-25 is 1.5 units (ties to 2 units).
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(floatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -26)), 0x0000);
  // Largest subnormal + half a unit rounds up into the smallest normal.
  EXPECT_EQ(floatToHalf(std::ldexp(1023.5f, -24)), 0x0400);
  // Overflow: 65520 is half-way between 65504 and 65536 (= inf); even wins.
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(floatToHalf(-1e10f), 0xfc00);
}

TEST(Half, InfinityAndNaN) {
  float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToHalf(inf), 0x7c00);
  EXPECT_EQ(floatToHalf(-inf), 0xfc00);
  EXPECT_EQ(halfToFloat(0x7c00), inf);
  EXPECT_EQ(halfToFloat(0xfc00), -inf);
  uint16_t qnan = floatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(qnan & 0x7c00, 0x7c00);
  EXPECT_NE(qnan & 0x3ff, 0) << "NaN must not become infinity";
  // A signalling NaN whose payload sits only in the low bits stays a NaN.
  uint16_t snan = floatToHalf(std::bit_cast<float>(0x7f800001u));
  EXPECT_EQ(snan & 0x7c00, 0x7c00);
  EXPECT_NE(snan & 0x3ff, 0);
  EXPECT_EQ(floatToHalf(std::bit_cast<float>(0xffc00000u)) & 0x8000, 0x8000); // sign kept
  EXPECT_TRUE(std::isnan(halfToFloat(0x7e00)));
}

TEST(BFloat16, EveryNonNaNValueRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
    float f = bf16ToFloat(static_cast<uint16_t>(h));
    EXPECT_EQ(bits(f), h << 16); // exact widening
    if (nan) continue;
    ASSERT_EQ(floatToBF16(f), h) << std::hex << h;
  }
}

TEST(BFloat16, RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(floatToBF16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBF16(-2.0f), 0xc000);
  // 1 + 2^-8 is half-way between 0x3f80 and 0x3f81: even (0x3f80).
  EXPECT_EQ(floatToBF16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(floatToBF16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  // 1 + 3*2^-8 is half-way between 0x3f81 and 0x3f82: even (0x3f82).
  EXPECT_EQ(floatToBF16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  // The largest float rounds to infinity.
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(floatToBF16(-std::numeric_limits<float>::infinity()), 0xff80);
  // A NaN whose payload is only in the low 16 bits must not round to inf.
  uint16_t n = floatToBF16(std::bit_cast<float>(0x7f800001u));
  EXPECT_EQ(n & 0x7f80, 0x7f80);
  EXPECT_NE(n & 0x7f, 0);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBF16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(floatToBF16(std::bit_cast<float>(0xffc00000u)) & 0x8000, 0x8000);
}

//===-- DenseValue --------------------------------------------------------===//

DenseValue make(DType t, std::vector<int64_t> shape) {
  DenseValue v;
  v.dtype = t;
  v.shape = std::move(shape);
  return v;
}

TEST(DenseValue, NumElements) {
  EXPECT_EQ(make(DType::F32, {}).numElements(), 1);
  EXPECT_EQ(make(DType::F32, {2, 3, 4}).numElements(), 24);
  EXPECT_EQ(make(DType::F32, {0, 4}).numElements(), 0);
}

TEST(DenseValue, FloatTypesStoreTheirOwnWidth) {
  DenseValue f32 = make(DType::F32, {2});
  f32.appendDouble(1.5);
  f32.appendDouble(-0.1);
  ASSERT_EQ(f32.bytes.size(), 8u);
  EXPECT_EQ(f32.getDouble(0), 1.5);
  EXPECT_EQ(f32.getDouble(1), static_cast<double>(-0.1f)); // rounded to float
  float raw;
  std::memcpy(&raw, f32.bytes.data() + 4, 4);
  EXPECT_EQ(raw, -0.1f); // little-endian raw bytes of the element type

  DenseValue f64 = make(DType::F64, {1});
  f64.appendDouble(-0.1);
  ASSERT_EQ(f64.bytes.size(), 8u);
  EXPECT_EQ(f64.getDouble(0), -0.1);

  DenseValue f16 = make(DType::F16, {2});
  f16.appendDouble(0.1);
  f16.appendInt(3); // an integer into a float literal
  ASSERT_EQ(f16.bytes.size(), 4u);
  EXPECT_EQ(f16.bytes[0] | (f16.bytes[1] << 8), 0x2e66);
  EXPECT_EQ(f16.getDouble(0), 0.0999755859375);
  EXPECT_EQ(f16.getDouble(1), 3.0);
  EXPECT_EQ(f16.getInt(1), 3);

  DenseValue bf = make(DType::BF16, {1});
  bf.appendDouble(1.0);
  ASSERT_EQ(bf.bytes.size(), 2u);
  EXPECT_EQ(bf.bytes[0] | (bf.bytes[1] << 8), 0x3f80);
  EXPECT_EQ(bf.getDouble(0), 1.0);

  // getInt on floats truncates toward zero.
  DenseValue t = make(DType::F32, {2});
  t.appendDouble(2.75);
  t.appendDouble(-2.75);
  EXPECT_EQ(t.getInt(0), 2);
  EXPECT_EQ(t.getInt(1), -2);
}

TEST(DenseValue, IntegerTypesStoreTheirOwnWidth) {
  DenseValue i8 = make(DType::I8, {3});
  i8.appendInt(-128);
  i8.appendInt(127);
  i8.appendDouble(-3.9); // truncated
  ASSERT_EQ(i8.bytes.size(), 3u);
  EXPECT_EQ(i8.getInt(0), -128);
  EXPECT_EQ(i8.getInt(1), 127);
  EXPECT_EQ(i8.getInt(2), -3);
  EXPECT_EQ(i8.getDouble(0), -128.0);

  DenseValue i32 = make(DType::I32, {1});
  i32.appendInt(-2000000000);
  ASSERT_EQ(i32.bytes.size(), 4u);
  EXPECT_EQ(i32.getInt(0), -2000000000);

  DenseValue i64 = make(DType::I64, {1});
  i64.appendInt(int64_t(1) << 40);
  ASSERT_EQ(i64.bytes.size(), 8u);
  EXPECT_EQ(i64.getInt(0), int64_t(1) << 40);
  EXPECT_EQ(i64.bytes[5], 1); // little-endian: bit 40 is in byte 5

  DenseValue i1 = make(DType::I1, {3});
  i1.appendInt(0);
  i1.appendInt(5); // any non-zero is true
  i1.appendDouble(1.0);
  ASSERT_EQ(i1.bytes.size(), 3u);
  EXPECT_EQ(i1.getInt(0), 0);
  EXPECT_EQ(i1.getInt(1), 1);
  EXPECT_EQ(i1.bytes[1], 1);
  EXPECT_EQ(i1.getInt(2), 1);
}

TEST(DenseValue, SplatStandsForEveryElement) {
  DenseValue s = make(DType::I32, {2, 3});
  s.splat = true;
  s.appendInt(7);
  EXPECT_EQ(s.numElements(), 6);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(s.getInt(i), 7) << i;
  EXPECT_EQ(s.getDouble(5), 7.0);

  DenseValue full = make(DType::I32, {2, 3});
  for (int i = 0; i < 6; ++i) full.appendInt(7);
  EXPECT_FALSE(s == full); // same meaning, different representation
  DenseValue s2 = make(DType::I32, {2, 3});
  s2.splat = true;
  s2.appendInt(7);
  EXPECT_TRUE(s == s2);
  s2.shape = {3, 2};
  EXPECT_FALSE(s == s2);
}

// Doubles an int64 cannot hold (onnx-fuzzer reached -inf -> int64 through the
// importer's scalar constants): saturated, NaN as 0, never the undefined
// conversion (UBSan's float-cast-overflow would stop this test otherwise).
TEST(DenseValue, DoublesBeyondInt64Saturate) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(saturatingInt64(-2.7), -2);
  EXPECT_EQ(saturatingInt64(2.7), 2);
  EXPECT_EQ(saturatingInt64(std::numeric_limits<double>::infinity()), kMax);
  EXPECT_EQ(saturatingInt64(-std::numeric_limits<double>::infinity()), kMin);
  EXPECT_EQ(saturatingInt64(std::numeric_limits<double>::quiet_NaN()), 0);
  EXPECT_EQ(saturatingInt64(0x1p63), kMax);
  EXPECT_EQ(saturatingInt64(-0x1p63), kMin); // exactly representable
  EXPECT_EQ(saturatingInt64(1e300), kMax);

  DenseValue i64 = make(DType::I64, {3});
  i64.appendDouble(-std::numeric_limits<double>::infinity());
  i64.appendDouble(std::numeric_limits<double>::quiet_NaN());
  i64.appendDouble(1e19);
  EXPECT_EQ(i64.getInt(0), kMin);
  EXPECT_EQ(i64.getInt(1), 0);
  EXPECT_EQ(i64.getInt(2), kMax);

  DenseValue f32 = make(DType::F32, {2});
  f32.appendDouble(std::numeric_limits<double>::infinity());
  f32.appendDouble(-1e30);
  EXPECT_EQ(f32.getInt(0), kMax);
  EXPECT_EQ(f32.getInt(1), kMin);
}

//===-- Attr --------------------------------------------------------------===//

void expectEqualWithHash(const Attr &a, const Attr &b) {
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a != b);
  EXPECT_EQ(a.hash(), b.hash());
}

TEST(Attr, EqualAttributesHashEqual) {
  expectEqualWithHash(Attr::getBool(true), Attr::getBool(true));
  expectEqualWithHash(Attr::getInt(-5), Attr::getInt(-5));
  expectEqualWithHash(Attr::getFloat(2.5), Attr::getFloat(2.5));
  expectEqualWithHash(Attr::getInts({1, 2, 3}), Attr::getInts({1, 2, 3}));
  expectEqualWithHash(Attr::getInts({}), Attr::getInts({}));
  expectEqualWithHash(Attr::getDType(DType::BF16), Attr::getDType(DType::BF16));
  expectEqualWithHash(Attr::getStr("cpu"), Attr::getStr("cpu"));
  expectEqualWithHash(Attr::getSym("f"), Attr::getSym("f"));
  DenseValue d = make(DType::F32, {2});
  d.appendDouble(1);
  d.appendDouble(2);
  // Different shared_ptrs, same content.
  expectEqualWithHash(Attr::getDense(d), Attr::getDense(d));
  // The null attribute (a required attribute not yet set) is equal to itself
  // and must hash like any other value.
  expectEqualWithHash(Attr(), Attr());
  EXPECT_TRUE(Attr().isNull());
  EXPECT_FALSE(Attr::getBool(false).isNull());
}

TEST(Attr, DifferentValuesAndKindsAreUnequal) {
  EXPECT_NE(Attr::getBool(true), Attr::getBool(false));
  EXPECT_NE(Attr::getInt(1), Attr::getInt(2));
  EXPECT_NE(Attr::getInt(1), Attr::getBool(true));
  EXPECT_NE(Attr::getInt(1), Attr::getFloat(1.0));
  EXPECT_NE(Attr::getInts({1, 2}), Attr::getInts({2, 1}));
  EXPECT_NE(Attr::getInts({1}), Attr::getInts({1, 1}));
  EXPECT_NE(Attr::getStr("f"), Attr::getSym("f")); // same payload, different kind
  EXPECT_NE(Attr::getDType(DType::F32), Attr::getDType(DType::F16));
  EXPECT_NE(Attr(), Attr::getBool(false));
  DenseValue a = make(DType::F32, {1}), b = make(DType::F32, {1});
  a.appendDouble(1);
  b.appendDouble(2);
  EXPECT_NE(Attr::getDense(a), Attr::getDense(b));
  DenseValue c = make(DType::I32, {1});
  c.appendInt(1);
  EXPECT_NE(Attr::getDense(a), Attr::getDense(c));
}

TEST(Attr, FloatsCompareBitwise) {
  // Documented: bitwise, so -0.0 and 0.0 are distinct (CSE must not merge
  // them) and a NaN equals itself.
  EXPECT_NE(Attr::getFloat(0.0), Attr::getFloat(-0.0));
  double nan = std::numeric_limits<double>::quiet_NaN();
  expectEqualWithHash(Attr::getFloat(nan), Attr::getFloat(nan));
  EXPECT_NE(Attr::getFloat(nan), Attr::getFloat(-nan));
}

TEST(Attr, KindNames) {
  EXPECT_EQ(attrKindName(AttrKind::Bool), "bool");
  EXPECT_EQ(attrKindName(AttrKind::Ints), "ints");
  EXPECT_EQ(attrKindName(AttrKind::DType), "dtype");
  EXPECT_EQ(attrKindName(AttrKind::Sym), "sym");
  EXPECT_EQ(attrKindName(AttrKind::Dense), "dense");
  EXPECT_EQ(Attr::getInts({4}).kind(), AttrKind::Ints);
  EXPECT_EQ(Attr::getSym("x").getStr(), "x");
}

} // namespace
} // namespace nimble
