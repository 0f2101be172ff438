//===- NpyTest.cpp - .npy round trips, malformed headers, a small fuzzer --===//
//
// The interoperability with numpy itself (files numpy wrote, files numpy
// reads) is exercised by every case of the lit suite (Inputs/check_ops.py);
// here: the format rules, every error path, and a fuzzer that truncates and
// flips bytes of valid files, which must give errors, never crashes (run it
// under --config=asan).
//
//===----------------------------------------------------------------------===//

#include "vm/io/Npy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>

using namespace nimble;
using namespace nimble::vm;

namespace {

/// A .npy file with the given version and header text (padded like numpy).
std::vector<uint8_t> npyFile(const std::string &dict, const std::vector<uint8_t> &data,
                             int major = 1) {
  std::vector<uint8_t> f = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  size_t lenBytes = major == 1 ? 2 : 4;
  std::string h = dict;
  while ((8 + lenBytes + h.size() + 1) % 64) h += ' ';
  h += '\n';
  for (size_t i = 0; i < lenBytes; ++i) f.push_back(static_cast<uint8_t>(h.size() >> (8 * i)));
  f.insert(f.end(), h.begin(), h.end());
  f.insert(f.end(), data.begin(), data.end());
  return f;
}

std::vector<uint8_t> floats(std::initializer_list<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), std::data(v), b.size());
  return b;
}

Status parse(const std::vector<uint8_t> &f, TensorRef &t) { return parseNpy(f.data(), f.size(), t); }

std::string parseError(const std::vector<uint8_t> &f) {
  TensorRef t;
  Status s = parse(f, t);
  return s.ok() ? "<ok>" : s.message;
}

const char *kDict23 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

TEST(Npy, ReadsEveryVersion) {
  for (int major : {1, 2, 3}) {
    TensorRef t;
    Status s = parse(npyFile(kDict23, floats({1, 2, 3, 4, 5, 6}), major), t);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(t->dtype(), DType::F32);
    EXPECT_EQ(t->shape(), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(t->data<float>()[5], 6.0f);
  }
}

TEST(Npy, HeaderSpellings) {
  TensorRef t;
  // Double quotes, no trailing comma, keys in another order, a 1-D tuple, a
  // scalar, an empty array.
  ASSERT_TRUE(parse(npyFile(R"({"shape": (3,), "fortran_order": False, "descr": "<i8"})",
                            std::vector<uint8_t>(24, 0)), t).ok());
  EXPECT_EQ(t->dtype(), DType::I64);
  EXPECT_EQ(t->shape(), std::vector<int64_t>{3});
  ASSERT_TRUE(parse(npyFile("{'descr': '|b1', 'fortran_order': False, 'shape': (), }", {2}), t).ok());
  EXPECT_EQ(t->rank(), 0);
  EXPECT_EQ(t->data<uint8_t>()[0], 1); // booleans are normalised
  ASSERT_TRUE(parse(npyFile("{'descr': '<f2', 'fortran_order': False, 'shape': (0, 5), }", {}), t).ok());
  EXPECT_EQ(t->numElements(), 0);
  EXPECT_EQ(t->dtype(), DType::F16);
  // numpy's spellings of the unsigned types and int16 (u1 both ways).
  const std::pair<const char *, DType> more[] = {{"|u1", DType::U8},  {"<u1", DType::U8},
                                                 {"<u2", DType::U16}, {"<u4", DType::U32},
                                                 {"<u8", DType::U64}, {"<i2", DType::I16}};
  for (const auto &[descr, d] : more) {
    std::string h = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (2,), }";
    ASSERT_TRUE(parse(npyFile(h, std::vector<uint8_t>(2 * dtypeSize(d), 0)), t).ok()) << descr;
    EXPECT_EQ(t->dtype(), d) << descr;
  }
  EXPECT_EQ(npyDescr(DType::U8), "|u1"); // what numpy writes
  EXPECT_EQ(npyDescr(DType::U64), "<u8");
}

TEST(Npy, RoundTripsEveryDType) {
  for (DType d : {DType::F32, DType::F16, DType::F64, DType::I1, DType::I8, DType::I32, DType::I64,
                  DType::I16, DType::U8, DType::U16, DType::U32, DType::U64}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {0}, {3}, {2, 1, 4}}) {
      TensorRef t = makeTensor(d, shape);
      for (size_t i = 0; i < t->numBytes(); ++i)
        t->rawData()[i] = d == DType::I1 ? (i % 3 == 0) : static_cast<uint8_t>(i * 37 + 1);
      std::vector<uint8_t> bytes;
      ASSERT_TRUE(serializeNpy(*t, bytes).ok());
      size_t headerEnd = bytes.size() - t->numBytes();
      EXPECT_EQ(headerEnd % 64, 0u); // data aligned like numpy's
      EXPECT_EQ(bytes[headerEnd - 1], '\n');
      TensorRef back;
      Status s = parse(bytes, back);
      ASSERT_TRUE(s.ok()) << s.message;
      EXPECT_EQ(back->dtype(), d);
      EXPECT_EQ(back->shape(), shape);
      EXPECT_EQ(std::memcmp(back->rawData(), t->rawData(), t->numBytes()), 0);
    }
  }
}

TEST(Npy, Bf16HasNoNumpyDType) {
  std::vector<uint8_t> bytes;
  Status s = serializeNpy(*makeTensor(DType::BF16, {2}), bytes);
  EXPECT_NE(s.message.find("numpy has no bf16 dtype"), std::string::npos) << s.message;
  EXPECT_FALSE(npyDescr(DType::BF16));
}

TEST(Npy, FilesOnDisk) {
  const char *dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/npy_test.npy";
  TensorRef t = makeTensor(DType::I32, {2, 2});
  for (int i = 0; i < 4; ++i) t->data<int32_t>()[i] = -i;
  ASSERT_TRUE(writeNpy(path, *t).ok());
  TensorRef back;
  ASSERT_TRUE(readNpy(path, back).ok());
  EXPECT_EQ(back->data<int32_t>()[3], -3);
  Status s = readNpy(path + ".missing", back);
  EXPECT_NE(s.message.find("npy_test.npy.missing: cannot open"), std::string::npos) << s.message;
}

TEST(Npy, MalformedFilesHaveClearErrors) {
  std::vector<uint8_t> data = floats({1, 2, 3, 4, 5, 6});
  auto withDict = [&](const std::string &d) { return parseError(npyFile(d, data)); };
  struct Case {
    std::string got, want;
  } cases[] = {
      {parseError({'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0}), "not a .npy file"},
      {parseError({}), "not a .npy file"},
      {parseError(npyFile(kDict23, data, 4)), "unsupported .npy format version 4.0"},
      {withDict("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }"), "Fortran order"},
      {withDict("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }"), "big-endian"},
      {withDict("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }"), "unsupported .npy dtype '<c8'"},
      {withDict("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }"), "structured dtypes"},
      {withDict("{'descr': '<f4', 'shape': (2, 3), }"), "missing key 'fortran_order'"},
      {withDict("{'descr': '<f4', 'fortran_order': False, }"), "missing key 'shape'"},
      {withDict("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), "appears twice"},
      {withDict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}"), "unexpected key 'x'"},
      {withDict("{'descr': '<f4', 'fortran_order': False, 'shape': (6), }"), "'(n,)'"},
      {withDict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }"), "non-negative dimension"},
      {withDict("{'descr': '<f4', 'fortran_order': false, 'shape': (2, 3), }"), "expected True or False"},
      {withDict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x"), "after the header dict"},
      {withDict("{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3), }"), "expected ',' or '}'"},
      {withDict("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 3), }"), "too large"},
      {withDict("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4, 0), }"), "too large"},
      {withDict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }"), "needs more than the 24 bytes"},
      {withDict("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }"), "needs 20 bytes, found 24"},
      {withDict("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\xff"), "non-ASCII"},
  };
  for (const Case &c : cases) EXPECT_NE(c.got.find(c.want), std::string::npos) << c.got << " / want: " << c.want;
  // The header length runs past the end of the file.
  std::vector<uint8_t> f = npyFile(kDict23, data);
  f[8] = 0xff;
  f[9] = 0xff;
  EXPECT_NE(parseError(f).find("truncated .npy file: the header declares 65535 bytes"),
            std::string::npos);
}

TEST(Npy, FuzzTruncationsAndByteFlips) {
  std::vector<std::vector<uint8_t>> seeds = {
      npyFile(kDict23, floats({1, 2, 3, 4, 5, 6})),
      npyFile("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", {1, 0, 1}, 2),
      npyFile("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", std::vector<uint8_t>(8, 7), 3),
      npyFile("{'descr': '<f2', 'fortran_order': False, 'shape': (0, 2), }", {}),
  };
  std::mt19937 rng(1234);
  int parsedOk = 0, errors = 0;
  for (const std::vector<uint8_t> &seed : seeds) {
    TensorRef t;
    ASSERT_TRUE(parse(seed, t).ok());
    // Every proper prefix is an error (the data length is checked exactly).
    for (size_t n = 0; n < seed.size(); ++n) {
      // A fresh heap copy of exactly n bytes, so ASan sees any over-read.
      std::unique_ptr<uint8_t[]> buf(new uint8_t[n ? n : 1]);
      std::memcpy(buf.get(), seed.data(), n);
      EXPECT_FALSE(parseNpy(buf.get(), n, t).ok()) << "prefix of " << n << " bytes parsed";
    }
    // Single-byte changes at every position: they may parse or fail, never crash.
    for (size_t i = 0; i < seed.size(); ++i)
      for (uint8_t x : {0x01, 0x20, 0x80, 0xff}) {
        std::vector<uint8_t> f = seed;
        f[i] ^= x;
        std::unique_ptr<uint8_t[]> buf(new uint8_t[f.size()]);
        std::memcpy(buf.get(), f.data(), f.size());
        Status s = parseNpy(buf.get(), f.size(), t);
        (s.ok() ? parsedOk : errors)++;
        if (i < 8 && x != 0x01) {
          EXPECT_FALSE(s.ok()) << "flip in the magic/version at " << i;
        }
        if (!s.ok()) {
          EXPECT_FALSE(s.message.empty());
        }
      }
    // Random multi-byte damage and random lengths.
    for (int k = 0; k < 3000; ++k) {
      std::vector<uint8_t> f = seed;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int j = 0; j < flips; ++j) f[rng() % f.size()] = static_cast<uint8_t>(rng());
      f.resize(rng() % (f.size() + 8), 0x20);
      std::unique_ptr<uint8_t[]> buf(new uint8_t[f.size() + 1]);
      std::memcpy(buf.get(), f.data(), f.size());
      Status s = parseNpy(buf.get(), f.size(), t);
      (s.ok() ? parsedOk : errors)++;
    }
  }
  // Both outcomes occur (flips inside the data still parse).
  EXPECT_GT(parsedOk, 0);
  EXPECT_GT(errors, 0);
}

} // namespace
