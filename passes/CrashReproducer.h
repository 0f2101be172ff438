//===- CrashReproducer.h - A file that replays a failing pipeline --*- C++ -*-===//
//
// MLIR's `--mlir-pass-pipeline-crash-reproducer`: when a pass breaks the IR
// (the verifier after it fails), reports an internal error (a message that
// starts with "internal error", the pass manager's idempotence check), or
// the process gets a fatal signal (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL)
// while a pass runs, the pass manager writes a `.nir` file that reproduces
// the failure with one command:
//
//   // nimble-reproducer: --passes=cse,test-crash{signal=segv},dce
//   // nimble-opt: signal SIGSEGV in pass 'test-crash{signal=segv}' (2 of 3)
//   module ...                       <- the IR the --passes line starts from
//
//   nimble-opt --run-reproducer FILE     (reads the first line's flags)
//
// What it costs when nothing fails, and why (compile time is a tracked goal:
// scripts/bench_compile.py): nothing is printed on the way. The IR the
// reproducer starts from is the pipeline's input text, which the tool holds
// anyway; the header is rendered from the pipeline's text. Only on a failure
// path is work done:
//
//  - A verifier failure or an internal error (ordinary control flow): the
//    input is parsed again and the passes before the failing one are run
//    again on it (they are deterministic), so the file holds the IR as it
//    was before the failing pass and the pipeline from that pass on.
//  - A signal: nothing may allocate or print in a signal handler, so the
//    handler only write(2)s text rendered before (the input, the pipeline's
//    pieces, the file names) to a temporary file, renames it over the
//    target, and re-raises the signal through the previous handler (the
//    process still dies of it; under ASan, ASan reports it). The file then
//    holds the input and the whole pipeline; the header names the pass.
//    With ReproducerOptions::local (--crash-reproducer-local) the IR is
//    printed before every pass instead (MLIR's local reproducer; costs one
//    print of the module per pass), and a signal's reproducer starts at the
//    failing pass too.
//
// A failure with no pipeline text (passes added by addPass) or no source
// writes nothing.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_PASSES_CRASHREPRODUCER_H
#define NIMBLE_PASSES_CRASHREPRODUCER_H

#include "ir/IR.h"

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nimble::passes {

struct ReproducerOptions {
  bool enabled = false;
  /// The file to write; empty: `nimble-reproducer-<pid>.nir` in $TMPDIR (or
  /// /tmp), named in the error.
  std::string path;
  /// Print the IR before every pass (see the header comment).
  bool local = false;
  /// The tool named in the messages.
  std::string tool = "nimble-opt";
};

/// The text the pipeline's module was parsed from (the input file, or one
/// chunk of a --split-input-file input), named as in diagnostics.
struct ReproducerSource {
  std::string_view text;
  std::string name;
  uint32_t firstLine = 1;
};

/// The first line of a reproducer starts with this.
inline constexpr std::string_view kReproducerTag = "// nimble-reproducer:";

/// Reads the flags of a reproducer's first line (`--passes=...`). False when
/// `text` does not start with kReproducerTag.
bool readReproducerHeader(std::string_view text, std::vector<std::string> &flags);

/// One pipeline run's reproducer: installs the signal handlers for its
/// lifetime (restoring the previous ones after), tracks the running pass.
class CrashReproducer {
public:
  /// `specs`: each pass as the pipeline wrote it; `notes`: where the
  /// messages naming the file go.
  CrashReproducer(const ReproducerOptions &opts, const ReproducerSource &src,
                  const std::vector<std::string> &specs, std::ostream &notes);
  ~CrashReproducer();
  CrashReproducer(const CrashReproducer &) = delete;
  CrashReproducer &operator=(const CrashReproducer &) = delete;

  /// Pass `i` is about to run on `m`.
  void beforePass(size_t i, const ir::Module &m);
  /// Pass `i` failed: the header says `<why> in pass '<i>' (i of n)<detail>`;
  /// `i` == specs.size() when the failure is found after the pipeline (the
  /// pass is unknown). Writes the reproducer and a note naming it.
  void onFailure(size_t i, std::string_view why, std::string_view detail = "");

  struct State; // what the signal handler reads (CrashReproducer.cpp)

private:
  std::string irBefore(size_t i, size_t &from) const;

  ReproducerOptions opts_;
  ReproducerSource src_;
  std::vector<std::string> specs_;
  std::ostream &notes_;
  std::unique_ptr<State> state_;
};

} // namespace nimble::passes

#endif // NIMBLE_PASSES_CRASHREPRODUCER_H
