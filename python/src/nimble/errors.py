"""The exceptions of the nimble module.

Every failure is a ``nimble.Error`` carrying the message the command-line
tools print for the same failure (``model.nir:12:3: error: ...`` for
anything that has a place in the model source, ``error: ...`` otherwise);
never a crash of the interpreter, never a partial result.
"""

import re

_LOCATED = re.compile(r"^(.+?):(\d+):(\d+): error: ")

__all__ = ["Error", "CompileError", "LoadError", "InputError", "ExecutionError", "OutOfMemoryError"]


class Error(Exception):
    """A Nimble error. ``message`` is the tools' text; ``location`` is
    ``(file, line, column)`` of the .nir operation it happened at, or None."""

    def __init__(self, message):
        super().__init__(message)
        self.message = message
        m = _LOCATED.match(message)
        self.location = (m.group(1), int(m.group(2)), int(m.group(3))) if m else None


class CompileError(Error):
    """The .nir is invalid or cannot be compiled (what nimblec reports)."""


class LoadError(Error):
    """The .nbc cannot be read or fails verification (what nimble-run reports)."""


class InputError(Error):
    """An argument does not fit the function: its count, dtype, rank, a
    static dimension, a constructor name or arity; or no such function."""


class ExecutionError(Error):
    """The run failed: a kernel's run-time check, an index out of range, the
    call depth or instruction limit... located at the failing operation."""


class OutOfMemoryError(ExecutionError):
    """Memory ran out during the run (or while copying an argument)."""
