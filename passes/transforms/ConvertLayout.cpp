//===- ConvertLayout.cpp - CNN activations channels-last ------------------===//
//
// TVM's ConvertLayout and IREE's data-layout propagation, for the one layout
// change that pays on the CPU: a convolution chain's activations kept
// channels-last (N x D.. x C, NHWC) from the first conv to where an op that
// needs NCHW reads them, instead of NCHW with oneDNN reordering src into its
// blocked layout and dst out of it around every call (LibraryConv.h,
// "Layouts"). oneDNN's direct kernels (brgconv, jit) read and write plain
// nhwc memory as it is, so with this pass a conv runs with no reorder.
//
// The ops that change, in block order (each an in-place rewrite: the op
// keeps its name and location, its result type is permuted):
//
//   conv (rank 3 to 5, float)   -> channels_last=true; its input, when not
//                                  already channels-last, through one
//                                  `transpose perm=[0, 2, .., 1]` (shared by
//                                  every conv reading the same value)
//   max_pool, avg_pool of a     -> channels_last=true
//   channels-last value
//   elementwise ops (unary, the -> the same op on the permuted operands:
//   broadcasting binaries and     a channels-last operand as it is, another
//   comparisons, select, cast)    operand of the full rank transposed, of a
//   with a channels-last operand  lower static rank reshaped to the full
//   of the result's rank          rank and transposed (a per-channel
//                                 C x 1 x 1 becomes 1 x 1 x C; constants
//                                 fold in canonicalize), all-ones as is
//   mean over every spatial axis -> axes 1..R-2 (a global average pool:
//   of a channels-last value       with keepdims its N x 1.. x C result is
//                                  in the region, without it N x C is the
//                                  same in both layouts), so the pooled
//                                  tensor is never transposed, only the
//                                  N x C means when keepdims kept 1s
//
// Every other use of a channels-last value (a reshape, another reduction, a
// concat, the function's result, ...) reads it through one `transpose
// perm=[0, R-1, 1, .., R-2]` back to NCHW, placed after its definition.
// So a ResNet has one transpose at its input (3 channels) and one of the
// N x C means after its global pooling: transposes only appear at the
// borders of the region, and
// none it inserts is adjacent to its inverse. A model already NHWC (its
// exporter's transposes around each conv) gets inserted transposes that
// compose with its own to the identity: the canonicalize after the pass
// removes both (test/passes/convert-layout.nir, @nhwc_input).
//
// Why exact: a transpose and a reshape move elements without arithmetic, an
// elementwise op computes each element alone, the channels_last forms of
// conv and the pools (vm/kernels/Conv.cpp) sum the same products in the
// same order as their NCHW forms, and so does `mean` (vm/kernels/Reduce.cpp:
// each mean one sum over its positions in row-major order). The reference kernels therefore give the
// same bits with and without this pass, which runs at -O2 only (it changes
// only the speed). oneDNN may pick another kernel for nhwc than for its
// blocked layout, with other f32 rounding, as it already may from one
// shape to the next.
//
//===----------------------------------------------------------------------===//

#include "ir/Builder.h"
#include "passes/Pass.h"
#include "passes/PatternUtils.h"
#include "passes/Statistic.h"

#include <algorithm>
#include <cassert>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

NIMBLE_STATISTIC(NumConvs, "convert-layout", "Number of convolutions made channels-last");
NIMBLE_STATISTIC(NumOthers, "convert-layout", "Number of pools and elementwise ops made channels-last");
NIMBLE_STATISTIC(NumTransposes, "convert-layout", "Number of transposes inserted at the region's borders");

/// The perm taking NCHW to NHWC at rank r, and its inverse.
std::vector<int64_t> toLast(int64_t r) {
  std::vector<int64_t> p = {0};
  for (int64_t i = 2; i < r; ++i) p.push_back(i);
  p.push_back(1);
  return p;
}

std::vector<int64_t> toFirst(int64_t r) {
  std::vector<int64_t> p = {0, r - 1};
  for (int64_t i = 1; i < r - 1; ++i) p.push_back(i);
  return p;
}

bool windowOp(const Operation *op) {
  if (!op->is(OpCode::Conv) && !op->is(OpCode::MaxPool) && !op->is(OpCode::AvgPool)) return false;
  if (op->numResults() != 1 || op->boolAttr("channels_last")) return false;
  Type x = op->operand(0)->type(), y = op->result(0)->type();
  return x.isTensor() && y.isTensor() && x.rank() >= 3 && x.rank() <= 5 && y.rank() == x.rank();
}

/// `mean` over every spatial axis (a global average pool; ONNX's
/// GlobalAveragePool imports as `mean axes=[2, 3]`) of a rank-3..5 value:
/// over a channels-last operand it reduces axes 1..R-2 instead, so the
/// pooled activations need no transpose back to NCHW first.
bool spatialMean(const Operation *op) {
  if (!op->is(OpCode::Mean) || op->numResults() != 1) return false;
  Type x = op->operand(0)->type();
  if (!x.isTensor() || x.rank() < 3 || x.rank() > 5) return false;
  const int64_t r = x.rank();
  std::vector<int64_t> axes = op->attr("axes").getInts();
  for (int64_t &a : axes)
    if (a < 0) a += r;
  std::sort(axes.begin(), axes.end());
  std::vector<int64_t> spatial;
  for (int64_t a = 2; a < r; ++a) spatial.push_back(a);
  return axes == spatial;
}

/// Elementwise: each result element from the operands' elements at the same
/// position, whatever the layout (no axis attribute).
bool elementwise(const Operation *op) {
  if (op->numResults() != 1 || !op->result(0)->type().isTensor()) return false;
  switch (op->info().relation) {
  case Relation::Unary: case Relation::Broadcast: case Relation::Compare: case Relation::Select:
    return op->attrs().empty();
  case Relation::Cast: return true;
  default: return false;
  }
}

bool allOnes(Type t) {
  return std::all_of(t.dims().begin(), t.dims().end(), [](int64_t d) { return d == 1; });
}

class Converter {
public:
  Converter(Module &m, Block *b) : m_(m), block_(b) {}

  bool run() {
    // Which ops change, in order: their operands are decided before them.
    std::vector<Operation *> order;
    for (Operation *op = block_->front(); op; op = op->nextOp()) {
      if (windowOp(op)) {
        if (op->is(OpCode::Conv) ? isFloat(op->result(0)->type().dtype()) : inRegion(op->operand(0))) {
          region_.insert(op);
          order.push_back(op);
        }
        continue;
      }
      if (spatialMean(op) && inRegion(op->operand(0))) {
        // keepdims: N x 1.. x C, a member of the region (its readers get
        // the usual transpose back, of N x C elements); otherwise N x C in
        // either layout, only the axes change.
        if (op->boolAttr("keepdims")) {
          region_.insert(op);
          order.push_back(op);
        } else {
          setSpatialAxes(op);
          readers_.insert(op);
        }
        continue;
      }
      if (elementwise(op) && joins(op)) {
        region_.insert(op);
        order.push_back(op);
      }
    }
    if (order.empty()) return false;
    for (Operation *op : order) rewrite(op);
    // The uses outside the region read NCHW again.
    for (Operation *op : order) restoreOutside(op->result(0));
    return true;
  }

private:
  bool inRegion(const Value *v) const {
    Operation *d = v->definingOp();
    return d && region_.count(d);
  }

  /// An elementwise op joins when one operand is channels-last at the
  /// result's rank and every other can be permuted to match.
  bool joins(const Operation *op) const {
    const int64_t r = op->result(0)->type().rank();
    bool any = false;
    for (Value *v : op->operandValues()) {
      if (!v->type().isTensor()) return false;
      if (inRegion(v)) {
        if (v->type().rank() != r) return false;
        any = true;
        continue;
      }
      Type t = v->type();
      if (t.rank() > r) return false;
      if (t.rank() < r && !allOnes(t) && !t.hasStaticShape()) return false;
    }
    return any;
  }

  /// A spatial mean over its channels-last operand: axes 1..R-2.
  void setSpatialAxes(Operation *op) {
    std::vector<int64_t> axes;
    for (int64_t a = 1; a + 1 < op->operand(0)->type().rank(); ++a) axes.push_back(a);
    op->setAttr("axes", Attr::getInts(axes));
    ++NumOthers;
  }

  Value *make(Operation *before, OpCode code, Value *x, std::vector<std::pair<std::string, Attr>> attrs) {
    Builder b(m_, before->loc());
    b.setInsertionPoint(before);
    Operation *op = b.create(code, {x}, std::move(attrs));
    return op ? op->result(0) : nullptr;
  }

  /// `v` (not in the region) as the region's ops read it at rank r, made
  /// before `user` (and kept for later users in this block).
  Value *permuted(Value *v, int64_t r, Operation *user) {
    Type t = v->type();
    if (t.rank() < r && allOnes(t)) return v; // broadcasts the same either way
    if (t.rank() == r && allOnes(t)) return v;
    auto it = permuted_.find(v);
    if (it != permuted_.end() && it->second.first == r) return it->second.second;
    Value *x = v;
    if (t.rank() < r) {
      std::vector<int64_t> shape(static_cast<size_t>(r - t.rank()), 1);
      shape.insert(shape.end(), t.dims().begin(), t.dims().end());
      x = make(user, OpCode::Reshape, x, {{"shape", Attr::getInts(shape)}});
    }
    if (x) x = make(user, OpCode::Transpose, x, {{"perm", Attr::getInts(toLast(r))}});
    // A transpose always infers, and the reshape keeps a static shape's
    // elements (joins() checked): a failure is a bug here.
    assert(x && "convert-layout: a border transpose did not infer");
    ++NumTransposes;
    permuted_[v] = {r, x};
    return x;
  }

  void rewrite(Operation *op) {
    const int64_t r = op->result(0)->type().rank();
    for (unsigned i = 0; i < op->numOperands(); ++i) {
      Value *v = op->operand(i);
      // conv's weights and bias keep their layout.
      if (op->is(OpCode::Conv) && i > 0) continue;
      if (!inRegion(v)) op->setOperand(i, permuted(v, r, op));
    }
    if (op->is(OpCode::Conv) || op->is(OpCode::MaxPool) || op->is(OpCode::AvgPool)) {
      op->setAttr("channels_last", Attr::getBool(true));
      ++(op->is(OpCode::Conv) ? NumConvs : NumOthers);
    } else if (op->is(OpCode::Mean)) {
      setSpatialAxes(op);
    } else {
      ++NumOthers;
    }
    Type t = op->result(0)->type();
    std::vector<int64_t> dims;
    for (int64_t a : toLast(r)) dims.push_back(t.dims()[static_cast<size_t>(a)]);
    op->result(0)->setType(m_.context().tensor(t.dtype(), dims));
  }

  void restoreOutside(Value *v) {
    std::vector<std::pair<Operation *, unsigned>> outside;
    for (OpOperand &u : v->uses())
      if (!region_.count(u.owner()) && !readers_.count(u.owner())) outside.push_back({u.owner(), u.index()});
    if (outside.empty()) return;
    Value *back = make(v->definingOp()->nextOp(), OpCode::Transpose, v,
                       {{"perm", Attr::getInts(toFirst(v->type().rank()))}});
    assert(back && "convert-layout: a border transpose did not infer");
    ++NumTransposes;
    for (auto [user, i] : outside) user->setOperand(i, back);
  }

  Module &m_;
  Block *block_;
  std::unordered_set<const Operation *> region_;
  // Ops outside the region that read a channels-last operand as it is (a
  // spatial mean without keepdims: its N x C result is the same in both).
  std::unordered_set<const Operation *> readers_;
  std::unordered_map<Value *, std::pair<int64_t, Value *>> permuted_;
};

class ConvertLayoutPass : public Pass {
public:
  std::string_view name() const override { return "convert-layout"; }
  LogicalResult run(Module &m, DiagnosticEngine &, bool &changed) override {
    for (auto &f : m.functions())
      for (Block *blk : f->reversePostOrder())
        if (Converter(m, blk).run()) changed = true;
    return success();
  }
};

} // namespace

std::unique_ptr<Pass> createConvertLayoutPass() { return std::make_unique<ConvertLayoutPass>(); }

} // namespace nimble::passes
