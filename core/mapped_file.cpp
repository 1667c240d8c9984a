#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace edgelm {

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path, const char* component) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer before the check below can refuse
  // it; on a regular file the flag changes nothing.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) EDGELM_FAIL("[", component, "] ", path, ": cannot open: ", std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    EDGELM_FAIL("[", component, "] ", path, ": cannot stat: ", std::strerror(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    EDGELM_FAIL("[", component, "] ", path, ": not a regular file");
  }
  const auto size = static_cast<size_t>(info.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      EDGELM_FAIL("[", component, "] ", path, ": cannot map ", size,
                  " bytes: ", std::strerror(error));
    }
    data = static_cast<const uint8_t*>(mapping);
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  return std::shared_ptr<MappedFile>(new MappedFile(path, data, size));
}

void MappedFile::release(const void* begin, size_t bytes) const {
  const auto first = reinterpret_cast<uintptr_t>(begin);
  const auto mapped = reinterpret_cast<uintptr_t>(data_);
  if (data_ == nullptr || first < mapped || first + bytes > mapped + size_) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t start = (first + page - 1) / page * page;
  const uintptr_t end = (first + bytes) / page * page;
  // A private read-only file mapping: MADV_DONTNEED only unmaps clean pages; nothing is lost.
  if (start < end) ::madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
}

std::string read_regular_file(const std::string& path) {
  const std::shared_ptr<MappedFile> file = MappedFile::open(path);
  if (file->size() == 0) return {};
  return std::string(reinterpret_cast<const char*>(file->data()), file->size());
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace edgelm
