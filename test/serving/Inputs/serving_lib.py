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
import sys
import tempfile
import threading
import time

# A local test cluster on 127.0.0.1: no token files under $HOME.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def free_port():
    """A port nothing listens on, below the ephemeral range (see
    nimble.serve_env.free_ports: a port bound to 0 may be taken by an
    outgoing connection before the server binds it)."""
    from nimble import serve_env
    return int(serve_env.free_ports(1)[0])


def watchdog(seconds):
    """Fails the test (exit 3, after printing where) if it runs longer than
    `seconds`: a hung request must not hang CI."""
    def fire(*_):
        raise TimeoutError("test/serving: over the %d s bound" % seconds)
    signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)


def set_ingress(avoid=()):
    """Puts $NIMBLE_TEST_INGRESS's settings (nimble.serve_env: haproxy or
    proxy; default proxy) into this process's environment, which every Ray
    process started from here inherits, its ports clear of `avoid`; -> the
    ingress's name."""
    from nimble import serve_env
    name = os.environ.get("NIMBLE_TEST_INGRESS", "proxy")
    for k, v in serve_env.ingress_env(name, avoid=avoid).items():
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


def print_startup_logs(tmp, since, lines=15):
    """Prints to stderr the last lines of the logs that say why Serve did not
    start: the proxies' and HAProxy's (Ray's session directory under `tmp`,
    and HAProxy's own output)."""
    import glob
    paths = sorted(glob.glob(os.path.join(tmp, "session_*", "logs", "serve", "*proxy*"))
                   + glob.glob(os.path.join(tmp, "session_*", "logs", "serve", "controller*"))
                   + glob.glob(os.path.join(tmp, "hap", "*", "*.log")))
    for path in paths:
        try:
            if os.path.getmtime(path) < since:
                continue
            with open(path, errors="replace") as f:
                tail = f.read().splitlines()[-lines:]
        except OSError:
            continue
        if tail:
            print("--- %s" % path, file=sys.stderr)
            print("\n".join(tail), file=sys.stderr)


@contextlib.contextmanager
def cluster():
    """A local Ray instance with Serve's HTTP ingress on a free port; yields
    the port. Shut down (and its session directory removed) on the way out,
    whatever happened. The ingress is $NIMBLE_TEST_INGRESS (nimble.serve_env:
    haproxy or proxy; default proxy), set before Ray starts."""
    import logging

    port = free_port()
    set_ingress(avoid=(port,))
    import ray
    from ray import serve

    tmp = tempfile.mkdtemp(prefix="nrs", dir="/tmp")
    started = time.time()
    # HAProxy's files (config, admin socket, its output) under the session's
    # directory instead of Ray's default /tmp/haproxy-serve, which keeps
    # every run's.
    hap = os.path.join(tmp, "hap")
    for var, name in (("CONFIG_FILE_LOC", "haproxy.cfg"), ("SOCKET_PATH", "admin.sock"),
                      ("SERVER_STATE_BASE", ""), ("SERVER_STATE_FILE", "server-state"),
                      ("METRICS_SOCKET_PATH", "metrics.sock")):
        os.environ["RAY_SERVE_HAPROXY_" + var] = os.path.join(hap, name)
    try:
        ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=tmp,
                 object_store_memory=80 << 20, log_to_driver=False, logging_level=logging.WARNING)
        try:
            serve.start(http_options={"host": "127.0.0.1", "port": port},
                        logging_config={"log_level": "WARNING"})
        except Exception:
            print_startup_logs(tmp, started)
            raise
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


def try_describe(port, timeout=10):
    """describe() for a service that may be recovering: -> (the description,
    None), or (None, why) when the ingress answered with an error status or
    closed the connection (behind HAProxy, until its server list drops a
    killed replica, a request sent there comes back as a 502/503 or a
    closed connection)."""
    try:
        status, d = request(port, None, method="GET", timeout=timeout)
    except OSError as e:
        return None, "connection error (%s)" % type(e).__name__
    if status != 200 or not isinstance(d, dict) or "pid" not in d:
        return None, "status %d" % status
    return d, None


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
