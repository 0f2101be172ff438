"""docs/serving.md's table of `python -m nimble.serve` options names exactly
the CLI's long options, both ways (the house rule: docs match --help).

    check_cli_doc.py docs/serving.md
"""

import re
import sys

from nimble import serve

doc = sys.argv[1]
options = {o for a in serve.parser()._actions for o in a.option_strings if o.startswith("--") and o != "--help"}
documented = {}
in_table = False
for no, line in enumerate(open(doc, encoding="utf-8"), 1):
    if line.startswith("| option |"):
        in_table = True
        continue
    if in_table and not line.startswith("|"):
        break
    if in_table:
        for o in re.findall(r"`(--[a-z-]+)", line.split("|")[1]):
            documented[o] = no
bad = 0
for o in sorted(options - set(documented)):
    print("%s: error: option %s of python -m nimble.serve is not in the options table" % (doc, o))
    bad += 1
for o in sorted(set(documented) - options):
    print("%s:%d: error: the options table names %s, which python -m nimble.serve does not take" % (doc, documented[o], o))
    bad += 1
print("%d options, %d documented, %d problems" % (len(options), len(documented), bad))
sys.exit(1 if bad else 0)
