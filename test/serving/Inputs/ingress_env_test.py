"""nimble.serve_env's HAProxy settings move every listener that Ray binds on
a fixed default port to a free one: two Ray instances on one machine (tests
side by side, or a benchmark beside a server) must not share a port. The
fallback proxy binds with SO_REUSEPORT, so a shared port is not an error
there: each instance's HAProxy then reaches the other's application.

Also: every variable is one Ray reads (a constant of ray.serve._private.
constants by the same name, or the name its get_env_* call reads: a
misspelt one would be ignored without a word),
HAProxy's per-request metrics are off and its threads at most the cores
(the CPU a request costs, docs/serving.md "Measured"), and build_app turns
the replicas' access log off unless asked."""

import inspect
import os

from nimble import serve_env
from ray.serve._private import constants

env = serve_env.ingress_env("haproxy")
# Ray's name for each fixed default: the constant its processes read.
for name in ("RAY_SERVE_HAPROXY_STATS_PORT", "RAY_SERVE_HAPROXY_METRICS_PORT",
             "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT", "RAY_SERVE_FALLBACK_PROXY_GRPC_PORT"):
    default = getattr(constants, name)
    got = env.get(name)
    print("%s: %s" % (name, "moved" if got is not None and int(got) != default else "FIXED at %s" % default))
ports = [v for k, v in env.items() if k.endswith("_PORT")]
print("distinct: %s" % ("yes" if len(set(ports)) == len(ports) else "NO: %s" % ports))
# Below the kernel's ephemeral range, where an outgoing connection may take a
# port between its choice and HAProxy's bind (CI of 2026-11-30), and clear of
# Serve's direct-ingress ports.
with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
    ephemeral_low = int(f.read().split()[0])
direct = [(constants.RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT, constants.RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT),
          (constants.RAY_SERVE_DIRECT_INGRESS_MIN_GRPC_PORT, constants.RAY_SERVE_DIRECT_INGRESS_MAX_GRPC_PORT)]
bad = [p for p in ports if int(p) >= ephemeral_low or any(lo <= int(p) <= hi for lo, hi in direct)]
print("below the ephemeral range, clear of direct ingress: %s" % ("yes" if not bad else "NO: %s" % bad))
# Clear of the HTTP port the caller is about to serve on (`avoid`): a
# fallback proxy given that port failed to bind it (cli.test, 2026-12-02).
# The lower half of the range avoided, twenty times over (80 picks).
lo, hi = serve_env._PORT_RANGE
mid = (lo + hi) // 2
avoided = [p for _ in range(20) for k, p in serve_env.ingress_env("haproxy", avoid=range(lo, mid)).items()
           if k.endswith("_PORT") and int(p) < mid]
print("clear of the caller's port: %s" % ("yes" if not avoided else "NO: %s" % avoided))
proxy = serve_env.ingress_env("proxy")
print("proxy: %s" % proxy)
# Both: a starting proxy is given serve.start's own 60 s to report ready
# (Ray's 5 s made serve.start fail on a loaded machine).
print("ready check: %s" % ("60 s" if env.get("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S") == "60" else "NOT SET"))
# A variable Ray reads is a constant of that name or named in a
# get_env_* call of ray.serve._private.constants (PROXY_READY_CHECK_TIMEOUT_S
# reads RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S).
source = inspect.getsource(constants)
unknown = [k for k in list(env) + list(proxy) if not hasattr(constants, k) and '"%s"' % k not in source]
print("names Ray reads: %s" % ("all" if not unknown else "NOT %s" % unknown))
print("haproxy metrics: %s" % ("off" if env["RAY_SERVE_HAPROXY_METRICS_ENABLED"] == "0" else "ON"))
print("haproxy threads: %s" % ("at most the cores" if 1 <= int(env["RAY_SERVE_HAPROXY_NBTHREAD"]) <= os.cpu_count()
                               else "MORE THAN THE CORES"))

from nimble import serve as nserve  # noqa: E402
for kw in ({}, {"access_log": True}):
    config = nserve.build_app("/nonexistent.nbc", **kw)._bound_deployment._deployment_config.logging_config
    print("access log %s: %s" % (kw or "by default", "on" if config["enable_access_log"] else "off"))
