//===- TensorTextTest.cpp - Tensor literals: parsing, printing, round trips ==//

#include "vm/io/TensorText.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace nimble;
using namespace nimble::vm;

namespace {

TensorRef parseOk(const std::string &text) {
  TensorRef t;
  Status s = parseTensorLiteral(text, t);
  EXPECT_TRUE(s.ok()) << text << ": " << s.message;
  return t;
}

std::string parseError(const std::string &text) {
  TensorRef t;
  Status s = parseTensorLiteral(text, t);
  return s.ok() ? "<ok>" : s.message;
}

TEST(TensorText, ParsesShapesAndValues) {
  TensorRef t = parseOk("2x3xf32=1 2 3 4 5 6");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t->data<float>()[4], 5.0f);
  t = parseOk("2x3xf32=\"1 2 3 4 5 6\""); // quotes that survived a shell
  EXPECT_EQ(t->data<float>()[5], 6.0f);
  t = parseOk("3xi64=-5, +7 9223372036854775807");
  EXPECT_EQ(t->data<int64_t>()[0], -5);
  EXPECT_EQ(t->data<int64_t>()[1], 7);
  EXPECT_EQ(t->data<int64_t>()[2], INT64_MAX);
  t = parseOk("f64=2.5e-3");
  EXPECT_EQ(t->rank(), 0);
  EXPECT_EQ(t->data<double>()[0], 2.5e-3);
  t = parseOk("4xi1=true false 1 0");
  EXPECT_EQ(std::vector<uint8_t>(t->data<uint8_t>(), t->data<uint8_t>() + 4),
            (std::vector<uint8_t>{1, 0, 1, 0}));
  t = parseOk("3xf16=0.1 -inf nan");
  EXPECT_EQ(t->data<uint16_t>()[0], floatToHalf(0.1f));
  EXPECT_TRUE(std::isinf(halfToFloat(t->data<uint16_t>()[1])));
  EXPECT_TRUE(std::isnan(halfToFloat(t->data<uint16_t>()[2])));
  t = parseOk("0x3xi8=");
  EXPECT_EQ(t->numElements(), 0);
  t = parseOk("2x2xbf16=[[1 2][3 4]]"); // the printer's form parses back
  EXPECT_EQ(bf16ToFloat(t->data<uint16_t>()[3]), 4.0f);
}

TEST(TensorText, SingleValueIsASplat) {
  TensorRef t = parseOk("2x3xi32=7");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t->data<int32_t>()[i], 7);
  t = parseOk("2xi1=true");
  EXPECT_EQ(t->data<uint8_t>()[1], 1);
}

TEST(TensorText, Errors) {
  std::string rank65; // "1x1x...1x": one dimension past the rank limit
  for (int i = 0; i < 65; ++i) rank65 += "1x";
  struct Case {
    std::string text, want;
  } cases[] = {
      {"2x3xf32=1 2 3 4 5", "expected 6 values for 2x3xf32 (or one value to fill it), got 5"},
      {"2x3xf32=1 2 3 4 5 6 7", "got 7"},
      {"2x3xf32=", "got 0"},
      {"2x3xq32=1", "unknown element type 'q32'"},
      {"2x3=1", "unknown element type '3'"},
      {"2x-3xf32=1", "bad dimension '-3'"},
      {"2x?xf32=1", "bad dimension '?'"},
      {"xf32=1", "bad dimension ''"},
      {"2xf32", "expected TYPE=VALUES"},
      {"2xf32=1 abc", "'abc' is not a number"},
      {"2xf32=1 1.5.5", "'1.5.5' is not a number"},
      {"2xi32=1 2.5", "'2.5' is not an integer"},
      {"i8=128", "'128' is not in the range of i8"},
      {"i32=-2147483649", "'-2147483649' is not in the range of i32"},
      {"i64=9223372036854775808", "'9223372036854775808' is not an integer"},
      {"i16=32768", "'32768' is not in the range of i16"},
      {"u8=256", "'256' is not in the range of u8"},
      {"u8=-1", "'-1' is not in the range of u8"},
      {"u16=65536", "'65536' is not in the range of u16"},
      {"u32=4294967296", "'4294967296' is not in the range of u32"},
      {"u64=-1", "'-1' is not in the range of u64"},
      {"u64=18446744073709551616", "'18446744073709551616' is not an integer"},
      {"u64=1.5", "'1.5' is not an integer"},
      {"2xi1=true maybe", "'maybe' is not a boolean (true, false, 1, 0)"},
      {"2xi1=true 2", "'2' is not a boolean"},
      {"1099511627776x1099511627776xf32=0",
       "the shape holds more than 281474976710656 bytes (2^48, the limit)"},
      {"70368744177665xf32=0", "the shape holds more than 281474976710656 bytes (2^48, the limit)"},
      {rank65 + "f32=1", "more than 64 dimensions (the rank limit)"},
  };
  for (const Case &c : cases) {
    std::string got = parseError(c.text);
    EXPECT_NE(got.find(c.want), std::string::npos) << c.text << " -> " << got;
    EXPECT_EQ(got.rfind("invalid tensor literal '", 0), 0u) << got;
  }
}

TEST(TensorText, Printing) {
  EXPECT_EQ(formatTensor(*parseOk("2x3xf32=1 2 3 4 5 6")), "2x3xf32=[[1 2 3][4 5 6]]");
  EXPECT_EQ(formatTensor(*parseOk("3xf32=0.1 -2.5e-08 1e+20")), "3xf32=[0.1 -2.5e-08 1e+20]");
  EXPECT_EQ(formatTensor(*parseOk("f32=0.333333343")), "f32=0.33333334");
  EXPECT_EQ(formatTensor(*parseOk("3xf32=100 123456789 -0")), "3xf32=[100 123456792 -0]");
  EXPECT_EQ(formatTensor(*parseOk("2xf32=1e-5 1.5e16")), "2xf32=[0.00001 1.5e+16]");
  EXPECT_EQ(formatTensor(*parseOk("f64=0.1")), "f64=0.1");
  EXPECT_EQ(formatTensor(*parseOk("f64=0.30000000000000004")), "f64=0.30000000000000004");
  EXPECT_EQ(formatTensor(*parseOk("2xf16=0.1 65504")), "2xf16=[0.1 65504]");
  EXPECT_EQ(formatTensor(*parseOk("bf16=0.1")), "bf16=0.1");
  EXPECT_EQ(formatTensor(*parseOk("3xf32=nan inf -inf")), "3xf32=[nan inf -inf]");
  EXPECT_EQ(formatTensor(*parseOk("2xi1=1 0")), "2xi1=[true false]");
  EXPECT_EQ(formatTensor(*parseOk("2x1x2xi8=-128 127 0 -1")), "2x1x2xi8=[[[-128 127]][[0 -1]]]");
  EXPECT_EQ(formatTensor(*parseOk("0x3xf32=")), "0x3xf32=[]");
  EXPECT_EQ(formatTensor(*parseOk("2x0xf32=")), "2x0xf32=[[][]]");
  EXPECT_EQ(formatTensor(*parseOk("1x2x0xi64=")), "1x2x0xi64=[[[][]]]");
  EXPECT_EQ(formatTensor(*parseOk("i64=-9")), "i64=-9");
  EXPECT_EQ(formatTensor(*parseOk("3xu8=0 255 +7")), "3xu8=[0 255 7]");
  EXPECT_EQ(formatTensor(*parseOk("2xi16=-32768 32767")), "2xi16=[-32768 32767]");
  EXPECT_EQ(formatTensor(*parseOk("u64=18446744073709551615")), "u64=18446744073709551615");
  EXPECT_EQ(formatTensor(*parseOk("2xu32=4294967295 0")), "2xu32=[4294967295 0]");
}

TEST(TensorText, PrintThenParseIsIdentity) {
  std::mt19937 rng(7);
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I1, DType::I8,
                  DType::I32, DType::I64, DType::I16, DType::U8, DType::U16, DType::U32,
                  DType::U64}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {5}, {2, 3}, {2, 0}, {1, 2, 3}}) {
      TensorRef t = makeTensor(d, shape);
      uint8_t *p = t->rawData();
      for (size_t i = 0; i < t->numBytes(); ++i) p[i] = static_cast<uint8_t>(rng());
      size_t es = dtypeSize(d);
      for (int64_t i = 0; i < t->numElements(); ++i) {
        uint8_t *e = p + static_cast<size_t>(i) * es;
        if (d == DType::I1) *e &= 1;
        // Random bits may be NaNs, whose payloads text does not keep.
        if (d == DType::F32) { float f; std::memcpy(&f, e, 4); if (std::isnan(f)) std::memset(e, 0, 4); }
        if (d == DType::F64) { double f; std::memcpy(&f, e, 8); if (std::isnan(f)) std::memset(e, 0, 8); }
        if (d == DType::F16 && std::isnan(halfToFloat(*reinterpret_cast<uint16_t *>(e)))) std::memset(e, 0, 2);
        if (d == DType::BF16 && std::isnan(bf16ToFloat(*reinterpret_cast<uint16_t *>(e)))) std::memset(e, 0, 2);
      }
      std::string text = formatTensor(*t);
      TensorRef back = parseOk(text);
      ASSERT_TRUE(back) << text;
      EXPECT_EQ(back->dtype(), d);
      EXPECT_EQ(back->shape(), shape);
      EXPECT_EQ(std::memcmp(back->rawData(), p, t->numBytes()), 0) << text;
    }
  }
}

} // namespace
