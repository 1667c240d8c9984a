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
};

// Inverse frequency of each rotated pair, head_dim / 2 values. Computed in float32 exactly the
// way Hugging Face transformers does (inv_freq = 1 / theta^(2i/d), then llama3 scaling), because
// matching its rounding keeps long-position logits within fixture tolerance.
std::vector<float> rope_inv_freq(const RopeParams& params);

}  // namespace edgelm
