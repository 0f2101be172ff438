"""Stand-in for @rules_java//java:defs.bzl on offline Bazel 4.2.3.

@bazel_tools loads these names from @rules_java; Bazel 4.2.3 has them built
in. We write no Java. See ../README.md for why this repository exists.
"""

java_binary = native.java_binary
java_import = native.java_import
java_library = native.java_library
java_plugin = native.java_plugin
java_runtime = native.java_runtime
java_test = native.java_test
java_toolchain = native.java_toolchain
