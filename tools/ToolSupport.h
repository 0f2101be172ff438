//===- ToolSupport.h - What the command-line tools share -----------*- C++ -*-===//
//
// Reading inputs (a path or `-` for stdin), writing outputs atomically (a
// temporary file beside the target, then rename, so a failed run never leaves
// a half-written or clobbered output), and splitting `// -----` inputs.
// Exit codes follow ARCHITECTURE.md: 0 success, 1 user error, 2 usage error.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_TOOLS_TOOLSUPPORT_H
#define NIMBLE_TOOLS_TOOLSUPPORT_H

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace nimble::tools {

inline constexpr int kExitOk = 0, kExitError = 1, kExitUsage = 2;

/// Reads `path` (`-`: stdin) into `out`; on failure returns false and sets
/// `error` to a message naming the file and the reason.
bool readInput(const std::string &path, std::string &out, std::string &error);

/// Writes `data` to `path` (`-`: stdout) through a temporary file and rename.
bool writeOutputAtomically(const std::string &path, std::string_view data, std::string &error);
/// The same with the output in pieces (a header, then a tensor's bytes in
/// place: no second copy of a big output). A failed write leaves no file.
bool writeOutputAtomically(const std::string &path, const std::vector<std::string_view> &data,
                           std::string &error);
/// Whether `path` names a regular file or nothing yet (not `-`, a device, a
/// FIFO or a socket): an output writeOutputAtomicallyWith can produce.
bool isRegularOutput(const std::string &path);
/// Writes `path` through `produce`, which writes the whole output into `fd`
/// (an empty temporary file beside `path`, open for reading and writing; it
/// may seek) or returns false with the reason; the file then replaces
/// `path`. For outputs not worth holding in memory; `path` must satisfy
/// isRegularOutput. A failed write leaves no file.
bool writeOutputAtomicallyWith(const std::string &path, const std::function<bool(int fd, std::string &why)> &produce,
                               std::string &error);

/// The display name of an input path in diagnostics (`<stdin>` for `-`).
std::string displayName(const std::string &path);

/// One chunk of a --split-input-file input and the line it starts on.
struct Chunk {
  std::string_view text;
  uint32_t firstLine;
};
/// Splits on lines that consist of `// -----` (as mlir-opt does).
std::vector<Chunk> splitInput(std::string_view text);

/// Prints `<tool>: error: <msg>` and a pointer to --help; returns kExitUsage.
int usageError(std::string_view tool, const std::string &msg);

/// Adds the non-empty names of the comma-separated `list` to `to`.
void addCommaSeparated(std::set<std::string> &to, const std::string &list);

/// Parses the value of `--flag=value`; returns nullopt when `arg` is not that
/// flag. `--flag` alone gives "".
std::optional<std::string> flagValue(std::string_view arg, std::string_view flag);

/// A boolean flag in LLVM's forms: `--flag`, `--flag=true|false`, and
/// `--no-flag` (flag given without its leading dashes' "no-"). Returns false
/// when `arg` is none of them; otherwise sets `value`, or `error` for another
/// value after `=`.
bool boolFlag(std::string_view arg, std::string_view flag, bool &value, std::string &error);

/// True when the tools free their big structures (the IR) before exiting:
/// in sanitizer builds, so that ASan and LSan see every free. Otherwise the
/// process's exit returns the memory at once (see ExitOwned).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kFreeAtExit = true;
#else
inline constexpr bool kFreeAtExit = false;
#endif

/// Owns an object that lives until the tool exits, and does not destroy it
/// then (clang's -disable-free): tearing down a module of a million ops,
/// object by object, costs a good part of a second for nothing. The object
/// stays reachable (from a static), so leak checkers do not report it.
/// Sanitizer builds destroy it as usual (kFreeAtExit).
template <typename T>
class ExitOwned {
public:
  explicit ExitOwned(std::unique_ptr<T> p) : p_(std::move(p)) {}
  ExitOwned(const ExitOwned &) = delete;
  ExitOwned &operator=(const ExitOwned &) = delete;
  ~ExitOwned() {
    if (kFreeAtExit) return;
    static auto *buried = new std::vector<T *>; // never destroyed
    buried->push_back(p_.release());
  }
  T *get() const { return p_.get(); }
  T &operator*() const { return *p_; }
  T *operator->() const { return p_.get(); }
  explicit operator bool() const { return p_ != nullptr; }

private:
  std::unique_ptr<T> p_;
};

} // namespace nimble::tools

#endif // NIMBLE_TOOLS_TOOLSUPPORT_H
