"""Served requests, good and bad, against one replica (test/serving/requests.test).

    requests_test.py MODEL.nbc OUT.txt

One replica, batches of up to 16 gathered for up to 200 ms, so that the
concurrent requests below land in shared batches. Prints one line per
check; FileCheck compares them. Bounded at 150 s.
"""

import base64
import io
import json
import sys

import numpy as np

import serving_lib as lib

lib.output(sys.argv[2])
lib.watchdog(150)

import nimble  # noqa: E402
from nimble import serve as nserve  # noqa: E402
from nimble import wire  # noqa: E402
from ray import serve  # noqa: E402

nbc = open(sys.argv[1], "rb").read()
exe = nimble.load(nbc)
rng = np.random.default_rng(7)


def leaf():
    return ("Leaf", rng.normal(0, 1, (1, 4)).astype(np.float32))


def tree(leaves):
    if leaves == 1:
        return leaf()
    k = int(rng.integers(1, leaves))
    return ("Node", tree(k), tree(leaves - k))


def outputs_of(status, body):
    assert status == 200, (status, body)
    return wire.decode_outputs(body)


def same(got, want):
    want = want if isinstance(want, tuple) else (want,)
    return len(got) == len(want) and all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want))


# -- A batch that fails as a whole (out of memory: no instance to blame) is
# run again instance by instance, so the error lands on the one that causes
# it. (The deployment's method alone, on a stand-in executable.)
class WholeBatchFails:
    def run_many(self, fn, instances, **kw):
        if any(i == ("huge",) for i in instances) and len(instances) > 1:
            raise nimble.OutOfMemoryError("error: out of memory")
        if instances == [("huge",)]:
            return [nimble.OutOfMemoryError("error: out of memory (this one)")]
        return [("ok", i[0]) for i in instances]


replica = nserve.NimbleDeployment.__new__(nserve.NimbleDeployment)
replica.exe, replica.threads, replica.kernels = WholeBatchFails(), 1, "native"
got = replica._run_isolated("f", [("a",), ("huge",), ("b",)])
lib.line("whole batch failed: %s" % ", ".join(
    "%s %s" % (type(g).__name__, g) if isinstance(g, Exception) else repr(g) for g in got))

with lib.cluster() as port:
    serve.run(nserve.build_app(nbc, name="served", max_batch_size=16, batch_wait_timeout_s=0.2))
    d = lib.describe(port)
    lib.line("functions: %s" % " ".join("@%s%s" % (f, tuple(p[1] for p in s["params"]))
                                          for f, s in sorted(d["functions"].items())))
    pid = d["pid"]

    # -- Concurrent requests of different shapes and functions: one batch
    # each (or a few), every answer its own and equal to a run alone.
    trees = [tree(n) for n in (1, 2, 3, 5, 8, 13, 21, 4)]
    mats = [(rng.normal(0, 1, (m, k)).astype(np.float32), rng.normal(0, 1, (k, n)).astype(np.float32))
            for m, k, n in ((1, 3, 2), (4, 4, 4), (2, 7, 1), (5, 2, 3))]
    calls = ([("tree_sum", (t,)) for t in trees] + [("mm", ab) for ab in mats])
    before = lib.describe(port)
    answers = lib.concurrently([
        (lambda f=f, a=a, k=k: lib.post(port, wire.request(f, a, encoding="npy" if k % 2 else "list",
                                                           input_encoding="npy" if k % 3 == 0 else "list")))
        for k, (f, a) in enumerate(calls)])
    after = lib.describe(port)
    ok = 0
    for k, (a, (f, args)) in enumerate(zip(answers, calls)):
        if same(outputs_of(*a), exe.run(f, *args, kernels="native")):
            ok += 1
        else:
            lib.line("mixed: request %d (@%s) differs: %r vs %r" % (k, f, outputs_of(*a), exe.run(f, *args, kernels="native")))
    lib.line("mixed: %d/%d answers equal to a run alone, bit for bit" % (ok, len(calls)))
    batches = after["batches"] - before["batches"]
    lib.line("mixed: %d requests in %s batches" % (len(calls), "fewer" if batches < len(calls) else "as many"))

    # -- One bad instance in a batch: its own error; the others their results.
    good = [("mm", ab) for ab in mats] + [("tree_sum", (t,)) for t in trees[:4]]
    bad = [("mm", (np.ones((2, 3), np.float32), np.ones((2, 2), np.float32))),     # run-time: 3 vs 2
           ("tree_sum", (("Leaf", np.ones((1, 4), np.float64)),)),                 # dtype: InputError
           ("tree_sum", (("Twig", np.ones((1, 4), np.float32)),))]                 # constructor
    calls = good[:3] + bad[:1] + good[3:5] + bad[1:2] + good[5:] + bad[2:]
    answers = lib.concurrently([(lambda f=f, a=a: lib.post(port, wire.request(f, a))) for f, a in calls])
    n_ok = 0
    bad_ids = {id(b) for b in bad}
    for call, (status, body) in zip(calls, answers):
        f, args = call
        if id(call) in bad_ids:
            lib.line("isolated: %d %s" % (status, body["error"]))
        else:
            n_ok += same(outputs_of(status, body), exe.run(f, *args, kernels="native"))
    lib.line("isolated: %d/%d good requests of the same batches answered right" % (n_ok, len(good)))

    # -- Malformed requests: a 4xx with one line, before anything runs.
    deep = b'{"function": "tree_sum", "inputs": [' + b'["Node", ' * 100000 + b'"x"' + b"]" * 100000 + b"]}"
    f = io.BytesIO()
    np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (1 << 14, 1 << 15)})
    huge_npy = base64.b64encode(f.getvalue() + b"\0" * 64).decode()
    leaf_json = {"dtype": "float32", "data": [[1, 2, 3, 4]]}
    f = io.BytesIO()
    np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (2, 2)})
    head = f.getvalue()
    # The header claims 5,000 bytes; the data is 4 bytes short of its (cached) header.
    long_head = base64.b64encode(head[:8] + (5000).to_bytes(2, "little") + head[10:]).decode()
    short_data = base64.b64encode(head + b"\0" * 12).decode()
    malformed = [
        ("bad JSON", b'{"function": "tree_sum", "inputs": [', None),
        ("not an object", b"[1, 2]", None),
        ("unknown function", json.dumps({"function": "nope", "inputs": []}).encode(), None),
        ("unknown field", json.dumps({"function": "mm", "inputs": [], "batch": 3}).encode(), None),
        ("inputs not a list", json.dumps({"function": "mm", "inputs": 3}).encode(), None),
        ("wrong count", json.dumps({"function": "mm", "inputs": [leaf_json]}).encode(), None),
        ("wrong dtype", json.dumps({"function": "mm", "inputs": [{"dtype": "int32", "data": [[1]]}] * 2}).encode(), None),
        ("wrong rank", json.dumps({"function": "mm", "inputs": [{"dtype": "float32", "data": [1, 2]}] * 2}).encode(), None),
        ("unknown dtype", json.dumps({"function": "mm", "inputs": [{"dtype": "complex64", "data": [[1]]}] * 2}).encode(), None),
        ("ragged data", json.dumps({"function": "mm", "inputs": [{"dtype": "float32", "data": [[1, 2], [3]]}] * 2}).encode(), None),
        ("not base64", json.dumps({"function": "mm", "inputs": [{"npy": "@@@"}] * 2}).encode(), None),
        ("npy header past its end", json.dumps({"function": "mm", "inputs": [{"npy": long_head}] * 2}).encode(), None),
        ("npy data short", json.dumps({"function": "mm", "inputs": [{"npy": short_data}] * 2}).encode(), None),
        ("a null", json.dumps({"function": "tree_sum", "inputs": [None]}).encode(), None),
        ("tree 100,000 deep", deep, None),
        ("npy header of 2 GiB", json.dumps({"function": "mm", "inputs": [{"npy": huge_npy}] * 2}).encode(), None),
        ("shape of 2 GiB", json.dumps({"function": "mm", "inputs": [{"dtype": "float32", "shape": [1 << 14, 1 << 15], "data": [1]}] * 2}).encode(), None),
        ("body of 2 GiB", b'{"function": "mm", "inputs": [', {"Content-Length": str(2 << 30)}),
    ]
    for what, body, headers in malformed:
        if headers:   # only the header claims 2 GiB: the server must answer before reading it
            import http.client
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.putrequest("POST", "/")
            for k, v in headers.items():
                conn.putheader(k, v)
            conn.endheaders()
            conn.send(body)
            r = conn.getresponse()
            status, answer = r.status, json.loads(r.read())
            conn.close()
        else:
            status, answer = lib.post(port, body)
        msg = answer.get("error", "") if isinstance(answer, dict) else str(answer)
        one_line = "\n" not in msg and msg.startswith("error: ")
        lib.line("malformed: %s: %d %s%s" % (what, status, msg[:150], "" if one_line else "  [NOT ONE LINE]"))

    # -- Still up: the same replica process answers, and right.
    status, body = lib.post(port, wire.request("tree_sum", (trees[3],)))
    lib.line("after: %d, %s, same replica: %s" % (
        status, "right" if same(outputs_of(status, body), exe.run("tree_sum", trees[3], kernels="native")) else "WRONG",
        "yes" if lib.describe(port)["pid"] == pid else "NO"))
lib.line("done")
