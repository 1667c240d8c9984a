// Tensor: a typed, shaped window onto a Buffer. Copying a Tensor copies the handle, never the
// bytes; views share the buffer. Tensors are always contiguous (row-major, rows of
// dtype_row_bytes(dtype, last dim) bytes), which every kernel may assume.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace edgelm {

class Memory;

class Tensor {
 public:
  Tensor() = default;
  // A tensor over `buffer` starting at `byte_offset`. Throws edgelm::Error if it does not fit or
  // the last dimension is not a multiple of the dtype's block size.
  Tensor(std::shared_ptr<Buffer> buffer, size_t byte_offset, DType dtype, Shape shape);

  // Allocates a new buffer from `memory` (the only way a Tensor allocates).
  static Tensor empty(Memory& memory, DType dtype, Shape shape);

  bool defined() const { return buffer_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const { return shape_.numel(); }
  int64_t rows() const { return shape_.rows(); }
  size_t row_bytes() const { return dtype_row_bytes(dtype_, shape_.last()); }
  size_t nbytes() const { return static_cast<size_t>(shape_.rows()) * row_bytes(); }
  size_t byte_offset() const { return byte_offset_; }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }

  // Host address of the first byte (null when the buffer has no host mapping). A handle is const
  // but the bytes are not: ops write their outputs through const Tensor&.
  void* raw() const;
  template <class T>
  T* data() const {
    return static_cast<T*>(raw());
  }

  // Same bytes, new shape with the same number of elements.
  Tensor reshape(Shape shape) const;
  // Rows [begin, begin + count) along dimension 0; the other dimensions are kept.
  Tensor slice(int64_t begin, int64_t count) const;
  // Any window of the same buffer, at a byte offset from this tensor's start.
  Tensor view(DType dtype, Shape shape, size_t byte_offset = 0) const;

  // "f32[4, 8, 64]"
  std::string describe() const;

 private:
  std::shared_ptr<Buffer> buffer_;
  size_t byte_offset_ = 0;
  DType dtype_ = DType::F32;
  Shape shape_;
};

}  // namespace edgelm
