// Constants of the GGUF layout that the reader (models/gguf.cpp) and the writer
// (models/gguf_writer.cpp) share. Internal to models/: users of the format include models/gguf.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace edgelm::gguf_layout {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
// general.alignment when a file does not set it, and the writer's default.
inline constexpr size_t kDefaultAlignment = 32;
inline constexpr uint32_t kMaxDims = 4;

// The next multiple of `alignment` (a power of two, or any positive value) at or after `offset`.
inline size_t align_up(size_t offset, size_t alignment) {
  return offset + (alignment - offset % alignment) % alignment;
}

}  // namespace edgelm::gguf_layout
