//===- MatMulReassociate.cpp - Matrix-chain order by multiply-adds -------===//
//
// A product of matrices A1·A2·…·An is associative, and the order in which it
// is computed can change its cost by orders of magnitude: A(512x512)·
// B(512x512)·v(512x1) costs 134M multiply-adds left to right and 0.5M as
// A·(B·v). DLVM's algebra simplification reorders such chains (seed 004,
// §3.1.2 "Optimization": "matrix multiplication reordering ... minimizes the
// number of sub-operations in a chain of matrix multiplications with
// different dimensionality, based on matrix multiplication's
// associativity"). This pass does the same for the rank-2 `matmul` op:
//
//   * A chain is a tree of `matmul`s whose inner products have one use (the
//     next product of the chain), all in one block, all rank 2, one dtype.
//     An inner product read with transpose_a/transpose_b set is a leaf (its
//     transpose is not a product of the leaves in order). Leaves keep their
//     own transpose flags: every product of a sub-chain is built as
//     `matmul L, R` with L's and R's flags, and inner products are never
//     transposed, so any order is one matmul per node.
//   * With every dimension p0..pn static, the classic chain-order dynamic
//     program (O(n^3), n the number of leaves) finds the order of fewest
//     multiply-adds; the chain is rebuilt only when that is strictly
//     cheaper than the order written, so a chain already optimal (most of
//     them: x·W1·W2 left to right) is left as it was.
//   * With `?` dimensions, a chain of three leaves A(m x k)·B(k x n)·C(n x p)
//     gets a choice at run time between its two orders, in the IR: a
//     `cond_br` to two blocks that each compute one order and branch to a
//     join block. cost((AB)C) = m·n·(k+p) and cost(A(BC)) = k·p·(m+n); with
//     one `?` size x (the others at most 2^20) their difference is linear
//     in x, so the condition is a threshold computed now (`greater %x, T`
//     or `less %x, T`: one `dim`, one compare), or, when one order wins for
//     every x, no branch at all (a static rebuild if that order is not the
//     written one). With more `?`s both costs are computed from `dim`s at
//     run time (i64 arithmetic, which wraps past 2^63: a wrong choice
//     there costs time, never correctness). Longer chains with `?`s are
//     left as written (their Catalan-many orders are not worth a run-time
//     search).
//
// Exactness: floating-point addition is not associative, so another order
// rounds differently (each element is a different sum of the same
// products). The pass is therefore not part of any default pipeline:
// `nimblec -O2 --fp-reassociate` adds it (the name follows GCC/Clang's
// -fassociative-math), and so does `nimble-opt --passes=matmul-reassociate`;
// without it -O0 and -O2 stay bit-identical on the reference kernels
// (docs/passes.md, "matmul-reassociate"). It runs after inline/canonicalize
// and before licm, so that a product of loop invariants it forms (x·(W1·W2)
// in a loop) is hoisted.
//
//===----------------------------------------------------------------------===//

#include "ir/Builder.h"
#include "passes/Pass.h"
#include "passes/Statistic.h"

#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

namespace nimble::passes {
namespace {

using namespace nimble::ir;

NIMBLE_STATISTIC(NumStatic, "matmul-reassociate", "Number of static-shape matmul chains reordered");
NIMBLE_STATISTIC(NumDynamic, "matmul-reassociate",
                 "Number of three-matrix chains with `?` dims given a run-time choice of order");

/// One matrix of a chain, as the chain reads it.
struct Leaf {
  Value *value;
  bool transposed;
};

/// A chain: its leaves in order and the products it consists of (root last).
struct Chain {
  std::vector<Leaf> leaves;
  std::vector<Operation *> products;
};

bool isRank2MatMul(const Operation &op) {
  return op.is(OpCode::MatMul) && op.numResults() == 1 && op.result(0)->type().isTensor() &&
         op.result(0)->type().rank() == 2;
}

/// Operand `i` of `parent` continues the chain when it is a plain product of
/// the same block with no other use.
Operation *innerProduct(const Operation &parent, unsigned i) {
  if (parent.boolAttr(i == 0 ? "transpose_a" : "transpose_b")) return nullptr;
  Operation *d = parent.operand(i)->definingOp();
  if (!d || !isRank2MatMul(*d) || d->block() != parent.block() || !d->result(0)->hasOneUse()) return nullptr;
  if (d->result(0)->type().dtype() != parent.result(0)->type().dtype()) return nullptr;
  return d;
}

void collect(Operation &op, Chain &c) {
  for (unsigned i = 0; i < 2; ++i) {
    if (Operation *d = innerProduct(op, i))
      collect(*d, c);
    else
      c.leaves.push_back({op.operand(i), op.boolAttr(i == 0 ? "transpose_a" : "transpose_b")});
  }
  c.products.push_back(&op);
}

/// The chain's dimensions p0..pn: leaf i is p[i] x p[i+1] (kDynamic for `?`).
std::vector<int64_t> chainDims(const Chain &c) {
  std::vector<int64_t> p;
  for (size_t i = 0; i < c.leaves.size(); ++i) {
    const auto &d = c.leaves[i].value->type().dims();
    int64_t rows = c.leaves[i].transposed ? d[1] : d[0];
    int64_t cols = c.leaves[i].transposed ? d[0] : d[1];
    if (i == 0) p.push_back(rows);
    // Adjacent leaves agree where both are static (the type rule checked
    // it); keep the static one where one side is `?`.
    else if (p.back() == kDynamic) p.back() = rows;
    p.push_back(cols);
  }
  return p;
}

/// Saturating a*b+c for costs: a chain of large static matrices must not
/// wrap into a "cheaper" order.
uint64_t madd(uint64_t acc, uint64_t a, uint64_t b, uint64_t c) {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  if (a && b > max / a) return max;
  uint64_t ab = a * b;
  if (ab && c > max / ab) return max;
  uint64_t abc = ab * c;
  return acc > max - abc ? max : acc + abc;
}

/// Multiply-adds of the chain as written: each product of `op` costs
/// rows x inner x cols of its operands.
uint64_t writtenCost(const Chain &c) {
  uint64_t total = 0;
  for (const Operation *op : c.products) {
    const auto &a = op->operand(0)->type().dims();
    const auto &r = op->result(0)->type().dims();
    int64_t inner = op->boolAttr("transpose_a") ? a[0] : a[1];
    total = madd(total, static_cast<uint64_t>(r[0]), static_cast<uint64_t>(inner), static_cast<uint64_t>(r[1]));
  }
  return total;
}

/// The chain-order dynamic program: cost[i][j] for leaves i..j, split[i][j]
/// the k of its last product (i..k)·(k+1..j).
struct Order {
  std::vector<std::vector<uint64_t>> cost;
  std::vector<std::vector<size_t>> split;
};

Order optimalOrder(const std::vector<int64_t> &p) {
  size_t n = p.size() - 1;
  Order o{std::vector<std::vector<uint64_t>>(n, std::vector<uint64_t>(n, 0)),
          std::vector<std::vector<size_t>>(n, std::vector<size_t>(n, 0))};
  for (size_t len = 2; len <= n; ++len) {
    for (size_t i = 0; i + len <= n; ++i) {
      size_t j = i + len - 1;
      o.cost[i][j] = std::numeric_limits<uint64_t>::max();
      for (size_t k = i; k < j; ++k) {
        uint64_t c = madd(o.cost[i][k] > std::numeric_limits<uint64_t>::max() - o.cost[k + 1][j]
                              ? std::numeric_limits<uint64_t>::max()
                              : o.cost[i][k] + o.cost[k + 1][j],
                          static_cast<uint64_t>(p[i]), static_cast<uint64_t>(p[k + 1]),
                          static_cast<uint64_t>(p[j + 1]));
        if (c < o.cost[i][j]) {
          o.cost[i][j] = c;
          o.split[i][j] = k;
        }
      }
    }
  }
  return o;
}

/// Builds the product of leaves i..j in order `o` before the builder's
/// insertion point.
Value *build(Builder &b, const Chain &c, const Order &o, size_t i, size_t j, bool &transposed) {
  if (i == j) {
    transposed = c.leaves[i].transposed;
    return c.leaves[i].value;
  }
  size_t k = o.split[i][j];
  bool ta = false, tb = false;
  Value *l = build(b, c, o, i, k, ta);
  Value *r = build(b, c, o, k + 1, j, tb);
  transposed = false;
  Operation *m = b.create(OpCode::MatMul, {l, r}, {{"transpose_a", Attr::getBool(ta)}, {"transpose_b", Attr::getBool(tb)}});
  return m ? m->result(0) : nullptr;
}

/// The three-leaf order ((A·B)·C when `leftFirst`, else A·(B·C)).
Order threeLeafOrder(bool leftFirst) {
  Order o{std::vector<std::vector<uint64_t>>(3, std::vector<uint64_t>(3, 0)),
          std::vector<std::vector<size_t>>(3, std::vector<size_t>(3, 0))};
  o.split[0][2] = leftFirst ? 1 : 0;
  o.split[0][1] = 0;
  o.split[1][2] = 1;
  return o;
}

/// Erases the products of a chain whose root's uses were all replaced.
void eraseChain(Chain &c) {
  for (auto it = c.products.rbegin(); it != c.products.rend(); ++it) (*it)->erase();
}

class MatMulReassociatePass : public Pass {
public:
  std::string_view name() const override { return "matmul-reassociate"; }

  LogicalResult run(Module &m, DiagnosticEngine &, bool &changed) override {
    for (auto &f : m.functions()) {
      // Roots first (collected before any block is split).
      std::vector<Operation *> roots;
      for (auto &blk : f->blocks())
        for (Operation &op : *blk)
          if (isRank2MatMul(op) && !isInnerOfChain(op)) roots.push_back(&op);
      std::unordered_map<const Block *, std::vector<Block *>> preds;
      for (auto &blk : f->blocks())
        for (Block *succ : blk->successors()) preds[succ].push_back(blk.get());
      for (Operation *root : roots) {
        Chain c;
        collect(*root, c);
        if (c.leaves.size() < 3 || isChosenArm(c, preds)) continue;
        std::vector<int64_t> p = chainDims(c);
        bool dynamic = false;
        for (int64_t d : p) dynamic |= d == kDynamic;
        if (!dynamic) {
          changed |= reorderStatic(m, *root, c, p);
        } else if (c.leaves.size() == 3) {
          changed |= chooseThree(m, *f, *root, c, p);
        }
      }
    }
    return success();
  }

private:
  /// `op` feeds the next product of a chain (so it is not a root).
  static bool isInnerOfChain(const Operation &op) {
    if (!op.result(0)->hasOneUse()) return false;
    Operation *user = op.result(0)->uses().begin()->owner();
    if (!isRank2MatMul(*user)) return false;
    for (unsigned i = 0; i < 2; ++i)
      if (user->operand(i) == op.result(0) && innerProduct(*user, i) == &op) return true;
    return false;
  }

  /// The chain is one arm of a run-time choice this pass made (so that a
  /// second run changes nothing): its block holds just the chain and a `br`
  /// of the root to a join block, its one predecessor ends in a `cond_br`
  /// on a `less` or `greater`, and the other successor is the same kind of arm to the
  /// same join.
  static bool isChosenArm(const Chain &c, const std::unordered_map<const Block *, std::vector<Block *>> &preds) {
    auto armJoin = [](const Block *b) -> const Block * {
      const Operation *t = b->terminator();
      if (!t || !t->is(OpCode::Br) || t->numOperands() != 1) return nullptr;
      size_t products = 0;
      for (const Operation &op : *b)
        if (&op != t && !(op.is(OpCode::MatMul) && ++products)) return nullptr;
      return products == 2 ? t->successors()[0].block : nullptr;
    };
    const Block *arm = c.products.back()->block();
    const Block *join = armJoin(arm);
    auto it = preds.find(arm);
    if (!join || c.products.size() != 2 || it == preds.end() || it->second.size() != 1) return false;
    const Operation *cond = it->second.front()->terminator();
    if (!cond || !cond->is(OpCode::CondBr) || cond->successors().size() != 2) return false;
    const Operation *less = cond->operand(0)->definingOp(); // or greater
    if (!less || !(less->is(OpCode::Less) || less->is(OpCode::Greater))) return false;
    for (const Successor &s : cond->successors())
      if (s.operandCount != 0 || armJoin(s.block) != join) return false;
    return true;
  }

  static bool reorderStatic(Module &m, Operation &root, Chain &c, const std::vector<int64_t> &p) {
    Order o = optimalOrder(p);
    if (o.cost[0][c.leaves.size() - 1] >= writtenCost(c)) return false;
    Builder b(m, root.loc());
    b.setInsertionPoint(&root);
    bool t = false;
    Value *v = build(b, c, o, 0, c.leaves.size() - 1, t);
    if (!v || v->type() != root.result(0)->type()) return false; // cannot happen: same dims, same dtype
    v->setName(root.result(0)->name());
    root.result(0)->replaceAllUsesWith(v);
    eraseChain(c);
    ++NumStatic;
    return true;
  }

  /// A(m x k)·B(k x n)·C(n x p) with some `?`. With one `?` x and the other
  /// sizes at most 2^20, cost(A·(B·C)) - cost((A·B)·C) = u·x + w is linear
  /// in x, so the choice is a threshold known now: `greater x, T` or `less
  /// x, T`, or one order for every x (then a static rebuild, if it is not
  /// the written one). Otherwise both costs are computed at run time.
  static bool chooseThree(Module &m, Function &f, Operation &root, Chain &c, const std::vector<int64_t> &p) {
    int dynamic = -1, count = 0;
    bool small = true;
    for (int i = 0; i < 4; ++i) {
      if (p[static_cast<size_t>(i)] == kDynamic) {
        dynamic = i;
        ++count;
      } else {
        small &= p[static_cast<size_t>(i)] <= (int64_t{1} << 20);
      }
    }
    Builder b(m, root.loc());
    b.setInsertionPoint(&root);
    if (count == 1 && small) {
      auto diff = [&](__int128 x) { // right - left at x
        __int128 q[4];
        for (int i = 0; i < 4; ++i) q[i] = i == dynamic ? x : p[static_cast<size_t>(i)];
        return q[1] * q[3] * (q[0] + q[2]) - q[0] * q[2] * (q[1] + q[3]);
      };
      __int128 w = diff(0), u = diff(1) - w;
      // rightFirst iff u·x + w < 0, x >= 0.
      int always = 0; // -1 left, +1 right
      OpCode cmp = OpCode::Less;
      __int128 t = 0;
      if (u == 0) {
        always = w < 0 ? 1 : -1;
      } else if (u > 0) { // x < -w/u
        if (-w <= 0) always = -1;
        else t = (-w + u - 1) / u; // x < ceil(-w/u)
      } else { // x > w/(-u)
        if (w < 0) always = 1;
        else {
          cmp = OpCode::Greater;
          t = w / -u; // x > floor(w/-u)
        }
      }
      if (always) return reorderThree(m, root, c, always < 0);
      Value *x = dimValue(b, c, static_cast<size_t>(dynamic));
      if (!x) return false;
      Value *rightFirst = b.create(cmp, {x, b.constantI64(static_cast<int64_t>(t))})->result(0);
      return split(m, f, root, c, rightFirst);
    }
    std::vector<Value *> dims(4, nullptr);
    for (size_t i = 0; i < 4; ++i) {
      dims[i] = p[i] != kDynamic ? b.constantI64(p[i]) : dimValue(b, c, i);
      if (!dims[i]) return false;
    }
    auto mul = [&](Value *x, Value *y) { return b.create(OpCode::Mul, {x, y})->result(0); };
    auto add = [&](Value *x, Value *y) { return b.create(OpCode::Add, {x, y})->result(0); };
    // One statement per op: the order of the printed IR must not depend on
    // the compiler's order of evaluating arguments.
    Value *mn = mul(dims[0], dims[2]);
    Value *kPlusP = add(dims[1], dims[3]);
    Value *leftCost = mul(mn, kPlusP); // m·n·(k+p)
    Value *kp = mul(dims[1], dims[3]);
    Value *mPlusN = add(dims[0], dims[2]);
    Value *rightCost = mul(kp, mPlusN); // k·p·(m+n)
    return split(m, f, root, c, b.create(OpCode::Less, {rightCost, leftCost})->result(0));
  }

  /// Size p_i of a three-leaf chain as a `dim`: p0 is the rows of leaf 0,
  /// p_i (i > 0) the columns of leaf i-1 (a `?` in p means both leaves that
  /// share it say `?`: chainDims keeps a static side).
  static Value *dimValue(Builder &b, const Chain &c, size_t i) {
    const Leaf &leaf = c.leaves[i == 0 ? 0 : i - 1];
    bool rows = i == 0;
    int64_t axis = rows != leaf.transposed ? 0 : 1;
    Operation *d = b.create(OpCode::Dim, {leaf.value}, {{"axis", Attr::getInt(axis)}});
    return d ? d->result(0) : nullptr;
  }

  /// Rebuilds a three-leaf chain in one order, if it is not written so.
  static bool reorderThree(Module &m, Operation &root, Chain &c, bool leftFirst) {
    bool writtenLeftFirst = root.operand(0) == c.products.front()->result(0);
    if (writtenLeftFirst == leftFirst) return false;
    Builder b(m, root.loc());
    b.setInsertionPoint(&root);
    bool t = false;
    Value *v = build(b, c, threeLeafOrder(leftFirst), 0, 2, t);
    if (!v || v->type() != root.result(0)->type()) return false;
    v->setName(root.result(0)->name());
    root.result(0)->replaceAllUsesWith(v);
    eraseChain(c);
    ++NumStatic;
    return true;
  }

  /// Splits the root's block after the chain: `cond_br %rightFirst` to an
  /// arm per order, both branching to a join block whose argument replaces
  /// the root's result and which takes the ops after the root.
  static bool split(Module &m, Function &f, Operation &root, Chain &c, Value *rightFirst) {
    Block *block = root.block();
    Location loc = root.loc();
    if (!root.result(0)->name().empty()) rightFirst->setName(root.result(0)->name() + ".right_first");
    // Split the block after the root: its successors go to the join block,
    // whose argument replaces the root's result.
    std::string base = block->label() + ".chain";
    Block *join = f.insertBlockAfter(block, std::make_unique<Block>(base + ".join"));
    Block *right = f.insertBlockAfter(block, std::make_unique<Block>(base + ".right"));
    Block *left = f.insertBlockAfter(block, std::make_unique<Block>(base + ".left"));
    for (Block *nb : {left, right, join}) nb->setLoc(loc);
    BlockArgument *result = join->addArgument(root.result(0)->type(), loc);
    result->setName(root.result(0)->name());
    while (Operation *next = root.nextOp()) join->push_back(next->remove());
    root.result(0)->replaceAllUsesWith(result);

    for (bool leftFirst : {true, false}) {
      Block *arm = leftFirst ? left : right;
      Builder ab(m, loc);
      ab.setInsertionPointToEnd(arm);
      bool t = false;
      Value *v = build(ab, c, threeLeafOrder(leftFirst), 0, 2, t);
      if (!v) return false; // cannot happen: the leaves' types are those of the chain
      ab.create(OpCode::Br, {v}, {}, {}, {Successor{join, 0, 1, "", loc}});
    }
    Builder b(m, loc);
    b.setInsertionPointToEnd(block);
    eraseChain(c);
    b.create(OpCode::CondBr, {rightFirst}, {}, {},
             {Successor{right, 1, 0, "", loc}, Successor{left, 1, 0, "", loc}});
    ++NumDynamic;
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createMatMulReassociatePass() { return std::make_unique<MatMulReassociatePass>(); }

} // namespace nimble::passes
