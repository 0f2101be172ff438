#!/usr/bin/env python3
"""PNG plots of a scripts/bench_models.py --json document.

    /usr/bin/python3 scripts/bench_plot.py RESULT.json DIR     (bench_models.py --plot DIR does the same)

Writes into DIR:
  * latency_<model>.png: latency of one input against its length (tokens, or
    tree nodes for Tree-LSTM), the fixed-size inputs, one line per system and
    thread count (log scale on y when the systems are far apart, as Nimble's
    reference kernels and the libraries are);
  * nimble_split.png: Nimble's time split per model and thread count
    (kernels / shape functions / other VM work, % of its profiled time, from
    nimble-run --profile), as stacked bars.
Matplotlib from Debian (python3-matplotlib, scripts/setup.sh), Agg backend.
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

COLORS = {"nimble": "tab:red", "pytorch": "tab:blue", "pytorch-nnlstm": "tab:cyan", "onnxruntime": "tab:green",
          "iree": "tab:purple"}
STYLES = ["-", "--", ":", "-."]


def _title(doc):
    h = doc["header"]
    return "%s, %s (commit %s)" % (h["cpu"]["model"], h["date"], h["commit"])


def plot_latency(doc, model, path):
    pts = [p for p in doc["points"] if p["model"] == model and p["table"] == "fixed"]
    if not pts:
        return False
    threads = sorted({p["threads"] for p in pts})
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    lo, hi = float("inf"), 0.0
    for s in benchlib.SYSTEMS:
        for k, T in enumerate(threads):
            sel = sorted((p["length"], p["median_ms"]) for p in pts if p["system"] == s and p["threads"] == T)
            if not sel:
                continue
            xs, ys = [x for x, _ in sel], [y for _, y in sel]
            lo, hi = min(lo, min(ys)), max(hi, max(ys))
            ax.plot(xs, ys, STYLES[k % len(STYLES)], marker="o", ms=4, color=COLORS[s],
                    label="%s, %d thread%s" % (benchlib.SYSTEM_LABEL[s], T, "" if T == 1 else "s"))
    family = next((r["family"] for r in doc["rows"] if r["model"] == model), "")
    ax.set_xlabel("tree nodes (leaves + internal)" if family == "treelstm" else "sequence length (tokens)")
    ax.set_ylabel("latency per input (ms, median)")
    lengths = sorted({p["length"] for p in pts})
    if lengths[0] > 0 and lengths[-1] / lengths[0] >= 4:
        ax.set_xscale("log", base=2)
        if len(lengths) <= 6:
            ax.set_xticks(lengths)
            ax.set_xticklabels([str(n) for n in lengths])
        else:  # plain numbers, not powers of 2
            ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    if lo > 0 and hi / lo > 20:
        ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("%s: latency against input length\n%s" % (model, _title(doc)), fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def plot_split(doc, path):
    keys = list(doc["splits"])
    if not keys:
        return False
    fig, ax = plt.subplots(figsize=(max(6.5, 1.1 * len(keys) + 2), 4.5), dpi=110)
    bottom = [0.0] * len(keys)
    labels = ["%s\n%s thr" % tuple(k.split("/")) for k in keys]
    for part, color, name in (("kernels", "tab:red", "kernels"), ("shape", "tab:orange", "shape functions"),
                              ("other", "tab:gray", "other VM work")):
        vals = [doc["splits"][k][part] for k in keys]
        ax.bar(labels, vals, bottom=bottom, color=color, label=name)
        bottom = [b + v for b, v in zip(bottom, vals)]
    for i, k in enumerate(keys):
        sp = doc["splits"][k]
        ax.text(i, 50, "%.1f / %.1f / %.1f" % (sp["kernels"], sp["shape"], sp["other"]), ha="center",
                va="center", fontsize=7, color="white", rotation=90)
    ax.set_ylabel("% of Nimble's profiled time")
    ax.set_ylim(0, 100)
    ax.set_title("Nimble's time split, kernels / shape functions / other VM work (nimble-run --profile)\n%s"
                 % _title(doc), fontsize=8)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def plot_all(doc, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for model in dict.fromkeys(p["model"] for p in doc["points"]):
        path = os.path.join(out_dir, "latency_%s.png" % benchlib.safe_name(model))
        if plot_latency(doc, model, path):
            written.append(path)
    path = os.path.join(out_dir, "nimble_split.png")
    if plot_split(doc, path):
        written.append(path)
    return written


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 1
    with open(argv[0]) as f:
        doc = json.load(f)
    problems = benchlib.validate(doc)
    if problems:
        print("bench_plot: %s: not a bench_models.py document: %s" % (argv[0], "; ".join(problems[:5])),
              file=sys.stderr)
        return 1
    for p in plot_all(doc, argv[1]):
        print("wrote " + p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
