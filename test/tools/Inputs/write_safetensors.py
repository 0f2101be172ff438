#!/usr/bin/env python3
"""Writes a small safetensors file for the nimblec weight tests.

    write_safetensors.py OUT NAME=DTYPE:DIMS ...     e.g. w=F32:2x3  b=F64:3
    write_safetensors.py OUT --corrupt               a header that is not JSON

Each tensor holds 0.5 * arange(numel) in its dtype. The format: an 8-byte
little-endian header length, the JSON header (dtype, shape, data_offsets of
each tensor), then the data.
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32, "I64": np.int64}


def main():
    out = sys.argv[1]
    if sys.argv[2:] == ["--corrupt"]:
        header = b'{"w": {"dtype": "F32", "shape": [2, 3], '  # cut off
        with open(out, "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header)
        return
    header, data = {}, b""
    for spec in sys.argv[2:]:
        name, rest = spec.split("=")
        dtype, dims = rest.split(":")
        shape = [int(d) for d in dims.split("x")] if dims else []
        a = (0.5 * np.arange(int(np.prod(shape)))).astype(DTYPES[dtype]).reshape(shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + a.nbytes]}
        data += a.tobytes()
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


main()
