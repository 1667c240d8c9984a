// Tensor shapes: up to four dimensions, row-major (the last dimension is contiguous).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace edgelm {

class Shape {
 public:
  static constexpr int kMaxRank = 4;

  Shape() = default;
  // Throws edgelm::Error on more than kMaxRank dimensions or a negative extent.
  Shape(std::initializer_list<int64_t> dims);

  int rank() const { return rank_; }
  // Extent of dimension i; negative i counts from the end (-1 is the innermost).
  int64_t operator[](int i) const;
  int64_t numel() const;
  // Number of rows: the product of all dimensions but the last (1 for rank 0 or 1).
  int64_t rows() const;
  int64_t last() const { return rank_ == 0 ? 1 : dims_[rank_ - 1]; }

  bool operator==(const Shape& other) const;
  std::string to_string() const;  // "[4, 8, 64]"

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

}  // namespace edgelm
