#!/usr/bin/python3
"""Keeps docs/import-onnx.md in step with the tool.

    check_doc.py LIST_OPS HELP MANUAL_MD            check (exit 1 on a difference)
    check_doc.py LIST_OPS HELP MANUAL_MD --write    rewrite the op tables in place

LIST_OPS is the output of `nimble-import-onnx --list-ops` (the importer's own
op map), HELP that of `--help`. The manual's two op tables, between
`<!-- begin: ... -->` and `<!-- end: ... -->` markers, must be exactly what
this script renders from LIST_OPS; every option of --help must have a
"### `option`" heading under "## Options" and the reverse; the usage line
must appear. Problems are printed as `FILE:LINE: error: ...`.
"""

import os
import sys

# The --help / "## Options" check is test/docs's, shared.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "Inputs"))
from check_help import option_errors  # noqa: E402

BEGIN_SUPPORTED = "<!-- begin: supported ops (nimble-import-onnx --list-ops) -->"
END_SUPPORTED = "<!-- end: supported ops -->"
BEGIN_MISSING = "<!-- begin: unsupported ops (nimble-import-onnx --list-ops) -->"
END_MISSING = "<!-- end: unsupported ops -->"


def render(list_ops):
    supported, missing, in_missing = [], [], False
    for line in list_ops.splitlines():
        if line == "# not supported":
            in_missing = True
            continue
        cols = line.split("\t")
        if len(cols) != 4:
            continue
        if in_missing:
            missing.append("| `%s` | %s |" % (cols[0], cols[3]))
        else:
            ops = ", ".join("`%s`" % o.strip() if not o.strip().startswith("(") else o.strip()
                            for o in cols[2].split(","))
            supported.append("| `%s` | %s | %s | %s |" % (cols[0], cols[1], ops, cols[3]))
    sup = ["| ONNX op | from opset | Nimble ops | limits |", "|---|---|---|---|"] + supported
    mis = ["| ONNX op | why not |", "|---|---|"] + missing
    return "\n".join(sup), "\n".join(mis), len(supported), len(missing)


def replace_between(text, begin, end, body):
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        return None
    return text[:i + len(begin)] + "\n" + body + "\n" + text[j:]


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    list_ops = open(sys.argv[1], encoding="utf-8").read()
    help_text = open(sys.argv[2], encoding="utf-8").read()
    manual = sys.argv[3]
    text = open(manual, encoding="utf-8").read()
    sup, mis, n_sup, n_mis = render(list_ops)
    want = replace_between(text, BEGIN_SUPPORTED, END_SUPPORTED, sup)
    want = want and replace_between(want, BEGIN_MISSING, END_MISSING, mis)
    errors = []
    if want is None:
        errors.append("%s: error: the op tables' markers are missing" % manual)
    elif len(sys.argv) == 5 and sys.argv[4] == "--write":
        open(manual, "w", encoding="utf-8").write(want)
        text = want
    elif want != text:
        for no, (a, b) in enumerate(zip(text.split("\n"), want.split("\n")), 1):
            if a != b:
                errors.append("%s:%d: error: the op table differs from --list-ops: has \"%s\", "
                              "expected \"%s\" (regenerate: check_doc.py ... --write)" % (manual, no, a, b))
                break
        else:
            errors.append("%s: error: the op table differs from --list-ops in length" % manual)
    help_errors, n_opts, _ = option_errors(sys.argv[2], help_text, manual, text)
    errors += help_errors
    for e in errors:
        print(e)
    print("%d supported and %d unsupported op types, %d options: %d problems"
          % (n_sup, n_mis, n_opts, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
