#include "models/llama.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace edgelm {
namespace {

void check_weight(const Tensor& t, const char* name, int64_t layer, Shape expected) {
  const std::string where = layer >= 0 ? str_cat("layer ", layer, " ", name) : std::string(name);
  EDGELM_CHECK(t.defined(), "[llama] weight ", where, " is missing");
  EDGELM_CHECK(t.shape() == expected, "[llama] weight ", where, " has shape ",
               t.shape().to_string(), ", the config needs ", expected.to_string());
}

void check_norm(const Tensor& t, const char* name, int64_t layer, int64_t hidden) {
  check_weight(t, name, layer, {hidden});
  EDGELM_CHECK(t.dtype() == DType::F32, "[llama] norm weight ", name, " must be F32, got ",
               dtype_name(t.dtype()));
}

}  // namespace

LlamaModel::LlamaModel(Backend& backend, LlamaConfig config, LlamaWeights weights,
                       int64_t max_chunk)
    : backend_(backend),
      config_(std::move(config)),
      weights_(std::move(weights)),
      max_chunk_(max_chunk) {
  const LlamaConfig& c = config_;
  validate_config(c, "model");
  EDGELM_CHECK(max_chunk_ > 0, "[llama] prefill chunk must be positive, got ", max_chunk_);
  EDGELM_CHECK(static_cast<int64_t>(weights_.layers.size()) == c.n_layers, "[llama] ",
               weights_.layers.size(), " layers of weights for a config with ", c.n_layers);
  check_weight(weights_.embedding, "embedding", -1, {c.vocab_size, c.hidden_size});
  check_weight(weights_.output, "output", -1, {c.vocab_size, c.hidden_size});
  check_norm(weights_.output_norm, "output_norm", -1, c.hidden_size);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LlamaLayerWeights& w = weights_.layers[l];
    check_norm(w.attn_norm, "attn_norm", l, c.hidden_size);
    check_norm(w.ffn_norm, "ffn_norm", l, c.hidden_size);
    check_weight(w.wq, "wq", l, {c.q_dim(), c.hidden_size});
    check_weight(w.wk, "wk", l, {c.kv_dim(), c.hidden_size});
    check_weight(w.wv, "wv", l, {c.kv_dim(), c.hidden_size});
    check_weight(w.wo, "wo", l, {c.hidden_size, c.q_dim()});
    check_weight(w.w_gate, "w_gate", l, {c.intermediate_size, c.hidden_size});
    check_weight(w.w_up, "w_up", l, {c.intermediate_size, c.hidden_size});
    check_weight(w.w_down, "w_down", l, {c.hidden_size, c.intermediate_size});
    if (c.attention_bias) {
      check_norm(w.bq, "bq", l, c.q_dim());
      check_norm(w.bk, "bk", l, c.kv_dim());
      check_norm(w.bv, "bv", l, c.kv_dim());
    }
    if (c.qk_norm) {
      check_norm(w.q_norm, "q_norm", l, c.head_dim);
      check_norm(w.k_norm, "k_norm", l, c.head_dim);
    }
    for (const Tensor* t : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) {
      EDGELM_CHECK(backend.supports(OpKind::Matmul, {t->dtype()}), "[llama] backend ",
                   backend.name(), " cannot multiply ", dtype_name(t->dtype()), " weights");
    }
  }

  Memory& memory = backend.memory();
  const int64_t n = max_chunk_;
  ws_.ids = Tensor::empty(memory, DType::I32, {n});
  ws_.positions = Tensor::empty(memory, DType::I32, {n});
  ws_.inv_freq = Tensor::empty(memory, DType::F32, {c.head_dim / 2});
  ws_.x = Tensor::empty(memory, DType::F32, {n, c.hidden_size});
  ws_.normed = Tensor::empty(memory, DType::F32, {n, c.hidden_size});
  ws_.q = Tensor::empty(memory, DType::F32, {n, c.n_heads, c.head_dim});
  ws_.k = Tensor::empty(memory, DType::F32, {n, c.n_kv_heads, c.head_dim});
  ws_.v = Tensor::empty(memory, DType::F32, {n, c.n_kv_heads, c.head_dim});
  ws_.attn = Tensor::empty(memory, DType::F32, {n, c.n_heads, c.head_dim});
  ws_.projected = Tensor::empty(memory, DType::F32, {n, c.hidden_size});
  ws_.gate = Tensor::empty(memory, DType::F32, {n, c.intermediate_size});
  ws_.up = Tensor::empty(memory, DType::F32, {n, c.intermediate_size});
  if (c.attention_bias) {
    ws_.bias_rows = Tensor::empty(memory, DType::F32, {n * std::max(c.q_dim(), c.kv_dim())});
  }
  ws_.logits = Tensor::empty(memory, DType::F32, {1, c.vocab_size});
  inv_freq_ = edgelm::rope_inv_freq(c.rope);
  std::copy(inv_freq_.begin(), inv_freq_.end(), ws_.inv_freq.data<float>());
}

Tensor LlamaModel::query_rows(int64_t layer) const {
  EDGELM_CHECK(query_export_.defined(), "[llama] no step has exported its queries");
  EDGELM_CHECK(layer >= 0 && layer < config_.n_layers, "[llama] layer ", layer, " of ",
               config_.n_layers);
  return query_export_.slice(layer * max_chunk_, query_export_rows_);
}

Tensor LlamaModel::hidden_rows(int64_t layer) const {
  EDGELM_CHECK(hidden_export_.defined(), "[llama] no step has exported its hidden states");
  EDGELM_CHECK(layer >= 0 && layer < config_.n_layers, "[llama] layer ", layer, " is outside [0, ",
               config_.n_layers, ")");
  return hidden_export_.slice(layer * max_chunk_, hidden_export_rows_[layer]);
}

KvCache LlamaModel::make_cache(int64_t capacity, DType kv_type, int64_t max_positions) const {
  return KvCache(backend_, config_.n_layers, capacity, config_.n_kv_heads, config_.head_dim,
                 kv_type, max_positions);
}

size_t LlamaModel::weight_bytes_per_token() const {
  size_t bytes = weights_.output.nbytes() + weights_.output_norm.nbytes();
  for (const LlamaLayerWeights& w : weights_.layers) {
    for (const Tensor* t :
         {&w.attn_norm, &w.wq, &w.wk, &w.wv, &w.wo, &w.ffn_norm, &w.w_gate, &w.w_up, &w.w_down}) {
      bytes += t->nbytes();
    }
  }
  return bytes;
}

size_t LlamaModel::weight_bytes() const {
  const bool shared = weights_.embedding.raw() == weights_.output.raw();
  return weight_bytes_per_token() + (shared ? 0 : weights_.embedding.nbytes());
}

std::span<const float> LlamaModel::forward(std::span<const int32_t> tokens, KvCache& cache,
                                           const ForwardOptions& options) {
  EDGELM_CHECK(!tokens.empty(), "[llama] forward needs at least one token");
  EDGELM_CHECK(cache.n_layers() == config_.n_layers && cache.n_kv_heads() == config_.n_kv_heads &&
                   cache.head_dim() == config_.head_dim,
               "[llama] the KV cache was made for a different model");
  for (size_t i = 0; i < tokens.size(); ++i) {
    EDGELM_CHECK(tokens[i] >= 0 && tokens[i] < config_.vocab_size, "[llama] token id ", tokens[i],
                 " at index ", i, " is outside the vocabulary of ", config_.vocab_size);
  }
  EDGELM_CHECK(static_cast<int64_t>(tokens.size()) <= cache.free_slots(), "[llama] ", tokens.size(),
               " tokens do not fit in the KV cache (", cache.free_slots(), " of ", cache.capacity(),
               " slots free; raise -c/--ctx-size or enable eviction)");
  const auto n = static_cast<int64_t>(tokens.size());
  EDGELM_CHECK(!options.export_mass || n <= max_chunk_,
               "[llama] attention mass export needs the step to fit in one chunk (", n,
               " tokens, chunk ", max_chunk_, ")");
  EDGELM_CHECK(!options.export_queries || n <= max_chunk_,
               "[llama] query export needs the step to fit in one chunk (", n, " tokens, chunk ",
               max_chunk_, ")");
  if (options.export_queries) {
    if (!query_export_.defined()) {
      query_export_ =
          Tensor::empty(backend_.memory(), DType::F32,
                        {config_.n_layers * max_chunk_, config_.n_heads, config_.head_dim});
    }
    query_export_rows_ = n;
  }
  if (options.export_hidden) {
    EDGELM_CHECK(n <= max_chunk_,
                 "[llama] hidden-state export needs the step to fit in one chunk (", n,
                 " tokens, chunk ", max_chunk_, ")");
    if (!hidden_export_.defined()) {
      hidden_export_ = Tensor::empty(backend_.memory(), DType::F32,
                                     {config_.n_layers * max_chunk_, config_.hidden_size});
    }
    hidden_export_rows_.assign(static_cast<size_t>(config_.n_layers), 0);
  }
  if (options.all_logits) {
    EDGELM_CHECK(n <= max_chunk_, "[llama] the logits of every position need the step to fit in ",
                 "one chunk (", n, " tokens, chunk ", max_chunk_, ")");
    EDGELM_CHECK(options.logits_from >= 0 && options.logits_from <= n, "[llama] logits_from ",
                 options.logits_from, " is outside [0, ", n, "] for a step of ", n, " tokens");
    if (!all_logits_.defined()) {
      all_logits_ = Tensor::empty(backend_.memory(), DType::F32, {max_chunk_, config_.vocab_size});
    }
    const int64_t rows = n - options.logits_from;
    forward_chunk(tokens, cache, options.logits_from, all_logits_, options);
    backend_.synchronize();
    return {all_logits_.data<float>(), static_cast<size_t>(rows * config_.vocab_size)};
  }
  for (int64_t begin = 0; begin < n; begin += max_chunk_) {
    const int64_t count = std::min(n - begin, max_chunk_);
    // Only the last chunk's last row produces logits.
    const int64_t first_logit_row = begin + count == n ? count - 1 : count;
    forward_chunk(tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(count)), cache,
                  first_logit_row, ws_.logits, options);
  }
  backend_.synchronize();
  return {ws_.logits.data<float>(), static_cast<size_t>(config_.vocab_size)};
}

void LlamaModel::add_bias(const Tensor& rows, const Tensor& bias) {
  const int64_t n = rows.dim(0);
  const int64_t width = rows.dim(1);
  const Tensor one = bias.reshape({1, width});
  if (n == 1) {
    backend_.add(rows, one, rows);
    return;
  }
  // The bias repeated n times, by copies that double what is there (log2 n of them).
  const Tensor repeated = ws_.bias_rows.view(DType::F32, {n, width});
  backend_.copy(one, repeated.slice(0, 1));
  for (int64_t have = 1; have < n; have *= 2) {
    const int64_t count = std::min(have, n - have);
    backend_.copy(repeated.slice(0, count), repeated.slice(have, count));
  }
  backend_.add(rows, repeated, rows);
}

void LlamaModel::forward_chunk(std::span<const int32_t> tokens, KvCache& cache,
                               int64_t first_logit_row, const Tensor& logits,
                               const ForwardOptions& options) {
  const LlamaConfig& c = config_;
  Backend& b = backend_;
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t start_pos = cache.next_position();

  b.synchronize();  // ids/positions are rewritten from the host
  auto* ids = ws_.ids.data<int32_t>();
  auto* positions = ws_.positions.data<int32_t>();
  for (int64_t t = 0; t < n; ++t) {
    ids[t] = tokens[t];
    positions[t] = static_cast<int32_t>(start_pos + t);
  }
  const Tensor id_list = ws_.ids.slice(0, n);
  const Tensor pos_list = ws_.positions.slice(0, n);
  const Tensor x = ws_.x.slice(0, n);
  const Tensor normed = ws_.normed.slice(0, n);
  const Tensor k = ws_.k.slice(0, n);
  const Tensor v = ws_.v.slice(0, n);
  // 2-D views of the per-head activations for the projections.
  const Tensor k_rows = k.reshape({n, c.kv_dim()});
  const Tensor v_rows = v.reshape({n, c.kv_dim()});
  const std::span<const int32_t> chunk_positions(positions, static_cast<size_t>(n));

  // Past its K/V projections (which the cache keeps for every token), a layer runs for the rows
  // [first, n) of the chunk: all of them, except in the last layer, whose output only feeds the
  // logits. There it runs for the rows that produce logits (the last token's alone in prefill and
  // decode), or not at all when the chunk produces none: about 1/n_layers of a prefill's work (6 %
  // for Llama-3.2-1B). Attention-mass export wants every query's attention in every layer, so it
  // keeps all rows.
  struct Rows {
    Tensor positions, x, normed, q, q_rows, attn, attn_rows, projected, gate, up;
  };
  auto rows_from = [&](int64_t first) {
    const int64_t count = n - first;
    Rows r;
    r.positions = ws_.positions.slice(first, count);
    r.x = ws_.x.slice(first, count);
    r.normed = ws_.normed.slice(first, count);
    r.q = ws_.q.slice(first, count);
    r.q_rows = r.q.reshape({count, c.q_dim()});
    r.attn = ws_.attn.slice(first, count);
    r.attn_rows = r.attn.reshape({count, c.q_dim()});
    r.projected = ws_.projected.slice(first, count);
    r.gate = ws_.gate.slice(first, count);
    r.up = ws_.up.slice(first, count);
    return r;
  };
  const bool compute_logits = first_logit_row < n;
  const Rows all = rows_from(0);
  const Rows logit_rows = rows_from(compute_logits ? first_logit_row : n - 1);
  const bool prune_last_layer = !options.export_mass;

  AttentionArgs attention;
  attention.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));

  b.embed(weights_.embedding, id_list, x);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LlamaLayerWeights& w = weights_.layers[l];
    b.rms_norm(x, w.attn_norm, c.rms_norm_eps, normed);
    const bool last_layer = l + 1 == c.n_layers;
    const bool pruned = last_layer && prune_last_layer;
    const Rows& r = pruned ? logit_rows : all;
    // Q reads the same rows as K and V unless the pruned last layer wants it for fewer of them
    // (or not at all); a decode step's single row is both. Exported queries are wanted for every
    // row, so they are projected with K and V into the export (before RoPE), and the rows the
    // layer runs for are rotated from there into the workspace.
    const bool q_with_kv = !pruned || first_logit_row == 0 || options.export_queries;
    const Tensor q = options.export_queries ? query_export_.slice(l * max_chunk_, n) : r.q;
    const Tensor q_rows = q.reshape({q.dim(0), c.q_dim()});
    // The rows of q that r runs for: q is r's own rows unless it is the export of every row.
    const Tensor q_for_r = options.export_queries ? q.slice(n - r.q.dim(0), r.q.dim(0)) : q;
    if (q_with_kv) {
      // One pass over x for the three projections (CpuBackend: one quantization of x, one split
      // of all their rows over the threads).
      b.matmul_shared_x(normed, {w.wk, w.wv, w.wq}, {k_rows, v_rows, q_rows});
    } else {
      b.matmul_shared_x(normed, {w.wk, w.wv}, {k_rows, v_rows});
    }
    // Qwen2's biases and Qwen3's per-head norms act on q and k before RoPE (and on q as the
    // export holds it).
    if (c.attention_bias) {
      add_bias(k_rows, w.bk);
      add_bias(v_rows, w.bv);
      if (q_with_kv) add_bias(q_rows, w.bq);
    }
    if (c.qk_norm) {
      b.rms_norm(k, w.k_norm, c.rms_norm_eps, k);
      if (q_with_kv) b.rms_norm(q, w.q_norm, c.rms_norm_eps, q);
    }
    b.rope(k, pos_list, ws_.inv_freq, k);
    cache.append(l, k, v, chunk_positions);
    if (pruned && !compute_logits) break;

    if (!q_with_kv) {
      b.matmul(r.normed, w.wq, q_rows);
      if (c.attention_bias) add_bias(q_rows, w.bq);
      if (c.qk_norm) b.rms_norm(q, w.q_norm, c.rms_norm_eps, q);
    }
    b.rope(q_for_r, r.positions, ws_.inv_freq, r.q);
    const KvCache::View view = cache.view(l);
    attention.q = r.q;
    attention.q_pos = r.positions;
    attention.out = r.attn;
    attention.k = view.k;
    attention.v = view.v;
    attention.kv_pos = view.kv_pos;
    if (options.export_mass) {
      attention.mass = cache.mass(l);
      attention.mass_first_query =
          std::clamp<int64_t>(options.mass_from_position - start_pos, 0, n);
    }
    b.attention(attention);
    b.matmul(r.attn_rows, w.wo, r.projected);
    b.add(r.x, r.projected, r.x);

    b.rms_norm(r.x, w.ffn_norm, c.rms_norm_eps, r.normed);
    b.matmul_shared_x(r.normed, {w.w_gate, w.w_up}, {r.gate, r.up});
    b.silu_mul(r.gate, r.up, r.gate);
    b.matmul(r.gate, w.w_down, r.projected);
    b.add(r.x, r.projected, r.x);
    if (options.export_hidden) {
      const int64_t rows = r.x.dim(0);
      b.copy(r.x, hidden_export_.slice(l * max_chunk_, rows));
      hidden_export_rows_[static_cast<size_t>(l)] = rows;
    }
  }
  cache.advance(n);
  if (!compute_logits) return;
  const int64_t count = n - first_logit_row;
  const Tensor rows = x.slice(first_logit_row, count);
  const Tensor rows_normed = normed.slice(0, count);
  b.rms_norm(rows, weights_.output_norm, c.rms_norm_eps, rows_normed);
  b.matmul(rows_normed, weights_.output, logits.slice(0, count));
}

}  // namespace edgelm
