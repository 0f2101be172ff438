"""Nimble from Python: compile a .nir model, load the .nbc, run it.

    import numpy as np, nimble
    exe = nimble.load(nimble.compile("models/lstm/small/lstm_small.nir"))
    h, c = exe.run("main", np.zeros((5, 8), np.float32))

The module is a thin binding over the libraries the command-line tools use
(tools/driver/): ``compile`` runs nimblec's stages in process, ``load`` and
``Executable.run`` nimble-run's, so the CLI and Python cannot disagree.
docs/python.md is the manual.
"""

import collections
import os
import tempfile

from . import errors
from .errors import CompileError, Error, ExecutionError, InputError, LoadError, OutOfMemoryError
from ._runtime import Executable
from ._runtime import load as _load

__all__ = [
    "compile", "load", "Executable", "Signature",
    "Error", "CompileError", "LoadError", "InputError", "ExecutionError", "OutOfMemoryError",
]
__version__ = "0.1"

Signature = collections.namedtuple("Signature", ["name", "params", "results"])
Signature.__doc__ = """A function's signature: ``params`` is a list of (name, type) pairs,
``results`` a list of types, all types written as in .nir (``tensor<?x8xf32>``,
``@Tree``)."""


def _functions(self):
    """The executable's functions: name -> Signature, in the .nbc's order."""
    return {name: Signature(name, [tuple(p) for p in params], list(results))
            for name, params, results in self._functions()}


def _adts(self):
    """The algebraic data types: name -> [(constructor, [field types])]."""
    return {name: [(c, list(fields)) for c, fields in ctors] for name, ctors in self._adts()}


Executable.functions = property(_functions)
Executable.adts = property(_adts)
Executable.__repr__ = lambda self: "<nimble.Executable %s: %s>" % (
    self.name, ", ".join("@" + f for f in self.functions))


def load(source, name=None):
    """Loads a .nbc: a path, or the bytes of one (what ``compile`` returns).
    The verifier runs, as in nimble-run; a bad file raises LoadError."""
    return _load(source, name)


def _is_path(source):
    if isinstance(source, os.PathLike):
        return True
    return isinstance(source, str) and "\n" not in source and not source.lstrip().startswith("module")


def compile(source, opt_level=2, kernels=None, target="cpu", output=None, *,
            weights_dir=None, name=None, mcpu="", mattr="", passes=""):
    """Compiles .nir to .nbc bytes, as ``nimblec`` does, in process.

    ``source`` is a path to a .nir file, or .nir text (a str with a newline or
    starting with ``module``, or bytes). ``kernels``: "native" (the default
    for target "cpu": LLVM kernels embedded in the .nbc) or "reference".
    Relative ``external(...)`` weight files are read from ``weights_dir``
    (default: the .nir's directory, or the current one for text). With
    ``output`` the bytes are written there (atomically) and None is
    returned. Errors raise CompileError with nimblec's message.
    """
    if kernels is None:
        kernels = "native" if target == "cpu" else "reference"
    if _is_path(source):
        path = os.fspath(source)
        try:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", errors="replace")
        except OSError as e:
            raise CompileError("error: cannot open '%s': %s" % (path, e.strerror)) from None
        shown = name or path
        wdir = weights_dir or os.path.dirname(path) or "."
    else:
        text = source.decode("utf-8", errors="replace") if isinstance(source, (bytes, bytearray)) else source
        shown = name or "<string>"
        wdir = weights_dir or "."
    from . import _compiler  # LLVM is loaded only by a process that compiles
    data = _compiler.compile(text, shown, opt_level, kernels, target, os.fspath(wdir), mcpu, mattr, passes)
    if output is None:
        return data
    output = os.fspath(output)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(output) or ".", prefix=os.path.basename(output) + ".tmp.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, output)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return None


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
