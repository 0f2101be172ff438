"""libFuzzer binaries built with clang-19, beside the project's own toolchain.

Usage (test/fuzz/BUILD):

    load("//build_defs:fuzz.bzl", "fuzz_binaries")

    fuzz_binaries(
        name = "fuzzers",
        fuzzers = {"nir-fuzzer": "NirFuzzer.cpp", ...},
        srcs = glob(["*.h"]),
        deps = ["//passes", "//codegen", "//vm"],
        # onnx-fuzzer alone also links the importer and protobuf.
        extra_deps = {"//frontend/onnx": "onnx-fuzzer"},
        extra_linkopts = ["-lonnx_proto", "-lprotobuf"],
    )

Why not `--config=fuzz` with a clang cc_toolchain: Bazel 4.2.3 configures its
C++ toolchain once per workspace from $CC (the auto-configured
@local_config_cc); a second compiler means either re-configuring it at every
switch (which throws away the whole C++ cache of the g++ build) or writing a
full cc_toolchain_config by hand, offline. Instead this rule runs
/usr/bin/clang++-19 directly, one action per source file, on exactly the
sources of the cc_library targets in `deps` and their dependencies (collected
by an aspect from the same BUILD files the normal build reads, so the source
lists cannot drift). Every object is compiled with
-fsanitize=fuzzer-no-link,address,undefined and each fuzzer is linked with
-fsanitize=fuzzer,address,undefined.

Only this workspace's own sources are compiled; external repositories
(nlohmann_json) are header-only and found in /usr/include.
"""

_FuzzSourcesInfo = provider(fields = ["srcs", "hdrs"])

_CLANG = "/usr/bin/clang++-19"

_COPTS = [
    "-std=c++20",
    "-g1",
    "-fno-omit-frame-pointer",
    "-fsanitize=fuzzer-no-link,address,undefined",
    "-fno-sanitize-recover=all",
    # The project defines it for its own fuzzing-only shortcuts (none yet):
    # the usual libFuzzer convention.
    "-DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION",
    "-I.",
    "-Wno-unused-command-line-argument",
]

_LINKOPTS = [
    "-fsanitize=fuzzer,address,undefined",
    "-fno-sanitize-recover=all",
    "-lpthread",
    "-ldl",
    # //vm:vm's library kernels: oneDNN and its OpenMP runtime (the
    # fuzzers link the project's sources directly, not the cc_library
    # targets, so these come from here rather than from vm/BUILD).
    "-ldnnl",
    "-lgomp",
]

def _sources_aspect_impl(target, ctx):
    srcs, hdrs = [], []
    if target.label.workspace_name == "" and ctx.rule.kind == "cc_library":
        srcs = [f for f in getattr(ctx.rule.files, "srcs", []) if f.extension in ("cc", "cpp")]
        hdrs = [f for f in getattr(ctx.rule.files, "srcs", []) if f.extension in ("h", "def", "inc")]
        hdrs += getattr(ctx.rule.files, "hdrs", [])
    deps = [d[_FuzzSourcesInfo] for d in getattr(ctx.rule.attr, "deps", []) if _FuzzSourcesInfo in d]
    return [_FuzzSourcesInfo(
        srcs = depset(srcs, transitive = [d.srcs for d in deps]),
        hdrs = depset(hdrs, transitive = [d.hdrs for d in deps]),
    )]

_sources_aspect = aspect(
    implementation = _sources_aspect_impl,
    attr_aspects = ["deps"],
)

def _compile(ctx, src, hdrs):
    obj = ctx.actions.declare_file("_fuzz_objs/%s/%s.o" % (ctx.label.name, src.short_path))
    level = ["-O1"] if ctx.attr.optimize else ["-O0"]
    for prefix in ctx.attr.unoptimized:
        if src.short_path.startswith(prefix):
            level = ["-O0"]
    ctx.actions.run(
        executable = _CLANG,
        arguments = _COPTS + level + ctx.attr.copts + ["-c", src.path, "-o", obj.path],
        inputs = depset([src], transitive = [hdrs]),
        outputs = [obj],
        env = {"PATH": "/usr/bin:/bin"},
        mnemonic = "FuzzCompile",
        progress_message = "clang-19 (fuzz) %s" % src.short_path,
    )
    return obj

def _objects(ctx, srcs, hdrs, objs):
    """The objects of `srcs`, each compiled once: `objs` (source path ->
    object) holds those compiled so far."""
    out = []
    for src in srcs:
        if src.path not in objs:
            objs[src.path] = _compile(ctx, src, hdrs)
        out.append(objs[src.path])
    return out

def _fuzz_binaries_impl(ctx):
    # Every source is compiled once, whichever fuzzers link it: the sources
    # of `deps` (every fuzzer) and those of each fuzzer's `extra_deps` not
    # already among them. (Two rules, one per set of deps, compiled all of
    # //vm, //passes and //codegen twice: a third of CI's build time.)
    infos = [d[_FuzzSourcesInfo] for d in ctx.attr.deps]
    extra = {}  # fuzzer name -> the _FuzzSourcesInfo of its extra deps
    for dep, fuzzer in ctx.attr.extra_deps.items():
        extra.setdefault(fuzzer, []).append(dep[_FuzzSourcesInfo])
    lib_hdrs = depset(transitive = [i.hdrs for i in infos] + [i.hdrs for l in extra.values() for i in l])
    objs = {}  # source path -> object
    common = _objects(ctx, depset(transitive = [i.srcs for i in infos]).to_list(), lib_hdrs, objs)

    # Only the fuzzers' own sources see `srcs`: editing a fuzzer's header
    # then recompiles the fuzzers, not the whole library.
    hdrs = depset(ctx.files.srcs, transitive = [lib_hdrs])
    outs = []
    for main_target, name in ctx.attr.fuzzers.items():
        main_obj = _compile(ctx, main_target.files.to_list()[0], hdrs)
        lib_objs = common
        linkopts = _LINKOPTS + ctx.attr.linkopts
        if name in extra:
            mine = depset(transitive = [i.srcs for i in extra[name]]).to_list()
            lib_objs = common + [o for o in _objects(ctx, mine, lib_hdrs, objs) if o not in common]
            linkopts = linkopts + ctx.attr.extra_linkopts
        exe = ctx.actions.declare_file(name)
        ctx.actions.run(
            executable = _CLANG,
            arguments = [main_obj.path] + [o.path for o in lib_objs] + linkopts + ["-o", exe.path],
            inputs = [main_obj] + lib_objs,
            outputs = [exe],
            # clang runs `ld` from PATH, which Bazel leaves empty here.
            env = {"PATH": "/usr/bin:/bin"},
            mnemonic = "FuzzLink",
            progress_message = "linking fuzzer %s" % name,
        )
        outs.append(exe)
    return [DefaultInfo(files = depset(outs), runfiles = ctx.runfiles(files = outs))]

_fuzz_binaries = rule(
    implementation = _fuzz_binaries_impl,
    attrs = {
        # main source -> binary name (label-keyed so each main is a file)
        "fuzzers": attr.label_keyed_string_dict(allow_files = [".cpp"]),
        "srcs": attr.label_list(allow_files = [".h"]),
        "deps": attr.label_list(aspects = [_sources_aspect]),
        # dep -> the fuzzer that also links it (with `extra_linkopts`).
        "extra_deps": attr.label_keyed_string_dict(aspects = [_sources_aspect]),
        # For the system libraries of external deps (their sources are not
        # compiled here; their defines and link flags are not collected).
        "copts": attr.string_list(),
        "linkopts": attr.string_list(),
        "extra_linkopts": attr.string_list(),
        "unoptimized": attr.string_list(),
        "optimize": attr.bool(),
    },
)

def fuzz_binaries(name, fuzzers, srcs = [], deps = [], extra_deps = {}, copts = [], linkopts = [],
                   extra_linkopts = [], unoptimized = [], **kwargs):
    """Builds one libFuzzer binary per entry of `fuzzers` (binary name ->
    main source), each linked with every source of `deps`; a fuzzer named
    in `extra_deps` (dep -> fuzzer name) also with that dep's sources and
    `extra_linkopts`. Each source is compiled once. `copts` and `linkopts`
    are added to every compile and link (an external system library's
    defines and -l flags).

    Optimization: -O0 by default, which is what CI builds (its fuzz:lit runs
    each fuzzer for seconds and replays the regression inputs; clang-19 with
    the sanitizers compiles 2-4x faster at -O0: ir/Parser.cpp 10.3 -> 5.7 s,
    passes/memory/PlanMemory.cpp 21.6 -> 11.1, vm/interpreter/Interpreter.cpp
    33.2 -> 8.0, Zen 4). `--define=nimble_fuzz_opt=1` (scripts/fuzz.sh, for
    campaigns) compiles at -O1, except the sources whose path starts with
    one of `unoptimized`."""
    _fuzz_binaries(
        name = name,
        fuzzers = {src: binary for binary, src in fuzzers.items()},
        srcs = srcs,
        deps = deps,
        extra_deps = extra_deps,
        copts = copts,
        linkopts = linkopts,
        extra_linkopts = extra_linkopts,
        unoptimized = unoptimized,
        optimize = select({
            "//build_defs:fuzz_opt": True,
            "//conditions:default": False,
        }),
        **kwargs
    )
