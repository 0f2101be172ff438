"""Edits the native-code section of a .nbc (docs/VM.md) for hostile tests.

    nbc_native.py IN OUT EDIT

EDIT is one of
  machine=N          set the shared object's ELF e_machine to N
  truncate=N         keep only the first N bytes of the object (the section
                     shrinks; the bytes after it are left unused)
  symbol=I:NAME      rename entry I's symbol (same length as before)
  feature=OLD:NEW    rename a required CPU feature (same length)
  kernel=I:K         point entry I at kernel K
  object-byte=O:V    set byte O of the object to V (no checksum repair with
                     the `raw-` prefix: raw-object-byte=O:V)
  object-u64=O:V     set the little-endian u64 at byte O of the object to V
  table-op=OLD:NEW   rename the first kernel-table member op OLD to NEW (same
                     length: the table then no longer matches the object)
and the checksum is recomputed (CRC-32C of everything after the header), so
that the loader's own checks, not the checksum, are what the test exercises.
"""
import struct
import sys

NATIVE_CODE = 8
KERNELS = 5
HEADER = 40


def crc32c(data):
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def main():
    src, dst, edit = sys.argv[1:4]
    b = bytearray(open(src, "rb").read())
    nsec = struct.unpack_from("<I", b, 32)[0]
    entry = None
    for i in range(nsec):
        at = HEADER + 24 * i
        kind, _, off, size = struct.unpack_from("<IIQQ", b, at)
        if kind == NATIVE_CODE:
            entry, start, end = at, off, off + size
        if kind == KERNELS:
            kstart, kend = off, off + size
    if entry is None:
        sys.exit("no native-code section in " + src)
    pos = start
    fields = {}

    def string(name):
        nonlocal pos
        n = struct.unpack_from("<I", b, pos)[0]
        fields.setdefault(name, []).append((pos + 4, n))
        pos += 4 + n

    string("triple")
    string("cpu")
    nf = struct.unpack_from("<I", b, pos)[0]
    pos += 4
    for _ in range(nf):
        string("feature")
    ne = struct.unpack_from("<I", b, pos)[0]
    pos += 4
    kernels = []
    for _ in range(ne):
        kernels.append(pos)
        pos += 4
        string("symbol")
    obj_off_field = pos
    obj_off, obj_size = struct.unpack_from("<QQ", b, pos)
    obj = start + obj_off
    name, _, value = edit.partition("=")
    fix = True
    if name == "machine":
        struct.pack_into("<H", b, obj + 18, int(value))
    elif name == "truncate":
        n = int(value)
        struct.pack_into("<Q", b, obj_off_field + 8, n)
        struct.pack_into("<Q", b, entry + 16, obj_off + n)
    elif name == "symbol":
        i, new = value.split(":")
        p, n = fields["symbol"][int(i)]
        assert len(new) == n, "same length only"
        b[p:p + n] = new.encode()
    elif name == "feature":
        old, new = value.split(":")
        for p, n in fields["feature"]:
            if bytes(b[p:p + n]) == old.encode():
                assert len(new) == n
                b[p:p + n] = new.encode()
                break
        else:
            sys.exit("no feature " + old)
    elif name == "kernel":
        i, k = value.split(":")
        struct.pack_into("<I", b, kernels[int(i)], int(k))
    elif name in ("object-byte", "raw-object-byte"):
        o, v = value.split(":")
        b[obj + int(o)] = int(v)
        fix = name == "object-byte"
    elif name == "object-u64":
        o, v = value.split(":")
        struct.pack_into("<Q", b, obj + int(o), int(v))
    elif name == "table-op":
        old, new = value.split(":")
        assert len(old) == len(new), "same length only"
        pat = struct.pack("<I", len(old)) + old.encode()
        at = b.find(pat, kstart, kend)
        if at < 0:
            sys.exit("no member op " + old)
        b[at + 4:at + 4 + len(new)] = new.encode()
    else:
        sys.exit("unknown edit " + edit)
    if fix:
        struct.pack_into("<Q", b, 24, crc32c(b[HEADER:]))
    open(dst, "wb").write(b)


if __name__ == "__main__":
    main()
