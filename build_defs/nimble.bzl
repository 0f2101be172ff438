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

def nimble_cc_binary(name, copts = [], **kwargs):
    """cc_binary with nimble_copts() in front of any target-specific copts."""
    native.cc_binary(name = name, copts = nimble_copts() + copts, **kwargs)

# A GoogleTest file's own code is compiled without optimization: its macros
# make -O2 compiles slow (test/unit/ShapeFnsTest.cpp: 90 s at -O2, 21 s at
# -O0 with g++ 12; the unit tests were a fifth of CI's compile time), and
# the test code itself runs in milliseconds. The code under test, in its
# libraries, keeps the build's own level (-O2, or -O1 under ASan).
_TEST_COPTS = ["-O0"]

def nimble_cc_test(name, copts = [], deps = [], **kwargs):
    """cc_test with nimble_copts() and -O0 for the test's own sources,
    linked with GoogleTest's main().

    A test that brings its own main() uses native cc_test with
    copts = nimble_copts() and deps on @gtest//:gtest instead.
    """
    native.cc_test(
        name = name,
        copts = nimble_copts() + _TEST_COPTS + copts,
        deps = deps + ["@gtest//:gtest_main"],
        **kwargs
    )
