#include "core/tensor.h"

#include <utility>

#include "core/error.h"

namespace edgelm {

Tensor::Tensor(std::shared_ptr<Buffer> buffer, size_t byte_offset, DType dtype, Shape shape)
    : buffer_(std::move(buffer)), byte_offset_(byte_offset), dtype_(dtype), shape_(shape) {
  EDGELM_CHECK(buffer_ != nullptr, "[tensor] null buffer");
  const size_t bytes = nbytes();  // also validates the block size
  const int64_t group = dtype_row_group(dtype_);
  EDGELM_CHECK(group == 1 || (shape_.rank() == 2 && shape_[0] % group == 0), "[tensor] ",
               describe(), ": ", dtype_name(dtype_), " is a matrix of a multiple of ", group,
               " rows");
  EDGELM_CHECK(byte_offset_ <= buffer_->size() && bytes <= buffer_->size() - byte_offset_,
               "[tensor] ", describe(), " (", bytes, " bytes at offset ", byte_offset_,
               ") does not fit in a buffer of ", buffer_->size(), " bytes");
}

Tensor Tensor::empty(Memory& memory, DType dtype, Shape shape) {
  const size_t bytes = static_cast<size_t>(shape.rows()) * dtype_row_bytes(dtype, shape.last());
  return Tensor(memory.allocate(bytes), 0, dtype, shape);
}

void* Tensor::raw() const {
  if (buffer_ == nullptr || buffer_->host_ptr() == nullptr) return nullptr;
  return static_cast<std::byte*>(buffer_->host_ptr()) + byte_offset_;
}

Tensor Tensor::reshape(Shape shape) const {
  EDGELM_CHECK(shape.numel() == shape_.numel(), "[tensor] cannot reshape ", describe(), " to ",
               shape.to_string());
  return Tensor(buffer_, byte_offset_, dtype_, shape);
}

Tensor Tensor::slice(int64_t begin, int64_t count) const {
  EDGELM_CHECK(rank() >= 2 || (rank() == 1 && !dtype_is_quantized(dtype_)),
               "[tensor] cannot slice ", describe(), " along dimension 0");
  EDGELM_CHECK(begin >= 0 && count >= 0 && begin + count <= shape_[0], "[tensor] slice [", begin,
               ", ", begin + count, ") out of range for ", describe());
  EDGELM_CHECK(begin % dtype_row_group(dtype_) == 0, "[tensor] slice of ", describe(),
               " must start on a multiple of ", dtype_row_group(dtype_), " rows, got ", begin);
  const size_t outer_bytes = nbytes() / static_cast<size_t>(shape_[0] == 0 ? 1 : shape_[0]);
  Shape shape;
  switch (rank()) {
    case 1:
      shape = Shape{count};
      break;
    case 2:
      shape = Shape{count, shape_[1]};
      break;
    case 3:
      shape = Shape{count, shape_[1], shape_[2]};
      break;
    default:
      shape = Shape{count, shape_[1], shape_[2], shape_[3]};
      break;
  }
  return Tensor(buffer_, byte_offset_ + static_cast<size_t>(begin) * outer_bytes, dtype_, shape);
}

Tensor Tensor::view(DType dtype, Shape shape, size_t byte_offset) const {
  return Tensor(buffer_, byte_offset_ + byte_offset, dtype, shape);
}

std::string Tensor::describe() const {
  return str_cat(dtype_name(dtype_), shape_.to_string());
}

}  // namespace edgelm
