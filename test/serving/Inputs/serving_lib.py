"""What the serving tests share: a one-node Ray cluster of this process,
small (2 CPUs, no dashboard, a 80 MB object store, its session under a short
/tmp directory: Ray's socket paths must stay under 108 bytes, which a Bazel
TEST_TMPDIR would not), always shut down; a watchdog bounding the test's
time; and plain-HTTP helpers (urllib: the client needs nothing from Ray).
"""

import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading

# A local test cluster on 127.0.0.1: no token files under $HOME.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def watchdog(seconds):
    """Fails the test (exit 3, after printing where) if it runs longer than
    `seconds`: a hung request must not hang CI."""
    def fire(*_):
        raise TimeoutError("test/serving: over the %d s bound" % seconds)
    signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)


def set_ingress():
    """Puts $NIMBLE_TEST_INGRESS's settings (nimble.serve_env: haproxy or
    proxy; default proxy) into this process's environment, which every Ray
    process started from here inherits; -> the ingress's name."""
    from nimble import serve_env
    name = os.environ.get("NIMBLE_TEST_INGRESS", "proxy")
    for k, v in serve_env.ingress_env(name).items():
        os.environ[k] = v
    return name


def ingress_of(port):
    """The name of the program listening on 127.0.0.1:port ("haproxy", or
    the Ray proxy actor's process title), read from /proc: so that a test
    says which ingress answered it, not which one it asked for."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                inodes.add("socket:[%s]" % cols[9])
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir("/proc/%s/fd" % pid)
            if any(os.readlink("/proc/%s/fd/%s" % (pid, fd)) in inodes for fd in fds):
                with open("/proc/%s/comm" % pid) as f:
                    return f.read().strip()
        except OSError:
            continue
    return "nothing"


@contextlib.contextmanager
def cluster():
    """A local Ray instance with Serve's HTTP ingress on a free port; yields
    the port. Shut down (and its session directory removed) on the way out,
    whatever happened. The ingress is $NIMBLE_TEST_INGRESS (nimble.serve_env:
    haproxy or proxy; default proxy), set before Ray starts."""
    import logging

    set_ingress()
    import ray
    from ray import serve

    tmp = tempfile.mkdtemp(prefix="nrs", dir="/tmp")
    try:
        ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=tmp,
                 object_store_memory=80 << 20, log_to_driver=False, logging_level=logging.WARNING)
        port = free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port},
                    logging_config={"log_level": "WARNING"})
        yield port
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()
            shutil.rmtree(tmp, ignore_errors=True)


def request(port, body, method="POST", headers=None, timeout=60):
    """-> (status, parsed JSON body or the raw text). Any HTTP status is an
    answer; a connection that fails raises."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        hdrs = {"Content-Type": "application/json"}
        hdrs.update(headers or {})
        conn.request(method, "/", body=body, headers=hdrs)
        r = conn.getresponse()
        raw = r.read()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, raw.decode("utf-8", "replace")
    finally:
        conn.close()


def post(port, body, **kw):
    return request(port, body, **kw)


def describe(port):
    status, d = request(port, None, method="GET")
    assert status == 200, (status, d)
    return d


def concurrently(fns):
    """Runs the callables at once (one thread each); their results in order."""
    out = [None] * len(fns)
    def run(k):
        try:
            out[k] = fns[k]()
        except Exception as e:  # noqa: BLE001  reported by the caller
            out[k] = e
    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


_out = None


def output(path):
    """The test's lines go to `path`, for FileCheck: Ray's own processes
    print to the driver's stdout (a killed worker, a retried shutdown)."""
    global _out
    _out = open(path, "w")


def line(text):
    f = _out or sys.stdout
    f.write(text + "\n")
    f.flush()
