#!/usr/bin/python3
"""ONNX's backend node tests through nimble-import-onnx | nimblec | nimble-run.

    /usr/bin/python3 scripts/onnx_node_tests.py [options]

Each test of Debian's libonnx-testdata (a directory with model.onnx and
test_data_set_*/input_*.pb, output_*.pb) is imported, compiled at -O0 and
-O2, and run on each data set; every output is compared with the expected
one at the tolerance of ONNX's backend test runner (rtol 1e-3, atol 1e-7;
NaN equal to NaN), shape and dtype included. A test passes when every data
set matches at both levels.

The result is checked against the expected-failures list
(test/import-onnx/node-tests-xfail.txt: one test a line, then its reason
after a tab), which may only shrink: a failing test that the list does not
name, and a listed test that passes, are both errors (exit 1). `--write-xfail`
rewrites the list from this run (reason: the first line of the failure).

Options:
  --data=DIR        the node tests (default /usr/include/onnx/backend/test/data/node)
  --tools=DIR       where nimble-import-onnx, nimblec and nimble-run are
                    (default: bazel-bin/tools beside this script, else PATH;
                    PATH: from PATH, as lit sets it)
  --import-only     only import each model (a quick check of the importer, e.g.
                    under ASan): the tests listed as failing at import must
                    fail there with one error line, the others must import
  --xfail=FILE      the expected-failures list (default test/import-onnx/node-tests-xfail.txt)
  --write-xfail     rewrite it from this run instead of checking
  --filter=REGEX    only tests whose name matches
  --jobs=N          tests run at once (default 2)
  --timeout=S       limit of each tool run, in seconds (default 60)
  --verbose         print every test's result
  --peer=onnxruntime
                    ONNX Runtime's baseline instead (not in CI: ORT is an
                    optional peer): run each test's model on ORT's CPU
                    provider (the virtualenv of scripts/setup_peers.sh) at the
                    same tolerance, print "ORT passes N of M", then how many
                    of those pass through Nimble (a test passes through Nimble
                    unless the expected-failures list, which the CI run keeps
                    exact, names it) and the ones that do not, by op type
  --peers-venv=DIR  the virtualenv of --peer (default .peers-venv)

The baseline in one command (after bash scripts/setup_peers.sh):

    /usr/bin/python3 scripts/onnx_node_tests.py --peer=onnxruntime
"""

import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

RTOL, ATOL = 1e-3, 1e-7
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def tool(tools_dir, name):
    if tools_dir == "PATH":
        return shutil.which(name) or name
    if tools_dir:
        return os.path.join(tools_dir, name)
    local = os.path.join(ROOT, "bazel-bin", "tools", name)
    return local if os.path.exists(local) else (shutil.which(name) or name)


def load_tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def load_value(path, tp):
    """A test's input or output of ONNX type `tp`: an array, a list of
    arrays (a sequence), or None / the value (an optional)."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        return load_tensor(path)
    proto = {"sequence_type": onnx.SequenceProto, "optional_type": onnx.OptionalProto}.get(kind)
    if proto is None:
        raise ValueError("values of type %s are not supported" % kind)
    with open(path, "rb") as f:
        p = proto()
        p.ParseFromString(f.read())
    return numpy_helper.to_list(p) if kind == "sequence_type" else numpy_helper.to_optional(p)


# Sequences and optionals are ADTs in the imported module (docs/import-onnx.md:
# Nil | Cons(tensor, list), None | Some(value)); nimble-run reads and prints
# them as constructor expressions, the tensors inside as .npy files.
def value_text(v, tp, d, stem):
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        f = os.path.join(d, stem + ".npy")
        np.save(f, v)
        return "@" + f
    if kind == "optional_type":
        if v is None:
            return "None"
        return "Some(%s)" % value_text(v, tp.optional_type.elem_type, d, stem + "o")
    text = "Nil"
    for k in reversed(range(len(v))):
        text = "Cons(%s, %s)" % (value_text(v[k], tp.sequence_type.elem_type, d, "%s_%d" % (stem, k)), text)
    return text


NP_DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i1": np.bool_, "i8": np.int8,
             "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16,
             "u32": np.uint32, "u64": np.uint64}


def parse_value(text, i=0):
    """nimble-run's printed value at text[i:] (docs/nimble-run.md): (value,
    end); constructors as (name, [fields])."""
    while text[i] == " ":
        i += 1
    m = re.compile(r"[A-Z][A-Za-z0-9_]*").match(text, i)
    if m:
        name, i, fields = m.group(0), m.end(), []
        if i < len(text) and text[i] == "(":
            i += 1
            while True:
                v, i = parse_value(text, i)
                fields.append(v)
                while text[i] == " ":
                    i += 1
                i += 1
                if text[i - 1] == ")":
                    break
        return (name, fields), i
    m = re.compile(r"((?:\d+x)*)([a-z]+[0-9]*)=").match(text, i)
    if not m:
        raise ValueError("cannot read nimble-run's output at: %s" % text[i:i + 40])
    shape = [int(x) for x in m.group(1).split("x") if x]
    i = m.end()
    if text[i] == "[":
        depth, j = 0, i
        while True:
            depth += {"[": 1, "]": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        items, i = re.findall(r"[^\s\[\]]+", text[i:j]), j
    else:
        j = i
        while j < len(text) and text[j] not in " ,)":
            j += 1
        items, i = [text[i:j]], j
    dt = NP_DTYPES[m.group(2)]
    if dt is np.bool_:
        vals = [x in ("true", "1") for x in items]
    elif np.issubdtype(dt, np.integer):
        vals = [int(x) for x in items]
    else:
        vals = [float(x) for x in items]
    return np.array(vals, dtype=dt).reshape(shape), i


def from_adt(v, tp):
    """A parsed ADT value as load_value gives the ONNX one."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        return v
    if kind == "optional_type":
        return None if v[0] == "None" else from_adt(v[1][0], tp.optional_type.elem_type)
    out = []
    while v[0] == "Cons":
        out.append(from_adt(v[1][0], tp.sequence_type.elem_type))
        v = v[1][1]
    return out


def compare(got, want):
    if isinstance(want, list) or isinstance(got, list):
        if not isinstance(want, list) or not isinstance(got, list) or len(got) != len(want):
            return "a sequence of %s, expected %s" % (
                len(got) if isinstance(got, list) else "?", len(want) if isinstance(want, list) else "a tensor")
        for k, (g, w) in enumerate(zip(got, want)):
            why = compare(g, w)
            if why:
                return "element %d: %s" % (k, why)
        return None
    if want is None or got is None:
        return None if want is None and got is None else "optional %s, expected %s" % (
            "empty" if got is None else "present", "empty" if want is None else "present")
    return close(got, want)


def first_line(text):
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return "(no message)"


def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out after %ds: %s" % (timeout, os.path.basename(cmd[0]))
    if p.returncode < 0:
        return None, "%s died with signal %d" % (os.path.basename(cmd[0]), -p.returncode)
    if p.returncode != 0:
        return None, first_line(p.stderr.decode("utf-8", "replace"))
    return p, None


def close(got, want):
    if got.shape != want.shape:
        return "shape %s, expected %s" % (got.shape, want.shape)
    if got.dtype != want.dtype:
        return "dtype %s, expected %s" % (got.dtype, want.dtype)
    if want.dtype.kind in "fc":
        ok = np.isclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)
    else:
        ok = got == want
    if not np.all(ok):
        i = np.unravel_index(np.argmin(ok), ok.shape) if ok.shape else ()
        return "differs at %s: %r, expected %r" % (tuple(int(k) for k in i), got[i], want[i])
    return None


def check(test_dir, tools, timeout, import_only=False):
    with tempfile.TemporaryDirectory(prefix="nodetest-") as d:
        stage, msg = check_in(test_dir, tools, timeout, import_only, d)
        return stage, msg.replace(d + "/", "")


def check_in(test_dir, tools, timeout, import_only, d):
    """(stage, message): stage 'pass', or where it failed: 'import' (the
    importer cannot express the model), 'data' (inputs the tools cannot
    take), 'compile', 'run' or 'compare'."""
    name = os.path.basename(test_dir)
    model = os.path.join(test_dir, "model.onnx")
    if True:
        nir = os.path.join(d, "m.nir")
        _, err = run([tools["import"], model, "-o", nir], timeout)
        if err:
            return "import", err.replace(model + ": error: ", "")
        if import_only:
            return "imported", ""
        sets = sorted(glob.glob(os.path.join(test_dir, "test_data_set_*")))
        graph = onnx.load(model, load_external_data=False).graph
        inits = set(t.name for t in graph.initializer)
        in_types = [vi.type for vi in graph.input if vi.name not in inits]
        out_types = [vi.type for vi in graph.output]
        nbcs = {}
        for level in ("-O0", "-O2"):
            nbcs[level] = os.path.join(d, "m%s.nbc" % level)
            _, err = run([tools["nimblec"], level, nir, "-o", nbcs[level]], timeout)
            if err:
                return "compile", "%s: %s" % (level, err)
        for s in sets:
            ins = []
            by_number = lambda q: int(re.findall(r"\d+", os.path.basename(q))[0])
            try:
                for k, p in enumerate(sorted(glob.glob(os.path.join(s, "input_*.pb")), key=by_number)):
                    tp = in_types[k]
                    v = load_value(p, tp)
                    if tp.WhichOneof("value") == "tensor_type":
                        f = os.path.join(d, "in%d.npy" % k)
                        np.save(f, v)
                    else:
                        f = os.path.join(d, "in%d.txt" % k)
                        with open(f, "w") as t:
                            t.write(value_text(v, tp, d, "in%d" % k) + "\n")
                    ins.append("--input=@" + f)
                want = [load_value(p, out_types[k]) for k, p in
                        enumerate(sorted(glob.glob(os.path.join(s, "output_*.pb")), key=by_number))]
            except Exception as e:  # strings, maps
                return "data", "cannot read %s: %s" % (os.path.basename(s), first_line(str(e)))
            for level, nbc in nbcs.items():
                # Tensors to .npy files; sequences and optionals printed.
                adt = [out_types[k].WhichOneof("value") != "tensor_type" for k in range(len(want))]
                outs = [os.path.join(d, "out%d%s.npy" % (k, level)) for k in range(len(want))]
                p, err = run([tools["nimble-run"], nbc] + ins +
                             ["--output=" + ("-" if a else "@" + o) for a, o in zip(adt, outs)], timeout)
                if err:
                    return "run", "%s: %s" % (level, err)
                printed = p.stdout.decode("utf-8", "replace").splitlines()
                for k, (o, w) in enumerate(zip(outs, want)):
                    try:
                        got = from_adt(parse_value(printed.pop(0))[0], out_types[k]) if adt[k] else np.load(o)
                    except Exception as e:
                        return "compare", "%s %s output %d: %s" % (os.path.basename(s), level, k, first_line(str(e)))
                    why = compare(got, w)
                    if why:
                        return "compare", "%s %s output %d: %s" % (os.path.basename(s), level, k, why)
    return "pass", ""


def read_xfail(path):
    xfail = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.rstrip("\n")
                if line and not line.startswith("#"):
                    name, _, why = line.partition("\t")
                    xfail[name] = why
    return xfail


def main():
    opts = {"data": "/usr/include/onnx/backend/test/data/node", "tools": None, "peer": None,
            "peers-venv": os.path.join(ROOT, ".peers-venv"),
            "xfail": os.path.join(ROOT, "test", "import-onnx", "node-tests-xfail.txt"),
            "filter": None, "jobs": "2", "timeout": "60"}
    flags = set()
    for a in sys.argv[1:]:
        m = re.match(r"^--([a-z-]+)(?:=(.*))?$", a)
        if not m:
            sys.exit(__doc__)
        key, val = m.group(1), m.group(2)
        if val is None and key in ("write-xfail", "verbose", "import-only"):
            flags.add(key)
        elif val is not None and key in opts:
            opts[key] = val
        else:
            sys.exit("onnx_node_tests.py: error: unknown option '%s'\n%s" % (a, __doc__))
    tools = {"import": tool(opts["tools"], "nimble-import-onnx"), "nimblec": tool(opts["tools"], "nimblec"),
             "nimble-run": tool(opts["tools"], "nimble-run")}
    tests = sorted(d for d in glob.glob(os.path.join(opts["data"], "test_*")) if os.path.isdir(d))
    if opts["filter"]:
        tests = [t for t in tests if re.search(opts["filter"], os.path.basename(t))]
    if not tests:
        sys.exit("onnx_node_tests.py: error: no node tests in %s (install libonnx-testdata)" % opts["data"])
    if opts["peer"]:
        if opts["peer"] != "onnxruntime":
            sys.exit("onnx_node_tests.py: error: --peer=%s: the only peer is onnxruntime" % opts["peer"])
        import onnx_node_peer
        return onnx_node_peer.baseline(tests, opts, read_xfail(opts["xfail"]), "verbose" in flags)
    start = time.time()
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=int(opts["jobs"])) as pool:
        futures = {pool.submit(check, t, tools, int(opts["timeout"]), "import-only" in flags): os.path.basename(t)
                   for t in tests}
        for fut in concurrent.futures.as_completed(futures):
            results[futures[fut]] = fut.result()
    elapsed = time.time() - start
    stages = {}
    for name, (stage, msg) in sorted(results.items()):
        stages[stage] = stages.get(stage, 0) + 1
        if "verbose" in flags:
            print("%-60s %s %s" % (name, stage, msg))
    n = len(results)
    imported = n - stages.get("import", 0)
    if "import-only" in flags:
        print("%d node tests in %.0f s: %d import, %d do not" % (n, elapsed, imported, stages.get("import", 0)))
    else:
        print("%d node tests in %.0f s: %d pass; %d import (%d do not: op, attribute or dtype), "
              "%d fail after import (data %d, compile %d, run %d, compare %d)"
              % (n, elapsed, stages.get("pass", 0), imported, stages.get("import", 0),
                 imported - stages.get("pass", 0), stages.get("data", 0), stages.get("compile", 0),
                 stages.get("run", 0), stages.get("compare", 0)))
    if "write-xfail" in flags:
        with open(opts["xfail"], "w", encoding="utf-8") as f:
            f.write("# ONNX backend node tests (libonnx-testdata 1.12) that do not pass through\n"
                    "# nimble-import-onnx | nimblec -O0/-O2 | nimble-run, with why (the stage\n"
                    "# and the first line of the failure). scripts/onnx_node_tests.py fails when\n"
                    "# a test missing here fails, or a test listed here passes: the list only\n"
                    "# shrinks. Regenerate with --write-xfail.\n")
            for name, (stage, msg) in sorted(results.items()):
                if stage != "pass":
                    f.write("%s\t%s: %s\n" % (name, stage, msg))
        print("wrote %s" % opts["xfail"])
        return 0
    xfail = read_xfail(opts["xfail"])
    problems = 0
    if "import-only" in flags:
        for name, (stage, msg) in sorted(results.items()):
            at_import = xfail.get(name, "").startswith("import:")
            if (stage == "import") != at_import:
                print("%s (listed as %s): %s %s" % (name, xfail.get(name, "passing"), stage, msg))
                problems += 1
            elif stage == "import" and ("\n" in msg or "died with signal" in msg or "timed out" in msg):
                print("%s: not one error line: %s" % (name, msg))
                problems += 1
        print("%d unexpected results" % problems)
        return 1 if problems else 0
    for name, (stage, msg) in sorted(results.items()):
        if stage != "pass" and name not in xfail:
            print("FAIL (not expected): %s: %s: %s" % (name, stage, msg))
            problems += 1
        elif stage == "pass" and name in xfail:
            print("PASS (expected to fail; remove it from the list): %s" % name)
            problems += 1
    print("%d unexpected results" % problems)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
