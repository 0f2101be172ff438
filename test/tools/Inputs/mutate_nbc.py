#!/usr/bin/env python3
"""Runs nimble-run on many mutated copies of a real .nbc file.

    mutate_nbc.py --nimble-run=PATH --nbc=FILE --workdir=DIR [--full]
                  [--stale-only] [--seed=N] [--timeout=S] -- NIMBLE_RUN_ARGS...

FILE is an executable compiled by nimblec. The mutations (each applied twice
where it matters: with the header checksum left stale, which the loader must
reject, and with it recomputed so that the mutation reaches the deeper checks
and the interpreter) are:

  * truncation at every section boundary (and one byte either side), at every
    length inside the header, and at a stride of lengths through the file;
    the resealed variant also patches the header's file-size field;
  * the header: each magic byte, major / minor version (newer, older, huge),
    flags, file size, section count (0, one less, one more, huge);
  * the section table: each entry's kind, offset and size set to 0, +-1, +-8
    and huge values;
  * every byte flipped (XOR 0xFF) -- a deterministic sample of them unless
    --full;
  * every aligned 32-bit word set to +1, -1, 0, 0x7fffffff and 0xffffffff
    (huge counts, off-by-one registers, tags and indices) -- sampled likewise.

For each mutated file it runs `nimble-run FILE NIMBLE_RUN_ARGS...` and
requires: the process exits normally (no signal, no sanitizer report) with
status 0 or 1 (a clean run of a mutated program is allowed), stderr contains
`error:` when the status is 1, and the run ends within the timeout (a
timeout is run again once: only a repeated one fails; a single stall is
reported on stderr with gdb's thread stacks of the stalled run). The
first failing mutation (in the order above) is reported with the reason, its
stderr, and the mutated file kept in DIR for reproduction; the status is then
1. Otherwise it prints a summary (counts of runs per outcome).

--stale-only keeps the mutations that leave the checksum stale (a change
after the header or to the checksum itself, or a truncation without the size
patched) and requires every one to be refused
with an error: what protects a file with native code in the default kernel
mode, where nimble-run maps that code (native code is trusted code,
docs/VM.md; with the checksum recomputed, a mutated object may do anything
it likes, so such files are mutated with --kernels=reference).

The header layout and the checksum (CRC-32C of every byte after the 40-byte
header, zero-extended to 64 bits) mirror vm/format/Format.h.
"""

import argparse
import concurrent.futures
import os
import random
import resource
import struct
import subprocess
import sys

HEADER = 40
ENTRY = 24
OFF_MAJOR, OFF_MINOR, OFF_FLAGS, OFF_SIZE, OFF_CRC, OFF_COUNT = 8, 10, 12, 16, 24, 32
SECTION_NAMES = {1: "strings", 2: "adts", 3: "signatures", 4: "constants", 5: "kernels", 6: "functions",
                 7: "kernel locations", 8: "native code", 9: "cuda code", 10: "batching"}

# ---------------------------------------------------------------- CRC-32C --
_POLY = 0x82F63B78
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data):
    crc = 0xFFFFFFFF
    t = _TABLE
    for b in data:
        crc = (crc >> 8) ^ t[(crc ^ b) & 0xFF]
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


class FastReseal:
    """Checksums of same-length variants of one file without rescanning it:
    CRC is affine, so crc(x ^ e) = crc(x) ^ L(e), with L the CRC register
    update from state 0. The contribution of bit b at position p is the
    register after byte (1 << b) followed by n-1-p zero bytes."""

    def __init__(self, data):
        self.data = bytes(data)
        self.base = crc32c(self.data[HEADER:])
        n = len(self.data) - HEADER
        self.contrib = [[0] * 8 for _ in range(n)]
        t = _TABLE
        for b in range(8):
            s = t[1 << b]
            for k in range(n):  # k zero bytes follow
                self.contrib[n - 1 - k][b] = s
                s = (s >> 8) ^ t[s & 0xFF]

    def crc_with_changes(self, changes):
        """changes: {position: new byte} (positions >= HEADER)."""
        crc = self.base
        for p, v in changes.items():
            d = self.data[p] ^ v
            row = self.contrib[p - HEADER]
            for b in range(8):
                if d >> b & 1:
                    crc ^= row[b]
        return crc


# ------------------------------------------------------------- mutations --
class Mutation:
    __slots__ = ("name", "changes", "length", "reseal", "patch_size")

    def __init__(self, name, changes=None, length=None, reseal=False, patch_size=False):
        self.name = name
        self.changes = changes or {}  # position -> byte
        self.length = length  # truncate to this many bytes
        self.reseal = reseal
        self.patch_size = patch_size


def u32_changes(data, off, value):
    return {off + i: b for i, b in enumerate(struct.pack("<I", value & 0xFFFFFFFF))}


def u64_changes(data, off, value):
    return {off + i: b for i, b in enumerate(struct.pack("<Q", value & 0xFFFFFFFFFFFFFFFF))}


def u16_changes(data, off, value):
    return {off + i: b for i, b in enumerate(struct.pack("<H", value & 0xFFFF))}


def sections(data):
    count = struct.unpack_from("<I", data, OFF_COUNT)[0]
    out = []
    for i in range(count):
        kind, _, off, size = struct.unpack_from("<IIQQ", data, HEADER + ENTRY * i)
        out.append((i, kind, off, size))
    return out


def section_of(secs, pos):
    if pos < HEADER:
        return "header"
    if pos < HEADER + ENTRY * len(secs):
        return "section table"
    for _, kind, off, size in secs:
        if off <= pos < off + size:
            return SECTION_NAMES.get(kind, "kind %d" % kind)
    return "padding"


def build_mutations(data, full, rng):
    n = len(data)
    secs = sections(data)
    muts = []

    def both(name, changes):
        muts.append(Mutation(name + " (checksum stale)", changes, reseal=False))
        muts.append(Mutation(name + " (checksum recomputed)", changes, reseal=True))

    # Truncation.
    lengths = set(range(0, HEADER + 1))
    lengths.update(range(HEADER, HEADER + ENTRY * len(secs) + 1, 4))
    for _, _, off, size in secs:
        for p in (off, off + size):
            lengths.update((p - 1, p, p + 1))
    lengths.update(range(0, n, 1 if full else 53))
    for length in sorted(l for l in lengths if 0 <= l < n):
        muts.append(Mutation("truncated to %d bytes" % length, length=length))
        if length >= HEADER:
            muts.append(Mutation("truncated to %d bytes (size and checksum patched)" % length,
                                 length=length, reseal=True, patch_size=True))

    # The header.
    for i in range(8):
        both("magic byte %d changed" % i, {i: data[i] ^ 0x20})
    major, minor = struct.unpack_from("<HH", data, OFF_MAJOR)
    for v in (major + 1, 0xFFFF, max(major - 1, 0) if major else 0xFFFE):
        if v != major:
            both("major version %d" % v, u16_changes(data, OFF_MAJOR, v))
    for v in (minor + 1, 0xFFFF):
        both("minor version %d" % v, u16_changes(data, OFF_MINOR, v))
    both("flags 1", u32_changes(data, OFF_FLAGS, 1))
    for v in (0, n - 1, n + 1, 1 << 40, (1 << 64) - 1):
        both("file size field %d" % v, u64_changes(data, OFF_SIZE, v))
    both("checksum high word set", u32_changes(data, OFF_CRC + 4, 1))
    count = len(secs)
    for v in (0, count - 1, count + 1, 65, 0xFFFFFFFF):
        both("section count %d" % v, u32_changes(data, OFF_COUNT, v))
    both("reserved header word set", u32_changes(data, 36, 1))

    # The section table.
    for i, kind, off, size in secs:
        e = HEADER + ENTRY * i
        name = "section %d (%s)" % (i, SECTION_NAMES.get(kind, kind))
        for v in (0, 7, 0xFFFFFFFF, secs[(i + 1) % count][1]):
            both("%s kind %d" % (name, v), u32_changes(data, e, v))
        both("%s reserved word set" % name, u32_changes(data, e + 4, 1))
        for v in (0, off - 1, off + 1, off + 8, off - 8, n, n - 1, 1 << 40, (1 << 64) - 8):
            both("%s offset %d" % (name, v), u64_changes(data, e + 8, v))
        for v in (0, size - 1, size + 1, size + 8, n, 1 << 40, (1 << 64) - 1):
            both("%s size %d" % (name, v), u64_changes(data, e + 16, v))

    # Byte flips and word values (the checksum recomputed: that is what
    # reaches the reader's checks and the interpreter; a stale one is
    # sampled, it only tests the checksum).
    positions = list(range(HEADER, n))
    flips = positions if full else sorted(rng.sample(positions, min(len(positions), 1000)))
    for p in flips:
        muts.append(Mutation("byte %d (%s) flipped" % (p, section_of(secs, p)), {p: data[p] ^ 0xFF}, reseal=True))
    for p in positions[:: 1 if full else 97]:
        muts.append(Mutation("byte %d (%s) flipped (checksum stale)" % (p, section_of(secs, p)),
                             {p: data[p] ^ 0xFF}))
    words = list(range(HEADER, n - 3, 4))
    word_muts = []
    for p in words:
        (w,) = struct.unpack_from("<I", data, p)
        for v in (w + 1, w - 1, 0, 0x7FFFFFFF, 0xFFFFFFFF):
            if v & 0xFFFFFFFF != w:
                word_muts.append(Mutation("word at %d (%s) %d -> %d" % (p, section_of(secs, p), w, v & 0xFFFFFFFF),
                                          u32_changes(data, p, v), reseal=True))
    if not full:
        word_muts = [word_muts[i] for i in sorted(rng.sample(range(len(word_muts)), min(len(word_muts), 1600)))]
    muts.extend(word_muts)
    return muts


def apply(data, m, reseal_ctx):
    buf = bytearray(data)
    for p, v in m.changes.items():
        buf[p] = v
    if m.length is not None:
        del buf[m.length:]
        if m.patch_size and len(buf) >= HEADER:
            buf[OFF_SIZE:OFF_SIZE + 8] = struct.pack("<Q", len(buf))
    if m.reseal and len(buf) >= HEADER:
        if m.length is None and all(p >= HEADER for p in m.changes):
            crc = reseal_ctx.crc_with_changes(m.changes)
        else:
            crc = crc32c(bytes(buf[HEADER:]))
        buf[OFF_CRC:OFF_CRC + 8] = struct.pack("<Q", crc)
    return bytes(buf)


# ----------------------------------------------------------------- running --
def limit_memory():
    # A hostile file may make the VM allocate; an allocation failure must be
    # an error message, and the limit keeps a runaway run off the machine.
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def thread_stacks(pid):
    """Every thread's backtrace of a live process (gdb, when installed), so
    that a hang says where it hangs; bounded in time, best effort."""
    try:
        r = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=60)
        return r.stdout.decode("utf-8", "replace")
    except (OSError, subprocess.TimeoutExpired) as e:
        return "(no thread stacks: %s)" % e


def asan_env():
    """The environment of an ASan build's runs: the same 4 GiB cap as
    limit_memory(), per allocation. ASan reserves terabytes of address space,
    so RLIMIT_AS cannot be used; without a cap a mutated splat constant of
    17 GB (one flipped byte of a dimension) is allocated and filled for tens
    of seconds before its first use fails a shape check, which is what CI's
    30-second timeouts were (test/tools/hostile-nbc.test, mutation 1793)."""
    env = dict(os.environ)
    opts = env.get("ASAN_OPTIONS", "")
    env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + "allocator_may_return_null=1:max_allocation_size_mb=4096"
    return env


def run_once(tool, args, path, timeout, use_rlimit):
    p = subprocess.Popen([tool, path] + args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, preexec_fn=limit_memory if use_rlimit else None,
                         env=None if use_rlimit else asan_env())
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stacks = thread_stacks(p.pid)
        p.kill()
        p.communicate()
        return "timeout", "no exit within %g s" % timeout, stacks
    return p.returncode, "", err.decode("utf-8", "replace")


def run_one(tool, args, path, timeout, use_rlimit, transients=None):
    """Runs one file and classifies the outcome. A timeout is run again once:
    a hang the file causes repeats and fails; a stall of the machine is
    counted in `transients`, with the first attempt's thread stacks kept for
    a look."""
    code, why, err = run_once(tool, args, path, timeout, use_rlimit)
    if code == "timeout":
        code2, why2, err2 = run_once(tool, args, path, timeout, use_rlimit)
        if code2 == "timeout":
            return "timeout", why + ", twice", err + "\n" + err2
        if transients is not None:
            transients.append((path, err))
        code, why, err = code2, why2, err2
    if code < 0:
        return "crash", "killed by signal %d" % -code, err
    # allocator_may_return_null=1 makes a refused allocation a warning and a
    # null result (which the VM reports as out of memory): not a finding.
    reports = "\n".join(l for l in err.splitlines() if "AddressSanitizer failed to allocate" not in l)
    if "Sanitizer" in reports or "runtime error:" in reports:
        return "crash", "sanitizer report", err
    if code == 0:
        return "ok", "", err
    if code == 1:
        if "error:" not in err:
            return "bad", "exit 1 without 'error:' on stderr", err
        return "error", "", err
    return "bad", "exit status %d" % code, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nimble-run", required=True)
    ap.add_argument("--nbc", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--full", action="store_true", help="every byte and word, not a sample")
    ap.add_argument("--stale-only", action="store_true",
                    help="only the mutations a stale checksum or size must refuse; each must be an error")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--jobs", type=int, default=max(2, os.cpu_count() or 2))
    ap.add_argument("args", nargs="*")
    o = ap.parse_args()

    with open(o.nbc, "rb") as f:
        data = f.read()
    if data[:8] != b"NIMBLEBC" or struct.unpack_from("<Q", data, OFF_CRC)[0] != crc32c(data[HEADER:]):
        sys.exit("mutate_nbc.py: %s is not a valid .nbc file (magic or checksum)" % o.nbc)
    with open(o.nimble_run, "rb") as f:
        tool = f.read()
    # ASan reserves terabytes of address space: no RLIMIT_AS for it (GCC links
    # libasan dynamically, so look for the library's name too).
    use_rlimit = b"AddressSanitizer" not in tool and b"libasan" not in tool
    os.makedirs(o.workdir, exist_ok=True)

    # The unmutated file must run cleanly, or the test proves nothing.
    base = os.path.join(o.workdir, "original.nbc")
    with open(base, "wb") as f:
        f.write(data)
    outcome, why, err = run_one(o.nimble_run, o.args, base, o.timeout, use_rlimit)
    if outcome != "ok":
        sys.exit("mutate_nbc.py: the original file does not run cleanly (%s %s):\n%s" % (outcome, why, err))

    rng = random.Random(o.seed)
    muts = build_mutations(data, o.full, rng)
    if o.stale_only:
        # The checksum covers every byte after the header; the header's own
        # fields (a newer minor version, one section fewer) may be legal.
        def stale(m):
            covered = m.length is not None or any(p >= HEADER or OFF_CRC <= p < OFF_CRC + 8 for p in m.changes)
            return not m.reseal and covered and apply(data, m, None) != data
        muts = [m for m in muts if stale(m)]
    reseal_ctx = FastReseal(data)

    def job(i):
        m = muts[i]
        path = os.path.join(o.workdir, "m%06d.nbc" % i)
        with open(path, "wb") as f:
            f.write(apply(data, m, reseal_ctx))
        res = run_one(o.nimble_run, o.args, path, o.timeout, use_rlimit, transients)
        if o.stale_only and res[0] == "ok":
            res = ("bad", "a stale checksum or size was accepted", res[2])
        if res[0] in ("ok", "error"):
            os.unlink(path)
        return res

    counts = {}
    failures = []
    transients = []
    with concurrent.futures.ThreadPoolExecutor(o.jobs) as ex:
        for i, (outcome, why, err) in enumerate(ex.map(job, range(len(muts)))):
            counts[outcome] = counts.get(outcome, 0) + 1
            if outcome not in ("ok", "error"):
                failures.append((i, outcome, why, err))

    print("mutations: %d; clean runs: %d; errors: %d; failures: %d"
          % (len(muts), counts.get("ok", 0), counts.get("error", 0), len(failures)))
    # A stall that did not repeat: said on stderr (in the test log), with
    # where the threads were, so that a rare hang can still be found.
    for n, (path, stacks) in enumerate(transients):
        keep = os.path.join(o.workdir, "transient-%d.txt" % n)
        with open(keep, "w") as f:
            f.write(stacks)
        print("mutate_nbc.py: note: %s timed out once and ran cleanly the second time; thread stacks "
              "of the first run in %s:\n%s" % (path, keep, "\n".join(stacks.splitlines()[-60:])),
              file=sys.stderr)
    if failures:
        i, outcome, why, err = failures[0]
        path = os.path.join(o.workdir, "m%06d.nbc" % i)
        print("FIRST FAILURE: mutation %d: %s: %s (%s)" % (i, muts[i].name, outcome, why))
        print("reproduce: %s %s %s" % (o.nimble_run, path, " ".join("'%s'" % a for a in o.args)))
        print("stderr:\n" + "\n".join(err.splitlines()[:30]))
        # Also on stderr, whole: lit shows a command's stderr in the log,
        # while FileCheck's dump of stdout stops after a few lines.
        print("mutate_nbc.py: first failure, mutation %d (%s): %s (%s); stderr:\n%s"
              % (i, muts[i].name, outcome, why, "\n".join(err.splitlines()[-80:])), file=sys.stderr)
        for i, outcome, why, _ in failures[1:20]:
            print("also: mutation %d: %s: %s (%s)" % (i, muts[i].name, outcome, why))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
