#!/usr/bin/python3
"""ONNX Runtime's baseline on ONNX's backend node tests, for
`scripts/onnx_node_tests.py --peer=onnxruntime` (issue 47's done-when: "95% of
the node tests that ONNX Runtime passes pass through the importer").

The parent (Debian's python, like onnx_node_tests.py) starts a worker: this
file run by the virtualenv of scripts/setup_peers.sh, where onnxruntime is.
The worker runs each test's model on ORT's CPU provider (every graph
optimisation, the default) and compares with the expected outputs exactly as
onnx_node_tests.py compares Nimble's (its `close`: rtol 1e-3, atol 1e-7, NaN
equal to NaN, shape and dtype exact). Inputs and outputs are read as ONNX's
own runner reads them, by the graph's declared type: tensors, sequences
(lists) and optionals (None when empty), so that ORT is not failed for data
Nimble's runner cannot load. One line per test on stdout, flushed; if ORT
takes the worker down (a crash in a kernel), that test counts as failed and a
new worker goes on with the rest.

Nimble's side is the expected-failures list (test/import-onnx/node-tests-xfail.txt):
the CI run of onnx_node_tests.py fails on any test that fails without being
listed and on any listed test that passes, so "not listed" is "passes at -O0
and -O2" for the commit the list belongs to.
"""

import glob
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def numbered(pattern):
    return sorted(glob.glob(pattern), key=lambda q: int(re.findall(r"\d+", os.path.basename(q))[0]))


def read_value(path, type_proto):
    """A test data file as the graph declares it: ndarray, list or None."""
    import onnx
    from onnx import numpy_helper

    with open(path, "rb") as f:
        data = f.read()
    kind = type_proto.WhichOneof("value") if type_proto is not None else "tensor_type"
    if kind == "sequence_type":
        s = onnx.SequenceProto()
        s.ParseFromString(data)
        return numpy_helper.to_list(s)
    if kind == "optional_type":
        o = onnx.OptionalProto()
        o.ParseFromString(data)
        return numpy_helper.to_optional(o)
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return numpy_helper.to_array(t)


def compare(got, want, close):
    if want is None or got is None:
        return None if got is None and want is None else "optional presence differs"
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return "sequence length differs"
        for g, w in zip(got, want):
            why = compare(g, w, close)
            if why:
                return why
        return None
    import numpy as np

    return close(np.asarray(got), want)


def run_one(test_dir, ort, close):
    import onnx

    model_path = os.path.join(test_dir, "model.onnx")
    try:
        model = onnx.load(model_path)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 4
        sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # an op, type or opset ORT does not have
        return "load", str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    inits = {i.name for i in model.graph.initializer}
    ins = [i for i in model.graph.input if i.name not in inits]
    outs = list(model.graph.output)
    for s in sorted(glob.glob(os.path.join(test_dir, "test_data_set_*"))):
        files_in = numbered(os.path.join(s, "input_*.pb"))
        files_out = numbered(os.path.join(s, "output_*.pb"))
        try:
            feeds = {ins[k].name: read_value(p, ins[k].type) for k, p in enumerate(files_in)}
            want = [read_value(p, outs[k].type if k < len(outs) else None) for k, p in enumerate(files_out)]
        except Exception as e:
            return "data", "cannot read %s: %s" % (os.path.basename(s), e)
        try:
            got = sess.run([o.name for o in outs[:len(want)]], feeds)
        except Exception as e:
            return "run", str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        for k, (g, w) in enumerate(zip(got, want)):
            why = compare(g, w, close)
            if why:
                return "compare", "%s output %d: %s" % (os.path.basename(s), k, why)
    return "pass", ""


def worker():
    """Runs the test directories named on stdin, one line each out."""
    import onnxruntime as ort

    ort.set_default_logger_severity(4)  # the failures are reported per test
    sys.path.insert(0, HERE)
    from onnx_node_tests import close

    print("version\t%s" % ort.__version__, flush=True)
    for line in sys.stdin:
        d = line.strip()
        if d:
            stage, msg = run_one(d, ort, close)
            print("%s\t%s\t%s" % (os.path.basename(d), stage, msg.replace("\n", " ")[:300]), flush=True)


def blocking_op(test_dir, why):
    """What stops Nimble: the op its failure names, else the kind of value
    it cannot take, else the model's op types."""
    m = re.search(r"\((\w+), opset \d+\)", why)
    if m:
        return [m.group(1)]
    if "is not a tensor" in why:
        return ["(sequence/optional values)"]
    if "element type string" in why:
        return ["(string tensors)"]
    return ops_of(test_dir)


def ops_of(test_dir):
    import onnx

    try:
        m = onnx.load(os.path.join(test_dir, "model.onnx"), load_external_data=False)
    except Exception:
        return ["?"]
    return sorted({n.op_type for n in m.graph.node}) or ["?"]


def baseline(tests, opts, xfail, verbose):
    python = os.path.join(opts["peers-venv"], "bin", "python")
    if not os.path.exists(python):
        sys.exit("onnx_node_tests.py: error: no ONNX Runtime: %s is missing (bash scripts/setup_peers.sh)" % python)
    start = time.time()
    results, version, todo = {}, "?", list(tests)
    while todo:
        p = subprocess.Popen([python, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
        p.stdin.write("".join(t + "\n" for t in todo))
        p.stdin.close()
        for line in p.stdout:
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "version":
                version = fields[1]
            elif len(fields) == 3:
                results[fields[0]] = (fields[1], fields[2])
        rc = p.wait()
        todo = [t for t in todo if os.path.basename(t) not in results]
        if todo:  # the worker died in the first one left
            if rc == 0:
                sys.exit("onnx_node_tests.py: error: the ONNX Runtime worker stopped early")
            results[os.path.basename(todo[0])] = ("crash", "the worker died (exit %d)" % rc)
            todo = todo[1:]
    elapsed = time.time() - start
    n = len(results)
    ort_pass = sorted(t for t, (stage, _) in results.items() if stage == "pass")
    nimble_pass = sorted(t for t in results if t not in xfail)
    both = [t for t in ort_pass if t not in xfail]
    print("%d node tests on ONNX Runtime %s (CPU provider) in %.0f s" % (n, version, elapsed))
    stages = {}
    for stage, _ in results.values():
        stages[stage] = stages.get(stage, 0) + 1
    print("ORT passes %d of %d (%s)" % (len(ort_pass), n, ", ".join(
        "%s %d" % (k, v) for k, v in sorted(stages.items()) if k != "pass") or "no failures"))
    print("Nimble passes %d of %d (the expected-failures list %s)" % (len(nimble_pass), n, os.path.relpath(opts["xfail"])))
    ratio = 100.0 * len(both) / len(ort_pass) if ort_pass else 0.0
    print("of ORT's %d passes, Nimble passes %d: %.1f%%" % (len(ort_pass), len(both), ratio))
    by_test = {os.path.basename(t): t for t in tests}
    only_ort = [t for t in ort_pass if t in xfail]
    by_op = {}
    for t in only_ort:
        for op in blocking_op(by_test[t], xfail[t]):
            by_op.setdefault(op, []).append(t)
    print("ORT passes, Nimble does not (%d), by the op (or value kind) Nimble stops at:" % len(only_ort))
    for op, ts in sorted(by_op.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print("  %-28s %3d  %s" % (op, len(ts), " ".join(ts) if verbose else xfail[ts[0]][:90]))
    only_nimble = [t for t in nimble_pass if t not in ort_pass]
    print("Nimble passes, ORT does not (%d): %s" % (len(only_nimble), " ".join(
        "%s (%s: %s)" % (t, results[t][0], results[t][1][:80]) for t in only_nimble) or "none"))
    if verbose:
        for t, (stage, msg) in sorted(results.items()):
            if stage != "pass":
                print("ORT %-56s %s %s" % (t, stage, msg))
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
    else:
        sys.exit(__doc__)
