"""The lit test format of Nimble's lit suites; configured in lit.cfg.py.

It lives in a module of its own, not in lit.cfg.py, because lit sends each
test (with its suite's config and format) to worker processes by pickling,
and pickle can only find classes that an importable module defines.
"""

import re

import lit.formats
import lit.Test
import lit.TestRunner


# Shown above each appended command in lit's output (no ')' or quotes: lit's
# %dbg syntax).
_STEP_LABEL = "NIMBLE round trip: printed IR must parse back to itself - see test/nimble_lit_format.py"


class NimbleShTest(lit.formats.ShTest):
    """lit's ShTest, plus an automatic printer round trip for `.nir` files.

    This is how "printed IR parses back to itself" is enforced for every .nir
    test without anyone writing it down: after the file's own RUN lines, we
    append

        nimble-opt --split-input-file FILE -o %t.roundtrip.1.nir
        nimble-opt --split-input-file %t.roundtrip.1.nir -o %t.roundtrip.2.nir
        diff -u %t.roundtrip.1.nir %t.roundtrip.2.nir

    i.e. printing is a fixed point after one parse/print cycle (the first
    print may normalize the hand-written file, e.g. print inferred result
    types; from then on the text must not change). A failure shows the
    commands and the diff like any RUN line.

    Skipped for files that are not meant to parse: those containing
    `--verify-diagnostics`, or with a line `// NO-ROUNDTRIP` (use it for
    tests of parse errors checked without --verify-diagnostics, and say why
    on the same or the next line).
    """

    _NO_ROUNDTRIP = re.compile(r"^\s*//\s*NO-ROUNDTRIP\b", re.MULTILINE)

    def _roundtrip_commands(self, test):
        path = test.getSourcePath()
        if not path.endswith(".nir"):
            return []
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if "--verify-diagnostics" in text or self._NO_ROUNDTRIP.search(text):
            return []
        first, second = "%t.roundtrip.1.nir", "%t.roundtrip.2.nir"
        return [
            "nimble-opt --split-input-file %%s -o %s" % first,
            "nimble-opt --split-input-file %s -o %s" % (first, second),
            "diff -u %s %s" % (first, second),
        ]

    def execute(self, test, litConfig):
        extra = self._roundtrip_commands(test)
        if not extra:
            return super().execute(test, litConfig)

        # Same steps as lit.TestRunner.executeShTest (lit 19), with our
        # commands appended to the parsed RUN script before substitution, so
        # `nimble-opt` and `%t` expand as in any RUN line.
        if test.config.unsupported:
            return lit.Test.Result(lit.Test.UNSUPPORTED, "Test is unsupported")
        script = lit.TestRunner.parseIntegratedTestScript(test)
        if isinstance(script, lit.Test.Result):  # UNSUPPORTED, no RUN line, ...
            return script
        script = list(script) + [
            lit.TestRunner.buildPdbgCommand(_STEP_LABEL, cmd) for cmd in extra
        ]
        if litConfig.noExecute:
            return lit.Test.Result(lit.Test.PASS)

        tmp_dir, tmp_base = lit.TestRunner.getTempPaths(test)
        substitutions = list(self.extra_substitutions)
        substitutions += lit.TestRunner.getDefaultSubstitutions(
            test, tmp_dir, tmp_base, normalize_slashes=self.execute_external
        )
        conditions = {feature: True for feature in test.config.available_features}
        script = lit.TestRunner.applySubstitutions(
            script,
            substitutions,
            conditions,
            recursion_limit=test.config.recursiveExpansionLimit,
        )
        return lit.TestRunner._runShTest(
            test, litConfig, self.execute_external, script, tmp_base
        )
