//===- DocsTest.cpp - docs/VM.md's opcode table matches Opcodes.def -------===//
//
// The table in docs/VM.md ("Opcodes") is generated from vm/format/Opcodes.def; this
// test fails when one changes without the other and prints the row to paste.

#include "vm/format/Executable.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace nimble::vm {
namespace {

std::string expectedRow(int i) {
  const OpcodeInfo &info = opcodeInfo(static_cast<Opcode>(i));
  std::string meaning = info.meaning;
  size_t sep = meaning.find(" ; ");
  std::string syntax = meaning.substr(0, sep);
  std::string what = sep == std::string::npos ? "" : meaning.substr(sep + 3);
  return "| " + std::to_string(i) + " | `" + info.name + "` | `" + info.signature + "` | `" +
         syntax + "` | " + what + " |";
}

TEST(Docs, OpcodeTableMatchesOpcodesDef) {
  std::ifstream in("docs/VM.md");
  ASSERT_TRUE(in) << "docs/VM.md not in the test's runfiles";
  std::stringstream ss;
  ss << in.rdbuf();
  std::string doc = ss.str();
  for (int i = 0; i < kNumOpcodes; ++i)
    EXPECT_NE(doc.find("\n" + expectedRow(i) + "\n"), std::string::npos)
        << "docs/VM.md lacks the row:\n"
        << expectedRow(i);
  // No row for an opcode that no longer exists.
  std::string next = "\n| " + std::to_string(kNumOpcodes) + " | `";
  EXPECT_EQ(doc.find(next), std::string::npos);
  EXPECT_NE(doc.find("\n## Interpreter\n"), std::string::npos);
  EXPECT_NE(doc.find("\n## Kernels\n"), std::string::npos);
}

} // namespace
} // namespace nimble::vm
