//===- Opsets.cpp - From which opset each converter holds ------------------===//
//
// The op map (OpMap.cpp) says from which opset its converter is written
// (`since`, 7 for most rows: opset 7 brought numpy broadcasting to the binary
// ops). A model of an older opset is read where its ops are the same: ONNX
// versions each op separately, and an op's schema in effect at opset
// `since` took effect at an opset often below it (Relu's at 6, Conv's at 1).
// Such a node means exactly what it means at `since`, so the converter holds
// for it; a node whose op changed in between (Add before 7 had `broadcast`
// and `axis` attributes) is refused by op, naming the opset to convert to.
//
// The table is ONNX's operator changelog (docs/Changelog.md of the onnx
// repository): for each op of the op map, the version of its schema in
// effect at the row's `since`, checked against onnx.defs.get_schema(op,
// since).since_version of Debian's python3-onnx 1.12. Ops not listed changed
// at their `since` (their floor is `since`).
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Convert.h"

#include <cstring>

namespace nimble::onnx_import {

namespace {
struct Floor {
  const char *type;
  int opset;
};
const Floor kFloors[] = {
    {"Abs", 6}, {"ArgMax", 1}, {"ArgMin", 1}, {"Cast", 6}, {"Ceil", 6}, {"Clip", 6}, {"Concat", 4},
    {"Constant", 1}, {"Conv", 1}, {"DepthToSpace", 1}, {"Elu", 6}, {"Exp", 6}, {"Floor", 6},
    {"Gather", 1}, {"GlobalAveragePool", 1}, {"GlobalMaxPool", 1}, {"HardSigmoid", 6}, {"Identity", 1},
    {"If", 1}, {"InstanceNormalization", 6}, {"LeakyRelu", 6}, {"Log", 6}, {"LogSoftmax", 1},
    {"Loop", 1}, {"LRN", 1}, {"LpNormalization", 1}, {"MatMul", 1}, {"MaxPool", 1}, {"Neg", 6}, {"Not", 1},
    {"Reciprocal", 6}, {"ReduceL1", 1}, {"ReduceL2", 1}, {"ReduceLogSum", 1}, {"ReduceLogSumExp", 1},
    {"ReduceMax", 1}, {"ReduceMean", 1}, {"ReduceMin", 1}, {"ReduceSum", 1}, {"ReduceSumSquare", 1},
    {"Relu", 6}, {"Reshape", 5}, {"Selu", 6}, {"Shape", 1}, {"Sigmoid", 6}, {"Size", 1}, {"Softmax", 1},
    {"Softplus", 1}, {"Softsign", 1}, {"SpaceToDepth", 1}, {"Split", 2}, {"Sqrt", 6}, {"Squeeze", 1},
    {"Tanh", 6}, {"Transpose", 1}, {"Unsqueeze", 1},
};
} // namespace

int firstOpset(const OpEntry &e) {
  for (const Floor &f : kFloors)
    if (std::strcmp(f.type, e.type) == 0 && f.opset < e.since) return f.opset;
  return e.since;
}

} // namespace nimble::onnx_import
