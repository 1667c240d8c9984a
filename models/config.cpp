#include "models/config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "models/gguf.h"

namespace edgelm {
namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  const std::string text = read_regular_file(path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {  // syntax, and numbers past double such as 1e999
    EDGELM_FAIL("[config] ", path, ": malformed JSON: ", e.what());
  }
}

// A required integer field.
int64_t get_int(const json& object, const char* key, const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null())
    EDGELM_FAIL("[config] ", path, ": missing field '", key, "'");
  if (!it->is_number_integer()) {
    EDGELM_FAIL("[config] ", path, ": field '", key, "' must be an integer, got ", it->dump());
  }
  return it->get<int64_t>();
}

std::optional<int64_t> find_int(const json& object, const char* key, const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  return get_int(object, key, path);
}

std::optional<double> find_number(const json& object, const char* key, const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) {
    EDGELM_FAIL("[config] ", path, ": field '", key, "' must be a number, got ", it->dump());
  }
  return it->get<double>();
}

// A token id read as a wider integer; -1 means none (bos) and is rejected later where none is not
// allowed (eos).
int32_t token_id(int64_t value, const char* key, const std::string& path) {
  if (value < -1 || value > std::numeric_limits<int32_t>::max())
    EDGELM_FAIL("[config] ", path, ": ", key, " ", value, " is not a token id");
  return static_cast<int32_t>(value);
}

// eos_token_id may be an integer or a list of integers.
std::optional<std::vector<int32_t>> find_ids(const json& object, const char* key,
                                             const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  std::vector<int32_t> ids;
  if (it->is_number_integer()) {
    ids.push_back(token_id(it->get<int64_t>(), key, path));
  } else if (it->is_array()) {
    for (const json& id : *it) {
      if (!id.is_number_integer()) {
        EDGELM_FAIL("[config] ", path, ": field '", key, "' must hold integers, got ", id.dump());
      }
      ids.push_back(token_id(id.get<int64_t>(), key, path));
    }
  } else {
    EDGELM_FAIL("[config] ", path, ": field '", key, "' must be an integer or a list, got ",
                it->dump());
  }
  return ids;
}

std::optional<bool> find_bool(const json& object, const char* key, const std::string& path) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean())
    EDGELM_FAIL("[config] ", path, ": field '", key, "' must be true or false, got ", it->dump());
  return it->get<bool>();
}

// `scaling` is config.json's rope_scaling, or transformers 5's rope_parameters (which also holds
// rope_theta). Its type is named by "rope_type" or, in older files, "type"; an object with
// settings but no type would otherwise be read as no scaling at all, so it is refused.
RopeScaling parse_rope_scaling(const json& scaling, const std::string& path) {
  RopeScaling result;
  if (scaling.is_null()) return result;
  if (!scaling.is_object())
    EDGELM_FAIL("[config] ", path, ": rope_scaling must be an object or null");
  std::optional<std::string> type;
  for (const char* key : {"rope_type", "type"}) {
    const auto it = scaling.find(key);
    if (it == scaling.end()) continue;
    if (!it->is_string()) {
      EDGELM_FAIL("[config] ", path, ": rope_scaling '", key, "' must be a string, got ",
                  it->dump());
    }
    if (type && *type != it->get<std::string>()) {
      EDGELM_FAIL("[config] ", path, ": rope_scaling 'rope_type' '", *type, "' and 'type' '",
                  it->get<std::string>(), "' disagree");
    }
    type = it->get<std::string>();
  }
  if (!type) {
    for (const auto& [key, value] : scaling.items()) {
      if (key != "rope_theta") {
        EDGELM_FAIL("[config] ", path, ": rope_scaling sets '", key,
                    "' but names no 'rope_type' (supported: default, llama3)");
      }
    }
    return result;
  }
  if (*type == "default") return result;
  if (*type != "llama3") {
    EDGELM_FAIL("[config] ", path, ": unsupported rope_scaling type '", *type,
                "' (supported: default, llama3)");
  }
  result.type = RopeScaling::Type::Llama3;
  auto number = [&](const char* key) {
    const auto value = find_number(scaling, key, path);
    if (!value) EDGELM_FAIL("[config] ", path, ": rope_scaling is missing '", key, "'");
    return static_cast<float>(*value);
  };
  result.factor = number("factor");
  result.low_freq_factor = number("low_freq_factor");
  result.high_freq_factor = number("high_freq_factor");
  // A count, though some configs write it as a float (8192.0).
  const double context = number("original_max_position_embeddings");
  if (!(context >= 1.0 && context <= 0x1p53 && std::floor(context) == context)) {
    EDGELM_FAIL("[config] ", path, ": rope_scaling original_max_position_embeddings ", context,
                " must be a positive whole number");
  }
  result.original_max_position_embeddings = static_cast<int64_t>(context);
  return result;
}

// The config.json fields of transformers' Llama that change the computation in a way this
// implementation does not follow: each is refused rather than ignored, since ignoring it runs
// another network on the same weights and prints fluent-looking garbage with exit status 0.
// The transformers class of each supported model_type.
const char* causal_lm_class(const std::string& model_type) {
  if (model_type == "qwen2") return "Qwen2ForCausalLM";
  if (model_type == "qwen3") return "Qwen3ForCausalLM";
  return "LlamaForCausalLM";
}

void check_llama_variant(const json& root, const std::string& path, const std::string& arch) {
  if (const auto it = root.find("architectures"); it != root.end() && !it->is_null()) {
    if (!it->is_array())
      EDGELM_FAIL("[config] ", path, ": field 'architectures' must be a list, got ", it->dump());
    for (const json& architecture : *it) {
      if (architecture != causal_lm_class(arch)) {
        EDGELM_FAIL("[config] ", path, ": unsupported architectures entry ", architecture.dump(),
                    " for model_type '", arch, "' (supported: ", causal_lm_class(arch), ")");
      }
    }
  }
  // Qwen2 and Qwen3 can run some layers with sliding-window attention; every released checkpoint
  // turns it off, and a window would change what every later position sees.
  if (find_bool(root, "use_sliding_window", path).value_or(false)) {
    EDGELM_FAIL("[config] ", path,
                ": use_sliding_window true is not supported (sliding-window attention layers)");
  }
  if (const auto it = root.find("layer_types"); it != root.end() && it->is_array()) {
    for (const json& type : *it) {
      if (type != "full_attention") {
        EDGELM_FAIL("[config] ", path, ": layer_types entry ", type.dump(),
                    " is not supported (full_attention layers only)");
      }
    }
  }
  if (const auto it = root.find("hidden_act"); it != root.end() && !it->is_null()) {
    if (*it != "silu") {
      EDGELM_FAIL("[config] ", path, ": unsupported hidden_act ", it->dump(), " (supported: silu)");
    }
  }
  // Qwen2's Q, K and V projections always have a bias (its config has no key for it); Llama's and
  // Qwen3's have none unless attention_bias says so, which no released checkpoint does.
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (find_bool(root, key, path).value_or(false) && !(arch == "qwen2" && key[0] == 'a'))
      EDGELM_FAIL("[config] ", path, ": ", key,
                  " true is not supported (projections without bias)");
  }
  if (const auto factor = find_number(root, "partial_rotary_factor", path);
      factor && *factor != 1) {
    EDGELM_FAIL("[config] ", path, ": partial_rotary_factor ", *factor,
                " is not supported (rotary embeddings over the whole head only)");
  }
  if (const auto it = root.find("quantization_config"); it != root.end() && !it->is_null()) {
    std::string method = "unknown";
    if (it->is_object() && it->contains("quant_method") && (*it)["quant_method"].is_string())
      method = (*it)["quant_method"].get<std::string>();
    EDGELM_FAIL("[config] ", path, ": quantization_config (quant_method '", method,
                "') is not supported: pre-quantized checkpoints need their own kernels");
  }
}

// GGUF's rope scaling keys, as llama.cpp reads them (<arch> is general.architecture):
// <arch>.rope.scaling.type (absent: "linear"), and a factor in <arch>.rope.scaling.factor or the
// older <arch>.rope.scale_linear (0 or absent: no scaling). Llama 3's scaling arrives as the
// rope_freqs.weight tensor instead; any other scaling that changes the rotation is refused.
void check_gguf_rope_scaling(const GgufFile& file, const std::string& arch) {
  std::string factor_key = arch + ".rope.scaling.factor";
  std::optional<double> factor = file.find_float(factor_key);
  if (!factor) {
    factor_key = arch + ".rope.scale_linear";
    factor = file.find_float(factor_key);
  }
  const bool scales = factor && *factor != 0.0 && *factor != 1.0;
  const std::string type_key = arch + ".rope.scaling.type";
  const std::string type = file.find_string(type_key).value_or("linear");
  if (type != "none" && type != "linear") {
    EDGELM_FAIL("[gguf] ", file.path(), ": unsupported ", type_key, " '", type,
                "' (supported: none, and linear with factor 1)");
  }
  if (type == "linear" && scales) {
    EDGELM_FAIL("[gguf] ", file.path(), ": ", factor_key, " ", *factor,
                ": linear rope scaling is not supported");
  }
}

}  // namespace

std::string LlamaConfig::describe() const {
  return str_cat(architecture, ": ", n_layers, " layers, hidden ", hidden_size, ", ffn ",
                 intermediate_size, ", heads ", n_heads, "/", n_kv_heads, " kv, head_dim ",
                 head_dim, ", vocab ", vocab_size, ", rope theta ", rope.theta,
                 rope.scaling.type == RopeScaling::Type::Llama3 ? " (llama3 scaling)" : "",
                 attention_bias ? ", q/k/v bias" : "", qk_norm ? ", q/k norm" : "",
                 tie_word_embeddings ? ", tied embeddings" : "");
}

void validate_config(const LlamaConfig& c, const std::string& source) {
  auto positive = [&](int64_t value, const char* name) {
    if (value <= 0) EDGELM_FAIL("[config] ", source, ": ", name, " must be positive, got ", value);
  };
  positive(c.vocab_size, "vocab_size");
  positive(c.hidden_size, "hidden_size");
  positive(c.intermediate_size, "intermediate_size");
  positive(c.n_layers, "num_hidden_layers");
  positive(c.n_heads, "num_attention_heads");
  positive(c.n_kv_heads, "num_key_value_heads");
  positive(c.head_dim, "head_dim");
  if (c.n_heads % c.n_kv_heads != 0) {
    EDGELM_FAIL("[config] ", source, ": num_attention_heads ", c.n_heads,
                " is not a multiple of num_key_value_heads ", c.n_kv_heads);
  }
  if (c.head_dim % 2 != 0)
    EDGELM_FAIL("[config] ", source, ": head_dim ", c.head_dim, " must be even");
  positive(c.max_position_embeddings, "max_position_embeddings");
  auto positive_finite = [&](float value, const char* name) {
    if (!(value > 0.0f && std::isfinite(value)))
      EDGELM_FAIL("[config] ", source, ": ", name, " ", value, " must be positive and finite");
  };
  positive_finite(c.rms_norm_eps, "rms_norm_eps");
  // An epsilon is a guard against dividing by zero, orders of magnitude below the mean square of
  // real activations (1e-5, 1e-6); one of 1 or more would swamp it and flatten every normalized
  // vector, so it means a misplaced value, not a model.
  if (!(c.rms_norm_eps < 1.0f)) {
    EDGELM_FAIL("[config] ", source, ": rms_norm_eps ", c.rms_norm_eps, " must be below 1");
  }
  positive_finite(c.rope.theta, "rope_theta");
  if (c.rope.scaling.type == RopeScaling::Type::Llama3) {
    const RopeScaling& s = c.rope.scaling;
    positive_finite(s.factor, "rope_scaling factor");
    positive_finite(s.low_freq_factor, "rope_scaling low_freq_factor");
    positive_finite(s.high_freq_factor, "rope_scaling high_freq_factor");
    if (!(s.low_freq_factor < s.high_freq_factor)) {
      EDGELM_FAIL("[config] ", source, ": rope_scaling low_freq_factor ", s.low_freq_factor,
                  " must be below high_freq_factor ", s.high_freq_factor);
    }
  }
  for (size_t i = 0; i < c.rope.freq_factors.size(); ++i) {
    const float factor = c.rope.freq_factors[i];
    if (!(factor > 0.0f && std::isfinite(factor))) {
      EDGELM_FAIL("[config] ", source, ": rope frequency factor ", i, " is ", factor,
                  "; it must be positive and finite");
    }
  }
  for (int32_t id : c.eos_token_ids) {
    if (id < 0 || id >= c.vocab_size) {
      EDGELM_FAIL("[config] ", source, ": eos_token_id ", id, " outside the vocabulary of ",
                  c.vocab_size);
    }
  }
  if (c.bos_token_id < -1 || c.bos_token_id >= c.vocab_size) {
    EDGELM_FAIL("[config] ", source, ": bos_token_id ", c.bos_token_id, " outside the vocabulary");
  }
}

LlamaConfig load_hf_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  if (!std::filesystem::exists(path))
    EDGELM_FAIL("[config] ", path, ": missing (not a Hugging Face model folder?)");
  const json root = read_json(path);
  if (!root.is_object()) EDGELM_FAIL("[config] ", path, ": top level must be an object");
  std::string model_type;
  if (const auto it = root.find("model_type"); it != root.end()) {
    if (!it->is_string())
      EDGELM_FAIL("[config] ", path, ": model_type must be a string, got ", it->dump());
    model_type = it->get<std::string>();
  }
  if (model_type != "llama" && model_type != "qwen2" && model_type != "qwen3") {
    EDGELM_FAIL("[config] ", path, ": unknown architecture: model_type '", model_type,
                "' (supported: llama, qwen2, qwen3)");
  }
  check_llama_variant(root, path, model_type);
  LlamaConfig c;
  c.architecture = model_type;
  c.attention_bias = model_type == "qwen2";
  c.qk_norm = model_type == "qwen3";
  c.vocab_size = get_int(root, "vocab_size", path);
  c.hidden_size = get_int(root, "hidden_size", path);
  c.intermediate_size = get_int(root, "intermediate_size", path);
  c.n_layers = get_int(root, "num_hidden_layers", path);
  c.n_heads = get_int(root, "num_attention_heads", path);
  c.n_kv_heads = find_int(root, "num_key_value_heads", path).value_or(c.n_heads);
  c.head_dim =
      find_int(root, "head_dim", path).value_or(c.n_heads > 0 ? c.hidden_size / c.n_heads : 0);
  c.rms_norm_eps = static_cast<float>(find_number(root, "rms_norm_eps", path).value_or(1e-6));
  c.rope.theta = static_cast<float>(find_number(root, "rope_theta", path).value_or(10000.0));
  c.rope.head_dim = c.head_dim;
  if (root.contains("rope_scaling"))
    c.rope.scaling = parse_rope_scaling(root["rope_scaling"], path);
  // transformers 5 writes both under "rope_parameters" instead.
  if (root.contains("rope_parameters") && root["rope_parameters"].is_object()) {
    const json& parameters = root["rope_parameters"];
    if (auto theta = find_number(parameters, "rope_theta", path))
      c.rope.theta = static_cast<float>(*theta);
    c.rope.scaling = parse_rope_scaling(parameters, path);
  }
  c.tie_word_embeddings = find_bool(root, "tie_word_embeddings", path).value_or(false);
  c.max_position_embeddings = find_int(root, "max_position_embeddings", path).value_or(2048);
  c.bos_token_id =
      token_id(find_int(root, "bos_token_id", path).value_or(-1), "bos_token_id", path);
  c.eos_token_ids = find_ids(root, "eos_token_id", path).value_or(std::vector<int32_t>{});

  const std::string generation_path =
      (std::filesystem::path(dir) / "generation_config.json").string();
  if (std::filesystem::exists(generation_path)) {
    const json generation = read_json(generation_path);
    if (!generation.is_object())
      EDGELM_FAIL("[config] ", generation_path, ": top level must be an object");
    if (auto eos = find_ids(generation, "eos_token_id", generation_path)) c.eos_token_ids = *eos;
    if (auto bos = find_int(generation, "bos_token_id", generation_path))
      c.bos_token_id = token_id(*bos, "bos_token_id", generation_path);
    bool do_sample = false;
    if (const auto it = generation.find("do_sample"); it != generation.end() && !it->is_null()) {
      if (!it->is_boolean()) {
        EDGELM_FAIL("[config] ", generation_path, ": do_sample must be true or false, got ",
                    it->dump());
      }
      do_sample = it->get<bool>();
    }
    if (do_sample) {
      if (auto t = find_number(generation, "temperature", generation_path))
        c.default_temperature = static_cast<float>(*t);
      if (auto p = find_number(generation, "top_p", generation_path))
        c.default_top_p = static_cast<float>(*p);
      if (auto k = find_int(generation, "top_k", generation_path))
        c.default_top_k = static_cast<int>(*k);
    }
  }
  validate_config(c, path);
  return c;
}

LlamaConfig load_gguf_config(const GgufFile& file) {
  const std::string arch = file.get_string("general.architecture");
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3") {
    EDGELM_FAIL("[gguf] ", file.path(), ": unknown architecture '", arch,
                "' (supported: llama, qwen2, qwen3)");
  }
  // The metadata keys of the architecture: "qwen2.block_count".
  const auto arch_key = [&](const char* name) { return arch + "." + name; };
  LlamaConfig c;
  c.architecture = arch;
  c.attention_bias = arch == "qwen2";
  c.qk_norm = arch == "qwen3";
  c.hidden_size = file.get_int(arch_key("embedding_length"));
  c.intermediate_size = file.get_int(arch_key("feed_forward_length"));
  c.n_layers = file.get_int(arch_key("block_count"));
  c.n_heads = file.get_int(arch_key("attention.head_count"));
  c.n_kv_heads = file.find_int(arch_key("attention.head_count_kv")).value_or(c.n_heads);
  c.head_dim = file.find_int(arch_key("attention.key_length"))
                   .value_or(c.n_heads > 0 ? c.hidden_size / c.n_heads : 0);
  // The family rotates whole heads, and its values have the keys' head size.
  if (auto v = file.find_int(arch_key("attention.value_length")); v && *v != c.head_dim) {
    EDGELM_FAIL("[gguf] ", file.path(), ": ", arch_key("attention.value_length"), " ", *v,
                " differs from the key head size ", c.head_dim, " (not supported)");
  }
  if (auto rotated = file.find_int(arch_key("rope.dimension_count"));
      rotated && *rotated != c.head_dim) {
    EDGELM_FAIL("[gguf] ", file.path(), ": ", arch_key("rope.dimension_count"), " ", *rotated,
                " differs from the head size ", c.head_dim,
                " (partial rotary embeddings are not supported)");
  }
  // Mixtral's GGUF files say "llama" too; their experts replace the feed-forward tensors.
  if (auto experts = file.find_int(arch_key("expert_count")); experts && *experts != 0) {
    EDGELM_FAIL("[gguf] ", file.path(), ": ", arch_key("expert_count"), " ", *experts,
                " (mixture-of-experts models are not supported)");
  }
  if (auto window = file.find_int(arch_key("attention.sliding_window")); window && *window != 0) {
    EDGELM_FAIL("[gguf] ", file.path(), ": ", arch_key("attention.sliding_window"), " ", *window,
                " (sliding-window attention layers are not supported)");
  }
  check_gguf_rope_scaling(file, arch);
  c.rms_norm_eps = static_cast<float>(file.get_float(arch_key("attention.layer_norm_rms_epsilon")));
  c.rope.theta = static_cast<float>(file.find_float(arch_key("rope.freq_base")).value_or(10000.0));
  c.rope.head_dim = c.head_dim;
  c.max_position_embeddings = file.find_int(arch_key("context_length")).value_or(2048);
  if (const GgufTensor* embedding = file.find_tensor("token_embd.weight")) {
    // Checked here because its first dimension is read before the loader checks every shape.
    if (embedding->shape.rank() != 2) {
      EDGELM_FAIL("[gguf] ", file.path(), ": tensor 'token_embd.weight' has shape ",
                  embedding->shape.to_string(), ", expected [vocab, embedding_length]");
    }
    c.vocab_size = embedding->shape[0];
  }
  if (auto vocab = file.find_int(arch_key("vocab_size"))) c.vocab_size = *vocab;
  c.tie_word_embeddings = file.find_tensor("output.weight") == nullptr;
  // Token ids are u32 in GGUF; 4294967295 stands for none (as llama.cpp reads it).
  auto gguf_token_id = [&](const char* key) {
    const std::optional<int64_t> value = file.find_int(key);
    if (!value || *value == int64_t{0xffffffff}) return int32_t{-1};
    // A signed -1 is not llama.cpp's "none" (which is the u32 above): a writer that meant none
    // wrote the wrong type, and one that meant an id wrote a broken one.
    if (*value < 0) {
      EDGELM_FAIL("[config] ", file.path(), ": ", key, " ", *value,
                  " is not a token id (GGUF ids are unsigned; 4294967295 means none)");
    }
    return token_id(*value, key, file.path());
  };
  c.bos_token_id = gguf_token_id("tokenizer.ggml.bos_token_id");
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"}) {
    const int32_t id = gguf_token_id(key);
    if (id != -1 &&
        std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) {
      c.eos_token_ids.push_back(id);
    }
  }
  if (const GgufTensor* factors = file.find_tensor("rope_freqs.weight")) {
    if (factors->type != GgmlType::F32 || factors->shape.numel() != c.head_dim / 2) {
      EDGELM_FAIL("[gguf] ", file.path(),
                  ": rope_freqs.weight must be F32 with head_dim/2 = ", c.head_dim / 2, " values");
    }
    const auto* values = reinterpret_cast<const float*>(factors->data);
    c.rope.freq_factors.assign(values, values + c.head_dim / 2);
  }
  validate_config(c, file.path());
  return c;
}

}  // namespace edgelm
