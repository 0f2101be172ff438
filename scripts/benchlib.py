"""The pure logic of scripts/bench_models.py: no numpy, no torch, no timing.

Kept apart so that test/scripts/ can check it without PyTorch or a quiet
machine: what the machine header says (CPU model, ISA features, cores, load),
the cores-used check (a system given T threads may use at most T + 0.15
cores), the JSON document's schema, and the text / markdown tables.

Why cores used: OpenBLAS takes its thread count from OPENBLAS_NUM_THREADS /
OMP_NUM_THREADS when it is loaded; torch.set_num_threads does not reach it
(issue 19: a "1-thread" PyTorch run used 1.98 CPU-seconds per wall-second).
Each system and thread count therefore runs in its own process started with
those variables set, and CPU time / wall time is printed beside every figure
so that a reader can see the thread count was really held.
"""

import os
import re
import statistics
import subprocess
import time

CORES_SLACK = 0.15  # interpreter, timer and loader threads: noise, not a second core
SCHEMA_VERSION = 1

# Per row of the JSON document: what the issue asks to keep, and the rest the tables need.
ROW_FIELDS = {
    "system": str,  # nimble, pytorch, pytorch-nnlstm, onnxruntime, iree
    "model": str,
    "table": str,  # "fixed" (one input of a fixed size) or "mixed" (the seeded mixed lengths)
    "length": int,  # tokens (LSTM, BERT) or tree nodes; for "mixed": total over the inputs
    "inputs": int,  # inputs behind the row (1 for a fixed LSTM/BERT row)
    "threads": int,
    "median_ms": float,  # fixed: median of the runs; mixed: sum of the per-input medians
    "runs": int,  # timed runs per input
    "cores_used": float,  # CPU time / wall time over the timed runs
    "per_unit": float,  # median_ms in the row's unit (see UNITS)
    "unit": str,
}
SYSTEMS = ("nimble", "imported", "pytorch", "pytorch-nnlstm", "onnxruntime", "iree")
SYSTEM_LABEL = {"nimble": "Nimble", "imported": "Nimble imported", "pytorch": "PyTorch",
                "pytorch-nnlstm": "PyTorch nn.LSTM",
                "onnxruntime": "ONNX Runtime", "iree": "IREE"}

# The unit of each model's rows, as the papers report them: (label, ms -> unit factor, per what).
UNITS = {
    "lstm": ("us/token", 1e3, "token"),
    "bert": ("ms/seq", 1.0, "sequence"),
    "treelstm": ("us/node", 1e3, "node"),
}
MIXED_UNITS = {"lstm": ("us/token", 1e3), "bert": ("us/token", 1e3), "treelstm": ("us/node", 1e3)}


# ---- the machine ---------------------------------------------------------------------------

ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
             "amx_int8")


def cpu_info(text):
    """{'model', 'logical', 'cores', 'isa': [flags present among ISA_FLAGS]} from /proc/cpuinfo text."""
    model, flags, logical, cores, phys = "unknown CPU", set(), 0, 0, set()
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key, val = key.strip(), val.strip()
        if key == "processor":
            logical += 1
        elif key == "model name" and model == "unknown CPU":
            model = val
        elif key == "flags" and not flags:
            flags = set(val.split())
        elif key == "cpu cores":
            cores = int(val) if val.isdigit() else cores
        elif key == "physical id":
            phys.add(val)
    cores = cores * max(1, len(phys)) if cores else logical
    return {"model": model, "logical": logical, "cores": cores, "isa": [f for f in ISA_FLAGS if f in flags]}


def isa_summary(isa):
    """'AVX2 FMA AVX-512 (VNNI, BF16, FP16) AMX (BF16, INT8)' / 'no AVX-512' ..."""
    out = [n for f, n in (("avx2", "AVX2"), ("fma", "FMA")) if f in isa]
    if "avx512f" in isa:
        sub = [n for f, n in (("avx512_vnni", "VNNI"), ("avx512_bf16", "BF16"), ("avx512_fp16", "FP16")) if f in isa]
        out.append("AVX-512" + (" (%s)" % ", ".join(sub) if sub else ""))
    else:
        out.append("no AVX-512")
    if "amx_tile" in isa:
        sub = [n for f, n in (("amx_bf16", "BF16"), ("amx_int8", "INT8")) if f in isa]
        out.append("AMX" + (" (%s)" % ", ".join(sub) if sub else ""))
    else:
        out.append("no AMX")
    return " ".join(out)


# ---- OpenBLAS's core (issue 52) -----------------------------------------------------------
#
# OpenBLAS built with DYNAMIC_ARCH picks its kernels by the CPU model it knows; a model it does
# not know falls back, and Debian's 0.3.21 runs its Prescott (SSE3) kernels on an Emerald Rapids
# Xeon (family 6, model 207): PyTorch's products then run 3-4x below what the core can do, and
# every PyTorch ratio flatters Nimble. OPENBLAS_CORETYPE, read when the library loads, overrides
# the detection. The benchmark asks the library PyTorch loads which core it chose
# (openblas_get_corename, in a process of its own), compares it with what the CPU's flags allow,
# sets OPENBLAS_CORETYPE for every peer process when the library chose less, checks again, and
# prints all of it in the header; a PyTorch ratio is printed only when the final core is right.

# Rank of each OpenBLAS core name (lower case) by the widest vector ISA its kernels use.
OPENBLAS_CORE_RANK = {}
for _rank, _names in ((1, "prescott core2 penryn dunnington nehalem atom katmai coppermine northwood banias "
                          "opteron opteron_sse3 barcelona bobcat nano generic"),
                      (2, "sandybridge bulldozer piledriver steamroller excavator"),
                      (3, "haswell zen skylake"),
                      (4, "skylakex cooperlake sapphirerapids")):
    for _n in _names.split():
        OPENBLAS_CORE_RANK[_n] = _rank

AVX512_CORE_FLAGS = ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd")


def cpu_flags(text):
    """(vendor, set of flags) of the first processor in /proc/cpuinfo text."""
    vendor, flags = "", set()
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key = key.strip()
        if key == "vendor_id" and not vendor:
            vendor = val.strip()
        elif key == "flags" and not flags:
            flags = set(val.split())
    return vendor, flags


def fitting_openblas_core(vendor, flags):
    """The OpenBLAS core type this CPU deserves (an OPENBLAS_CORETYPE value), or None when below
    AVX2: SkylakeX with AVX-512 (F, BW, VL, DQ, CD: what its kernels use), else Zen on AMD and
    Haswell elsewhere with AVX2 and FMA."""
    if all(f in flags for f in AVX512_CORE_FLAGS):
        return "SkylakeX"
    if "avx2" in flags and "fma" in flags:
        return "Zen" if vendor == "AuthenticAMD" else "Haswell"
    return None


def openblas_core_verdict(detected, fitting):
    """True when OpenBLAS's `detected` core (its corename) uses the vector width `fitting` allows
    (or more), False when it falls short, None when either is unknown."""
    if not detected or not fitting:
        return None
    have = OPENBLAS_CORE_RANK.get(detected.strip().lower())
    want = OPENBLAS_CORE_RANK.get(fitting.lower())
    if have is None or want is None:
        return None
    return have >= want


# Run by `python -c`: loads the BLAS as PyTorch does (a product), then asks the OpenBLAS in the
# process for its core and config. Prints JSON.
OPENBLAS_PROBE = r"""
import ctypes, json, os
out = {"path": None, "corename": None, "config": None}
try:
    import torch
    a = torch.ones(8, 8)
    a @ a
except Exception as e:
    out["error"] = "torch: %s" % e
for line in open("/proc/self/maps"):
    path = line.split()[-1]
    if path.startswith("/") and "openblas" in os.path.basename(path).lower():
        try:
            lib = ctypes.CDLL(path)
            for name in ("corename", "config"):
                f = getattr(lib, "openblas_get_" + name)
                f.restype = ctypes.c_char_p
                out[name] = f().decode()
            out["path"] = os.path.realpath(path)
            break
        except (OSError, AttributeError):
            continue
print(json.dumps(out))
"""


def probe_openblas(python, env):
    """{"path", "corename", "config"} of the OpenBLAS that `python` (with torch) loads under
    `env`; values None when it loads none."""
    import json
    try:
        p = subprocess.run([python, "-c", OPENBLAS_PROBE], capture_output=True, text=True, env=env, timeout=120)
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return {"path": None, "corename": None, "config": None, "error": "probe failed"}


def settle_openblas_core(python, env, cpuinfo_text):
    """Checks the core OpenBLAS chooses in `python`'s processes and, when it falls short of the CPU,
    sets OPENBLAS_CORETYPE in `env` (modified in place) and checks again. Returns a dict for the
    header: detected, fitting, set (the value set, or None), final, fair (True / False / None:
    no OpenBLAS or unknown names), line (one line of text)."""
    vendor, flags = cpu_flags(cpuinfo_text)
    fitting = fitting_openblas_core(vendor, flags)
    given = env.get("OPENBLAS_CORETYPE")
    first = probe_openblas(python, env)
    out = {"detected": first.get("corename"), "fitting": fitting, "set": None, "final": first.get("corename"),
           "given": given, "path": first.get("path"), "config": first.get("config"),
           "final_config": first.get("config")}
    if not first.get("corename"):
        out["fair"] = None
        out["line"] = "BLAS core: no OpenBLAS in PyTorch's process (%s)" % (first.get("error") or "another BLAS")
        return out
    verdict = openblas_core_verdict(first["corename"], fitting)
    if verdict is False and not given:
        env["OPENBLAS_CORETYPE"] = fitting
        out["set"] = fitting
        again = probe_openblas(python, env)
        out["final"] = again.get("corename")
        out["final_config"] = again.get("config")
        verdict = openblas_core_verdict(out["final"], fitting)
    out["fair"] = verdict
    out["line"] = openblas_core_line(out)
    return out


def openblas_core_line(c):
    """The header's line for settle_openblas_core's result."""
    want = c["fitting"] or "unknown"
    if c.get("given"):
        head = "BLAS core: OPENBLAS_CORETYPE=%s given; OpenBLAS runs %s (this CPU: %s)" % (
            c["given"], c["final"], want)
    elif c["set"]:
        head = "BLAS core: OpenBLAS detected %s on this CPU (it deserves %s): set OPENBLAS_CORETYPE=%s for the " \
               "peers; now %s" % (c["detected"], want, c["set"], c["final"])
    else:
        head = "BLAS core: OpenBLAS detected %s (this CPU: %s)" % (c["detected"], want)
    if c["fair"] is False:
        head += "; STILL BELOW THIS CPU: no PyTorch ratio is printed"
    elif c["fair"] is None:
        head += "; not judged (unknown core name)"
    return head


def thread_env(T, extra=None):
    """The environment of a peer process given T threads: the BLAS thread
    variables are read when the library loads, so they are set before the
    process starts (issue 19); `extra` (e.g. OPENBLAS_CORETYPE) on top."""
    env = dict(os.environ)
    env.update(extra or {})
    for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(T)
    env["PYTHONWARNINGS"] = "ignore"
    return env


# The ONNX Runtime session a peer worker (a `python -c` string run by the
# peers' venv) times, given onnx_path, T and the input x: CPU provider, T
# intra-op threads, one inter-op thread, sequential execution, so that T
# bounds its cores as it does Nimble's. Defines sess, name and run().
ORT_SESSION = r"""
opts = ort.SessionOptions()
opts.intra_op_num_threads = T
opts.inter_op_num_threads = 1
opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
sess = ort.InferenceSession(onnx_path, opts, providers=["CPUExecutionProvider"])
name = sess.get_inputs()[0].name
run = lambda: sess.run(None, {name: x})
"""

# How a peer worker times run(): `warmup` untimed calls, then `reps` timed
# ones; prints "median_ms version" for the caller to parse.
TIME_RUN = r"""
for _ in range(warmup):
    run()
ts = []
for _ in range(reps):
    t = time.perf_counter()
    run()
    ts.append(time.perf_counter() - t)
print("%.3f %s" % (1000 * sorted(ts)[len(ts) // 2], version))
"""


def load_avg(text=None):
    """The 1-minute load average (/proc/loadavg)."""
    if text is None:
        with open("/proc/loadavg") as f:
            text = f.read()
    return float(text.split()[0])


def wait_for_quiet(threshold, max_wait, poll=5.0, read=load_avg, sleep=time.sleep, clock=time.monotonic):
    """Waits until the 1-minute load is <= threshold, at most max_wait seconds.

    Returns (load, seconds waited, quiet?). The load is what the header prints:
    on a shared machine the benchmark runs anyway after max_wait, and says so.
    """
    start = clock()
    load = read()
    while load > threshold and clock() - start < max_wait:
        sleep(min(poll, max(0.0, max_wait - (clock() - start))))
        load = read()
    return load, clock() - start, load <= threshold


def git_commit(repo):
    try:
        rev = subprocess.run(["git", "-C", repo, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def header_lines(h):
    """The header a reader compares with, from the header dict of the JSON document."""
    cpu = h["cpu"]
    lines = [
        "CPU: %s; %d cores, %d logical CPUs; %s" % (cpu["model"], cpu["cores"], cpu["logical"], isa_summary(cpu["isa"])),
        "BLAS (as PyTorch loads it): %s" % h["blas"],
    ]
    if h.get("blas_core"):
        lines.append(h["blas_core"]["line"])
    lines += [
        "versions: PyTorch %s; ONNX Runtime %s; IREE %s" % (
            h["versions"].get("pytorch") or "-", h["versions"].get("onnxruntime") or "not installed",
            h["versions"].get("iree") or "not installed"),
        "commit: %s; nimblec %s; timed runs per input (--reps): %s, after %d warm-up (nimble-run: 1)%s" % (
            h["commit"], h["opt"], h["reps"], h["warmup"],
            "; %d alternating rounds, medians over them" % h["rounds"] if h.get("rounds", 1) > 1 else ""),
        "threads: each system and thread count T in its own process, OPENBLAS_NUM_THREADS = OMP_NUM_THREADS"
        " = MKL_NUM_THREADS = T (nimble-run --threads=T); fails above T + %.2f cores used" % CORES_SLACK,
    ]
    return lines


# ---- the cores-used check -------------------------------------------------------------------


def cores_used(cpu_s, wall_s):
    return cpu_s / wall_s if wall_s > 0 else 0.0


def cores_violation(row):
    """A message when the row used more than threads + CORES_SLACK cores, else None."""
    limit = row["threads"] + CORES_SLACK
    if row["cores_used"] > limit:
        return ("%s %s %s (length %d) at %d thread%s used %.2f cores (limit %.2f): the thread count was not "
                "held" % (SYSTEM_LABEL.get(row["system"], row["system"]), row["model"], row["table"], row["length"],
                          row["threads"], "" if row["threads"] == 1 else "s", row["cores_used"], limit))
    return None


# ---- the JSON document ----------------------------------------------------------------------


def validate(doc):
    """[problems] of a bench_models.py --json document (empty: valid)."""
    problems = []
    if not isinstance(doc, dict):
        return ["document is not an object"]
    if doc.get("schema") != SCHEMA_VERSION:
        problems.append("schema: want %d, got %r" % (SCHEMA_VERSION, doc.get("schema")))
    for key in ("header", "rows", "missing", "splits", "failures"):
        if key not in doc:
            problems.append("missing key %r" % key)
    for k in ("cpu", "blas", "versions", "commit", "reps", "loads"):
        if k not in doc.get("header", {}):
            problems.append("header: missing %r" % k)
    for i, row in enumerate(doc.get("rows", [])):
        for field, typ in ROW_FIELDS.items():
            if field not in row:
                problems.append("rows[%d]: missing %r" % (i, field))
            elif not isinstance(row[field], typ) or (typ is int and isinstance(row[field], bool)):
                if not (typ is float and isinstance(row[field], int)):
                    problems.append("rows[%d].%s: want %s, got %r" % (i, field, typ.__name__, row[field]))
        if row.get("system") not in SYSTEMS:
            problems.append("rows[%d].system: unknown %r" % (i, row.get("system")))
        if row.get("table") not in ("fixed", "mixed"):
            problems.append("rows[%d].table: want fixed or mixed, got %r" % (i, row.get("table")))
    return problems


def make_row(system, model, family, table, length, inputs, threads, median_ms, runs, cpu_s, wall_s):
    unit, factor = (UNITS[family][:2] if table == "fixed" else MIXED_UNITS[family])
    if table == "fixed" and family != "bert" or table == "mixed":
        per_unit = median_ms * factor / length  # per token / per node
    else:
        per_unit = median_ms * factor / inputs  # BERT fixed rows: per sequence
    return {"system": system, "model": model, "family": family, "table": table, "length": int(length),
            "inputs": int(inputs), "threads": int(threads), "median_ms": float(median_ms), "runs": int(runs),
            "cores_used": round(cores_used(cpu_s, wall_s), 3), "per_unit": float(per_unit), "unit": unit}


# ---- tables ---------------------------------------------------------------------------------


def _cell(row, digits):
    if row is None:
        return "-"
    return "%.*f (%.2f)" % (digits, row["per_unit"], row["cores_used"])


def _digits(unit):
    return 2 if unit.startswith("ms") else 1


def table(rows, which, systems, splits=None, markdown=False, floors=None, pytorch_fair=True):
    """Rows of one table ("fixed" / "mixed") pivoted: one line per (model, length, threads),
    one column per system with 'figure (cores used)', then PyTorch / Nimble, ONNX Runtime / Nimble
    (when it ran), imported / Nimble (the model's .onnx through nimble-import-onnx against the
    hand-written .nir: above 1 the imported program is slower), and with `floors`
    ({"model/length/threads": floor in the row's unit}) the floor
    and Nimble / floor."""
    sel = [r for r in rows if r["table"] == which]
    keys = []
    for r in sel:
        k = (r["model"], r["length"], r["threads"])
        if k not in keys:
            keys.append(k)
    by = {(r["model"], r["length"], r["threads"], r["system"]): r for r in sel}
    cols = ["model", "length" if which == "fixed" else "tokens/nodes", "threads", "unit"]
    cols += ["%s (cores)" % SYSTEM_LABEL[s] for s in systems] + ["PyTorch/Nimble"]
    with_ort = "onnxruntime" in systems
    if with_ort:
        cols.append("ORT/Nimble")
    with_imported = "imported" in systems and "nimble" in systems
    if with_imported:
        cols.append("imported/Nimble")
    if floors is not None:
        cols += ["floor", "Nimble/floor"]
    if splits is not None:
        cols.append("Nimble kernels/shape/other")
    out = []
    for model, length, threads in keys:
        some = next(by[(model, length, threads, s)] for s in SYSTEMS if (model, length, threads, s) in by)
        cells = [model, str(length), str(threads), some["unit"]]
        cells += [_cell(by.get((model, length, threads, s)), _digits(some["unit"])) for s in systems]
        nim, pt = by.get((model, length, threads, "nimble")), by.get((model, length, threads, "pytorch"))
        cells.append("%.2fx" % (pt["median_ms"] / nim["median_ms"])
                     if nim and pt and nim["median_ms"] > 0 and pytorch_fair is not False else "-")
        if with_ort:
            ort = by.get((model, length, threads, "onnxruntime"))
            cells.append("%.2fx" % (ort["median_ms"] / nim["median_ms"]) if nim and ort and nim["median_ms"] > 0
                         else "-")
        if with_imported:
            imp = by.get((model, length, threads, "imported"))
            cells.append("%.2fx" % (imp["median_ms"] / nim["median_ms"]) if nim and imp and nim["median_ms"] > 0
                         else "-")
        if floors is not None:
            fl = floors.get("%s/%d/%d" % (model, length, threads))
            cells.append("%.*f" % (_digits(some["unit"]), fl) if fl else "-")
            cells.append("%.2fx" % (nim["per_unit"] / fl) if fl and nim else "-")
        if splits is not None:
            sp = splits.get("%s/%d" % (model, threads))
            cells.append("%.1f%% / %.1f%% / %.1f%%" % (sp["kernels"], sp["shape"], sp["other"]) if sp else "-")
        out.append(cells)
    if markdown:
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(c) + " |" for c in out]
        return lines
    widths = [max(len(c), *(len(r[i]) for r in out)) if out else len(c) for i, c in enumerate(cols)]
    fmt = lambda cells: "  ".join(c.rjust(w) if i >= 2 else c.ljust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    return [fmt(cols)] + [fmt(c) for c in out]


def median(xs):
    return statistics.median(xs)


# ---- alternating rounds (--rounds) ----------------------------------------------------------


def combine_rounds(rounds):
    """[[(case, median_ms, runs, cpu_s, wall_s)] of one system, one per round] -> one such list: per
    case (by name, in the first round's order) the median of the rounds' medians, runs, CPU and
    wall time summed. A case missing from a round is combined over the rounds that have it."""
    order, by = [], {}
    for timed in rounds:
        for t in timed:
            if t[0].name not in by:
                order.append(t[0].name)
                by[t[0].name] = []
            by[t[0].name].append(t)
    return [(by[n][0][0], median([t[1] for t in by[n]]), sum(t[2] for t in by[n]),
             sum(t[3] for t in by[n]), sum(t[4] for t in by[n])) for n in order]


def combine_batch_rounds(rounds):
    """[{(system, batch): (instances/s, cpu_s, wall_s)} one per round] (bench_models.py --batch
    --rounds) -> {(system, batch): (median instances/s, cpu_s summed, wall_s summed)}, each over the
    rounds that have it."""
    by = {}
    for rnd in rounds:
        for key, cell in rnd.items():
            by.setdefault(key, []).append(cell)
    return {k: (median([c[0] for c in v]), sum(c[1] for c in v), sum(c[2] for c in v)) for k, v in by.items()}


def batch_round_lines(model, threads, rounds, labels):
    """Lines of each round's ratio of Nimble auto-batched to the other systems (bench_models.py
    --batch --rounds), one a batch size and system, e.g. "treelstm batch 64, 1 thread: auto-batched /
    PyTorch hand-batched 1.65, 1.71, 1.49 (median 1.65)". `rounds` as combine_batch_rounds takes
    them; `labels` {system: label} in the order wanted. A round without both figures is left out."""
    lines = []
    batches = sorted({b for rnd in rounds for (_, b) in rnd})
    for b in batches:
        for system, label in labels.items():
            ratios = [rnd[("nimble-on", b)][0] / rnd[(system, b)][0] for rnd in rounds
                      if ("nimble-on", b) in rnd and (system, b) in rnd and rnd[(system, b)][0] > 0]
            if ratios:
                lines.append("%s batch %d, %d thread%s: auto-batched / %s %s (median %.2f)" % (
                    model, b, threads, "" if threads == 1 else "s", label,
                    ", ".join("%.2f" % x for x in ratios), median(ratios)))
    return lines


def round_ratio_lines(points, systems):
    """Lines of the per-round ratios of each system against Nimble, from points
    {system, model, table, input, length, threads, round, median_ms} (fixed inputs only): one line a
    model, input and thread count, e.g. "bert_base 16, 2 threads: ONNX Runtime / Nimble 1.02, 1.10,
    0.98 (median 1.02; Nimble's rounds 21.3-22.0 ms)". A round without both figures is left out."""
    key = lambda p: (p["model"], p["length"], p["threads"], p["input"])  # noqa: E731
    cells = {}
    for p in points:
        if p["table"] == "fixed":
            cells.setdefault(key(p), {}).setdefault(p["system"], {})[p["round"]] = p["median_ms"]
    lines = []
    for (model, length, threads, _), per in sorted(cells.items()):
        own = per.get("nimble", {})
        for system in systems:
            if system == "nimble" or system not in per:
                continue
            rounds = sorted(r for r in per[system] if r in own)
            if not rounds:
                continue
            ratios = [per[system][r] / own[r] for r in rounds]
            lines.append("%s %d, %d thread%s: %s / Nimble %s (median %.2f; Nimble's rounds %.4g-%.4g ms)" % (
                model, length, threads, "" if threads == 1 else "s", SYSTEM_LABEL[system],
                ", ".join("%.2f" % x for x in ratios), median(ratios), min(own[r] for r in rounds),
                max(own[r] for r in rounds)))
    return lines


# ---- docs/perf.md ---------------------------------------------------------------------------

BEGIN, END = "<!-- bench_models: begin (generated by scripts/bench.sh) -->", "<!-- bench_models: end -->"


def replace_section(text, body):
    """text with everything between BEGIN and END replaced by body; ValueError if the markers are absent."""
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        raise ValueError("markers %r ... %r not found" % (BEGIN, END))
    return text[: i + len(BEGIN)] + "\n" + body.rstrip("\n") + "\n" + text[j:]


def relpath_or(path, base):
    try:
        return os.path.relpath(path, base)
    except ValueError:
        return path


_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def safe_name(s):
    return _SAFE.sub("_", s)
