"""Probes of what this machine's libraries do, asked by the lit suites that
need them (their lit.local.cfg) rather than by test/lit.cfg.py for every
suite: each compiles and runs a small program with the tools under test.
"""

import os
import struct
import subprocess
import tempfile


def _write_npy(path, shape, values):
    """A float32 .npy file (format 1.0) without numpy."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join("%d, " % d for d in shape)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<%df" % len(values), *values))


def onednn_fuses_conv_pairs(config, lit_config):
    """Whether oneDNN on this CPU has a fused primitive for a 1 x 1 conv and
    the depthwise 3 x 3 conv reading it (vm/dispatch/LibraryConv.h, "Pairs"):
    oneDNN 2.6 offers one over its blocked layouts on some AVX-512 and AVX2
    CPUs (jit_1x1: the EPYC of docs/perf.md) and only its reference fusion on
    others (an Intel Xeon, Emerald Rapids), where every pair runs as two
    convs. Asked of the tools themselves: a small pair under
    NIMBLE_CONV_PAIR=1, and --profile's `Library conv pairs` line."""
    nimblec, run = config.nimble_probe_tools
    if not nimblec or not run:
        return False
    c, m = 8, 144  # the shapes of library-conv-pairs.test's pair_s2
    w1 = "[%s]" % ", ".join("[%s]" % ", ".join("[[%.3f]]" % (((i * c + j) % 7 - 3) / 8) for j in range(c))
                            for i in range(m))
    w2 = "[%s]" % ", ".join("[[%s]]" % ", ".join("[%s]" % ", ".join("%.3f" % (((i + r + q) % 5 - 2) / 4)
                                                                    for q in range(3)) for r in range(3))
                            for i in range(m))
    b1 = "[%s]" % ", ".join("%.3f" % ((i % 3) / 10) for i in range(m))
    b2 = "[%s]" % ", ".join("%.3f" % ((i % 5 - 2) / 10) for i in range(m))  # not b1: two constants
    program = "\n".join([
        "func @main(%%x: tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32> {",
        "  %%zero = constant 0.0 : tensor<f32>",
        "  %%six = constant 6.0 : tensor<f32>",
        "  %%w1 = constant %s : tensor<%dx%dx1x1xf32>" % (w1, m, c),
        "  %%b1 = constant %s : tensor<%dxf32>" % (b1, m),
        "  %%w2 = constant %s : tensor<%dx1x3x3xf32>" % (w2, m),
        "  %%b2 = constant %s : tensor<%dxf32>" % (b2, m),
        "  %e = conv %x, %w1, %b1",
        "  %e0 = maximum %e, %zero",
        "  %e6 = minimum %e0, %six",
        "  %%d = conv %%e6, %%w2, %%b2, strides=[2, 2], pads=[1, 1, 1, 1], groups=%d" % m,
        "  %d0 = maximum %d, %zero",
        "  %d6 = minimum %d0, %six",
        "  ret %d6",
        "}",
        ""]).replace("%%", "%")
    with tempfile.TemporaryDirectory(prefix="nimble-lit-probe-") as d:
        x = os.path.join(d, "x.npy")
        _write_npy(x, (1, c, 47, 47), [((i % 11) - 5) / 10 for i in range(c * 47 * 47)])
        with open(os.path.join(d, "pair.nir"), "w") as f:
            f.write(program)
        env = dict(os.environ, NIMBLE_CONV_PAIR="1")
        try:
            subprocess.run([nimblec, os.path.join(d, "pair.nir"), "-o", os.path.join(d, "p.nbc")], check=True,
                           capture_output=True, timeout=120)
            p = subprocess.run([run, os.path.join(d, "p.nbc"), "--kernels=library", "--threads=1", "--input=@" + x,
                                "--output=@" + os.path.join(d, "y.npy"), "--profile"],
                               env=env, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as e:
            lit_config.note("conv pair probe failed: %s" % e)
            return False
    return p.returncode == 0 and "Library conv pairs (oneDNN)" in p.stdout + p.stderr
