// Loads a Llama model from a Hugging Face folder (config.json + safetensors) or a GGUF file, and
// converts its weights to the requested type on the way in.
#pragma once

#include <optional>
#include <string>

#include "core/backend.h"
#include "models/config.h"
#include "models/llama.h"

namespace edgelm {

struct LoadOptions {
  // Type of every matrix (embedding and projections): quantize or convert on load. nullopt keeps
  // each matrix's own stored type (files may mix them: a Q4_1 file with a Q8_0 embedding), used in
  // place where it maps to a DType (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1); K-quant tensors
  // of GGUF files are dequantized to F16. Norm weights are always F32. Either way the backend may
  // then hold projections in another layout (Backend::matmul_weight_type).
  std::optional<DType> weight_type;
  // The backend that converts weights on the host, reading the file mappings and writing through
  // host pointers: quantizing on load, and the matmul layouts' type changes (Q4_1 to Q8_0). The
  // caller makes it from the user's options (threads, pinning), for a device backend (OpenCL)
  // a CPU backend (create_weight_converter in backends/registry.h). Null: the loading backend
  // converts its own weights, as every CPU backend can; one that does not read host memory makes
  // load_llama throw.
  Backend* converter = nullptr;
};

struct LoadedModel {
  LlamaConfig config;
  LlamaWeights weights;
  std::string format;  // "hf" or "gguf"
  std::string path;
  // Type of the attention/MLP matrices after loading (that of layer 0's Q projection), before any
  // matmul layout: Q4_1 for a Q4_1 file even where the backend multiplies it as Q8_0x8.
  DType weight_type = DType::F32;
  // Every matrix's type after loading, in words: weight_type, then what differs from it, e.g.
  // "q4_1 (token embedding q8_0)" or "q4_0 (output q8_0, 4 projections q8_0)".
  std::string weight_types;
};

// `path` is a folder with config.json (Hugging Face) or a .gguf file. Throws edgelm::Error naming
// the file and the problem, or the backend when the converter (LoadOptions::converter, else
// `backend`) cannot read host memory.
LoadedModel load_llama(const std::string& path, Backend& backend, const LoadOptions& options = {});

// The weights of a model loaded for another backend, in the layouts `backend` multiplies fastest
// (Backend::matmul_weight_type): each matrix whose layout differs (the CPU's Q4_0x8, Q8_0x8, F16x4
// for OpenCL's Q4_0, Q8_0, F16) is repacked by `backend` on the host into its
// weight_memory(); every other tensor (norms, the embedding, matrices already in the layout) is
// the same tensor, sharing its buffer. `backend` must read host memory (a CPU backend) and be
// able to read the given weights in place. For two backends over one model (runtime/hybrid.h).
LlamaWeights weights_for(Backend& backend, const LlamaWeights& weights);

// Where GGUF `llama` files store Q/K rows for interleaved RoPE pairs, Hugging Face stores them for
// rotate-half pairs. Row r of head h in GGUF order holds HF row (r % 2) * head_dim/2 + r / 2.
// Returns the HF row index for a GGUF row (and the inverse, for writers).
int64_t gguf_to_hf_row(int64_t gguf_row, int64_t head_dim);
int64_t hf_to_gguf_row(int64_t hf_row, int64_t head_dim);

}  // namespace edgelm
