//===- ControlFlow.cpp - ONNX If and Loop as blocks and block arguments ----===//
//
// Nimble's IR has no nested regions (LangRef: "the shape of LLVM IR, of MLIR
// without nested regions"), so a sub-graph becomes blocks of @main:
//
//   If:    cond_br %c, ^then, ^else; each branch's nodes, then
//          br ^merge(outputs...); ^merge's arguments are the If's outputs,
//          typed as the join of the branches' types (`?` where they differ).
//   Loop:  br ^head(0, cond, v_initial...); ^head(%i, %c, %v...) tests
//          `i < M and c` and branches to ^body or ^exit; the body binds its
//          inputs to %i, %c, %v..., and branches back with i + 1 and its
//          outputs. The carried values' block arguments keep their dtype and
//          rank with every dimension `?` (an iteration may change a size).
//
// A sub-graph reads the values of its parents by name (ONNX's scoping): its
// blocks are dominated by the block of the If or Loop, so the SSA use is
// valid as it is. Loop's scan outputs (values stacked over iterations) are
// not supported yet.
//
//===----------------------------------------------------------------------===//

#include "frontend/onnx/Convert.h"
#include "frontend/onnx/Graph.h"

namespace nimble::onnx_import {

using namespace ir;

bool GraphImporter::importSubgraph(const onnx::GraphProto &g, std::vector<Value *> &out, std::string &error) {
  scopes_.emplace_back();
  bool ok = addInitializers(g, error) && importNodes(g, error) && graphOutputs(g, out, error);
  scopes_.pop_back();
  return ok;
}

namespace {

/// A scalar `tensor<i1>` / `tensor<i64>` from an ONNX scalar or 1-element tensor.
Value *toScalar(Conv &c, Value *v) {
  if (v->type().rank() == 0) return v;
  return c.op(OpCode::Reshape, {v}, {{"shape", Attr::getInts({})}});
}

Type joinTypes(Context &ctx, Type a, Type b) {
  if (a == b) return a;
  if (!a.isTensor() || !b.isTensor() || a.dtype() != b.dtype() || a.rank() != b.rank()) return Type();
  std::vector<int64_t> d = a.dims();
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] != b.dims()[i]) d[i] = kDynamic;
  return ctx.tensor(a.dtype(), d);
}

const onnx::GraphProto *graphAttr(Conv &c, const char *name) {
  const onnx::AttributeProto *a = c.attr(name);
  return a && a->has_g() ? &a->g() : nullptr;
}

} // namespace

bool GraphImporter::convertIf(Conv &c, std::vector<Value *> &out) {
  const onnx::GraphProto *thenG = graphAttr(c, "then_branch"), *elseG = graphAttr(c, "else_branch");
  if (!c.input(0) || !thenG || !elseG) return c.fail("needs a condition and both branches");
  Value *cond = toScalar(c, c.input(0));
  if (!cond) return false;
  if (cond->type().dtype() != DType::I1) return c.fail("the condition is not bool");
  Block *thenB = newBlock("then"), *elseB = newBlock("else");
  terminate(OpCode::CondBr, {cond}, {Successor{thenB, 1, 0, "", {}}, Successor{elseB, 1, 0, "", {}}});
  std::vector<Value *> outs[2];
  Block *ends[2];
  const onnx::GraphProto *graphs[2] = {thenG, elseG};
  Block *starts[2] = {thenB, elseB};
  for (int k = 0; k < 2; ++k) {
    block_ = starts[k];
    std::string error;
    if (!importSubgraph(*graphs[k], outs[k], error)) return c.fail(std::string(k ? "else" : "then") + " branch: " + error);
    ends[k] = block_;
  }
  if (outs[0].size() != outs[1].size() || outs[0].size() != c.numOutputs())
    return c.fail("the branches have " + std::to_string(outs[0].size()) + " and " + std::to_string(outs[1].size()) +
                  " outputs; the node has " + std::to_string(c.numOutputs()));
  Block *merge = newBlock("endif");
  for (size_t i = 0; i < outs[0].size(); ++i) {
    Type t = joinTypes(ctx_, outs[0][i]->type(), outs[1][i]->type());
    if (!t)
      return c.fail("output " + std::to_string(i) + " is " + outs[0][i]->type().str() + " in one branch and " +
                    outs[1][i]->type().str() + " in the other (Nimble needs one element type and rank)");
    out.push_back(merge->addArgument(t, nodeLoc()));
  }
  for (int k = 0; k < 2; ++k) {
    block_ = ends[k];
    terminate(OpCode::Br, outs[k], {Successor{merge, 0, static_cast<unsigned>(outs[k].size()), "", {}}});
  }
  block_ = merge;
  return true;
}

bool GraphImporter::convertLoop(Conv &c, std::vector<Value *> &out) {
  const onnx::GraphProto *body = graphAttr(c, "body");
  if (!body) return c.fail("has no body");
  size_t carried = c.in.size() >= 2 ? c.in.size() - 2 : 0;
  if (body->input_size() != static_cast<int>(carried + 2))
    return c.fail("the body takes " + std::to_string(body->input_size()) + " inputs; the node passes " +
                  std::to_string(carried) + " loop-carried values (the body needs 2 more: iteration, condition)");
  if (body->output_size() != static_cast<int>(carried + 1))
    return c.fail("scan outputs (body outputs after the loop-carried ones) are not supported yet");
  Value *maxTrip = c.input(0) ? toScalar(c, c.input(0)) : nullptr;
  Value *cond = c.input(1) ? toScalar(c, c.input(1)) : c.scalar(DType::I1, 1);
  if ((c.input(0) && !maxTrip) || !cond) return false;
  if (maxTrip && maxTrip->type().dtype() != DType::I64) return c.fail("the trip count is not int64");
  if (cond->type().dtype() != DType::I1) return c.fail("the condition is not bool");
  Value *zero = c.scalar(DType::I64, 0), *one = c.scalar(DType::I64, 1);
  Block *head = newBlock("loop"), *bodyB = newBlock("loop_body"), *exit = newBlock("loop_exit");
  std::vector<Value *> init = {zero, cond};
  for (size_t k = 0; k < carried; ++k) init.push_back(c.in[2 + k]);
  for (Value *v : init)
    if (!v) return c.fail("a loop-carried value is omitted");
  terminate(OpCode::Br, init, {Successor{head, 0, static_cast<unsigned>(init.size()), "", {}}});
  std::vector<Value *> args;
  for (size_t k = 0; k < init.size(); ++k) {
    Type t = init[k]->type();
    if (k >= 2 && t.isTensor()) t = ctx_.tensor(t.dtype(), std::vector<int64_t>(static_cast<size_t>(t.rank()), kDynamic));
    args.push_back(head->addArgument(t, nodeLoc()));
    inheritWeak(init[k], args.back());
  }
  block_ = head;
  Value *go = args[1];
  if (maxTrip) {
    Value *below = c.op(OpCode::Less, {args[0], maxTrip});
    if (!below || !(go = c.op(OpCode::LogicalAnd, {below, args[1]}))) return false;
  }
  std::vector<Value *> headArgs(args.begin() + 2, args.end());
  terminate(OpCode::CondBr, [&] {
    std::vector<Value *> ops = {go};
    ops.insert(ops.end(), headArgs.begin(), headArgs.end());
    return ops;
  }(), {Successor{bodyB, 1, 0, "", {}}, Successor{exit, 1, static_cast<unsigned>(headArgs.size()), "", {}}});
  for (Value *v : headArgs) {
    out.push_back(exit->addArgument(v->type(), nodeLoc()));
    inheritWeak(v, out.back());
  }

  block_ = bodyB;
  scopes_.emplace_back();
  for (int k = 0; k < body->input_size(); ++k) scopes_.back()[body->input(k).name()] = args[static_cast<size_t>(k)];
  std::vector<Value *> outs;
  std::string error;
  bool ok = importSubgraph(*body, outs, error);
  scopes_.pop_back();
  if (!ok) return c.fail("body: " + error);
  Value *next = c.op(OpCode::Add, {args[0], one});
  Value *bodyCond = outs.empty() ? nullptr : toScalar(c, outs[0]);
  if (!next || !bodyCond) return false;
  if (bodyCond->type().dtype() != DType::I1) return c.fail("the body's condition output is not bool");
  std::vector<Value *> back = {next, bodyCond};
  for (size_t k = 1; k < outs.size(); ++k) {
    if (!outs[k]->type().isSubtypeOf(args[k + 1]->type()))
      return c.fail("loop-carried value " + std::to_string(k - 1) + " is " + args[k + 1]->type().str() +
                    " on entry and " + outs[k]->type().str() + " after an iteration");
    back.push_back(outs[k]);
  }
  terminate(OpCode::Br, back, {Successor{head, 0, static_cast<unsigned>(back.size()), "", {}}});
  block_ = exit;
  out.resize(c.numOutputs(), nullptr);
  return true;
}

} // namespace nimble::onnx_import
