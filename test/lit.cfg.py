# -*- Python -*-
"""Lit configuration shared by every Nimble lit suite (test/ir, test/passes,
test/codegen, test/vm, test/e2e, ...).

Two ways to run the suites:

  * Through Bazel (what CI does): each directory's BUILD file declares a
    lit_suite (build_defs/lit.bzl); `bazel test //test/...` runs them inside
    the test sandbox. The runner passes `--param tools_dir=...` (where Bazel put
    our binaries), `--param llvm_tools_dir=...` and `--param exec_root=...`.

  * Directly, for quick iteration on a checkout:

        bazel build //tools/...
        /usr/bin/python3 /usr/lib/llvm-19/build/utils/lit/lit.py -sv test/
        /usr/bin/python3 /usr/lib/llvm-19/build/utils/lit/lit.py -sv test/ir/parse.nir

    Our tools are then taken from bazel-bin/tools/, LLVM's from
    /usr/lib/llvm-19/bin, and lit's scratch files go to .lit-out/ at the
    repository root. `--param nimble-opt=/some/other/nimble-opt` (likewise
    nimblec, nimble-run, FileCheck, ...) overrides a single tool.

Test files are `.nir` (IR with RUN lines in `//` comments) and `.test` (any
other lit test). Directories named `Inputs` hold files that tests read; they
are never run as tests.

Every `.nir` test also gets an automatic printer round trip; see
NimbleShTest in nimble_lit_format.py.
"""

import os
import re

import sys

import lit.util

# `config` and `lit_config` are injected by lit.
# pylint: disable=undefined-variable

config.name = "Nimble"
config.suffixes = [".nir", ".test"]
config.excludes = ["Inputs"]

# Keep the runfiles path (do not resolve symlinks): under Bazel the test files
# are symlinks and only this tree holds exactly the declared ones.
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
_repo_root = os.path.dirname(config.test_source_root)

# Lit writes Output/ directories with each test's %t files under the exec
# root; never into the source tree.
config.test_exec_root = lit_config.params.get("exec_root") or os.path.join(
    _repo_root, ".lit-out"
)

_PYTHON = "/usr/bin/python3"  # Debian's, the one that sees numpy and torch.
_running_under_bazel = "tools_dir" in lit_config.params


def _dirs(param, default):
    value = lit_config.params.get(param)
    if value is None:
        return default
    return [d for d in value.split(os.pathsep) if d]


_tools_dirs = _dirs("tools_dir", [os.path.join(_repo_root, "bazel-bin", "tools")])
_llvm_tools_dirs = _dirs("llvm_tools_dir", ["/usr/lib/llvm-19/bin"])

# Tests may also call the tools by bare name (e.g. from a %python script).
config.environment["PATH"] = os.pathsep.join(
    _tools_dirs + _llvm_tools_dirs + [config.environment.get("PATH", "")]
)
# Sanitizer reports and FileCheck options from the caller reach the tools.
for _var in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "FILECHECK_OPTS"):
    if _var in os.environ:
        config.environment[_var] = os.environ[_var]

for _feature in lit_config.params.get("features", "").split(","):
    if _feature:
        config.available_features.add(_feature)

# CPU features a test may require (the runtime picks some kernels by them:
# vm/dispatch/PanelProduct.h and LibraryAttention.h have AVX-512F and AVX2
# forms; NIMBLE_KERNEL_ISA caps an AVX-512 CPU to AVX2).
try:
    with open("/proc/cpuinfo") as _f:
        _flags = next((_l.split(":", 1)[1].split() for _l in _f if _l.startswith("flags")), [])
except OSError:
    _flags = []
if "avx512f" in _flags:
    config.available_features.add("avx512f")
if "avx2" in _flags and "fma" in _flags:
    config.available_features.add("avx2")
# The one-row rule's default (vm/dispatch/PanelProduct.h, "Which CPUs"):
# one-row products go to the panel kernel on AMD CPUs with AVX-512F, to
# native code elsewhere unless NIMBLE_PANEL_PRODUCT=1.
try:
    with open("/proc/cpuinfo") as _f:
        _vendor = next((_l.split(":", 1)[1].strip() for _l in _f if _l.startswith("vendor_id")), "")
except OSError:
    _vendor = ""
if "avx512f" in _flags and _vendor == "AuthenticAMD":
    config.available_features.add("panel-one-row")


# For the probes that only some suites ask (test/lit_probes.py, called from
# their lit.local.cfg): where the tools are. A probe that compiles and runs a
# program costs about 0.3 s, several seconds under ASan, in every suite's
# configuration otherwise.
config.nimble_probe_tools = tuple(
    lit_config.params.get(_name) or lit.util.which(_name, os.pathsep.join(_tools_dirs)) or ""
    for _name in ("nimblec", "nimble-run"))


def _tool_pattern(name):
    """Matches `name` as a command word, the way LLVM's ToolSubst does: not
    as part of a path, a file name or an option (`-`, `.`, `/` around it)."""
    return r"(?<![.\-^/\\<])\b" + re.escape(name) + r"\b(?![-.])"


def _add_tool(name, dirs):
    """Substitutes the bare word `name` in RUN lines with the tool's path."""
    path = lit_config.params.get(name)
    if not path and dirs:
        path = lit.util.which(name, os.pathsep.join(dirs))
    if not path:
        # Leave the bare name: the test then fails with "command not found",
        # which is the right outcome for a suite that uses a tool it does not
        # list in its lit_suite's `tools`.
        path = name
        if not _running_under_bazel:
            lit_config.note(
                "%s not found in %s (run `bazel build //tools/...`)"
                % (name, os.pathsep.join(dirs))
            )
    config.substitutions.append((_tool_pattern(name), path))


for _tool in ("nimble-opt", "nimblec", "nimble-run"):
    _add_tool(_tool, _tools_dirs)
# `--param nimblec_flags=--kernels=native` runs a suite with every nimblec
# call given those flags (the kernel-path matrix: test/e2e/BUILD, test/models).
if lit_config.params.get("nimblec_flags"):
    _pattern, _path = config.substitutions[-2]
    config.substitutions[-2] = (_pattern, _path + " " + lit_config.params["nimblec_flags"])
    config.available_features.add("nimblec-flags")
    # test/e2e:lit_cuda_host: programs placed for cuda, run on the host.
    if "--target=cuda" in lit_config.params["nimblec_flags"]:
        config.available_features.add("target-cuda")
# `--param nimble_run_flags=--kernels=library` likewise for every nimble-run
# call (a RUN line that passes the tool to a script as an argument cannot take
# flags: such tests say `UNSUPPORTED: nimble-run-flags`).
if lit_config.params.get("nimble_run_flags"):
    _pattern, _path = config.substitutions[-1]
    config.substitutions[-1] = (_pattern, _path + " " + lit_config.params["nimble_run_flags"])
    config.available_features.add("nimble-run-flags")
# Suites whose fused kernels run on the reference kernels (lit_reference,
# lit_cuda_host): their member-by-member interpreter allocates its temporaries
# from the pool on every call, so counts of the program's own allocations
# (test/e2e/loop-views-allocations.test) do not hold there.
if "--kernels=reference" in (lit_config.params.get("nimblec_flags", "") + " " +
                             lit_config.params.get("nimble_run_flags", "")):
    config.available_features.add("reference-kernels")
# Test-only drivers live beside their suites (test/vm/kernel-runner): under
# Bazel they arrive through the suite's `tools`, i.e. in tools_dir.
_add_tool(
    "kernel-runner",
    _tools_dirs + ([] if _running_under_bazel else [os.path.join(_repo_root, "bazel-bin", "test", "vm")]),
)
for _tool in ("FileCheck", "not", "count", "split-file"):
    _add_tool(_tool, _llvm_tools_dirs)
# The CUDA toolkit's ptxas (test/cuda): tests that assemble PTX say
# `REQUIRES: ptxas` and lit reports them UNSUPPORTED where it is absent
# (`--param ptxas=<path>` points at another one).
_ptxas = lit_config.params.get("ptxas") or "/usr/local/cuda/bin/ptxas"
if os.path.exists(_ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", _ptxas))
else:
    lit_config.note("no ptxas at %s: the tests that need it are skipped" % _ptxas)
# The toolkit's headers (test/cuda/cuda-abi.test checks vm/cuda/CudaApi.h against
# them) and a host C++ compiler to read them.
_cuda_include = lit_config.params.get("cuda_include") or "/usr/local/cuda/include"
if os.path.exists(os.path.join(_cuda_include, "cuda.h")) and os.path.exists("/usr/bin/g++"):
    config.available_features.add("cuda-headers")
    config.substitutions.append(("%cuda_include", _cuda_include))
    config.substitutions.append(("%host_cxx", "/usr/bin/g++"))
else:
    lit_config.note("no CUDA headers at %s: the ABI check is skipped" % _cuda_include)
config.substitutions.append(("%python", _PYTHON))
# `%expect-exit N cmd args...`: cmd must exit with status N and not crash
# (lit's internal shell has no `$?`).
config.substitutions.append(
    ("%expect-exit", _PYTHON + " " + os.path.join(config.test_source_root, "expect_exit.py"))
)

# `%run-limited --as-kb N [--cpu S] [--exit N] cmd args...`: cmd under
# `ulimit -v N` and a CPU-time limit (run_limited.py). ASan cannot run under an
# address-space limit: there only the limit on memory is dropped.
config.substitutions.append(
    ("%run-limited", _PYTHON + " " + os.path.join(config.test_source_root, "run_limited.py")
     + (" --no-as" if "asan" in config.available_features else ""))
)

# `%asan-sample`: the share of a numerics script's cases that a run executes
# (check_native_ops.py, exact_rules.py, check_op_grads.py: `--sample=K`).
# All of them in the plain build; under ASan every fourth case (each script
# says which it always keeps): there the same runtime code runs for every
# case of an op, the generated kernels are not instrumented, and every
# process costs 40-100 ms to start (CI's ASan run was over its time).
config.substitutions.append(
    ("%asan-sample", "--sample=4" if "asan" in config.available_features else "--sample=1")
)

# `%asan-time-scale`: the factor of a time-bounded script's budget
# (difftest.py --time-limit): a third under ASan, where the same seconds buy
# a quarter of the programs; 1 in the plain build.
config.substitutions.append(
    ("%asan-time-scale", "--time-scale=0.33" if "asan" in config.available_features else "--time-scale=1")
)

# `%fail-alloc [options] -- nimble-run-args...`: every allocation of a
# nimble-run call failed in turn (fail_alloc.py, vm/support/FailAlloc.h).
config.substitutions.append(
    ("%fail-alloc", _PYTHON + " " + os.path.join(config.test_source_root, "fail_alloc.py"))
)


# The format (NimbleShTest: lit's ShTest plus the automatic .nir round trip)
# is in nimble_lit_format.py beside this file; see there why.
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nimble_lit_format import NimbleShTest  # noqa: E402

# execute_external=False: lit's internal shell (portable, and it shows each
# failing command with its output).
config.test_format = NimbleShTest(execute_external=False)
