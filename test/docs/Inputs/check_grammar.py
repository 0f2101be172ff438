#!/usr/bin/env python3
"""Checks that the grammar in the docs is the grammar of the parser.

    check_grammar.py --doc=DOC.md SOURCE...

The parser documents itself: above each parse function of ir/Parser*.cpp
is the EBNF rule it parses, and ir/Lexer.h lists the
lexical rules. The docs collect those rules in ```ebnf blocks. This script reads every rule
(`name ::= ...` plus its continuation lines) from the `//` comments of the
SOURCE files and from the ```ebnf blocks of DOC.md, normalises white space,
and requires that

  * every rule of the sources appears verbatim in the doc, and
  * every rule of the doc is, verbatim, a rule of the sources (no stale or
    invented rules).

A continuation line is a line indented deeper than the rule's first line
(by more than two columns); other comment lines end the rule. Problems are
printed as `FILE:LINE: error: ...`; the exit status is 1 if there is any.
"""

import argparse
import re
import sys

RULE = re.compile(r"^(?P<indent>\s*)(?P<name>[a-z][a-z0-9-]*)\s*::=")


def rules_from_lines(lines):
    """lines: [(line_no, text)] already stripped of comment markers.
    Returns [(line_no, name, normalised_rule)]."""
    rules = []
    cur = None
    for no, text in lines:
        m = RULE.match(text)
        if m:
            cur = [no, m.group("name"), len(m.group("indent")), [text.strip()]]
            rules.append(cur)
            continue
        indent = len(text) - len(text.lstrip())
        if cur and text.strip() and indent > cur[2] + 2:
            cur[3].append(text.strip())
        else:
            cur = None
    return [(no, name, " ".join(" ".join(parts).split())) for no, name, _, parts in rules]


def source_rules(path):
    lines = []
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            m = re.match(r"^\s*//(.*)$", line.rstrip("\n"))
            # A non-comment line ends any rule: mark it with an empty entry.
            lines.append((no, m.group(1) if m else ""))
    return rules_from_lines(lines)


def doc_rules(path):
    lines = []
    in_ebnf = False
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            line = line.rstrip("\n")
            fence = re.match(r"^\s*```\s*(\S*)", line)
            if fence:
                in_ebnf = not in_ebnf and fence.group(1) == "ebnf"
                lines.append((no, ""))
                continue
            if in_ebnf and not line.lstrip().startswith("//"):
                lines.append((no, line))
            else:
                lines.append((no, ""))
    return rules_from_lines(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--doc", required=True)
    ap.add_argument("sources", nargs="+")
    a = ap.parse_args()
    src = {}
    for path in a.sources:
        for no, name, rule in source_rules(path):
            src.setdefault(rule, (path, no))
    if not src:
        sys.exit("error: no grammar rules found in %s" % " ".join(a.sources))
    doc = doc_rules(a.doc)
    errors = []
    documented = {rule for _, _, rule in doc}
    for rule, (path, no) in src.items():
        if rule not in documented:
            errors.append("%s:%d: error: this grammar rule is not in %s (copy it into an "
                          "```ebnf block):\n    %s" % (path, no, a.doc, rule))
    for no, name, rule in doc:
        if rule not in src:
            errors.append("%s:%d: error: this rule is not a rule of %s (the parser's "
                          "comments are the authority):\n    %s"
                          % (a.doc, no, " ".join(a.sources), rule))
    for e in errors:
        print(e)
    print("%d rules in the sources, %d rule lines in %s: %d problems"
          % (len(src), len(doc), a.doc, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
