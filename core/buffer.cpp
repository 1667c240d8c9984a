#include "core/buffer.h"

#include <cstdlib>
#include <utility>

#include "core/error.h"

namespace edgelm {

Buffer::Buffer(void* host_ptr, size_t size, void* handle, Release release)
    : host_ptr_(host_ptr), size_(size), handle_(handle), release_(std::move(release)) {}

Buffer::~Buffer() {
  if (release_) release_();
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

std::shared_ptr<Buffer> HostMemory::allocate(size_t size) {
  // aligned_alloc wants a size that is a multiple of the alignment; a zero-byte request still
  // gets a valid unique pointer.
  const size_t rounded = (size + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  void* pointer = std::aligned_alloc(kBufferAlignment, rounded == 0 ? kBufferAlignment : rounded);
  if (pointer == nullptr) EDGELM_FAIL("[memory] host allocation of ", size, " bytes failed");
  auto untrack = track(size);
  return std::make_shared<Buffer>(pointer, size, nullptr, [pointer, untrack = std::move(untrack)] {
    std::free(pointer);
    untrack();
  });
}

}  // namespace edgelm
