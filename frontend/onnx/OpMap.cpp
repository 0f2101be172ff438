//===- OpMap.cpp - ONNX ops as Nimble ops ----------------------------------===//
//
// One row per ONNX op type the importer reads (opsets 7 to 21 of the
// default domain, and older ones where the op is the same: Opsets.cpp): the converter, and for the manual the Nimble ops it
// becomes and its limits. A converter emits one Nimble op where one fits and
// otherwise a short composite of existing ops (Gemm: matmul, mul, add;
// LeakyRelu: less, mul, select; BatchNormalization: sub, div, sqrt, ...).
// Attributes that ONNX moved to inputs across opsets (the axes of the
// reductions, Squeeze and Unsqueeze from 13 or 18; Split's sizes from 13 and
// its num_outputs from 18) are read from where the node's opset puts them;
// where the model fixes them (initializers, Constant nodes, or shapes of
// static tensors folded here) they become Nimble's attributes, and where it
// does not, ConvertRuntime.cpp expresses the node with run-time operands.
// Ops that need an op Nimble does not have are in the second table, with
// the reason (docs/import-onnx.md lists both).
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Converters.h"
#include "frontend/onnx/Graph.h"

#include <algorithm>

namespace nimble::onnx_import {

using namespace ir;
using namespace convert;

namespace {

bool ifOp(Conv &c, Out &out);
bool loopOp(Conv &c, Out &out);
bool recurrent(Conv &c, Out &out);
bool seqOp(Conv &c, Out &out);
bool scanOp(Conv &c, Out &out);

} // namespace

const std::vector<OpEntry> &opMap() {
  static const std::vector<OpEntry> map = [] {
    std::vector<OpEntry> m = {
        {"Abs", 7, "abs", "", unary<OpCode::Abs>},
        {"Ceil", 7, "cast, less, add, abs, select", "exact (integers kept where |x| >= 2^mantissa)", ceilOp},
        {"DepthToSpace", 7, "reshape, transpose", "static channels", depthToSpace},
        {"EyeLike", 9, "constant, or arange, equal, cast", "", eyeLike},
        {"Floor", 7, "cast, greater, sub, abs, select", "exact (integers kept where |x| >= 2^mantissa)", floorOp},
        {"GatherElements", 11, "equal, select, sum (a one-hot mask over the axis)",
         "memory: indices' size times the axis length", gatherElements},
        {"Hardmax", 13, "argmax, equal, cast", "", hardmax},
        {"Mod", 10, "fmod (integers: div, mul, sub; fmod=0: less, not_equal, select, add)", "floats need fmod=1 (ONNX's rule)", mod},
        {"NegativeLogLikelihoodLoss", 13, "equal, select, mul, sum, neg, div", "", nllLoss},
        {"Trilu", 14, "arange, sub, greater_equal or less_equal, select", "", trilu},
        {"Round", 11, "floor's ops, mul, equal, select, add", "half to even", roundOp},
        {"Shrink", 9, "less, greater, select, add, sub", "", shrink},
        {"SoftmaxCrossEntropyLoss", 13, "LogSoftmax's ops, then NegativeLogLikelihoodLoss's", "", softmaxCrossEntropy},
        {"SpaceToDepth", 7, "reshape, transpose", "", spaceToDepth},
        {"Add", 7, "add", "", binary<OpCode::Add>},
        {"And", 7, "logical_and", "", binary<OpCode::LogicalAnd>},
        {"ArgMax", 7, "argmax (last index: max, equal, select)", "", argMax},
        {"ArgMin", 7, "neg, argmax (integers, last index: min, equal, select)", "", argMin},
        {"BatchNormalization", 9, "sub, div, sqrt, mul, add, expand_dims (training: mean, reshape)", "training mode from opset 14 (running statistics by momentum)", batchNorm},
        {"Cast", 7, "cast", "to Nimble's element types; saturate ignored (float8 only)", cast},
        {"CastLike", 15, "cast", "", castLike},
        {"Celu", 12, "exp, div, sub, mul, minimum, maximum, add", "", celu},
        {"Clip", 7, "maximum, minimum", "", clip},
        {"Concat", 7, "concat", "", concat},
        {"Conv", 7, "conv", "auto_pad SAME with a stride > 1 needs static spatial sizes", conv},
        {"Constant", 7, "constant", "not sparse_value or strings", constantOp},
        {"ConstantOfShape", 9, "constant, full", "", constantOfShape},
        {"Div", 7, "div", "", binary<OpCode::Div>},
        {"Dropout", 7, "(none)", "the input, and a mask of true: inference, or training with ratio 0 (run-time values checked)", dropout},
        {"Elu", 7, "less, exp, sub, mul, select", "", elu},
        {"Equal", 7, "equal", "", binary<OpCode::Equal>},
        {"Erf", 9, "erf", "", unary<OpCode::Erf>},
        {"Exp", 7, "exp", "", unary<OpCode::Exp>},
        {"Expand", 8, "broadcast_to, or full and mul", "", expand},
        {"Flatten", 9, "reshape, dyn_reshape", "", flatten},
        {"Gather", 7, "take", "", gather},
        {"Gelu", 20, "gelu", "approximate=tanh as tanh, mul, add", gelu},
        {"Gemm", 7, "matmul, mul, add", "", gemm},
        {"GlobalAveragePool", 7, "mean", "", globalPool<OpCode::Mean>},
        {"GlobalMaxPool", 7, "max", "", globalPool<OpCode::Max>},
        {"Greater", 7, "greater", "", binary<OpCode::Greater>},
        {"GRU", 7, "a loop: matmul, split, sigmoid, tanh, dynamic_update_slice", "activations Sigmoid, Tanh, Relu; run-time sequence_lens: forward only", recurrent},
        {"GreaterOrEqual", 12, "greater_equal", "", binary<OpCode::GreaterEqual>},
        {"HardSigmoid", 7, "mul, add, minimum, maximum", "", hardSigmoid},
        {"HardSwish", 14, "mul, add, minimum, maximum", "", hardSwish},
        {"Identity", 7, "(none)", "", identity},
        {"If", 7, "cond_br, br, block arguments", "tensor outputs of one element type and rank in both branches", ifOp},
        {"InstanceNormalization", 7, "mean, sub, mul, sqrt, div, add", "", instanceNorm},
        {"IsInf", 10, "equal, logical_or", "", isInf},
        {"IsNaN", 9, "not_equal", "", isNaN},
        {"LSTM", 7, "a loop: matmul, split, sigmoid, tanh, dynamic_update_slice", "activations Sigmoid, Tanh, Relu; no input_forget; run-time sequence_lens: forward only", recurrent},
        {"LayerNormalization", 17, "layer_norm (other axes, statistics: mean, sub, rsqrt, mul)", "", layerNorm},
        {"LeakyRelu", 7, "less, mul, select", "", leakyRelu},
        {"Less", 7, "less", "", binary<OpCode::Less>},
        {"LessOrEqual", 12, "less_equal", "", binary<OpCode::LessEqual>},
        {"Log", 7, "log", "", unary<OpCode::Log>},
        {"LogSoftmax", 7, "max, sub, exp, sum, log", "", logSoftmax},
        {"Loop", 7, "br, cond_br, block arguments; scan outputs: expand_dims, concat", "carried values keep dtype and rank", loopOp},
        {"Scan", 8, "a loop: dynamic_slice, squeeze, the body, expand_dims, concat", "opset 8: batch of 1, no sequence_lens", scanOp},
        {"LpNormalization", 7, "abs or mul, sum, sqrt, div", "p = 1 or 2", lpNorm},
        {"MaxPool", 7, "max_pool; Indices: pad, take, argmax, equal, mul, sum", "Indices: static shapes; auto_pad SAME as Conv", pool<true>},
        {"AveragePool", 7, "avg_pool", "auto_pad SAME as Conv", pool<false>},
        {"MatMul", 7, "matmul, batch_matmul", "", matmul},
        {"Max", 8, "maximum", "", variadic<OpCode::Maximum>},
        {"Mean", 8, "add, div", "", variadic<OpCode::Mean>},
        {"MeanVarianceNormalization", 9, "mean, sub, mul, sqrt, div", "", mvn},
        {"Min", 8, "minimum", "", variadic<OpCode::Minimum>},
        {"Mish", 18, "exp, add, log, tanh, mul", "", mish},
        {"Mul", 7, "mul", "", binary<OpCode::Mul>},
        {"Neg", 7, "neg", "", unary<OpCode::Neg>},
        {"NonZero", 9, "nonzero, transpose", "", nonZero},
        {"Not", 7, "logical_not", "", unary<OpCode::LogicalNot>},
        {"Or", 7, "logical_or", "", binary<OpCode::LogicalOr>},
        {"PRelu", 7, "less, mul, select", "", prelu},
        {"Pow", 7, "pow (integers: cast to f64 and back)", "", pow},
        {"RNN", 7, "a loop: matmul, tanh, dynamic_update_slice", "activations Sigmoid, Tanh, Relu; run-time sequence_lens: forward only", recurrent},
        {"Range", 11, "arange", "", range},
        {"Reciprocal", 7, "div", "", reciprocal},
        {"ReduceL1", 7, "abs, sum", "run-time axes of static count", reduce<Red::L1>},
        {"ReduceL2", 7, "mul, sum, sqrt", "run-time axes of static count", reduce<Red::L2>},
        {"ReduceLogSum", 7, "sum, log", "run-time axes of static count", reduce<Red::LogSum>},
        {"ReduceLogSumExp", 7, "max, sub, exp, sum, log, add", "run-time axes of static count", reduce<Red::LogSumExp>},
        {"ReduceMax", 7, "max", "run-time axes of static count; -inf over an empty axis", reduce<Red::Max>},
        {"ReduceMean", 7, "mean", "run-time axes of static count", reduce<Red::Mean>},
        {"ReduceMin", 7, "min", "run-time axes of static count; +inf over an empty axis", reduce<Red::Min>},
        {"ReduceSum", 7, "sum", "run-time axes of static count", reduce<Red::Sum>},
        {"ReduceSumSquare", 7, "mul, sum", "run-time axes of static count", reduce<Red::SumSquare>},
        {"Relu", 7, "relu", "", unary<OpCode::Relu>},
        {"Reshape", 7, "reshape, dyn_reshape", "", reshape},
        {"Selu", 7, "exp, sub, mul, less_equal, select", "", selu},
        {"Shape", 7, "shape_of, slice (or a constant)", "", shape},
        {"Sigmoid", 7, "sigmoid", "", unary<OpCode::Sigmoid>},
        {"Sign", 9, "greater, less, select", "", sign},
        {"Size", 7, "dim, mul (or a constant)", "", size},
        {"Slice", 10, "slice (any step, run-time operands: arange, take)", "a static count of sliced axes", slice},
        {"Softmax", 7, "softmax", "", softmax},
        {"Softplus", 7, "exp, add, log", "", softplus},
        {"Softsign", 7, "abs, add, div", "", softsign},
        {"Split", 7, "split, slice (run-time sizes: arange, take)", "", split},
        {"Sqrt", 7, "sqrt", "", unary<OpCode::Sqrt>},
        {"Squeeze", 7, "squeeze (run-time axes: nonzero, take, dyn_reshape)", "run-time axes of static count", squeeze},
        {"Sub", 7, "sub", "", binary<OpCode::Sub>},
        {"Sum", 8, "add", "", variadic<OpCode::Add>},
        {"Tanh", 7, "tanh", "", unary<OpCode::Tanh>},
        {"ThresholdedRelu", 10, "greater, select", "", thresholdedRelu},
        {"Transpose", 7, "transpose", "", transpose},
        {"Unsqueeze", 7, "expand_dims (run-time axes: dyn_reshape)", "run-time axes of static count", unsqueeze},
        {"Where", 9, "select", "", where},
        {"Xor", 7, "not_equal", "", xorOp},
        // Issue 47's ops (ConvertTensor.cpp and the element-wise rows).
        {"Sin", 7, "sin", "", unary<OpCode::Sin>},
        {"Cos", 7, "cos", "", unary<OpCode::Cos>},
        {"Tan", 7, "tan", "", unary<OpCode::Tan>},
        {"Asin", 7, "asin", "", unary<OpCode::Asin>},
        {"Acos", 7, "acos", "", unary<OpCode::Acos>},
        {"Atan", 7, "atan", "", unary<OpCode::Atan>},
        {"Sinh", 9, "sinh", "", unary<OpCode::Sinh>},
        {"Cosh", 9, "cosh", "", unary<OpCode::Cosh>},
        {"Asinh", 9, "asinh", "", unary<OpCode::Asinh>},
        {"Acosh", 9, "acosh", "", unary<OpCode::Acosh>},
        {"Atanh", 9, "atanh", "", unary<OpCode::Atanh>},
        {"CumSum", 11, "cumsum", "", cumSum},
        {"Tile", 7, "tile", "", tile},
        {"Pad", 7, "pad", "axes (opset 18) known at import", pad},
        {"ReduceProd", 7, "prod", "axes known at import", reduceProd},
        {"GatherND", 11, "gather_nd", "", gatherND},
        {"Scatter", 9, "scatter_elements", "", scatterElements},
        {"ScatterElements", 11, "scatter_elements", "", scatterElements},
        {"ScatterND", 11, "scatter_nd", "", scatterND},
        {"OneHot", 9, "one_hot (indices and depth cast to i64)", "", oneHot},
        // Issue 47's third batch, lowered to existing ops (ConvertComposite.cpp).
        {"QuantizeLinear", 10, "div, round's ops, add, maximum, minimum, cast", "to u8, i8, u16, i16; no block_size", quantizeLinear},
        {"DequantizeLinear", 10, "cast, sub, mul", "no block_size", dequantizeLinear},
        {"DynamicQuantizeLinear", 11, "min, max, sub, div, QuantizeLinear's ops", "", dynamicQuantizeLinear},
        {"HannWindow", 17, "arange, mul, div, cos, add, cast", "computed in f64, then cast", window<0>},
        {"HammingWindow", 17, "arange, mul, div, cos, add, cast", "computed in f64, then cast", window<1>},
        {"BlackmanWindow", 17, "arange, mul, div, cos, add, cast", "computed in f64, then cast", window<2>},
        {"Unique", 11, "not_equal, sum, cumsum, less, argmax, arange, take (pairwise over the slices)",
         "memory: the slice count squared times the slice size", unique},
        {"MatMulInteger", 10, "cast, sub, matmul (f64, exact), cast", "8-bit operands", matMulInteger},
        {"ConvInteger", 10, "cast, sub, conv (f64, exact), cast", "8-bit operands", convInteger},
        {"QLinearMatMul", 10, "MatMulInteger's ops, then mul, round's ops, add, maximum, minimum, cast", "8-bit operands", qlinearMatMul},
        {"QLinearConv", 10, "ConvInteger's ops, then add, mul, round's ops, maximum, minimum, cast", "8-bit operands", qlinearConv},
        {"Compress", 9, "nonzero, reshape, take", "", compress},
        {"LRN", 7, "mul, expand_dims, avg_pool, add, pow, div", "", lrn},
        {"Einsum", 12, "take (diagonals), sum, transpose, reshape, batch_matmul", "two or more operands: static sizes", einsum},
        {"Det", 11, "slice, squeeze, mul, sub, add", "static 1x1, 2x2, 3x3 matrices", det},
        {"ReverseSequence", 10, "arange, less, sub, select, gather_nd, transpose", "", reverseSequence},
        {"MaxUnpool", 9, "zeros, scatter_elements, reshape, pad", "static input shape", maxUnpool},
        // ... and to the ops it added (ConvertTensor.cpp, ConvertWindow.cpp).
        {"BitShift", 11, "shift_left, shift_right", "", bitShift},
        {"TopK", 1, "top_k", "sorted=0 gives the sorted order", topK},
        {"NonMaxSuppression", 10, "non_max_suppression", "", nonMaxSuppression},
        {"ConvTranspose", 1, "conv_transpose", "output_shape and auto_pad SAME need static spatial sizes", convTranspose},
        // Sampling (ConvertSampling.cpp).
        {"Resize", 10, "resize", "opset 10 as Upsample; run-time scales or sizes give ? dims", resize},
        {"Upsample", 7, "resize", "as Resize with asymmetric coordinates, nearest floored", upsample},
        {"GridSample", 16, "grid_sample", "", gridSample},
        // Sequences and optionals as ADTs (Sequences.cpp).
        {"SequenceEmpty", 11, "construct", "Nil; the element rank learned from what the graph inserts", seqOp},
        {"SequenceConstruct", 11, "construct", "Cons onto Nil; one element type and rank", seqOp},
        {"SequenceInsert", 11, "call, match, construct", "@Seq_*.insert; one element type and rank", seqOp},
        {"SequenceAt", 11, "call, match", "@Seq_*.at", seqOp},
        {"SequenceLength", 11, "call, match, add", "@Seq_*.length", seqOp},
        {"SequenceErase", 11, "call, match, construct", "@Seq_*.erase", seqOp},
        {"SequenceMap", 17, "a loop: match, construct; call", "tensor body outputs; @Seq_*.reverse", seqOp},
        {"Optional", 15, "construct", "Some, or None of the type attribute", seqOp},
        {"OptionalHasElement", 15, "match, br", "", seqOp},
        {"OptionalGetElement", 15, "match", "None reaches unreachable", seqOp},
    };
    // Sorted by type for findOp, whatever the order above.
    std::sort(m.begin(), m.end(), [](const OpEntry &a, const OpEntry &b) { return std::string(a.type) < b.type; });
    return m;
  }();
  return map;
}

const OpEntry *findOp(const std::string &type) {
  const auto &m = opMap();
  auto it = std::lower_bound(m.begin(), m.end(), type, [](const OpEntry &e, const std::string &t) { return e.type < t; });
  return it != m.end() && it->type == type ? &*it : nullptr;
}

namespace {
bool ifOp(Conv &c, Out &out) { return c.graph().convertIf(c, out); }
bool loopOp(Conv &c, Out &out) { return c.graph().convertLoop(c, out); }
bool recurrent(Conv &c, Out &out) { return c.graph().convertRecurrent(c, out); }
bool seqOp(Conv &c, Out &out) { return c.graph().convertSequenceOp(c, out); }
bool scanOp(Conv &c, Out &out) { return c.graph().convertScan(c, out); }

/// ONNX op types that need a Nimble op that does not exist yet (a new row of
/// ir/Ops.def with its shape function, kernels and gradient): issue 47.
struct Missing {
  const char *types;
  const char *why;
};
const Missing kMissing[] = {
    {"DeformConv", "needs deformable convolution, which Nimble does not have"},
    {"LpPool MaxRoiPool GlobalLpPool", "needs a pooling op Nimble does not have (max_pool and avg_pool only)"},
    {"RoiAlign", "needs per-box average or max pooling of sampled points, which Nimble does not have"},
    {"AffineGrid", "not mapped yet (a coordinate grid times theta: arange, matmul; then grid_sample)"},
    {"CenterCropPad", "needs a crop-or-pad op (pad crops with negative pads; not mapped yet)"},
    {"BitwiseAnd BitwiseOr BitwiseXor BitwiseNot", "needs a new Nimble integer op"},
    {"SplitToSequence ConcatFromSequence", "not mapped yet (sequences are cons lists: split then construct; a loop of concat)"},
    {"StringNormalizer TfIdfVectorizer RegexFullMatch "
     "StringConcat StringSplit Col2Im DFT STFT MelWeightMatrix "
     "GroupNormalization Bernoulli Multinomial RandomNormal RandomNormalLike RandomUniform "
     "RandomUniformLike "
     "ImageDecoder "
     "Gradient",
     "needs an op or a type (sequences, optionals, strings, quantized or random tensors) Nimble does not have"},
};
} // namespace

const char *missingOpReason(const std::string &type) {
  for (const Missing &m : kMissing) {
    std::string_view all = m.types;
    for (size_t at = 0; at < all.size();) {
      size_t sp = all.find(' ', at);
      if (sp == std::string_view::npos) sp = all.size();
      if (all.substr(at, sp - at) == type) return m.why;
      at = sp + 1;
    }
  }
  return nullptr;
}

std::string listOps() {
  std::string s;
  for (const OpEntry &e : opMap())
    s += std::string(e.type) + "\t" + std::to_string(firstOpset(e)) + "\t" + e.nir + "\t" + e.notes + "\n";
  s += "# not supported\n";
  for (const Missing &m : kMissing) {
    std::string_view all = m.types;
    for (size_t at = 0; at < all.size();) {
      size_t sp = all.find(' ', at);
      if (sp == std::string_view::npos) sp = all.size();
      // (A type the map has is not listed: a stale entry would contradict it.)
      if (!findOp(std::string(all.substr(at, sp - at))))
        s += std::string(all.substr(at, sp - at)) + "\t-\t-\t" + m.why + "\n";
      at = sp + 1;
    }
  }
  return s;
}

} // namespace nimble::onnx_import
