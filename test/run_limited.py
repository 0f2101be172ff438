#!/usr/bin/env python3
"""%run-limited [--as-kb N] [--cpu S] [--exit N] CMD ARGS...: runs CMD under
resource limits, the way `ulimit -v N; ulimit -t S` would (lit's internal
shell has no `ulimit`), passes its stdout/stderr through, and succeeds only if
it exited with status N (default 0). A death by signal always fails: a crash,
an abort on a failed allocation (std::bad_alloc), or SIGXCPU past the CPU
limit (a tool that should answer in milliseconds but loops or allocates
without bound).

--as-kb is the address-space limit in KiB (RLIMIT_AS, `ulimit -v`).
AddressSanitizer reserves terabytes of address space at start-up and cannot run
under such a limit: lit.cfg.py passes --no-as under --config=asan, which drops
the address-space limit and keeps everything else (the CPU limit, the exit
status, the output the test checks)."""
import resource
import subprocess
import sys

args = sys.argv[1:]
as_kb = None
cpu = 20
want = 0
no_as = False
while args and args[0].startswith("--"):
    opt = args.pop(0)
    if opt == "--no-as":
        no_as = True
    elif opt == "--as-kb":
        as_kb = int(args.pop(0))
    elif opt == "--cpu":
        cpu = int(args.pop(0))
    elif opt == "--exit":
        want = int(args.pop(0))
    elif opt == "--":
        break
    else:
        sys.exit("run_limited: unknown option " + opt)
if not args:
    sys.exit("usage: run_limited.py [--as-kb N] [--cpu S] [--exit N] CMD [ARGS...]")


def limit():
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    if as_kb is not None and not no_as:
        resource.setrlimit(resource.RLIMIT_AS, (as_kb * 1024, as_kb * 1024))


proc = subprocess.run(args, preexec_fn=limit)
if proc.returncode < 0:
    sys.stderr.write("run_limited: %s died with signal %d\n" % (args[0], -proc.returncode))
    sys.exit(1)
if proc.returncode != want:
    sys.stderr.write("run_limited: %s exited with %d, expected %d\n"
                     % (args[0], proc.returncode, want))
    sys.exit(1)
