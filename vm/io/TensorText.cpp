//===- TensorText.cpp - Tensors as text literals (IREE convention) --------===//

#include "vm/io/TensorText.h"

#include "ir/Limits.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>

namespace nimble::vm {

namespace {

bool isSeparator(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == '[' || c == ']';
}

/// Parses one float token: decimal / exponent forms, nan, inf, an optional
/// sign. Returns false if the token is not entirely a number.
bool parseFloat(std::string_view tok, double &v) {
  bool neg = false;
  std::string_view body = tok;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    neg = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == "nan" || body == "NaN") {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (body == "inf" || body == "Inf" || body == "infinity") {
    v = std::numeric_limits<double>::infinity();
  } else {
    if (body.empty() || body[0] == '+' || body[0] == '-') return false;
    auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v);
    // Out of range (1e999): from_chars reports it; take +-inf like strtod,
    // the dtype conversion would give the same.
    if (ec == std::errc::result_out_of_range && end == body.data() + body.size())
      v = std::numeric_limits<double>::infinity();
    else if (ec != std::errc() || end != body.data() + body.size())
      return false;
  }
  if (neg) v = -v;
  return true;
}

bool parseInt(std::string_view tok, int64_t &v) {
  if (!tok.empty() && tok[0] == '+') tok.remove_prefix(1);
  if (tok.empty() || tok[0] == '+') return false;
  auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
  return ec == std::errc() && end == tok.data() + tok.size();
}

/// Stores one token as an element of `t` at `out`; returns an error message.
std::string storeElement(DType t, std::string_view tok, uint8_t *out) {
  auto bad = [&](const char *what) {
    return "'" + std::string(tok) + "' is not " + what + " (element type " +
           std::string(dtypeName(t)) + ")";
  };
  if (isFloat(t)) {
    double v;
    if (!parseFloat(tok, v)) return bad("a number");
    switch (t) {
    case DType::F32: {
      float f = static_cast<float>(v);
      std::memcpy(out, &f, 4);
      break;
    }
    case DType::F64: std::memcpy(out, &v, 8); break;
    case DType::F16: {
      uint16_t h = floatToHalf(static_cast<float>(v));
      std::memcpy(out, &h, 2);
      break;
    }
    default: {
      uint16_t h = floatToBF16(static_cast<float>(v));
      std::memcpy(out, &h, 2);
      break;
    }
    }
    return "";
  }
  if (t == DType::I1) {
    if (tok == "true" || tok == "True" || tok == "1") *out = 1;
    else if (tok == "false" || tok == "False" || tok == "0") *out = 0;
    else return bad("a boolean (true, false, 1, 0)");
    return "";
  }
  // Integers: in range of the type, stored little-endian in its width.
  size_t n = dtypeSize(t);
  uint64_t bits;
  if (t == DType::U64) {
    std::string_view u = tok;
    if (!u.empty() && u[0] == '+') u.remove_prefix(1);
    auto [end, ec] = std::from_chars(u.data(), u.data() + u.size(), bits);
    if (u.empty() || u[0] == '+' || ec != std::errc() || end != u.data() + u.size()) {
      int64_t v;
      return parseInt(tok, v) ? bad("in the range of u64") : bad("an integer");
    }
  } else {
    int64_t v;
    if (!parseInt(tok, v)) return bad("an integer");
    int b = static_cast<int>(8 * n);
    bool fits = isUnsigned(t) ? v >= 0 && (b == 64 || v < (int64_t(1) << b))
                              : b == 64 || (v >= -(int64_t(1) << (b - 1)) && v < (int64_t(1) << (b - 1)));
    if (!fits) {
      std::string range = "in the range of " + std::string(dtypeName(t));
      return bad(range.c_str());
    }
    bits = static_cast<uint64_t>(v);
  }
  for (size_t k = 0; k < n; ++k) out[k] = static_cast<uint8_t>(bits >> (8 * k));
  return "";
}

/// The shortest decimal text with at most `maxDigits` significant digits that
/// reads back to the same value of `t`; fixed notation for decimal exponents
/// in [-5, 16), scientific outside (Python's repr rule, roughly).
std::string shortestFloat(DType t, double v, int maxDigits) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  int p = 1;
  for (; p <= maxDigits; ++p) {
    std::snprintf(buf, sizeof buf, "%.*e", p - 1, v);
    double back = 0;
    parseFloat(buf, back);
    bool same;
    switch (t) {
    case DType::F32: same = static_cast<float>(back) == static_cast<float>(v); break;
    case DType::F16:
      same = floatToHalf(static_cast<float>(back)) == floatToHalf(static_cast<float>(v));
      break;
    case DType::BF16:
      same = floatToBF16(static_cast<float>(back)) == floatToBF16(static_cast<float>(v));
      break;
    default: same = back == v; break;
    }
    if (same) break;
  }
  p = std::min(p, maxDigits);
  // The exponent of the (rounded) scientific form decides the notation; %f
  // with p - 1 - exp decimals rounds at the same digit, so it is as exact.
  const char *e = std::strchr(buf, 'e');
  int exp = e ? std::atoi(e + 1) : 0;
  if (exp >= -5 && exp < 16) std::snprintf(buf, sizeof buf, "%.*f", std::max(0, p - 1 - exp), v);
  return buf;
}

} // namespace

Status parseTensorLiteral(std::string_view text, TensorRef &out) {
  // The literal is quoted in the message, cut short: an input may be
  // gigabytes long.
  auto fail = [&](const std::string &msg) {
    std::string shown = text.size() <= 80 ? std::string(text)
                                          : std::string(text.substr(0, 60)) + "...";
    return Status::error("invalid tensor literal '" + shown + "': " + msg);
  };
  size_t eq = text.find('=');
  if (eq == std::string_view::npos)
    return fail("expected TYPE=VALUES, e.g. 2x3xf32=\"1 2 3 4 5 6\"");
  std::string_view type = text.substr(0, eq), values = text.substr(eq + 1);

  // type: (dim 'x')* dtype. The dtype is the part after the last 'x' (no
  // dtype name contains an 'x').
  std::vector<int64_t> shape;
  size_t lastX = type.rfind('x');
  std::string_view dtypeText = lastX == std::string_view::npos ? type : type.substr(lastX + 1);
  std::optional<DType> dtype = parseDType(dtypeText);
  if (!dtype)
    return fail("unknown element type '" + std::string(dtypeText) +
                "' (expected f32, f16, bf16, f64, i1, i8, i32 or i64)");
  int64_t count = 1;
  if (lastX != std::string_view::npos) {
    std::string_view dims = type.substr(0, lastX);
    size_t pos = 0;
    for (;;) {
      size_t x = dims.find('x', pos);
      std::string_view d = dims.substr(pos, x == std::string_view::npos ? x : x - pos);
      int64_t v;
      if (d.empty() || d[0] == '-' || d[0] == '+' || !parseInt(d, v))
        return fail("bad dimension '" + std::string(d) + "' (dimensions are sizes >= 0)");
      if (shape.size() == limits::kMaxRank)
        return fail("more than " + std::to_string(limits::kMaxRank) +
                    " dimensions (the rank limit)");
      shape.push_back(v);
      if (x == std::string_view::npos) break;
      pos = x + 1;
    }
  }
  // Checked before anything is allocated (ir/Limits.h).
  int64_t bytes = 0;
  if (!limits::checkedNumElements(shape, count) ||
      !limits::checkedByteSize(shape, static_cast<int64_t>(dtypeSize(*dtype)), bytes))
    return fail("the shape holds more than " + std::to_string(limits::kMaxTensorBytes) +
                " bytes (2^48, the limit)");

  // One pair of surrounding quotes is allowed.
  if (values.size() >= 2 && (values.front() == '"' || values.front() == '\'') &&
      values.back() == values.front())
    values = values.substr(1, values.size() - 2);
  // Two passes over the tokens (count, then store) rather than a list of
  // them: a list would be a second copy of a big input, larger than the
  // tensor itself.
  auto forEachToken = [&](auto &&fn) {
    for (size_t i = 0; i < values.size();) {
      while (i < values.size() && isSeparator(values[i])) ++i;
      size_t j = i;
      while (j < values.size() && !isSeparator(values[j])) ++j;
      if (j > i && !fn(values.substr(i, j - i))) return;
      i = j;
    }
  };
  int64_t numToks = 0;
  forEachToken([&](std::string_view) { return ++numToks, true; });
  bool splat = numToks == 1;
  if (!splat && numToks != count)
    return fail("expected " + std::to_string(count) + " values for " + std::string(type) +
                " (or one value to fill it), got " + std::to_string(numToks));

  size_t es = dtypeSize(*dtype);
  uint8_t elem[8];
  TensorRef t = makeTensor(*dtype, shape);
  if (!t) return Status::error("out of memory allocating " + std::to_string(bytes) + " bytes");
  std::string err;
  size_t i = 0;
  forEachToken([&](std::string_view tok) {
    err = storeElement(*dtype, tok, splat ? elem : t->rawData() + i++ * es);
    return err.empty();
  });
  if (!err.empty()) return fail(err);
  if (splat)
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(t->rawData() + static_cast<size_t>(i) * es, elem, es);
  out = std::move(t);
  return Status::success();
}

std::string formatElement(DType t, const uint8_t *p) {
  switch (t) {
  case DType::F32: {
    float f;
    std::memcpy(&f, p, 4);
    return shortestFloat(t, f, 9);
  }
  case DType::F64: {
    double d;
    std::memcpy(&d, p, 8);
    return shortestFloat(t, d, 17);
  }
  case DType::F16:
  case DType::BF16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return shortestFloat(t, t == DType::F16 ? halfToFloat(h) : bf16ToFloat(h), 9);
  }
  case DType::I1: return *p ? "true" : "false";
  case DType::I8: return std::to_string(static_cast<int8_t>(*p));
  case DType::I32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return std::to_string(v);
  }
  case DType::I64: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return std::to_string(v);
  }
  case DType::I16: {
    int16_t v;
    std::memcpy(&v, p, 2);
    return std::to_string(v);
  }
  case DType::U8: return std::to_string(*p);
  case DType::U16: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return std::to_string(v);
  }
  case DType::U32: {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return std::to_string(v);
  }
  case DType::U64: {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return std::to_string(v);
  }
  }
  return "?";
}

std::string formatTensor(const Tensor &t) {
  std::string s;
  for (int64_t d : t.shape()) s += std::to_string(d) + "x";
  s += dtypeName(t.dtype());
  s += '=';
  const std::vector<int64_t> &shape = t.shape();
  size_t es = dtypeSize(t.dtype());
  if (shape.empty()) return s + formatElement(t.dtype(), t.rawData());
  int64_t n = t.numElements();
  size_t rank = shape.size();
  if (n == 0) {
    // Brackets down to the first empty dimension: 2x0 -> [[][]], 0x3 -> [].
    std::function<void(size_t)> open = [&](size_t d) {
      s += '[';
      if (d + 1 < rank && shape[d] > 0)
        for (int64_t i = 0; i < shape[d]; ++i) open(d + 1);
      s += ']';
    };
    open(0);
    return s;
  }
  std::vector<int64_t> idx(rank, 0);
  s.append(rank, '[');
  for (int64_t i = 0; i < n; ++i) {
    if (idx[rank - 1] != 0) s += ' ';
    s += formatElement(t.dtype(), t.rawData() + static_cast<size_t>(i) * es);
    // Close the dimensions that end here and reopen them for the next row.
    size_t closed = 0;
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
      ++closed;
    }
    s.append(closed, ']');
    if (i + 1 < n) s.append(closed, '[');
  }
  return s;
}

} // namespace nimble::vm
