#!/usr/bin/env python3
"""Writes a .nir program at or past one limit of ir/Limits.h (the inputs are
too big, or too repetitive, to keep as files). Usage: gen_limits.py KIND N

  type-depth N     a parameter of a type nested N levels (tuple<...<tensor<f32>>>)
  func-depth N     a parameter of a function type nested N levels ((...) -> ...)
  rank N           a parameter and result of a tensor type of rank N (dims 1)
  literal-rank N   a constant literal of rank N ([[...[1.0]...]])
  tuple-chain N    N `tuple` ops each wrapping the previous (types built by
                   inference, nested N + 1 levels)
  split N          a `split` into N sections, each result named
"""
import sys

kind, n = sys.argv[1], int(sys.argv[2])
# Strings are joined once (a 300,000-deep type is megabytes: no quadratic
# concatenation).
if kind == "type-depth":
    t = "tuple<" * (n - 1) + "tensor<f32>" + ">" * (n - 1)
    print("func @main(%%x: %s) -> %s {\n  ret %%x\n}" % (t, t))
elif kind == "func-depth":
    t = "(" * (n - 1) + "tensor<f32>" + ") -> tensor<f32>" * (n - 1)
    print("func @main(%%x: %s) {\n  ret\n}" % t)
elif kind == "rank":
    t = "tensor<" + "1x" * n + "f32>"
    print("func @main(%%x: %s) -> %s {\n  ret %%x\n}" % (t, t))
elif kind == "literal-rank":
    t = "tensor<" + "1x" * n + "f32>"
    print("func @main() -> %s {\n  %%c = constant %s2.5%s : %s\n  ret %%c\n}"
          % (t, "[" * n, "]" * n, t))
elif kind == "tuple-chain":
    lines = ["func @main(%x: tensor<f32>) {"]
    prev = "%x"
    for i in range(n):
        lines.append("  %%t%d = tuple %s" % (i, prev))
        prev = "%%t%d" % i
    lines.append("  ret\n}")
    print("\n".join(lines))
elif kind == "split":
    names = ", ".join("%%s%d" % i for i in range(n))
    print("func @main(%%x: tensor<?xf32>) {\n  %s = split %%x, sections=%d\n  ret\n}" % (names, n))
else:
    sys.exit("gen_limits.py: unknown kind " + kind)
