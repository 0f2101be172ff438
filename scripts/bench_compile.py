#!/usr/bin/env python3
"""Compile time and peak memory of nimblec on generated programs of chosen shape
and size (issue 23; docs/perf.md, "Compile time at scale").

    python3 scripts/bench_compile.py [--shapes a,b,...] [--sizes 1000,10000,...]
        [--levels 0,2] [--reps R] [--timeout S] [--nimblec PATH] [--passes]
        [--kernels reference|native] [--json FILE] [--markdown]
    python3 scripts/bench_compile.py --check-ratio 5000,20000,8 [--shapes ...]
    python3 scripts/bench_compile.py --emit SHAPE SIZE        # print the program

Each shape is a generator of `.nir` programs of about N operations (the op
count is exact and reported: every op line, terminators included):

  chain-fusable    one function, a chain of element-wise ops (tanh, sigmoid,
                   add of a parameter) over tensor<?x8xf32>: fuse groups them
  chain-unfusable  one function, a chain of matmuls with a `?` batch dimension
                   (the example of issue 23): every op its own kernel
  wide-dag         one function, N/2 independent ops off the parameter, summed
                   by a balanced tree of adds: N/2 values live at once
  many-functions   N/9 functions of 8 ops each (never inlined), all called
                   from @main in turn
  inlined-calls    the same, inlinable: -O2 inlines every call into @main
  deep-calls       N/8 functions of 8 ops each, each calling the next
  loop-blocks      one loop whose body is a sequence of N/7 diamonds
                   (cond_br on a reduction, two arms, a join): many blocks
  big-adt          an ADT with N/3 constructors and a function that matches
                   on it, one case block per constructor

For each shape, size and -O level it runs `nimblec -O<l> --time-passes
--kernels=K` (the output bytecode goes to a temporary file; K is `reference`
unless --kernels says otherwise: the IR pipeline and the bytecode, which
issue 23's bounds are about and which every figure in docs/perf.md's compile
tables measured; `native`, nimblec's default, adds LLVM's code generation of
every distinct kernel), taking the minimum CPU time (user +
system, from the child's rusage) over `--reps` runs (the machine is shared: on
a loaded 2-core box wall time counts other processes too, so it is printed but
not used) and the peak resident set of the child (ru_maxrss, measured through
a small launcher process: see LAUNCHER), and prints the
per-pass times of the fastest run (wall times scaled to its CPU time). The
growth exponent of a shape is the least-squares slope of log(time) against
log(ops) over the sizes measured (1.0: linear; 2.0: quadratic).

--check-ratio N1,N2,MAX compiles every shape at N1 and N2 ops (-O0 and -O2),
the two sizes alternating `--reps` times (each keeps its minimum), and exits 1
when t(N2)/t(N1) exceeds MAX for any of them: a ratio, not an
absolute time, so a slow or loaded machine does not fail it (the CI test,
test/scripts/compile-scaling.test). Times below 20 ms are raised to 20 ms
before the ratio (process start-up dominates there).
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---- Generators ---------------------------------------------------------------
# Each returns (text, number of ops). Value names are unique per function.

T = "tensor<?x8xf32>"


def gen_chain_fusable(n):
    lines = ["module @chain_fusable", "",
             f"func @main(%x0: {T}, %b: tensor<8xf32>) -> {T} {{"]
    ops = ["tanh %x{i}", "sigmoid %x{i}", "add %x{i}, %b"]
    for i in range(n - 1):
        lines.append(f"  %x{i + 1} = " + ops[i % 3].format(i=i))
    lines.append(f"  ret %x{n - 1}")
    lines.append("}")
    return "\n".join(lines) + "\n", n


def gen_chain_unfusable(n):
    lines = ["module @chain_unfusable", "",
             f"func @main(%x0: {T}, %w: tensor<8x8xf32>) -> {T} {{"]
    for i in range(n - 1):
        lines.append(f"  %x{i + 1} = matmul %x{i}, %w")
    lines.append(f"  ret %x{n - 1}")
    lines.append("}")
    return "\n".join(lines) + "\n", n


def gen_wide_dag(n):
    # k leaves (alternating unfusable matmul and element-wise ops so that both
    # kinds of value are live), k-1 adds, one ret: 2k ops.
    k = max(2, n // 2)
    lines = ["module @wide_dag", "",
             f"func @main(%x: {T}, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> {T} {{"]
    level = []
    leaf_ops = ["matmul %x, %w", "add %x, %b", "sub %x, %b", "mul %x, %b"]
    # Distinct leaves so that CSE cannot merge them: chain each from the last
    # of the same kind every 4 ops would serialise the DAG; instead vary the
    # operand (the previous leaf of the same kind, every 4th leaf from %x).
    for i in range(k):
        src = "%x" if i < 4 else f"%l{i - 4}"
        op = leaf_ops[i % 4].replace("%x", src)
        lines.append(f"  %l{i} = {op}")
        level.append(f"%l{i}")
    c = 0
    while len(level) > 1:
        nxt = []
        for j in range(0, len(level) - 1, 2):
            lines.append(f"  %s{c} = add {level[j]}, {level[j + 1]}")
            nxt.append(f"%s{c}")
            c += 1
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    lines.append(f"  ret {level[0]}")
    lines.append("}")
    return "\n".join(lines) + "\n", k + c + 1


def _small_body(lines, x, tag):
    # 7 ops from %x (a parameter of type T), the last result %{tag}_6.
    lines.append(f"  %{tag}_0 = matmul {x}, %w")
    lines.append(f"  %{tag}_1 = tanh %{tag}_0")
    lines.append(f"  %{tag}_2 = matmul %{tag}_1, %w")
    lines.append(f"  %{tag}_3 = sigmoid %{tag}_2")
    lines.append(f"  %{tag}_4 = add %{tag}_3, {x}")
    lines.append(f"  %{tag}_5 = matmul %{tag}_4, %w")
    lines.append(f"  %{tag}_6 = relu %{tag}_5")
    return f"%{tag}_6"


def gen_inlined_calls(n):
    text, ops = gen_many_functions(n)
    return text.replace(' attributes {inline = "never"}', "").replace("@many_functions", "@inlined_calls"), ops


def gen_many_functions(n):
    f = max(1, (n - 1) // 9)
    lines = ["module @many_functions", ""]
    ops = 0
    for i in range(f):
        # Never inlined: every function stays a function until codegen.
        lines.append(f"func @f{i}(%x: {T}, %w: tensor<8x8xf32>) -> {T} attributes {{inline = \"never\"}} {{")
        r = _small_body(lines, "%x", "v")
        lines.append(f"  ret {r}")
        lines.append("}")
        lines.append("")
        ops += 8
    lines.append(f"func @main(%x: {T}, %w: tensor<8x8xf32>) -> {T} {{")
    prev = "%x"
    for i in range(f):
        lines.append(f"  %y{i} = call @f{i}({prev}, %w)")
        prev = f"%y{i}"
    lines.append(f"  ret {prev}")
    lines.append("}")
    ops += f + 1
    return "\n".join(lines) + "\n", ops


def gen_deep_calls(n):
    f = max(1, n // 9)
    lines = ["module @deep_calls", ""]
    ops = 0
    for i in range(f):
        lines.append(f"func @f{i}(%x: {T}, %w: tensor<8x8xf32>) -> {T} {{")
        r = _small_body(lines, "%x", "v")
        ops += 7
        if i + 1 < f:
            lines.append(f"  %c = call @f{i + 1}({r}, %w)")
            r = "%c"
            ops += 1
        lines.append(f"  ret {r}")
        ops += 1
        lines.append("}")
        lines.append("")
    return "\n".join(lines) + "\n", ops


def gen_loop_blocks(n):
    d = max(1, (n - 6) // 7)
    lines = ["module @loop_blocks", "",
             f"func @main(%x: {T}, %n: tensor<i64>) -> {T} {{",
             "^entry:",
             "  %zero = constant 0 : tensor<i64>",
             "  %one = constant 1 : tensor<i64>",
             "  %zf = constant 0.0 : tensor<f32>",
             "  br ^loop(%zero, %x)",
             f"^loop(%i: tensor<i64>, %h: {T}):",
             "  %done = greater_equal %i, %n",
             "  cond_br %done, ^exit(%h), ^d0(%h)"]
    ops = 6
    for j in range(d):
        lines += [f"^d{j}(%v{j}: {T}):",
                  f"  %s{j} = sum %v{j}",
                  f"  %c{j} = greater %s{j}, %zf",
                  f"  cond_br %c{j}, ^t{j}, ^e{j}",
                  f"^t{j}:",
                  f"  %a{j} = tanh %v{j}",
                  f"  br ^d{j + 1}(%a{j})",
                  f"^e{j}:",
                  f"  %b{j} = sigmoid %v{j}",
                  f"  br ^d{j + 1}(%b{j})"]
        ops += 7
    lines += [f"^d{d}(%v{d}: {T}):",
              "  %i1 = add %i, %one",
              f"  br ^loop(%i1, %v{d})",
              f"^exit(%r: {T}):",
              "  ret %r",
              "}"]
    ops += 3
    return "\n".join(lines) + "\n", ops


def gen_big_adt(n):
    k = max(2, n // 3)
    ctors = " | ".join(f"C{i}({T})" for i in range(k))
    lines = ["module @big_adt", "", f"type @T = {ctors}", "",
             "func @main(%t: @T) -> @T {",
             "  match %t [" + ", ".join(f"C{i}: ^c{i}" for i in range(k)) + "]"]
    for i in range(k):
        lines += [f"^c{i}(%v{i}: {T}):",
                  f"  %a{i} = tanh %v{i}",
                  f"  %r{i} = construct @T::C{(i + 1) % k}(%a{i})",
                  f"  ret %r{i}"]
    lines.append("}")
    return "\n".join(lines) + "\n", 3 * k + 1


SHAPES = {
    "chain-fusable": gen_chain_fusable,
    "chain-unfusable": gen_chain_unfusable,
    "wide-dag": gen_wide_dag,
    "many-functions": gen_many_functions,
    "inlined-calls": gen_inlined_calls,
    "deep-calls": gen_deep_calls,
    "loop-blocks": gen_loop_blocks,
    "big-adt": gen_big_adt,
}

# ---- Running nimblec ------------------------------------------------------------

TIMING_ROW = re.compile(r"^\s+([0-9.]+) \(\s*[0-9.]+%\)\s+(\S.*)$")


def find_nimblec():
    for cand in (os.path.join(REPO, "bazel-bin", "tools", "nimblec"),):
        if os.access(cand, os.X_OK):
            return cand
    return "nimblec"


KERNELS = "reference"  # nimblec --kernels (--kernels)


# Linux keeps a process's peak resident set across exec (the old image's
# high-water mark becomes the floor of ru_maxrss), so a compiler started
# straight from this script, which holds the generated program text, would
# report at least this script's own peak (200 MB at 1,000,000 ops). A small
# launcher, a fresh interpreter whose own size is then the floor, starts the
# compiler and reports the compiler's rusage on a last line of its stderr.
LAUNCHER = r"""
import os, subprocess, sys
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = p.stderr.read()
_, status, ru = os.wait4(p.pid, 0)
sys.stderr.buffer.write(err)
sys.stderr.write("\nBENCH-RUSAGE %r %r %d %d\n" % (ru.ru_utime, ru.ru_stime, ru.ru_maxrss,
                                                  os.waitstatus_to_exitcode(status)))
"""
RUSAGE_ROW = re.compile(r"^BENCH-RUSAGE (\S+) (\S+) (\d+) (-?\d+)$")


def run_once(nimblec, src, level, timeout):
    """One compilation: (seconds, peak RSS bytes, {pass: seconds}) or None on timeout."""
    with tempfile.TemporaryDirectory(prefix="bench_compile.") as tmp:
        out = os.path.join(tmp, "out.nbc")
        t0 = time.perf_counter()
        cmd = [nimblec, f"-O{level}", "--time-passes", "--kernels=" + KERNELS, src, "-o", out]
        # Its own session: a timeout ends the launcher and the compiler.
        proc = subprocess.Popen([sys.executable, "-c", LAUNCHER] + cmd, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            stderr = proc.communicate(timeout=max(0.0, t0 + timeout - time.perf_counter()))[1]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.communicate()
            return None
        wall = time.perf_counter() - t0
        stderr = stderr.decode(errors="replace")
        lines = stderr.splitlines()
        m = RUSAGE_ROW.match(lines[-1]) if lines else None
        if not m:
            return ("error", "the launcher did not report the compiler's rusage: " + (lines[-1] if lines else "(nothing)"))
        # CPU time (user + system) of the compiler: on a shared machine the
        # wall time also counts the time other processes held the cores.
        secs = float(m.group(1)) + float(m.group(2))
        maxrss = int(m.group(3)) * 1024
        if int(m.group(4)) != 0:
            # A limit of the format (e.g. registers per function) is a result
            # worth recording, not a reason to stop the whole table.
            last = [l for l in lines[:-1] if l.strip()][-1:] or ["(no message)"]
            return ("error", last[0])
        passes = {}
        for line in lines[:-1]:
            t = TIMING_ROW.match(line)
            if t and t.group(2) != "Total":
                passes[t.group(2)] = passes.get(t.group(2), 0.0) + float(t.group(1)) / 1e3
        # Per-pass figures are wall times; scale them to the CPU time so they
        # add up to (at most) the total under contention.
        scale = min(1.0, secs / wall) if wall > 0 else 1.0
        return secs, maxrss, {k: v * scale for k, v in passes.items()}, wall


def measure(nimblec, shape, size, level, reps, timeout, workdir):
    text, ops = SHAPES[shape](size)
    src = os.path.join(workdir, f"{shape}-{size}.nir")
    with open(src, "w") as f:
        f.write(text)
    best = None
    for _ in range(reps):
        r = run_once(nimblec, src, level, timeout)
        if r is None:
            return {"shape": shape, "size": size, "ops": ops, "level": level, "timeout": timeout}
        if r[0] == "error":
            return {"shape": shape, "size": size, "ops": ops, "level": level, "error": r[1]}
        if best is None or r[0] < best[0]:
            best = (r[0], max(r[1], best[1]) if best else r[1], r[2], r[3])
        else:
            best = (best[0], max(best[1], r[1]), best[2], best[3])
    os.unlink(src)
    return {"shape": shape, "size": size, "ops": ops, "level": level, "seconds": best[0],
            "wall": best[3], "peak_bytes": best[1], "passes": best[2]}


def exponent(rows):
    pts = [(math.log(r["ops"]), math.log(max(r["seconds"], 1e-3))) for r in rows if "seconds" in r]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def fmt_row(r, with_passes):
    if "error" in r:
        return f"{r['shape']:16} {r['ops']:>9} -O{r['level']}  failed: {r['error']}"
    if "seconds" not in r:
        return f"{r['shape']:16} {r['ops']:>9} -O{r['level']}  > {r['timeout']:.0f} s (stopped)"
    s = (f"{r['shape']:16} {r['ops']:>9} -O{r['level']}  {r['seconds']:8.3f} s cpu ({r['wall']:7.2f} wall)  "
         f"{r['peak_bytes'] / 2**20:8.1f} MiB  {r['peak_bytes'] / r['ops']:7.0f} B/op  "
         f"{r['ops'] / r['seconds']:9.0f} ops/s")
    if with_passes and r["passes"]:
        top = sorted(r["passes"].items(), key=lambda kv: -kv[1])[:4]
        s += "  [" + ", ".join(f"{k} {v:.3f}" for k, v in top) + "]"
    return s


def check_ratio(args, nimblec, workdir):
    n1, n2, limit = args.check_ratio.split(",")
    n1, n2, limit = int(n1), int(n2), float(limit)
    bad = []
    for shape in args.shapes:
        for level in args.levels:
            # The two sizes alternate (small, large, small, large, ...), so a
            # change of load on the machine hits both; each keeps its minimum.
            a = b = None
            for _ in range(args.reps):
                ra = measure(nimblec, shape, n1, level, 1, args.timeout, workdir)
                rb = measure(nimblec, shape, n2, level, 1, args.timeout, workdir)
                if a is None or ("seconds" in ra and ra["seconds"] < a.get("seconds", float("inf"))):
                    a = ra
                if b is None or ("seconds" in rb and rb["seconds"] < b.get("seconds", float("inf"))):
                    b = rb
            if "error" in a or "error" in b:
                print(f"{shape:16} -O{level}  failed: {a.get('error') or b.get('error')}")
                bad.append(f"{shape} -O{level}")
                continue
            if "seconds" not in a or "seconds" not in b:
                ratio = float("inf")
            else:
                ratio = max(b["seconds"], 0.02) / max(a["seconds"], 0.02)
            verdict = "ok" if ratio <= limit else "SUPERLINEAR"
            print(f"{shape:16} -O{level}  {a['ops']:>7} ops {a.get('seconds', float('inf')):7.3f} s"
                  f"  {b['ops']:>7} ops {b.get('seconds', float('inf')):7.3f} s"
                  f"  ratio {ratio:5.2f} (max {limit:g})  {verdict}", flush=True)
            if ratio > limit:
                bad.append(f"{shape} -O{level}")
    if bad:
        print("superlinear compile time: " + ", ".join(bad))
        return 1
    print(f"all {len(args.shapes) * len(args.levels)} ratios within {limit:g}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--levels", default="0,2")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per compilation")
    ap.add_argument("--nimblec", default=None)
    ap.add_argument("--passes", action="store_true", help="print the slowest passes of each run")
    ap.add_argument("--kernels", default="reference", choices=["reference", "native"],
                    help="nimblec --kernels (default %(default)s: the pipeline and bytecode alone)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", action="store_true", help="print a table for docs/perf.md")
    ap.add_argument("--check-ratio", default=None, metavar="N1,N2,MAX")
    ap.add_argument("--emit", nargs=2, metavar=("SHAPE", "SIZE"))
    args = ap.parse_args()

    if args.emit:
        sys.stdout.write(SHAPES[args.emit[0]](int(args.emit[1]))[0])
        return 0
    args.shapes = [s for s in args.shapes.split(",") if s]
    for s in args.shapes:
        if s not in SHAPES:
            ap.error(f"unknown shape '{s}' (known: {', '.join(SHAPES)})")
    args.levels = [int(l) for l in args.levels.split(",")]
    sizes = [int(s) for s in args.sizes.split(",")]
    nimblec = args.nimblec or find_nimblec()
    global KERNELS
    KERNELS = args.kernels

    with tempfile.TemporaryDirectory(prefix="bench_compile.") as workdir:
        if args.check_ratio:
            return check_ratio(args, nimblec, workdir)
        rows = []
        for shape in args.shapes:
            for level in args.levels:
                stopped = False
                for size in sizes:
                    if stopped:
                        break
                    r = measure(nimblec, shape, size, level, args.reps, args.timeout, workdir)
                    rows.append(r)
                    print(fmt_row(r, args.passes), flush=True)
                    stopped = "seconds" not in r
        print()
        print("growth exponents (slope of log time over log ops):")
        for shape in args.shapes:
            for level in args.levels:
                e = exponent([r for r in rows if r["shape"] == shape and r["level"] == level])
                print(f"  {shape:16} -O{level}  {e:.2f}" if e is not None else f"  {shape:16} -O{level}  -")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
        if args.markdown:
            print()
            print("| shape | ops | -O0 s | -O0 MiB | -O2 s | -O2 MiB | -O2 B/op | -O2 ops/s | slowest -O2 pass |")
            print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
            for shape in args.shapes:
                for size in sizes:
                    r0 = next((r for r in rows if r["shape"] == shape and r["size"] == size and r["level"] == 0), None)
                    r2 = next((r for r in rows if r["shape"] == shape and r["size"] == size and r["level"] == 2), None)
                    if not r0 and not r2:
                        continue
                    ops = (r2 or r0)["ops"]

                    def cell(r, key):
                        if r is None:
                            return "-"
                        if "error" in r:
                            return "fails (see below)" if key == "s" else "-"
                        if "seconds" not in r:
                            return f"> {r['timeout']:.0f}" if key == "s" else "-"
                        if key == "s":
                            return f"{r['seconds']:.2f}"
                        if key == "mib":
                            return f"{r['peak_bytes'] / 2**20:.0f}"
                        if key == "bop":
                            return f"{r['peak_bytes'] / r['ops']:.0f}"
                        if key == "ops":
                            return f"{r['ops'] / r['seconds']:,.0f}"
                        if key == "pass":
                            if not r["passes"]:
                                return "-"
                            k, v = max(r["passes"].items(), key=lambda kv: kv[1])
                            return f"{k} {v:.2f} s"
                    print(f"| {shape} | {ops:,} | {cell(r0, 's')} | {cell(r0, 'mib')} | {cell(r2, 's')} | "
                          f"{cell(r2, 'mib')} | {cell(r2, 'bop')} | {cell(r2, 'ops')} | {cell(r2, 'pass')} |")
            print()
            print("| shape | exponent -O0 | exponent -O2 |")
            print("|---|---:|---:|")
            for shape in args.shapes:
                e0 = exponent([r for r in rows if r["shape"] == shape and r["level"] == 0])
                e2 = exponent([r for r in rows if r["shape"] == shape and r["level"] == 2])
                f0 = f"{e0:.2f}" if e0 is not None else "-"
                f2 = f"{e2:.2f}" if e2 is not None else "-"
                print(f"| {shape} | {f0} | {f2} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
