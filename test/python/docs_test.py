"""docs/python.md's worked example runs: every ```python block, in order, in
one namespace, from the repository's root; and what it says it prints is
what it prints (a `# ...` comment after a print on the same line)."""

import contextlib
import io
import os
import re
import unittest

from nimble_testing import ROOT

BLOCK = re.compile(r"```python\n(.*?)```", re.S)
PRINT = re.compile(r"^(\s*)print\((.*)\)\s+# (.*)$")


class DocsTest(unittest.TestCase):
    def test_worked_example(self):
        with open(os.path.join(ROOT, "docs", "python.md")) as f:
            blocks = BLOCK.findall(f.read())
        self.assertGreaterEqual(len(blocks), 6)
        namespace = {}
        cwd = os.getcwd()
        os.chdir(ROOT)
        try:
            for i, block in enumerate(blocks):
                # Each `print(x)  # shown` becomes a check that str(x) starts
                # with what the comment shows (its first line).
                lines = []
                for line in block.splitlines():
                    m = PRINT.match(line)
                    if m:
                        indent, expr, shown = m.groups()
                        line = "%s__check(%s, %r)" % (indent, expr, shown)
                    lines.append(line)
                checks = []
                namespace["__check"] = lambda value, shown: checks.append((str(value), shown))
                out = io.StringIO()
                with self.subTest(block=i), contextlib.redirect_stdout(out):
                    exec(compile("\n".join(lines), "docs/python.md block %d" % i, "exec"), namespace)
                for value, shown in checks:
                    self.assertTrue(value.startswith(shown) or value.replace("\n", " ").startswith(shown),
                                    "docs/python.md block %d prints %r, the comment shows %r" % (i, value, shown))
        finally:
            os.chdir(cwd)


if __name__ == "__main__":
    unittest.main()
