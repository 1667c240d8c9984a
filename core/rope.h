// Rotary position embedding parameters, and the per-pair inverse frequencies they define.
#pragma once

#include <cstdint>
#include <vector>

namespace edgelm {

// HF `rope_scaling`. Llama 3.1/3.2 use type "llama3": long wavelengths are slowed by `factor`,
// short ones kept, and the band between smoothly interpolated.
struct RopeScaling {
  enum class Type { None, Llama3 };
  Type type = Type::None;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int64_t original_max_position_embeddings = 8192;
};

struct RopeParams {
  int64_t head_dim = 0;  // rotary dimension (all of head_dim for Llama)
  float theta = 10000.0f;
  RopeScaling scaling;
  // Per-pair divisors of the base frequencies, as GGUF files carry Llama 3 scaling
  // (`rope_freqs.weight`). When non-empty they replace `scaling`.
  std::vector<float> freq_factors;
};

// Inverse frequency of each rotated pair, head_dim / 2 values. Computed in float32 with the same
// formula and order of operations as Hugging Face transformers (inv_freq = 1 / theta^(2i/d), then
// llama3 scaling): torch's float pow may differ from powf by an ulp or two, which moves logits
// by far less than the 1e-4 the fixtures check, while evaluating in double would not match better.
std::vector<float> rope_inv_freq(const RopeParams& params);

}  // namespace edgelm
