//===- OmpWaitPolicy.cpp - nimble-run's default libgomp wait policy -------===//
//
// The kernels' threads are one OpenMP team (vm/support/ThreadPool.cpp),
// libgomp's, shared with oneDNN. Between parallel regions libgomp's idle
// workers spin by default (GOMP_SPINCOUNT 300,000 iterations) before they
// sleep. On a machine whose cores other processes also use, a spinning
// worker holds a core that the thread it waits for needs, and every region
// then waits for the scheduler: at two threads on a shared 2-core guest,
// ResNet-18, MobileNetV2 and BERT-base ran 1.3 to 6x slower than with
// OMP_WAIT_POLICY=passive, where an idle worker sleeps at once
// (docs/nimble-run.md, "Waiting threads"). Passive waiting costs one futex
// wake per parallel region instead, so it is nimble-run's default.
//
// libgomp reads its environment once, in its constructor, before main, and
// offers no call to change the policy later. The executable's
// .preinit_array runs before any shared library's initializer, but libc's
// own initializer then resets `environ` to the process's original block, so
// a setenv there is lost. Instead, when neither OMP_WAIT_POLICY nor
// GOMP_SPINCOUNT is set, the preinit function executes /proc/self/exe again
// with the same arguments and OMP_WAIT_POLICY=passive added: before any
// initializer has run, so nothing is lost but the loader's work (about a
// millisecond). A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT is left alone
// (GOMP_SPINCOUNT=300000 restores libgomp's own default), and if the exec
// fails the process goes on with libgomp's default. At one thread nothing
// waits, and nothing is done. The Python module runs
// in a process it does not start, so it changes nothing there.
//
//===----------------------------------------------------------------------===//

#include <alloca.h>
#include <sched.h>
#include <unistd.h>

#include <cstring>

namespace {

bool isSet(char **envp, const char *name) {
  const size_t n = std::strlen(name);
  for (char **e = envp; e && *e; ++e)
    if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return true;
  return false;
}

/// Whether the kernels will run on one thread (no team, nothing waits):
/// the last --threads=N says, else the cores of the affinity mask
/// (nimble-run's default).
bool oneThread(int argc, char **argv) {
  const char *last = nullptr;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--threads=", 10) == 0) last = argv[i] + 10;
  if (last) return std::strcmp(last, "1") == 0;
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1;
}

void passiveUnlessSet(int argc, char **argv, char **envp) {
  if (!argv || !envp || isSet(envp, "OMP_WAIT_POLICY") || isSet(envp, "GOMP_SPINCOUNT") || oneThread(argc, argv))
    return;
  size_t n = 0;
  while (envp[n]) ++n;
  // No malloc: libc is not initialized yet.
  char **env = static_cast<char **>(alloca((n + 2) * sizeof(char *)));
  std::memcpy(env, envp, n * sizeof(char *));
  static char passive[] = "OMP_WAIT_POLICY=passive";
  env[n] = passive;
  env[n + 1] = nullptr;
  execve("/proc/self/exe", argv, env); // returns only on failure
}

} // namespace

// An executable's own entry: shared libraries cannot have a .preinit_array.
__attribute__((section(".preinit_array"), used)) static void (*const kPassiveUnlessSet)(int, char **,
                                                                                       char **) = passiveUnlessSet;
