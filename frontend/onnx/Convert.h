//===- Convert.h - What an ONNX op converter sees (internal) -------*- C++ -*-===//
//
// The importer (Importer.cpp) walks a graph in order; for each node it looks
// up the node's op type in the op map (OpMap.cpp) and hands a Conv to the
// entry's converter. A converter reads the node's inputs (IR values, or
// nothing for an omitted optional input), its attributes and the opset, emits
// Nimble ops through Conv::op (which types each op through its relation, so a
// shape error in the model is a located message, not a bad module), and
// returns the node's outputs. Values known at import time (initializers,
// `Constant` nodes, shapes of static tensors, and what converters fold from
// them) are `constant` ops or inline globals, so a converter that needs an
// input's value (Reshape's shape, the axes of a reduction) reads it with
// Conv::known.
//
// A converter that cannot express a node returns Conv::fail(why): the
// importer reports `model.onnx: error: node 'NAME' (OpType, opset N): why`.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_FRONTEND_ONNX_CONVERT_H
#define NIMBLE_FRONTEND_ONNX_CONVERT_H

#include "ir/IR.h"

#include <onnx/onnx_pb.h> // onnx-ml.pb.h, with ONNX_ML (third_party/onnx.BUILD)

#include <optional>
#include <string>
#include <vector>

namespace nimble::onnx_import {

class GraphImporter;

class Conv {
public:
  Conv(GraphImporter &g, const onnx::NodeProto &node, int opset, std::vector<ir::Value *> in)
      : opset(opset), in(std::move(in)), g_(g), node_(node) {}

  const onnx::NodeProto &node() const { return node_; }
  GraphImporter &graph() const { return g_; }
  const int opset;
  /// One entry per input of the node; null for an omitted optional input
  /// (an empty name) and past the end.
  std::vector<ir::Value *> in;
  ir::Value *input(size_t i) const { return i < in.size() ? in[i] : nullptr; }
  size_t numOutputs() const { return static_cast<size_t>(node_.output_size()); }
  /// Whether output `i` is used by the model (named).
  bool wantsOutput(size_t i) const { return i < numOutputs() && !node_.output(static_cast<int>(i)).empty(); }

  // Attributes (ONNX's, by name).
  const onnx::AttributeProto *attr(const std::string &name) const;
  int64_t attrInt(const std::string &name, int64_t dflt) const;
  double attrFloat(const std::string &name, double dflt) const;
  std::string attrStr(const std::string &name, const std::string &dflt) const;
  std::optional<std::vector<int64_t>> attrInts(const std::string &name) const;
  /// A tensor attribute's value; false (with fail's message) when Nimble
  /// cannot hold it.
  bool tensorAttr(const onnx::TensorProto &t, DenseValue &v);

  /// Emits one op whose result types its relation infers; null (and the
  /// message kept for fail) when the relation rejects the operands.
  ir::Value *op(OpCode code, const std::vector<ir::Value *> &operands,
                const std::vector<std::pair<std::string, Attr>> &attrs = {});
  /// The same for an op of several results (split).
  std::vector<ir::Value *> ops(OpCode code, const std::vector<ir::Value *> &operands,
                               const std::vector<std::pair<std::string, Attr>> &attrs, unsigned numResults);
  /// A `constant` (placed at the top of the function, where it dominates
  /// every use, sub-graphs included).
  ir::Value *constant(DenseValue v);
  ir::Value *scalar(DType t, double v);
  ir::Value *i64s(const std::vector<int64_t> &v);
  /// The value of `v` when known at import time, else null.
  const DenseValue *known(ir::Value *v) const;
  /// Input `i` as integers, when known at import time.
  std::optional<std::vector<int64_t>> knownInts(size_t i) const;
  /// A 1-D i64 shape tensor from per-dimension parts: a static size, or a
  /// scalar value computed at run time (null `v`).
  struct DimPart {
    int64_t size = 0;
    ir::Value *v = nullptr;
  };
  ir::Value *shapeVector(const std::vector<DimPart> &parts);
  /// Dimension `axis` of `x` as a part (static when its type says so).
  DimPart dimOf(ir::Value *x, int64_t axis);
  /// What the importer knows of a 1-D integer value entry by entry (a shape
  /// being computed: static sizes, and scalar values for the dynamic ones),
  /// from its constant value or from the parts recorded when it was made;
  /// nullopt when nothing is known.
  std::optional<std::vector<DimPart>> parts(ir::Value *v) const;
  /// Records the parts of `v`, a 1-D integer value made by this node.
  void setParts(ir::Value *v, std::vector<DimPart> p);
  /// A scalar integer value as a part: static when known, else itself.
  std::optional<DimPart> scalarPart(ir::Value *v) const;

  /// Records why the node cannot be imported; returns false for `return c.fail(...)`.
  bool fail(std::string why);
  const std::string &error() const { return error_; }
  ir::Context &ctx() const;

private:
  GraphImporter &g_;
  const onnx::NodeProto &node_;
  std::string error_;
};

/// A converter fills `out` with one value per output it defines (null for
/// outputs the model does not use) or returns c.fail(why).
using Converter = bool (*)(Conv &c, std::vector<ir::Value *> &out);

struct OpEntry {
  const char *type;     // ONNX op type (default domain)
  int since;            // the first opset of the default domain handled
  const char *nir;      // the .nir ops it becomes (documentation)
  const char *notes;    // limits, in words (documentation)
  Converter convert;
};

/// The first opset whose version of the op is the one in effect at `since`
/// (Opsets.cpp): the converter holds from there.
int firstOpset(const OpEntry &e);

/// The op map, sorted by op type. The importer reads it, `--list-ops`
/// prints it, and docs/import-onnx.md's table is checked against it.
const std::vector<OpEntry> &opMap();
const OpEntry *findOp(const std::string &type);

/// ONNX op types that need an op Nimble does not have yet (the reason), for
/// messages and `--list-ops`.
const char *missingOpReason(const std::string &type);

/// ONNX element type to Nimble's; nullopt when Nimble has none.
std::optional<DType> dtypeOf(int onnxType);
std::string onnxTypeName(int onnxType);

} // namespace nimble::onnx_import

#endif // NIMBLE_FRONTEND_ONNX_CONVERT_H
