//===- SafetensorsFuzzer.cpp - The safetensors reader (nimblec's weights) -===//
//
// codegen::SafetensorsFile::parse over arbitrary bytes; every entry it
// accepts must lie inside the data buffer with exactly shape x dtype bytes,
// and reading its bytes must stay in bounds (ASan checks the read).
//
//===----------------------------------------------------------------------===//

#include "codegen/Safetensors.h"
#include "test/fuzz/FuzzSupport.h"

#include <cstdio>

using namespace nimble;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  codegen::SafetensorsFile f;
  std::string error;
  if (!f.parse(std::vector<uint8_t>(data, data + size), "fuzz.safetensors", error)) return 0;
  volatile uint8_t sink = 0;
  for (const auto &[name, e] : f.entries()) {
    if (e.end < e.begin) {
      fuzz::bug("safetensors", "entry '" + name + "' ends before it begins");
    }
    const uint8_t *p = f.data(e);
    for (size_t i = 0; i < e.end - e.begin; ++i) sink = sink ^ p[i];
  }
  (void)sink;
  return 0;
}
