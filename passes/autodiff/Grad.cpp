//===- Grad.cpp - Reverse-mode automatic differentiation -------------------===//
//
// `grad{func=f,wrt=0,1,consts=all,checkpoint=store}` adds to the module
//
//   @f_grad(params..., seeds...) -> (results..., d param_i for i in wrt..., d const...)
//
// the gradient function of DLVM's gradient declarations (seed 004, §3.1.3,
// "Algorithmic Differentiation through Adjoint Code Generation"): it returns
// f's results and the vector-Jacobian product of the seeds (one per
// floating-point result; 1.0 for a scalar loss) with respect to the chosen
// parameters and const weights. DLVM calls this a "seedable" gradient; the
// seed makes the gradient of a function with several results well defined
// and composes through calls.
//
// @f_grad calls a forward function that records a tape and a backward
// function that consumes it, built for f and every function it calls
// (GradFunction.cpp: control flow, loops, recursion, checkpointing). The
// generated functions are ordinary functions: the default pipeline (inline,
// cse, dce, fuse, memory planning, native kernels) compiles them like any
// other.
//
// Options
//   func=NAME        the function to differentiate (required)
//   wrt=I,J,...      parameter indices (default: every floating-point
//                    tensor parameter); `wrt=none` for consts only
//   consts=none|all|@a,@b  const globals to differentiate (default none; all:
//                    every floating-point const the function can reach)
//   checkpoint=store|recompute   what the tape keeps per executed block
//   name=NAME        the gradient function's name (default f_grad)
//
//===----------------------------------------------------------------------===//

#include "passes/analysis/Analysis.h"
#include "passes/autodiff/GradFunction.h"
#include "passes/autodiff/Gradients.h"
#include "passes/Pass.h"

#include "ir/Builder.h"

#include <algorithm>
#include <set>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

std::vector<std::string> splitList(std::string_view s) {
  std::vector<std::string> out;
  while (true) {
    size_t c = s.find(',');
    out.emplace_back(s.substr(0, c));
    if (c == std::string_view::npos) break;
    s = s.substr(c + 1);
  }
  return out;
}

class GradPass : public Pass {
public:
  std::string_view name() const override { return "grad"; }

  std::string setOption(std::string_view key, std::string_view value) override {
    if (key == "func") {
      func_ = std::string(value);
      if (!func_.empty() && func_[0] == '@') func_.erase(0, 1);
      return func_.empty() ? "option 'func' of 'grad' needs a function name" : "";
    }
    if (key == "name") {
      gradName_ = std::string(value);
      if (!gradName_.empty() && gradName_[0] == '@') gradName_.erase(0, 1);
      return gradName_.empty() ? "option 'name' of 'grad' needs a function name" : "";
    }
    if (key == "wrt") {
      wrtSet_ = true;
      wrt_.clear();
      if (value == "none") return "";
      for (const std::string &item : splitList(value)) {
        int64_t i = -1;
        if (!parseIntOption(item, 0, 1 << 20, i))
          return "option 'wrt' of 'grad' takes parameter indices (wrt=0,2) or 'none', got '" +
                 std::string(value) + "'";
        if (std::find(wrt_.begin(), wrt_.end(), i) == wrt_.end()) wrt_.push_back(static_cast<unsigned>(i));
      }
      return "";
    }
    if (key == "consts") {
      consts_.clear();
      allConsts_ = value == "all";
      if (value == "none" || allConsts_) return "";
      for (std::string item : splitList(value)) {
        if (!item.empty() && item[0] == '@') item.erase(0, 1);
        if (item.empty())
          return "option 'consts' of 'grad' takes 'none', 'all' or const names (consts=@w,@b), got '" +
                 std::string(value) + "'";
        consts_.push_back(item);
      }
      return "";
    }
    if (key == "checkpoint") {
      if (value == "store") mode_ = Checkpoint::Store;
      else if (value == "recompute") mode_ = Checkpoint::Recompute;
      else return "option 'checkpoint' of 'grad' must be 'store' or 'recompute', got '" + std::string(value) + "'";
      return "";
    }
    return Pass::setOption(key, value);
  }

  LogicalResult run(Module &m, DiagnosticEngine &diag, bool &changed) override {
    if (func_.empty()) {
      diag.error({}, "pass 'grad' needs the function to differentiate: grad{func=NAME}");
      return failure();
    }
    Function *f = m.lookupFunction(func_);
    if (!f) {
      diag.error({}, "grad: no function @" + func_ + " in module @" + m.name());
      return failure();
    }
    if (f->blocks().empty() || isPrimitive(*f)) {
      diag.error(f->loc(), "grad: @" + func_ + " has no body to differentiate");
      return failure();
    }
    std::vector<Type> params = f->argTypes();
    AggregateAdjoints types(m, "");
    auto carries = [&](Type t) { return types.carries(t); };
    std::vector<unsigned> wrt = wrt_;
    if (!wrtSet_)
      for (unsigned i = 0; i < params.size(); ++i)
        if (carries(params[i])) wrt.push_back(i);
    for (unsigned i : wrt) {
      if (i >= params.size()) {
        diag.error(f->loc(), "grad: wrt index " + std::to_string(i) + " is out of range: @" + func_ +
                                 " has " + std::to_string(params.size()) + " parameter" +
                                 (params.size() == 1 ? "" : "s"));
        return failure();
      }
      if (!carries(params[i])) {
        BlockArgument *a = f->entry()->argument(i);
        diag.error(a->argLoc(), "grad: cannot differentiate with respect to parameter " +
                                    std::to_string(i) + " (%" + a->name() + ") of type " +
                                    params[i].str() + ": it holds no floating-point tensor");
        return failure();
      }
    }

    // The consts: named ones must be floating-point tensor globals; `all`
    // takes those the function can reach through calls.
    CallGraph cg(m);
    std::vector<Global *> consts;
    if (allConsts_) {
      std::set<const Global *> used;
      std::vector<const Function *> work = {f};
      std::set<const Function *> seen = {f};
      while (!work.empty()) {
        const Function *g = work.back();
        work.pop_back();
        for (auto &b : g->blocks())
          for (Operation &op : *b)
            for (Value *v : op.operands())
              if (auto *gl = dyn_cast<Global>(v)) used.insert(gl);
        for (Function *c : cg.callees(g))
          if (seen.insert(c).second) work.push_back(c);
      }
      for (auto &g : m.globals())
        if (used.count(g.get()) && isDifferentiableType(g->type())) consts.push_back(g.get());
    } else {
      for (const std::string &n : consts_) {
        Global *g = m.lookupGlobal(n);
        if (!g) {
          diag.error(f->loc(), "grad: consts names @" + n + ", which is not a const of module @" + m.name());
          return failure();
        }
        if (!isDifferentiableType(g->type())) {
          diag.error(g->declLoc(), "grad: cannot differentiate with respect to const @" + n +
                                       " of type " + g->type().str() + ": not a floating-point tensor");
          return failure();
        }
        if (std::find(consts.begin(), consts.end(), g) == consts.end()) consts.push_back(g);
      }
    }

    std::string gname = gradName_.empty() ? func_ + "_grad" : gradName_;
    GradBuilder gb(m, diag, gname, consts, mode_);
    // Names: the wrapper, and fwd/bwd/tape of every function f can reach.
    {
      std::vector<std::string> names = gb.aggregates().helperNames();
      names.push_back(gname);
      std::vector<Function *> work = {f};
      std::set<const Function *> seen = {f};
      while (!work.empty()) {
        Function *g = work.back();
        work.pop_back();
        for (std::string &n : gb.namesFor(*g)) names.push_back(n);
        for (Function *c : cg.callees(g))
          if (seen.insert(c).second) work.push_back(c);
      }
      for (const std::string &n : names)
        if (m.lookupFunction(n) || m.lookupAdt(n)) {
          diag.error(f->loc(), "grad: cannot create @" + n + " for @" + func_ +
                                   ": the module already has a symbol of that name (choose "
                                   "another with grad{name=...})");
          return failure();
        }
    }

    // f is differentiated with respect to wrt, and whatever its recursive
    // calls pass it from there (found by the builder over the call graph).
    FuncGrad *fg = gb.declareRoot(f, wrt);
    if (failed(gb.buildAll())) return failure();
    buildWrapper(m, *f, *fg, wrt, consts, gname);
    changed = true;
    return success();
  }

private:
  // @f_grad(params..., seeds...) -> (results..., d wrt..., d consts...)
  static void buildWrapper(Module &m, Function &f, FuncGrad &fg, const std::vector<unsigned> &wrt,
                           const std::vector<Global *> &consts, const std::string &name) {
    Context &ctx = m.context();
    std::vector<Type> params = f.argTypes(), results = f.resultTypes();
    std::vector<Type> inTypes = params, outTypes = results;
    for (unsigned r : fg.seedResults) inTypes.push_back(results[r]);
    for (unsigned i : wrt) outTypes.push_back(params[i]);
    for (Global *g : consts) outTypes.push_back(g->type());
    Function *w = m.addFunction(std::make_unique<Function>(name, ctx.func(inTypes, outTypes), f.loc()));
    Block *entry = w->addBlock(std::make_unique<Block>("entry"));
    entry->setLoc(f.loc());
    std::vector<Value *> args, seeds;
    for (unsigned i = 0; i < params.size(); ++i) {
      BlockArgument *a = entry->addArgument(params[i], f.entry()->argument(i)->argLoc());
      a->setName(f.entry()->argument(i)->name());
      args.push_back(a);
    }
    for (unsigned r : fg.seedResults) {
      BlockArgument *a = entry->addArgument(results[r], f.loc());
      a->setName("seed" + std::to_string(r));
      seeds.push_back(a);
    }
    Builder b(m, f.loc());
    b.setInsertionPointToEnd(entry);
    Operation *fwd = b.create(OpCode::Call, args, {{"callee", Attr::getSym(fg.fwd->name())}},
                              fg.fwd->resultTypes());
    std::vector<Value *> bwdArgs = {fwd->result(static_cast<unsigned>(results.size()))};
    bwdArgs.insert(bwdArgs.end(), seeds.begin(), seeds.end());
    for (Global *g : consts) {
      if (g->type().hasStaticShape()) {
        bwdArgs.push_back(b.splat(g->type(), 0.0));
      } else {
        Value *s = b.create(OpCode::ShapeOf, {g})->result();
        bwdArgs.push_back(b.create(OpCode::Zeros, {s}, {{"dtype", Attr::getDType(g->type().dtype())}})->result());
      }
    }
    Operation *bwd = b.create(OpCode::Call, bwdArgs, {{"callee", Attr::getSym(fg.bwd->name())}},
                              fg.bwd->resultTypes());
    std::vector<Value *> outs;
    for (unsigned i = 0; i < results.size(); ++i) outs.push_back(fwd->result(i));
    for (unsigned i : wrt) {
      unsigned k = static_cast<unsigned>(std::find(fg.adjParams.begin(), fg.adjParams.end(), i) - fg.adjParams.begin());
      Value *d = bwd->result(k);
      d->setName("d." + f.entry()->argument(i)->name());
      outs.push_back(d);
    }
    for (size_t k = 0; k < consts.size(); ++k) {
      Value *d = bwd->result(static_cast<unsigned>(fg.adjParams.size() + k));
      d->setName("d." + consts[k]->name());
      outs.push_back(d);
    }
    b.create(OpCode::Ret, outs, {}, {});
  }

  std::string func_, gradName_;
  std::vector<unsigned> wrt_;
  bool wrtSet_ = false;
  std::vector<std::string> consts_;
  bool allConsts_ = false;
  Checkpoint mode_ = Checkpoint::Store;
};

} // namespace

std::unique_ptr<Pass> createGradPass() { return std::make_unique<GradPass>(); }

} // namespace nimble::passes
