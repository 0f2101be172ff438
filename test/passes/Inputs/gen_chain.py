"""Prints a function of N chained `neg` ops on tensor<2x16xf32> (static
storages, one region): plan-memory-windows.test."""
import sys

n = int(sys.argv[1])
print("module @windows\n")
print("func @main(%x0: tensor<2x16xf32>) -> tensor<2x16xf32> {")
for i in range(n):
    print(f"  %x{i + 1} = neg %x{i}")
print(f"  ret %x{n}")
print("}")
