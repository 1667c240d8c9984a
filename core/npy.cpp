#include "core/npy.h"

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/mapped_file.h"

namespace edgelm {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) text += ",";
    if (i + 1 < shape.size()) text += " ";
  }
  return text + ")";
}

}  // namespace

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces and ended with a
  // newline so the data starts at a multiple of 64 bytes.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  int64_t count = 1;
  for (int64_t d : shape) count *= d;

  std::ofstream out(path, std::ios::binary);
  if (!out) EDGELM_FAIL("[npy] ", path, ": cannot open for writing");
  out.write(kMagic, 6);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const auto length = static_cast<uint16_t>(header.size());
  const char length_bytes[2] = {static_cast<char>(length & 0xff), static_cast<char>(length >> 8)};
  out.write(length_bytes, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data),
            static_cast<std::streamsize>(count * sizeof(float)));
  // Closed before the check: what the stream still buffers (all of a small array) is written only
  // now, and a full disk shows only here.
  out.close();
  if (!out) EDGELM_FAIL("[npy] ", path, ": write failed");
}

NpyArray read_npy(const std::string& path) {
  const auto file = MappedFile::open(path);
  const uint8_t* bytes = file->data();
  const size_t size = file->size();
  if (size < 10 || std::memcmp(bytes, kMagic, 6) != 0)
    EDGELM_FAIL("[npy] ", path, ": not a .npy file");
  if (bytes[6] != 1) EDGELM_FAIL("[npy] ", path, ": unsupported format version ", int{bytes[6]});
  const size_t header_length = bytes[8] | (bytes[9] << 8);
  if (10 + header_length > size) EDGELM_FAIL("[npy] ", path, ": header longer than the file");
  const std::string header(reinterpret_cast<const char*>(bytes + 10), header_length);
  if (header.find("'descr': '<f4'") == std::string::npos) {
    EDGELM_FAIL("[npy] ", path, ": only little-endian float32 ('<f4') arrays are supported");
  }
  if (header.find("'fortran_order': False") == std::string::npos) {
    EDGELM_FAIL("[npy] ", path, ": Fortran-order arrays are not supported");
  }
  const size_t open = header.find("'shape': (");
  const size_t close = header.find(')', open);
  if (open == std::string::npos || close == std::string::npos) {
    EDGELM_FAIL("[npy] ", path, ": header has no shape");
  }
  NpyArray array;
  int64_t count = 1;
  const std::string dims = header.substr(open + 10, close - open - 10);
  size_t position = 0;
  while (position < dims.size()) {
    while (position < dims.size() && (dims[position] == ' ' || dims[position] == ',')) ++position;
    if (position >= dims.size()) break;
    size_t used = 0;
    const int64_t dim = std::stoll(dims.substr(position), &used);
    if (dim < 0) EDGELM_FAIL("[npy] ", path, ": negative dimension");
    array.shape.push_back(dim);
    count *= dim;
    position += used;
  }
  const size_t data_bytes = static_cast<size_t>(count) * sizeof(float);
  if (10 + header_length + data_bytes != size) {
    EDGELM_FAIL("[npy] ", path, ": shape ", shape_text(array.shape), " needs ", data_bytes,
                " data bytes, the file has ", size - 10 - header_length);
  }
  array.data.resize(static_cast<size_t>(count));
  std::memcpy(array.data.data(), bytes + 10 + header_length, data_bytes);
  return array;
}

}  // namespace edgelm
