"""Running nimblec and nimble-run from Python (scripts/check_models.py,
scripts/bench_models.py).

Tool paths: --nimblec / --nimble-run flags, else $NIMBLEC / $NIMBLE_RUN, else
bazel-bin/tools/ of this checkout.
"""

import os
import re
import subprocess

from models.common.registry import REPO_ROOT


class ToolError(Exception):
    pass


def default_tool(name):
    env = {"nimblec": "NIMBLEC", "nimble-run": "NIMBLE_RUN", "nimble-import-onnx": "NIMBLE_IMPORT_ONNX"}[name]
    return os.environ.get(env) or os.path.join(REPO_ROOT, "bazel-bin", "tools", name)


def require_tool(path):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise ToolError("%s is not an executable (build it: bazel build //tools:%s, or pass its path)"
                        % (path, os.path.basename(path)))


def _run(cmd, what):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise ToolError("%s failed (exit %d): %s\n%s%s" % (
            what, p.returncode, " ".join(cmd), p.stdout[-2000:], p.stderr[-4000:]))
    return p


def compile_model(nimblec, nir, out, opt="-O2", extra=()):
    """nimblec NIR -o OUT; weights are found next to the .nir."""
    _run([nimblec, nir, "-o", out, opt, *extra], "nimblec")
    return out


def run_model(nimble_run, nbc, inputs, outputs, threads=1, benchmark=0, profile=False, extra=()):
    """Runs @main once (plus `benchmark` timed runs after a warm-up when > 0).

    inputs: --input values; outputs: .npy paths, one per result ("-": printed
    to stdout as value text, for results that are not tensors).
    Returns the CompletedProcess (stdout has the latency line, stderr the profile).
    """
    cmd = [nimble_run, nbc]
    cmd += ["--input=" + v for v in inputs]
    cmd += ["--output=" + (o if o == "-" else "@" + o) for o in outputs]
    cmd += ["--threads=%d" % threads]
    if benchmark:
        cmd += ["--benchmark=%d" % benchmark]
    if profile:
        cmd += ["--profile"]
    cmd += list(extra)
    return _run(cmd, "nimble-run")


_LATENCY = re.compile(r"latency: min ([\d.]+) ms, median ([\d.]+) ms, max ([\d.]+) ms over (\d+) runs")


def parse_latency(stdout):
    """{'min','median','max'} in ms from nimble-run --benchmark's stdout."""
    m = _LATENCY.search(stdout)
    if not m:
        raise ToolError("no 'latency: min ... median ... max' line in nimble-run's output:\n" + stdout[-2000:])
    return {"min": float(m.group(1)), "median": float(m.group(2)), "max": float(m.group(3)),
            "runs": int(m.group(4))}


_SPLIT_FIELDS = {
    "kernels": re.compile(r"kernels ([\d.]+) ms"),
    "shape": re.compile(r"shape functions ([\d.]+) ms"),
    "other": re.compile(r"other VM work ([\d.]+) ms"),
    "total": re.compile(r"total ([\d.]+) ms"),
}


def parse_time_split(stderr):
    """{'kernels','shape','other','total'} in ms from the `Time split:` line
    of nimble-run --profile (shape functions may be absent: then 0)."""
    for line in stderr.splitlines():
        if line.startswith("Time split:"):
            out = {}
            for k, rx in _SPLIT_FIELDS.items():
                m = rx.search(line)
                if m:
                    out[k] = float(m.group(1))
                elif k == "shape":
                    out[k] = 0.0
                else:
                    raise ToolError("cannot read '%s' in: %s" % (k, line))
            return out
    raise ToolError("no 'Time split:' line in nimble-run --profile's stderr:\n" + stderr[-2000:])
