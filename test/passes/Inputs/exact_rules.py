"""Exactness of canonicalize's rules on IEEE special values (issue 20).

usage: exact_rules.py TABLE WORK_DIR [--tools=DIR] [--compile-arg=ARG]... [--run-arg=ARG]...
                      [--only=RULE] [--sample=K]

Each entry of TABLE (exact-rules.txt beside this script; its header says the
format) is one rewrite rule of `canonicalize` (passes/transforms/Canonicalize.cpp) or
of its constant folder (passes/transforms/ConstantFold.cpp), written as the body of a
small function, instantiated for each element type it lists. For every
(rule, dtype) the driver

  1. builds one function @<rule>_<dtype> in one module (so that nimble-opt
     and nimblec run once for all: canonicalize rewrites each function on its
     own, so every function sees its rule alone);
  2. runs `nimble-opt --passes=canonicalize` and checks that the rule fired:
     each op named in `gone` has left the function (a rule that silently stops
     firing would make the comparison vacuous) and each op in `kept` is still
     there (a rule that must not fire);
  3. compiles the original and the rewritten module with `nimblec -O0` (no
     other rewrite runs at -O0) and runs both functions with `nimble-run` on
     the dtype's special values (the `X` input: +-0, +-inf, NaN, the smallest
     and largest subnormals, the smallest normal, the largest finite values,
     and ordinary numbers; for integers the minimum and maximum and their
     neighbours), written as .npy files so every bit is exact;
  4. compares the two results bit for bit, a NaN equal to any NaN; and the
     original compiled at -O2 (the whole pipeline: inline, fuse, memory
     planning, ...) against -O0 the same way.

`--compile-arg` is passed to every nimblec (`--compile-arg=--kernels=native`
checks the same table on the native kernels), `--run-arg` to every nimble-run. Prints one
line per (rule, dtype) and a total; exits 1 on any difference or failure.

`--sample=K` runs (steps 3-4) only every K-th (rule, dtype), the first
included; steps 1-2 (nimble-opt and nimblec over the whole module) still
cover all of them. lit passes `%asan-sample`: K = 4 under ASan, where the
~3200 nimble-run processes (541 functions, 3 programs, 2 kernel paths) cost
~100 ms each to start and load the module; 1 (everything) in the plain build.
The nimble-run calls go `os.cpu_count()` at a time.
"""
import concurrent.futures
import os
import re
import subprocess
import sys

import numpy as np

NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64,
      "i8": np.int8, "i32": np.int32, "i64": np.int64, "i1": np.bool_,
      "i16": np.int16, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


# bf16 has no numpy type: its values are held as the f32 values they widen
# to (exactly), its inputs are passed as f32 and cast in the program, and its
# results are cast back to f32 (exact) before they leave the function.
BF16_BITS = [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x8001, 0x007F, 0x0080, 0x8080,
             0x7F7F, 0xFF7F, 0x3F80, 0xBF80, 0x3F00, 0x4000, 0xC020, 0x4040, 0x3A83, 0xC0E0]


def bf16_bits(v):
    """The bf16 bits of `v` rounded to nearest even (through f32)."""
    u = int(np.array(v, dtype=np.float32).view(np.uint32))
    if np.isnan(np.float32(v)):
        return (u >> 16) | 0x40
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def special_values(dt):
    """The values every rule is checked on, for element type `dt`."""
    if dt == "bf16":
        return (np.array(BF16_BITS, dtype=np.uint32) << 16).view(np.float32)
    t = NP[dt]
    if dt == "i1":
        return np.array([False, True], dtype=t)
    if np.issubdtype(t, np.unsignedinteger):
        i = np.iinfo(t)
        return np.array([0, 1, 2, 7, 128, i.max // 2, i.max // 2 + 1, i.max - 1, i.max], dtype=t)
    if np.issubdtype(t, np.integer):
        i = np.iinfo(t)
        return np.array([i.min, i.min + 1, -7, -2, -1, 0, 1, 2, 7, i.max - 1, i.max], dtype=t)
    f = np.finfo(t)
    tiny_sub = np.array(1, dtype=UINT[f.bits // 8]).view(t)           # smallest subnormal
    max_sub = np.array(f.smallest_normal, dtype=t).view(UINT[f.bits // 8]) - 1
    max_sub = np.array(max_sub, dtype=UINT[f.bits // 8]).view(t)       # largest subnormal
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, tiny_sub, -tiny_sub, max_sub,
            f.smallest_normal, -f.smallest_normal, f.max, -f.max, 1.0, -1.0, 0.5, 2.0,
            -2.5, 3.0, 1e-3, -7.0]
    return np.array(vals, dtype=t)


def literal(dt, v):
    """A .nir literal with exactly the bits of `v` (hex for floats)."""
    if dt == "bf16":
        return "0x%X" % bf16_bits(v)
    t = NP[dt]
    a = np.array(v, dtype=t)
    if dt == "i1":
        return "true" if bool(a) else "false"
    if np.issubdtype(t, np.integer):
        return str(int(a))
    return "0x%X" % int(a.view(UINT[a.itemsize]))


def list_literal(dt, vals):
    return "[" + ", ".join(literal(dt, v) for v in vals) + "]"


def parse_table(path):
    """Entries: dicts with name, dtypes, gone, kept, result, body."""
    entries, cur = [], None
    with open(path) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.startswith("#") or not line.strip():
                continue
            m = re.match(r"^\[([\w-]+)\]$", line)
            if m:
                cur = {"name": m.group(1), "dtypes": [], "gone": [], "kept": [],
                       "param": "tensor<?x{T}>", "result": "tensor<?x{T}>", "body": []}
                entries.append(cur)
                continue
            m = re.match(r"^(\w+)\s*=\s*(.*)$", line)
            if m and not line.startswith(" "):
                key, val = m.group(1), m.group(2).strip()
                if key in ("dtypes", "gone", "kept"):
                    cur[key] = val.split()
                elif key in ("param", "result"):
                    cur[key] = val
                else:
                    raise SystemExit("%s: unknown key '%s'" % (path, key))
                continue
            cur["body"].append(line.strip())
    return entries


def instantiate(e, dt):
    """The function text of entry `e` for dtype `dt`."""
    xs = special_values(dt)
    n = len(xs)
    # Pairs for binary folds: A[i*n+j] = xs[i], B[i*n+j] = xs[j].
    a = np.repeat(xs, n)
    b = np.tile(xs, n)
    subst = {
        "T": dt,
        "N": str(n),
        "NN": str(n * n),
        "X": list_literal(dt, xs),
        "A": list_literal(dt, a),
        "B": list_literal(dt, b),
        "Bnz": list_literal(dt, np.where(b == 0, np.ones_like(b), b)),
        "P": "[" + ", ".join(list_literal(dt, pair) for pair in zip(a, b)) + "]",
    }

    def rep(m):
        k = m.group(1)
        if k in subst:
            return subst[k]
        if k.startswith("v:"):  # {v:-0.0}: one value of the dtype, exact bits
            return literal(dt, float(k[2:]))
        raise SystemExit("unknown placeholder {%s} in [%s]" % (k, e["name"]))

    name = "%s_%s" % (e["name"].replace("-", "_"), dt)
    body = "\n".join("  " + re.sub(r"\{([^}]+)\}", rep, l) for l in e["body"])
    result = re.sub(r"\{([^}]+)\}", rep, e["result"])
    takes_x = re.search(r"%x\b", body) is not None
    params = "%x: " + re.sub(r"\{([^}]+)\}", rep, e["param"]) if takes_x else ""
    ret = "%y"
    # bf16 in and out as f32 (see BF16_BITS).
    if dt == "bf16" and takes_x:
        params = params.replace("bf16", "f32").replace("%x:", "%x_f32:")
        body = "  %x = cast %x_f32, dtype=bf16\n" + body
    if "bf16" in result:
        result = result.replace("bf16", "f32")
        body += "\n  %y_f32 = cast %y, dtype=f32"
        ret = "%y_f32"
    return name, takes_x, "func @%s(%s) -> %s {\n%s\n  ret %s\n}\n" % (name, params, result, body, ret)


def function_ops(text, name):
    """The op mnemonics of function @name in printed IR."""
    m = re.search(r"^func @%s\(.*?^}" % re.escape(name), text, re.S | re.M)
    if not m:
        return None
    return re.findall(r"=\s*([a-z_]+)\b", m.group(0))


def same_bits(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if np.issubdtype(a.dtype, np.floating):
        ua, ub = a.view(UINT[a.itemsize]), b.view(UINT[b.itemsize])
        return bool(np.all((ua == ub) | (np.isnan(a) & np.isnan(b))))
    return bool(np.array_equal(a, b))


def describe(a, b, e, dt):
    """The first differing elements, with the input values they came from."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return "%s%s vs %s%s" % (a.dtype, a.shape, b.dtype, b.shape)
    fa, fb = a.reshape(-1), b.reshape(-1)
    bad = [i for i in range(fa.size) if not same_bits(fa[i:i + 1], fb[i:i + 1])]
    xs = special_values(dt)
    n = len(xs)
    out = []
    for i in bad[:4]:
        where = "x=%r" % xs[i] if fa.size == n else "(a, b)=(%r, %r)" % (xs[i // n], xs[i % n]) \
            if fa.size == n * n else "element %d" % i
        out.append("%s: original %r, rewritten %r" % (where, fa[i], fb[i]))
    return "%d elements, e.g. %s" % (len(bad), "; ".join(out))


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = [a for a in sys.argv[1:] if a.startswith("--")]
    table, work = args[0], args[1]
    tools = next((o.split("=", 1)[1] for o in opts if o.startswith("--tools=")), None)
    run_args = [o.split("=", 1)[1] for o in opts if o.startswith("--run-arg=")]
    compile_args = [o.split("=", 1)[1] for o in opts if o.startswith("--compile-arg=")]
    # Bit-for-bit comparisons need one pinned kernel path, not the measured
    # dispatch: native code when compiled in, else the reference kernels.
    if not any(a.startswith("--kernels=") for a in run_args):
        run_args.insert(0, "--kernels=native" if "--kernels=native" in compile_args else "--kernels=reference")
    only = next((o.split("=", 1)[1] for o in opts if o.startswith("--only=")), None)
    sample = int(next((o.split("=", 1)[1] for o in opts if o.startswith("--sample=")), "1"))
    if sample < 1:
        print("error: --sample expects a positive count")
        return 1

    def tool(n):
        return os.path.join(tools, n) if tools else n

    os.makedirs(work, exist_ok=True)
    entries = [e for e in parse_table(table) if not only or e["name"] == only]
    funcs = []  # (entry, dtype, fname, takes_x)
    text = ""
    for e in entries:
        for dt in e["dtypes"]:
            fname, takes_x, ftext = instantiate(e, dt)
            funcs.append((e, dt, fname, takes_x))
            text += ftext + "\n"
    orig = os.path.join(work, "rules.nir")
    with open(orig, "w") as f:
        f.write(text)
    canon = os.path.join(work, "rules.canon.nir")
    p = run([tool("nimble-opt"), orig, "--passes=type-infer,canonicalize", "-o", canon])
    if p.returncode:
        print("error: nimble-opt failed:\n" + p.stderr[:3000])
        return 1
    with open(canon) as f:
        canon_text = f.read()
    exes = {}
    for tag, src, level in (("orig", orig, "-O0"), ("canon", canon, "-O0"), ("O2", orig, "-O2")):
        exes[tag] = os.path.join(work, "rules.%s.nbc" % tag)
        p = run([tool("nimblec"), level, *compile_args, src, "-o", exes[tag]])
        if p.returncode:
            print("error: nimblec %s %s failed:\n%s" % (level, src, p.stderr[:3000]))
            return 1
    inputs = {}
    for e, dt, fname, takes_x in funcs:
        if takes_x and dt not in inputs:
            inputs[dt] = os.path.join(work, "x_%s.npy" % dt)
            np.save(inputs[dt], special_values(dt))

    def run_all(fname, run_in):
        """{tag: result array} of the three programs, and the failures."""
        results, problems = {}, []
        for tag, exe in exes.items():
            out = os.path.join(work, "%s.%s.npy" % (fname, tag))
            if os.path.exists(out):
                os.remove(out)
            p = run([tool("nimble-run"), exe, "--function=" + fname] + run_in +
                    ["--output=@" + out] + run_args)
            if p.returncode:
                problems.append("nimble-run (%s) failed: %s" % (tag, p.stderr.strip()))
            else:
                results[tag] = np.load(out)
        return results, problems

    sampled = [i % sample == 0 for i in range(len(funcs))]
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        runs = [pool.submit(run_all, fname, ["--input=@" + inputs[dt]] if takes_x else [])
                if sampled[i] else None
                for i, (e, dt, fname, takes_x) in enumerate(funcs)]
    failed = 0
    for (e, dt, fname, takes_x), future in zip(funcs, runs):
        ops = function_ops(canon_text, fname)
        problems = []
        if ops is None:
            problems.append("function missing after canonicalize")
        else:
            problems += ["'%s' was not rewritten" % g for g in e["gone"] if g in ops]
            problems += ["'%s' was rewritten but must stay" % k for k in e["kept"] if k not in ops]
        results = {}
        if future:
            results, run_problems = future.result()
            problems += run_problems
        if len(results) == 3 and not same_bits(results["orig"], results["canon"]):
            problems.append("results differ: " + describe(results["orig"], results["canon"], e, dt))
        if len(results) == 3 and not same_bits(results["orig"], results["O2"]):
            problems.append("-O2 differs from -O0: " + describe(results["orig"], results["O2"], e, dt))
        if problems:
            failed += 1
            print("error: %s: %s" % (fname, "; ".join(problems)))
        elif future:
            print("%s: exact" % fname)
        else:
            print("%s: rewritten as listed; not run (--sample=%d)" % (fname, sample))
    if sample == 1:
        print("total: %d/%d rule instances exact" % (len(funcs) - failed, len(funcs)))
    else:
        print("total: %d/%d rule instances pass: %d run and compared, the others' rewrites "
              "checked (--sample=%d)" % (len(funcs) - failed, len(funcs), sum(sampled), sample))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
