"""lit_suite: run a directory of lit tests (.nir, .test) as one Bazel test.

Usage, e.g. in test/ir/BUILD:

    load("//build_defs:lit.bzl", "lit_suite")

    lit_suite(
        name = "lit",
        tools = ["//tools:nimble-opt"],
    )

The suite is the BUILD file's directory (and its subdirectories). It must lie
under test/, whose lit.cfg.py configures every suite (substitutions, the .nir
round trip check, Inputs/ exclusion); that is where lit looks for it.

How it runs: an sh_test (lit_runner.sh) starts
`/usr/bin/python3 lit.py -sv <suite>` inside the test's runfiles tree, where
Bazel has placed exactly the declared test files, data, our tool binaries and
FileCheck & co. The directories of the `tools` binaries come first on PATH and
are also passed as `--param tools_dir=...`, which test/lit.cfg.py uses to
resolve `nimble-opt`, `nimblec` and `nimble-run`. The test fails if any lit
test fails and its log ends with lit's summary; per-test results also land in
the test's XML report (bazel-testlogs/<pkg>/<name>/test.xml).

A suite containing .nir files must list //tools:nimble-opt in `tools`: every
.nir file gets an automatic print/parse round trip (see
test/nimble_lit_format.py).

Handy:
  bazel test //test/ir:lit --test_arg=--filter=parser   # only matching tests
  bazel test //test/ir:lit --test_arg=-a --test_output=all  # show every RUN
Under --config=asan the lit feature `asan` is set (`UNSUPPORTED: asan`).
A slow suite may set `shard_count = N`: Bazel then runs N shards, each
`lit --num-shards=N --run-shard=i` (tests dealt round-robin), each with its
own timeout.

A suite that repeats another under different flags (test/e2e's lit_native,
lit_library, ...) may set `asan_subset = "K/N"`: under --config=asan it runs
only the K-th of N round-robin shares of its tests. Give the variants of one
suite different K, so that every test still runs under ASan in some of them
(besides the full suite). The plain build runs everything.
"""

# What every suite runs besides our own binaries.
_LLVM_TOOLS = [
    "@llvm_tools//:FileCheck",
    "@llvm_tools//:not",
    "@llvm_tools//:count",
    "@llvm_tools//:split-file",
    "@llvm_tools//:lit",
]

def lit_suite(
        name,
        srcs = None,
        tools = [],
        data = [],
        lit_args = [],
        cfg = "//test:lit_config",
        asan_subset = None,
        **kwargs):
    """Declares an sh_test that runs lit over this package's directory.

    Args:
      name: test target name.
      srcs: the test files; by default every .nir and .test file under this
        directory, except in Inputs/ directories (list those in `data`).
      tools: labels of our binaries the tests run (e.g. //tools:nimble-opt).
      data: other files the tests read (Inputs/, weights, expected outputs).
      lit_args: extra lit command-line arguments (e.g. ["--param", "k=v"]).
      cfg: lit.cfg.py at the root of the lit suites, with its helpers.
      asan_subset: "K/N": under --config=asan, run the K-th of N shares of
        the tests (see above); None: all of them.
      **kwargs: passed to sh_test (size, tags, timeout, ...).
    """
    if srcs == None:
        srcs = native.glob(
            ["**/*.nir", "**/*.test"],
            exclude = ["**/Inputs/**"],
        )

    # Paths are runfiles-relative; lit_runner.sh makes them absolute.
    args = [
        "--lit=$(rootpath @llvm_tools//:lit_py)",
        "--filecheck=$(rootpath @llvm_tools//:FileCheck)",
        "--suite=" + native.package_name(),
    ] + ["--tool=$(rootpath %s)" % t for t in tools]

    native.sh_test(
        name = name,
        srcs = ["//build_defs:lit_runner.sh"],
        args = args + select({
            "//build_defs:asan": ["--feature=asan"] + (
                ["--subset=" + asan_subset] if asan_subset else []
            ),
            "//conditions:default": [],
        }) + ["--"] + lit_args,
        data = srcs + tools + data + [cfg, "@llvm_tools//:lit_py"] + _LLVM_TOOLS,
        **kwargs
    )
