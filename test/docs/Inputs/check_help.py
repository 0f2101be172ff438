#!/usr/bin/env python3
"""Checks a tool's manual against its --help text.

    check_help.py HELP_TEXT MANUAL_MD

HELP_TEXT is the output of `TOOL --help`: a `USAGE: ...` line and an
`OPTIONS:` list whose entries start two columns in, the option's spelling
followed by two or more spaces and its description (continuation lines are
indented further). MANUAL_MD documents each option under its own heading in
its "## Options" section:

    ### `--passes=<pipeline>`

The spellings must match exactly, in both directions: every option of --help
has a heading, and every heading names an option of --help. The usage line
must appear in the manual too (in its synopsis). Problems are printed as
`FILE:LINE: error: ...`; the exit status is 1 if there is any.
"""

import re
import sys


def help_options(help_text):
    """(the usage line or None, {option: line number}) of --help's text."""
    usage, options, in_options = None, {}, False
    for no, line in enumerate(help_text.split("\n"), 1):
        if line.startswith("USAGE:"):
            usage = line[len("USAGE:"):].strip()
        elif line.strip() == "OPTIONS:":
            in_options = True
        elif in_options and not line.strip():
            in_options = False
        elif in_options:
            m = re.match(r"^  (-\S.*?)(?:\s{2,}|$)", line)
            if m:
                options[m.group(1)] = no
    return usage, options


def manual_options(text):
    """{option: line number} of the "### `option`" headings under "## Options"."""
    options, in_section = {}, False
    for no, line in enumerate(text.split("\n"), 1):
        if line.startswith("## "):
            in_section = line.strip() == "## Options"
        elif in_section:
            m = re.match(r"^### `([^`]+)`\s*$", line)
            if m:
                options[m.group(1)] = no
    return options


def option_errors(help_path, help_text, manual, text):
    """The located errors of a manual (MANUAL, its text) against --help's
    text (read from HELP_PATH); also for test/import-onnx/Inputs/check_doc.py.
    Returns (errors, the number of options of --help, of the manual)."""
    usage, in_help = help_options(help_text)
    in_manual = manual_options(text)
    errors = []
    if not in_help:
        errors.append("%s: error: no options found after 'OPTIONS:'" % help_path)
    if not in_manual:
        errors.append("%s: error: no \"### `option`\" headings under \"## Options\"" % manual)
    for opt, no in sorted(in_help.items(), key=lambda kv: kv[1]):
        if opt not in in_manual:
            errors.append("%s: error: option `%s` of --help (line %d) is not documented: add "
                          "a heading \"### `%s`\" under \"## Options\"" % (manual, opt, no, opt))
    for opt, no in sorted(in_manual.items(), key=lambda kv: kv[1]):
        if opt not in in_help:
            errors.append("%s:%d: error: `%s` is documented but --help has no such option"
                          % (manual, no, opt))
    if usage is None:
        errors.append("%s: error: no 'USAGE:' line" % help_path)
    elif usage not in text:
        errors.append("%s: error: the usage line of --help, \"%s\", is not in the manual"
                      % (manual, usage))
    return errors, len(in_help), len(in_manual)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: check_help.py HELP_TEXT MANUAL_MD")
    help_path, manual = sys.argv[1], sys.argv[2]
    with open(help_path, encoding="utf-8") as f:
        help_text = f.read()
    with open(manual, encoding="utf-8") as f:
        text = f.read()
    errors, n_help, n_manual = option_errors(help_path, help_text, manual, text)
    for e in errors:
        print(e)
    print("%d options in --help, %d in %s: %d problems" % (n_help, n_manual, manual, len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
