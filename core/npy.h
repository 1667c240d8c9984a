// Minimal NumPy .npy (format 1.0) reading and writing of float32 and int32 arrays, for logit dumps
// and test fixtures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace edgelm {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major
};

// Writes a little-endian float32 array. Throws edgelm::Error on I/O failure.
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data);

// Reads a little-endian float32 ('<f4'), C-order array. Throws edgelm::Error naming the file and
// the problem for anything else.
NpyArray read_npy(const std::string& path);

}  // namespace edgelm
