#!/usr/bin/env python3
"""Checks the section links of Markdown documents.

    check_links.py (DOC.md | DIR)...

(a directory stands for the *.md files in it)

Every link to `#anchor` (in the same file) or `other.md#anchor` (another of
the given files) must name a heading, with anchors made the way GitHub makes
them: lower case, punctuation other than `-` and `_` dropped, spaces turned
into `-`, and `-1`, `-2`, ... appended to repeated headings. Links to files
that are not among the arguments are not checked (they may be written by
someone else). Problems are printed as `FILE:LINE: error: ...`; the exit
status is 1 if there is any.
"""

import os
import re
import sys


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(text):
    result, count, in_code = set(), {}, False
    for line in text.split("\n"):
        if re.match(r"^\s*(```|~~~)", line):
            in_code = not in_code
            continue
        m = None if in_code else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = count.get(base, 0)
            result.add(base if n == 0 else "%s-%d" % (base, n))
            count[base] = n + 1
    return result


def main():
    paths = []
    for p in sys.argv[1:]:  # a directory stands for its *.md files
        if os.path.isdir(p):
            paths += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".md"))
        else:
            paths.append(p)
    docs = {os.path.normpath(p): open(p, encoding="utf-8").read() for p in paths}
    if not docs:
        sys.exit("usage: check_links.py DOC.md...")
    targets = {p: anchors(t) for p, t in docs.items()}
    errors, links = [], 0
    for path, text in docs.items():
        in_code = False
        for no, line in enumerate(text.split("\n"), 1):
            if re.match(r"^\s*(```|~~~)", line):
                in_code = not in_code
                continue
            if in_code:
                continue
            for target in re.findall(r"\]\(([^)\s]*)\)", line):
                file_part, _, anchor = target.partition("#")
                if not anchor or "://" in file_part:
                    continue
                other = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                    if file_part else path
                if other not in targets:
                    continue
                links += 1
                if anchor not in targets[other]:
                    errors.append("%s:%d: error: link to '%s': %s has no heading with anchor "
                                  "'#%s'" % (path, no, target, other, anchor))
    for e in errors:
        print(e)
    print("%d section links in %d files: %d broken" % (links, len(docs), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
