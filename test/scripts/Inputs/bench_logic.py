"""Drives scripts/benchlib.py on made-up inputs and prints what it decides;
test/scripts/bench-logic.test pins the output. Argument: the scripts/ dir."""

import collections
import json
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
import benchlib  # noqa: E402
import floors  # noqa: E402

SPR = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
physical id\t: 0
cpu cores\t: 2
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_bf16 amx_int8

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
physical id\t: 0
cpu cores\t: 2
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512_vnni avx512_bf16 avx512_fp16 amx_tile amx_bf16 amx_int8
"""
ZEN3 = """processor\t: 0
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse2 avx avx2 fma
processor\t: 1
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse2 avx avx2 fma
processor\t: 2
flags\t\t: fpu
"""

print("== cpuinfo")
for text in (SPR, ZEN3):
    c = benchlib.cpu_info(text)
    print("%s | cores %d | logical %d | %s" % (c["model"], c["cores"], c["logical"], benchlib.isa_summary(c["isa"])))

print("== cores used")
print("cores_used %.3f" % benchlib.cores_used(2.5, 2.0))
print("cores_used of no wall %.3f" % benchlib.cores_used(1.0, 0.0))
for system, threads, cores in (("pytorch", 1, 1.15), ("pytorch", 1, 1.16), ("nimble", 2, 2.15), ("onnxruntime", 2, 1.98),
                               ("iree", 4, 4.3)):
    row = benchlib.make_row(system, "lstm_1l", "lstm", "fixed", 32, 1, threads, 10.0, 3, cores, 1.0)
    print("%s T=%d cores %.2f: %s" % (system, threads, cores, benchlib.cores_violation(row) or "ok"))

print("== rows")
for args in (("lstm", "fixed", 8, 1, 16.0), ("bert", "fixed", 64, 1, 1500.0), ("treelstm", "fixed", 400, 12, 20.0),
             ("bert", "mixed", 1000, 12, 50000.0)):
    family, table, length, inputs, ms = args
    r = benchlib.make_row("nimble", family + "_x", family, table, length, inputs, 1, ms, 3, 1.0, 1.0)
    print("%s %s length %d: %.1f %s" % (family, table, length, r["per_unit"], r["unit"]))

print("== schema")
good = {"schema": benchlib.SCHEMA_VERSION, "rows": [r], "missing": {}, "splits": {}, "failures": [],
        "header": {"cpu": {}, "blas": "", "versions": {}, "commit": "", "reps": 3, "loads": []}}
good = json.loads(json.dumps(good))  # what a reader of the file gets back
print("good: %s" % (benchlib.validate(good) or "valid"))
bad = json.loads(json.dumps(good))
bad["rows"][0]["threads"] = "1"
bad["rows"][0]["system"] = "tensorflow"
del bad["rows"][0]["cores_used"]
del bad["header"]["loads"]
bad["schema"] = 0
for p in benchlib.validate(bad):
    print("bad: " + p)
print("not an object: %s" % benchlib.validate([]))

print("== wait for a quiet machine")
for loads, max_wait in (([3.0, 2.0, 0.5, 0.1], 100), ([3.0] * 100, 12)):
    now = [0.0]
    seq = iter(loads)
    load, waited, quiet = benchlib.wait_for_quiet(1.0, max_wait, poll=5, read=lambda: next(seq),
                                                  sleep=lambda s: now.__setitem__(0, now[0] + s),
                                                  clock=lambda: now[0])
    print("load %.2f after %.0f s, quiet %s" % (load, waited, quiet))
print("loadavg %.2f" % benchlib.load_avg("2.47 1.10 0.50 3/200 1234\n"))

print("== tables")
rows = [benchlib.make_row(s, "lstm_1l", "lstm", "fixed", 8, 1, 1, ms, 3, c, 1.0)
        for s, ms, c in (("nimble", 16.0, 0.99), ("pytorch", 4.0, 1.02))]
for line in benchlib.table(rows, "fixed", ["nimble", "pytorch"], {"lstm_1l/1": {"kernels": 98.0, "shape": 0.5,
                                                                               "other": 1.5}}, markdown=True):
    print(line)

rows.append(benchlib.make_row("onnxruntime", "lstm_1l", "lstm", "fixed", 8, 1, 1, 20.0, 3, 1.0, 1.0))
for line in benchlib.table(rows, "fixed", ["nimble", "pytorch", "onnxruntime"], markdown=True,
                           floors={"lstm_1l/8/1": 1500.0}):
    print(line)

rows.append(benchlib.make_row("imported", "lstm_1l", "lstm", "fixed", 8, 1, 1, 17.0, 3, 0.98, 1.0))
for line in benchlib.table(rows, "fixed", ["nimble", "imported", "onnxruntime"], markdown=True):
    print(line)

print("== rounds")
# --rounds: per case the median of the rounds' medians, runs / CPU / wall summed; a case a round
# lacks is combined over the rounds that have it.
Case = collections.namedtuple("Case", "name")
a, b = Case("n16"), Case("n64")
rounds = [[(a, 10.0, 5, 0.5, 0.5), (b, 40.0, 5, 2.0, 2.0)], [(a, 12.0, 5, 0.6, 0.6)],
          [(a, 11.0, 5, 0.55, 0.55), (b, 44.0, 5, 2.2, 2.2)]]
for c, med, runs, cpu, wall in benchlib.combine_rounds(rounds):
    print("%s: median %.1f over %d runs, cpu %.2f, wall %.2f" % (c.name, med, runs, cpu, wall))
pts = [{"system": s, "model": "bert_base", "table": t, "input": "n16", "length": 16, "threads": 2, "round": r,
        "median_ms": ms}
       for s, t, r, ms in (("nimble", "fixed", 0, 20.0), ("onnxruntime", "fixed", 0, 22.0),
                           ("nimble", "fixed", 1, 25.0), ("onnxruntime", "fixed", 1, 24.0),
                           ("nimble", "fixed", 2, 21.0), ("onnxruntime", "fixed", 2, 23.1),
                           ("onnxruntime", "fixed", 3, 30.0),        # no Nimble figure: left out
                           ("onnxruntime", "mixed", 0, 99.0))]       # mixed inputs: not listed
for line in benchlib.round_ratio_lines(pts, ["nimble", "onnxruntime"]):
    print(line)
# --batch --rounds: instances/s the median over the rounds, CPU and wall summed; each round's
# auto-batched / other ratio, rounds without both figures left out.
batch_rounds = [{("nimble-on", 64): (5000.0, 1.0, 1.0), ("nimble-off", 64): (4000.0, 1.0, 1.0),
                 ("pytorch-batched", 64): (2500.0, 1.0, 1.0)},
                {("nimble-on", 64): (4000.0, 1.0, 1.0), ("pytorch-batched", 64): (3200.0, 1.0, 1.0)},
                {("nimble-on", 64): (4500.0, 1.0, 1.0), ("nimble-off", 64): (3000.0, 1.0, 1.0),
                 ("pytorch-batched", 64): (3000.0, 1.0, 1.0)}]
for key, (ips, cpu, wall) in sorted(benchlib.combine_batch_rounds(batch_rounds).items()):
    print("%s %d: %.1f instances/s, cpu %.1f, wall %.1f" % (key[0], key[1], ips, cpu, wall))
for line in benchlib.batch_round_lines("treelstm", 1, batch_rounds, {"nimble-off": "Nimble one-at-a-time",
                                                                     "pytorch-batched": "PyTorch hand-batched"}):
    print(line)

print("== floors")
# Made-up rates: every GEMM 200 GFLOP/s (oneDNN) and 100 (generated) at 1 thread, 400 / 150 at 2.
gemm = {kn: {("library", 1): 200.0, ("native", 1): 100.0, ("library", 2): 400.0, ("native", 2): 150.0}
        for kn in floors.GEMM_SHAPES}
print("BERT-base GFLOP at 128: %.2f" % (sum(floors.bert_gemm_flops(128).values()) / 1e9))
print("BERT-base GFLOP at 16: %.3f" % (sum(floors.bert_gemm_flops(16).values()) / 1e9))
m = {"gemm": gemm, "bandwidth": {1: {"lstm_1l": 100.0, "lstm_2l": 80.0, "treelstm": 200.0, "dram": 30.0},
                                 2: {"lstm_1l": 200.0, "lstm_2l": 160.0, "treelstm": 400.0, "dram": 40.0}}}
for T in (1, 2):
    print("T=%d: bert_base 128 %.3f ms; lstm_1l %.2f us/token; lstm_2l %.2f us/token; treelstm 9 nodes in 1 tree "
          "%.3f us/node; bert_small %s" % (T, floors.floor_for("bert_base", 128, T, m),
                                            floors.floor_for("lstm_1l", 32, T, m), floors.floor_for("lstm_2l", 32, T, m),
                                            floors.floor_for("treelstm", 9, T, m, trees=1),
                                            floors.floor_for("bert_small", 16, T, m)))
# At 16 tokens the weights' 340 MB at DRAM bandwidth (30 / 40 GB/s) outweigh the 768x768
# shape's arithmetic on 2 threads, not on 1.
for T in (1, 2):
    print("T=%d: bert_base 16 %.3f ms" % (T, floors.floor_for("bert_base", 16, T, m)))
print("BERT-base weight MB: %.1f" % (sum(floors.bert_weight_bytes().values()) / 1e6))
# A 2-thread figure below the 1-thread one (a run disturbed by other work) is not the capability:
# the floor at 2 threads uses the larger, and never exceeds the 1-thread floor.
slow = {"gemm": {kn: {("library", 1): 200.0, ("native", 1): 100.0, ("library", 2): 50.0, ("native", 2): 150.0}
                 for kn in floors.GEMM_SHAPES},
        "bandwidth": {1: dict(m["bandwidth"][1]), 2: dict(m["bandwidth"][2], dram=10.0)}}
print("disturbed T=2: bert_base 16 %.3f ms (T=1 %.3f)" % (floors.floor_for("bert_base", 16, 2, slow),
                                                          floors.floor_for("bert_base", 16, 1, slow)))
print("tree weights %d bytes" % floors.tree_weight_bytes())
# With 1 MiB of L2 a core (read at 400 GB/s on 1 thread, 800 on 2): that much of W_hh a core is
# read at the L2 rate, the rest at the working set's; on 2 threads 2 of LSTM-1L's 4 MiB.
with_l2 = dict(m, l2_bytes=1024 * 1024, bandwidth={1: dict(m["bandwidth"][1], l2=400.0),
                                                   2: dict(m["bandwidth"][2], l2=800.0)})
for T in (1, 2):
    print("L2 T=%d: lstm_1l %.2f us/token; lstm_2l %.2f us/token" % (
        T, floors.floor_for("lstm_1l", 32, T, with_l2), floors.floor_for("lstm_2l", 32, T, with_l2)))
print("l2_bytes of a missing sysfs: %s" % floors.l2_bytes("/nonexistent"))

print("== doc section")
text = "intro\n%s\nold table\n%s\nrest\n" % (benchlib.BEGIN, benchlib.END)
print(benchlib.replace_section(text, "new table\n").replace(benchlib.BEGIN, "BEGIN").replace(benchlib.END, "END"))
try:
    benchlib.replace_section("no markers", "x")
except ValueError as e:
    print("error: %s" % str(e)[:25])

print("== header")
h = {"cpu": benchlib.cpu_info(SPR), "blas": "OpenBLAS 0.3.21 SkylakeX", "commit": "abc123", "opt": "-O2",
     "versions": {"pytorch": "1.13.0", "onnxruntime": "1.32.0"}, "reps": "10,bert_base=2", "warmup": 2}
for line in benchlib.header_lines(h):
    print(line)

print("== openblas core")
EMR = "vendor_id\t: GenuineIntel\nflags\t\t: fpu sse3 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl\n"
ZEN3 = "vendor_id\t: AuthenticAMD\nflags\t\t: fpu sse3 avx avx2 fma\n"
OLD = "vendor_id\t: GenuineIntel\nflags\t\t: fpu sse3 avx\n"
for name, text in (("emerald rapids", EMR), ("zen 3", ZEN3), ("sandy bridge", OLD)):
    print("%s: deserves %s" % (name, benchlib.fitting_openblas_core(*benchlib.cpu_flags(text))))
for detected, fitting in (("Prescott", "SkylakeX"), ("Haswell", "SkylakeX"), ("SkylakeX", "SkylakeX"),
                          ("Cooperlake", "SkylakeX"), ("Zen", "Zen"), ("Prescott", None), ("Mystery", "Haswell")):
    print("%s on a %s CPU: %s" % (detected, fitting, benchlib.openblas_core_verdict(detected, fitting)))
base = {"detected": "Prescott", "fitting": "SkylakeX", "given": None}
print(benchlib.openblas_core_line(dict(base, set="SkylakeX", final="SkylakeX", fair=True)))
print(benchlib.openblas_core_line(dict(base, set="SkylakeX", final="Prescott", fair=False)))
print(benchlib.openblas_core_line(dict(base, detected="SkylakeX", set=None, final="SkylakeX", fair=True)))
rows = [dict(system=s, model="treelstm", table="fixed", length=554, threads=1, unit="us/node", median_ms=ms,
             per_unit=ms, cores_used=1.0) for s, ms in (("nimble", 5.0), ("pytorch", 50.0))]
for fair in (True, False):
    print("PyTorch ratio with fair=%s: %s" % (fair, benchlib.table(rows, "fixed", ["nimble", "pytorch"],
                                                                      pytorch_fair=fair)[1].split()[-1]))
