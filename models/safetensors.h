// Safetensors: the weight format of Hugging Face models. A file is a u64 little-endian header
// length N, N bytes of UTF-8 JSON describing each tensor (dtype, shape, byte range), then the raw
// data block. Tensors are used in place from a read-only mapping, never copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/shape.h"

namespace edgelm {

// One tensor of a safetensors file, validated: `data` points at exactly `nbytes` bytes inside the
// mapping, and nbytes == shape.numel() * element size. The data is aligned only as well as the
// file makes it (files written by write_safetensors or the Hugging Face library start the data
// block at a multiple of 8 bytes; tensor offsets within it are not padded).
struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::F32;  // F32, F16, BF16 or I32
  Shape shape;               // as stored, row-major; rank 0..4
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  std::shared_ptr<MappedFile> file;  // keeps the mapping alive as long as any tensor is held
};

// One .safetensors file, mapped and fully validated on open.
class SafetensorsFile {
 public:
  // Maps and parses `path`. Throws edgelm::Error "[safetensors] <path>: <what is wrong>" for a
  // missing or unreadable file, a malformed header, an unsupported dtype, a tensor whose byte
  // range does not match its shape or lies outside the data block, or byte ranges that break the
  // format's layout: as in the reference implementation, the tensors must tile the data block
  // exactly (no two overlap, and no byte between or after them belongs to none).
  static SafetensorsFile open(const std::string& path);

  // All tensors, in the order of their data in the file (header order does not matter).
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  // The tensor called `name`, or nullptr when the file has none.
  const SafetensorsTensor* find(const std::string& name) const;
  // The "__metadata__" object of the header; empty when the file has none.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

// The weights of a Hugging Face model folder: `model.safetensors`, or
// `model.safetensors.index.json` ({"metadata": {...}, "weight_map": {"tensor": "shard", ...}})
// with its shards.
class SafetensorsModel {
 public:
  // Opens the weights in folder `dir`. model.safetensors wins when both it and the index exist
  // (as in transformers). With an index, every shard it names is opened; the index must agree with
  // the shards: each listed tensor is in the shard the index names, no tensor is in two shards,
  // and shard names are plain file names inside `dir`. Throws edgelm::Error
  // "[safetensors] <file or folder>: <what is wrong>".
  static SafetensorsModel open(const std::string& dir);

  // The tensor called `name` in any shard, or nullptr when there is none.
  const SafetensorsTensor* find(const std::string& name) const;
  // Like find, but throws edgelm::Error "[safetensors] <dir>: no tensor '<name>'" when absent.
  const SafetensorsTensor& get(const std::string& name) const;
  // Names of all tensors of all shards, sorted.
  std::vector<std::string> names() const;
  // Number of .safetensors files opened (1 without an index).
  size_t n_files() const { return files_.size(); }

 private:
  std::string dir_;
  std::vector<SafetensorsFile> files_;
  // name -> (position in files_, position in that file's tensors()); indices rather than
  // pointers so that copies of the model stay valid.
  std::map<std::string, std::pair<size_t, size_t>> index_;
};

// A tensor to write: `data` holds shape.numel() elements of dtype, row-major.
struct SafetensorsWriteTensor {
  std::string name;
  DType dtype = DType::F32;  // F32, F16, BF16 or I32
  Shape shape;
  const void* data = nullptr;
};

// Writes a safetensors file: the header lists the tensors in the given order, with "__metadata__"
// first when `metadata` is not empty, and is padded with spaces to a multiple of 8 bytes so the
// data block is 8-byte aligned; the data follows in the given order, without padding. Throws
// edgelm::Error "[safetensors] <path>: ..." for an unsupported dtype, an empty, reserved or
// repeated name, or an I/O error (a partly written file is removed).
void write_safetensors(const std::string& path, const std::vector<SafetensorsWriteTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace edgelm
