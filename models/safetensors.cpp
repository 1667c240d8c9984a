#include "models/safetensors.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace edgelm {
namespace {

using Json = nlohmann::json;

constexpr size_t kLengthBytes = 8;  // the u64 header length that starts every file
// The reference implementation's limit (MAX_HEADER_SIZE): an entry is about 100 bytes, so even
// tens of thousands of tensors need a few MB; a larger length means a corrupt or hostile file, and
// refusing it keeps a bad length from turning into a huge parse.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kSingleFileName = "model.safetensors";
constexpr const char* kIndexFileName = "model.safetensors.index.json";

struct DTypeName {
  const char* name;  // as spelled in the header
  DType dtype;
};
constexpr std::array<DTypeName, 4> kDTypeNames = {{
    {"F32", DType::F32},
    {"F16", DType::F16},
    {"BF16", DType::BF16},
    {"I32", DType::I32},
}};
constexpr const char* kSupportedDTypes = "F32, F16, BF16, I32";

template <class... Args>
[[noreturn]] void fail(const std::string& path, Args&&... args) {
  EDGELM_FAIL("[safetensors] ", path, ": ", std::forward<Args>(args)...);
}

std::optional<DType> dtype_from_header(std::string_view name) {
  for (const DTypeName& entry : kDTypeNames) {
    if (name == entry.name) return entry.dtype;
  }
  return std::nullopt;
}

const char* header_dtype_name(DType dtype) {
  for (const DTypeName& entry : kDTypeNames) {
    if (entry.dtype == dtype) return entry.name;
  }
  return nullptr;
}

// The parser's reason without nlohmann's "[json.exception.parse_error.101] " tag, which would read
// like a second component prefix.
std::string json_reason(const Json::exception& error) {
  std::string reason = error.what();
  if (reason.starts_with("[json.exception.")) {
    const size_t end = reason.find("] ");
    if (end != std::string::npos) reason.erase(0, end + 2);
  }
  return reason;
}

// Parses `size` bytes at `text` as one JSON value; `what` ("header", "index") names it in errors.
Json parse_json(const std::string& path, const char* what, const char* text, size_t size,
                const Json::parser_callback_t& callback = nullptr) {
  // nlohmann stops at a NUL byte as if the input ended there, which would silently ignore the
  // rest; a raw NUL is never valid JSON, so it is refused.
  if (const void* nul = size == 0 ? nullptr : std::memchr(text, '\0', size)) {
    fail(path, "malformed JSON ", what, ": NUL byte at offset ",
         static_cast<const char*>(nul) - text);
  }
  try {
    // An empty file maps to a null pointer, hence the string_view.
    return Json::parse(std::string_view(size == 0 ? "" : text, size), callback);
  } catch (const Json::exception& error) {
    fail(path, "malformed JSON ", what, ": ", json_reason(error));
  }
}

// A short rendering of a JSON value for error messages. Containers are named by type only: dumping
// one from a hostile header could print megabytes or recurse through deep nesting.
std::string describe(const Json& value) {
  if (value.is_structured()) return value.type_name();
  constexpr size_t kMaxChars = 40;
  std::string text = value.dump();
  if (text.size() > kMaxChars) text = text.substr(0, kMaxChars - 3) + "...";
  return text;
}

// A non-negative JSON integer; nullopt for negative, fractional or non-numeric values.
std::optional<uint64_t> as_u64(const Json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value.get<int64_t>());
  }
  return std::nullopt;
}

std::string dims_string(const std::vector<uint64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(dims[i]);
  }
  return text + "]";
}

// Bytes of a tensor of `dims` with `element_bytes` per element; nullopt when a dimension does not
// fit Shape's int64_t or the product overflows 64 bits.
std::optional<uint64_t> checked_nbytes(const std::vector<uint64_t>& dims, uint64_t element_bytes) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t product = element_bytes;
  for (uint64_t dim : dims) {
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    if (dim != 0 && product > kMax / dim) return std::nullopt;
    product *= dim;
  }
  return product;
}

Shape make_shape(const std::vector<uint64_t>& dims) {
  std::array<int64_t, Shape::kMaxRank> d{};
  for (size_t i = 0; i < dims.size(); ++i) d[i] = static_cast<int64_t>(dims[i]);
  switch (dims.size()) {
    case 0:
      return Shape();
    case 1:
      return Shape{d[0]};
    case 2:
      return Shape{d[0], d[1]};
    case 3:
      return Shape{d[0], d[1], d[2]};
    default:
      return Shape{d[0], d[1], d[2], d[3]};
  }
}

const Json* find_field(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// Validates one header entry against the data block [data, data + data_size).
SafetensorsTensor parse_tensor(const std::string& path, const std::string& name, const Json& entry,
                               const uint8_t* data, size_t data_size) {
  if (!entry.is_object()) {
    fail(path, "tensor '", name, "': entry is not an object (it is ", describe(entry), ")");
  }

  const Json* dtype_json = find_field(entry, "dtype");
  if (dtype_json == nullptr) fail(path, "tensor '", name, "': missing \"dtype\"");
  if (!dtype_json->is_string()) {
    fail(path, "tensor '", name, "': \"dtype\" is not a string (it is ", describe(*dtype_json),
         ")");
  }
  const std::string& dtype_text = dtype_json->get_ref<const std::string&>();
  const std::optional<DType> dtype = dtype_from_header(dtype_text);
  if (!dtype) {
    fail(path, "tensor '", name, "': unsupported dtype ", dtype_text,
         " (supported: ", kSupportedDTypes, ")");
  }

  const Json* shape_json = find_field(entry, "shape");
  if (shape_json == nullptr) fail(path, "tensor '", name, "': missing \"shape\"");
  if (!shape_json->is_array()) {
    fail(path, "tensor '", name, "': \"shape\" is not an array (it is ", describe(*shape_json),
         ")");
  }
  if (shape_json->size() > static_cast<size_t>(Shape::kMaxRank)) {
    fail(path, "tensor '", name, "': rank ", shape_json->size(), " exceeds the maximum of ",
         Shape::kMaxRank);
  }
  std::vector<uint64_t> dims;
  for (size_t i = 0; i < shape_json->size(); ++i) {
    const std::optional<uint64_t> dim = as_u64((*shape_json)[i]);
    if (!dim) {
      fail(path, "tensor '", name, "': shape[", i, "] is ", describe((*shape_json)[i]),
           ", not a non-negative integer");
    }
    dims.push_back(*dim);
  }
  const std::optional<uint64_t> nbytes = checked_nbytes(dims, dtype_block_bytes(*dtype));
  if (!nbytes) {
    fail(path, "tensor '", name, "': shape ", dims_string(dims), " of ", dtype_text,
         " is too large (its size overflows 64 bits)");
  }

  const Json* offsets_json = find_field(entry, "data_offsets");
  if (offsets_json == nullptr) fail(path, "tensor '", name, "': missing \"data_offsets\"");
  if (!offsets_json->is_array() || offsets_json->size() != 2) {
    fail(path, "tensor '", name, "': \"data_offsets\" is not an array of two offsets (it is ",
         describe(*offsets_json), ")");
  }
  std::array<uint64_t, 2> offsets{};
  for (size_t i = 0; i < 2; ++i) {
    const std::optional<uint64_t> offset = as_u64((*offsets_json)[i]);
    if (!offset) {
      fail(path, "tensor '", name, "': data_offsets[", i, "] is ", describe((*offsets_json)[i]),
           ", not a non-negative integer");
    }
    offsets[i] = *offset;
  }
  const auto [begin, end] = offsets;
  if (end < begin) {
    fail(path, "tensor '", name, "': data_offsets [", begin, ", ", end, "] end before they begin");
  }
  if (end > data_size) {
    fail(path, "tensor '", name, "': data_offsets [", begin, ", ", end,
         "] exceed the data block of ", data_size, " bytes");
  }
  if (end - begin != *nbytes) {
    fail(path, "tensor '", name, "': shape ", dims_string(dims), " of ", dtype_text, " needs ",
         *nbytes, " bytes but data_offsets span ", end - begin);
  }

  SafetensorsTensor tensor;
  tensor.name = name;
  tensor.dtype = *dtype;
  tensor.shape = make_shape(dims);
  tensor.data = data + begin;
  tensor.nbytes = static_cast<size_t>(*nbytes);
  return tensor;
}

// The reference implementation's layout rule, checked on tensors sorted by data: each tensor
// starts where the one before it ends (the first at the data block's start), and the last ends at
// the end of the file. Overlapping tensors would alias each other's bytes; a gap or trailing bytes
// mean a header that does not describe its data (both are what a corrupt or hand-edited header
// looks like).
void check_layout(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                  const uint8_t* data, size_t data_size) {
  size_t end = 0;  // of the data seen so far, from the block's start
  const SafetensorsTensor* previous = nullptr;
  for (const SafetensorsTensor& tensor : tensors) {
    const auto begin = static_cast<size_t>(tensor.data - data);
    if (begin < end) {
      fail(path, "tensors '", previous->name, "' [", previous->data - data, ", ", end, "] and '",
           tensor.name, "' [", begin, ", ", begin + tensor.nbytes, "] overlap");
    }
    if (begin > end) {
      if (previous == nullptr) {
        fail(path, "the data block's first ", begin, " bytes belong to no tensor (the first, '",
             tensor.name, "', begins at ", begin, ")");
      }
      fail(path, "bytes [", end, ", ", begin, ") of the data block, between tensors '",
           previous->name, "' and '", tensor.name, "', belong to no tensor");
    }
    end = begin + tensor.nbytes;
    previous = &tensor;
  }
  if (end != data_size) {
    if (previous == nullptr) fail(path, "the data block holds ", data_size, " bytes but no tensor");
    fail(path, "the data block's last ", data_size - end, " bytes, after tensor '", previous->name,
         "' ends at ", end, ", belong to no tensor");
  }
}

// A shard name from an index must be a file directly inside the model folder.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile result;
  result.path_ = path;
  const std::shared_ptr<MappedFile> file = MappedFile::open(path, "safetensors");
  const size_t file_size = file->size();
  if (file_size < kLengthBytes) {
    fail(path, "file is ", file_size, " bytes, shorter than the ", kLengthBytes,
         "-byte header length");
  }

  uint64_t header_bytes = 0;  // little-endian whatever the host's byte order
  for (size_t i = 0; i < kLengthBytes; ++i) {
    header_bytes |= static_cast<uint64_t>(file->data()[i]) << (8 * i);
  }
  if (header_bytes > kMaxHeaderBytes) {
    fail(path, "header length ", header_bytes, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  }
  if (header_bytes > file_size - kLengthBytes) {
    fail(path, "header length ", header_bytes, " is larger than the ", file_size - kLengthBytes,
         " bytes that follow it (file size ", file_size, ")");
  }
  const auto* header_begin = reinterpret_cast<const char*>(file->data() + kLengthBytes);
  const uint8_t* data = file->data() + kLengthBytes + header_bytes;
  const size_t data_size = file_size - kLengthBytes - static_cast<size_t>(header_bytes);

  // nlohmann keeps the last of repeated keys; a repeated tensor name would silently hide a tensor,
  // so the callback records it.
  std::unordered_set<std::string> seen;
  std::string repeated;
  const auto on_event = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && repeated.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second) repeated = key;
    }
    return true;
  };
  const Json header =
      parse_json(path, "header", header_begin, static_cast<size_t>(header_bytes), on_event);
  if (!header.is_object()) {
    fail(path, "header is not a JSON object (it is ", describe(header), ")");
  }
  if (!repeated.empty()) fail(path, "tensor '", repeated, "' appears twice in the header");

  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (value.is_null()) continue;  // the reference implementation accepts null as "none"
      if (!value.is_object()) {
        fail(path, "\"__metadata__\" is not an object (it is ", describe(value), ")");
      }
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          fail(path, "\"__metadata__\" value of '", meta_key, "' is not a string (it is ",
               describe(meta_value), ")");
        }
        result.metadata_[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    result.tensors_.push_back(parse_tensor(path, key, value, data, data_size));
    result.tensors_.back().file = file;
  }

  // Data order is file order; ties (empty tensors) keep the header's sorted-by-name order.
  std::stable_sort(result.tensors_.begin(), result.tensors_.end(),
                   [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
                     if (a.data != b.data) return a.data < b.data;
                     return a.nbytes < b.nbytes;
                   });
  check_layout(path, result.tensors_, data, data_size);
  for (size_t i = 0; i < result.tensors_.size(); ++i) result.index_[result.tensors_[i].name] = i;
  return result;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

SafetensorsModel SafetensorsModel::open(const std::string& dir) {
  namespace fs = std::filesystem;
  SafetensorsModel model;
  model.dir_ = dir;
  const fs::path folder(dir);
  const fs::path single_path = folder / kSingleFileName;
  const fs::path index_path = folder / kIndexFileName;
  std::error_code ignored;  // a path that cannot be examined is treated as absent
  if (!fs::is_directory(folder, ignored)) {
    fail(dir, fs::exists(folder, ignored) ? "not a folder" : "no such folder",
         " (expected one holding ", kSingleFileName, " or ", kIndexFileName, ")");
  }

  // The file that a duplicate tensor is reported against: the index when there is one.
  std::string report_path = single_path.string();
  if (fs::exists(single_path, ignored)) {
    model.files_.push_back(SafetensorsFile::open(single_path.string()));
  } else if (fs::exists(index_path, ignored)) {
    report_path = index_path.string();
    const std::shared_ptr<MappedFile> file = MappedFile::open(report_path, "safetensors");
    if (file->size() > kMaxHeaderBytes) {
      fail(report_path, "index is ", file->size(), " bytes, more than the limit of ",
           kMaxHeaderBytes);
    }
    const Json index =
        parse_json(report_path, "index", reinterpret_cast<const char*>(file->data()), file->size());
    if (!index.is_object()) {
      fail(report_path, "index is not a JSON object (it is ", describe(index), ")");
    }
    const Json* weight_map = find_field(index, "weight_map");
    if (weight_map == nullptr) fail(report_path, "missing \"weight_map\"");
    if (!weight_map->is_object()) {
      fail(report_path, "\"weight_map\" is not an object (it is ", describe(*weight_map), ")");
    }
    if (weight_map->empty()) fail(report_path, "\"weight_map\" lists no tensors");

    std::map<std::string, std::vector<std::string>> shard_tensors;  // shard -> tensors listed
    for (const auto& [name, shard] : weight_map->items()) {
      if (!shard.is_string()) {
        fail(report_path, "\"weight_map\" entry of tensor '", name, "' is not a string (it is ",
             describe(shard), ")");
      }
      const std::string& shard_name = shard.get_ref<const std::string&>();
      if (!is_plain_file_name(shard_name)) {
        fail(report_path, "\"weight_map\" entry of tensor '", name, "': shard '", shard_name,
             "' is not a file name inside the folder");
      }
      shard_tensors[shard_name].push_back(name);
    }
    for (const auto& [shard_name, names] : shard_tensors) {
      const fs::path shard_path = folder / shard_name;
      if (!fs::exists(shard_path, ignored)) {
        fail(report_path, "shard '", shard_name, "' (listed for tensor '", names.front(),
             "') does not exist");
      }
      SafetensorsFile shard = SafetensorsFile::open(shard_path.string());
      for (const std::string& name : names) {
        if (shard.find(name) == nullptr) {
          fail(report_path, "tensor '", name, "' is listed in shard '", shard_name,
               "' but absent from it");
        }
      }
      model.files_.push_back(std::move(shard));
    }
  } else {
    fail(dir, "holds neither ", kSingleFileName, " nor ", kIndexFileName);
  }

  for (size_t f = 0; f < model.files_.size(); ++f) {
    const std::vector<SafetensorsTensor>& tensors = model.files_[f].tensors();
    for (size_t t = 0; t < tensors.size(); ++t) {
      const auto [it, inserted] = model.index_.try_emplace(tensors[t].name, f, t);
      if (!inserted) {
        const fs::path first = model.files_[it->second.first].path();
        const fs::path second = model.files_[f].path();
        fail(report_path, "tensor '", tensors[t].name, "' is in two shards, '",
             first.filename().string(), "' and '", second.filename().string(), "'");
      }
    }
  }
  return model;
}

const SafetensorsTensor* SafetensorsModel::find(const std::string& name) const {
  const auto it = index_.find(name);
  if (it == index_.end()) return nullptr;
  return &files_[it->second.first].tensors()[it->second.second];
}

const SafetensorsTensor& SafetensorsModel::get(const std::string& name) const {
  const SafetensorsTensor* tensor = find(name);
  if (tensor == nullptr) fail(dir_, "no tensor '", name, "'");
  return *tensor;
}

std::vector<std::string> SafetensorsModel::names() const {
  std::vector<std::string> result;
  result.reserve(index_.size());
  for (const auto& entry : index_) result.push_back(entry.first);
  return result;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsWriteTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the header in the caller's order, which is also the data order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json& meta = header["__metadata__"];
    meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
  }
  std::vector<size_t> sizes;
  std::unordered_set<std::string> names;
  uint64_t offset = 0;
  for (const SafetensorsWriteTensor& tensor : tensors) {
    if (tensor.name.empty()) fail(path, "a tensor has an empty name");
    if (tensor.name == "__metadata__") {
      fail(path, "tensor name '__metadata__' is reserved for the metadata");
    }
    if (!names.insert(tensor.name).second) fail(path, "tensor '", tensor.name, "' is given twice");
    const char* dtype = header_dtype_name(tensor.dtype);
    if (dtype == nullptr) {
      fail(path, "tensor '", tensor.name, "': cannot write dtype ", dtype_name(tensor.dtype),
           " (supported: ", kSupportedDTypes, ")");
    }
    std::vector<uint64_t> dims;
    for (int i = 0; i < tensor.shape.rank(); ++i) {
      dims.push_back(static_cast<uint64_t>(tensor.shape[i]));
    }
    const std::optional<uint64_t> nbytes = checked_nbytes(dims, dtype_block_bytes(tensor.dtype));
    if (!nbytes || *nbytes > std::numeric_limits<size_t>::max()) {
      fail(path, "tensor '", tensor.name, "': shape ", tensor.shape.to_string(), " is too large");
    }
    if (*nbytes > 0 && tensor.data == nullptr) fail(path, "tensor '", tensor.name, "': no data");
    header[tensor.name] = {
        {"dtype", dtype}, {"shape", dims}, {"data_offsets", {offset, offset + *nbytes}}};
    offset += *nbytes;
    sizes.push_back(static_cast<size_t>(*nbytes));
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::ordered_json::exception& error) {
    fail(path, "cannot encode the header: ", json_reason(error));  // e.g. a name that is not UTF-8
  }
  // Spaces are JSON whitespace; padding to 8 aligns the data block for 8-byte element types.
  text.append((kLengthBytes - text.size() % kLengthBytes) % kLengthBytes, ' ');
  std::array<unsigned char, kLengthBytes> length{};
  for (size_t i = 0; i < kLengthBytes; ++i) {
    length[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  }

  // Written next to the target and renamed over it, so a failed write never leaves a truncated
  // file under the final name.
  const std::string temp_path = path + ".tmp";
  std::FILE* out = std::fopen(temp_path.c_str(), "wb");
  if (out == nullptr) fail(path, "cannot open ", temp_path, " for writing: ", std::strerror(errno));
  int error = 0;
  const auto write_bytes = [&](const void* bytes, size_t n) {
    if (error != 0 || n == 0) return;
    errno = 0;
    if (std::fwrite(bytes, 1, n, out) != n) error = errno != 0 ? errno : EIO;
  };
  write_bytes(length.data(), length.size());
  write_bytes(text.data(), text.size());
  for (size_t i = 0; i < tensors.size(); ++i) write_bytes(tensors[i].data, sizes[i]);
  errno = 0;
  if (std::fclose(out) != 0 && error == 0) error = errno != 0 ? errno : EIO;
  if (error == 0 && std::rename(temp_path.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    std::remove(temp_path.c_str());
    fail(path, "cannot write: ", std::strerror(error));
  }
}

}  // namespace edgelm
