"""Edits the cuda-code section of a .nbc (docs/VM.md) for hostile tests.

    nbc_cuda.py IN OUT EDIT

EDIT is one of
  kernel=I:K        point entry I at kernel K
  kind=I:K          set entry I's kind byte to K
  flags=I:F         set entry I's flags byte to F
  symbol=I:NAME     rename entry I's symbol (same length as before)
  arch=NAME         rename the architecture (same length)
  ptx-size=N        set the PTX size field to N
  cubin-offset=N    set the cubin offset field to N
and the checksum is recomputed (the CRC-32C of test/codegen/Inputs/
nbc_native.py), so that the reader's and verifier's own checks are what the
test exercises.
"""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "codegen", "Inputs"))
from nbc_native import HEADER, crc32c  # noqa: E402

CUDA_CODE = 9


def main():
    src, dst, edit = sys.argv[1:4]
    b = bytearray(open(src, "rb").read())
    nsec = struct.unpack_from("<I", b, 32)[0]
    start = None
    for i in range(nsec):
        kind, _, off, _size = struct.unpack_from("<IIQQ", b, HEADER + 24 * i)
        if kind == CUDA_CODE:
            start = off
    if start is None:
        sys.exit("no cuda-code section in " + src)
    pos = start
    n = struct.unpack_from("<I", b, pos)[0]
    arch = (pos + 4, n)
    pos += 4 + n
    ne = struct.unpack_from("<I", b, pos)[0]
    pos += 4
    entries = []
    for _ in range(ne):
        n = struct.unpack_from("<I", b, pos + 6)[0]
        entries.append((pos, pos + 10, n))  # kernel field, symbol bytes, length
        pos += 10 + n
    fields = pos
    name, _, value = edit.partition("=")
    if name == "kernel":
        i, k = value.split(":")
        struct.pack_into("<I", b, entries[int(i)][0], int(k))
    elif name == "kind":
        i, k = value.split(":")
        b[entries[int(i)][0] + 4] = int(k)
    elif name == "flags":
        i, f = value.split(":")
        b[entries[int(i)][0] + 5] = int(f)
    elif name == "symbol":
        i, new = value.split(":")
        _, p, n = entries[int(i)]
        assert len(new) == n, "same length only"
        b[p:p + n] = new.encode()
    elif name == "arch":
        p, n = arch
        assert len(value) == n, "same length only"
        b[p:p + n] = value.encode()
    elif name == "ptx-size":
        struct.pack_into("<Q", b, fields + 8, int(value))
    elif name == "cubin-offset":
        struct.pack_into("<Q", b, fields + 16, int(value))
    else:
        sys.exit("unknown edit " + edit)
    struct.pack_into("<Q", b, 24, crc32c(b[HEADER:]))
    open(dst, "wb").write(b)


if __name__ == "__main__":
    main()
