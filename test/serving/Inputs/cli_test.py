"""`python -m nimble.serve` end to end (test/serving/cli.test): starts the
CLI on a new local Ray instance (autoscaling between 1 and 2 replicas: the
config passed through to Serve), waits for the model's description, sends
one request, stops it with SIGINT and checks it shuts Ray down and exits 0.

    cli_test.py MODEL.nbc OUT.txt
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

import serving_lib as lib

lib.output(sys.argv[2])
lib.watchdog(150)

import nimble  # noqa: E402
from nimble import wire  # noqa: E402

nbc = sys.argv[1]
exe = nimble.load(nbc)
port = lib.free_port()
# Ray makes its sockets under $TMPDIR, which lit points at a path too long
# for a socket (108 bytes): the CLI gets a directory of its own under /tmp.
tmp = tempfile.mkdtemp(prefix="nrs", dir="/tmp")
env = dict(os.environ, TMPDIR=tmp)
log = open(sys.argv[2] + ".cli.log", "w")
proc = subprocess.Popen([sys.executable, "-m", "nimble.serve", nbc, "--address", "local", "--num-cpus", "2",
                         "--port", str(port), "--max-batch-size", "4", "--batch-wait-ms", "2",
                         "--autoscale", "1:2"],
                        stdout=subprocess.PIPE, stderr=log, env=env, text=True)
try:
    banner = proc.stdout.readline().strip()
    lib.line("banner: %s" % banner.replace(str(port), "PORT"))
    t0 = time.monotonic()
    while True:
        try:
            d = lib.describe(port)
            break
        except (OSError, AssertionError):
            # 60 s was once too short under a loaded suite (ConnectionRefused,
            # no log to say why): wait longer, and say what the CLI wrote.
            if time.monotonic() - t0 > 90:
                log.flush()
                sys.stderr.write("the CLI did not answer within 90 s; its log:\n" +
                                 open(sys.argv[2] + ".cli.log").read()[-4000:])
                raise
            time.sleep(0.5)
    lib.line("model: %s, functions: %s" % (d["model"], ", ".join(sorted(d["functions"]))))
    t = ("Node", ("Leaf", np.ones((1, 4), np.float32)), ("Leaf", np.full((1, 4), 2, np.float32)))
    status, body = lib.post(port, wire.request("tree_sum", (t,)))
    got = wire.decode_outputs(body)[0] if status == 200 else None
    lib.line("request: %d %s" % (status, got.tolist() if got is not None else body))
finally:
    proc.send_signal(signal.SIGINT)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = "hung"
shutil.rmtree(tmp, ignore_errors=True)
lib.line("exit: %s" % rc)
if rc != 0:
    sys.stderr.write(open(sys.argv[2] + ".cli.log").read()[-4000:])
