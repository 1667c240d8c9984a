// Shapes, buffers, host memory accounting, and tensors as windows onto buffers.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace edgelm {
namespace {

std::byte* address(const Tensor& t) {
  return static_cast<std::byte*>(t.raw());
}

TEST(ShapeTest, Basics) {
  const Shape shape{2, 3, 4};
  EXPECT_EQ(shape.rank(), 3);
  EXPECT_EQ(shape.numel(), 24);
  EXPECT_EQ(shape.rows(), 6);
  EXPECT_EQ(shape.last(), 4);
  EXPECT_EQ(shape[0], 2);
  EXPECT_EQ(shape[2], 4);
  EXPECT_EQ(shape[-1], 4);
  EXPECT_EQ(shape[-3], 2);
  EXPECT_THROW(shape[3], Error);
  EXPECT_THROW(shape[-4], Error);
  EXPECT_EQ(shape.to_string(), "[2, 3, 4]");
  EXPECT_EQ(shape, (Shape{2, 3, 4}));
  EXPECT_FALSE(shape == (Shape{2, 3}));
  EXPECT_FALSE(shape == (Shape{2, 3, 5}));
}

TEST(ShapeTest, ScalarsVectorsAndEmptyExtents) {
  const Shape scalar;
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.rows(), 1);
  EXPECT_EQ(scalar.last(), 1);
  EXPECT_EQ(scalar.to_string(), "[]");
  EXPECT_THROW(scalar[0], Error);

  const Shape vector{7};
  EXPECT_EQ(vector.numel(), 7);
  EXPECT_EQ(vector.rows(), 1);
  EXPECT_EQ(vector.to_string(), "[7]");

  const Shape empty{0, 16};
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.rows(), 0);

  EXPECT_EQ((Shape{1, 2, 3, 4}).numel(), 24);
  EXPECT_THROW((Shape{1, 2, 3, 4, 5}), Error);
  EXPECT_THROW((Shape{2, -1}), Error);
}

TEST(BufferTest, ReleaseRunsOnceOnDestruction) {
  int released = 0;
  {
    int storage = 0;
    Buffer buffer(&storage, sizeof(storage), nullptr, [&released] { ++released; });
    EXPECT_EQ(buffer.host_ptr(), &storage);
    EXPECT_EQ(buffer.size(), sizeof(storage));
    EXPECT_EQ(buffer.handle(), nullptr);
    EXPECT_EQ(released, 0);
  }
  EXPECT_EQ(released, 1);
}

TEST(BufferTest, WrapKeepsItsOwnerAliveUntilDestroyed) {
  auto owner = std::make_shared<std::vector<float>>(16, 1.5f);
  const std::weak_ptr<std::vector<float>> watch = owner;
  std::shared_ptr<Buffer> buffer = Buffer::wrap(owner->data(), 16 * sizeof(float), owner);
  owner.reset();
  ASSERT_FALSE(watch.expired());

  // A tensor over the buffer holds it too, so the owner outlives the last handle of either.
  Tensor tensor(buffer, 0, DType::F32, Shape{4, 4});
  buffer.reset();
  ASSERT_FALSE(watch.expired());
  EXPECT_EQ(tensor.data<float>()[15], 1.5f);
  tensor = Tensor();
  EXPECT_TRUE(watch.expired());
}

TEST(HostMemoryTest, CountsBytesInUseAndPeak) {
  HostMemory memory;
  EXPECT_EQ(memory.name(), "host");
  EXPECT_EQ(memory.bytes_in_use(), 0u);
  {
    const Tensor a = Tensor::empty(memory, DType::F32, Shape{4, 8});
    EXPECT_EQ(a.nbytes(), 128u);
    EXPECT_EQ(memory.bytes_in_use(), 128u);
    EXPECT_EQ(memory.peak_bytes(), 128u);
    {
      const Tensor b = Tensor::empty(memory, DType::F16, Shape{3, 10});
      EXPECT_EQ(memory.bytes_in_use(), 128u + 60u);
      EXPECT_EQ(memory.peak_bytes(), 128u + 60u);
      const Tensor copy = b;  // a handle, not an allocation
      EXPECT_EQ(memory.bytes_in_use(), 128u + 60u);
    }
    EXPECT_EQ(memory.bytes_in_use(), 128u);
    EXPECT_EQ(memory.peak_bytes(), 128u + 60u);
  }
  EXPECT_EQ(memory.bytes_in_use(), 0u);
  EXPECT_EQ(memory.peak_bytes(), 128u + 60u);
}

// Weights for the CPU: laid end to end in large huge-page mappings, each 64-byte aligned; a slab
// whose buffers are all gone is reused from its start; one larger than a slab gets its own.
TEST(SlabHostMemoryTest, LaysBuffersEndToEndAndCountsThem) {
  SlabHostMemory memory;
  EXPECT_EQ(memory.name(), "host-slabs");
  auto address = [](const std::shared_ptr<Buffer>& b) {
    return reinterpret_cast<uintptr_t>(b->host_ptr());
  };
  {
    auto a = memory.allocate(100);
    auto b = memory.allocate(1000);
    auto c = memory.allocate(0);
    for (const auto& buffer : {a, b, c}) {
      ASSERT_NE(buffer->host_ptr(), nullptr);
      EXPECT_EQ(address(buffer) % kBufferAlignment, 0u);
    }
    EXPECT_EQ(b->size(), 1000u);
    EXPECT_EQ(memory.bytes_in_use(), 1100u);
    std::memset(b->host_ptr(), 0x5a, b->size());  // writable, all of it
    if (HostMemory::kMapsLargeAllocations) {
      EXPECT_EQ(address(a) % HostMemory::kLargeHostAllocation, 0u);  // a slab's first buffer
      EXPECT_EQ(address(b), address(a) + 128);
      EXPECT_EQ(address(c), address(b) + 1024);
    }
    const uintptr_t first = address(a);
    a.reset();
    b.reset();
    c.reset();
    EXPECT_EQ(memory.bytes_in_use(), 0u);
    auto again = memory.allocate(64);
    if (HostMemory::kMapsLargeAllocations) {
      EXPECT_EQ(address(again), first);
    }
  }
  if (HostMemory::kMapsLargeAllocations) {
    auto small = memory.allocate(64);
    auto large = memory.allocate(SlabHostMemory::kSlabBytes + 1);
    EXPECT_EQ(address(large) % HostMemory::kLargeHostAllocation, 0u);
    EXPECT_NE(address(large), address(small) + 64);
    static_cast<char*>(large->host_ptr())[SlabHostMemory::kSlabBytes] = 1;  // its last byte
    EXPECT_EQ(memory.peak_bytes(), 64u + SlabHostMemory::kSlabBytes + 1);
  }
}

TEST(HostMemoryTest, BuffersMayOutliveTheAllocator) {
  auto memory = std::make_unique<HostMemory>();
  Tensor tensor = Tensor::empty(*memory, DType::F32, Shape{100});
  memory.reset();
  tensor.data<float>()[99] = 2.0f;
  EXPECT_EQ(tensor.data<float>()[99], 2.0f);
}

TEST(HostMemoryTest, AllocationsAre64ByteAligned) {
  HostMemory memory;
  std::vector<Tensor> tensors;  // kept alive so that each allocation is a distinct block
  for (const int64_t n : {1, 3, 15, 16, 17, 63, 64, 65, 1000, 4097}) {
    tensors.push_back(Tensor::empty(memory, DType::F32, Shape{n}));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(tensors.back().raw()) % kBufferAlignment, 0u) << n;
    tensors.push_back(Tensor::empty(memory, DType::F16, Shape{n}));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(tensors.back().raw()) % kBufferAlignment, 0u) << n;
  }
  const Tensor empty = Tensor::empty(memory, DType::F32, Shape{0, 8});
  EXPECT_NE(empty.raw(), nullptr);
  EXPECT_EQ(empty.nbytes(), 0u);
}

// Weight-sized allocations are mapped on their own at a 2 MiB boundary (for huge pages): every
// byte of an odd size is usable, distinct buffers do not overlap, and the counters see them.
TEST(HostMemoryTest, LargeAllocationsAreHugePageAlignedAndUsable) {
  HostMemory memory;
  const size_t sizes[] = {HostMemory::kLargeHostAllocation,
                          3 * HostMemory::kLargeHostAllocation + 123};
  std::vector<std::shared_ptr<Buffer>> buffers;
  size_t total = 0;
  for (const size_t size : sizes) {
    buffers.push_back(memory.allocate(size));
    total += size;
    auto* bytes = static_cast<unsigned char*>(buffers.back()->host_ptr());
    const auto address = reinterpret_cast<uintptr_t>(bytes);
    EXPECT_EQ(address % kBufferAlignment, 0u) << size;
    if (HostMemory::kMapsLargeAllocations) {
      EXPECT_EQ(address % HostMemory::kLargeHostAllocation, 0u) << size;
    }
    for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>(i * 7 + size);
  }
  EXPECT_EQ(memory.bytes_in_use(), total);
  for (size_t b = 0; b < buffers.size(); ++b) {
    const auto* bytes = static_cast<const unsigned char*>(buffers[b]->host_ptr());
    size_t wrong = 0;
    for (size_t i = 0; i < sizes[b]; ++i)
      wrong += bytes[i] != static_cast<unsigned char>(i * 7 + sizes[b]);
    EXPECT_EQ(wrong, 0u) << "buffer " << b;
  }
  buffers.clear();
  EXPECT_EQ(memory.bytes_in_use(), 0u);
  EXPECT_EQ(memory.peak_bytes(), total);
}

TEST(TensorTest, DefaultIsUndefined) {
  const Tensor tensor;
  EXPECT_FALSE(tensor.defined());
  EXPECT_EQ(tensor.raw(), nullptr);
}

TEST(TensorTest, Geometry) {
  HostMemory memory;
  const Tensor t = Tensor::empty(memory, DType::F32, Shape{2, 3, 8});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(t.dim(1), 3);
  EXPECT_EQ(t.dim(-1), 8);
  EXPECT_EQ(t.numel(), 48);
  EXPECT_EQ(t.rows(), 6);
  EXPECT_EQ(t.row_bytes(), 32u);
  EXPECT_EQ(t.nbytes(), 192u);
  EXPECT_EQ(t.byte_offset(), 0u);
  EXPECT_EQ(t.buffer()->size(), 192u);
  EXPECT_EQ(t.describe(), "f32[2, 3, 8]");
}

TEST(TensorTest, ViewsShareTheBufferAndAllocateNothing) {
  HostMemory memory;
  const Tensor parent = Tensor::empty(memory, DType::F32, Shape{4, 8});
  float* values = parent.data<float>();
  for (int i = 0; i < 32; ++i) values[i] = static_cast<float>(i);
  const size_t in_use = memory.bytes_in_use();

  const Tensor rows = parent.slice(1, 2);
  EXPECT_EQ(rows.shape(), (Shape{2, 8}));
  EXPECT_EQ(rows.buffer(), parent.buffer());
  EXPECT_EQ(address(rows), address(parent) + 1 * 8 * sizeof(float));
  EXPECT_EQ(rows.byte_offset(), 32u);
  EXPECT_EQ(rows.data<float>()[0], 8.0f);

  const Tensor flat = parent.reshape(Shape{2, 16});
  EXPECT_EQ(flat.shape(), (Shape{2, 16}));
  EXPECT_EQ(address(flat), address(parent));

  const Tensor words = parent.view(DType::I32, Shape{3, 2}, 40);
  EXPECT_EQ(address(words), address(parent) + 40);

  // A view of a view adds its offset to the first view's.
  const Tensor nested = rows.slice(1, 1).view(DType::F32, Shape{4}, 16);
  EXPECT_EQ(address(nested), address(parent) + 2 * 32 + 16);

  EXPECT_EQ(memory.bytes_in_use(), in_use);

  rows.data<float>()[3] = -1.0f;
  EXPECT_EQ(values[8 + 3], -1.0f);
  flat.data<float>()[31] = -2.0f;
  EXPECT_EQ(values[31], -2.0f);
  words.data<int32_t>()[0] = 0x3f800000;  // the bit pattern of 1.0f, at byte 40 = element 10
  EXPECT_EQ(values[10], 1.0f);
  nested.data<float>()[3] = -3.0f;  // byte 64 + 16 + 12 = element 23
  EXPECT_EQ(values[23], -3.0f);
}

TEST(TensorTest, ViewsKeepTheBufferAlive) {
  HostMemory memory;
  Tensor view;
  {
    const Tensor parent = Tensor::empty(memory, DType::F32, Shape{4, 8});
    view = parent.slice(2, 2);
  }
  EXPECT_EQ(memory.bytes_in_use(), 128u);
  view = Tensor();
  EXPECT_EQ(memory.bytes_in_use(), 0u);
}

TEST(TensorTest, SliceOfHigherRanks) {
  HostMemory memory;
  const Tensor t = Tensor::empty(memory, DType::F16, Shape{5, 3, 2, 4});
  const Tensor s = t.slice(4, 1);
  EXPECT_EQ(s.shape(), (Shape{1, 3, 2, 4}));
  EXPECT_EQ(address(s), address(t) + 4 * 3 * 2 * 4 * 2);
  const Tensor v = Tensor::empty(memory, DType::I32, Shape{10});
  EXPECT_EQ(address(v.slice(7, 3)), address(v) + 28);
  EXPECT_EQ(v.slice(10, 0).numel(), 0);
}

TEST(TensorTest, OutOfRangeWindowsThrow) {
  HostMemory memory;
  const Tensor t = Tensor::empty(memory, DType::F32, Shape{4, 8});
  EXPECT_THROW(t.slice(3, 2), Error);
  EXPECT_THROW(t.slice(-1, 1), Error);
  EXPECT_THROW(t.slice(0, -1), Error);
  EXPECT_THROW(t.slice(5, 0), Error);
  EXPECT_THROW(t.reshape(Shape{33}), Error);
  EXPECT_THROW(t.reshape(Shape{4, 4}), Error);
  EXPECT_THROW(t.view(DType::F32, Shape{33}), Error);
  EXPECT_THROW(t.view(DType::F32, Shape{8}, 100), Error);          // 100 + 32 > 128
  EXPECT_THROW(t.view(DType::F32, Shape{1}, 129), Error);          // offset past the end
  EXPECT_NO_THROW(t.view(DType::F32, Shape{8}, 96));               // exactly the last 32 bytes
  EXPECT_THROW(t.slice(1, 1).view(DType::F32, Shape{25}), Error);  // 100 bytes from byte 32
  EXPECT_THROW(Tensor(nullptr, 0, DType::F32, Shape{1}), Error);

  // slice is bounded by the tensor's own rows even where the buffer has more; view may reach any
  // part of the buffer after the tensor's start.
  const Tensor head = t.slice(0, 2);
  EXPECT_THROW(head.slice(1, 2), Error);
  EXPECT_EQ(address(head.view(DType::F32, Shape{8}, 64)), address(t) + 64);
}

TEST(TensorTest, QuantizedTensorsAreCountedInBlocks) {
  HostMemory memory;
  const Tensor q4 = Tensor::empty(memory, DType::Q4_0, Shape{3, 64});
  EXPECT_EQ(q4.row_bytes(), 36u);
  EXPECT_EQ(q4.nbytes(), 108u);
  EXPECT_EQ(memory.bytes_in_use(), 108u);
  EXPECT_EQ(address(q4.slice(2, 1)), address(q4) + 72);

  const Tensor q8 = Tensor::empty(memory, DType::Q8_0, Shape{2, 96});
  EXPECT_EQ(q8.row_bytes(), 102u);
  EXPECT_EQ(q8.nbytes(), 204u);
  EXPECT_EQ(memory.bytes_in_use(), 108u + 204u);

  EXPECT_EQ(q4.reshape(Shape{6, 32}).nbytes(), 108u);
  EXPECT_EQ(q4.reshape(Shape{192}).row_bytes(), 108u);
  EXPECT_THROW(q4.reshape(Shape{12, 16}), Error);
  EXPECT_THROW(q4.view(DType::Q4_0, Shape{2, 48}), Error);
  EXPECT_THROW(Tensor::empty(memory, DType::Q4_0, Shape{2, 33}), Error);
  EXPECT_THROW(Tensor::empty(memory, DType::Q8_0, Shape{16}), Error);
  // A 1-D quantized tensor has no whole-element rows to cut along dimension 0.
  EXPECT_THROW(q4.reshape(Shape{192}).slice(0, 32), Error);
  EXPECT_EQ(memory.bytes_in_use(), 108u + 204u);
}

// Q4_0x8 and Q8_0x8 interleave groups of eight rows: only matrices of 8·n rows, sliced on group
// boundaries.
TEST(TensorTest, RowGroupedTensorsKeepWholeGroups) {
  HostMemory memory;
  const Tensor packed = Tensor::empty(memory, DType::Q4_0x8, Shape{16, 64});
  EXPECT_EQ(packed.nbytes(), 16u * 36u);  // the bytes of Q4_0
  EXPECT_EQ(address(packed.slice(8, 8)), address(packed) + 8 * 36);
  EXPECT_THROW(packed.slice(4, 8), Error);
  EXPECT_THROW(packed.slice(8, 4), Error);
  EXPECT_THROW(Tensor::empty(memory, DType::Q4_0x8, Shape{12, 64}), Error);
  EXPECT_THROW(Tensor::empty(memory, DType::Q4_0x8, Shape{1024}), Error);
  EXPECT_THROW(packed.reshape(Shape{4, 256}), Error);
  const Tensor packed8 = Tensor::empty(memory, DType::Q8_0x8, Shape{8, 64});
  EXPECT_EQ(packed8.nbytes(), 8u * 68u);  // the bytes of Q8_0
  EXPECT_THROW(Tensor::empty(memory, DType::Q8_0x8, Shape{20, 64}), Error);
}

}  // namespace
}  // namespace edgelm
