#!/usr/bin/env python3
"""Writes DIR/plots.md and DIR/perf/*.png (+ sidecars): one plot per way check_plots.py must fail, and two
that must pass. Pure Python (a 1x1 PNG with or without a tEXt stamp), so the selftest needs no matplotlib.

    make_plots.py DIR
"""

import hashlib
import json
import os
import struct
import sys
import zlib

DOC = """# Plots

## Good

Measured 2026-11-26 15:21 UTC at commit `ed7b22bc9b58`: `scripts/bench_models.py ...`.

| model | length |
|---|---|
| lstm_1l | 8 |

![good](perf/good.png)

## Newer

Measured 2026-11-20 at commit `1111111`.

![newer](perf/newer.png)

## Stale

Measured 2026-11-26 08:55 UTC at commit `49050a5`.

![stale](perf/stale.png)

## Defects

Measured 2026-11-26 at commit `abcdef0`.

| model | length |
|---|---|
| lstm_1l | 32 |

![nostamp](perf/nostamp.png)
![nosidecar](perf/nosidecar.png)
![mismatch](perf/mismatch.png)
![changed](perf/changed.png)
![missing](perf/missing.png)

## No stamp line

![orphan](perf/orphan.png)

```
![in a code block](perf/ignored.png)
```
"""


def png(path, stamp):
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    if stamp is not None:
        data += chunk(b"tEXt", b"Nimble-Stamp\0" + json.dumps(stamp, sort_keys=True).encode())
    data += chunk(b"IDAT", zlib.compress(b"\0\0")) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(data)


def sidecar(path, stamp):
    with open(os.path.splitext(path)[0] + ".json", "w") as f:
        json.dump(stamp, f)


def main(out):
    os.makedirs(os.path.join(out, "perf"), exist_ok=True)
    with open(os.path.join(out, "plots.md"), "w") as f:
        f.write(DOC)
    good_table = ["| model | length |", "|---|---|", "| lstm_1l | 8 |"]
    sha = hashlib.sha256("\n".join(good_table).encode()).hexdigest()
    cases = {
        "good": {"commit": "ed7b22b", "date": "2026-11-26 15:21 UTC", "table_sha256": sha},
        "newer": {"commit": "2222222", "date": "2026-11-21 09:00 UTC"},
        "stale": {"commit": "3d0f04f5b8bf", "date": "2026-11-25 11:00 UTC"},
        "nostamp": None,
        "nosidecar": {"commit": "abcdef0", "date": "2026-11-26"},
        "mismatch": {"commit": "abcdef0", "date": "2026-11-26"},
        "changed": {"commit": "abcdef0", "date": "2026-11-26", "table_sha256": sha},
        "orphan": {"commit": "abcdef0", "date": "2026-11-26"},
    }
    for name, st in cases.items():
        path = os.path.join(out, "perf", name + ".png")
        png(path, st)
        if name == "mismatch":
            sidecar(path, dict(st, commit="0000000"))
        elif name != "nosidecar" and st is not None:
            sidecar(path, st)


if __name__ == "__main__":
    main(sys.argv[1])
