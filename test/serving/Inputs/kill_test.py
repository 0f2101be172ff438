"""A replica killed in the middle of a load run (test/serving/replica-kill.test).

    kill_test.py MODEL.nbc OUT.txt

Two replicas; 16 clients each send 12 tree_sum requests one after another
(192 in all, trees of 1 to 40 leaves). Batches wait up to 200 ms to fill,
so each replica holds several requests at any moment. After the first 48
answers one replica's process is killed (SIGKILL: no chance to drain). Every request
must come back either with its own right result (200) or with an error
status and a message (a 5xx from the ingress for the requests the
dead replica held), or, behind HAProxy, a connection closed at once without
a response (HAProxy's answer for a request it had sent on a reused server
connection that the kill closed); none may hang (the clients' timeout counts as lost),
none may get a wrong or another's result. Afterwards the controller
brings two live replicas back within 60 s and the service answers right
(while the ingress drops the dead server, a request may get an error
status or a closed connection: the wait tolerates and retries those, and
says so on stderr). Prints the counts; FileCheck checks them. Bounded at
240 s.
"""

import http.client
import os
import signal
import sys
import threading
import time

import numpy as np

import serving_lib as lib

lib.output(sys.argv[2])
lib.watchdog(240)

import nimble  # noqa: E402
from nimble import serve as nserve  # noqa: E402
from nimble import wire  # noqa: E402
from ray import serve  # noqa: E402

nbc = open(sys.argv[1], "rb").read()
exe = nimble.load(nbc)
rng = np.random.default_rng(11)
CLIENTS, PER_CLIENT, KILL_AFTER = 16, 12, 48


def tree(leaves):
    if leaves == 1:
        return ("Leaf", rng.normal(0, 1, (1, 4)).astype(np.float32))
    k = int(rng.integers(1, leaves))
    return ("Node", tree(k), tree(leaves - k))


work = [[tree(int(rng.integers(1, 41))) for _ in range(PER_CLIENT)] for _ in range(CLIENTS)]
want = [[exe.run("tree_sum", t, kernels="native") for t in ts] for ts in work]
bodies = [[wire.request("tree_sum", (t,)) for t in ts] for ts in work]

counts = {"right": 0, "wrong": 0, "error status": 0, "connection error": 0, "lost": 0}
answered = [0]
after_kill = [0]
killed = threading.Event()
lock = threading.Lock()
statuses = set()


def client(c):
    for k in range(PER_CLIENT):
        try:
            status, body = lib.post(lib_port, bodies[c][k], timeout=60)
        except TimeoutError:
            kind = "lost"          # no answer: the silent loss this test forbids
        except (OSError, http.client.HTTPException):
            # Refused or reset, or (behind HAProxy) the dead replica's
            # response cut after its headers (IncompleteRead): an error the
            # client sees, not a silent loss.
            kind = "connection error"
        else:
            if status == 200:
                got = wire.decode_outputs(body)
                kind = "right" if (len(got) == 1 and np.array_equal(got[0], want[c][k])) else "wrong"
            else:
                ok = isinstance(body, dict) and isinstance(body.get("error"), str) or isinstance(body, str) and body
                kind = "error status" if ok else "lost"
                statuses.add(status)
        with lock:
            counts[kind] += 1
            answered[0] += 1
            if killed.is_set() and kind == "right":
                after_kill[0] += 1


with lib.cluster() as lib_port:
    serve.run(nserve.build_app(nbc, name="served", num_replicas=2, max_batch_size=8,
                               batch_wait_timeout_s=0.2, ray_actor_options={"num_cpus": 0.5},
                               health_check_period_s=1.0))
    # Both replicas must answer before the load starts. Behind HAProxy the
    # server list is written after serve.run returns, so the first requests
    # may get a 503 or reach one replica only: wait (and say so on stderr).
    pids = set()
    starting = []
    t0 = time.monotonic()
    while len(pids) < 2 and time.monotonic() - t0 < 60:
        d, why = lib.try_describe(lib_port)
        if d is None:
            starting.append(why)
            time.sleep(0.1)
        else:
            pids.add(d["pid"])
    if starting or len(pids) < 2:
        sys.stderr.write("kill_test: %d replica(s) seen after %.1f s; errors meanwhile: %s\n" % (
            len(pids), time.monotonic() - t0, sorted(set(starting)) or "none"))
    lib.line("ingress: %s" % lib.ingress_of(lib_port))
    lib.line("replicas: %d" % len(pids))
    victim = sorted(pids)[0]

    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    while answered[0] < KILL_AFTER and any(t.is_alive() for t in threads):
        time.sleep(0.005)
    os.kill(victim, signal.SIGKILL)
    killed.set()
    lib.line("killed one replica after %s answers" % ("enough" if answered[0] >= KILL_AFTER else "too few"))
    for t in threads:
        t.join()

    total = sum(counts.values())
    lib.line("requests: %d of %d answered" % (total, CLIENTS * PER_CLIENT))
    for kind in ("wrong", "lost"):
        lib.line("%s: %d" % (kind, counts[kind]))
    lib.line("right after the kill: %s" % ("some" if after_kill[0] else "none"))
    sys.stderr.write("kill_test: %s, error statuses %s\n" % (counts, sorted(statuses)))
    lib.line("right + errors: %d" % (counts["right"] + counts["error status"] + counts["connection error"]))

    # The controller replaces the dead replica; the service answers right.
    # While the ingress catches up (HAProxy keeps the dead server in its
    # list until its health check or Serve's reconfiguration drops it), a
    # request may come back as an error status or a closed connection: that
    # is allowed (and reported on stderr) until both replacements answer;
    # the request after that must be right.
    t0 = time.monotonic()
    seen = set()
    recovering = []
    while time.monotonic() - t0 < 60:
        d, why = lib.try_describe(lib_port)
        if d is None:
            recovering.append(why)
        else:
            seen.add(d["pid"])
            if len(seen - {victim}) >= 2:
                break
        time.sleep(0.2)
    back = len(seen - {victim}) >= 2
    sys.stderr.write("kill_test: %.1f s to see two live replicas; errors meanwhile: %s\n" % (
        time.monotonic() - t0, sorted(set(recovering)) or "none"))
    # Then a request must come back right; an error status or closed
    # connection from an ingress still dropping the dead server is retried
    # (for up to 30 s, reported on stderr).
    t1 = time.monotonic()
    retried = []
    while True:
        try:
            status, body = lib.post(lib_port, bodies[0][0])
        except OSError as e:
            status, body = 0, "connection error (%s)" % type(e).__name__
        if status == 200 or time.monotonic() - t1 > 30:
            break
        retried.append(status)
        time.sleep(0.2)
    if retried:
        sys.stderr.write("kill_test: the request after recovery retried on %s\n" % retried)
    lib.line("after: %d %s, replicas back: %s" % (
        status, "right" if status == 200 and np.array_equal(wire.decode_outputs(body)[0], want[0][0]) else "WRONG",
        "yes" if back else "no"))
lib.line("done")
