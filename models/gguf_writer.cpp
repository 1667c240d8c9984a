// The GGUF writer: metadata, tensor infos and aligned tensor data in the layout ggml writes.
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "models/gguf.h"
#include "models/gguf_layout.h"

namespace edgelm {

using gguf_layout::align_up;
using gguf_layout::kDefaultAlignment;
using gguf_layout::kMaxDims;

namespace {

// The version this writer produces (the reader takes 2 and 3).
constexpr uint32_t kWriterVersion = 3;
// llama.cpp stores tensor names in a 64-byte buffer including the terminator.
constexpr size_t kMaxTensorNameBytes = 63;

class ByteSink {
 public:
  template <class T>
  void put(T value) {
    // resize + memcpy rather than insert(end, first, last): GCC 12 reports a false
    // -Wstringop-overflow for the insert of a few bytes once write() is inlined around it.
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
  }
  void put_string(const std::string& text) {
    put<uint64_t>(text.size());
    bytes_.insert(bytes_.end(), text.begin(), text.end());
  }
  void pad_to(size_t alignment) { bytes_.resize(align_up(bytes_.size(), alignment), 0); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

void put_array(ByteSink& sink, const GgufArray& array);

void put_value(ByteSink& sink, const GgufValue::Variant& value) {
  std::visit(
      [&](const auto& x) {
        using T = std::remove_cvref_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          sink.put_string(x);
        } else if constexpr (std::is_same_v<T, GgufArray>) {
          put_array(sink, x);
        } else if constexpr (std::is_same_v<T, bool>) {
          sink.put<uint8_t>(x ? 1 : 0);
        } else {
          sink.put<T>(x);
        }
      },
      value);
}

void put_array(ByteSink& sink, const GgufArray& array) {
  sink.put<uint32_t>(static_cast<uint32_t>(array.element_type()));
  sink.put<uint64_t>(array.size());
  std::visit(
      [&](const auto& elements) {
        using T = typename std::remove_cvref_t<decltype(elements)>::value_type;
        for (const auto& element : elements) {
          if constexpr (std::is_same_v<T, std::string>) {
            sink.put_string(element);
          } else if constexpr (std::is_same_v<T, GgufArray>) {
            put_array(sink, element);
          } else if constexpr (std::is_same_v<T, bool>) {
            sink.put<uint8_t>(element ? 1 : 0);
          } else {
            sink.put<T>(element);
          }
        }
      },
      array.values);
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& entry : metadata_) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::set_string_array(const std::string& key, std::vector<std::string> values) {
  set(key, GgufArray{std::move(values)});
}

void GgufWriter::set_f32_array(const std::string& key, std::vector<float> values) {
  set(key, GgufArray{std::move(values)});
}

void GgufWriter::set_i32_array(const std::string& key, std::vector<int32_t> values) {
  set(key, GgufArray{std::move(values)});
}

void GgufWriter::add_tensor(const std::string& name, GgmlType type, const Shape& shape,
                            const void* data, size_t nbytes) {
  const std::string label = str_cat("[gguf] writer: tensor '", name, "': ");
  EDGELM_CHECK(!name.empty() && name.size() <= kMaxTensorNameBytes, label, "name of ", name.size(),
               " bytes (must be 1..", kMaxTensorNameBytes, ")");
  for (const PendingTensor& tensor : tensors_) {
    EDGELM_CHECK(tensor.name != name, label, "duplicate name");
  }
  EDGELM_CHECK(ggml_type_supported(type), label, "unsupported type ", static_cast<uint32_t>(type),
               " (", ggml_type_name(type), ")");
  EDGELM_CHECK(shape.rank() >= 1 && shape.rank() <= static_cast<int>(kMaxDims), label, "rank ",
               shape.rank(), " of ", shape.to_string(), " (must be 1..", kMaxDims, ")");
  EDGELM_CHECK(shape.last() % ggml_block_size(type) == 0, label, "row length ", shape.last(),
               " is not a multiple of the ", ggml_type_name(type), " block size ",
               ggml_block_size(type));
  const size_t expected = static_cast<size_t>(shape.rows()) * ggml_row_bytes(type, shape.last());
  EDGELM_CHECK(nbytes == expected, label, nbytes, " bytes given, ", ggml_type_name(type),
               shape.to_string(), " has ", expected);
  EDGELM_CHECK(nbytes == 0 || data != nullptr, label, "null data");
  const auto* bytes = static_cast<const uint8_t*>(data);
  tensors_.push_back({name, type, shape, std::vector<uint8_t>(bytes, bytes + nbytes)});
}

void GgufWriter::write(const std::string& path) const {
  size_t alignment = kDefaultAlignment;
  bool has_alignment_key = false;
  for (const auto& [key, value] : metadata_) {
    if (key != "general.alignment") continue;
    const auto* explicit_alignment = value.get_if<uint32_t>();
    if (explicit_alignment == nullptr) {
      EDGELM_FAIL("[gguf] ", path, ": general.alignment must be a u32, got ", value.type_string());
    }
    if (!std::has_single_bit(*explicit_alignment)) {
      EDGELM_FAIL("[gguf] ", path, ": general.alignment ", *explicit_alignment,
                  " is not a power of two");
    }
    alignment = *explicit_alignment;
    has_alignment_key = true;
  }

  ByteSink head;
  head.put<uint32_t>(gguf_layout::kMagic);
  head.put<uint32_t>(kWriterVersion);
  head.put<uint64_t>(tensors_.size());
  head.put<uint64_t>(metadata_.size() + (has_alignment_key ? 0 : 1));
  if (!has_alignment_key) {
    head.put_string("general.alignment");
    head.put<uint32_t>(static_cast<uint32_t>(GgufValueType::U32));
    head.put<uint32_t>(static_cast<uint32_t>(alignment));
  }
  for (const auto& [key, value] : metadata_) {
    head.put_string(key);
    head.put<uint32_t>(static_cast<uint32_t>(value.type()));
    put_value(head, value.variant());
  }
  uint64_t offset = 0;
  for (const PendingTensor& tensor : tensors_) {
    head.put_string(tensor.name);
    const int rank = tensor.shape.rank();
    head.put<uint32_t>(static_cast<uint32_t>(rank));
    for (int d = rank - 1; d >= 0; --d) head.put<uint64_t>(tensor.shape[d]);  // innermost first
    head.put<uint32_t>(static_cast<uint32_t>(tensor.type));
    head.put<uint64_t>(offset);
    offset = align_up(offset + tensor.bytes.size(), alignment);
  }
  head.pad_to(alignment);

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) EDGELM_FAIL("[gguf] ", path, ": cannot open for writing: ", std::strerror(errno));
  out.write(reinterpret_cast<const char*>(head.bytes().data()),
            static_cast<std::streamsize>(head.bytes().size()));
  // Every tensor, the last included, is padded to the alignment as ggml's own writer does, so
  // readers that load the data section as a whole find all of it.
  static const char kZeros[256] = {};
  for (const PendingTensor& tensor : tensors_) {
    out.write(reinterpret_cast<const char*>(tensor.bytes.data()),
              static_cast<std::streamsize>(tensor.bytes.size()));
    size_t padding = align_up(tensor.bytes.size(), alignment) - tensor.bytes.size();
    while (padding > 0) {
      const size_t chunk = padding < sizeof(kZeros) ? padding : sizeof(kZeros);
      out.write(kZeros, static_cast<std::streamsize>(chunk));
      padding -= chunk;
    }
  }
  out.close();
  if (!out) EDGELM_FAIL("[gguf] ", path, ": write failed: ", std::strerror(errno));
}

}  // namespace edgelm
