#!/usr/bin/env python3
"""PNG plots of docs/perf.md's figures, each stamped with the commit and date of
the figures it shows.

    /usr/bin/python3 scripts/bench_plot.py RESULT.json DIR    (bench_models.py --plot DIR does the same)
    /usr/bin/python3 scripts/bench_plot.py --from-doc docs/perf.md DIR

From a scripts/bench_models.py --json document (a run), writes into DIR:
  * latency_<model>.png: latency of one input against its length (tokens, or
    tree nodes for Tree-LSTM), one line per system and thread count (log scale
    on y when the systems are far apart);
  * nimble_split.png: Nimble's time split per model and thread count
    (kernels / shape functions / other VM work, from nimble-run --profile).

--from-doc redraws the plots a page references from the tables it records:
every `![...](perf/NAME.png)` of the page whose NAME is one of
  * latency_<model>: grouped bars of each system's figure per length and
    thread count, the floor as a black line over each group;
  * autobatch: instances/s of the four systems per model and batch size;
  * compile_time: CPU seconds and bytes per op at -O0 and -O2 against ops,
    per shape, with issue 23's bounds;
is drawn from the markdown table(s) between it and the last line before it in
its section that says `Measured <date> at commit `<commit>``. Those figures
are not re-measured: the plot says so in its corner ("redrawn from the table").

Why the stamps: the plots of 2026-11-25 stayed in docs/perf.md after the
tables beside them had moved on by two orders of magnitude, and nothing
noticed. Every plot now carries the commit and date of its figures three
ways: drawn in the image, in a PNG tEXt chunk (STAMP_KEY, JSON) and in a
sidecar DIR/NAME.json (the same JSON, readable in a diff).
test/docs/plots-stamped.test (Inputs/check_plots.py) fails when a plot the
page references is missing its stamp, when the stamp is older than the
commit its table names, or when a redrawn table changed after the plot was
drawn (the sidecar keeps the table's hash).

Matplotlib from Debian (python3-matplotlib, scripts/setup.sh), Agg backend.
"""

import hashlib
import json
import os
import re
import sys
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

COLORS = {"nimble": "tab:red", "imported": "tab:orange", "pytorch": "tab:blue", "pytorch-nnlstm": "tab:cyan",
          "onnxruntime": "tab:green", "iree": "tab:purple"}
# Every system bench_models.py can time has a colour (bench.sh died here when
# issue 47 added "imported" to the default systems).
assert set(COLORS) == set(benchlib.SYSTEMS), "bench_plot.COLORS must name every benchlib.SYSTEMS entry"
STYLES = ["-", "--", ":", "-."]
STAMP_KEY = "Nimble-Stamp"  # the PNG tEXt keyword; test/docs/Inputs/check_plots.py reads it back

# A table's stamp line in docs/perf.md, as bench_models.py --markdown writes it:
# "Measured 2026-11-26 15:21 UTC at commit `ed7b22bc9b58`: ..." (the time is optional).
STAMP_LINE = re.compile(r"Measured (\d{4}-\d\d-\d\d)(?: (\d\d:\d\d) UTC)?[^`]*? at commit `([^`]+)`")
IMAGE_REF = re.compile(r"!\[[^\]]*\]\((perf/([A-Za-z0-9_.-]+)\.png)\)")


# ---- stamps ---------------------------------------------------------------------------------

def make_stamp(commit, date, source, command, table=None):
    """The stamp of a plot: the commit and date of its figures, where they come from, what drew it."""
    st = {"commit": commit, "date": date, "source": source, "command": command,
          "drawn": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if table is not None:
        st["table_sha256"] = table_hash(table)
    return st


def table_hash(lines):
    """The hash of a table's lines (whitespace at the ends of each line ignored)."""
    return hashlib.sha256("\n".join(l.strip() for l in lines).encode()).hexdigest()


def save(fig, path, stamp):
    """Writes the figure with its stamp drawn in the corner and in a tEXt chunk, and the sidecar.

    Both files go through a temporary file and a rename, so a failed run leaves the old pair."""
    redrawn = stamp["source"].startswith("redrawn")
    fig.text(0.995, 0.004, "figures of commit %s, %s%s" % (
        stamp["commit"], stamp["date"], "; redrawn from the recorded table, not re-measured" if redrawn else ""),
        ha="right", va="bottom", fontsize=6, color="dimgray")
    tmp = path + ".tmp.png"
    fig.savefig(tmp, metadata={STAMP_KEY: json.dumps(stamp, sort_keys=True)})
    plt.close(fig)
    os.replace(tmp, path)
    side = os.path.splitext(path)[0] + ".json"
    with open(side + ".tmp", "w") as f:
        json.dump(stamp, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(side + ".tmp", side)


def _head_commit():
    try:
        return benchlib.git_commit(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    except Exception:  # noqa: BLE001 (a stamp without it is still a stamp)
        return "unknown"


# ---- plots of a bench_models.py run (JSON) ---------------------------------------------------

def _title(doc):
    h = doc["header"]
    return "%s, %s (commit %s)" % (h["cpu"]["model"], h["date"], h["commit"])


def _run_stamp(doc):
    h = doc["header"]
    return make_stamp(h["commit"], h["date"], "measured by scripts/bench_models.py", h["command"])


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
    save(fig, path, _run_stamp(doc))
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
    save(fig, path, _run_stamp(doc))
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


# ---- plots redrawn from a page's recorded tables ---------------------------------------------

def doc_plots(text):
    """[(name, stamp (date, time, commit) or None, table lines, line number)] for each plot a page references.

    The table lines are the `|` lines between the section's last stamp line and the reference."""
    out, stamp, table = [], None, []
    in_code = False
    for no, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        if re.match(r"^#{1,6}\s", line):
            stamp, table = None, []
            continue
        m = STAMP_LINE.search(line)
        if m:
            stamp, table = (m.group(1), m.group(2), m.group(3)), []
        if line.lstrip().startswith("|"):
            table.append(line)
        for ref in IMAGE_REF.finditer(line):
            out.append((ref.group(2), stamp, list(table), no))
    return out


def parse_table(lines):
    """[{header: cell}] of every markdown table among lines (each table's own header)."""
    rows, header = [], None
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
            continue
        if header is None or len(cells) != len(header) or cells[0] in ("model", "shape"):
            header = cells
            continue
        rows.append(dict(zip(header, cells)))
    return rows


def _num(cell):
    """58.4 from '58.4 (0.97)', 1179.8 from '1,179.8', None from '-' or ''."""
    m = re.match(r"^\s*([0-9][0-9,]*\.?[0-9]*)", cell or "")
    return float(m.group(1).replace(",", "")) if m else None


def _log_y(ax):
    """A log y axis labelled at 1, 2 and 5 of each decade, in plain numbers."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: "%g" % v))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def draw_latency(model, rows, title):
    rows = [r for r in rows if r.get("model") == model and "length" in r]  # not the mixed-length table
    if not rows:
        return None
    systems = [s for s in benchlib.SYSTEMS
               if any(_num(r.get(benchlib.SYSTEM_LABEL[s] + " (cores)")) for r in rows)]
    groups = [(int(r["length"]), int(r["threads"])) for r in rows]
    fig, ax = plt.subplots(figsize=(max(6.5, 1.2 * len(groups) + 2), 4.5), dpi=110)
    width = 0.8 / max(1, len(systems))
    vals = []
    for k, s in enumerate(systems):
        ys = [_num(r.get(benchlib.SYSTEM_LABEL[s] + " (cores)")) for r in rows]
        xs = [i - 0.4 + width * (k + 0.5) for i in range(len(rows))]
        ax.bar([x for x, y in zip(xs, ys) if y], [y for y in ys if y], width, color=COLORS[s],
               label=benchlib.SYSTEM_LABEL[s])
        vals += [y for y in ys if y]
    floors = [_num(r.get("floor")) for r in rows]
    for i, f in enumerate(floors):
        if f:
            ax.plot([i - 0.45, i + 0.45], [f, f], color="black", lw=1.5,
                    label="floor (scripts/floors.py)" if i == next(j for j, g in enumerate(floors) if g) else None)
    ax.set_xticks(range(len(rows)))
    unit = rows[0]["unit"]
    what = "nodes" if unit.endswith("node") else "tokens"
    ax.set_xticklabels(["%d %s\n%d thread%s" % (n, what, T, "" if T == 1 else "s") for n, T in groups], fontsize=7)
    ax.set_ylabel("%s (median; lower is faster)" % unit)
    if vals and max(vals) / min(vals) > 8:  # PyTorch's cell loop is 7-9x the rest: keep the others readable
        _log_y(ax)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.set_title("%s: latency against the peers and the floor\n%s" % (model, title), fontsize=9)
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi * (2.5 if ax.get_yscale() == "log" else 1.25))  # room for the legend above the bars
    ax.legend(fontsize=7, loc="upper left", ncol=len(systems) + 1)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    return fig


AUTOBATCH_COLUMNS = (("auto-batched", "Nimble auto-batched", "tab:red"),
                     ("one at a time", "Nimble one at a time", "lightcoral"),
                     ("PyTorch one", "PyTorch one at a time", "tab:blue"),
                     ("PyTorch hand-batched", "PyTorch hand-batched", "lightskyblue"))


def draw_autobatch(rows, title):
    rows = [r for r in rows if "batch" in r and "auto-batched" in r]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(max(6.5, 1.2 * len(rows) + 2), 4.5), dpi=110)
    width = 0.8 / len(AUTOBATCH_COLUMNS)
    for k, (col, label, color) in enumerate(AUTOBATCH_COLUMNS):
        ys = [_num(r.get(col)) or 0.0 for r in rows]
        ax.bar([i - 0.4 + width * (k + 0.5) for i in range(len(rows))], ys, width, color=color, label=label)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(["%s\nbatch %s" % (r["model"], r["batch"]) for r in rows], fontsize=7)
    _log_y(ax)
    ax.set_ylabel("instances/s (higher is faster)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.set_title("Auto-batching throughput, 1 thread\n%s" % title, fontsize=9)
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi * 2.5)  # room for the legend above the bars
    ax.legend(fontsize=7, loc="upper right", ncol=2)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    return fig


def draw_compile_time(rows, title):
    rows = [r for r in rows if "ops" in r and "-O2 s" in r]
    if not rows:
        return None
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.8), dpi=110)
    cmap = plt.get_cmap("tab10")
    for k, s in enumerate(shapes):
        pts = sorted((_num(r["ops"]), _num(r["-O0 s"]), _num(r["-O2 s"]), _num(r["-O2 MiB"]))
                     for r in rows if r["shape"] == s)
        ops = [p[0] for p in pts]
        a1.plot(ops, [p[2] for p in pts], "-", marker="o", ms=3, color=cmap(k), label=s)
        a1.plot(ops, [p[1] for p in pts], ":", color=cmap(k))
        a2.plot(ops, [p[3] * 1048576 / p[0] for p in pts], "-", marker="o", ms=3, color=cmap(k), label=s)
    lo = min(_num(r["ops"]) for r in rows)
    a1.plot([lo, 1e6], [lo / 1e5, 10], color="black", lw=0.8, ls="--", label="100,000 ops/s (issue 23)")
    a2.axhline(2048, color="black", lw=0.8, ls="--", label="2 KB/op (issue 23)")
    for a in (a1, a2):
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel("ops in the program")
        a.grid(True, which="both", alpha=0.3)
    a1.set_ylabel("CPU seconds (-O2 solid, -O0 dotted)")
    a2.set_ylabel("peak memory per op at -O2 (bytes)")
    a2.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    a2.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    a1.legend(fontsize=6, loc="upper left")
    a2.legend(fontsize=6, loc="upper right")
    a1.set_title("nimblec compile time by program shape", fontsize=9)
    a2.set_title("the compiler's peak memory per op", fontsize=9)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    return fig


def redraw_from_doc(doc_path, out_dir, only=None):
    """Redraws every plot doc_path references whose kind this script knows; returns the paths written."""
    with open(doc_path) as f:
        text = f.read()
    written, problems = [], []
    command = "scripts/bench_plot.py --from-doc %s %s" % (os.path.relpath(doc_path), os.path.relpath(out_dir))
    for name, stamp, table, no in doc_plots(text):
        if only and name not in only:
            continue
        where = "%s:%d" % (doc_path, no)
        if stamp is None:
            problems.append("%s: %s.png has no `Measured <date> at commit `...`` line before it in its section"
                            % (where, name))
            continue
        date, hhmm, commit = stamp
        when = date + (" %s UTC" % hhmm if hhmm else "")
        title = "figures of commit %s, %s (docs/perf.md)" % (commit, when)
        rows = parse_table(table)
        if name.startswith("latency_"):
            fig = draw_latency(name[len("latency_"):], rows, title)
        elif name == "autobatch":
            fig = draw_autobatch(rows, title)
        elif name == "compile_time":
            fig = draw_compile_time(rows, title)
        else:
            continue  # drawn by a run (bench_models.py --plot), not from a table
        if fig is None:
            problems.append("%s: no table rows for %s.png between it and its stamp line" % (where, name))
            continue
        path = os.path.join(out_dir, name + ".png")
        save(fig, path, make_stamp(commit, when, "redrawn from the table in %s (recorded figures, not re-measured;"
                                   " drawn at %s)" % (os.path.basename(doc_path), _head_commit()), command, table))
        written.append(path)
    return written, problems


def main(argv):
    if len(argv) == 3 and argv[0] == "--from-doc":
        os.makedirs(argv[2], exist_ok=True)
        written, problems = redraw_from_doc(argv[1], argv[2])
        for p in written:
            print("wrote " + p)
        for p in problems:
            print("bench_plot: error: " + p, file=sys.stderr)
        return 1 if problems else 0
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
