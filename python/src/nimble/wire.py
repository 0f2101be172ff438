"""The JSON form of Nimble's values over HTTP (docs/serving.md), without Ray.

nimble.serve decodes each request body with ``decode_request`` and encodes
each result with ``encode_outputs``; this module is also what a client may
use to build requests (scripts/serve_load.py does). Kept apart from
serve.py so that it is testable, and usable, without Ray installed
(test/python/wire_test.py).

A request:

    {"function": "main", "inputs": [VALUE, ...], "encoding": "list" | "npy"}

``encoding`` (optional, default "list") chooses how tensors come back. A
VALUE mirrors the Python module's values (docs/python.md, "Values"):

    tensor   {"dtype": "float32", "data": [[0.5, 1.0], ...]}   (nested lists)
             {"dtype": "float32", "shape": [2, 0], "data": []}  (a 0 dim)
             {"npy": "<base64 of a .npy file>"}                 (dtype inside)
    ADT      ["Node", VALUE, VALUE]  /  "Nil"   (the constructor, then fields)
    tuple    [VALUE, ...]

A result tensor holding NaN or an infinity comes back as npy whatever the
encoding: JSON numbers cannot hold them.

A JSON array becomes a Python tuple and a string a constructor name; the
function's signature decides whether a tuple is an ADT value or a
``tuple<...>`` (as in the Python module, which checks every value against
its parameter type). A response:

    {"outputs": [VALUE, ...]}          one entry per result of the function
    {"error": "one line"}              with a 4xx or 5xx status

Every malformed request raises ``RequestError`` with an HTTP status and a
one-line message before anything runs: the body's size, the JSON's nesting
depth (checked by a scan before parsing, so a tree 100,000 deep costs one
pass over the bytes and no recursion), a tensor's declared size (an .npy
header claiming 2 GB is refused before any allocation), an unknown function
or dtype. Type errors against the signature (a wrong dtype, rank or static
dimension, a wrong constructor) are the module's ``nimble.InputError``,
raised per instance when the batch runs; serve.py turns them into 400s.
"""

import binascii
import io
import json
import re

import numpy as np

__all__ = ["Limits", "RequestError", "decode_request", "encode_outputs", "encode_value",
           "decode_value", "tensor", "request", "decode_outputs", "DTYPES"]

# The dtypes a tensor may have on the wire: those numpy and the module share
# (bf16 results come back as float32, docs/python.md).
DTYPES = ("float32", "float64", "float16", "bool", "int8", "int16", "int32", "int64",
          "uint8", "uint16", "uint32", "uint64")


class Limits:
    """What one request may hold. The defaults are documented in
    docs/serving.md ("Limits"); a deployment takes its own."""

    def __init__(self, max_body_bytes=64 << 20, max_depth=2000, max_tensor_bytes=256 << 20):
        self.max_body_bytes = int(max_body_bytes)
        self.max_depth = int(max_depth)
        self.max_tensor_bytes = int(max_tensor_bytes)


class RequestError(Exception):
    """A request the server refuses: ``status`` (4xx) and a one-line message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = _one_line(message)


def _one_line(text):
    text = str(text)
    return text if "\n" not in text else " ".join(s.strip() for s in text.splitlines() if s.strip())


# Strings (with escapes) or brackets: what decides the nesting depth.
# (The string alternative unrolled, [^"\\]* runs at C speed: the base64
# of a tensor is one long string.)
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def _opening_brackets(body):
    """The number of '[' and '{' bytes in ``body`` (inside strings too: an
    upper bound of the depth). bytes.count tests one byte at a time (about
    1 ns a byte: 90 us for both brackets over a 37 KB Tree-LSTM request, a
    third of its decoding); numpy compares 16-64 bytes at a time. '[' (0x5b)
    and '{' (0x7b) differ in bit 5 only, and no other byte ORed with 0x20
    gives 0x7b, so one comparison counts both."""
    if len(body) < 2048:
        return body.count(b"[") + body.count(b"{")
    a = np.frombuffer(body, np.uint8)
    return int(np.count_nonzero((a | 0x20) == 0x7B))


def json_depth(body, limit):
    """The nesting depth of a JSON text when over ``limit`` (then at least
    limit + 1, found as soon as it is exceeded), else a number <= limit. One regex pass, no recursion: a body 100,000 brackets deep is
    refused here rather than in json.loads (which recurses)."""
    # Fewer opening brackets than the limit: no need to look.
    if _opening_brackets(body) <= limit:
        return 0 if limit >= 0 else 1
    depth = best = 0
    for m in _TOKENS.finditer(body):
        c = m.group()
        if c in (b"[", b"{"):
            depth += 1
            if depth > best:
                best = depth
                if best > limit:
                    return best
        elif c in (b"]", b"}"):
            depth -= 1
    return best


def parse_body(body, limits):
    """bytes -> the request's JSON object, or RequestError."""
    if len(body) > limits.max_body_bytes:
        raise RequestError(413, "error: request body of %d bytes is over the limit of %d bytes"
                           % (len(body), limits.max_body_bytes))
    if json_depth(body, limits.max_depth) > limits.max_depth:
        raise RequestError(400, "error: request JSON is nested more than %d levels" % limits.max_depth)
    try:
        req = json.loads(body)
    except RecursionError:  # a limit above what the parser's recursion takes
        raise RequestError(400, "error: request JSON is nested too deeply to parse") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise RequestError(400, "error: request is not JSON: %s" % e) from None
    if not isinstance(req, dict):
        raise RequestError(400, "error: request must be a JSON object "
                                '{"function": ..., "inputs": [...]}, got a JSON %s' % _kind(req))
    return req


def _kind(j):
    return {dict: "object", list: "array", str: "string", bool: "boolean",
            type(None): "null"}.get(type(j), "number")


def _tensor(j, limits, where):
    if "npy" in j:
        extra = set(j) - {"npy"} if len(j) > 1 else None
        if extra:
            raise RequestError(400, "error: %s: an npy tensor takes only \"npy\", got %s"
                               % (where, ", ".join(sorted(extra))))
        text = j["npy"]
        if not isinstance(text, str):
            raise RequestError(400, "error: %s: \"npy\" must be a base64 string" % where)
        try:
            # base64.b64decode(text, validate=True) without its copy of the
            # text as bytes: binascii reads an ASCII str in place.
            raw = binascii.a2b_base64(text, strict_mode=True)
        except (binascii.Error, ValueError) as e:
            raise RequestError(400, "error: %s: \"npy\" is not base64: %s" % (where, e)) from None
        return _npy(raw, limits, where)
    extra = set(j) - {"dtype", "data", "shape"}
    if extra or "dtype" not in j or "data" not in j:
        raise RequestError(400, "error: %s: a tensor is {\"dtype\", \"data\"[, \"shape\"]} or {\"npy\"}, "
                           "got an object with %s" % (where, ", ".join(sorted(j)) or "no keys"))
    dtype = j["dtype"]
    if dtype not in DTYPES:
        raise RequestError(400, "error: %s: unknown dtype %s (one of %s)"
                           % (where, json.dumps(dtype)[:40], ", ".join(DTYPES)))
    try:
        raw = np.array(j["data"])   # numpy's own reading first: bool, int64 or float64
    except (ValueError, TypeError, OverflowError) as e:
        raise RequestError(400, "error: %s: data is not a rectangular array of %s: %s"
                           % (where, dtype, _one_line(e))) from None
    if raw.dtype.kind not in "biuf":
        raise RequestError(400, "error: %s: data is not a rectangular array of numbers" % where)
    arr = raw.astype(dtype)
    # An integer dtype takes integers in its range: numpy would truncate 1.5
    # and wrap 1000 into int8 without a word.
    if np.dtype(dtype).kind in "biu" and raw.size:
        if raw.dtype.kind == "f":
            raise RequestError(400, "error: %s: data holds non-integers for dtype %s" % (where, dtype))
        # (uint64 -1 round-trips through int64, so the sign is checked too.)
        if (not np.array_equal(arr.astype(raw.dtype), raw)
                or (np.dtype(dtype).kind == "u" and raw.dtype.kind != "b" and raw.min() < 0)):
            raise RequestError(400, "error: %s: data holds values out of the range of %s" % (where, dtype))
    if "shape" in j:
        shape = j["shape"]
        if (not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool)
                                                   and d >= 0 for d in shape)):
            raise RequestError(400, "error: %s: shape must be a list of non-negative integers" % where)
        n = 1
        for d in shape:
            n *= d
        if n * arr.itemsize > limits.max_tensor_bytes:
            raise RequestError(413, "error: %s: a tensor of shape %s is over the limit of %d bytes"
                               % (where, shape, limits.max_tensor_bytes))
        if n != arr.size:
            raise RequestError(400, "error: %s: shape %s has %d elements, data has %d"
                               % (where, shape, n, arr.size))
        arr = arr.reshape(shape)
    return arr


# The header np.save writes, read without numpy's ast.literal_eval (about
# 50 us a header; a tree's leaves are one .npy each). Anything else takes
# numpy's reader.
_NPY_HEADER = re.compile(r"\{'descr': '([<>|=][a-z][0-9]+)', 'fortran_order': (True|False), "
                         r"'shape': \(((?:\d+, )*\d*|\d+,)\), \}\s*$")


# Parsed headers by their bytes: the leaves of a tree, the sequences of one
# length, share one header, so a request's leaves mostly cost a dictionary
# look-up here (a parse and numpy's dtype checks were 30 us a leaf, 0.3 ms
# of a 40-leaf Tree-LSTM request). Bounded: cleared when full. An entry is
# (shape, dtype, offset of the data, data bytes, fortran, native): native is
# the dtype in this machine's byte order if it is one of DTYPES, else None.
_HEADERS = {}
_HEADERS_MAX = 1024
_VERSIONS = (b"\x01\x00", b"\x02\x00", b"\x03\x00")


def _npy_header(raw):
    """-> (shape, fortran, dtype, offset of the data)."""
    shape, dtype, offset, _nbytes, fortran, _native_dtype = _npy_entry(raw)
    return shape, fortran, dtype, offset


def _npy_entry(raw):
    """The header of the .npy file ``raw`` as a _HEADERS entry; ValueError,
    TypeError or SyntaxError when it is none."""
    version = raw[6:8]
    size = 2 if version == b"\x01\x00" else 4
    end = 8 + size + int.from_bytes(raw[8:8 + size], "little")
    # Versions 1.0-3.0 (numpy's); anything else, or a header longer than
    # the file, takes numpy's reader for its error.
    if raw[:6] == b"\x93NUMPY" and version in _VERSIONS and len(raw) >= end:
        key = raw[:end]
        hit = _HEADERS.get(key)
        if hit is not None:
            return hit
        m = _NPY_HEADER.match(raw[8 + size:end].decode("latin1"))
        if m:
            shape = tuple(int(d) for d in m.group(3).replace(",", " ").split())
            entry = _entry(shape, np.dtype(m.group(1)), end, m.group(2) == "True")
            if len(_HEADERS) >= _HEADERS_MAX:
                _HEADERS.clear()
            _HEADERS[key] = entry
            return entry
    f = io.BytesIO(raw)
    version = np.lib.format.read_magic(f)
    shape, fortran, dtype = np.lib.format._read_array_header(f, version, max_header_size=10000)
    return _entry(shape, dtype, f.tell(), fortran)


def _entry(shape, dtype, offset, fortran):
    n = 1
    for d in shape:
        if d < 0:   # numpy's reader takes them
            raise ValueError("shape %s has a negative dimension" % (list(shape),))
        n *= d
    native = None if dtype.hasobject or dtype.name not in DTYPES else dtype.newbyteorder("=")
    return shape, dtype, offset, n * dtype.itemsize, fortran, native


def _npy(raw, limits, where):
    try:
        shape, dtype, offset, nbytes, fortran, native = _npy_entry(raw)
    except (ValueError, TypeError, SyntaxError) as e:
        raise RequestError(400, "error: %s: not an .npy file: %s" % (where, _one_line(e))) from None
    if native is None:
        raise RequestError(400, "error: %s: .npy of dtype %s (one of %s)" % (where, dtype, ", ".join(DTYPES)))
    # The header's claim first: a 2 GB shape over a few bytes of data is
    # refused before numpy allocates anything.
    if nbytes > limits.max_tensor_bytes:
        raise RequestError(413, "error: %s: a tensor of shape %s (%s) is over the limit of %d bytes"
                           % (where, list(shape), dtype, limits.max_tensor_bytes))
    if len(raw) - offset != nbytes:
        raise RequestError(400, "error: %s: .npy of shape %s holds %d data bytes, needs %d"
                           % (where, list(shape), len(raw) - offset, nbytes))
    if dtype is native or dtype == native:
        if not fortran or len(shape) < 2:
            # Over the decoded bytes in place (no copy): one numpy call,
            # a quarter of frombuffer + reshape's cost.
            return np.ndarray(shape, native, raw, offset)
    arr = np.frombuffer(raw, dtype=dtype, offset=offset).reshape(shape, order="F" if fortran else "C")
    # (Not np.ascontiguousarray: it makes a rank-0 tensor rank 1.)
    if fortran and arr.ndim > 1:
        arr = arr.copy(order="C")
    return arr.astype(native, copy=False)


def decode_value(j, limits, where="input"):
    """A JSON value -> the Python module's value (arrays, tuples, names)."""
    # Exact types first (json.loads makes no others): a tree's nodes are
    # most of a request's Python work.
    t = type(j)
    if t is list:
        return tuple([decode_value(x, limits, where) for x in j])
    if t is dict:
        return _tensor(j, limits, where)
    if t is str:
        return j
    if isinstance(j, dict):
        return _tensor(j, limits, where)
    if isinstance(j, str):
        return j
    if isinstance(j, list):
        return tuple([decode_value(x, limits, where) for x in j])
    raise RequestError(400, "error: %s: a value is a tensor object, an array (constructor and fields, "
                            "or a tuple) or a constructor name, got a JSON %s" % (where, _kind(j)))


def decode_request(body, functions, limits):
    """A request body -> (function, inputs tuple, encoding); ``functions`` is
    the executable's (name -> Signature)."""
    req = parse_body(body, limits)
    extra = set(req) - {"function", "inputs", "encoding"}
    if extra:
        raise RequestError(400, "error: unknown request field%s %s (a request has function, inputs, encoding)"
                           % ("s" if len(extra) > 1 else "", ", ".join(sorted(extra))))
    fn = req.get("function", "main")
    if not isinstance(fn, str) or fn not in functions:
        raise RequestError(404, "error: no function %s (the model has %s)"
                           % (json.dumps(fn)[:60], ", ".join("@" + f for f in functions)))
    inputs = req.get("inputs")
    if not isinstance(inputs, list):
        raise RequestError(400, "error: \"inputs\" must be an array of the function's inputs, got %s"
                           % ("nothing" if inputs is None else "a JSON " + _kind(inputs)))
    encoding = req.get("encoding", "list")
    if encoding not in ("list", "npy"):
        raise RequestError(400, "error: \"encoding\" is \"list\" or \"npy\", got %s" % json.dumps(encoding)[:40])
    values = tuple(decode_value(x, limits, "input %d" % i) for i, x in enumerate(inputs))
    return fn, values, encoding


# The .npy header np.save writes for a C-ordered array, by (dtype, shape):
# a model's results have a few shapes, and np.save formats its header anew
# each time (10 us an array). Bounded: cleared when full.
_NPY_OUT = {}


def _npy_file(arr):
    """np.save's bytes for ``arr``."""
    if arr.flags.c_contiguous and not arr.dtype.hasobject:
        key = (arr.dtype.str, arr.shape)
        head = _NPY_OUT.get(key)
        if head is not None:
            return head + arr.tobytes()
    f = io.BytesIO()
    np.save(f, arr, allow_pickle=False)
    out = f.getvalue()
    if arr.flags.c_contiguous and not arr.dtype.hasobject:
        if len(_NPY_OUT) >= _HEADERS_MAX:
            _NPY_OUT.clear()
        _NPY_OUT[key] = out[:len(out) - arr.nbytes]
    return out


def tensor(arr, encoding="list"):
    """A numpy array -> its JSON form."""
    arr = np.asarray(arr)
    if encoding == "npy" or (arr.dtype.kind == "f" and not np.isfinite(arr).all()):
        return {"npy": binascii.b2a_base64(_npy_file(arr), newline=False).decode("ascii")}
    out = {"dtype": arr.dtype.name, "data": arr.tolist()}
    if 0 in arr.shape:
        out["shape"] = list(arr.shape)
    return out


def encode_value(v, encoding="list"):
    """The Python module's value -> JSON (a result, or a request's input)."""
    if isinstance(v, np.ndarray):
        return tensor(v, encoding)
    if isinstance(v, str):
        return v
    if isinstance(v, (tuple, list)):
        return [encode_value(x, encoding) for x in v]
    if isinstance(v, (int, float, bool, np.generic)):
        return tensor(np.asarray(v), encoding)
    raise TypeError("cannot encode a %s" % type(v).__name__)


def encode_outputs(result, n_results, encoding="list"):
    """A run's result (the value, or a tuple of values for a function with
    several results) -> {"outputs": [...]}, one entry per result."""
    values = result if n_results != 1 else (result,)
    return {"outputs": [encode_value(v, encoding) for v in values]}


def request(function, inputs, encoding="list", input_encoding="list"):
    """A request body (bytes) for ``function`` on Python values: what a
    Python client sends."""
    return json.dumps({"function": function,
                       "inputs": [encode_value(v, input_encoding) for v in inputs],
                       "encoding": encoding}).encode()


def decode_outputs(j, limits=None):
    """A response's {"outputs": [...]} -> a list of Python values."""
    limits = limits or Limits(max_depth=1 << 30, max_tensor_bytes=1 << 62)
    return [decode_value(x, limits, "output %d" % i) for i, x in enumerate(j["outputs"])]
