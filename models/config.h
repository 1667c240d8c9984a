// Model hyper-parameters of the Llama family, from a Hugging Face config.json (plus
// generation_config.json) or from GGUF metadata.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/rope.h"

namespace edgelm {

class GgufFile;

struct LlamaConfig {
  // The member of the family: "llama", "qwen2" or "qwen3". Each difference is one switch below,
  // not another model (docs/model.md, "Architectures").
  std::string architecture = "llama";
  // Q, K and V projections add a bias vector (Qwen2).
  bool attention_bias = false;
  // RMSNorm over each head of q and of k, with weights of head_dim, before RoPE (Qwen3).
  bool qk_norm = false;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;  // config "head_dim" when given, else hidden_size / n_heads
  float rms_norm_eps = 1e-5f;
  RopeParams rope;  // rope.head_dim == head_dim
  bool tie_word_embeddings = false;
  int64_t max_position_embeddings = 0;
  int32_t bos_token_id = -1;           // -1: none
  std::vector<int32_t> eos_token_ids;  // any of them ends generation
  // Sampling defaults a checkpoint may suggest (generation_config.json); unset when absent.
  std::optional<float> default_temperature;
  std::optional<float> default_top_p;
  std::optional<int> default_top_k;

  int64_t q_dim() const { return n_heads * head_dim; }
  int64_t kv_dim() const { return n_kv_heads * head_dim; }
  std::string describe() const;  // one line for logs
};

// Reads <dir>/config.json and, when present, <dir>/generation_config.json (whose eos/bos ids take
// precedence, as in transformers). Throws edgelm::Error "[config] <file>: ..." naming the field for
// a missing file, malformed JSON, a missing or ill-typed field, an architecture other than llama,
// qwen2 or qwen3 (model_type, or an `architectures` entry other than its LlamaForCausalLM,
// Qwen2ForCausalLM or Qwen3ForCausalLM), a field that makes another network of the same weights
// (hidden_act other than silu, attention_bias true for llama and qwen3, mlp_bias true,
// partial_rotary_factor other than 1, sliding-window layers, quantization_config), or a
// rope_scaling that is not default or llama3 (one with settings but no type included).
LlamaConfig load_hf_config(const std::string& dir);

// Reads the <arch>.* keys of a GGUF file (general.architecture "llama", "qwen2" or "qwen3"; any
// other, Qwen's mixture-of-experts and sliding-window variants among them, is refused by name).
// Llama 3 rope scaling arrives as the per-pair divisors of the `rope_freqs.weight` tensor, if
// present. Throws
// "[gguf] <path>: ..." for a mixture of experts (llama.expert_count) and for rope scaling keys
// that change the rotation (llama.rope.scaling.type other than none or linear, a linear factor
// other than 1).
LlamaConfig load_gguf_config(const GgufFile& file);

// Checks the relations between fields (divisibility, positivity, rms_norm_eps below 1); throws
// naming `source`.
void validate_config(const LlamaConfig& config, const std::string& source);

}  // namespace edgelm
