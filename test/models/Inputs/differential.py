"""Differential test of the optimisation levels on the small models.

usage: differential.py NIMBLEC NIMBLE_RUN MODELS_DIR WORK_DIR LEVEL LEVEL...

A LEVEL is nimblec flags joined by commas (-O2 or -O2,--kernels=native); a
flag written run:FLAG goes to nimble-run instead (run:--threads=2).

Compiles each small model (models/<m>/small/<m>_small.nir) at every LEVEL,
runs every committed fixture input through each executable, and requires the
outputs to be identical bit for bit across levels: the pipelines differ in
fusion, memory planning, inlining and simplification, none of which changes
the arithmetic. Prints one line per model; exits 1 on any difference.
"""
import glob
import os
import subprocess
import sys

MODELS = {
    # model: (fixture glob, outputs per input, how to pass an input)
    "lstm": ("seq_[0-9][0-9].npy", 2),
    "treelstm": ("tree_[0-9][0-9].txt", 2),
    "bert": ("ids_[0-9][0-9].npy", 1),
}


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("error: %s failed (%d):\n%s" % (" ".join(cmd), p.returncode, p.stderr))


def main():
    nimblec, nimble_run, models_dir, work = sys.argv[1:5]
    levels = sys.argv[5:]
    os.makedirs(work, exist_ok=True)
    failed = False
    for model, (pattern, nout) in MODELS.items():
        nir = os.path.join(models_dir, model, "small", model + "_small.nir")
        fixtures = sorted(glob.glob(os.path.join(models_dir, model, "small", "fixtures", pattern)))
        if not fixtures:
            sys.exit("error: no fixtures for %s" % model)
        outputs = {}
        for level in levels:
            nbc = os.path.join(work, "%s%s.nbc" % (model, level.replace(",", "_").replace(":", "_")))
            flags = level.split(",")
            run([nimblec, *[f for f in flags if not f.startswith("run:")], nir, "-o", nbc])
            run_flags = [f[4:] for f in flags if f.startswith("run:")]
            # Pinned paths (never the measured dispatch, whose choice may
            # differ between runs): native code when compiled in, else the
            # reference kernels; a level may name its own (run:--kernels=...).
            if not any(f.startswith("--kernels=") for f in run_flags):
                run_flags.insert(0, "--kernels=native" if "--kernels=native" in flags else "--kernels=reference")
            for fx in fixtures:
                outs = [os.path.join(work, "%s%s.%s.%d.npy" % (model, level.replace(",", "_").replace(":", "_"),
                                                              os.path.basename(fx), i))
                        for i in range(nout)]
                run([nimble_run, nbc, *run_flags, "--input=@" + fx] + ["--output=@" + o for o in outs])
                outputs.setdefault(level, []).extend(outs)
        base = levels[0]
        same = 0
        total = 0
        for level in levels[1:]:
            for a, b in zip(outputs[base], outputs[level]):
                total += 1
                with open(a, "rb") as fa, open(b, "rb") as fb:
                    if fa.read() == fb.read():
                        same += 1
                    else:
                        failed = True
                        print("error: %s and %s differ: %s vs %s" % (base, level, a, b))
        print("%s: %d/%d outputs bit-identical across %s" % (model, same, total, " ".join(levels)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
