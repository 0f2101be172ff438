"""nimble.serve_env's HAProxy settings move every listener that Ray binds on
a fixed default port to a free one: two Ray instances on one machine (tests
side by side, or a benchmark beside a server) must not share a port. The
fallback proxy binds with SO_REUSEPORT, so a shared port is not an error
there: each instance's HAProxy then reaches the other's application."""

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
print("proxy: %s" % serve_env.ingress_env("proxy"))
