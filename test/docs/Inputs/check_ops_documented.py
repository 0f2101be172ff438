#!/usr/bin/env python3
"""Checks docs/LangRef.md against ir/Ops.def, the one table of operations.

    check_ops_documented.py OPS_DEF LANGREF_MD

* Every mnemonic of Ops.def has a section headed exactly "### `mnemonic`",
  and every heading of that form documents an op of Ops.def (so a renamed or
  deleted op cannot leave a stale section behind). Sections appear once each,
  in the order of Ops.def (which groups the ops).
* Each section's property table agrees with the op's row: the shape-function
  mode, fusion pattern, element-type rule and side-effect flags, and every
  attribute with its kind and default (or "required"). The table rows read

      | Shape function | data-independent |
      | Fusion pattern | broadcast |
      | Element types | numeric (every type but `i1`) |
      | Side effects | pure, commutative |
      | Attributes | `axis`: int, default `-1` &mdash; ...<br>`size`: int, required |

* Each section has a ```nir example that uses the op.

Problems are printed as `LANGREF_MD:LINE: error: ...`; the exit status is 1
if there is any.
"""

import re
import sys

MODE = {"DataIndependent": "data-independent", "DataDependent": "data-dependent",
        "UpperBound": "upper-bound", "None": "none"}
FUSION = {"ElemWise": "elementwise", "Broadcast": "broadcast", "Injective": "injective",
          "Reduction": "reduction", "OutputFusable": "output-fusable", "Opaque": "opaque"}
DTYPES = {"Any": "any", "Float": "float", "Numeric": "numeric", "Int": "int", "Bool": "bool"}
FLAGS = {"Pure": "pure", "Alloc": "alloc", "Effect": "effect", "Terminator": "terminator",
         "Commutative": "commutative"}


def split_args(s):
    """Splits a NIMBLE_OP argument list on top-level commas (quotes respected)."""
    args, cur, quoted, i = [], "", False, 0
    while i < len(s):
        c = s[i]
        if quoted and c == "\\":
            cur += s[i:i + 2]
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        if c == "," and not quoted:
            args.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    args.append(cur.strip())
    return args


def split_attrs(spec):
    """"a:int=0,b:ints=[1, 2],c:str=\"x\"" -> [("a", "int", "0"), ...]."""
    parts, cur, depth, quoted = [], "", 0, False
    for c in spec:
        if c == '"':
            quoted = not quoted
        elif not quoted and c == "[":
            depth += 1
        elif not quoted and c == "]":
            depth -= 1
        if c == "," and depth == 0 and not quoted:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    if cur:
        parts.append(cur)
    attrs = []
    for p in parts:
        name, rest = p.split(":", 1)
        kind, _, default = rest.partition("=")
        attrs.append((name.strip(), kind.strip(), default.strip() if "=" in rest else None))
    return attrs


def read_ops(path):
    ops = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^NIMBLE_OP\((.*)\)\s*$", line.strip())
            if not m:
                continue
            a = split_args(m.group(1))
            if len(a) != 11 or not a[1].startswith('"'):
                continue  # the #error text, or a row this script cannot read
            attrs = a[5][1:-1].replace('\\"', '"')
            ops.append({
                "mnemonic": a[1].strip('"'),
                "attrs": split_attrs(attrs) if attrs else [],
                "mode": MODE[a[7]],
                "fusion": FUSION[a[8]],
                "dtypes": DTYPES[a[9]],
                "flags": sorted(FLAGS[f.strip()] for f in a[10].split("|")),
            })
    return ops


def read_sections(path):
    """Returns [(mnemonic, line, text)] for every "### `x`" section."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    sections = []
    current = None
    in_code = False
    for i, line in enumerate(lines, 1):
        if re.match(r"^\s*(```|~~~)", line):
            in_code = not in_code
        if in_code:
            if current:
                current[2].append(line)
            continue
        m = re.match(r"^### `([^`]+)`\s*$", line)
        if m:
            current = (m.group(1), i, [])
            sections.append(current)
        elif re.match(r"^#{1,3} ", line):
            current = None
        elif current:
            current[2].append(line)
    return [(name, line, "\n".join(body)) for name, line, body in sections]


def row(text, header):
    m = re.search(r"^\|\s*" + re.escape(header) + r"\s*\|(.*)\|\s*$", text, re.MULTILINE)
    return m.group(1).strip() if m else None


def leading_words(cell):
    """"pure, commutative &mdash; ..." -> ["commutative", "pure"]."""
    head = re.split(r"\s*(&mdash;|—|\(|:)", cell, maxsplit=1)[0]
    return sorted(w.strip() for w in head.split(",") if w.strip())


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: check_ops_documented.py OPS_DEF LANGREF_MD")
    ops_def, langref = sys.argv[1], sys.argv[2]
    ops = read_ops(ops_def)
    sections = read_sections(langref)
    errors = []

    def err(line, msg):
        errors.append("%s:%d: error: %s" % (langref, line, msg))

    if len(ops) < 10:
        errors.append("%s: error: read only %d ops; has the NIMBLE_OP format changed?"
                      % (ops_def, len(ops)))
    by_name = {o["mnemonic"]: o for o in ops}
    seen = {}
    for name, line, _ in sections:
        if name not in by_name:
            err(line, "section documents `%s`, which is not an op of %s" % (name, ops_def))
        if name in seen:
            err(line, "`%s` is documented twice (also on line %d)" % (name, seen[name]))
        seen.setdefault(name, line)
    for o in ops:
        if o["mnemonic"] not in seen:
            errors.append("%s: error: op `%s` of %s has no \"### `%s`\" section"
                          % (langref, o["mnemonic"], ops_def, o["mnemonic"]))

    documented = [s for s in sections if s[0] in by_name]
    order = [o["mnemonic"] for o in ops if o["mnemonic"] in seen]
    if [s[0] for s in documented if seen[s[0]] == s[1]] != order:
        err(documented[0][1] if documented else 1,
            "op sections are not in the order of %s" % ops_def)

    for name, line, text in documented:
        o = by_name[name]
        checks = [
            ("Shape function", lambda c: c.split(" ")[0] == o["mode"], o["mode"]),
            ("Fusion pattern", lambda c: c.split(" ")[0] == o["fusion"], o["fusion"]),
            ("Element types", lambda c: c.split(" ")[0] == o["dtypes"], o["dtypes"]),
            ("Side effects", lambda c: leading_words(c) == o["flags"], ", ".join(o["flags"])),
        ]
        for header, ok, want in checks:
            cell = row(text, header)
            if cell is None:
                err(line, "`%s`: no \"| %s |\" row" % (name, header))
            elif not ok(cell):
                err(line, "`%s`: %s is \"%s\" in the docs but %s says %s"
                    % (name, header, cell, ops_def, want))
        cell = row(text, "Attributes")
        if cell is None:
            err(line, "`%s`: no \"| Attributes |\" row" % name)
        else:
            items = [] if cell == "none" else re.split(r"\s*<br>\s*", cell)
            names = []
            for item in items:
                m = re.match(r"^`(\w+)`: (\w+), (required|default `([^`]*)`)", item)
                if not m:
                    err(line, "`%s`: cannot read the attribute \"%s\" (expected \"`name`: "
                        "kind, default `value`\" or \"`name`: kind, required\")" % (name, item))
                    continue
                names.append((m.group(1), m.group(2), m.group(4)))
            if sorted(names, key=str) != sorted(o["attrs"], key=str):
                fmt = lambda l: ", ".join("%s:%s%s" % (n, k, "" if d is None else "=" + d)
                                          for n, k, d in l) or "none"
                err(line, "`%s`: attributes documented as [%s] but %s says [%s]"
                    % (name, fmt(names), ops_def, fmt(o["attrs"])))
        examples = re.findall(r"^```nir[^\n]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
        if not any(re.search(r"(^|[\s=])" + re.escape(name) + r"\b", e, re.MULTILINE)
                   for e in examples):
            err(line, "`%s`: the section has no ```nir example that uses it" % name)

    for e in errors:
        print(e)
    print("%d ops in %s, %d op sections in %s: %d problems"
          % (len(ops), ops_def, len(documented), langref, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
