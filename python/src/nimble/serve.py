"""Serving a .nbc on Ray Serve: HTTP JSON in, one auto-batched run per batch.

    python -m nimble.serve model.nbc --replicas 2 --port 8000     # docs/serving.md

Concurrent requests to one replica are gathered by Ray Serve's
``@serve.batch`` (at most ``max_batch_size`` of them, waiting at most
``batch_wait_timeout_s`` for the batch to fill) and run as ONE
``Executable.run_many``: requests of any shapes (trees, sequences of
different lengths) become instances of one VM whose kernel calls are batched
across them (docs/autobatch.md: the auto-batching of seed 001, ACROBAT,
which batches many instances of one dynamic program at run time). A
server's usual batcher stacks same-shaped tensors; here the VM batches the
kernel calls, whatever the shapes.

Guarantees (tested by test/serving/):
  * each request gets its own result or its own error: run_many's
    ``errors="return"`` isolates a failing instance (a wrong dtype or a
    kernel's run-time error) in its own slot; if the batched run fails as a
    whole (out of memory), every instance is run again alone, so the error
    lands on the request that causes it;
  * a malformed request is refused with a 4xx and a one-line message before
    it joins a batch (nimble/wire.py: size, depth, dtype, function), and the
    replica stays up;
  * a replica that dies drops only its in-flight requests, each of which
    gets an error from Ray Serve's proxy; the controller starts another.

The .nbc is shipped once per node: ``build_app`` puts the bytes into Ray's
object store (``ray.put``) and every replica ``ray.get``s the reference in
its constructor, so a node's replicas read one shared copy and no request
carries the model. A path (a str) is read by each replica instead: use one
on shared storage. The object is owned by the process that called
build_app (the CLI, or your driver): keep it alive while serving, or pass a
path.
"""

import argparse
import asyncio
import inspect
import os
import signal
import sys
import threading
import time

import nimble
from nimble import serve_env, wire

# Ray is imported here, not by `import nimble`: only serving needs it.
import ray
from ray import serve
from starlette.responses import JSONResponse

__all__ = ["NimbleDeployment", "build_app", "main"]

# HTTP status of each way a run fails (docs/serving.md, "Errors").
_STATUS = (
    (nimble.InputError, 400),         # the value does not fit the signature
    (nimble.OutOfMemoryError, 503),   # before ExecutionError: it is one
    (nimble.ExecutionError, 422),     # a kernel's run-time check on this input
    (nimble.Error, 500),
)


def _status_of(exc):
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def _error(status, message):
    return JSONResponse({"error": wire._one_line(message)}, status_code=status)


class NimbleDeployment:
    """The replica: one loaded Executable and the batching loop in front of it.
    Wrapped by ``serve.deployment`` in ``build_app`` (so its options come
    from the caller, not from a decorator)."""

    def __init__(self, model, *, model_name=None, kernels="native", threads=1, max_batch_size=64,
                 batch_wait_timeout_s=0.005, max_body_bytes=64 << 20, max_depth=2000,
                 max_tensor_bytes=256 << 20, stuck_after_s=120.0):
        if isinstance(model, ray.ObjectRef):
            model = ray.get(model)   # from this node's object store: one copy per node
        self.exe = nimble.load(model, model_name)
        self.functions = self.exe.functions
        self.kernels = kernels
        self.threads = int(threads)
        self.limits = wire.Limits(max_body_bytes, max_depth, max_tensor_bytes)
        self.stuck_after_s = float(stuck_after_s)
        self.max_batch_size = int(max_batch_size)
        self.run_batch.set_max_batch_size(self.max_batch_size)
        self.run_batch.set_batch_wait_timeout_s(float(batch_wait_timeout_s))
        # json.loads and wire.decode_value recurse once per level.
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 4 * self.limits.max_depth + 1000))
        self._busy_since = None      # when the running batch started (check_health)
        self._lock = threading.Lock()
        self._pending = []           # [((function, inputs), future)] of closed batches, to run
        self._runner = None          # the task running them (_drain), while there are any
        self.batches = 0
        self.instances = 0
        # Wall seconds of this replica's own work, for scripts/serve_load.py's
        # profile: decoding requests, runs (run_many), encoding results.
        self.seconds = {"decode": 0.0, "run": 0.0, "encode": 0.0}

    # --- HTTP ---------------------------------------------------------------

    async def __call__(self, request):
        if request.method == "GET":
            return JSONResponse(self.describe())
        if request.method != "POST":
            return _error(405, "error: POST a JSON request (or GET the model's description)")
        try:
            body = await self._read_body(request)
            t0 = time.perf_counter()
            try:
                fn, inputs, encoding = wire.decode_request(body, self.functions, self.limits)
            finally:
                self.seconds["decode"] += time.perf_counter() - t0
        except wire.RequestError as e:
            return _error(e.status, e.message)
        result = await self.run_batch((fn, inputs))
        if isinstance(result, BaseException):
            return _error(_status_of(result), str(result))
        t0 = time.perf_counter()
        try:
            return JSONResponse(wire.encode_outputs(result, len(self.functions[fn].results), encoding))
        except (TypeError, ValueError, RecursionError) as e:
            return _error(500, "error: cannot encode the result: %s" % e)
        finally:
            self.seconds["encode"] += time.perf_counter() - t0

    async def _read_body(self, request):
        limit = self.limits.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None:
            try:
                declared = int(declared)
            except ValueError:
                raise wire.RequestError(400, "error: bad Content-Length") from None
            # Refused before a byte of the body is read.
            if declared > limit:
                raise wire.RequestError(413, "error: request body of %d bytes is over the limit of %d bytes"
                                        % (declared, limit))
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise wire.RequestError(413, "error: request body is over the limit of %d bytes" % limit)
            chunks.append(chunk)
        return b"".join(chunks)

    def describe(self):
        return {
            "model": self.exe.name,
            "functions": {f: {"params": [list(p) for p in s.params], "results": s.results}
                          for f, s in self.functions.items()},
            "adts": {a: [[c, fs] for c, fs in ctors] for a, ctors in self.exe.adts.items()},
            "max_batch_size": self.max_batch_size,
            "batches": self.batches,
            "instances": self.instances,
            "seconds": dict(self.seconds),
            "pid": os.getpid(),
            "node": ray.get_runtime_context().get_node_id(),
        }

    # --- Batching -------------------------------------------------------------

    # Up to this many of @serve.batch's batches may be open at once: a batch
    # that closes while a run is going on waits in self._pending (below), not
    # on @serve.batch's semaphore, so that it can join the next run.
    _OPEN_BATCHES = 1024

    async def run_batch(self, items):
        """items: [(function, inputs)] of the requests gathered into this
        batch, in arrival order -> one result or exception per item.

        @serve.batch closes a batch after its bounded wait and at once starts
        gathering the next: under load it hands over small batches (what
        arrived in one wait, 2-3 LSTM requests) one after another, and with
        one batch at a time they would run one after another. So a closed
        batch joins self._pending, and one runner (self._drain) takes
        everything pending, up to max_batch_size, into each run: while a run
        goes on, the requests arriving meanwhile become the next run's
        instances. With no run going on, a batch runs as soon as it closes."""
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in items]
        self._pending.extend(zip(items, futures))
        if self._runner is None:
            self._runner = asyncio.ensure_future(self._drain())
        return await asyncio.gather(*futures)

    # @serve.batch reads the method's signature on every call it queues
    # (inspect.signature: 8-10 us a request, 3% of a replica's CPU under
    # load); a __signature__ set once is what inspect.signature returns.
    run_batch.__signature__ = inspect.signature(run_batch)
    run_batch = serve.batch(max_batch_size=64, batch_wait_timeout_s=0.005,
                            max_concurrent_batches=_OPEN_BATCHES)(run_batch)

    async def _drain(self):
        loop = asyncio.get_running_loop()
        take = []
        try:
            while self._pending:
                take = self._pending[:self.max_batch_size]
                del self._pending[:self.max_batch_size]
                groups = {}
                for k, ((fn, _inputs), _f) in enumerate(take):
                    groups.setdefault(fn, []).append(k)
                for fn, ks in groups.items():
                    # In a thread: the VM runs without the GIL, and the event
                    # loop meanwhile reads and decodes the next requests.
                    try:
                        results = await loop.run_in_executor(None, self._run_group, fn,
                                                             [take[k][0][1] for k in ks])
                    except Exception as e:  # noqa: BLE001  never a request left waiting
                        results = [RuntimeError("error: %s" % wire._one_line(e))] * len(ks)
                    for k, r in zip(ks, results):
                        if not take[k][1].done():
                            take[k][1].set_result(r)
        finally:
            self._runner = None
            # Cancelled (the replica stopping): no request waits forever.
            for _item, f in take + self._pending:
                if not f.done():
                    f.set_result(RuntimeError("error: the replica is stopping"))
            self._pending.clear()

    def _run_group(self, fn, instances):
        with self._lock:
            self._busy_since = time.monotonic()
            self.batches += 1
            self.instances += len(instances)
        t0 = time.perf_counter()
        try:
            return self._run_isolated(fn, instances)
        finally:
            with self._lock:
                self._busy_since = None
                self.seconds["run"] += time.perf_counter() - t0

    def _run_isolated(self, fn, instances):
        try:
            return self.exe.run_many(fn, instances, threads=self.threads, kernels=self.kernels,
                                     errors="return")
        except nimble.Error as e:
            # The batch failed as a whole (no single instance to blame, e.g.
            # out of memory): run each alone so the error is its own.
            if len(instances) == 1:
                return [e]
            return [self._run_isolated(fn, [inst])[0] for inst in instances]
        except Exception as e:  # noqa: BLE001  never one request's bug failing the batch
            return [RuntimeError("error: %s" % wire._one_line(e))] * len(instances)

    # --- Health ---------------------------------------------------------------

    def check_health(self):
        """Called by the Serve controller every health_check_period_s: a
        replica whose executable is gone, or whose running batch has not
        returned for stuck_after_s (a wedged run), is replaced."""
        if self.exe is None:
            raise RuntimeError("no executable loaded")
        with self._lock:
            since = self._busy_since
        if since is not None and time.monotonic() - since > self.stuck_after_s:
            raise RuntimeError("a batch has been running for %.0f s" % (time.monotonic() - since))


def build_app(model, *, name="nimble", num_replicas=1, autoscaling_config=None, ray_actor_options=None,
              max_ongoing_requests=None, health_check_period_s=5.0, health_check_timeout_s=30.0,
              access_log=False, **options):
    """The Serve application for ``model``: a .nbc path (read by each replica:
    shared storage), its bytes, or an ObjectRef to them. Bytes are put in the
    object store here (once; each node fetches one copy). ``options`` go to
    NimbleDeployment (model_name, kernels, threads, max_batch_size, batch_wait_timeout_s,
    max_body_bytes, max_depth, max_tensor_bytes, stuck_after_s).

    ``access_log``: whether each replica writes Serve's access log line per
    request (Serve's default; off here: HAProxy and the proxy actor keep
    their own, and a line a request is CPU the replica takes from the
    requests, docs/serving.md "Measured")."""
    if isinstance(model, os.PathLike):
        model = os.fspath(model)
    if isinstance(model, (bytes, bytearray, memoryview)):
        model = ray.put(bytes(model))
    elif isinstance(model, str):
        model = os.path.abspath(model)
    options.setdefault("model_name", name)
    max_batch = int(options.get("max_batch_size", 64))
    deployment_options = {
        "name": name,
        "ray_actor_options": ray_actor_options or {"num_cpus": 1},
        # Enough requests in flight per replica to fill two batches: the one
        # running and the one gathering.
        "max_ongoing_requests": max_ongoing_requests or max(8, 2 * max_batch),
        "health_check_period_s": health_check_period_s,
        "health_check_timeout_s": health_check_timeout_s,
        "logging_config": {"enable_access_log": bool(access_log)},
    }
    if autoscaling_config is not None:
        deployment_options["autoscaling_config"] = autoscaling_config
    else:
        deployment_options["num_replicas"] = num_replicas
    return serve.deployment(NimbleDeployment).options(**deployment_options).bind(model, **options)


def _autoscaling(text):
    lo, _, hi = text.partition(":")
    try:
        return {"min_replicas": int(lo), "max_replicas": int(hi or lo)}
    except ValueError:
        raise argparse.ArgumentTypeError("--autoscale takes MIN:MAX, got %r" % text) from None


def parser():
    """The CLI's options (docs/serving.md lists them; test/serving/cli.test checks)."""
    p = argparse.ArgumentParser(
        prog="python -m nimble.serve",
        description="Serve a .nbc over HTTP JSON on Ray Serve, batching concurrent requests "
                    "into one auto-batched run (docs/serving.md).")
    p.add_argument("model", help=".nbc file (nimblec's output)")
    p.add_argument("--replicas", type=int, default=1, help="number of replicas (default 1)")
    p.add_argument("--autoscale", type=_autoscaling, metavar="MIN:MAX",
                   help="autoscale between MIN and MAX replicas instead of --replicas")
    p.add_argument("--host", default="127.0.0.1", help="HTTP host (default 127.0.0.1; 0.0.0.0 for all)")
    p.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
    p.add_argument("--route", default="/", help="route prefix (default /)")
    p.add_argument("--address", default=None,
                   help="Ray cluster to join (auto: the one `ray start` made here; default: that one if "
                        "any, else a new local one)")
    p.add_argument("--num-cpus", type=int, default=None, help="CPUs of a new local Ray instance")
    p.add_argument("--ingress", choices=serve_env.INGRESSES, default="haproxy",
                   help="HTTP ingress of a new local Ray instance: Ray Serve's HAProxy ingress, "
                        "throughput-optimized (default), or its Python proxy (on a cluster: set by "
                        "`ray start`'s environment)")
    p.add_argument("--replica-cpus", type=float, default=1.0, help="CPUs reserved per replica (default 1)")
    p.add_argument("--max-batch-size", type=int, default=64, help="requests per batch, at most (default 64)")
    p.add_argument("--batch-wait-ms", type=float, default=5.0,
                   help="longest wait for a batch to fill, ms (default 5)")
    p.add_argument("--kernels", default="native", choices=["native", "library", "reference", "auto"],
                   help="nimble-run --kernels (default native: every replica computes the same bits)")
    p.add_argument("--threads", type=int, default=1, help="kernel threads per replica (default 1)")
    p.add_argument("--access-log", action="store_true",
                   help="each replica logs a line per request (Serve's access log; default off)")
    p.add_argument("--max-body-bytes", type=int, default=64 << 20, help="largest request (default 64 MiB)")
    p.add_argument("--max-depth", type=int, default=2000, help="deepest request JSON (default 2000)")
    p.add_argument("--max-tensor-bytes", type=int, default=256 << 20,
                   help="largest tensor in a request (default 256 MiB)")
    return p


def main(argv=None):
    args = parser().parse_args(argv)

    try:
        with open(args.model, "rb") as f:
            data = f.read()
        nimble.load(data, args.model)  # a bad file fails here, with nimble-run's message
    except OSError as e:
        print("nimble.serve: error: cannot read '%s': %s" % (args.model, e.strerror), file=sys.stderr)
        return 1
    except nimble.Error as e:
        print("nimble.serve: %s" % e, file=sys.stderr)
        return 1

    init = {"include_dashboard": False}
    # Read by Ray's processes when they start: this matters only when ray.init
    # starts them (a cluster's nodes take them from `ray start`'s environment).
    for k, v in serve_env.ingress_env(args.ingress, avoid=(args.port,)).items():
        os.environ.setdefault(k, v)
    if args.address:
        init["address"] = args.address
    if args.num_cpus is not None:
        init["num_cpus"] = args.num_cpus
    ray.init(**init)
    serve.start(http_options={"host": args.host, "port": args.port})
    name = os.path.splitext(os.path.basename(args.model))[0]
    app = build_app(data, name=name,
                    num_replicas=args.replicas, autoscaling_config=args.autoscale,
                    ray_actor_options={"num_cpus": args.replica_cpus},
                    max_batch_size=args.max_batch_size, batch_wait_timeout_s=args.batch_wait_ms / 1000.0,
                    access_log=args.access_log,
                    kernels=args.kernels, threads=args.threads, max_body_bytes=args.max_body_bytes,
                    max_depth=args.max_depth, max_tensor_bytes=args.max_tensor_bytes)
    # The application is named after the model, so that several models can
    # be served by one cluster, each at its own --route.
    serve.run(app, name=name, route_prefix=args.route)
    print("nimble.serve: serving %s on http://%s:%d%s (Ctrl-C stops)"
          % (args.model, args.host, args.port, args.route), flush=True)
    # Our own handlers: a shell's background job starts with SIGINT ignored,
    # and Ray's driver replaces SIGTERM's; both must stop the server cleanly.
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            pass
        print("nimble.serve: stopping", flush=True)
    finally:
        # Only this application: on a shared cluster the others stay. Serve
        # itself and Ray go with ray.shutdown when this process started them.
        serve.delete(name)
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
