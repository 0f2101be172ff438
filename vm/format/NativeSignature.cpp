//===- NativeSignature.cpp - The native-code object's signature text ------===//

#include "vm/format/NativeSignature.h"

#include "ir/Limits.h"

#include <charconv>
#include <cstdio>

namespace nimble::vm {

namespace {

void formatBuffers(std::string &s, const std::vector<NativeBufferSig> &bufs) {
  if (bufs.empty()) {
    s += '-';
    return;
  }
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (i) s += ',';
    s += dtypeName(bufs[i].dtype);
    s += ':';
    for (size_t d = 0; d < bufs[i].dims.size(); ++d) {
      if (d) s += 'x';
      s += bufs[i].dims[d] == kDynamic ? std::string("?") : std::to_string(bufs[i].dims[d]);
    }
  }
}

/// Splits `s` at `sep` (no empty-field elision).
std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

template <class T> bool parseNumber(std::string_view s, T &v, int base = 10) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  return ec == std::errc() && p == s.data() + s.size();
}

bool parseBuffers(std::string_view s, std::vector<NativeBufferSig> &out, std::string &error) {
  out.clear();
  if (s == "-") return true;
  for (std::string_view b : split(s, ',')) {
    size_t colon = b.find(':');
    if (colon == std::string_view::npos) {
      error = "buffer '" + std::string(b) + "' has no ':'";
      return false;
    }
    NativeBufferSig sig;
    auto dt = parseDType(b.substr(0, colon));
    if (!dt) {
      error = "unknown dtype '" + std::string(b.substr(0, colon)) + "'";
      return false;
    }
    sig.dtype = *dt;
    std::string_view dims = b.substr(colon + 1);
    if (!dims.empty())
      for (std::string_view d : split(dims, 'x')) {
        int64_t v;
        if (d == "?") v = kDynamic;
        else if (!parseNumber(d, v) || v < 0) {
          error = "bad dimension '" + std::string(d) + "'";
          return false;
        }
        if (sig.dims.size() >= limits::kMaxRank) {
          error = "a buffer of more than " + std::to_string(limits::kMaxRank) + " dimensions";
          return false;
        }
        sig.dims.push_back(v);
      }
    out.push_back(std::move(sig));
  }
  return true;
}

} // namespace

std::string formatNativeSignatures(const std::vector<NativeSignature> &sigs) {
  std::string s;
  for (const NativeSignature &n : sigs) {
    char digest[17];
    std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(n.digest));
    s += std::to_string(n.kernel) + " " + n.symbol + " " + digest + " ";
    formatBuffers(s, n.inputs);
    s += ' ';
    formatBuffers(s, n.outputs);
    s += '\n';
  }
  return s;
}

bool parseNativeSignatures(std::string_view text, std::vector<NativeSignature> &out, std::string &error) {
  out.clear();
  size_t lineNo = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) {
      error = "the last line has no newline";
      return false;
    }
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++lineNo;
    auto fail = [&](const std::string &why) {
      error = "line " + std::to_string(lineNo) + ": " + why;
      return false;
    };
    if (line.size() > kMaxSigLine) return fail("longer than " + std::to_string(kMaxSigLine) + " bytes");
    std::vector<std::string_view> f = split(line, ' ');
    if (f.size() != 5) return fail("expected 5 fields, found " + std::to_string(f.size()));
    NativeSignature n;
    if (!parseNumber(f[0], n.kernel)) return fail("bad kernel index '" + std::string(f[0]) + "'");
    if (f[1].empty()) return fail("empty symbol");
    n.symbol = std::string(f[1]);
    if (f[2].size() != 16 || !parseNumber(f[2], n.digest, 16))
      return fail("bad digest '" + std::string(f[2]) + "'");
    std::string why;
    if (!parseBuffers(f[3], n.inputs, why)) return fail("inputs: " + why);
    if (!parseBuffers(f[4], n.outputs, why)) return fail("outputs: " + why);
    out.push_back(std::move(n));
  }
  return true;
}

} // namespace nimble::vm
