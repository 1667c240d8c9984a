// Read-only memory mapping of a whole file. Weights are used in place from the mapping, so a model
// file costs page cache, not heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace edgelm {

class MappedFile {
 public:
  // Maps `path` read-only. Throws edgelm::Error "[file] <path>: <reason>" when it cannot be opened
  // or mapped. An empty file maps to size() == 0 and a null data().
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

}  // namespace edgelm
