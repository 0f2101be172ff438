//===- ObjectTest.cpp - Storage, Tensor, Adt, Ref and the CPU allocator --===//

#include "vm/support/Allocator.h"
#include "vm/Object.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

using namespace nimble;
using namespace nimble::vm;

namespace {

uint64_t liveBytes() { return defaultAllocator().stats().bytesLive; }

TEST(Object, TensorLifetimeReturnsMemory) {
  uint64_t before = liveBytes();
  {
    TensorRef t = makeTensor(DType::F32, {2, 3});
    ASSERT_TRUE(t);
    EXPECT_EQ(t->refCount(), 1u);
    EXPECT_EQ(t->storage()->refCount(), 1u);
    EXPECT_EQ(t->numElements(), 6);
    EXPECT_EQ(t->numBytes(), 24u);
    EXPECT_EQ(liveBytes(), before + 24);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->rawData()) % 64, 0u);
    TensorRef u = t; // a second reference
    EXPECT_EQ(t->refCount(), 2u);
    u.reset();
    EXPECT_EQ(t->refCount(), 1u);
    EXPECT_EQ(liveBytes(), before + 24);
  }
  EXPECT_EQ(liveBytes(), before);
}

TEST(Object, ViewsShareStorage) {
  uint64_t before = liveBytes();
  Ref<Tensor> view;
  {
    TensorRef t = makeTensor(DType::I32, {4});
    for (int i = 0; i < 4; ++i) t->data<int32_t>()[i] = 10 + i;
    view = TensorRef(new Tensor(DType::I32, {2}, t->storage(), 8));
    EXPECT_EQ(t->storage()->refCount(), 2u);
  }
  // The base tensor is gone; the view keeps the storage.
  EXPECT_EQ(view->storage()->refCount(), 1u);
  EXPECT_EQ(view->data<int32_t>()[0], 12);
  EXPECT_EQ(view->data<int32_t>()[1], 13);
  EXPECT_EQ(liveBytes(), before + 16);
  view.reset();
  EXPECT_EQ(liveBytes(), before);
}

// Dead storages and tensors go to the thread's free lists and come back,
// fully re-initialised, from make() (Object.h, "Recycling").
TEST(Object, DeadObjectsAreRecycled) {
  uint64_t before = liveBytes();
  Tensor *oldTensor;
  Storage *oldStorage;
  {
    TensorRef t = makeTensor(DType::F32, {2, 3});
    ASSERT_TRUE(t);
    t->storage()->markReadOnly(); // must not survive recycling
    oldTensor = t.get();
    oldStorage = t->storage().get();
  }
  EXPECT_EQ(liveBytes(), before); // the bytes went back to the allocator
  // The last to die (the storage, released by its tensor) is reused first.
  TensorRef u = makeTensor(DType::I8, {5, 1, 2});
  ASSERT_TRUE(u);
  EXPECT_EQ(u.get(), oldTensor);
  EXPECT_EQ(u->storage().get(), oldStorage);
  EXPECT_EQ(u->refCount(), 1u);
  EXPECT_EQ(u->storage()->refCount(), 1u);
  EXPECT_EQ(u->dtype(), DType::I8);
  EXPECT_EQ(u->shape(), (std::vector<int64_t>{5, 1, 2}));
  EXPECT_EQ(u->offset(), 0u);
  EXPECT_EQ(u->storage()->size(), 10u);
  EXPECT_FALSE(u->storage()->readOnly());
  EXPECT_EQ(liveBytes(), before + 10);
  // A view made with Tensor::make shares the storage and has its own shape.
  int64_t dims[] = {10};
  TensorRef v(Tensor::make(DType::I8, dims, 1, u->storage(), 0));
  EXPECT_EQ(v->storage().get(), u->storage().get());
  EXPECT_EQ(v->shape(), (std::vector<int64_t>{10}));
  EXPECT_EQ(u->storage()->refCount(), 2u);
  u.reset();
  v.reset();
  EXPECT_EQ(liveBytes(), before);
}

// An object made on one thread may die on another (it joins that thread's
// list, deleted when the thread ends: the sanitizers check it).
TEST(Object, ObjectsDieOnAnyThread) {
  uint64_t before = liveBytes();
  TensorRef t = makeTensor(DType::F32, {4});
  ASSERT_TRUE(t);
  std::thread([t = std::move(t)]() mutable { t.reset(); }).join();
  EXPECT_EQ(liveBytes(), before);
  TensorRef u = makeTensor(DType::F32, {4}); // this thread's own lists still work
  ASSERT_TRUE(u);
  EXPECT_EQ(u->numElements(), 4);
}

TEST(Object, ShapesAndTypeStrings) {
  TensorRef s = makeTensor(DType::I64, {});
  EXPECT_EQ(s->numElements(), 1);
  EXPECT_EQ(s->rank(), 0);
  EXPECT_EQ(s->typeString(), "tensor<i64>");
  TensorRef e = makeTensor(DType::BF16, {3, 0, 2});
  EXPECT_EQ(e->numElements(), 0);
  EXPECT_EQ(e->numBytes(), 0u);
  EXPECT_EQ(e->typeString(), "tensor<3x0x2xbf16>");
  EXPECT_NE(e->rawData(), nullptr); // size 0 still gets a real block
  EXPECT_EQ(makeTensor(DType::F16, {2, 3})->typeString(), "tensor<2x3xf16>");
}

TEST(Object, ScalarInt) {
  EXPECT_EQ(makeScalarI64(-42)->scalarInt(), -42);
  EXPECT_EQ(makeScalarI64(INT64_MIN)->scalarInt(), INT64_MIN);
  TensorRef b = makeTensor(DType::I1, {});
  *b->data<uint8_t>() = 7; // any non-zero byte is true
  EXPECT_EQ(b->scalarInt(), 1);
  *b->data<uint8_t>() = 0;
  EXPECT_EQ(b->scalarInt(), 0);
  TensorRef i8 = makeTensor(DType::I8, {1});
  *i8->data<int8_t>() = -128;
  EXPECT_EQ(i8->scalarInt(), -128);
  TensorRef i32 = makeTensor(DType::I32, {});
  *i32->data<int32_t>() = -2000000000;
  EXPECT_EQ(i32->scalarInt(), -2000000000);
}

TEST(Object, AdtOwnsItsFields) {
  uint64_t before = liveBytes();
  ObjectRef leaf(makeTensor(DType::F32, {8}).get());
  EXPECT_EQ(leaf->refCount(), 1u);
  {
    Ref<Adt> node(new Adt(1, {leaf, leaf}));
    EXPECT_EQ(node->tag(), 1u);
    EXPECT_EQ(node->fields().size(), 2u);
    EXPECT_EQ(leaf->refCount(), 3u);
    Ref<Adt> outer(new Adt(0, {ObjectRef(node)}));
    node.reset(); // outer keeps node alive
    EXPECT_EQ(leaf->refCount(), 3u);
    ASSERT_NE(asAdt(outer->fields()[0].get()), nullptr);
    EXPECT_EQ(asTensor(outer->fields()[0].get()), nullptr);
  }
  EXPECT_EQ(leaf->refCount(), 1u);
  EXPECT_NE(asTensor(leaf.get()), nullptr);
  EXPECT_EQ(asStorage(leaf.get()), nullptr);
  leaf.reset();
  EXPECT_EQ(liveBytes(), before);
}

TEST(Object, BorrowedStorageReleasesItsOwner) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3});
  std::weak_ptr<std::vector<float>> watch = owner;
  {
    Ref<Storage> s(new Storage(owner->data(), 12, std::shared_ptr<const void>(owner)));
    owner.reset();
    EXPECT_FALSE(watch.expired());
    EXPECT_TRUE(s->readOnly());
    EXPECT_EQ(s->size(), 12u);
    Tensor t(DType::F32, {3}, s, 0);
    EXPECT_EQ(t.data<float>()[2], 3.0f);
  }
  EXPECT_TRUE(watch.expired());
}

TEST(Object, StorageFreeIsEarlyAndIdempotent) {
  uint64_t before = liveBytes();
  Allocator &a = defaultAllocator();
  Ref<Storage> s(new Storage(&a, a.allocate(100, 64), 100, Device::CPU));
  EXPECT_EQ(liveBytes(), before + 100);
  s->free();
  EXPECT_EQ(liveBytes(), before);
  EXPECT_EQ(s->size(), 0u);
  EXPECT_EQ(s->data(), nullptr);
  s->free();
  s.reset(); // the destructor does not free twice
  EXPECT_EQ(liveBytes(), before);
}

class AllocatorTest : public ::testing::TestWithParam<AllocatorKind> {};

TEST_P(AllocatorTest, AlignmentAndStatistics) {
  Allocator &a = allocatorOf(GetParam());
  a.resetStats();
  uint64_t live0 = a.stats().bytesLive;
  std::vector<std::pair<void *, size_t>> blocks;
  size_t sizes[] = {1, 100, 4096, 0, 77};
  size_t aligns[] = {1, 16, 4096, 64, 256};
  for (size_t i = 0; i < 5; ++i) {
    void *p = a.allocate(sizes[i], aligns[i]);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % aligns[i], 0u) << "align " << aligns[i];
    std::memset(p, 0xab, sizes[i]); // the block is really that big (ASan checks)
    blocks.emplace_back(p, sizes[i]);
  }
  EXPECT_NE(blocks[3].first, blocks[0].first); // size 0: a unique pointer
  AllocStats s = a.stats();
  EXPECT_EQ(s.allocations, 5u);
  EXPECT_EQ(s.bytesAllocated, 1u + 100 + 4096 + 0 + 77);
  EXPECT_EQ(s.bytesLive - live0, 4274u);
  EXPECT_EQ(s.peakBytes - live0, 4274u);
  a.deallocate(blocks[2].first, blocks[2].second, aligns[2]);
  EXPECT_EQ(a.stats().bytesLive - live0, 178u);
  EXPECT_EQ(a.stats().peakBytes - live0, 4274u);
  void *p = a.allocate(50, 8);
  s = a.stats();
  EXPECT_EQ(s.bytesLive - live0, 228u);
  EXPECT_EQ(s.peakBytes - live0, 4274u);
  EXPECT_EQ(s.allocations, 6u);
  EXPECT_EQ(s.bytesAllocated, 4324u);
  EXPECT_EQ(s.poolHits + s.systemAllocations, s.allocations);
  a.deallocate(p, 50, 8);
  for (size_t i : {0, 1, 3, 4}) a.deallocate(blocks[i].first, blocks[i].second, aligns[i]);
  EXPECT_EQ(a.stats().bytesLive, live0);
  EXPECT_EQ(a.device(), Device::CPU);
}

TEST_P(AllocatorTest, HugeRequestFailsCleanly) {
  Allocator &a = allocatorOf(GetParam());
  uint64_t before = a.stats().allocations;
  EXPECT_EQ(a.allocate(SIZE_MAX - 8, 64), nullptr); // rounding overflows
  EXPECT_EQ(a.stats().allocations, before);
}

INSTANTIATE_TEST_SUITE_P(Kinds, AllocatorTest,
                         ::testing::Values(AllocatorKind::Pool, AllocatorKind::System),
                         [](const auto &info) {
                           return std::string(info.param == AllocatorKind::Pool ? "Pool" : "System");
                         });

TEST(PoolAllocator, SizeClasses) {
  size_t prev = 0;
  for (size_t size = 0; size < (size_t(1) << 22); size = size < 4096 ? size + 1 : size + 997) {
    size_t c = poolSizeClass(size);
    EXPECT_GE(c, size);
    EXPECT_EQ(c % 64, 0u) << size;
    EXPECT_GE(c, prev) << "classes are monotone in the size";
    if (size > 1024) EXPECT_LE(c, size + size / 4) << "at most 25% rounding above 1 KiB: " << size;
    else EXPECT_LE(c - size, 64u) << size;
    EXPECT_EQ(poolSizeClass(c), c) << "a class is its own class";
    prev = c;
  }
  EXPECT_EQ(poolSizeClass(0), 64u);
  EXPECT_EQ(poolSizeClass(1025), 1280u);
  EXPECT_EQ(poolSizeClass(2048), 2048u);
  EXPECT_EQ(poolSizeClass(2049), 2560u);
  // Above 1 GiB the pool is bypassed: the request is its own size.
  size_t huge = (size_t(1) << 30) + 1;
  EXPECT_EQ(poolSizeClass(huge), huge);
}

TEST(PoolAllocator, EveryClassKeepsItsOwnFreeList) {
  // One block of each class from 64 bytes to 1 GiB's neighbourhood (the
  // class's smallest and largest size), freed, then asked for again: each
  // comes back from its own list, and a block of one class never serves
  // another (the free lists are an array indexed by class arithmetic).
  Allocator &a = allocatorOf(AllocatorKind::Pool);
  a.releaseCached();
  std::vector<std::pair<size_t, size_t>> classes; // (smallest size, class)
  for (size_t size = 1, prev = 0; size <= (size_t(1) << 24);) {
    size_t c = poolSizeClass(size);
    if (c != prev) classes.push_back({size, c});
    prev = c;
    size = c + 1;
  }
  ASSERT_EQ(classes.size(), 16u + 4 * 14) << "64-byte steps to 1 KiB, then 4 per power of two to 16 MiB";
  std::vector<void *> blocks;
  for (auto [size, c] : classes) {
    blocks.push_back(a.allocate(c, 64)); // the largest size of the class
    ASSERT_NE(blocks.back(), nullptr) << c;
  }
  for (size_t i = 0; i < classes.size(); ++i) a.deallocate(blocks[i], classes[i].second, 64);
  a.resetStats();
  // The other way round, each kept until all are out: from 64 KiB up a
  // request may take a larger class's block when that one was freed more
  // recently (LargeRequestsTakeTheWarmestBlock), and here the larger
  // classes' blocks are out by then.
  std::vector<void *> again(classes.size());
  for (size_t i = classes.size(); i-- > 0;) {
    again[i] = a.allocate(classes[i].first, 64); // the smallest size of the class
    EXPECT_EQ(again[i], blocks[i]) << "class " << classes[i].second;
  }
  for (size_t i = 0; i < classes.size(); ++i) a.deallocate(again[i], classes[i].first, 64);
  EXPECT_EQ(a.stats().poolHits, classes.size());
  a.releaseCached();
}

TEST(PoolAllocator, LargeRequestsTakeTheWarmestBlock) {
  // From 64 KiB up, a request takes the most recently freed block of its
  // class and the classes up to 4x its own; the block keeps its class.
  Allocator &a = allocatorOf(AllocatorKind::Pool);
  a.releaseCached();
  const size_t small = 100 << 10, big = 300 << 10, huge = 500 << 10; // classes 112, 320, 512 KiB
  void *s0 = a.allocate(small, 64), *b0 = a.allocate(big, 64), *h0 = a.allocate(huge, 64);
  ASSERT_TRUE(s0 && b0 && h0);
  a.deallocate(s0, small, 64);
  a.deallocate(b0, big, 64); // the most recently freed within 4x of 112 KiB
  a.deallocate(h0, huge, 64); // more than 4x: not a candidate
  a.resetStats();
  void *p = a.allocate(small, 64);
  EXPECT_EQ(p, b0);
  std::memset(p, 1, small);
  // The 320 KiB block goes back to its class: a 300 KiB request finds it,
  // the 112 KiB block is still cached for the next small one.
  a.deallocate(p, small, 64);
  void *q = a.allocate(big, 64);
  EXPECT_EQ(q, b0);
  std::memset(q, 1, big);
  void *r = a.allocate(small, 64);
  EXPECT_EQ(r, s0);
  EXPECT_EQ(a.stats().poolHits, 3u);
  EXPECT_EQ(a.stats().systemAllocations, 0u);
  a.deallocate(q, big, 64);
  a.deallocate(r, small, 64);
  // Below 64 KiB a request keeps to its class.
  void *t0 = a.allocate(10 << 10, 64), *u0 = a.allocate(30 << 10, 64);
  a.deallocate(t0, 10 << 10, 64);
  a.deallocate(u0, 30 << 10, 64);
  void *t = a.allocate(10 << 10, 64);
  EXPECT_EQ(t, t0);
  a.deallocate(t, 10 << 10, 64);
  a.releaseCached();
}

TEST(PoolAllocator, RecyclesFreedBlocksOfTheSameClass) {
  Allocator &a = allocatorOf(AllocatorKind::Pool);
  a.resetStats();
  void *p = a.allocate(3000, 64);
  ASSERT_NE(p, nullptr);
  a.deallocate(p, 3000, 64);
  // 2900 and 3000 share the class 3072: the freed block comes back.
  void *q = a.allocate(2900, 64);
  EXPECT_EQ(q, p);
  AllocStats s = a.stats();
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.poolHits, 1u);
  std::memset(q, 0, 2900);
  // A different class does not take it.
  void *r = a.allocate(5000, 64);
  EXPECT_NE(r, q);
  EXPECT_EQ(a.stats().poolHits, 1u);
  a.deallocate(q, 2900, 64);
  a.deallocate(r, 5000, 64);
  // Alternating two live buffers (a loop-carried state) needs two blocks in
  // the steady state, whatever the number of iterations.
  a.resetStats();
  void *cur = a.allocate(2048, 64);
  for (int i = 0; i < 100; ++i) {
    void *next = a.allocate(2048, 64);
    ASSERT_NE(next, nullptr);
    a.deallocate(cur, 2048, 64);
    cur = next;
  }
  a.deallocate(cur, 2048, 64);
  s = a.stats();
  EXPECT_EQ(s.allocations, 101u);
  // Two blocks from the system (none of class 2048 was cached), then every
  // iteration takes back the block the previous one freed.
  EXPECT_LE(s.systemAllocations, 2u);
  EXPECT_GE(s.poolHits, 99u);
}

TEST(PoolAllocator, OverAlignedRequestsBypassThePool) {
  Allocator &a = allocatorOf(AllocatorKind::Pool);
  a.resetStats();
  void *p = a.allocate(100, 4096);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  a.deallocate(p, 100, 4096);
  void *q = a.allocate(100, 4096);
  EXPECT_EQ(a.stats().poolHits, 0u);
  EXPECT_EQ(a.stats().systemAllocations, 2u);
  a.deallocate(q, 100, 4096);
}

TEST(PoolAllocator, ReleaseCachedReturnsMemory) {
  Allocator &a = allocatorOf(AllocatorKind::Pool);
  a.releaseCached();
  uint64_t reserved0 = a.stats().bytesReserved;
  void *p = a.allocate(10000, 64);
  a.deallocate(p, 10000, 64);
  EXPECT_EQ(a.stats().bytesReserved, reserved0 + poolSizeClass(10000)); // cached
  a.releaseCached();
  EXPECT_EQ(a.stats().bytesReserved, reserved0);
}

} // namespace
