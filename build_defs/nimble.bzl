"""Compiler flags and thin rule wrappers for Nimble's own C++ targets.

Usage in a BUILD file:

    load("//build_defs:nimble.bzl", "nimble_cc_library", "nimble_copts")

    nimble_cc_library(
        name = "ir",
        srcs = [...],
        hdrs = [...],
    )

    # or, with the native rules:
    cc_library(name = "x", srcs = [...], copts = nimble_copts())

Warnings are errors in our code only. The flags are per target (not in
.bazelrc) so that they never apply to third-party code, and system headers
(/usr/include, LLVM's -isystem headers) are exempt from warnings anyway.
"""

# -Wno-unused-parameter: interfaces (pass hooks, kernel signatures, visitors)
# routinely ignore some arguments; naming them still documents the interface.
_NIMBLE_COPTS = [
    "-Werror",
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
]

def nimble_copts():
    """The copts every Nimble C++ target uses (a fresh list each call)."""
    return list(_NIMBLE_COPTS)

def nimble_cc_library(name, copts = [], **kwargs):
    """cc_library with nimble_copts() in front of any target-specific copts."""
    native.cc_library(name = name, copts = nimble_copts() + copts, **kwargs)

# Under --config=asan, executables are linked as position-dependent (the
# objects stay -fPIE, which links either way). The sanitizers' static data
# (a source location and type descriptor per check, 14 MB of .data in
# nimble-opt) is full of absolute pointers: as a PIE that is ~500k dynamic
# relocations, applied at every start, copying every page of .data. Measured
# (perf stat, `--version`, Zen 4, CPU ms per start, PIE -> not): nimble-opt
# 62 -> 37 (8.5k -> 5.1k page faults), nimble-run 60 -> 52, nimblec
# 133 -> 102; the lit suites start tens of thousands of tools under ASan. Only executables: -no-pie on a -shared link would make an
# executable of it, so it cannot go in .bazelrc's --linkopt.
def _exe_linkopts():
    return select({
        "//build_defs:asan": ["-no-pie"],
        "//conditions:default": [],
    })

def nimble_cc_binary(name, copts = [], linkopts = [], **kwargs):
    """cc_binary with nimble_copts() in front of any target-specific copts."""
    native.cc_binary(
        name = name,
        copts = nimble_copts() + copts,
        linkopts = linkopts + _exe_linkopts(),
        **kwargs
    )

# A GoogleTest file's own code is compiled without optimization: its macros
# make -O2 compiles slow (test/unit/ShapeFnsTest.cpp: 90 s at -O2, 21 s at
# -O0 with g++ 12; the unit tests were a fifth of CI's compile time), and
# the test code itself runs in milliseconds. The code under test, in its
# libraries, keeps the build's own level (-O2, or -O1 under ASan).
_TEST_COPTS = ["-O0"]

def nimble_cc_test(name, copts = [], deps = [], linkopts = [], **kwargs):
    """cc_test with nimble_copts() and -O0 for the test's own sources,
    linked with GoogleTest's main().

    A test that brings its own main() uses native cc_test with
    copts = nimble_copts() and deps on @gtest//:gtest instead.
    """
    native.cc_test(
        name = name,
        copts = nimble_copts() + _TEST_COPTS + copts,
        deps = deps + ["@gtest//:gtest_main"],
        linkopts = linkopts + _exe_linkopts(),
        **kwargs
    )
