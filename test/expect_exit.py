#!/usr/bin/env python3
"""%expect-exit N CMD ARGS...: runs CMD, passes its stdout/stderr through, and
succeeds only if it exited with status N. A death by signal (a crash) always
fails, whatever N is: tools must never crash on bad input."""
import subprocess
import sys

if len(sys.argv) < 3:
    sys.exit("usage: expect_exit.py N CMD [ARGS...]")
want = int(sys.argv[1])
proc = subprocess.run(sys.argv[2:])
if proc.returncode < 0:
    sys.stderr.write("expect_exit: %s died with signal %d\n" % (sys.argv[2], -proc.returncode))
    sys.exit(1)
if proc.returncode != want:
    sys.stderr.write("expect_exit: %s exited with %d, expected %d\n"
                     % (sys.argv[2], proc.returncode, want))
    sys.exit(1)
