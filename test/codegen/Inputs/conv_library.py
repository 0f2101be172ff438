#!/usr/bin/python3
"""Programs for library-conv.test: conv groups on oneDNN (vm/dispatch/
LibraryConv.h), each a function of DIR/conv.nir with inline weights, its
input DIR/NAME.x.npy and numpy's output DIR/NAME.y.npy (float64, from
test/vm/Inputs/cases_window.py's reference, rounded once).

    conv_library.py DIR                            write them
    conv_library.py check DIR NIMBLE_RUN KERNELS [ISA] [THREADS]
        run every function of DIR/c.nbc with --kernels=KERNELS (oneDNN held
        to ISA when given and not "-", DNNL_MAX_CPU_ISA; --threads=THREADS,
        default 1) against numpy's output at --tolerance=1e-5; print one
        line per function and a summary

The functions cover the forms of LibraryConv.cpp: the blocked primitive
with bias, relu and a residual add (a `sum` post-op), depthwise convs with
ReLU6 (binary max/min with scalars; strided, and a batch of two), a per-channel scale (a broadcast
binary), no bias, 1-D and 3-D convolutions, strides, asymmetric pads and
dilations, and a chain with a full-shape `mul` (no blocked form: the plain
primitive). The batch_* functions have batches of 4 and 6 (and one of 5)
for the split by images at two threads (LibraryConv.h, "Threads"): a 1x1
expand with ReLU6, a 1x1 project with its residual (a `sum` post-op, the
residual copied into each slice's images), a depthwise conv with stride 2
and odd sizes, a per-channel scale, and a batch of 5 that does not split.
"""

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "vm", "Inputs"))

from cases_window import conv_ref  # noqa: E402
from nir_literal import lit  # noqa: E402

rng = np.random.default_rng(11)


def tensor_type(shape):
    return "tensor<%s>" % "x".join([str(d) for d in shape] + ["f32"])


def qtype(rank):
    return "tensor<%s>" % "x".join(["?"] * rank + ["f32"])


FUNCS = []


def func(name, x_shape, w_shape, attrs, bias=True, body=None, groups=1, strides=(), pads=(), dil=()):
    """body(y, x) -> (lines, numpy value): the chain after the conv %y."""
    x = rng.uniform(-1, 1, x_shape).astype(np.float32)
    w = rng.uniform(-1, 1, w_shape).astype(np.float32)
    b = rng.uniform(-1, 1, (w_shape[0],)).astype(np.float32) if bias else None
    y = conv_ref(x, w, b, strides, pads, dil, groups)
    lines = ["  %%w = constant %s : %s" % (lit(w), tensor_type(w_shape))]
    operands = "%x, %w"
    if bias:
        lines.append("  %%b = constant %s : %s" % (lit(b), tensor_type(b.shape)))
        operands += ", %b"
    lines.append("  %%y = conv %s%s" % (operands, attrs))
    last = "%y"
    if body:
        more, y, last = body(y, x.astype(np.float64), w, b) if getattr(body, "wants_weights", False) else \
            body(y, x.astype(np.float64))
        lines += more
    FUNCS.append((name, x, y, lines, last, len(x_shape)))


def residual(y, x):
    return ["  %r = add %y, %x", "  %o = relu %r"], np.maximum(y + x, 0), "%o"


def relu6(y, x):
    return (["  %z = constant 0.0 : tensor<f32>", "  %s = constant 6.0 : tensor<f32>", "  %a = maximum %y, %z",
             "  %o = minimum %a, %s"], np.minimum(np.maximum(y, 0), 6), "%o")


SCALE = rng.uniform(0.5, 2, (8, 1, 1)).astype(np.float32)


def per_channel(y, x):
    return (["  %%c = constant %s : tensor<8x1x1xf32>" % lit(SCALE), "  %o = mul %y, %c", "  %t = tanh %o"],
            np.tanh(y * SCALE), "%t")


def full_mul(y, x):
    return ["  %o = mul %y, %x", "  %e = relu %o"], np.maximum(y * x, 0), "%e"


def reread(y, x, w, b):
    """The conv's weight read again after the conv, by a broadcast add (a
    kernel of its own: its output is larger than the conv's): the weight's
    original pages were released once packed (LibraryConv.h, "Weights")
    and are read from the mapped file again."""
    return ["  %o = add %y, %w"], y + w.astype(np.float64), "%o"


reread.wants_weights = True

func("block", (2, 8, 9, 9), (8, 8, 3, 3), ", pads=[1, 1, 1, 1]", body=residual, pads=[1, 1, 1, 1])
func("depthwise_relu6", (1, 8, 10, 10), (8, 1, 3, 3), ", strides=[2, 2], pads=[1, 1, 1, 1], groups=8",
     body=relu6, groups=8, strides=[2, 2], pads=[1, 1, 1, 1])
func("depthwise_wide", (2, 24, 9, 7), (24, 1, 3, 3), ", pads=[1, 1, 1, 1], groups=24", body=relu6, groups=24,
     pads=[1, 1, 1, 1])
func("scale_tanh", (2, 4, 7, 6), (8, 4, 2, 3), ", pads=[0, 1, 1, 0], dilations=[2, 1]", body=per_channel,
     pads=[0, 1, 1, 0], dil=[2, 1])
func("no_bias_strided", (3, 5, 11, 8), (6, 5, 3, 3), ", strides=[2, 3]", bias=False, strides=[2, 3])
func("conv1d", (2, 3, 20), (4, 3, 5), ", strides=[2], pads=[2, 1], dilations=[2]", strides=[2], pads=[2, 1],
     dil=[2])
func("conv3d", (1, 2, 5, 6, 4), (3, 2, 2, 3, 2), ", pads=[1, 0, 1, 0, 1, 0]", pads=[1, 0, 1, 0, 1, 0])
func("full_mul", (1, 8, 6, 6), (8, 8, 3, 3), ", pads=[1, 1, 1, 1]", body=full_mul, pads=[1, 1, 1, 1])
func("small_out", (2, 16, 5, 5), (16, 16, 3, 3), ", pads=[1, 1, 1, 1]", body=residual, pads=[1, 1, 1, 1])
func("reread", (1, 32, 3, 3), (32, 32, 3, 3), ", pads=[1, 1, 1, 1]", body=reread, pads=[1, 1, 1, 1])


def add_input(y, x):
    return ["  %o = add %y, %x"], y + x, "%o"


func("batch_expand", (4, 16, 6, 5), (48, 16, 1, 1), "", body=relu6)
func("batch_project", (4, 24, 7, 7), (24, 24, 1, 1), "", body=add_input)
func("batch_dw", (6, 40, 9, 11), (40, 1, 3, 3), ", strides=[2, 2], pads=[1, 1, 1, 1], groups=40", body=relu6,
     groups=40, strides=[2, 2], pads=[1, 1, 1, 1])
func("batch_scale", (4, 4, 7, 6), (8, 4, 3, 3), ", pads=[1, 1, 1, 1]", body=per_channel, pads=[1, 1, 1, 1])
func("batch_odd", (5, 8, 6, 6), (8, 8, 3, 3), ", pads=[1, 1, 1, 1]", body=residual, pads=[1, 1, 1, 1])


def main(d):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "conv.nir"), "w") as f:
        f.write("module @conv_library\n")
        for name, x, y, lines, last, rank in FUNCS:
            f.write("\nfunc @%s(%%x: %s) -> %s {\n" % (name, qtype(rank), qtype(rank)))
            f.write("\n".join(lines) + "\n  ret %s\n}\n" % last)
            np.save(os.path.join(d, name + ".x.npy"), x)
            np.save(os.path.join(d, name + ".y.npy"), np.asarray(y, np.float32))


def check(d, nimble_run, kernels, isa=None, threads="1"):
    import subprocess

    env = dict(os.environ)
    if isa and isa != "-":
        env["DNNL_MAX_CPU_ISA"] = isa
    failed = 0
    for name, *_ in FUNCS:
        p = subprocess.run([nimble_run, os.path.join(d, "c.nbc"), "--function=" + name, "--kernels=" + kernels,
                            "--threads=" + threads,
                            "--input=@" + os.path.join(d, name + ".x.npy"),
                            "--expected-output=@" + os.path.join(d, name + ".y.npy"), "--tolerance=1e-5"],
                           capture_output=True, text=True, env=env)
        ok = p.returncode == 0
        failed += not ok
        print("%s: %s" % (name, "ok" if ok else "FAIL " + p.stderr.strip()[-500:]))
    print("%d functions, %d failed" % (len(FUNCS), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1] == "check":
        sys.exit(check(*sys.argv[2:]))
    main(sys.argv[1])
