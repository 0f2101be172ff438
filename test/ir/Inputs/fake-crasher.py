#!/usr/bin/env python3
"""A stand-in for nimble-opt that garbage.test uses to check that
truncate_fuzz.py really reports failures: it aborts (SIGABRT, like a failed
assert) on any input ending in "tens", exits 1 without a diagnostic on input
ending in "ret", and otherwise accepts."""
import os
import sys

data = sys.stdin.buffer.read()
if data.endswith(b"tens"):
    os.abort()
if data.endswith(b"ret"):
    sys.exit(1)
sys.exit(0)
