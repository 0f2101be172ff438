"""Checks the allocator statistics that `nimble-run --profile` prints.

usage: check_pool.py NIMBLE_RUN NBC -- ARGS...

Runs the executable with the loop count 10 and 100 (ARGS follow the count),
under `--allocator=pool` and `--allocator=system`, and checks:
  - both allocators see the same requests (allocations, bytes, peak live);
  - system: no pool hits, every allocation reaches the system;
  - pool: hits + system allocations = allocations, and the number of system
    allocations does not grow with the loop count (freed blocks are
    recycled), while the hits do;
  - the pool's peak reserved bytes do not grow with the loop count either.
"""
import re
import subprocess
import sys

LINE = re.compile(r"Memory \((\w+) allocator, per run\): (\d+) allocations \((\d+) pool hits, "
                  r"(\d+) from the system\), (\d+) bytes requested, peak (\d+) bytes live, "
                  r"peak (\d+) bytes reserved, ([0-9.]+) ms allocating")


def run(tool, nbc, n, kind, args):
    p = subprocess.run([tool, nbc, f"--input=i64={n}"] + args + [f"--allocator={kind}", "--profile"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"error: nimble-run failed ({p.returncode}): {p.stderr}")
    m = LINE.search(p.stderr)
    if not m:
        sys.exit(f"error: no Memory line in:\n{p.stderr}")
    assert m.group(1) == kind, m.group(0)
    keys = ["allocations", "hits", "system", "bytes", "peak", "reserved"]
    return dict(zip(keys, map(int, m.groups()[1:7])))


def check(cond, what):
    if not cond:
        sys.exit("error: " + what)


def main():
    sep = sys.argv.index("--")
    tool, nbc = sys.argv[1:sep]
    args = sys.argv[sep + 1:]
    s = {(n, k): run(tool, nbc, n, k, args) for n in (10, 100) for k in ("pool", "system")}
    for n in (10, 100):
        p, y = s[(n, "pool")], s[(n, "system")]
        for key in ("allocations", "bytes", "peak"):
            check(p[key] == y[key], f"n={n}: {key} differ: pool {p[key]}, system {y[key]}")
        check(y["hits"] == 0 and y["system"] == y["allocations"], f"n={n}: system allocator {y}")
        check(p["hits"] + p["system"] == p["allocations"], f"n={n}: pool {p}")
    p10, p100 = s[(10, "pool")], s[(100, "pool")]
    check(s[(100, "system")]["allocations"] > s[(10, "system")]["allocations"], "the loop does not allocate")
    check(p100["system"] == p10["system"], f"pool system allocations grow: {p10['system']} -> {p100['system']}")
    check(p100["hits"] > p10["hits"], "pool hits do not grow with the loop")
    check(p100["reserved"] == p10["reserved"], f"pool reserved grows: {p10['reserved']} -> {p100['reserved']}")
    print(f"ok: n=100 pool {p100['hits']} hits / {p100['allocations']} allocations, "
          f"{p100['system']} from the system (system allocator: {s[(100, 'system')]['system']})")


if __name__ == "__main__":
    main()
