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
  // Maps `path` read-only. Throws edgelm::Error "[<component>] <path>: <reason>" when it cannot be
  // opened or mapped or is not a regular file, so a format reader can name itself ("gguf") with
  // the path said once. An empty file maps to size() == 0 and a null data().
  static std::shared_ptr<MappedFile> open(const std::string& path, const char* component = "file");
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Drops the whole pages inside [begin, begin + bytes) from this process's resident set (the
  // bytes stay readable: a later read faults them back in from the page cache or the file). For
  // the parts of a model that were copied out of the mapping at load (converted or repacked
  // weights), so they do not count twice. Ranges outside the mapping are ignored.
  void release(const void* begin, size_t bytes) const;

 private:
  MappedFile(std::string path, const uint8_t* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const uint8_t* data_;
  size_t size_;
};

// The bytes of `path`, for the small text files of a model (config.json, tokenizer_config.json, a
// chat template). The file goes through MappedFile::open's checks, so a FIFO or a device is
// refused at once (opening a FIFO to read would wait for a writer, and /dev/zero never ends).
// Throws edgelm::Error "[file] <path>: <reason>" as MappedFile::open does.
std::string read_regular_file(const std::string& path);

}  // namespace edgelm
