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
// accumulators carried like the other values (appendScan), and Scan is the
// same loop over its inputs' scan axis.
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

/// A scan output's accumulator: the per-iteration values stacked on a new
/// axis 0 (`?`, the iteration count), their static sizes kept.
Type GraphImporter::scanAccType(Type v) {
  std::vector<int64_t> d = {kDynamic};
  d.insert(d.end(), v.dims().begin(), v.dims().end());
  return ctx_.tensor(v.dtype(), d);
}

/// Its value before the first iteration (and after none): a tensor of 0
/// rows, its other sizes the value's static ones (0 where `?`).
Value *GraphImporter::scanInit(Conv &c, Type v) {
  DenseValue d;
  d.dtype = v.dtype();
  d.shape = {0};
  for (int64_t k : v.dims()) d.shape.push_back(k == kDynamic ? 0 : k);
  return c.constant(std::move(d));
}

/// Appends `v` to the accumulator `acc` (prepends it when `prepend`): on
/// the first iteration the accumulator becomes `v` alone, since the initial
/// one's `?` sizes are 0 and would not concatenate. Leaves block_ at the
/// merge block, whose argument it returns.
Value *GraphImporter::appendScan(Conv &c, Value *acc, Value *v, Value *isFirst, bool prepend) {
  Value *row = c.op(OpCode::ExpandDims, {v}, {{"axis", Attr::getInt(0)}});
  if (!row) return nullptr;
  Block *fresh = newBlock("scan_first"), *more = newBlock("scan_append"), *merge = newBlock("scan_next");
  Value *r = merge->addArgument(acc->type(), nodeLoc());
  terminate(OpCode::CondBr, {isFirst}, {Successor{fresh, 1, 0, "", {}}, Successor{more, 1, 0, "", {}}});
  block_ = fresh;
  terminate(OpCode::Br, {row}, {Successor{merge, 0, 1, "", {}}});
  block_ = more;
  Value *cat = c.op(OpCode::Concat, prepend ? std::vector<Value *>{row, acc} : std::vector<Value *>{acc, row},
                    {{"axis", Attr::getInt(0)}});
  if (!cat) return nullptr;
  terminate(OpCode::Br, {cat}, {Successor{merge, 0, 1, "", {}}});
  block_ = merge;
  return r;
}

bool GraphImporter::convertLoop(Conv &c, std::vector<Value *> &out) {
  const onnx::GraphProto *body = graphAttr(c, "body");
  if (!body) return c.fail("has no body");
  size_t carried = c.in.size() >= 2 ? c.in.size() - 2 : 0;
  if (body->input_size() != static_cast<int>(carried + 2))
    return c.fail("the body takes " + std::to_string(body->input_size()) + " inputs; the node passes " +
                  std::to_string(carried) + " loop-carried values (the body needs 2 more: iteration, condition)");
  if (body->output_size() < static_cast<int>(carried + 1))
    return c.fail("the body has " + std::to_string(body->output_size()) + " outputs; the node needs " +
                  std::to_string(carried + 1) + " (the condition and the loop-carried values)");
  size_t scans = static_cast<size_t>(body->output_size()) - carried - 1;
  Value *maxTrip = c.input(0) ? toScalar(c, c.input(0)) : nullptr;
  Value *cond = c.input(1) ? toScalar(c, c.input(1)) : c.scalar(DType::I1, 1);
  if ((c.input(0) && !maxTrip) || !cond) return false;
  if (maxTrip && maxTrip->type().dtype() != DType::I64) return c.fail("the trip count is not int64");
  if (cond->type().dtype() != DType::I1) return c.fail("the condition is not bool");
  Value *zero = c.scalar(DType::I64, 0), *one = c.scalar(DType::I64, 1);
  Block *pre = block_, *head = newBlock("loop"), *bodyB = newBlock("loop_body"), *exit = newBlock("loop_exit");
  std::vector<Value *> init = {zero, cond};
  for (size_t k = 0; k < carried; ++k) init.push_back(c.in[2 + k]);
  for (Value *v : init)
    if (!v) return c.fail("a loop-carried value is omitted");
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
  for (size_t k = 1; k <= carried; ++k) {
    if (!outs[k]->type().isSubtypeOf(args[k + 1]->type()))
      return c.fail("loop-carried value " + std::to_string(k - 1) + " is " + args[k + 1]->type().str() +
                    " on entry and " + outs[k]->type().str() + " after an iteration");
    back.push_back(outs[k]);
  }
  // Scan outputs: each iteration's value stacked on a new axis 0, in an
  // accumulator carried like the other values.
  std::vector<Value *> headArgs(args.begin() + 2, args.end());
  Value *isFirst = scans ? c.op(OpCode::Equal, {args[0], zero}) : nullptr;
  for (size_t j = 0; j < scans; ++j) {
    Value *v = outs[1 + carried + j];
    if (!v->type().isTensor()) return c.fail("scan output " + std::to_string(j) + " is not a tensor");
    Value *acc = head->addArgument(scanAccType(v->type()), nodeLoc());
    headArgs.push_back(acc);
    init.push_back(scanInit(c, v->type()));
    Value *grown = appendScan(c, acc, v, isFirst, false);
    if (!grown) return false;
    back.push_back(grown);
  }
  terminate(OpCode::Br, back, {Successor{head, 0, static_cast<unsigned>(back.size()), "", {}}});
  block_ = head;
  terminate(OpCode::CondBr, [&] {
    std::vector<Value *> ops = {go};
    ops.insert(ops.end(), headArgs.begin(), headArgs.end());
    return ops;
  }(), {Successor{bodyB, 1, 0, "", {}}, Successor{exit, 1, static_cast<unsigned>(headArgs.size()), "", {}}});
  for (Value *v : headArgs) {
    out.push_back(exit->addArgument(v->type(), nodeLoc()));
    inheritWeak(v, out.back());
  }
  block_ = pre;
  terminate(OpCode::Br, init, {Successor{head, 0, static_cast<unsigned>(init.size()), "", {}}});
  block_ = exit;
  out.resize(c.numOutputs(), nullptr);
  return true;
}

/// Scan (opset 9 on; opset 8's batch axis of size 1 is squeezed away and put
/// back): a loop over the scan inputs' axis, each iteration's elements the
/// `dynamic_slice` at the step (from the end for a reverse direction); the
/// state values carried, the scan outputs stacked as Loop's are (reversed:
/// prepended) and moved to their axis.
bool GraphImporter::convertScan(Conv &c, std::vector<Value *> &out) {
  const onnx::GraphProto *body = graphAttr(c, "body");
  if (!body) return c.fail("has no body");
  int64_t m = c.attrInt("num_scan_inputs", 0);
  bool batched = c.opset < 9;
  std::vector<Value *> in(c.in.begin() + (batched ? 1 : 0), c.in.end());
  if (batched && c.input(0)) return c.fail("sequence_lens is not supported");
  if (m < 1 || m > static_cast<int64_t>(in.size())) return c.fail("num_scan_inputs is out of range");
  size_t states = in.size() - static_cast<size_t>(m), scans = static_cast<size_t>(body->output_size()) - states;
  if (body->input_size() != static_cast<int>(in.size()) || body->output_size() < static_cast<int>(states))
    return c.fail("the body's inputs and outputs do not match the node's");
  for (Value *&v : in) {
    if (!v || !v->type().isTensor()) return c.fail("an input is omitted or not a tensor");
    if (batched) {
      if (v->type().rank() < 1 || v->type().dims()[0] != 1)
        return c.fail("opset 8's batch axis must be 1 (opset 9's Scan has none)");
      if (!(v = c.op(OpCode::Squeeze, {v}, {{"axes", Attr::getInts({0})}}))) return false;
    }
  }
  auto listAttr = [&](const char *name, size_t n) {
    std::vector<int64_t> v = c.attrInts(name).value_or(std::vector<int64_t>{});
    v.resize(n, 0);
    return v;
  };
  std::vector<int64_t> inAxes = listAttr("scan_input_axes", static_cast<size_t>(m)),
                       inDirs = listAttr(batched ? "directions" : "scan_input_directions", static_cast<size_t>(m)),
                       outAxes = listAttr("scan_output_axes", scans),
                       outDirs = listAttr("scan_output_directions", scans);
  for (size_t j = 0; j < static_cast<size_t>(m); ++j) {
    int64_t r = in[states + j]->type().rank();
    if (inAxes[j] < 0) inAxes[j] += r;
    if (inAxes[j] < 0 || inAxes[j] >= r) return c.fail("a scan input axis is out of range");
  }
  Value *zero = c.scalar(DType::I64, 0), *one = c.scalar(DType::I64, 1);
  Value *n = c.op(OpCode::Dim, {in[states]}, {{"axis", Attr::getInt(inAxes[0])}});
  Value *last = n ? c.op(OpCode::Sub, {n, one}) : nullptr;
  if (!last) return false;
  Block *pre = block_, *head = newBlock("scan"), *bodyB = newBlock("scan_body"), *exit = newBlock("scan_exit");
  Value *i = head->addArgument(ctx_.tensor(DType::I64, {}), nodeLoc());
  std::vector<Value *> init = {zero}, headArgs;
  for (size_t k = 0; k < states; ++k) {
    Type t = in[k]->type();
    headArgs.push_back(head->addArgument(ctx_.tensor(t.dtype(), std::vector<int64_t>(t.dims().size(), kDynamic)),
                                         nodeLoc()));
    init.push_back(in[k]);
  }
  block_ = head;
  Value *go = c.op(OpCode::Less, {i, n});
  if (!go) return false;
  block_ = bodyB;
  Value *back_i = c.op(OpCode::Sub, {last, i});
  scopes_.emplace_back();
  for (size_t k = 0; k < in.size(); ++k) {
    Value *v = k < states ? headArgs[k] : nullptr;
    if (k >= states) {
      size_t j = k - states;
      Value *at = inDirs[j] ? back_i : i;
      v = c.op(OpCode::Squeeze, {c.op(OpCode::DynamicSlice, {in[k], at}, {{"axis", Attr::getInt(inAxes[j])}, {"size", Attr::getInt(1)}})},
               {{"axes", Attr::getInts({inAxes[j]})}});
      if (!v) return false;
    }
    scopes_.back()[body->input(static_cast<int>(k)).name()] = v;
  }
  std::vector<Value *> outs;
  std::string error;
  bool ok = importSubgraph(*body, outs, error);
  scopes_.pop_back();
  if (!ok) return c.fail("body: " + error);
  Value *next = c.op(OpCode::Add, {i, one});
  if (!next) return false;
  std::vector<Value *> back = {next};
  for (size_t k = 0; k < states; ++k) {
    if (!outs[k]->type().isSubtypeOf(headArgs[k]->type()))
      return c.fail("state " + std::to_string(k) + " is " + headArgs[k]->type().str() + " on entry and " +
                    outs[k]->type().str() + " after an iteration");
    back.push_back(outs[k]);
  }
  Value *isFirst = scans ? c.op(OpCode::Equal, {i, zero}) : nullptr;
  for (size_t j = 0; j < scans; ++j) {
    Value *v = outs[states + j];
    if (!v->type().isTensor()) return c.fail("scan output " + std::to_string(j) + " is not a tensor");
    Value *acc = head->addArgument(scanAccType(v->type()), nodeLoc());
    headArgs.push_back(acc);
    init.push_back(scanInit(c, v->type()));
    Value *grown = appendScan(c, acc, v, isFirst, outDirs[j] != 0);
    if (!grown) return false;
    back.push_back(grown);
  }
  terminate(OpCode::Br, back, {Successor{head, 0, static_cast<unsigned>(back.size()), "", {}}});
  block_ = head;
  std::vector<Value *> condOps = {go};
  condOps.insert(condOps.end(), headArgs.begin(), headArgs.end());
  terminate(OpCode::CondBr, condOps,
            {Successor{bodyB, 1, 0, "", {}}, Successor{exit, 1, static_cast<unsigned>(headArgs.size()), "", {}}});
  std::vector<Value *> results;
  for (Value *v : headArgs) results.push_back(exit->addArgument(v->type(), nodeLoc()));
  block_ = pre;
  terminate(OpCode::Br, init, {Successor{head, 0, static_cast<unsigned>(init.size()), "", {}}});
  block_ = exit;
  for (size_t k = 0; k < results.size(); ++k) {
    Value *v = results[k];
    if (k >= states) { // the stacked axis 0 moved to the output's axis
      int64_t r = v->type().rank(), a = outAxes[k - states];
      if (a < 0) a += r;
      if (a < 0 || a >= r) return c.fail("a scan output axis is out of range");
      if (a != 0) {
        std::vector<int64_t> perm;
        for (int64_t d = 1; d < r; ++d) perm.push_back(d);
        perm.insert(perm.begin() + a, 0);
        if (!(v = c.op(OpCode::Transpose, {v}, {{"perm", Attr::getInts(perm)}}))) return false;
      }
    }
    if (batched && !(v = c.op(OpCode::ExpandDims, {v}, {{"axis", Attr::getInt(0)}}))) return false;
    out.push_back(v);
  }
  out.resize(c.numOutputs(), nullptr);
  return true;
}

} // namespace nimble::onnx_import
