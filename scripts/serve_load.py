#!/usr/bin/env python3
"""Load test of nimble.serve (docs/serving.md, issue 48): N concurrent clients
against a local Ray Serve deployment, batched against one request at a time.

    .serve-venv/bin/python scripts/serve_load.py [--models treelstm,lstm_1l] [--clients 64]
        [--requests 1024] [--pool 64] [--seed 17] [--max-batch-size 64] [--batch-wait-ms 5]
        [--encoding npy|list] [--ingress haproxy|proxy] [--replicas N] [--modes one-at-a-time,batched]
        [--json OUT.json] [--plot DIR] [--markdown OUT.md]

(with the nimble package on PYTHONPATH or the virtualenv's nimble.pth:
`bazel build //python:nimble` first; scripts/setup_serve.sh makes the
virtualenv.)

Per model (a variant of models/common/registry.py; full-size weights are
made by models/<m>/make_weights.py when missing), a seeded pool of instances
of mixed sizes (scripts/make_instances.py's generators: Tree-LSTM 1-40
leaves with a single leaf and two degenerate chains, LSTM 1-100 tokens), and
three runs against one replica (--replicas) on a local one-node Ray instance,
behind Ray Serve's HAProxy ingress (--ingress proxy: its Python proxy actor;
nimble/serve_env.py):

  one-at-a-time  one client, one request after another, batches of 1
  unbatched      N clients at once, the replica's batches of 1 (it runs one
                 request at a time; the HTTP proxy overlaps the rest)
  batched        N clients at once, batches of up to --max-batch-size
                 gathered for up to --batch-wait-ms, each one run_many

Each client sends its share of --requests, cycling through the pool, one
after another, on one kept-alive HTTP connection. Reported per run:
throughput (requests/s over the run's wall time), p50 and p99 latency (the
client's time from send to full response), the mean batch size the replica
ran, and cores used: CPU seconds over wall seconds of the Ray processes
(replica, HAProxy, HAProxyManager, proxy, controller, raylet, GCS: this process's descendants) and
of the clients (this process). Every response is checked against the
one-at-a-time run's answer for the same instance, bit for bit (same kernels:
--kernels native everywhere); a difference is counted and its largest
absolute size reported, not hidden.

Requests carry tensors as base64 .npy by default (--encoding list: nested
lists; much more JSON to parse). The clients run in this process, on the
same 2 cores as the server: their share is in the cores column.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
os.environ.setdefault("RAY_AUTH_MODE", "disabled")   # a local instance on 127.0.0.1
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import benchlib  # noqa: E402
import make_instances  # noqa: E402
from models.common.registry import VARIANTS  # noqa: E402

MODES = ("one-at-a-time", "unbatched", "batched")


# ---- processes' CPU time ------------------------------------------------------------------------

def _role(pid):
    """What a process of the Ray session is, from its title."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return "other"
    for key, role in (("ServeReplica", "replica"), ("ProxyActor", "proxy"), ("ServeController", "controller"),
                      ("HAProxyManager", "haproxy-manager"), ("raylet", "raylet"), ("gcs_server", "gcs"),
                      ("haproxy", "haproxy")):
        if key in cmd:
            return role
    return "other"


def _tree_cpu(root_pid):
    """CPU seconds (user + system) of root_pid and every live descendant,
    in all and per role (replica, haproxy, haproxy-manager, proxy, controller, raylet, gcs, other;
    this process is "clients")."""
    tick = os.sysconf("SC_CLK_TCK")
    children, cpu = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(d))
        cpu[int(d)] = (int(fields[11]) + int(fields[12])) / tick
    roles, todo = {}, [root_pid]
    while todo:
        p = todo.pop()
        role = "clients" if p == root_pid else _role(p)
        roles[role] = roles.get(role, 0.0) + cpu.get(p, 0.0)
        todo.extend(children.get(p, []))
    return sum(roles.values()), roles


def _self_cpu():
    t = os.times()
    return t.user + t.system


# ---- the runs -------------------------------------------------------------------------------------

def make_pool(variant_name, count, seed):
    variant = VARIANTS[variant_name]
    lo, hi = make_instances.DEFAULT_SIZES[variant.family]
    rng = np.random.default_rng(seed)
    gen = make_instances.GENERATORS[variant.family](variant, rng, count, lo, hi)
    return [(value, int(work)) for _name, value, work, _shape in gen]


def compile_model(variant_name):
    import nimble
    v = VARIANTS[variant_name]
    if v.weights and not os.path.exists(v.weights):
        print("serve_load: making %s's weights" % variant_name, flush=True)
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "models", v.family, "make_weights.py"),
                        variant_name], check=True)
    return nimble.compile(v.nir, kernels="native")


def run_clients(port, bodies, clients, total, timeout=120):
    """`clients` threads, each sending its share of `total` requests (request
    i is bodies[i % len(bodies)]) one after another on its own connection.
    -> (wall seconds, [(pool index, latency s, status, response bytes)])."""
    import http.client
    results = [None] * total
    start = threading.Barrier(clients + 1)

    def client(c):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        start.wait()
        for i in range(c, total, clients):
            k = i % len(bodies)
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/", body=bodies[k], headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                raw = r.read()
                status = r.status
            except OSError as e:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
                raw, status = str(e).encode(), 0
            results[i] = (k, time.perf_counter() - t0, status, raw)
        conn.close()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, results


_deployed = [None]


def deploy(nbc, name, max_batch, wait_s, clients, replicas):
    """(Re)deploys the model unless it already runs with these settings
    (one-at-a-time and unbatched share one deployment)."""
    from ray import serve
    from nimble import serve as nserve
    if _deployed[0] == (name, max_batch, wait_s, clients, replicas):
        return
    _deployed[0] = (name, max_batch, wait_s, clients, replicas)
    serve.run(nserve.build_app(nbc, name=name, num_replicas=replicas, max_batch_size=max_batch,
                               batch_wait_timeout_s=wait_s, max_ongoing_requests=max(2 * clients, 8),
                               ray_actor_options={"num_cpus": 0.5}),
              name=name, route_prefix="/")


def describe(port, replicas):
    """The replicas' counters summed (GET / answers from one replica: ask
    until every replica, by its pid, has answered)."""
    import urllib.request
    seen = {}
    for _ in range(50 * replicas):
        with urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=30) as r:
            d = json.loads(r.read())
        seen[d["pid"]] = d
        if len(seen) >= replicas:
            break
    total = {"batches": 0, "instances": 0, "seconds": {}, "pids": sorted(seen)}
    for d in seen.values():
        total["batches"] += d["batches"]
        total["instances"] += d["instances"]
        for k, v in d["seconds"].items():
            total["seconds"][k] = total["seconds"].get(k, 0.0) + v
    return total


def measure(port, nbc, name, mode, bodies, args, reference):
    from nimble import wire
    clients = 1 if mode == "one-at-a-time" else args.clients
    total = args.sequential if mode == "one-at-a-time" else args.requests
    deploy(nbc, name, args.max_batch_size if mode == "batched" else 1, args.batch_wait_ms / 1000.0, args.clients,
           args.replicas)
    # Warm: every pool entry once (the replica's VM and its first runs).
    run_clients(port, bodies, min(clients, 8), len(bodies))
    before = describe(port, args.replicas)
    load = benchlib.load_avg()
    (cpu0, roles0), self0 = _tree_cpu(os.getpid()), _self_cpu()
    wall, results = run_clients(port, bodies, clients, total)
    (cpu1, roles1), self1 = _tree_cpu(os.getpid()), _self_cpu()
    after = describe(port, args.replicas)
    lat = sorted(r[1] for r in results)
    errors = sum(1 for r in results if r[2] != 200)
    same = differ = 0
    max_diff = 0.0
    for k, _t, status, raw in results:
        if status != 200:
            continue
        got = wire.decode_outputs(json.loads(raw))
        if reference[k] is None:
            reference[k] = got
        want = reference[k]
        if all(np.array_equal(g, w) for g, w in zip(got, want)):
            same += 1
        else:
            differ += 1
            max_diff = max(max_diff, max(float(np.max(np.abs(g.astype(np.float64) - w))) for g, w in zip(got, want)))
    batches = after["batches"] - before["batches"]
    own = {k: 1e3 * (after["seconds"][k] - before["seconds"][k]) / total for k in after["seconds"]}
    instances = after["instances"] - before["instances"]
    row = {
        "mode": mode, "clients": clients, "requests": total, "wall_s": wall,
        "throughput": total / wall, "p50_ms": 1e3 * lat[len(lat) // 2],
        "p99_ms": 1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))],
        "mean_batch": instances / batches if batches else 0.0,
        "server_cores": ((cpu1 - cpu0) - (self1 - self0)) / wall, "client_cores": (self1 - self0) / wall,
        "replica_own_ms_per_request": own,
        "cpu_ms_per_request": {r: 1e3 * (roles1.get(r, 0.0) - roles0.get(r, 0.0)) / total
                               for r in sorted(set(roles0) | set(roles1))},
        "errors": errors, "bitwise_equal": same, "differ": differ, "max_abs_diff": max_diff, "load_before": load,
    }
    print("  %-14s %4d clients %5d requests: %8.1f req/s, p50 %7.2f ms, p99 %7.2f ms, batch %5.1f, "
          "cores %.2f server + %.2f clients, %d errors, %d/%d bit-identical%s" % (
              mode, clients, total, row["throughput"], row["p50_ms"], row["p99_ms"], row["mean_batch"],
              row["server_cores"], row["client_cores"], errors, same, total - errors,
              "" if not differ else " (max |diff| %.3g)" % max_diff), flush=True)
    print("  %-14s CPU ms a request: %s" % ("", ", ".join(
        "%s %.2f" % (r, v) for r, v in sorted(row["cpu_ms_per_request"].items(), key=lambda kv: -kv[1]))),
        flush=True)
    print("  %-14s replica's own work, wall ms a request: decode %.2f, run %.2f, encode %.2f" % (
        "", own["decode"], own["run"], own["encode"]), flush=True)
    return row


def plot(doc, out_dir):
    import bench_plot
    import matplotlib.pyplot as plt
    models = sorted({r["model"] for r in doc["rows"]}, key=lambda m: [r["model"] for r in doc["rows"]].index(m))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    width = 0.8 / len(MODES)
    colors = {"one-at-a-time": "tab:gray", "unbatched": "tab:blue", "batched": "tab:red"}
    for j, mode in enumerate(MODES):
        rows = [next(r for r in doc["rows"] if r["model"] == m and r["mode"] == mode) for m in models]
        xs = [i + (j - 1) * width for i in range(len(models))]
        axes[0].bar(xs, [r["throughput"] for r in rows], width, color=colors[mode],
                    label="%s (%d client%s)" % (mode, rows[0]["clients"], "s" if rows[0]["clients"] > 1 else ""))
        axes[1].bar(xs, [r["p50_ms"] for r in rows], width, color=colors[mode])
        axes[1].scatter(xs, [r["p99_ms"] for r in rows], marker="_", s=200, color="black", zorder=3)
    for ax, title in ((axes[0], "throughput (requests/s)"), (axes[1], "latency p50 (bars), p99 (marks), ms")):
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels(models)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=7)
    h = doc["header"]
    fig.suptitle("nimble.serve on Ray Serve %s, one replica: %s, %s" % (h["ray"], h["cpu"], h["date"]), fontsize=9)
    fig.tight_layout()
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "serving.png")
    bench_plot.save(fig, path, bench_plot.make_stamp(h["commit"], h["date"], "measured by scripts/serve_load.py",
                                                     h["command"]))
    print("serve_load: wrote %s" % path)


def markdown(doc):
    lines = ["| model | run | clients | requests/s | p50 ms | p99 ms | mean batch | cores (server + clients) | vs one at a time | bit-identical |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in doc["rows"]:
        # (--modes without one-at-a-time: no ratio, a dash.)
        base = next((x for x in doc["rows"] if x["model"] == r["model"] and x["mode"] == "one-at-a-time"), None)
        ok = r["requests"] - r["errors"]
        lines.append("| %s | %s | %d | %.1f | %.2f | %.2f | %.1f | %.2f + %.2f | %s | %d/%d%s |" % (
            r["model"], r["mode"], r["clients"], r["throughput"], r["p50_ms"], r["p99_ms"], r["mean_batch"],
            r["server_cores"], r["client_cores"],
            "%.2fx" % (r["throughput"] / base["throughput"]) if base else "-", r["bitwise_equal"], ok,
            "" if not r["differ"] else " (max diff %.2g)" % r["max_abs_diff"]))
    return "\n".join(lines) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="treelstm,lstm_1l", help="variants (default %(default)s)")
    ap.add_argument("--clients", type=int, default=64, help="concurrent clients (default %(default)s)")
    ap.add_argument("--requests", type=int, default=1024, help="requests per concurrent run (default %(default)s)")
    ap.add_argument("--sequential", type=int, default=256, help="requests of the one-at-a-time run (default %(default)s)")
    ap.add_argument("--pool", type=int, default=64, help="distinct instances per model (default %(default)s)")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--max-batch-size", type=int, default=64)
    ap.add_argument("--batch-wait-ms", type=float, default=5.0)
    ap.add_argument("--encoding", choices=["npy", "list"], default="npy", help="tensors in requests")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="runs, in this order (default %(default)s; the ratios need one-at-a-time)")
    ap.add_argument("--replicas", type=int, default=1, help="replicas of the deployment (default %(default)s)")
    ap.add_argument("--ingress", choices=["haproxy", "proxy"], default="haproxy",
                    help="HTTP ingress: Ray Serve's HAProxy ingress with its throughput-optimized settings "
                         "(the default), or its Python proxy actor (docs/serving.md)")
    ap.add_argument("--ray-env", action="append", default=[], metavar="KEY=VALUE",
                    help="an environment variable for Ray's processes (e.g. RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD=0)")
    ap.add_argument("--port", type=int, help="HTTP port (default: a free one)")
    ap.add_argument("--json", help="write the run as JSON")
    ap.add_argument("--plot", metavar="DIR", help="write DIR/serving.png (stamped, scripts/bench_plot.py)")
    ap.add_argument("--markdown", help="write the table as markdown")
    args = ap.parse_args(argv)
    for m in args.models.split(","):
        if m not in VARIANTS or VARIANTS[m].family == "bert":
            ap.error("--models: %s is not an LSTM or Tree-LSTM variant (%s)" % (
                m, ", ".join(n for n, v in VARIANTS.items() if v.family != "bert")))

    for kv in args.ray_env:
        k, _, v = kv.partition("=")
        os.environ[k] = v
    # Before Ray starts: its processes read these once.
    from nimble import serve_env
    port = args.port or int(serve_env.free_ports(1)[0])
    for k, v in serve_env.ingress_env(args.ingress, avoid=(port,)).items():
        os.environ.setdefault(k, v)
    import ray
    from ray import serve
    from nimble import wire

    with open("/proc/cpuinfo") as f:
        cpu = benchlib.cpu_info(f.read())
    header = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": benchlib.git_commit(ROOT),
              "cpu": "%s, %d cores" % (cpu.get("model", "?"), os.cpu_count()), "ray": ray.__version__, "ray_env": args.ray_env,
              "ingress": args.ingress, "replicas": args.replicas,
              "command": "scripts/serve_load.py " + " ".join(argv)}
    print("serve_load: %s; commit %s; Ray %s; load %.2f" % (header["cpu"], header["commit"], ray.__version__,
                                                            benchlib.load_avg()), flush=True)
    tmp = "/tmp/nimble-serve-load-%d" % os.getpid()
    rows = []
    import logging
    ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=tmp, object_store_memory=100 << 20,
             log_to_driver=False, logging_level=logging.WARNING)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config={"log_level": "WARNING"})
        for name in args.models.split(","):
            nbc = compile_model(name)
            pool = make_pool(name, args.pool, args.seed)
            bodies = [wire.request("main", (value,), encoding="npy", input_encoding=args.encoding)
                      for value, _work in pool]
            works = [w for _v, w in pool]
            print("%s: %d instances, %d..%d %ss, %.0f KB a request on average" % (
                name, len(pool), min(works), max(works), VARIANTS[name].unit,
                sum(map(len, bodies)) / len(bodies) / 1024), flush=True)
            reference = [None] * len(bodies)
            for mode in args.modes.split(","):
                row = measure(port, nbc, name, mode, bodies, args, reference)
                row["model"] = name
                rows.append(row)
            serve.delete(name)
    finally:
        serve.shutdown()
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    doc = {"header": header, "rows": rows}
    for name in args.models.split(","):
        base = next((r for r in rows if r["model"] == name and r["mode"] == "one-at-a-time"), None)
        for r in rows if base else []:
            if r["model"] == name and r["mode"] != "one-at-a-time":
                print("%s: %s %.2fx one at a time's throughput" % (name, r["mode"], r["throughput"] / base["throughput"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(doc))
    if args.plot:
        plot(doc, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
