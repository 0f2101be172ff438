//===- JemallocConf.cpp - jemalloc's options for the compiler tools -------===//
//
// nimblec and nimble-opt allocate through jemalloc (tools/BUILD,
// third_party/jemalloc.BUILD). jemalloc reads this symbol once, at its
// start-up; the MALLOC_CONF environment variable, read after it, overrides
// any option it sets.
//
// dirty_decay_ms:-1 keeps the pages the tools free for their own later
// allocations instead of returning them to the kernel (jemalloc's default
// purges them with madvise(MADV_DONTNEED) over ten seconds, and allocations
// of 8 MiB or more at once). A compilation frees and reallocates its
// analyses' arrays pass after pass: on a program of 1,000,000 ops each
// purged page was faulted in again by the next pass, 2.4 GB of purges and
// 700,000 minor faults on loop-blocks, over a tenth of the CPU time
// (issue 23). Kept, the faults halve and the system time drops by 0.1 to
// 0.7 s at 1,000,000 ops, for a peak resident set 5 to 22% higher, under
// 1.5 KB per op on every shape of scripts/bench_compile.py (docs/perf.md,
// "Compile time at scale"). The tools are short-lived: everything returns
// to the kernel at exit.
//
// Only linked with jemalloc (COMPILER_MALLOC): under --config=asan the
// symbol would be an unused global.
//
//===----------------------------------------------------------------------===//

extern "C" {
const char *malloc_conf = "dirty_decay_ms:-1";
}
