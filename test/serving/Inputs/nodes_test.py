"""Replicas on two nodes (test/serving/two-nodes.test): a Ray cluster of two
nodes on this machine (ray.cluster_utils.Cluster: a second raylet and
object store beside the head's), one CPU each, and two replicas of one CPU,
so that Ray must put one on each node. The .nbc travels as an object-store
reference (build_app's ray.put): the second node's replica fetches it from
the head's store, no path is shared. Both replicas must answer, right.
Routing to the local node's replica first is turned off, so the head's
proxy sends to both. Bounded at 150 s: behind HAProxy a replica takes
health checks to join (`rise 2`); on a loaded machine (three runs of the
suite at once, helpers building) one run saw one replica in 30 s.

    nodes_test.py MODEL.nbc OUT.txt
"""

import os
import sys
import time

import tempfile  # noqa: E402

os.environ["RAY_SERVE_PROXY_PREFER_LOCAL_NODE_ROUTING"] = "0"
# Cluster() puts its sessions and sockets under $TMPDIR (no option for it):
# a short directory, since socket paths must stay under 108 bytes.
tmp = tempfile.mkdtemp(prefix="nrs", dir="/tmp")
os.environ["TMPDIR"] = tmp
tempfile.tempdir = tmp

import numpy as np  # noqa: E402

import serving_lib as lib  # noqa: E402

lib.output(sys.argv[2])
lib.watchdog(150)

import shutil  # noqa: E402

import nimble  # noqa: E402
import ray  # noqa: E402
from nimble import serve as nserve  # noqa: E402
from nimble import wire  # noqa: E402
from ray import serve  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

nbc = open(sys.argv[1], "rb").read()
exe = nimble.load(nbc)
cluster = None
port = lib.free_port()
lib.set_ingress(avoid=(port,))  # before the nodes start: each inherits it
try:
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "object_store_memory": 80 << 20})
    cluster.add_node(num_cpus=1, object_store_memory=80 << 20)
    ray.init(address=cluster.address, log_to_driver=False)
    lib.line("nodes: %d" % len([n for n in ray.nodes() if n["Alive"]]))
    serve.start(http_options={"host": "127.0.0.1", "port": port, "location": "HeadOnly"},
                logging_config={"log_level": "WARNING"})
    serve.run(nserve.build_app(nbc, name="served", num_replicas=2, ray_actor_options={"num_cpus": 1}))
    lib.line("ingress: %s" % lib.ingress_of(port))
    rng = np.random.default_rng(3)
    seen, right, sent = {}, 0, 0
    t0 = time.monotonic()
    while len(seen) < 2 and time.monotonic() - t0 < 75:
        t = ("Node", ("Leaf", rng.normal(0, 1, (1, 4)).astype(np.float32)),
             ("Leaf", rng.normal(0, 1, (1, 4)).astype(np.float32)))
        status, body = lib.post(port, wire.request("tree_sum", (t,)))
        sent += 1
        right += status == 200 and np.array_equal(wire.decode_outputs(body)[0], exe.run("tree_sum", t, kernels="native"))
        d = lib.describe(port)
        seen[d["pid"]] = d["node"]
    lib.line("replicas answering: %d, on nodes: %d" % (len(seen), len(set(seen.values()))))
    lib.line("answers right: %s" % ("all" if right == sent else "%d of %d" % (right, sent)))
finally:
    try:
        if ray.is_initialized():
            serve.shutdown()
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
lib.line("done")
