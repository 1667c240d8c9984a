#include "core/buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "core/error.h"

namespace edgelm {

Buffer::Buffer(void* host_ptr, size_t size, void* handle, Release release, bool owns_host_pages)
    : host_ptr_(host_ptr),
      size_(size),
      handle_(handle),
      release_(std::move(release)),
      owns_host_pages_(owns_host_pages && host_ptr != nullptr) {}

Buffer::~Buffer() {
  if (release_) release_();
}

namespace {

size_t page_size() {
  static const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

size_t Buffer::release_pages(size_t offset, size_t size) {
  EDGELM_CHECK(offset <= size_ && size <= size_ - offset, "[memory] release of bytes [", offset,
               ", ", offset + size, ") outside a buffer of ", size_);
  if (!owns_host_pages_ || size == 0) return 0;
  const size_t page = page_size();
  const auto begin = reinterpret_cast<uintptr_t>(host_ptr_) + offset;
  const uintptr_t first = (begin + page - 1) / page * page;  // whole pages only
  const uintptr_t last = (begin + size) / page * page;
  if (last <= first) return 0;
  // On private anonymous memory the kernel frees the pages now and maps zero-filled ones on the
  // next touch. MADV_FREE would free them only under pressure, which no report could show.
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) return 0;
  return last - first;
}

size_t Buffer::resident_bytes(size_t offset, size_t size) const {
  EDGELM_CHECK(offset <= size_ && size <= size_ - offset, "[memory] residency of bytes [", offset,
               ", ", offset + size, ") outside a buffer of ", size_);
  if (host_ptr_ == nullptr || size == 0) return 0;
  const size_t page = page_size();
  const auto begin = reinterpret_cast<uintptr_t>(host_ptr_) + offset;
  const uintptr_t end = begin + size;
  const uintptr_t first = begin / page * page;
  const size_t n_pages = (end - first + page - 1) / page;
  // One byte per page; queried in blocks so a large buffer needs no large vector.
  constexpr size_t kBlock = 4096;
  unsigned char status[kBlock];
  size_t resident = 0;
  for (size_t done = 0; done < n_pages; done += kBlock) {
    const size_t count = std::min(kBlock, n_pages - done);
    const uintptr_t block = first + done * page;
    if (::mincore(reinterpret_cast<void*>(block), count * page, status) != 0) return size;
    for (size_t i = 0; i < count; ++i) {
      if ((status[i] & 1) == 0) continue;
      const uintptr_t page_begin = std::max(block + i * page, begin);
      const uintptr_t page_end = std::min(block + (i + 1) * page, end);
      resident += page_end - page_begin;
    }
  }
  return resident;
}

std::shared_ptr<Buffer> Buffer::wrap(void* host_ptr, size_t size,
                                     std::shared_ptr<const void> keep_alive) {
  return std::make_shared<Buffer>(host_ptr, size, nullptr,
                                  [keep = std::move(keep_alive)]() mutable { keep.reset(); });
}

std::function<void()> Memory::track(size_t size) {
  const size_t now = counters_->in_use.fetch_add(size, std::memory_order_relaxed) + size;
  size_t peak = counters_->peak.load(std::memory_order_relaxed);
  while (now > peak && !counters_->peak.compare_exchange_weak(peak, now)) {
  }
  return
      [counters = counters_, size] { counters->in_use.fetch_sub(size, std::memory_order_relaxed); };
}

namespace {

// n rounded up to a multiple of `multiple`.
constexpr size_t round_up(size_t n, size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// `size` bytes of fresh anonymous memory starting at a multiple of `alignment` (a power of two
// and a multiple of the page size), marked for transparent huge pages where the kernel has them.
// Returns null when the mapping fails; *mapped_bytes is what to pass to munmap.
void* map_aligned(size_t size, size_t alignment, size_t* mapped_bytes) {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t length = round_up(size, page);
  // Over-reserve by the alignment, then return the unaligned head and the tail past the length.
  const size_t reserve = length + alignment;
  void* base = ::mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<uintptr_t>(base);
  const uintptr_t aligned = round_up(start, alignment);
  if (aligned > start) ::munmap(base, aligned - start);
  const uintptr_t end = aligned + length;
  if (start + reserve > end) ::munmap(reinterpret_cast<void*>(end), start + reserve - end);
#if defined(MADV_HUGEPAGE)
  // EINVAL on kernels built without transparent huge pages: the mapping keeps small pages.
  ::madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);
#endif
  *mapped_bytes = length;
  return reinterpret_cast<void*>(aligned);
}

// `size` bytes from the C heap, 64-byte aligned (a zero-byte request still gets a valid unique
// pointer); throws when the heap has none. Free with std::free.
void* heap_allocate(size_t size) {
  // aligned_alloc wants a size that is a multiple of the alignment.
  const size_t rounded = round_up(size, kBufferAlignment);
  void* pointer = std::aligned_alloc(kBufferAlignment, rounded == 0 ? kBufferAlignment : rounded);
  if (pointer == nullptr) EDGELM_FAIL("[memory] host allocation of ", size, " bytes failed");
  return pointer;
}

// The buffer over `pointer` from heap_allocate: frees it, then runs `untrack`.
std::shared_ptr<Buffer> heap_buffer(void* pointer, size_t size, std::function<void()> untrack) {
  return std::make_shared<Buffer>(
      pointer, size, nullptr,
      [pointer, untrack = std::move(untrack)] {
        std::free(pointer);
        untrack();
      },
      /*owns_host_pages=*/true);
}

}  // namespace

std::shared_ptr<Buffer> HostMemory::allocate(size_t size) {
  if (kMapsLargeAllocations && size >= kLargeHostAllocation) {
    size_t mapped = 0;
    void* pointer = map_aligned(size, kLargeHostAllocation, &mapped);
    if (pointer == nullptr) EDGELM_FAIL("[memory] host allocation of ", size, " bytes failed");
    auto untrack = track(size);
    return std::make_shared<Buffer>(
        pointer, size, nullptr,
        [pointer, mapped, untrack = std::move(untrack)] {
          ::munmap(pointer, mapped);
          untrack();
        },
        /*owns_host_pages=*/true);
  }
  void* pointer = heap_allocate(size);
  return heap_buffer(pointer, size, track(size));
}

struct SlabHostMemory::Slab {
  std::byte* base = nullptr;
  size_t mapped = 0;  // its bytes, all usable (a multiple of 2 MiB)
  ~Slab() {
    if (base != nullptr) ::munmap(base, mapped);
  }
};

std::shared_ptr<Buffer> SlabHostMemory::allocate(size_t size) {
  if (!HostMemory::kMapsLargeAllocations) {
    void* pointer = heap_allocate(size);
    return heap_buffer(pointer, size, track(size));
  }
  const size_t rounded = std::max(kBufferAlignment, round_up(size, kBufferAlignment));
  std::shared_ptr<Slab> slab;
  std::byte* pointer = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (slab_ != nullptr && slab_.use_count() == 1) used_ = 0;  // every buffer in it is gone
    if (slab_ == nullptr || slab_->mapped - used_ < rounded) {
      constexpr size_t kHugePage = HostMemory::kLargeHostAllocation;
      const size_t bytes = std::max(kSlabBytes, round_up(rounded, kHugePage));
      auto fresh = std::make_shared<Slab>();
      fresh->base = static_cast<std::byte*>(map_aligned(bytes, kHugePage, &fresh->mapped));
      if (fresh->base == nullptr)
        EDGELM_FAIL("[memory] host allocation of ", size, " bytes failed (slab of ", bytes,
                    " bytes)");
      slab_ = std::move(fresh);
      used_ = 0;
    }
    slab = slab_;
    pointer = slab->base + used_;
    used_ += rounded;
  }
  auto untrack = track(size);
  return std::make_shared<Buffer>(
      pointer, size, nullptr,
      [slab = std::move(slab), untrack = std::move(untrack)]() mutable {
        slab.reset();
        untrack();
      },
      /*owns_host_pages=*/true);
}

}  // namespace edgelm
