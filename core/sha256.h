// SHA-256 (FIPS 180-4), for naming the exact files an experiment ran on (a model, a text) in its
// results, so that a run can be repeated on the same bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace edgelm {

class Sha256 {
 public:
  Sha256();
  // Adds bytes to the message; may be called any number of times.
  void update(std::span<const uint8_t> bytes);
  // Pads the message and returns its digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> finish();

 private:
  void compress(const uint8_t* block);  // one 64-byte block

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_bytes_ = 0;
};

// The lowercase hex digest of `bytes`.
std::string sha256_hex(std::span<const uint8_t> bytes);
// The lowercase hex digest of the file at `path`, read in pieces. Throws edgelm::Error naming the
// path when it cannot be opened or read.
std::string sha256_file_hex(const std::string& path);

}  // namespace edgelm
