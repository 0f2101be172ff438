#!/usr/bin/python3
"""Programs for library-conv-pairs.test: conv pairs on oneDNN
(vm/dispatch/LibraryConv.h, "Pairs"), each a function of DIR/pairs.nir with
inline weights: a 1 x 1 conv and its chain, then a depthwise 3 x 3 conv
(padding 1) and its chain, over NCHW images (-O2 makes them channels-last
and the fuse pass one kernel); its input DIR/NAME.x.npy and numpy's output
DIR/NAME.y.npy (float64, test/vm/Inputs/cases_window.py's reference,
rounded once).

    conv_pairs.py DIR                              write them
    conv_pairs.py check DIR NIMBLE_RUN KERNELS [ISA] [THREADS]
        run every function of DIR/p.nbc with --kernels=KERNELS (oneDNN held
        to ISA when given and not "-", DNNL_MAX_CPU_ISA; --threads=THREADS,
        default 1) against numpy's output at --tolerance=1e-5; print one
        line per function and a summary

The functions: MobileNetV2's block (ReLU6 after each conv) with stride 2
and 1, odd sizes (edge rows and columns), batches of 1 and 8; a relu
chain; an intermediate of 3 MiB or more with stride 2 (fused by default);
pairs without a fused primitive (two convs): small ones, no chains, no
bias on the depthwise conv, a per-channel add after it.
"""

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "vm", "Inputs"))

from cases_window import conv_ref  # noqa: E402
from nir_literal import lit  # noqa: E402

rng = np.random.default_rng(47)


def tensor_type(shape):
    return "tensor<%s>" % "x".join([str(d) for d in shape] + ["f32"])


FUNCS = []


def relu6(v):
    return np.minimum(np.maximum(v, 0), 6)


def relu(v):
    return np.maximum(v, 0)


def chain(kind, name):
    """The ops after conv %NAME: (lines, numpy function, result name)."""
    if kind == "relu6":
        return (["  %%%s0 = maximum %%%s, %%zero" % (name, name), "  %%%s6 = minimum %%%s0, %%six" % (name, name)],
                relu6, "%%%s6" % name)
    if kind == "relu":
        return ["  %%%sr = relu %%%s" % (name, name)], relu, "%%%sr" % name
    return [], lambda v: v, "%" + name


def func(name, x_shape, m, stride, act="relu6", dw_bias=True, add_channel=False):
    n, c = x_shape[0], x_shape[1]
    x = rng.uniform(-1, 1, x_shape).astype(np.float32)
    w1 = rng.uniform(-1, 1, (m, c, 1, 1)).astype(np.float32)
    b1 = rng.uniform(-1, 1, (m,)).astype(np.float32)
    w2 = rng.uniform(-1, 1, (m, 1, 3, 3)).astype(np.float32)
    b2 = rng.uniform(-1, 1, (m,)).astype(np.float32) if dw_bias else None
    lines = ["  %zero = constant 0.0 : tensor<f32>", "  %six = constant 6.0 : tensor<f32>",
             "  %%w1 = constant %s : %s" % (lit(w1), tensor_type(w1.shape)),
             "  %%b1 = constant %s : %s" % (lit(b1), tensor_type(b1.shape)),
             "  %%w2 = constant %s : %s" % (lit(w2), tensor_type(w2.shape))]
    if dw_bias:
        lines.append("  %%b2 = constant %s : %s" % (lit(b2), tensor_type(b2.shape)))
    lines.append("  %e = conv %x, %w1, %b1")
    more, f1, e = chain(act, "e")
    lines += more
    lines.append("  %%d = conv %s, %%w2%s, strides=[%d, %d], pads=[1, 1, 1, 1], groups=%d" %
                 (e, ", %b2" if dw_bias else "", stride, stride, m))
    more, f2, last = chain(act, "d")
    lines += more
    y = f1(conv_ref(x, w1, b1))
    y = f2(conv_ref(y, w2, b2, [stride, stride], [1, 1, 1, 1], [], m))
    if add_channel:
        s = rng.uniform(-1, 1, (m, 1, 1)).astype(np.float32)
        lines.append("  %%s = constant %s : %s" % (lit(s), tensor_type(s.shape)))
        lines.append("  %%o = add %s, %%s" % last)
        last = "%o"
        y = y + s
    FUNCS.append((name, x, y, lines, last))


# oneDNN fuses only when the data outgrow its cache (smaller pairs get its
# reference fusion, which LibraryConv refuses: two convs); these four do.
func("pair_s2", (1, 8, 47, 47), 144, 2)
func("pair_s1", (1, 8, 45, 43), 160, 1)
func("batch8_s2", (8, 8, 23, 23), 64, 2)
func("batch8_s1_relu", (8, 8, 21, 21), 80, 1, act="relu")
# 8 x 34 x 34 x 96 f32: 3.4 MiB, over kPairFuseBytes: fused by default.
func("large_s2", (8, 16, 34, 34), 96, 2)
# Two convs whatever NIMBLE_CONV_PAIR says: oneDNN's reference fusion only;
# no chains; no bias on the depthwise conv; a per-channel add after it.
func("small_s2", (1, 8, 9, 9), 24, 2)
func("bare_s2", (2, 4, 5, 7), 16, 2, act=None)
func("no_dw_bias", (2, 8, 8, 8), 16, 2, dw_bias=False)
func("channel_add", (2, 8, 8, 8), 16, 2, add_channel=True)

def main(d):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "pairs.nir"), "w") as f:
        f.write("module @conv_pairs\n")
        for name, x, y, lines, last in FUNCS:
            f.write("\nfunc @%s(%%x: tensor<?x?x?x?xf32>) -> tensor<?x?x?x?xf32> {\n" % name)
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
        p = subprocess.run([nimble_run, os.path.join(d, "p.nbc"), "--function=" + name, "--kernels=" + kernels,
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
