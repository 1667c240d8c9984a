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
  DType quant = DType::F32;   // hf: F32, F16, BF16; gguf: also Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
                              // Q4_K, Q5_K, Q6_K
  // GGUF with quant Q4_K or Q5_K: llama.cpp's "medium" mix (Q4_K_M, Q5_K_M), which gives Q6_K to
  // the output matrix and to attn_v and ffn_down of a chosen 14 layers in 30 (k_quant_type). With
  // or without it, a K-quant matrix whose rows are no multiple of 256 takes llama.cpp's fallback
  // (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0).
  bool k_quant_mix = false;
  // GGUF only: the token embedding's type when it differs from `quant`, as in llama.cpp's
  // quantized files (SmolLM2's Q4_1 file keeps a Q8_0 embedding).
  std::optional<DType> embedding_quant;
  uint64_t seed = 0;
  std::string out_dir;
};

// The type llama.cpp's quantizer gives a matrix of a K-quant file: `gguf_name` as in GGUF
// (token_embd.weight, output.weight, blk.N.attn_v.weight, ...), `layer` its block (-1 for the
// others), `columns` its row length, `tied` whether token_embd is also the output. `base` is
// Q4_K, Q5_K or Q6_K, `mix` the medium mix (MakeModelOptions::k_quant_mix).
DType k_quant_type(const std::string& gguf_name, int64_t layer, int64_t n_layers, int64_t columns,
                   bool tied, DType base, bool mix);

// Writes the model into options.out_dir (created if needed) and returns what to pass as
// --model-path: the folder for "hf", the .gguf file for "gguf".
std::string make_model(const MakeModelOptions& options);

}  // namespace edgelm
