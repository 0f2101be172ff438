//===- NpyFuzzer.cpp - The .npy reader (and writer round trip) ------------===//
//
// vm::parseNpy over arbitrary bytes. Whatever it accepts (except bf16, which
// has no numpy dtype) must serialize, and the serialized bytes must parse
// back to a tensor with the same dtype, shape and bytes.
//
//===----------------------------------------------------------------------===//

#include "test/fuzz/FuzzSupport.h"
#include "vm/io/Npy.h"

#include <cstdio>
#include <cstring>

using namespace nimble;
using namespace nimble::vm;

namespace {
[[noreturn]] void bug(const std::string &what) { fuzz::bug("npy", what); }
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  TensorRef t;
  if (!parseNpy(data, size, t).ok()) return 0;
  if (!t) bug("parseNpy succeeded without a tensor");
  std::vector<uint8_t> bytes;
  if (Status st = serializeNpy(*t, bytes); !st.ok()) bug("an accepted tensor does not serialize: " + st.message);
  TensorRef again;
  if (Status st = parseNpy(bytes.data(), bytes.size(), again); !st.ok())
    bug("serialized .npy does not parse back: " + st.message);
  if (again->dtype() != t->dtype() || again->shape() != t->shape() || again->numBytes() != t->numBytes() ||
      (t->numBytes() && std::memcmp(again->rawData(), t->rawData(), t->numBytes()) != 0))
    bug("the .npy round trip changed the tensor");
  return 0;
}
