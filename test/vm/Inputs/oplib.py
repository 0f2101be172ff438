"""Helpers of check_ops.py: dtypes, bf16 emulation, running kernel-runner,
comparing results with numpy's.

Every expected value is computed here with numpy (float64 for floating-point
math, then rounded once to the result dtype), never by the code under test.
"""

import concurrent.futures
import dataclasses
import math
import os
import re
import subprocess

import numpy as np

# Nimble dtype name -> numpy dtype of the .npy data. bf16 travels as f32
# holding bf16-representable values (kernel-runner --bf16 converts them).
NP = {
    "f32": np.float32,
    "f64": np.float64,
    "f16": np.float16,
    "bf16": np.float32,
    "i1": np.bool_,
    "i8": np.int8,
    "i32": np.int32,
    "i64": np.int64,
    "i16": np.int16,
    "u8": np.uint8,
    "u16": np.uint16,
    "u32": np.uint32,
    "u64": np.uint64,
}
FLOATS = ["f32", "f64", "f16", "bf16"]
UINTS = ["u8", "u16", "u32", "u64"]
INTS = ["i8", "i32", "i64", "i16"] + UINTS
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ["i1"]
RULE_DTYPES = {"Float": FLOATS, "Numeric": NUMERIC, "Int": INTS, "Bool": ["i1"], "Any": ALL}


def round_bf16(a):
    """Rounds to the nearest bf16 (ties to even), returned as float32."""
    a = np.asarray(a, dtype=np.float32)
    bits = a.reshape(-1).view(np.uint32).astype(np.uint64)
    u = np.uint64
    rounded = ((bits + u(0x7FFF) + ((bits >> u(16)) & u(1))) >> u(16)) << u(16)
    out = (rounded & u(0xFFFFFFFF)).astype(np.uint32).view(np.float32).copy()
    out = out.reshape(a.shape)
    out[np.isnan(a)] = np.nan
    return out


def cast_to(a, dt):
    """numpy's value of `a` converted to dtype `dt` (bf16: rounded f32)."""
    with np.errstate(all="ignore"):
        if dt == "bf16":
            return round_bf16(np.asarray(a, dtype=np.float64).astype(np.float32))
        return np.asarray(a).astype(NP[dt])


def wide(a):
    """float64 view of a float array; integer and bool arrays unchanged."""
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


class Rng:
    """Seeded generators of test arrays."""

    def __init__(self, seed):
        self.g = np.random.default_rng(seed)

    def array(self, shape, dt, lo=-4.0, hi=4.0):
        shape = tuple(shape)
        if dt == "i1":
            return self.g.random(shape) < 0.5
        if dt in INTS:
            info = np.iinfo(NP[dt])
            lo_i, hi_i = max(int(lo), info.min), min(int(hi), info.max)
            return self.g.integers(lo_i, hi_i, size=shape, endpoint=True).astype(NP[dt])
        return cast_to(self.g.uniform(lo, hi, size=shape), dt)

    def small_ints(self, shape, dt, lo=-3, hi=3):
        """Integer-valued data in any dtype (equal values and ties are common)."""
        if dt == "i1":
            return self.g.random(tuple(shape)) < 0.5
        return cast_to(self.g.integers(lo, hi, size=tuple(shape), endpoint=True), dt)


@dataclasses.dataclass
class Case:
    op: str
    dt: str  # the dtype this case exercises (for the coverage check)
    inputs: list  # numpy arrays (bf16 as rounded f32) or literal strings
    expected: list = None  # numpy arrays; None for an error case
    attrs: dict = dataclasses.field(default_factory=dict)
    error: str = None  # expected substring of the error message
    threads: int = 1
    exact: bool = False  # compare the bits (floats too): compare_bits

    @property
    def bf16(self):
        return self.dt == "bf16"

    def describe(self):
        ins = []
        for x in self.inputs:
            if isinstance(x, str):
                ins.append(x)
            else:
                ins.append("%s:%s" % ("x".join(map(str, x.shape)) or "scalar", x.dtype))
        attrs = " ".join("%s=%s" % kv for kv in self.attrs.items())
        return "%s [%s] inputs(%s) %s%s" % (
            self.op, self.dt, ", ".join(ins), attrs,
            " threads=%d" % self.threads if self.threads > 1 else "")


def attr_text(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(str(int(x)) for x in v) + "]"
    return str(v)


def tolerance(expected, bf16):
    kind = expected.dtype
    if kind == np.float16:
        return 2e-3, 1e-3
    if kind == np.float32:
        return (1e-2, 1e-2) if bf16 else (1e-5, 1e-6)
    if kind == np.float64:
        return 1e-10, 1e-12
    return None


def compare(expected, got, bf16):
    """Returns None if equal (within tolerance), else a description."""
    if got.dtype != expected.dtype:
        return "dtype %s, expected %s" % (got.dtype, expected.dtype)
    if got.shape != expected.shape:
        return "shape %s, expected %s" % (got.shape, expected.shape)
    if expected.size == 0:
        return None
    tol = tolerance(expected, bf16)
    if tol is None:
        bad = got != expected
        if not bad.any():
            return None
        i = np.argwhere(bad)[0]
        return "%d of %d elements differ; first at %s: got %s, expected %s" % (
            int(bad.sum()), expected.size, tuple(int(v) for v in i), got[tuple(i)],
            expected[tuple(i)])
    rtol, atol = tol
    e64, g64 = expected.astype(np.float64), got.astype(np.float64)
    ok = np.isclose(g64, e64, rtol=rtol, atol=atol, equal_nan=True)
    # isclose treats inf == inf but lets a finite value match nothing else.
    if ok.all():
        return None
    with np.errstate(all="ignore"):
        err = np.abs(g64 - e64).reshape(-1)
    err[np.isnan(err)] = np.inf
    i = np.argwhere(~ok)[0]
    return "%d of %d elements differ (rtol %g, atol %g); max abs error %g; first at %s: got %r, expected %r" % (
        int((~ok).sum()), expected.size, rtol, atol, float(err[~ok.reshape(-1)].max()),
        tuple(int(v) for v in i), g64[tuple(i)], e64[tuple(i)])


def compare_bits(expected, got):
    """Returns None if the two arrays hold the same bits, else a description
    (every NaN of the expectation stands for the quiet NaN, 0x7fc00000 in
    f32: what numpy's float32(nan) is)."""
    if got.dtype != expected.dtype or got.shape != expected.shape:
        return "dtype %s shape %s, expected %s %s" % (got.dtype, got.shape, expected.dtype, expected.shape)
    if expected.size == 0:
        return None
    width = "u%d" % expected.dtype.itemsize
    e = np.ascontiguousarray(expected).view(width)
    g = np.ascontiguousarray(got).view(width)
    bad = e != g
    if not bad.any():
        return None
    i = tuple(int(v) for v in np.argwhere(bad)[0])
    return "%d of %d elements differ in their bits; first at %s: got %r (0x%x), expected %r (0x%x)" % (
        int(bad.sum()), expected.size, i, got[i], int(g[i]), expected[i], int(e[i]))


def prepare_case(case, tmpdir, index):
    """Writes a case's input files; returns (kernel-runner arguments, output paths)."""
    prefix = os.path.join(tmpdir, "c%d" % index)
    cmd = ["--op=" + case.op]
    for name, value in case.attrs.items():
        if isinstance(value, np.ndarray):  # a dense attribute, through a file
            path = "%s_attr_%s.npy" % (prefix, name)
            np.save(path, value)
            value = "@" + path
        cmd.append("--attr=%s=%s" % (name, attr_text(value)))
    for k, x in enumerate(case.inputs):
        if isinstance(x, str):
            cmd.append("--input=" + x)
        else:
            path = "%s_in%d.npy" % (prefix, k)
            np.save(path, np.array(x, order="C"))  # ascontiguousarray would make 0-d 1-d
            cmd.append("--input=@" + path)
    outs = []
    for k in range(len(case.expected or [])):
        outs.append("%s_out%d.npy" % (prefix, k))
        cmd.append("--output=@" + outs[-1])
    if case.bf16:
        cmd.append("--bf16")
    if case.threads > 1:
        cmd.append("--threads=%d" % case.threads)
    return cmd, outs


def check_case(case, outs, status, message, shown):
    """Judges one run (exit status, its stderr); None on success or a failure message."""
    if case.error is not None:
        if status != 1 or case.error not in message:
            return "expected exit 1 and an error containing %r, got exit %d, stderr %r\n  command: %s" % (
                case.error, status, message.strip(), shown)
        return None
    if status != 0:
        return "exit %d: %s\n  command: %s" % (status, message.strip(), shown)
    for k, (want, path) in enumerate(zip(case.expected, outs)):
        got = np.load(path)
        msg = compare_bits(np.asarray(want), got) if case.exact else compare(np.asarray(want), got, case.bf16)
        if msg:
            return "output %d: %s\n  command: %s" % (k, msg, shown)
    return None


# kernel-runner --batch's escapes in a status line's message: \\ and \n.
_UNESCAPE = re.compile(r"\\(.)")


def run_batch(runner, arglists, path):
    """Runs every argument list through one `kernel-runner --batch` process
    (see kernel-runner.cpp); returns [(exit status, stderr text)] in order.

    A case that kills the process (a crash, a sanitizer report) is given the
    process's status and stderr, and the cases after it run in a new batch."""
    results = []
    while len(results) < len(arglists):
        rest = arglists[len(results):]
        with open(path, "w") as f:
            for args in rest:
                assert not any("\t" in a or "\n" in a for a in args), args
                f.write("\t".join(args) + "\n")
        p = subprocess.run([runner, "--batch=" + path], capture_output=True, text=True)
        done = []
        for line in p.stdout.splitlines():
            index, status, message = line.split("\t", 2)
            assert int(index) == len(done), line
            done.append((int(status), _UNESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), message)))
        results.extend(done)
        if len(done) < len(rest):
            if p.returncode == 0:
                raise RuntimeError("kernel-runner --batch stopped after %d of %d cases with exit 0" % (
                    len(done), len(rest)))
            results.append((p.returncode, "kernel-runner --batch died in this case: " + p.stderr))
        elif p.returncode != 0:
            raise RuntimeError("kernel-runner --batch exited %d after every case: %s" % (
                p.returncode, p.stderr))
    return results


def run_cases(runner, cases, tmpdir, jobs):
    """Runs every case, `jobs` batches at a time; returns None or a failure
    message per case."""
    prepared = [prepare_case(c, tmpdir, i) for i, c in enumerate(cases)]
    # Cases dealt round-robin, so each batch gets a share of the slow ones.
    jobs = max(1, min(jobs, len(cases)))
    shares = [list(range(j, len(cases), jobs)) for j in range(jobs)]

    def run_share(j):
        return run_batch(runner, [prepared[i][0] for i in shares[j]],
                         os.path.join(tmpdir, "batch%d.txt" % j))

    statuses = [None] * len(cases)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for j, share_results in enumerate(pool.map(run_share, range(jobs))):
            for i, r in zip(shares[j], share_results):
                statuses[i] = r
    failures = []
    for case, (args, outs), (status, message) in zip(cases, prepared, statuses):
        shown = " ".join([runner] + args)
        failures.append(check_case(case, outs, status, message, shown))
    return failures


def math_erf(a):
    return np.vectorize(math.erf, otypes=[np.float64])(a)
