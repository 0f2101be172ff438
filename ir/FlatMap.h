//===- FlatMap.h - An open-addressed hash map for hot lookups ---*- C++ -*-===//
//
// A hash map of trivially movable keys and values in one flat array, with
// linear probing and the full hash kept beside each key (LLVM's DenseMap and
// Abseil's flat_hash_map are the models). A lookup in a map of a million
// entries is one cache miss, where std::unordered_map costs two or three
// (bucket, node, and the key a node points to) and an allocation per insert
// (issue 23: the parser's value and block tables at a million ops).
//
// Deliberately small: insert, find, erase and clear. Erasing shifts the
// entries after the hole back (Knuth's deletion for linear probing, 6.4
// Algorithm R), so there are no tombstones and a lookup never probes past
// an erased slot. Capacity is a power of two at most half full. Iteration
// order is unspecified and unused.
//
//===----------------------------------------------------------------------===//

#ifndef NIMBLE_IR_FLATMAP_H
#define NIMBLE_IR_FLATMAP_H

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace nimble::ir {

template <class K, class V, class Hash = std::hash<K>, class Eq = std::equal_to<K>>
class FlatMap {
public:
  /// The value of `k`, or null. The pointer is valid until the next insert.
  V *find(const K &k) {
    if (slots_.empty()) return nullptr;
    const uint64_t h = hashOf(k);
    for (size_t i = home(h);; i = (i + 1) & mask()) {
      Slot &s = slots_[i];
      if (s.hash == 0) return nullptr;
      if (s.hash == h && Eq()(s.key, k)) return &s.value;
    }
  }
  const V *find(const K &k) const { return const_cast<FlatMap *>(this)->find(k); }

  /// Inserts (k, v) unless `k` is present; returns the entry's value and
  /// whether it was inserted.
  std::pair<V *, bool> tryEmplace(const K &k, V v) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    const uint64_t h = hashOf(k);
    for (size_t i = home(h);; i = (i + 1) & mask()) {
      Slot &s = slots_[i];
      if (s.hash == 0) {
        s.hash = h;
        s.key = k;
        s.value = std::move(v);
        ++size_;
        return {&s.value, true};
      }
      if (s.hash == h && Eq()(s.key, k)) return {&s.value, false};
    }
  }

  /// Removes `k`; returns whether it was present. Other entries' value
  /// pointers may move.
  bool erase(const K &k) {
    if (slots_.empty()) return false;
    const uint64_t h = hashOf(k);
    size_t i = home(h);
    for (;; i = (i + 1) & mask()) {
      if (slots_[i].hash == 0) return false;
      if (slots_[i].hash == h && Eq()(slots_[i].key, k)) break;
    }
    // Fill the hole at i with a later entry of the run that may live there
    // (its home is not cyclically in (i, j]), until the run ends.
    for (size_t j = i;;) {
      j = (j + 1) & mask();
      if (slots_[j].hash == 0) break;
      const size_t k0 = home(slots_[j].hash);
      const bool homeInHole = i <= j ? (k0 <= i || k0 > j) : (k0 <= i && k0 > j);
      if (homeInHole) {
        slots_[i] = std::move(slots_[j]);
        i = j;
      }
    }
    slots_[i] = Slot{};
    --size_;
    return true;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// Empties the map and keeps its capacity when it is small; a large
  /// table is released (a parser clears its tables per function, and one
  /// big function should not make every later clear touch its slots).
  void clear() {
    if (slots_.size() > 4096) {
      std::vector<Slot>().swap(slots_);
    } else {
      for (Slot &s : slots_) s = Slot{};
    }
    size_ = 0;
  }

private:
  struct Slot {
    uint64_t hash = 0; // 0: empty (hashOf never returns 0)
    K key{};
    V value{};
  };
  size_t mask() const { return slots_.size() - 1; }
  /// The first slot to probe (not from bit 0, which hashOf sets).
  size_t home(uint64_t h) const { return static_cast<size_t>(h >> 1) & mask(); }
  static uint64_t hashOf(const K &k) {
    // Mix the bits (std::hash of a pointer or an integer is the identity)
    // and never 0, which marks an empty slot.
    uint64_t h = static_cast<uint64_t>(Hash()(k)) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    return h | 1;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
    for (Slot &s : old) {
      if (s.hash == 0) continue;
      size_t i = home(s.hash);
      while (slots_[i].hash != 0) i = (i + 1) & mask();
      slots_[i] = std::move(s);
    }
  }
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

} // namespace nimble::ir

#endif // NIMBLE_IR_FLATMAP_H
