//===- Dispatch.cpp - Graph dispatch: copies per bucket of a dynamic dim ---===//
//
// The Relay VM's "dispatch tree" (seed 003, "Graph Dispatch": `Data ->
// (Any, 3, 224, 224) -> Dispatch Tree -> Resnet_copy0, Resnet_copy1 ...`,
// "only one dispatching operation is required for each inference"). A
// function whose parameter has a `?` dimension gets one copy per bucket of
// that dimension's run-time size, each with the dimension static, so that
// type-infer, fuse and the kernel generator see static shapes there; the
// function itself becomes the dispatcher:
//
//   func @f(%x: tensor<?x300xf32>) -> R {            // the interface, unchanged
//   ^entry:
//     %x.dim = dim %x, axis=0
//     %x.is16 = equal %x.dim, 16
//     cond_br %x.is16, ^b16, ^test64
//   ^b16:
//     %x.16 = reshape %x, shape=[16, 300]            // a view: no copy
//     %r.16 = call @f.16(%x.16)
//     ret %r.16
//   ^test64: ...                                     // the next bucket
//   ^generic:
//     %r = call @f.generic(%x)                       // the symbolic body
//     ret %r
//   }
//
// The original body moves to `@f.generic`, unchanged: every size outside the
// buckets runs it. Calls of `@f` (from other functions, or recursive ones
// from the copies and `@f.generic`) reach the dispatcher, so a recursive
// function dispatches again on the callee's argument. The comparisons are a
// chain of `equal`s in bucket order: a bucket here is one size (the IR has
// no bounded dims, `docs/LangRef.md`), so a range of sizes would leave the
// copy as symbolic as `@f.generic` — and the run-time kernel dispatcher
// already chooses its kernel per shape (`nimble-run --kernels=auto`), which
// is the "bucket-specific kernel choice" a range could have had. A binary
// tree of comparisons would take log2(n) tests instead of up to n; with the
// handful of buckets one gives the difference is a few scalar kernel calls
// per inference.
//
// Which function, parameter and axis: the options `func`, `arg` (default 0),
// `dim` (default 0) and `buckets` (sizes, in the order they are tested), or
// a function attribute `dispatch = [16, 64, 128]` with the parameter and axis
// in `dispatch_dim = [0, 0]` (both optional there: default [0, 0]). Without
// `func` the pass acts on the functions that carry the attribute, and does
// nothing in a module that has none (which is why the -O pipelines can run
// it: a model opts in by its attribute). The dispatcher loses the attributes.
//
// The reshape to the bucket's shape fixes the dispatched axis and keeps the
// others; with a `?` in another axis it writes -1 there, so at most one
// other axis may be `?` (reshape's limit; an error names the parameter).
//
//===----------------------------------------------------------------------===//

#include "ir/Builder.h"
#include "passes/analysis/Analysis.h"
#include "passes/Pass.h"
#include "passes/Statistic.h"

#include <algorithm>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

NIMBLE_STATISTIC(NumDispatchers, "dispatch", "Number of functions turned into a dispatcher over buckets of a `?` dim");
NIMBLE_STATISTIC(NumCopies, "dispatch", "Number of specialised copies made (one per bucket)");

constexpr int64_t kMaxBuckets = 64;

struct Request {
  Function *f = nullptr;
  int64_t arg = 0, dim = 0;
  std::vector<int64_t> buckets;
  Location loc; // for errors: the function
};

class DispatchPass : public Pass {
public:
  std::string_view name() const override { return "dispatch"; }

  std::string setOption(std::string_view key, std::string_view value) override {
    if (key == "func") {
      func_ = std::string(value);
      if (!func_.empty() && func_[0] == '@') func_.erase(0, 1);
      return func_.empty() ? "option 'func' of 'dispatch' needs a function name" : "";
    }
    if (key == "arg" || key == "dim") {
      int64_t v = 0;
      if (!parseIntOption(value, 0, 1 << 20, v))
        return "option '" + std::string(key) + "' of 'dispatch' takes a non-negative integer, got '" +
               std::string(value) + "'";
      (key == "arg" ? arg_ : dim_) = v;
      return "";
    }
    if (key == "buckets") {
      buckets_.clear();
      std::string_view s = value;
      while (true) {
        size_t c = s.find(',');
        int64_t v = 0;
        if (!parseIntOption(s.substr(0, c), 0, int64_t{1} << 40, v))
          return "option 'buckets' of 'dispatch' takes sizes (buckets=16,64,128), got '" + std::string(value) + "'";
        buckets_.push_back(v);
        if (c == std::string_view::npos) break;
        s = s.substr(c + 1);
      }
      return "";
    }
    return Pass::setOption(key, value);
  }

  LogicalResult run(Module &m, DiagnosticEngine &diag, bool &changed) override {
    std::vector<Request> reqs;
    if (!func_.empty()) {
      Function *f = m.lookupFunction(func_);
      if (!f) {
        diag.error({}, "dispatch: no function @" + func_ + " in module @" + m.name());
        return failure();
      }
      if (buckets_.empty()) {
        diag.error({}, "pass 'dispatch' with func=@" + func_ + " needs its sizes: dispatch{buckets=16,64,128}");
        return failure();
      }
      reqs.push_back({f, arg_, dim_, buckets_, f->loc()});
    } else {
      std::vector<Function *> fs;
      for (const auto &f : m.functions()) fs.push_back(f.get());
      for (Function *f : fs) {
        const Attr *b = f->fnAttr("dispatch");
        const Attr *d = f->fnAttr("dispatch_dim");
        if (!b && !d) continue;
        Request r{f, 0, 0, {}, f->loc()};
        if (!b || b->kind() != AttrKind::Ints || b->getInts().empty()) {
          diag.error(f->loc(), "function attribute 'dispatch' of @" + f->name() +
                                   " must list the bucket sizes, e.g. dispatch = [16, 64, 128]");
          return failure();
        }
        r.buckets = b->getInts();
        if (d) {
          if (d->kind() != AttrKind::Ints || d->getInts().size() != 2 || d->getInts()[0] < 0 || d->getInts()[1] < 0) {
            diag.error(f->loc(), "function attribute 'dispatch_dim' of @" + f->name() +
                                     " must be [parameter, axis], e.g. dispatch_dim = [0, 0]");
            return failure();
          }
          r.arg = d->getInts()[0];
          r.dim = d->getInts()[1];
        }
        reqs.push_back(r);
      }
    }
    for (Request &r : reqs) {
      if (failed(check(r, diag))) return failure();
      rewrite(m, r);
      changed = true;
    }
    return success();
  }

private:
  static std::string where(const Request &r) {
    return "parameter " + std::to_string(r.arg) + " of @" + r.f->name();
  }

  static LogicalResult check(Request &r, DiagnosticEngine &diag) {
    Function &f = *r.f;
    if (f.blocks().empty() || isPrimitive(f)) {
      diag.error(r.loc, "dispatch: @" + f.name() + " has no body to specialise");
      return failure();
    }
    std::vector<Type> params = f.argTypes();
    if (r.arg >= static_cast<int64_t>(params.size())) {
      diag.error(r.loc, "dispatch: @" + f.name() + " has " + std::to_string(params.size()) +
                            " parameter(s), no parameter " + std::to_string(r.arg));
      return failure();
    }
    Type t = params[static_cast<size_t>(r.arg)];
    if (!t.isTensor() || r.dim >= t.rank()) {
      diag.error(r.loc, "dispatch: " + where(r) + " (" + t.str() + ") has no axis " + std::to_string(r.dim));
      return failure();
    }
    if (t.dims()[static_cast<size_t>(r.dim)] != kDynamic) {
      diag.error(r.loc, "dispatch: axis " + std::to_string(r.dim) + " of " + where(r) + " (" + t.str() +
                            ") is static: nothing to dispatch on");
      return failure();
    }
    int others = 0;
    for (int64_t i = 0; i < t.rank(); ++i) others += i != r.dim && t.dims()[static_cast<size_t>(i)] == kDynamic;
    if (others > 1) {
      diag.error(r.loc, "dispatch: " + where(r) + " (" + t.str() +
                            ") has more than one other `?` axis, which a reshape to the bucket's shape cannot keep");
      return failure();
    }
    if (r.buckets.size() > static_cast<size_t>(kMaxBuckets)) {
      diag.error(r.loc, "dispatch: " + std::to_string(r.buckets.size()) + " buckets for @" + f.name() +
                            ", more than the limit of " + std::to_string(kMaxBuckets));
      return failure();
    }
    for (size_t i = 0; i < r.buckets.size(); ++i) {
      if (r.buckets[i] < 0 || r.buckets[i] > (int64_t{1} << 40)) {
        diag.error(r.loc, "dispatch: bucket size " + std::to_string(r.buckets[i]) + " of @" + f.name() +
                              " is out of range [0, 2^40]");
        return failure();
      }
      for (size_t j = 0; j < i; ++j)
        if (r.buckets[j] == r.buckets[i]) {
          diag.error(r.loc, "dispatch: bucket size " + std::to_string(r.buckets[i]) + " of @" + f.name() +
                                " is given twice");
          return failure();
        }
    }
    return success();
  }

  /// A copy of `src` named `name` whose parameter `arg` has type `argType`;
  /// the ops keep their types (type-infer refines them from the parameter).
  static Function *copy(Module &m, const Function &src, const std::string &name, int64_t arg, Type argType) {
    std::vector<Type> ins = src.argTypes();
    ins[static_cast<size_t>(arg)] = argType;
    auto owned = std::make_unique<Function>(name, m.context().func(ins, src.resultTypes()), src.loc());
    Function *g = m.addFunction(std::move(owned));
    for (const auto &[n, a] : src.fnAttrs())
      if (n != "dispatch" && n != "dispatch_dim") g->fnAttrs().emplace_back(n, a);
    keepOutOfLine(*g);
    std::vector<Block *> blocks;
    for (const auto &b : src.blocks()) blocks.push_back(b.get());
    Block *dummy = g->addBlock(std::make_unique<Block>("dummy"));
    IRMapping map;
    cloneBlocksInto(blocks, *g, dummy, map, "");
    g->eraseBlock(dummy);
    g->entry()->argument(static_cast<unsigned>(arg))->setType(argType);
    return g;
  }

  /// `inline = "never"` unless the function says otherwise: the copies are
  /// the dispatcher's callees, one call per inference; inlined into it they
  /// would each exist twice (the inliner keeps callees, which may be entry
  /// points) and every later pass and the kernel generator would see them
  /// twice.
  static void keepOutOfLine(Function &g) {
    if (g.fnAttr("inline")) return;
    g.fnAttrs().emplace_back("inline", Attr::getStr("never"));
    std::stable_sort(g.fnAttrs().begin(), g.fnAttrs().end(),
                     [](const auto &a, const auto &b) { return a.first < b.first; });
  }

  static void rewrite(Module &m, Request &r) {
    Function &f = *r.f;
    Context &ctx = m.context();
    const std::string name = f.name();
    Type funcType = f.type();
    Location loc = f.loc();
    std::vector<std::pair<std::string, Attr>> attrs;
    for (const auto &[n, a] : f.fnAttrs())
      if (n != "dispatch" && n != "dispatch_dim") attrs.emplace_back(n, a);
    std::vector<std::string> paramNames;
    std::vector<Location> paramLocs;
    for (unsigned i = 0; i < f.entry()->numArguments(); ++i) {
      paramNames.push_back(f.entry()->argument(i)->name());
      paramLocs.push_back(f.entry()->argument(i)->argLoc());
    }

    // The symbolic body becomes @f.generic; @f is rebuilt as the dispatcher,
    // so its callers (and the body's own recursive calls) dispatch.
    std::string generic = name + ".generic";
    if (m.lookupFunction(generic)) generic = m.freshFunctionName(generic);
    f.setName(generic);
    f.fnAttrs().erase(std::remove_if(f.fnAttrs().begin(), f.fnAttrs().end(),
                                     [](const auto &p) { return p.first == "dispatch" || p.first == "dispatch_dim"; }),
                      f.fnAttrs().end());
    keepOutOfLine(f);

    Type argType = funcType.elems()[static_cast<size_t>(r.arg)];
    std::vector<std::pair<int64_t, Function *>> copies;
    for (int64_t size : r.buckets) {
      std::vector<int64_t> dims = argType.dims();
      dims[static_cast<size_t>(r.dim)] = size;
      std::string cname = name + "." + std::to_string(size);
      if (m.lookupFunction(cname)) cname = m.freshFunctionName(cname);
      copies.push_back({size, copy(m, f, cname, r.arg, ctx.tensor(argType.dtype(), dims))});
      ++NumCopies;
    }

    auto owned = std::make_unique<Function>(name, funcType, loc);
    Function *d = m.addFunction(std::move(owned));
    d->fnAttrs() = attrs;
    Block *entry = d->addBlock(std::make_unique<Block>("entry"));
    entry->setLoc(loc);
    std::vector<Value *> params;
    for (size_t i = 0; i < paramNames.size(); ++i) {
      BlockArgument *a = entry->addArgument(funcType.elems()[i], paramLocs[i]);
      a->setName(paramNames[i]);
      params.push_back(a);
    }
    Value *x = params[static_cast<size_t>(r.arg)];
    std::string base = x->name().empty() ? "arg" + std::to_string(r.arg) : x->name();

    auto callAndRet = [&](Builder &b, Function *callee, std::vector<Value *> args) {
      Operation *call = b.create(OpCode::Call, args, {{"callee", Attr::getSym(callee->name())}},
                                 callee->resultTypes());
      std::vector<Value *> rs;
      for (unsigned i = 0; i < call->numResults(); ++i) rs.push_back(call->result(i));
      b.create(OpCode::Ret, rs);
    };

    Builder b(m, loc);
    b.setInsertionPointToEnd(entry);
    Operation *dimOp = b.create(OpCode::Dim, {x}, {{"axis", Attr::getInt(r.dim)}});
    Value *size = dimOp->result(0);
    size->setName(base + ".dim");
    Block *test = entry;
    Block *after = entry;
    for (size_t i = 0; i < copies.size(); ++i) {
      auto [bucket, callee] = copies[i];
      std::string tag = std::to_string(bucket);
      Block *arm = d->insertBlockAfter(after, std::make_unique<Block>("b" + tag));
      arm->setLoc(loc);
      bool last = i + 1 == copies.size();
      Block *next = d->insertBlockAfter(arm, std::make_unique<Block>(last ? "generic" : "test" +
                                                                                std::to_string(copies[i + 1].first)));
      next->setLoc(loc);
      b.setInsertionPointToEnd(test);
      Value *is = b.create(OpCode::Equal, {size, b.constantI64(bucket)})->result(0);
      is->setName(base + ".is" + tag);
      b.create(OpCode::CondBr, {is}, {}, {}, {Successor{arm, 1, 0, "", loc}, Successor{next, 1, 0, "", loc}});

      Builder ab(m, loc);
      ab.setInsertionPointToEnd(arm);
      std::vector<int64_t> shape = callee->argTypes()[static_cast<size_t>(r.arg)].dims();
      for (int64_t &s : shape)
        if (s == kDynamic) s = -1;
      Value *view = ab.create(OpCode::Reshape, {x}, {{"shape", Attr::getInts(shape)}})->result(0);
      view->setName(base + "." + tag);
      std::vector<Value *> args = params;
      args[static_cast<size_t>(r.arg)] = view;
      callAndRet(ab, callee, args);
      test = next;
      after = next;
    }
    b.setInsertionPointToEnd(test);
    callAndRet(b, &f, params);
    ++NumDispatchers;
  }

  std::string func_;
  int64_t arg_ = 0, dim_ = 0;
  std::vector<int64_t> buckets_;
};

} // namespace

std::unique_ptr<Pass> createDispatchPass() { return std::make_unique<DispatchPass>(); }

} // namespace nimble::passes
