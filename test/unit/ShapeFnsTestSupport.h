//===- ShapeFnsTestSupport.h - Shared by the shape_fns_test sources -*- C++ -*-===//
//
// Signatures, attribute and value builders, and the result checks that
// ShapeFnsTest.cpp, ShapeFnsOnnxOpsTest.cpp and ShapeFnsSamplingTest.cpp
// write their cases with. Each includes it inside its own anonymous
// namespace of nimble, so the helpers stay local to the test binary's
// translation units.
//
//===----------------------------------------------------------------------===//

#ifndef NIMBLE_TEST_UNIT_SHAPEFNSTESTSUPPORT_H
#define NIMBLE_TEST_UNIT_SHAPEFNSTESTSUPPORT_H

#include "ir/ShapeFns.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace nimble::shapefns_test {

inline constexpr int64_t Q = kDynamic;

inline TensorSig T(DType t, std::vector<int64_t> dims) { return {t, std::move(dims)}; }
inline TensorSig F(std::vector<int64_t> dims) { return T(DType::F32, std::move(dims)); }
inline TensorSig I64(std::vector<int64_t> dims) { return T(DType::I64, std::move(dims)); }
inline TensorSig B(std::vector<int64_t> dims) { return T(DType::I1, std::move(dims)); }

/// Runs `code` with its schema defaults, overriding the named attributes.
inline ShapeFnResult run(OpCode code, std::vector<TensorSig> ops,
                  std::map<std::string, Attr> attrs = {},
                  std::vector<const DenseValue *> values = {}) {
  const OpInfo &info = opInfo(code);
  std::vector<Attr> list;
  for (const AttrSpec &s : info.attrs) {
    auto it = attrs.find(s.name);
    if (it != attrs.end()) {
      list.push_back(it->second);
      attrs.erase(it);
    } else {
      list.push_back(s.defaultValue ? *s.defaultValue : Attr());
    }
  }
  EXPECT_TRUE(attrs.empty()) << info.mnemonic << " has no attribute " << attrs.begin()->first;
  return inferShapes(code, ops, list, values);
}

inline Attr ints(std::vector<int64_t> v) { return Attr::getInts(std::move(v)); }
inline Attr i(int64_t v) { return Attr::getInt(v); }

/// A 1-D or scalar integer value.
inline DenseValue val(DType t, std::vector<double> elems, bool scalar = false) {
  DenseValue v;
  v.dtype = t;
  if (!scalar) v.shape = {static_cast<int64_t>(elems.size())};
  for (double e : elems) {
    if (isFloat(t)) v.appendDouble(e);
    else v.appendInt(static_cast<int64_t>(e));
  }
  return v;
}

inline bool has(const std::string &s, const std::string &sub) { return s.find(sub) != std::string::npos; }

#define EXPECT_OK_SIG(r, ...)                                                                  \
  do {                                                                                         \
    ASSERT_TRUE((r).ok()) << (r).error;                                                        \
    ASSERT_EQ((r).results.size(), 1u);                                                         \
    EXPECT_EQ(formatSig((r).results[0]), formatSig(__VA_ARGS__));                             \
  } while (0)

#define EXPECT_ERROR(r, text, operand)                                                         \
  do {                                                                                         \
    EXPECT_FALSE((r).ok());                                                                    \
    EXPECT_TRUE(has((r).error, text)) << "error was: " << (r).error;                          \
    EXPECT_EQ((r).errorOperand, operand) << (r).error;                                        \
    EXPECT_TRUE((r).results.empty());                                                          \
  } while (0)

} // namespace nimble::shapefns_test

#endif // NIMBLE_TEST_UNIT_SHAPEFNSTESTSUPPORT_H
