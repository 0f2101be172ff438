//===- Graph.h - The importer's state while it walks a model (internal) -*- C++ -*-===//
//
// One GraphImporter per model: the module and @main being built, the block
// ops go to, a scope per (sub-)graph mapping ONNX names to IR values (a
// sub-graph sees its parents' names, as the ONNX spec says), and the data of
// the initializers that go to the side file. Importer.cpp holds the model
// and graph walk, ControlFlow.cpp `If` and `Loop`.
//
//===----------------------------------------------------------------------===//
#ifndef NIMBLE_FRONTEND_ONNX_GRAPH_H
#define NIMBLE_FRONTEND_ONNX_GRAPH_H

#include "frontend/onnx/Importer.h"

#include <onnx/onnx_pb.h> // onnx-ml.pb.h, with ONNX_ML (third_party/onnx.BUILD)

#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace nimble::onnx_import {

/// Every opset of the default domain up to 21 is read; each op then holds
/// from its own first opset (Opsets.cpp: Relu from 6, Add from 7, the
/// broadcasting one), and a node of an older version is refused by op.
inline constexpr int kMinOpset = 1, kMaxOpset = 21;

/// Rewrites exporters' decompositions of Nimble ops back into the op: the
/// exact GELU as erf arithmetic, LayerNorm as reductions and arithmetic
/// (Idioms.cpp). Run on the built module,
/// before GraphImporter::cleanUp erases what it leaves unused.
void recogniseIdioms(ir::Module &m);

class GraphImporter {
public:
  /// What a retry of the import learned of sequences whose element type the
  /// model does not fix (Sequences.cpp): ONNX name of the sequence's origin
  /// (a graph input, a SequenceEmpty's output) -> element dtype and rank.
  using SeqHints = std::map<std::string, std::pair<DType, int64_t>>;

  GraphImporter(ir::Module &m, ir::Context &ctx, const ImportOptions &opts, int opset, SeqHints &hints)
      : m_(m), ctx_(ctx), opts_(opts), opset_(opset), seqHints_(hints) {}

  bool importMain(const onnx::GraphProto &g, std::string &error);
  void cleanUp();

  // For converters (Conv) and control flow.
  ir::Operation *emit(OpCode code, const std::vector<ir::Value *> &operands,
                      const std::vector<std::pair<std::string, Attr>> &attrs, int numResults,
                      std::string &error);
  ir::Operation *terminate(OpCode code, const std::vector<ir::Value *> &operands,
                           std::vector<ir::Successor> succs);
  ir::Value *constant(DenseValue v);
  /// A tensor computed at import from initializers (a recurrent layer's
  /// weights of one direction, its two biases summed): a new module
  /// constant, inline or in the side file by size as an initializer is,
  /// named after `onnxName`. What ONNX Runtime does once per session is
  /// then done once per import, and the kernels see a constant (oneDNN and
  /// the native kernels pack constant weights at load; a computed one is
  /// reordered at every call).
  ir::Value *derivedInitializer(const std::string &onnxName, DenseValue v);
  const DenseValue *known(ir::Value *v) const;
  /// The data of an initializer that goes to the side file (null for others).
  DenseValue *externalData(const ir::Global *g) {
    auto it = externalData_.find(g);
    return it == externalData_.end() ? nullptr : &it->second;
  }
  ir::Context &ctx() const { return ctx_; }
  std::unordered_map<const ir::Value *, std::vector<std::pair<int64_t, ir::Value *>>> &partsMap() { return parts_; }
  bool readTensor(const onnx::TensorProto &t, DenseValue &v, std::string &error);
  ir::Module &module() const { return m_; }

  /// `If` and `Loop` (ControlFlow.cpp): they import their sub-graphs.
  bool convertIf(class Conv &c, std::vector<ir::Value *> &out);
  bool convertLoop(class Conv &c, std::vector<ir::Value *> &out);
  bool convertScan(class Conv &c, std::vector<ir::Value *> &out);
  /// LSTM, GRU and RNN as counted loops (Recurrent.cpp).
  bool convertRecurrent(class Conv &c, std::vector<ir::Value *> &out);
  /// Continues only where `ok` (a scalar bool) holds: a branch to a block
  /// holding `unreachable`, a located run-time error (Importer.cpp).
  bool guard(ir::Value *ok);
  /// Sequence and optional ops (Sequences.cpp), by the node's op type.
  bool convertSequenceOp(class Conv &c, std::vector<ir::Value *> &out);
  /// Whether the import failed on a sequence whose element type it had to
  /// guess, and learned it (seqHints): importing again from the start helps.
  bool wantsRetry() const { return retry_; }

private:
  bool readExternal(const onnx::TensorProto &t, size_t want, std::vector<uint8_t> &out, std::string &error);
  bool valueType(const onnx::ValueInfoProto &vi, ir::Type &t, std::vector<std::string> &params, std::string &error);
  // Sequences and optionals as ADTs (Sequences.cpp).
  bool sequenceType(const onnx::TypeProto &tp, const std::string &origin, ir::Type &t, std::string &error);
  ir::Type seqType(DType dt, int64_t rank);
  ir::Type optType(ir::Type elem);
  ir::Type seqElem(ir::Type seq) const;
  bool isSeq(ir::Type t) const;
  bool isOpt(ir::Type t) const;
  ir::Value *construct(ir::Type adt, const std::string &ctor, const std::vector<ir::Value *> &fields);
  ir::Function *seqHelper(const std::string &what, ir::Type seq);
  void buildSeqHelper(ir::Function *f, const std::string &what, ir::Type seq);
  /// Learns that the weak sequence `v` holds `dt` tensors of rank `rank`
  /// (asks for a retry); false when `v` is not weak.
  bool learnSeq(ir::Value *v, DType dt, int64_t rank);
  void inheritWeak(ir::Value *from, ir::Value *to);
  bool sequenceMap(class Conv &c, std::vector<ir::Value *> &out);
  bool addInitializers(const onnx::GraphProto &g, std::string &error);
  bool importNodes(const onnx::GraphProto &g, std::string &error);
  bool graphOutputs(const onnx::GraphProto &g, std::vector<ir::Value *> &out, std::string &error);
  /// A sub-graph's nodes in a scope of their own; its outputs in `out`.
  bool importSubgraph(const onnx::GraphProto &g, std::vector<ir::Value *> &out, std::string &error);
  void checkDimParams(const std::vector<std::tuple<std::string, ir::Value *, int64_t, int>> &uses);
  std::string valueName(const std::string &onnxName);
  std::string symbolName(const std::string &onnxName);
  ir::Value *lookup(const std::string &name) const;
  void bind(const std::string &name, ir::Value *v);
  ir::Location nodeLoc() const;
  ir::Block *newBlock(const std::string &label);
  // Scan outputs of Loop and Scan (ControlFlow.cpp).
  ir::Type scanAccType(ir::Type v);
  ir::Value *scanInit(class Conv &c, ir::Type v);
  ir::Value *appendScan(class Conv &c, ir::Value *acc, ir::Value *v, ir::Value *isFirst, bool prepend);

  ir::Module &m_;
  ir::Context &ctx_;
  const ImportOptions &opts_;
  int opset_;
  ir::Function *fn_ = nullptr;
  ir::Block *block_ = nullptr;
  ir::Operation *lastConstant_ = nullptr;
  std::vector<std::unordered_map<std::string, ir::Value *>> scopes_;
  std::map<const ir::Global *, DenseValue> externalData_;
  std::unordered_map<std::string, ir::Value *> constants_;
  /// Conv::parts of the 1-D integer values made from shapes.
  std::unordered_map<const ir::Value *, std::vector<std::pair<int64_t, ir::Value *>>> parts_;
  uint32_t nodeNumber_ = 0;
  unsigned blockCount_ = 0;
  SeqHints &seqHints_;
  /// Sequences whose element type was a guess, by the ONNX name they come from.
  std::unordered_map<const ir::Value *, std::string> weakSeqs_;
  bool retry_ = false;
};

} // namespace nimble::onnx_import

#endif // NIMBLE_FRONTEND_ONNX_GRAPH_H
