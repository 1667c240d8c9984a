// Scratch files for the GGUF tests (test_gguf*.cpp, one executable): a path per name, and whole
// files written and read back byte for byte.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace edgelm::testing {

// <temp>/edgelm_test_gguf_<name>.gguf
inline std::string gguf_temp_path(const std::string& name) {
  return ::testing::TempDir() + "edgelm_test_gguf_" + name + ".gguf";
}

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace edgelm::testing
