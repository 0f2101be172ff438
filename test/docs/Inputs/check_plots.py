#!/usr/bin/env python3
"""Checks that every plot a page references names the figures it shows.

    check_plots.py DOC.md...

For each `![...](perf/NAME.png)` outside code blocks (docs/perf.md's plots):

  * the PNG exists and carries a stamp: a tEXt chunk `Nimble-Stamp` holding
    JSON with at least "commit" and "date" (scripts/bench_plot.py writes it);
  * the sidecar perf/NAME.json exists and names the same commit and date;
  * the plot's table names its figures: the last line before the reference in
    its section (headings end sections) that says
    "Measured <YYYY-MM-DD>[ <HH:MM> UTC]... at commit `<commit>`";
  * the stamp is not older than that table: the same commit (either one a
    prefix of the other, `+dirty` ignored), or a date not before the table's
    (to the minute when both give one);
  * a plot redrawn from its table (the stamp has "table_sha256") was drawn
    from the table as it is now: the hash of the `|` lines between the stamp
    line and the reference, each stripped, joined by newlines, is the same.

Why: the latency plots of 2026-11-25 stayed on the page for days after the
tables beside them had moved on by two orders of magnitude. The hashing and
the stamp line must agree with scripts/bench_plot.py (doc_plots,
table_hash); the check of the real page pins that. Problems are printed as
`FILE:LINE: error: ...`; the exit status is 1 if there is any.
"""

import hashlib
import json
import os
import re
import struct
import sys
import zlib

STAMP_KEY = "Nimble-Stamp"
STAMP_LINE = re.compile(r"Measured (\d{4}-\d\d-\d\d)(?: (\d\d:\d\d) UTC)?[^`]*? at commit `([^`]+)`")
IMAGE_REF = re.compile(r"!\[[^\]]*\]\((perf/([A-Za-z0-9_.-]+)\.png)\)")
REDRAW = "/usr/bin/python3 scripts/bench_plot.py --from-doc docs/perf.md docs/perf"


def png_text(path):
    """{keyword: text} of a PNG's tEXt, zTXt and iTXt chunks; ValueError if it is not a PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    out, pos = {}, 8
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"tEXt":
            k, _, v = body.partition(b"\0")
            out[k.decode("latin-1")] = v.decode("latin-1")
        elif kind == b"zTXt":
            k, _, v = body.partition(b"\0")
            out[k.decode("latin-1")] = zlib.decompress(v[1:]).decode("latin-1")
        elif kind == b"iTXt":
            k, _, rest = body.partition(b"\0")
            compressed, rest = rest[0], rest[2:]
            _, _, rest = rest.partition(b"\0")  # language tag
            _, _, v = rest.partition(b"\0")  # translated keyword
            out[k.decode("utf-8")] = (zlib.decompress(v) if compressed else v).decode("utf-8")
        elif kind == b"IEND":
            break
    return out


def table_hash(lines):
    return hashlib.sha256("\n".join(l.strip() for l in lines).encode()).hexdigest()


def doc_plots(text):
    """[(path, name, table stamp or None, stamp line number, table lines, line number)]."""
    out, stamp, stamp_no, table, in_code = [], None, 0, [], False
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
            stamp, stamp_no, table = (m.group(1), m.group(2), m.group(3)), no, []
        if line.lstrip().startswith("|"):
            table.append(line)
        for ref in IMAGE_REF.finditer(line):
            out.append((ref.group(1), ref.group(2), stamp, stamp_no, list(table), no))
    return out


def parse_date(text):
    """('2026-11-26', '15:21' or None) from '2026-11-26 15:21 UTC' or '2026-11-26'."""
    m = re.match(r"^(\d{4}-\d\d-\d\d)(?: (\d\d:\d\d))?", text or "")
    return (m.group(1), m.group(2)) if m else None


def same_commit(a, b):
    a, b = a.split("+")[0].lower(), b.split("+")[0].lower()
    return len(min(a, b, key=len)) >= 7 and (a.startswith(b) or b.startswith(a))


def not_older(plot, table):
    """plot and table are (date, time or None)."""
    if plot[1] and table[1]:
        return plot >= table
    return plot[0] >= table[0]


def check(doc):
    errors, count = [], 0
    text = open(doc, encoding="utf-8").read()
    base = os.path.dirname(doc)
    for rel, name, stamp, stamp_no, table, no in doc_plots(text):
        count += 1
        where = "%s:%d: error: %s.png" % (doc, no, name)
        png = os.path.join(base, rel)
        if not os.path.exists(png):
            errors.append("%s does not exist" % where)
            continue
        try:
            st = json.loads(png_text(png)[STAMP_KEY])
            if not isinstance(st, dict) or not isinstance(st.get("commit"), str) or not parse_date(st.get("date")):
                raise ValueError
        except (KeyError, ValueError):
            errors.append("%s carries no commit stamp (a '%s' tEXt chunk with commit and date); redraw it: %s, "
                          "or bash scripts/bench.sh" % (where, STAMP_KEY, REDRAW))
            continue
        side = os.path.splitext(png)[0] + ".json"
        try:
            sc = json.load(open(side))
        except (OSError, ValueError):
            errors.append("%s has no readable sidecar %s" % (where, os.path.relpath(side, base)))
            continue
        if (sc.get("commit"), sc.get("date")) != (st["commit"], st["date"]):
            errors.append("%s: its sidecar says commit %s, %s but the image says commit %s, %s" % (
                where, sc.get("commit"), sc.get("date"), st["commit"], st["date"]))
            continue
        if stamp is None:
            errors.append("%s: no line before it in its section says `Measured <date> at commit `...`` for its "
                          "table" % where)
            continue
        tdate, ttime, tcommit = stamp
        if not same_commit(st["commit"], tcommit) and not not_older(parse_date(st["date"]), (tdate, ttime)):
            errors.append("%s shows commit %s of %s, older than its table (line %d: commit %s of %s); redraw it: "
                          "%s, or bash scripts/bench.sh" % (where, st["commit"], st["date"], stamp_no, tcommit,
                                                          tdate + (" " + ttime if ttime else ""), REDRAW))
            continue
        if "table_sha256" in st and st["table_sha256"] != table_hash(table):
            errors.append("%s was drawn from its table before the table changed (lines %d-%d); redraw it: %s"
                          % (where, stamp_no, no, REDRAW))
    return errors, count


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: check_plots.py DOC.md...")
    errors, plots = [], 0
    for doc in sys.argv[1:]:
        e, n = check(doc)
        errors += e
        plots += n
    for e in errors:
        print(e)
    print("%d plots in %d files: %d problems" % (plots, len(sys.argv) - 1, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
