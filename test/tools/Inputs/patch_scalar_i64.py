#!/usr/bin/env python3
"""Rewrites the operation of the ScalarI64 instructions of an .nbc and reseals
its checksum: a hostile file whose instruction is well formed (the verifier
accepts any of the 11 operations) but whose operands do not fit the new one.

    patch_scalar_i64.py IN.nbc OUT.nbc FROM TO

Every word pair (23, FROM) followed by three register words below 4096
(opcode 23 is ScalarI64, docs/VM.md) has FROM replaced by TO; prints how many.
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mutate_nbc import HEADER, OFF_CRC, crc32c  # noqa: E402

src, dst, frm, to = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
b = bytearray(open(src, "rb").read())
n = 0
for off in range(HEADER, len(b) - 20):
    w = struct.unpack_from("<5I", b, off)
    if w[0] == 23 and w[1] == frm and all(r < 4096 for r in w[2:]):
        struct.pack_into("<I", b, off + 4, to)
        n += 1
struct.pack_into("<Q", b, OFF_CRC, crc32c(bytes(b[HEADER:])))
open(dst, "wb").write(b)
print("patched %d" % n)
