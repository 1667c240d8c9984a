#include "models/loader.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/quant.h"
#include "models/gguf.h"
#include "models/kquants.h"
#include "models/safetensors.h"

namespace edgelm {
namespace {

// The tensor itself when `backend` can use its buffer in place (the CPU reading a file mapping),
// else a copy in backend memory, written through its host mapping (a GPU backend's shared
// buffers: the bytes land where the device reads them, with no transfer command).
Tensor place(Backend& backend, const Tensor& source) {
  if (backend.can_use(*source.buffer())) return source;
  Tensor placed = Tensor::empty(backend.memory(), source.dtype(), source.shape());
  EDGELM_CHECK(placed.raw() != nullptr, "[load] backend ", backend.name(),
               " memory has no host mapping to load weights through");
  std::memcpy(placed.raw(), source.raw(), source.nbytes());
  return placed;
}

// The backend that converts weights on the host (LoadOptions::converter, else `backend` itself):
// for backends that cannot read a file mapping (a GPU) when a matrix is converted (--weight-type)
// or placed in device memory. Throws when it cannot read host memory.
Backend& host_converter(Backend& backend, const LoadOptions& options, const std::string& path) {
  Backend& converter = options.converter != nullptr ? *options.converter : backend;
  std::byte probe{};
  if (!converter.can_use(*Buffer::wrap(&probe, sizeof probe))) {
    EDGELM_FAIL("[load] ", path, ": backend ", converter.name(),
                " cannot convert weights on the host (it does not read host memory): load with a "
                "CPU backend as LoadOptions::converter");
  }
  return converter;
}

// `source` cast to `target` by `converter` into a new tensor of `memory`, written through its host
// pointer.
Tensor cast_into(Backend& converter, Backend& backend, Memory& memory, const Tensor& source,
                 DType target, const std::string& name, const std::string& path) {
  if (!converter.supports(OpKind::Cast, {source.dtype(), target})) {
    EDGELM_FAIL("[load] ", path, ": tensor '", name, "': cannot convert ",
                dtype_name(source.dtype()), " to ", dtype_name(target));
  }
  if (dtype_is_quantized(target) && source.shape().last() % dtype_block_size(target) != 0) {
    EDGELM_FAIL("[load] ", path, ": tensor '", name, "' rows of ", source.shape().last(),
                " elements cannot be quantized to ", dtype_name(target), " (blocks of ",
                dtype_block_size(target), ")");
  }
  Tensor converted = Tensor::empty(memory, target, source.shape());
  EDGELM_CHECK(converted.raw() != nullptr, "[load] backend ", backend.name(),
               " memory has no host mapping to load weights through");
  converter.cast(source, converted);
  return converted;
}

// Converts a tensor that lives in a file mapping to `target` in backend memory, or places it as it
// is when no conversion is needed. A backend that can read the mapping converts itself; for one
// that cannot (a GPU), the host converter (a CPU backend) does, reading the mapping and writing
// through the destination's host pointer: the bytes the CPU backend would produce (its kernel
// tables all quantize with the portable kernels).
Tensor convert(Backend& backend, Backend& converter, const Tensor& source, DType target,
               const std::string& name, const std::string& path) {
  if (source.dtype() == target) return place(backend, source);
  Backend& by = backend.can_use(*source.buffer()) ? backend : converter;
  return cast_into(by, backend, backend.memory(), source, target, name, path);
}

// Permutes the rows of a Q or K projection from GGUF order to HF order (copying whole rows, so it
// works for quantized rows too).
Tensor unpermute_rows(Backend& backend, const Tensor& source, int64_t head_dim) {
  Tensor out = Tensor::empty(backend.memory(), source.dtype(), source.shape());
  const size_t row_bytes = source.row_bytes();
  const auto* from = static_cast<const std::byte*>(source.raw());
  auto* to = static_cast<std::byte*>(out.raw());
  for (int64_t row = 0; row < source.dim(0); ++row) {
    std::memcpy(to + gguf_to_hf_row(row, head_dim) * row_bytes, from + row * row_bytes, row_bytes);
  }
  return out;
}

// A matmul weight in the layout `backend` multiplies fastest (Backend::matmul_weight_type): the
// weight itself, or its rows interleaved (Q4_0 -> Q4_0x8, Q8_0 -> Q8_0x8, Q4_K -> Q4_Kx8,
// Q6_K -> Q6_Kx8 and F16 -> F16x4 on x86: byte shuffles, the same values). A layout of other values
// is refused: weights are multiplied as the file stores them, and only --weight-type converts
// (load_matrix). A matrix whose rows or columns the interleaving cannot take stays as stored. The
// embedding table is never repacked: embed gathers single rows, which the interleaved layouts do
// not keep together.
Tensor for_matmul(Backend& backend, const Tensor& weight, const std::string& name,
                  const std::string& path) {
  const DType from = weight.dtype();
  const DType layout = backend.matmul_weight_type(from);
  if (layout == from) return weight;
  const DType stored = dtype_unpacked(layout);
  EDGELM_CHECK(stored == from &&
                   (layout == DType::Q4_0x8 || layout == DType::Q8_0x8 || layout == DType::F16x4 ||
                    layout == DType::Q4_Kx8 || layout == DType::Q6_Kx8),
               "[load] ", path, ": tensor '", name, "': backend ", backend.name(), " asks for ",
               dtype_name(from), " weights as ", dtype_name(layout),
               ", which is not the same values in another order");
  if (weight.dim(0) % dtype_row_group(layout) != 0 || weight.dim(1) % dtype_block_size(layout) != 0)
    return weight;
  // The repacked matrices are what decoding streams through, token after token: they go to the
  // backend's weight memory (the CPU's lays them end to end on huge pages, SlabHostMemory).
  const Tensor& source = weight;
  Tensor packed = Tensor::empty(backend.weight_memory(), layout, source.shape());
  EDGELM_CHECK(packed.raw() != nullptr, "[load] backend ", backend.name(),
               " memory has no host mapping to load weights through");
  const int64_t rows = source.dim(0);
  const int64_t blocks = source.dim(1) / dtype_block_size(stored);
  if (layout == DType::F16x4) {
    repack_f16_x4(static_cast<const uint16_t*>(source.raw()), static_cast<uint16_t*>(packed.raw()),
                  rows, source.dim(1));
  } else if (layout == DType::Q4_0x8) {
    repack_q4_0_x8(static_cast<const BlockQ4_0*>(source.raw()),
                   static_cast<BlockQ4_0x8*>(packed.raw()), rows, blocks);
  } else if (layout == DType::Q8_0x8) {
    repack_q8_0_x8(static_cast<const BlockQ8_0*>(source.raw()),
                   static_cast<BlockQ8_0x8*>(packed.raw()), rows, blocks);
  } else if (layout == DType::Q4_Kx8) {
    repack_q4_k_x8(static_cast<const BlockQ4_K*>(source.raw()),
                   static_cast<BlockQ4_Kx8*>(packed.raw()), rows, blocks);
  } else {
    repack_q6_k_x8(static_cast<const BlockQ6_K*>(source.raw()),
                   static_cast<BlockQ6_Kx8*>(packed.raw()), rows, blocks);
  }
  return packed;
}

// Once no tensor made from a matrix's bytes in a file mapping points at them any more (converted,
// unpermuted or repacked), those pages leave the resident set (MappedFile::release), so the model
// is not resident twice. `loaded` lists every such tensor: a tied embedding and output are both
// made from the embedding's bytes, and an embedding used as stored (embedding_for) keeps them.
void release_if_copied(const MappedFile& file, const uint8_t* stored, size_t nbytes,
                       std::initializer_list<Tensor> loaded) {
  for (const Tensor& tensor : loaded) {
    if (tensor.raw() == stored) return;
  }
  file.release(stored, nbytes);
}

// The table embed reads when the output matrix is the embedding's (tied): the repacked output
// itself where it holds the same values (a layout of the embedding's type) and the backend can
// embed from that layout, so one copy serves both and the file's pages stay released; reading rows
// from the released pages instead faulted a page in for almost every decoded token (22-48 us per
// token on the dev VM, against 2 us). An output converted to another type (Q4_1 as Q8_0) does not
// hold the embedding's values: the embedding stays as it is, and so do its pages.
Tensor embedding_for(Backend& backend, const Tensor& embedding, const Tensor& output) {
  if (output.dtype() != embedding.dtype() && dtype_unpacked(output.dtype()) == embedding.dtype() &&
      backend.supports(OpKind::Embed, {output.dtype()}))
    return output;
  return embedding;
}

// The types the matrices were loaded as (before any matmul layout), for LoadedModel::weight_types.
class TypeCensus {
 public:
  void projection(DType dtype) { ++projections_[dtype]; }
  void embedding(DType dtype) { embedding_ = dtype; }
  void output(DType dtype) { output_ = dtype; }

  // `main`, then what differs from it: "q4_1 (token embedding q8_0)".
  std::string describe(DType main) const {
    std::string others;
    auto add = [&](const std::string& what) { others += (others.empty() ? "" : ", ") + what; };
    if (embedding_ && *embedding_ != main)
      add(str_cat("token embedding ", dtype_name(*embedding_)));
    if (output_ && *output_ != main) add(str_cat("output ", dtype_name(*output_)));
    for (const auto& [dtype, count] : projections_) {
      if (dtype != main)
        add(str_cat(count, count == 1 ? " projection " : " projections ", dtype_name(dtype)));
    }
    return others.empty() ? dtype_name(main) : str_cat(dtype_name(main), " (", others, ")");
  }

 private:
  std::map<DType, int> projections_;
  std::optional<DType> embedding_;
  std::optional<DType> output_;  // untied only
};

Shape matrix(int64_t rows, int64_t cols) {
  return {rows, cols};
}

// How a format names its tensors, for check_tensor_names.
struct TensorNaming {
  const char* layer_prefix;            // "model.layers." / "blk.": then the layer index and a dot
  const char* layer_count_key;         // where the layer count comes from, for messages
  std::vector<std::string> global;     // the tensors outside the layers that the loader reads
  std::vector<const char*> per_layer;  // the suffixes of each layer's tensors
};

// The layer a tensor name belongs to ("model.layers.12.mlp.up_proj.weight" -> 12); nullopt for
// names outside the layers.
std::optional<int64_t> layer_of(const std::string& name, const std::string& prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  int64_t layer = 0;
  size_t i = prefix.size();
  const size_t digits_begin = i;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && i - digits_begin < 18; ++i) {
    layer = layer * 10 + (name[i] - '0');
  }
  if (i == digits_begin || i >= name.size() || name[i] != '.') return std::nullopt;
  return layer;
}

// Checks that the file holds exactly the tensors the config implies, before any is loaded: each
// expected tensor present, no tensor of a layer past the layer count (a count that disagrees with
// the file would silently run a shallower model), and no tensor the loader would not read (a bias,
// a norm of another architecture), except those `ignored` accepts. `names` is every tensor of the
// file(s); `source` names them in messages.
void check_tensor_names(const std::vector<std::string>& names, const TensorNaming& naming,
                        int64_t n_layers, const std::function<bool(const std::string&)>& ignored,
                        const std::string& source) {
  // Checked while the list is built, so that a layer count far beyond the file's tensors (2^40
  // in a damaged header) fails at the first missing layer instead of naming every one.
  const std::unordered_set<std::string> present(names.begin(), names.end());
  std::vector<std::string> expected;
  auto expect = [&](std::string name) {
    if (present.count(name) == 0) EDGELM_FAIL("[load] ", source, ": missing tensor '", name, "'");
    expected.push_back(std::move(name));
  };
  for (const std::string& name : naming.global) expect(name);
  for (int64_t l = 0; l < n_layers; ++l) {
    for (const char* suffix : naming.per_layer)
      expect(str_cat(naming.layer_prefix, l, ".", suffix));
  }
  const std::unordered_set<std::string> read(expected.begin(), expected.end());
  for (const std::string& name : names) {
    if (read.count(name) != 0) continue;
    if (const auto layer = layer_of(name, naming.layer_prefix); layer && *layer >= n_layers) {
      EDGELM_FAIL("[load] ", source, ": tensor '", name, "' belongs to layer ", *layer, " but ",
                  naming.layer_count_key, " is ", n_layers);
    }
    if (ignored(name)) continue;
    EDGELM_FAIL("[load] ", source, ": tensor '", name,
                "' is not part of a Llama model (ignoring it would compute another network than "
                "the checkpoint's)");
  }
}

// Each layer's tensors, by name suffix after "model.layers.N." (Hugging Face) or "blk.N." (GGUF),
// for the architecture's switches.
std::vector<const char*> hf_layer_tensors(const LlamaConfig& c) {
  std::vector<const char*> names = {"input_layernorm.weight",  "post_attention_layernorm.weight",
                                    "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                    "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                    "mlp.gate_proj.weight",    "mlp.up_proj.weight",
                                    "mlp.down_proj.weight"};
  if (c.attention_bias) {
    names.insert(names.end(),
                 {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"});
  }
  if (c.qk_norm) names.insert(names.end(), {"self_attn.q_norm.weight", "self_attn.k_norm.weight"});
  return names;
}
std::vector<const char*> gguf_layer_tensors(const LlamaConfig& c) {
  std::vector<const char*> names = {"attn_norm.weight", "ffn_norm.weight", "attn_q.weight",
                                    "attn_k.weight",    "attn_v.weight",   "attn_output.weight",
                                    "ffn_gate.weight",  "ffn_up.weight",   "ffn_down.weight"};
  if (c.attention_bias) names.insert(names.end(), {"attn_q.bias", "attn_k.bias", "attn_v.bias"});
  if (c.qk_norm) names.insert(names.end(), {"attn_q_norm.weight", "attn_k_norm.weight"});
  return names;
}

// The Hugging Face tensors checked against config.json. Rotary `inv_freq` buffers, which older
// checkpoints saved, are ignored as transformers ignores them: they are recomputed from head_dim
// and rope_theta. With tie_word_embeddings true, an lm_head.weight is accepted only when it is
// the embedding byte for byte (a tied model saved with both), since the output is the embedding;
// with false it must be there, as transformers would otherwise run a random output matrix.
void check_hf_tensors(const SafetensorsModel& st, const LlamaConfig& c, const std::string& dir) {
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  TensorNaming naming{"model.layers.",
                      "num_hidden_layers",
                      {"model.embed_tokens.weight", "model.norm.weight"},
                      hf_layer_tensors(c)};
  if (!c.tie_word_embeddings) {
    if (st.find("lm_head.weight") == nullptr) {
      EDGELM_FAIL("[load] ", dir, ": no tensor 'lm_head.weight' but ", config_path,
                  " says tie_word_embeddings false (for a tied model, set it true)");
    }
    naming.global.push_back("lm_head.weight");
  } else if (const SafetensorsTensor* head = st.find("lm_head.weight")) {
    const SafetensorsTensor* embedding = st.find("model.embed_tokens.weight");
    if (embedding == nullptr || head->dtype != embedding->dtype ||
        !(head->shape == embedding->shape) ||
        std::memcmp(head->data, embedding->data, head->nbytes) != 0) {
      EDGELM_FAIL("[load] ", dir, ": ", config_path,
                  " says tie_word_embeddings true but tensor 'lm_head.weight' differs from "
                  "'model.embed_tokens.weight' (for an untied model, set it false)");
    }
    naming.global.push_back("lm_head.weight");
  }
  check_tensor_names(
      st.names(), naming, c.n_layers,
      [](const std::string& name) { return name.ends_with("rotary_emb.inv_freq"); }, dir);
}

// The GGUF tensors checked against the llama.* metadata. rope_freqs.weight was read by
// load_gguf_config; nothing else is ignored.
void check_gguf_tensors(const GgufFile& gguf, const LlamaConfig& c) {
  const std::string count_key = c.architecture + ".block_count";
  TensorNaming naming{"blk.",
                      count_key.c_str(),
                      {"token_embd.weight", "output_norm.weight"},
                      gguf_layer_tensors(c)};
  if (!c.tie_word_embeddings) naming.global.push_back("output.weight");
  if (gguf.find_tensor("rope_freqs.weight") != nullptr)
    naming.global.push_back("rope_freqs.weight");
  std::vector<std::string> names;
  for (const GgufTensor& tensor : gguf.tensors()) names.push_back(tensor.name);
  check_tensor_names(
      names, naming, c.n_layers, [](const std::string&) { return false; }, gguf.path());
}

// ---- Hugging Face folder ----

LoadedModel load_hf(const std::string& dir, Backend& backend, Backend& converter,
                    const LoadOptions& options) {
  LoadedModel loaded;
  loaded.format = "hf";
  loaded.path = dir;
  loaded.config = load_hf_config(dir);
  const LlamaConfig& c = loaded.config;
  auto weights_file = std::make_shared<SafetensorsModel>(SafetensorsModel::open(dir));
  const SafetensorsModel& st = *weights_file;
  check_hf_tensors(st, c, dir);

  std::map<const MappedFile*, std::shared_ptr<Buffer>> buffers;  // one wrap per mapped file
  auto raw = [&](const std::string& name, Shape expected) {
    const SafetensorsTensor& t = st.get(name);
    if (!(t.shape == expected)) {
      EDGELM_FAIL("[load] ", dir, ": tensor '", name, "' has shape ", t.shape.to_string(),
                  ", config.json implies ", expected.to_string());
    }
    auto& buffer = buffers[t.file.get()];
    if (!buffer)
      buffer = Buffer::wrap(const_cast<uint8_t*>(t.file->data()), t.file->size(), t.file);
    Tensor mapped(buffer, static_cast<size_t>(t.data - t.file->data()), t.dtype, t.shape);
    // The format does not align tensors; kernels read whole elements, so a misaligned one is
    // copied into aligned memory instead of being used in place.
    if (reinterpret_cast<uintptr_t>(t.data) % dtype_block_bytes(t.dtype) != 0) {
      Tensor aligned = Tensor::empty(backend.memory(), t.dtype, t.shape);
      std::memcpy(aligned.raw(), t.data, t.nbytes);
      return aligned;
    }
    return mapped;
  };
  // Each matrix keeps its stored type unless a type is requested.
  auto matrix_type = [&](const std::string& name) {
    return options.weight_type.value_or(st.get(name).dtype);
  };
  loaded.weight_type = matrix_type("model.layers.0.self_attn.q_proj.weight");
  TypeCensus census;
  auto load_matrix = [&](const std::string& name, Shape shape) {
    return convert(backend, converter, raw(name, shape), matrix_type(name), name, dir);
  };
  auto load_projection = [&](const std::string& name, Shape shape) {
    Tensor matrix = load_matrix(name, shape);
    census.projection(matrix.dtype());
    Tensor loaded_matrix = for_matmul(backend, matrix, name, dir);
    const SafetensorsTensor& stored = st.get(name);
    release_if_copied(*stored.file, stored.data, stored.nbytes, {loaded_matrix});
    return loaded_matrix;
  };
  auto load_norm = [&](const std::string& name, int64_t size = 0) {
    return convert(backend, converter, raw(name, {size > 0 ? size : c.hidden_size}), DType::F32,
                   name, dir);
  };

  LlamaWeights& w = loaded.weights;
  w.embedding = load_matrix("model.embed_tokens.weight", matrix(c.vocab_size, c.hidden_size));
  census.embedding(w.embedding.dtype());
  w.output_norm = load_norm("model.norm.weight");
  if (c.tie_word_embeddings) {
    w.output = for_matmul(backend, w.embedding, "model.embed_tokens.weight", dir);
    w.embedding = embedding_for(backend, w.embedding, w.output);
    const SafetensorsTensor& stored = st.get("model.embed_tokens.weight");
    release_if_copied(*stored.file, stored.data, stored.nbytes, {w.output, w.embedding});
  } else {
    const Tensor output = load_matrix("lm_head.weight", matrix(c.vocab_size, c.hidden_size));
    census.output(output.dtype());
    w.output = for_matmul(backend, output, "lm_head.weight", dir);
    const SafetensorsTensor& stored = st.get("lm_head.weight");
    release_if_copied(*stored.file, stored.data, stored.nbytes, {w.output});
  }
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LlamaLayerWeights layer;
    layer.attn_norm = load_norm(p + "input_layernorm.weight");
    layer.ffn_norm = load_norm(p + "post_attention_layernorm.weight");
    layer.wq = load_projection(p + "self_attn.q_proj.weight", matrix(c.q_dim(), c.hidden_size));
    layer.wk = load_projection(p + "self_attn.k_proj.weight", matrix(c.kv_dim(), c.hidden_size));
    layer.wv = load_projection(p + "self_attn.v_proj.weight", matrix(c.kv_dim(), c.hidden_size));
    layer.wo = load_projection(p + "self_attn.o_proj.weight", matrix(c.hidden_size, c.q_dim()));
    layer.w_gate =
        load_projection(p + "mlp.gate_proj.weight", matrix(c.intermediate_size, c.hidden_size));
    layer.w_up =
        load_projection(p + "mlp.up_proj.weight", matrix(c.intermediate_size, c.hidden_size));
    layer.w_down =
        load_projection(p + "mlp.down_proj.weight", matrix(c.hidden_size, c.intermediate_size));
    if (c.attention_bias) {
      layer.bq = load_norm(p + "self_attn.q_proj.bias", c.q_dim());
      layer.bk = load_norm(p + "self_attn.k_proj.bias", c.kv_dim());
      layer.bv = load_norm(p + "self_attn.v_proj.bias", c.kv_dim());
    }
    if (c.qk_norm) {
      layer.q_norm = load_norm(p + "self_attn.q_norm.weight", c.head_dim);
      layer.k_norm = load_norm(p + "self_attn.k_norm.weight", c.head_dim);
    }
    w.layers.push_back(std::move(layer));
  }
  backend.synchronize();
  w.keep_alive = weights_file;
  loaded.weight_types = census.describe(loaded.weight_type);
  return loaded;
}

// ---- GGUF file ----

LoadedModel load_gguf(const std::string& path, Backend& backend, Backend& converter,
                      const LoadOptions& options) {
  LoadedModel loaded;
  loaded.format = "gguf";
  loaded.path = path;
  auto file = std::make_shared<GgufFile>(GgufFile::open(path));
  const GgufFile& gguf = *file;
  loaded.config = load_gguf_config(gguf);
  const LlamaConfig& c = loaded.config;
  check_gguf_tensors(gguf, c);

  std::shared_ptr<Buffer> buffer;
  // The tensor as stored (in place when its type maps to a DType), or dequantized to F32.
  auto raw = [&](const std::string& name, Shape expected) -> Tensor {
    const GgufTensor* t = gguf.find_tensor(name);
    if (t == nullptr) EDGELM_FAIL("[load] ", path, ": missing tensor '", name, "'");
    if (!(t->shape == expected)) {
      EDGELM_FAIL("[load] ", path, ": tensor '", name, "' has shape ", t->shape.to_string(),
                  ", the metadata implies ", expected.to_string());
    }
    if (const auto dtype = dtype_from_ggml(t->type)) {
      if (!buffer)
        buffer = Buffer::wrap(const_cast<uint8_t*>(t->file->data()), t->file->size(), t->file);
      return Tensor(buffer, static_cast<size_t>(t->data - t->file->data()), *dtype, t->shape);
    }
    Tensor dequantized = Tensor::empty(backend.memory(), DType::F32, t->shape);
    const int64_t row = t->shape.last();
    const size_t row_bytes = t->nbytes / static_cast<size_t>(t->shape.rows());
    for (int64_t r = 0; r < t->shape.rows(); ++r) {
      dequantize_row_ggml(t->type, t->data + r * row_bytes, dequantized.data<float>() + r * row,
                          row);
    }
    return dequantized;
  };
  // Each matrix keeps its stored type unless a type is requested (quantized files often mix
  // types: SmolLM2's Q4_1 file has a Q8_0 token embedding, Q4_K_M files Q4_K, Q6_K and Q5_0/Q8_0
  // where a row is no multiple of 256); every type GGUF Llama files carry maps to a DType, so the
  // F16 below is only for a type raw() had to dequantize.
  auto matrix_type = [&](const std::string& name) {
    const GgufTensor* t = gguf.find_tensor(name);
    if (t == nullptr) EDGELM_FAIL("[load] ", path, ": missing tensor '", name, "'");
    return options.weight_type.value_or(dtype_from_ggml(t->type).value_or(DType::F16));
  };
  loaded.weight_type = matrix_type("blk.0.attn_q.weight");
  TypeCensus census;
  auto load_matrix = [&](const std::string& name, Shape shape, bool permuted) {
    Tensor t = raw(name, shape);
    if (permuted) t = unpermute_rows(backend, t, c.head_dim);
    return convert(backend, converter, t, matrix_type(name), name, path);
  };
  auto load_norm = [&](const std::string& name, int64_t size = 0) {
    return convert(backend, converter, raw(name, {size > 0 ? size : c.hidden_size}), DType::F32,
                   name, path);
  };
  // llama.cpp's converter reorders Llama's q and k rows for its rotation of adjacent pairs, and
  // they are put back in Hugging Face's order (unpermute_rows); Qwen's files keep Hugging Face's
  // order, which llama.cpp rotates as NEOX (pairs half a head apart), this model's rotation.
  const bool permuted_qk = c.architecture == "llama";
  auto load_projection = [&](const std::string& name, Shape shape, bool permuted) {
    Tensor matrix = load_matrix(name, shape, permuted);
    census.projection(matrix.dtype());
    Tensor loaded_matrix = for_matmul(backend, matrix, name, path);
    const GgufTensor* stored = gguf.find_tensor(name);
    release_if_copied(*stored->file, stored->data, stored->nbytes, {loaded_matrix});
    return loaded_matrix;
  };

  LlamaWeights& w = loaded.weights;
  w.embedding = load_matrix("token_embd.weight", matrix(c.vocab_size, c.hidden_size), false);
  census.embedding(w.embedding.dtype());
  w.output_norm = load_norm("output_norm.weight");
  if (c.tie_word_embeddings) {
    w.output = for_matmul(backend, w.embedding, "token_embd.weight", path);
    w.embedding = embedding_for(backend, w.embedding, w.output);
    const GgufTensor* stored = gguf.find_tensor("token_embd.weight");
    release_if_copied(*stored->file, stored->data, stored->nbytes, {w.output, w.embedding});
  } else {
    const Tensor output = load_matrix("output.weight", matrix(c.vocab_size, c.hidden_size), false);
    census.output(output.dtype());
    w.output = for_matmul(backend, output, "output.weight", path);
    const GgufTensor* stored = gguf.find_tensor("output.weight");
    release_if_copied(*stored->file, stored->data, stored->nbytes, {w.output});
  }
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LlamaLayerWeights layer;
    layer.attn_norm = load_norm(p + "attn_norm.weight");
    layer.ffn_norm = load_norm(p + "ffn_norm.weight");
    layer.wq = load_projection(p + "attn_q.weight", matrix(c.q_dim(), c.hidden_size), permuted_qk);
    layer.wk = load_projection(p + "attn_k.weight", matrix(c.kv_dim(), c.hidden_size), permuted_qk);
    layer.wv = load_projection(p + "attn_v.weight", matrix(c.kv_dim(), c.hidden_size), false);
    layer.wo = load_projection(p + "attn_output.weight", matrix(c.hidden_size, c.q_dim()), false);
    layer.w_gate =
        load_projection(p + "ffn_gate.weight", matrix(c.intermediate_size, c.hidden_size), false);
    layer.w_up =
        load_projection(p + "ffn_up.weight", matrix(c.intermediate_size, c.hidden_size), false);
    layer.w_down =
        load_projection(p + "ffn_down.weight", matrix(c.hidden_size, c.intermediate_size), false);
    if (c.attention_bias) {
      layer.bq = load_norm(p + "attn_q.bias", c.q_dim());
      layer.bk = load_norm(p + "attn_k.bias", c.kv_dim());
      layer.bv = load_norm(p + "attn_v.bias", c.kv_dim());
    }
    if (c.qk_norm) {
      layer.q_norm = load_norm(p + "attn_q_norm.weight", c.head_dim);
      layer.k_norm = load_norm(p + "attn_k_norm.weight", c.head_dim);
    }
    w.layers.push_back(std::move(layer));
  }
  backend.synchronize();
  w.keep_alive = file;
  loaded.weight_types = census.describe(loaded.weight_type);
  return loaded;
}

}  // namespace

int64_t gguf_to_hf_row(int64_t gguf_row, int64_t head_dim) {
  const int64_t head = gguf_row / head_dim;
  const int64_t r = gguf_row % head_dim;
  return head * head_dim + (r % 2) * (head_dim / 2) + r / 2;
}

int64_t hf_to_gguf_row(int64_t hf_row, int64_t head_dim) {
  const int64_t head = hf_row / head_dim;
  const int64_t r = hf_row % head_dim;
  const int64_t half = head_dim / 2;
  return head * head_dim + (r < half ? 2 * r : 2 * (r - half) + 1);
}

LlamaWeights weights_for(Backend& backend, const LlamaWeights& weights) {
  host_converter(backend, {}, "weights of another backend");  // throws unless it reads host memory
  LlamaWeights out = weights;
  auto layout = [&](Tensor& t, const char* name) {
    t = for_matmul(backend, t, name, "weights of another backend");
  };
  layout(out.output, "output");
  for (LlamaLayerWeights& w : out.layers) {
    using Named = std::pair<Tensor*, const char*>;
    for (const auto& [t, name] : std::initializer_list<Named>{{&w.wq, "wq"},
                                                              {&w.wk, "wk"},
                                                              {&w.wv, "wv"},
                                                              {&w.wo, "wo"},
                                                              {&w.w_gate, "w_gate"},
                                                              {&w.w_up, "w_up"},
                                                              {&w.w_down, "w_down"}}) {
      layout(*t, name);
    }
  }
  backend.synchronize();
  return out;
}

LoadedModel load_llama(const std::string& path, Backend& backend, const LoadOptions& options) {
  namespace fs = std::filesystem;
  if (!fs::exists(path)) EDGELM_FAIL("[load] ", path, ": no such file or folder");
  Backend& converter = host_converter(backend, options, path);
  if (fs::is_directory(path)) return load_hf(path, backend, converter, options);
  return load_gguf(path, backend, converter, options);
}

}  // namespace edgelm
