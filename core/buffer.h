// Buffers own bytes; Memory objects (allocators) create them and count what is in use.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace edgelm {

// Every allocation is aligned to this, so any row start a kernel sees at a 64-byte multiple offset
// is cache-line aligned and suits every SIMD width up to AVX-512.
inline constexpr size_t kBufferAlignment = 64;

// A block of memory. host_ptr() is where the CPU reads and writes it; for shared (zero-copy)
// buffers of a GPU backend it is the persistent mapping of the same bytes the device uses, and
// handle() is the backend's object for it (e.g. a cl_mem). Device-only memory has no host_ptr.
class Buffer {
 public:
  using Release = std::function<void()>;

  // `release` runs once when the buffer is destroyed (frees memory, unmaps, updates counters).
  // owns_host_pages: every whole page inside [host_ptr, host_ptr + size) is private anonymous
  // memory of this buffer alone, so release_pages() may give it back (false: file mappings,
  // memory a driver owns or has pinned).
  Buffer(void* host_ptr, size_t size, void* handle, Release release, bool owns_host_pages = false);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Wraps memory owned elsewhere (e.g. an mmapped file); `keep_alive` is held until destruction.
  static std::shared_ptr<Buffer> wrap(void* host_ptr, size_t size,
                                      std::shared_ptr<const void> keep_alive = nullptr);

  void* host_ptr() const { return host_ptr_; }
  size_t size() const { return size_; }
  void* handle() const { return handle_; }
  bool owns_host_pages() const { return owns_host_pages_; }

  // Gives the whole pages inside [offset, offset + size) back to the system
  // (madvise(MADV_DONTNEED)): resident memory drops at once, the bytes there read as zeros
  // afterwards, and a later write faults a fresh page in. The partial pages at either end are
  // kept. Returns the bytes given back: 0 when the buffer does not own its pages (see the
  // constructor) or the range holds no whole page. The caller must make sure no queued work
  // still reads or writes the range.
  size_t release_pages(size_t offset, size_t size);
  // Bytes of [offset, offset + size) that lie on pages resident in memory now (mincore), for
  // reports and tests; the whole range when the system cannot say.
  size_t resident_bytes(size_t offset, size_t size) const;

 private:
  void* host_ptr_;
  size_t size_;
  void* handle_;
  Release release_;
  bool owns_host_pages_;
};

// An allocator. Each backend exposes the Memory its ops can read and write.
class Memory {
 public:
  virtual ~Memory() = default;

  // Short name for logs: "host", "opencl-shared".
  virtual std::string name() const = 0;

  // Allocates `size` bytes aligned to kBufferAlignment. Contents are uninitialised. Throws
  // edgelm::Error when the allocation fails.
  virtual std::shared_ptr<Buffer> allocate(size_t size) = 0;

  // Bytes currently held by live buffers of this allocator, and the most ever held at once.
  size_t bytes_in_use() const { return counters_->in_use.load(std::memory_order_relaxed); }
  size_t peak_bytes() const { return counters_->peak.load(std::memory_order_relaxed); }

 protected:
  // Counts `size` bytes as in use and returns the action that un-counts them; allocators chain it
  // into the buffer's release. The counters outlive the allocator if buffers do.
  std::function<void()> track(size_t size);

 private:
  struct Counters {
    std::atomic<size_t> in_use{0};
    std::atomic<size_t> peak{0};
  };
  std::shared_ptr<Counters> counters_ = std::make_shared<Counters>();
};

// Plain host memory, 64-byte aligned; its buffers own their pages (Buffer::release_pages).
// Allocations of kLargeHostAllocation bytes or more (weight matrices, KV caches) are mapped on
// their own at a 2 MiB boundary and offered to the kernel for transparent huge pages (Linux
// madvise(MADV_HUGEPAGE)): streaming a matrix through 4 KiB pages costs a TLB miss every 4 KiB,
// which under a hypervisor's nested page tables cut one core's read bandwidth by about a third on
// the dev VM (docs/memory_model.md). Where the kernel has no transparent huge pages the mapping
// simply keeps 4 KiB pages. Smaller allocations, and all of them in AddressSanitizer builds (so
// overflows stay detectable), come from the C heap.
class HostMemory final : public Memory {
 public:
  static constexpr size_t kLargeHostAllocation = size_t{2} << 20;
#if defined(__SANITIZE_ADDRESS__)
  static constexpr bool kMapsLargeAllocations = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  static constexpr bool kMapsLargeAllocations = false;
#else
  static constexpr bool kMapsLargeAllocations = true;
#endif
#else
  static constexpr bool kMapsLargeAllocations = true;
#endif

  std::string name() const override {
    return "host";
  }
  std::shared_ptr<Buffer> allocate(size_t size) override;
};

// Host memory for what stays as long as a model does (the matrices the loader repacks):
// allocations laid end to end, in the order they come, in mappings of kSlabBytes or more at 2 MiB
// boundaries, offered for transparent huge pages as HostMemory's large ones are. With a mapping
// per matrix, a matrix under 2 MiB (a 1B layer's K and V projections) and the last partial 2 MiB
// of every larger one stayed on 4 KiB pages: 17 % of a Llama-3.2-1B layer's Q4_0x8 bytes. Decoding
// from weights laid out this way took 1.5-2.3 % less time per token in the dev VM's fast bandwidth
// phase (docs/performance.md). A slab is unmapped once every buffer in it is gone; the unused end
// of a slab is never touched, so it holds address space, not memory. AddressSanitizer builds take
// every allocation from the C heap, as HostMemory does. Its buffers own the whole pages inside
// them (the pages at either end may hold a neighbour's bytes too).
class SlabHostMemory final : public Memory {
 public:
  static constexpr size_t kSlabBytes = size_t{256} << 20;

  std::string name() const override { return "host-slabs"; }
  std::shared_ptr<Buffer> allocate(size_t size) override;

 private:
  struct Slab;
  std::mutex mutex_;
  std::shared_ptr<Slab> slab_;  // the one being filled
  size_t used_ = 0;             // bytes of it handed out
};

}  // namespace edgelm
