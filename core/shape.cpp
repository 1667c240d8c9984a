#include "core/shape.h"

#include "core/error.h"

namespace edgelm {

Shape::Shape(std::initializer_list<int64_t> dims) {
  EDGELM_CHECK(dims.size() <= kMaxRank, "[shape] rank ", dims.size(), " exceeds ", kMaxRank);
  for (int64_t d : dims) {
    EDGELM_CHECK(d >= 0, "[shape] negative extent ", d);
    dims_[rank_++] = d;
  }
}

int64_t Shape::operator[](int i) const {
  const int index = i < 0 ? rank_ + i : i;
  EDGELM_CHECK(index >= 0 && index < rank_, "[shape] dimension ", i, " out of range for ",
               to_string());
  return dims_[index];
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

int64_t Shape::rows() const {
  int64_t n = 1;
  for (int i = 0; i + 1 < rank_; ++i) n *= dims_[i];
  return n;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] != other.dims_[i]) return false;
  }
  return true;
}

std::string Shape::to_string() const {
  std::string text = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(dims_[i]);
  }
  return text + "]";
}

}  // namespace edgelm
