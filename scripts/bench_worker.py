#!/usr/bin/env python3
"""One system at one thread count, in its own process: scripts/bench_models.py
starts it with OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = MKL_NUM_THREADS = T
already in the environment, so that the BLAS is loaded with T threads (issue
19: torch.set_num_threads alone does not reach OpenBLAS).

    bench_worker.py SPEC.json OUT.json

SPEC: {"system": "pytorch" | "pytorch-nnlstm" | "onnxruntime" | "iree", "model", "family", "threads",
       "reps", "warmup", "tolerance", "work_dir",
       "inputs": [{"name", "path", "refs": [.npy of the PyTorch reference outputs]}]}
OUT:  {"system", "version", "blas_threads", "note", "error",
       "inputs": [{"name", "median_ms", "min_ms", "max_ms", "runs", "cpu_s", "wall_s", "cores_runs",
                   "rel_err"}]}

Every input is first run once and checked against the PyTorch reference
(relative error max|a-b| / max|b| <= tolerance): a peer that computes
something else is reported, not timed. Then WARMUP untimed runs and REPS
timed runs; CPU time (all threads of this process) and wall time are taken
over the timed runs (continued to at least MIN_WINDOW_S: see there). Exit status 0 even when the peer fails (OUT says why);
1 only when this script itself cannot run.

The peers:
  * pytorch: models/<m>/reference.py (LSTM one nn.LSTMCell step per token,
    Tree-LSTM Python recursion, BERT plain modules), torch.set_num_threads(T).
  * pytorch-nnlstm (LSTM only): the sequence through one torch.nn.LSTM call
    with the same weights (reference.run_nn): what a PyTorch user calls, which
    batches the input projection; the other models say it does not apply.
  * onnxruntime: the same weights exported by torch.onnx.export (LSTM as one
    nn.LSTM, BERT with a dynamic sequence axis; opset 17), CPU provider,
    intra-op threads T, inter-op 1.
  * iree: that ONNX file through iree-import-onnx and iree-compile
    (llvm-cpu, --iree-llvmcpu-target-cpu=host), run by the Python runtime:
    the local-sync driver for 1 thread, local-task with T workers otherwise.
Tree-LSTM has no ONNX form (recursion over a tree): both peers say so.

Batch mode (scripts/bench_models.py --batch), SPEC {"mode": "batch", "model",
"threads", "reps", "warmup", "tolerance", "batched_tolerance", "instances"
(an instances file of scripts/make_instances.py), "refs": [[.npy per result]
per instance], "batches": [B, ...]}; OUT {"system", "version", "blas_threads",
"error", "one": {timing}, "batched": {"B": {timing}}}:
  * one-at-a-time: reference.run over every instance in turn (the models'
    PyTorch baseline); a timed run is one pass over all instances.
  * hand-batched: the instances in chunks of B, each chunk one call of
    reference.run_packed (LSTM: pack_padded_sequence through nn.LSTM) or
    run_batched (Tree-LSTM: level by level, as DGL); a timed run is one pass
    over all chunks. Its outputs are first checked against the one-at-a-time
    reference within batched_tolerance (1e-5): not timed otherwise.
"""

import ctypes
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from models.common.registry import VARIANTS  # noqa: E402


class PeerUnavailable(Exception):
    pass


def rel_err(got, want):
    got = np.asarray(got)
    if got.size != want.size or not np.all(np.isfinite(got)):
        return float("inf")
    got = got.reshape(want.shape)
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    diff = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
    return diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))


def blas_core():
    """OpenBLAS's core name as loaded in this process (None: not OpenBLAS); the benchmark checks
    that OPENBLAS_CORETYPE took (benchlib.settle_openblas_core)."""
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if path.startswith("/") and "openblas" in os.path.basename(path).lower():
            try:
                f = ctypes.CDLL(path).openblas_get_corename
                f.restype = ctypes.c_char_p
                return f().decode()
            except (OSError, AttributeError):
                return None
    return None


def blas_threads():
    """OpenBLAS's own thread count as loaded in this process (None: not OpenBLAS)."""
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if "openblas" in path and path.endswith(".so") or ".so." in path and "openblas" in path:
            try:
                return int(ctypes.CDLL(path).openblas_get_num_threads())
            except (OSError, AttributeError):
                return None
    return None


# ---- ONNX export (shared by onnxruntime and IREE) ---------------------------------------------


class _LSTMForOnnx(torch.nn.Module):
    """nn.LSTM with the reference's weights: xs [T, I] -> (h, c) of the last layer."""

    def __init__(self, ref):
        super().__init__()
        cells = ref.cells
        self.lstm = torch.nn.LSTM(cells[0].input_size, cells[0].hidden_size, len(cells))
        with torch.no_grad():
            for k, cell in enumerate(cells):
                for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                    getattr(self.lstm, "%s_l%d" % (p, k)).copy_(getattr(cell, p))

    def forward(self, xs):
        _, (h, c) = self.lstm(xs[:, None, :])
        return h[-1], c[-1]


def onnx_file(spec, model, example):
    v = VARIANTS[spec["model"]]
    if v.family == "treelstm":
        raise PeerUnavailable("no ONNX form (recursion over a tree)")
    path = os.path.join(spec["work_dir"], "%s.onnx" % spec["model"])
    if os.path.exists(path):
        return path
    if v.family == "lstm":
        module, names, outs = _LSTMForOnnx(model).eval(), ["xs"], ["h", "c"]
    else:
        module, names, outs = model, ["ids"], ["hidden"]
    dyn = {names[0]: {0: "n"}}
    if v.family == "bert":
        dyn["hidden"] = {0: "n"}
    tmp = path + ".tmp"
    import warnings

    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (example,), tmp, input_names=names, output_names=outs, dynamic_axes=dyn,
                          opset_version=17)
    os.replace(tmp, path)
    return path


# ---- the systems: each returns (run(x) -> [outputs], version) ------------------------------------


def pytorch_system(spec, model):
    torch.set_num_threads(spec["threads"])
    ref = VARIANTS[spec["model"]].reference
    return (lambda x: ref.run(model, x)), torch.__version__


def pytorch_nnlstm_system(spec):
    """LSTM only: the whole sequence through one torch.nn.LSTM call."""
    v = VARIANTS[spec["model"]]
    if v.family != "lstm":
        raise PeerUnavailable("nn.LSTM is the LSTM's peer only")
    torch.set_num_threads(spec["threads"])
    lstm = v.reference.load_packed(spec["model"])
    return (lambda x: v.reference.run_nn(lstm, x)), torch.__version__


def onnxruntime_system(spec, model, example):
    try:
        import onnxruntime as ort
    except ImportError:
        raise PeerUnavailable("onnxruntime not importable by %s" % sys.executable)
    path = onnx_file(spec, model, example)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = spec["threads"]
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return (lambda x: sess.run(None, {name: x.numpy()})), ort.__version__


def iree_system(spec, model, example):
    try:
        import importlib.metadata as md

        import iree.runtime as rt
    except ImportError:
        raise PeerUnavailable("iree.runtime not importable by %s" % sys.executable)
    bindir = os.path.dirname(sys.executable)
    onnx_path = onnx_file(spec, model, example)
    vmfb = onnx_path[: -len(".onnx")] + ".vmfb"
    if not os.path.exists(vmfb):
        mlir = onnx_path[: -len(".onnx")] + ".mlir"
        for cmd in ([os.path.join(bindir, "iree-import-onnx"), onnx_path, "-o", mlir],
                    [os.path.join(bindir, "iree-compile"), mlir, "--iree-hal-target-device=local",
                     "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host",
                     "-o", vmfb + ".tmp"]):
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                raise PeerUnavailable("%s failed (exit %d): %s" % (os.path.basename(cmd[0]), p.returncode,
                                                                   p.stderr.strip()[-600:]))
        os.replace(vmfb + ".tmp", vmfb)
        os.remove(mlir)
    T = spec["threads"]
    if T == 1:
        config = rt.Config("local-sync")
    else:
        rt.flags.parse_flags("--task_topology_group_count=%d" % T)
        config = rt.Config("local-task")
    ctx = rt.SystemContext(config=config)
    module = rt.VmModule.mmap(ctx.instance, vmfb)
    ctx.add_vm_module(module)
    fns = [f for f in module.function_names if not f.startswith("__") and not f.endswith("$async")]
    if len(fns) != 1:
        raise PeerUnavailable("cannot tell the entry point among %s" % module.function_names)
    fn = ctx.modules.module[fns[0]]

    def run(x):
        out = fn(x.numpy())
        outs = out if isinstance(out, (list, tuple)) else [out]
        return [np.asarray(o.to_host() if hasattr(o, "to_host") else o) for o in outs]

    return run, md.version("iree-base-runtime")


# ---- timing ----------------------------------------------------------------------------------


# CPU / wall over less than this is noise: the kernel updates the CPU time of a thread running on
# another core at its next tick, so a window of a few runs of a millisecond can read 3 cores on 2.
MIN_WINDOW_S = 0.3


def time_runs(fn, warmup, reps):
    """The median of REPS timed runs; CPU and wall time over those runs, continued with more runs of the
    same input until the window is MIN_WINDOW_S long (cores_runs says how many)."""
    for _ in range(warmup):
        fn()
    ts = []
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    n = reps
    while time.perf_counter() - w0 < MIN_WINDOW_S:
        fn()
        n += 1
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    ts.sort()
    return {"median_ms": ts[len(ts) // 2] if len(ts) % 2 else (ts[len(ts) // 2 - 1] + ts[len(ts) // 2]) / 2,
            "min_ms": ts[0], "max_ms": ts[-1], "runs": reps, "cpu_s": cpu, "wall_s": wall, "cores_runs": n}


def work(spec):
    v = VARIANTS[spec["model"]]
    ref = v.reference
    model = ref.load(spec["model"])
    xs = [ref.read_input(i["path"]) for i in spec["inputs"]]
    out = {"system": spec["system"], "version": None, "blas_threads": None, "note": None, "error": None,
           "inputs": []}
    try:
        if spec["system"] == "pytorch":
            run, out["version"] = pytorch_system(spec, model)
        elif spec["system"] == "pytorch-nnlstm":
            run, out["version"] = pytorch_nnlstm_system(spec)
        elif spec["system"] == "onnxruntime":
            run, out["version"] = onnxruntime_system(spec, model, xs[0])
        elif spec["system"] == "iree":
            run, out["version"] = iree_system(spec, model, xs[0])
        else:
            raise PeerUnavailable("unknown system %r" % spec["system"])
    except PeerUnavailable as e:
        out["note"] = str(e)
        return out
    for inp, x in zip(spec["inputs"], xs):
        got = run(x)
        wants = [np.load(r) for r in inp["refs"]]
        err = max(rel_err(g, w) for g, w in zip(got, wants)) if len(got) == len(wants) else float("inf")
        if not err <= spec["tolerance"]:
            out["error"] = ("%s on %s differs from the PyTorch reference: relative error %.3e > %.0e; not timed"
                            % (spec["system"], inp["name"], err, spec["tolerance"]))
            return out
        res = time_runs(lambda: run(x), spec["warmup"], spec["reps"])
        res.update(name=inp["name"], rel_err=err)
        out["inputs"].append(res)
    out["blas_threads"] = blas_threads()
    out["blas_core"] = blas_core()
    return out


def work_batch(spec):
    sys.path.insert(0, HERE)
    from compare_instances import read_instance

    v = VARIANTS[spec["model"]]
    ref = v.reference
    torch.set_num_threads(spec["threads"])
    out = {"system": "pytorch", "version": torch.__version__, "blas_threads": None, "error": None, "note": None,
           "one": None, "batched": {}}
    model = ref.load(spec["model"])
    base = os.path.dirname(os.path.abspath(spec["instances"]))
    with open(spec["instances"]) as f:
        xs = [read_instance(ref, ln.strip(), base) for ln in f if ln.strip() and not ln.strip().startswith("#")]
    wants = [[np.load(p) for p in r] for r in spec["refs"]]

    def check(outs, tol, what):
        err = max(rel_err(g, w) for o, ws in zip(outs, wants) for g, w in zip(o, ws))
        if len(outs) != len(wants) or not err <= tol:
            out["error"] = "%s differs from the PyTorch reference: relative error %.3e > %.0e; not timed" % (
                what, err, tol)
        return err

    one = lambda: [ref.run(model, x) for x in xs]  # noqa: E731
    err = check(one(), spec["tolerance"], "PyTorch one-at-a-time")
    if out["error"]:
        return out
    out["one"] = dict(time_runs(one, spec["warmup"], spec["reps"]), rel_err=err)
    if v.family == "lstm":
        packed = ref.load_packed(spec["model"])
        batched = lambda chunk: ref.run_packed(packed, chunk)  # noqa: E731
    else:
        batched = lambda chunk: ref.run_batched(model, chunk)  # noqa: E731
    for B in spec["batches"]:
        chunks = [xs[i : i + B] for i in range(0, len(xs), B)]
        run_all = lambda: [o for c in chunks for o in batched(c)]  # noqa: E731
        err = check(run_all(), spec["batched_tolerance"], "PyTorch hand-batched (batch %d)" % B)
        if out["error"]:
            return out
        out["batched"][str(B)] = dict(time_runs(run_all, spec["warmup"], spec["reps"]), rel_err=err)
    out["blas_threads"] = blas_threads()
    out["blas_core"] = blas_core()
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 1
    with open(argv[0]) as f:
        spec = json.load(f)
    out = work_batch(spec) if spec.get("mode") == "batch" else work(spec)
    with open(argv[1], "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
