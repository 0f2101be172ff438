//===- SizeKeys.h - Keys of provably equal run-time sizes -------*- C++ -*-===//
//
// plan-memory's reuse of run-time-size storages (PlanMemory.cpp) lets a
// storage take a dead one's place only when their sizes are provably equal;
// SizeKeys hash-conses each size into a key that says so. PlanMemory.cpp
// and CarriedStorage.cpp include it.
//
//===----------------------------------------------------------------------===//

#ifndef NIMBLE_PASSES_SIZEKEYS_H
#define NIMBLE_PASSES_SIZEKEYS_H

#include "ir/IR.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace nimble::passes {

/// Keys under which run-time sizes are provably equal (hash-consed: a key is
/// a small integer naming a tuple of a tag and the keys or values of its
/// parts). Two sizes with equal keys are the same function (storage_size,
/// pure shape functions) of the same leaves: SSA values (an opaque tensor's
/// shape, a size value) or static dims. -1: a shape that cannot be named.
class SizeKeys {
public:
  explicit SizeKeys(const ir::Module &m) : m_(m) {}

  /// The key of an alloc_storage's size operand (never -1: at worst the
  /// SSA value itself).
  int ofSize(ir::Value *size) {
    ir::Operation *d = size->definingOp();
    if (d && d->is(OpCode::StorageSize)) {
      int sh = ofShapeTensor(d->operand(0), 0);
      if (sh >= 0)
        return intern(std::array<int64_t, 4>{kStorageSize, static_cast<int64_t>(d->attr("dtype").getDType()),
                                             d->intAttr("alignment"), sh});
    }
    return leaf(size);
  }
  /// The key `ofSize` gives `storage_size(shape_of(t), dtype, alignment)`:
  /// the bytes of a storage holding `t`'s shape (CarriedStorage.cpp asks
  /// whether a loop's new state needs what its old one had).
  int ofTensorSize(ir::Value *t, DType dtype, int64_t alignment) {
    return intern(std::array<int64_t, 4>{kStorageSize, static_cast<int64_t>(dtype), alignment,
                                         ofTensorShape(t, 0)});
  }

private:
  static constexpr int kMaxDepth = 256;
  enum Tag : int64_t { kStorageSize, kShape, kShapeFunc };

  /// A key being built: up to kInline integers in place, more on the heap.
  class KeyBuf {
  public:
    void push(int64_t x) {
      if (n_ < kInline) inline_[n_] = x;
      else {
        if (n_ == kInline) heap_.assign(inline_, inline_ + kInline);
        heap_.push_back(x);
      }
      ++n_;
    }
    std::span<const int64_t> span() const {
      return n_ <= kInline ? std::span<const int64_t>(inline_, n_) : std::span<const int64_t>(heap_);
    }

  private:
    static constexpr size_t kInline = 8;
    int64_t inline_[kInline];
    std::vector<int64_t> heap_;
    size_t n_ = 0;
  };

  static uint64_t hashKey(std::span<const int64_t> k) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ k.size();
    for (int64_t x : k) {
      h = (h ^ static_cast<uint64_t>(x)) * 0xbf58476d1ce4e5b9ull;
      h ^= h >> 31;
    }
    return h;
  }
  bool sameKey(int id, std::span<const int64_t> k) const {
    const uint32_t b = keyBegin_[id], e = keyBegin_[id + 1];
    return e - b == k.size() && std::equal(k.begin(), k.end(), keyData_.begin() + b);
  }
  int newId(std::span<const int64_t> k) {
    const int id = static_cast<int>(keyBegin_.size()) - 1;
    keyData_.insert(keyData_.end(), k.begin(), k.end());
    keyBegin_.push_back(static_cast<uint32_t>(keyData_.size()));
    return id;
  }
  /// The key's number: equal tuples, equal numbers. One open-addressed
  /// table whose slots hold the number and 32 bits of the hash (a probe
  /// compares the tuple only on a hash match); the tuples sit back to back
  /// in keyData_: no node and no allocation per lookup (issue 23).
  int intern(std::span<const int64_t> k) {
    const uint64_t h = hashKey(k);
    const auto tag = static_cast<uint32_t>(h >> 32);
    size_t mask = table_.size() - 1, i = h & mask;
    for (; table_[i].id >= 0; i = (i + 1) & mask)
      if (table_[i].hash == tag && sameKey(table_[i].id, k)) return table_[i].id;
    const int id = newId(k);
    table_[i] = {id, tag};
    if (++interned_ * 2 > table_.size()) grow();
    return id;
  }
  void grow() {
    std::vector<KeySlot> old(table_.size() * 2);
    old.swap(table_);
    const size_t mask = table_.size() - 1;
    for (const KeySlot &e : old) {
      if (e.id < 0) continue;
      const uint32_t b = keyBegin_[e.id], en = keyBegin_[e.id + 1];
      size_t i = hashKey(std::span<const int64_t>(keyData_.data() + b, en - b)) & mask;
      while (table_[i].id >= 0) i = (i + 1) & mask;
      table_[i] = e;
    }
  }

  /// A shape known at compile time (a static type, a constant shape).
  int ofDims(const std::vector<int64_t> &dims) {
    KeyBuf k;
    k.push(kShape);
    for (int64_t d : dims) k.push(d);
    return intern(k.span());
  }
  int leaf(const ir::Value *v) {
    const uint32_t s = slot(v);
    if (slots_[s].leaf != kUnset) return slots_[s].leaf;
    int id = newId({}); // a leaf is a key of its own: never looked up
    slots_[s].leaf = id;
    return id;
  }
  int callee(const std::string &name) {
    // Found without making a node: emplace built one (a string copy) per
    // shape function call before seeing the name was known (issue 23).
    if (auto it = callees_.find(name); it != callees_.end()) return it->second;
    return callees_.emplace(name, static_cast<int>(callees_.size())).first->second;
  }

  /// The shape of tensor `t`: static, the contents of the shape tensor it
  /// was allocated with, or `t` itself (one SSA value has one shape).
  int ofTensorShape(ir::Value *t, int depth) {
    if (t->type().isTensor() && t->type().hasStaticShape()) return ofDims(t->type().dims());
    ir::Operation *d = t->definingOp();
    if (d && d->is(OpCode::AllocTensor) && d->numOperands() == 3) {
      int k = ofShapeTensor(d->operand(2), depth + 1);
      if (k >= 0) return k;
    }
    return leaf(t);
  }

  /// The contents of a 1-D shape tensor `v` wherever it is read, or -1 when
  /// they cannot be named: `shape_of` of a tensor, a constant, or a shape
  /// function's result from keyed inputs (none of them written by a kernel).
  int ofShapeTensor(ir::Value *v, int depth) {
    if (const int known = slots_[slot(v)].memo; known != kUnset) return known;
    int k = depth < kMaxDepth ? compute(v, depth) : -1;
    slots_[slot(v)].memo = k; // slot again: compute may have grown slots_
    return k;
  }
  int compute(ir::Value *v, int depth) {
    ir::Operation *d = v->definingOp();
    if (!d) return -1;
    if (d->is(OpCode::ShapeOf)) return ofTensorShape(d->operand(0), depth + 1);
    if (d->is(OpCode::Constant)) {
      // A constant shape (manifest-memory's, for an input of static type):
      // its contents, unless something writes it (a kernel output).
      const DenseValue &dv = d->attr("value").getDense();
      if (dv.dtype != DType::I64 || dv.shape.size() != 1) return -1;
      if (writtenByKernel(v)) return -1;
      std::vector<int64_t> dims;
      for (int64_t i = 0; i < dv.numElements(); ++i) dims.push_back(dv.getInt(i));
      return ofDims(dims);
    }
    // A shape function's result, unless a kernel writes it afterwards
    // (hand-written IR may).
    if (!d->is(OpCode::InvokeShapeFunc) || writtenByKernel(v)) return -1;
    ir::Operation *writer = d;
    const unsigned outIndex = ir::cast<ir::OpResult>(v)->index();
    const unsigned nin = writer->numOperands();
    const int fn = callee(writer->strAttr("callee"));
    // A shape-preserving kernel (elementwise ops, broadcasts of equal
    // shapes): the output's shape is the shape of its source inputs when
    // those are provably equal.
    if (const std::vector<unsigned> *srcs = shapeSources(fn, writer->strAttr("callee"), outIndex)) {
      int same = -1;
      for (unsigned i : *srcs) {
        int in = i < nin ? ofShapeTensor(writer->operand(i), depth + 1) : -1;
        if (in < 0 || (same >= 0 && in != same)) {
          same = -1;
          break;
        }
        same = in;
      }
      if (same >= 0) return same;
    }
    KeyBuf k;
    k.push(kShapeFunc);
    k.push(fn);
    k.push(outIndex);
    for (unsigned i = 0; i < nin; ++i) {
      // Inputs are shapes (keyed) or values the shape function reads; a
      // value is keyed by identity only when it is a shape tensor we can
      // name, so anything else gives up.
      int in = ofShapeTensor(writer->operand(i), depth + 1);
      if (in < 0) return -1;
      k.push(in);
    }
    return intern(k.span());
  }

  /// True when some `invoke_mut` takes `v` as an output.
  static bool writtenByKernel(ir::Value *v) {
    for (ir::OpOperand &u : v->uses()) {
      ir::Operation *o = u.owner();
      if (o->is(OpCode::InvokeMut) && u.index() >= static_cast<unsigned>(o->intAttr("num_inputs"))) return true;
    }
    return false;
  }

  /// shapeSources of (callee, output j), computed once per pair; null when
  /// unknown.
  const std::vector<unsigned> *shapeSources(int fn, const std::string &name, unsigned j) {
    auto [it, added] = sources_.try_emplace({fn, j});
    if (added) it->second.first = shapeSources(name, j, it->second.second);
    return it->second.first ? &it->second.second : nullptr;
  }

  /// The inputs of primitive function `callee` whose (equal) shape output
  /// `j` has: it is computed from them by unary elementwise ops, casts and
  /// broadcasts (with rank-0 constants or each other). False if unknown.
  bool shapeSources(const std::string &callee, unsigned j, std::vector<unsigned> &srcs) const {
    const ir::Function *prim = m_.lookupFunction(callee);
    if (!prim || !prim->entry() || prim->blocks().size() != 1) return false;
    const ir::Operation *ret = prim->entry()->terminator();
    if (!ret || !ret->is(OpCode::Ret) || j >= ret->numOperands()) return false;
    std::vector<const ir::Value *> work(1, ret->operand(j));
    std::set<const ir::Value *> seen;
    while (!work.empty()) {
      const ir::Value *v = work.back();
      work.pop_back();
      if (!seen.insert(v).second) continue;
      if (const auto *a = ir::dyn_cast<ir::BlockArgument>(v)) {
        srcs.push_back(a->index());
        continue;
      }
      const ir::Operation *d = v->definingOp();
      if (!d) return false;
      Relation r = d->info().relation;
      if (d->is(OpCode::Constant) && v->type().isTensor() && v->type().rank() == 0 && v != ret->operand(j))
        continue; // broadcasts with a scalar keep the other shape
      if (r == Relation::Unary || r == Relation::Cast || r == Relation::LayerNorm) {
        work.push_back(d->operand(0));
      } else if ((r == Relation::Broadcast || r == Relation::Compare) && d->numOperands() == 2) {
        // An operand whose static dims broadcast into the other's static
        // trailing dims leaves the other's shape: follow only the other.
        const ir::Value *a = d->operand(0), *b = d->operand(1);
        if (absorbed(b->type(), a->type())) work.push_back(a);
        else if (absorbed(a->type(), b->type())) work.push_back(b);
        else {
          work.push_back(a);
          work.push_back(b);
        }
      } else {
        return false;
      }
    }
    std::sort(srcs.begin(), srcs.end());
    srcs.erase(std::unique(srcs.begin(), srcs.end()), srcs.end());
    return !srcs.empty();
  }

  /// True when broadcasting any tensor of type `big` with one of type
  /// `small` gives `big`'s shape: small's rank is at most big's and each of
  /// small's dims is a static 1 or equal to big's (static) aligned dim.
  static bool absorbed(ir::Type small, ir::Type big) {
    if (!small.isTensor() || !big.isTensor() || small.rank() > big.rank()) return false;
    std::vector<int64_t> sd = small.dims(), bd = big.dims();
    for (size_t i = 0; i < sd.size(); ++i) {
      int64_t s = sd[sd.size() - 1 - i], b = bd[bd.size() - 1 - i];
      if (s == 1) continue;
      if (s == kDynamic || b == kDynamic || s != b) return false;
    }
    return true;
  }

  const ir::Module &m_;
  struct KeySlot {
    int32_t id = -1;
    uint32_t hash = 0;
  };
  std::vector<KeySlot> table_ = std::vector<KeySlot>(1024);
  size_t interned_ = 0;
  std::vector<int64_t> keyData_;
  std::vector<uint32_t> keyBegin_ = {0}; // key i is keyData_[keyBegin_[i], keyBegin_[i + 1])
  /// Per value met: its leaf key and its memoized shape key (kUnset: not
  /// yet). A value's slot number is kept in its scratch word under this
  /// object's tag (ir::newScratchTag), so a lookup is a load, not a hash.
  static constexpr int kUnset = INT32_MIN;
  struct Slot {
    int leaf = kUnset, memo = kUnset;
  };
  uint32_t slot(const ir::Value *v) {
    const uint64_t w = v->scratch();
    if ((w >> 32) == tag_) return static_cast<uint32_t>(w);
    const auto s = static_cast<uint32_t>(slots_.size());
    v->setScratch((static_cast<uint64_t>(tag_) << 32) | s);
    slots_.emplace_back();
    return s;
  }
  const uint32_t tag_ = ir::newScratchTag();
  std::vector<Slot> slots_;
  std::unordered_map<std::string, int> callees_;
  std::map<std::pair<int, unsigned>, std::pair<bool, std::vector<unsigned>>> sources_;
};

} // namespace nimble::passes

#endif // NIMBLE_PASSES_SIZEKEYS_H
