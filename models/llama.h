// The Llama model (Qwen2 and Qwen3 too, as switches of LlamaConfig): token embedding, n_layers of
// (RMSNorm, GQA attention with RoPE, residual, RMSNorm, SwiGLU MLP, residual), final RMSNorm and
// the output projection. Prefill runs a chunk of tokens with matmuls over the chunk; decode is the
// same path with one token. Every intermediate lives in a workspace allocated once. Only the last
// position's logits are computed, unless a step asks for those of every position (the
// teacher-forced path, eval/teacher_forcing.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/backend.h"
#include "core/kv_cache.h"
#include "core/tensor.h"
#include "models/config.h"

namespace edgelm {

struct LlamaLayerWeights {
  Tensor attn_norm;  // F32 [hidden]
  Tensor wq;         // [n_heads * head_dim, hidden]   (rotate-half row order, as in HF)
  Tensor wk;         // [n_kv_heads * head_dim, hidden]
  Tensor wv;         // [n_kv_heads * head_dim, hidden]
  Tensor wo;         // [hidden, n_heads * head_dim]
  Tensor ffn_norm;   // F32 [hidden]
  Tensor w_gate;     // [intermediate, hidden]
  Tensor w_up;       // [intermediate, hidden]
  Tensor w_down;     // [hidden, intermediate]
  // Qwen2 (LlamaConfig::attention_bias): F32 [n_heads * head_dim], [n_kv_heads * head_dim] x2.
  Tensor bq, bk, bv;
  // Qwen3 (LlamaConfig::qk_norm): F32 [head_dim] each, over every head of q and of k.
  Tensor q_norm, k_norm;
};

struct LlamaWeights {
  Tensor embedding;    // [vocab, hidden]
  Tensor output_norm;  // F32 [hidden]
  Tensor output;       // [vocab, hidden]; the embedding itself when tied
  std::vector<LlamaLayerWeights> layers;
  std::shared_ptr<const void> keep_alive;  // file mappings the tensors point into
};

// What one forward step computes beyond the last position's logits. The three export fields are
// what the KV cache's eviction asks of a step (StepExports, eviction/cache_manager.h).
struct ForwardOptions {
  // Export attention mass into cache.mass(layer) for every layer: per (kv head, slot), the softmax
  // weight summed over the query heads of the group and over this step's queries whose logical
  // position is >= mass_from_position. Eviction policies read it; nothing is recomputed.
  bool export_mass = false;
  int64_t mass_from_position = 0;
  // Logits of every position of the step from its index `logits_from` on, instead of the last
  // position's alone: forward() then returns [n - logits_from, vocab] row-major, row r being the
  // logits after token logits_from + r of the step, and an empty span when logits_from == n (the
  // step only fills the cache). Earlier positions get none, as llama.cpp's perplexity asks for
  // none in the first half of a window; the last layer then runs only for the rows that feed
  // logits. The step must fit in one chunk (max_chunk). The [max_chunk, vocab] floats for these
  // rows are allocated on the first such step, so generation's memory does not grow.
  bool all_logits = false;
  int64_t logits_from = 0;
  // Keep every layer's query rows of this step before RoPE, readable through
  // LlamaModel::query_rows(layer) once the backend is synchronised (eviction policies that keep
  // query statistics read them; nothing is recomputed). The projection writes the queries there
  // and RoPE reads them from there into the workspace, so the export adds no op; the
  // [n_layers, max_chunk, n_heads, head_dim] floats are allocated on the first step that asks.
  // The step must fit in one chunk; the last layer then projects every row's query, not only the
  // rows that produce logits (the rest of that layer stays pruned).
  bool export_queries = false;
  // Keep every layer's output (the residual stream after its MLP) for the rows the layer ran for,
  // readable through LlamaModel::hidden_rows(layer) once the backend is synchronised: the parity
  // tool (eval/parity.h) compares two backends layer by layer to find the first that departs. One
  // copy per layer; the [n_layers * max_chunk, hidden] floats are allocated on the first step that
  // asks. The step must fit in one chunk.
  bool export_hidden = false;
};

// Tokens per prefill step unless the caller picks another count (bench and generate --chunk). On
// the Zen 5 VM (1B, one and two threads) 128 was level with 64 for Q4_0 weights and 3-6 % faster
// for Q8_0 and F16 (the float GEMM converts each F16 weight chunk once per band of x); 256 gained
// nothing more. The workspace grows with it: ~13 MiB at 128 for Llama-3.2-1B.
inline constexpr int64_t kDefaultPrefillChunk = 128;

class LlamaModel {
 public:
  // Checks every weight's shape against the config (throws edgelm::Error naming the tensor).
  // max_chunk: the most tokens one forward step processes; longer inputs are split.
  LlamaModel(Backend& backend, LlamaConfig config, LlamaWeights weights,
             int64_t max_chunk = kDefaultPrefillChunk);

  const LlamaConfig& config() const { return config_; }
  const LlamaWeights& weights() const { return weights_; }
  Backend& backend() { return backend_; }
  int64_t max_chunk() const { return max_chunk_; }

  // A cache shaped for this model: `capacity` slots, positions up to max_positions (0: no limit;
  // see KvCache).
  KvCache make_cache(int64_t capacity, DType kv_type, int64_t max_positions = 0) const;

  // Feeds `tokens` at logical positions cache.next_position() onwards, appending their keys and
  // values to the cache, and returns the logits after the last token ([vocab], valid until the
  // next call); with options.all_logits, those of every position from options.logits_from on
  // (see ForwardOptions). With options.export_mass or options.all_logits, the tokens must fit in
  // one chunk (the mass of a step is that of one attention call per layer). Throws edgelm::Error
  // for an empty input, an out-of-vocabulary id, a full cache or logits_from outside [0, n].
  std::span<const float> forward(std::span<const int32_t> tokens, KvCache& cache,
                                 const ForwardOptions& options = {});

  // Bytes of weights one decode step reads (every matrix once, the embedding row aside).
  size_t weight_bytes_per_token() const;
  // Bytes of weights the model holds: those, and the embedding table unless it is the output's
  // own bytes (a tied embedding used from the output matrix).
  size_t weight_bytes() const;

  // The queries before RoPE of `layer` in the last step run with options.export_queries:
  // F32 [n, n_heads, head_dim] for its n tokens (a view; valid until the next such step). Throws
  // when no step has exported queries.
  Tensor query_rows(int64_t layer) const;
  // The output of `layer` in the last step run with options.export_hidden: F32 [rows, hidden] for
  // the rows the layer ran for, which are the step's last `rows` tokens (all of them, except in a
  // pruned last layer: the rows that produce logits, or none). A view, valid until the next such
  // step. Throws when no step has exported hidden states.
  Tensor hidden_rows(int64_t layer) const;
  // The RoPE frequencies the model rotates by (rope_inv_freq of its config): [head_dim / 2].
  std::span<const float> rope_inv_freq() const { return inv_freq_; }

 private:
  // Runs one chunk; computes the logits of its rows [first_logit_row, n) into the first rows of
  // `logits` ([>= n - first_logit_row, vocab]); none when first_logit_row == n.
  void forward_chunk(std::span<const int32_t> tokens, KvCache& cache, int64_t first_logit_row,
                     const Tensor& logits, const ForwardOptions& options);
  // rows[r, :] += bias for every row of rows ([n, width]; bias F32 [width]).
  void add_bias(const Tensor& rows, const Tensor& bias);

  Backend& backend_;
  LlamaConfig config_;
  LlamaWeights weights_;
  int64_t max_chunk_;

  struct Workspace {
    Tensor ids;        // I32 [chunk]
    Tensor positions;  // I32 [chunk]
    Tensor inv_freq;   // F32 [head_dim / 2]
    Tensor x;          // [chunk, hidden]       residual stream
    Tensor normed;     // [chunk, hidden]
    Tensor q;          // [chunk, n_heads, head_dim]
    Tensor k;          // [chunk, n_kv_heads, head_dim]
    Tensor v;          // [chunk, n_kv_heads, head_dim]
    Tensor attn;       // [chunk, n_heads, head_dim]
    Tensor projected;  // [chunk, hidden]
    Tensor gate;       // [chunk, intermediate]
    Tensor up;         // [chunk, intermediate]
    Tensor logits;     // [1, vocab]
    Tensor bias_rows;  // [chunk * max(q_dim, kv_dim)]: a bias repeated over a step's rows (Qwen2)
  } ws_;
  // [max_chunk, vocab]: the logits of every position (ForwardOptions::all_logits), allocated by the
  // first step that asks for them.
  Tensor all_logits_;
  // [n_layers * max_chunk, n_heads, head_dim]: each layer's queries before RoPE
  // (ForwardOptions::export_queries), allocated by the first step that asks for them; rows of the
  // last such step.
  Tensor query_export_;
  int64_t query_export_rows_ = 0;
  // [n_layers * max_chunk, hidden]: each layer's output (ForwardOptions::export_hidden), allocated
  // by the first step that asks; hidden_export_rows_[layer] rows of the last such step.
  Tensor hidden_export_;
  std::vector<int64_t> hidden_export_rows_;
  std::vector<float> inv_freq_;  // [head_dim / 2], the host copy of ws_.inv_freq
};

}  // namespace edgelm
