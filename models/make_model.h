// Random-weight models with real shapes, written as a Hugging Face folder or a GGUF file, so the
// whole model path can be run, tested and benchmarked without downloading a checkpoint. The same
// preset and seed give the same weights in both formats.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "models/config.h"

namespace edgelm {

struct ModelPreset {
  std::string name;
  std::string description;
  LlamaConfig config;
};

// tiny (GQA, llama3 rope scaling, tied), tiny-mha-untied, tiny-odd-heads (3 heads, 1 kv head,
// explicit head_dim), tiny-long (4 layers, 8 heads / 2 kv), llama-3.2-1b, llama-3.2-3b.
const std::vector<ModelPreset>& model_presets();
// Throws edgelm::Error listing the presets when `name` is unknown.
const ModelPreset& find_preset(const std::string& name);

struct MakeModelOptions {
  std::string preset = "tiny";
  std::string format = "hf";  // "hf" or "gguf"
  DType quant = DType::F32;   // hf: F32, F16, BF16; gguf: also Q8_0, Q4_0, Q4_1, Q5_0, Q5_1
  // GGUF only: the token embedding's type when it differs from `quant`, as in llama.cpp's
  // quantized files (SmolLM2's Q4_1 file keeps a Q8_0 embedding).
  std::optional<DType> embedding_quant;
  uint64_t seed = 0;
  std::string out_dir;
};

// Writes the model into options.out_dir (created if needed) and returns what to pass as
// --model-path: the folder for "hf", the .gguf file for "gguf".
std::string make_model(const MakeModelOptions& options);

}  // namespace edgelm
