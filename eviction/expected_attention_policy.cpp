#include "eviction/expected_attention_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "eviction/cached_rows.h"

namespace edgelm {
namespace {

class ExpectedAttentionPolicy final : public EvictionPolicy {
 public:
  explicit ExpectedAttentionPolicy(const EvictionConfig& c)
      : budget_(c.kv_budget),
        sinks_(*c.sink_tokens),
        future_(c.ea_future_positions),
        covariance_(c.ea_covariance),
        epsilon_(static_cast<float>(c.ea_epsilon)) {}
  std::string name() const override { return "expected_attention"; }
  std::optional<int64_t> own_limit() const override { return budget_; }
  bool wants_queries() const override { return true; }
  KeptSlots always_kept() const override { return {.first = sinks_}; }

  void prepare(int64_t n_layers, int64_t n_kv_heads, int64_t capacity) override {
    n_layers_ = n_layers;
    n_kv_heads_ = n_kv_heads;
    capacity_ = capacity;
    count_.assign(static_cast<size_t>(n_layers), 0.0);
  }

  void observe_queries(const QueryRows& q) override {
    if (n_heads_ == 0) allocate(q);
    EDGELM_CHECK(
        q.n_heads == n_heads_ && q.head_dim == head_dim_ && q.layer >= 0 && q.layer < n_layers_,
        "[eviction] expected_attention: queries of layer ", q.layer, " with ", q.n_heads,
        " heads of ", q.head_dim, " do not match the first step's ", n_heads_, " of ", head_dim_);
    // Queries at the sink positions are left out, as kvpress leaves out the first hidden states:
    // they are outliers that would dominate the mean and covariance.
    const int64_t first = std::clamp<int64_t>(sinks_ - q.first_position, 0, q.n_tokens);
    const int64_t n = q.n_tokens - first;
    if (n == 0) return;
    const int64_t d = head_dim_;
    for (int64_t h = 0; h < n_heads_; ++h) {
      double* sum = query_sum(q.layer, h);
      double* products = query_products(q.layer, h);
      if (n <= 2) {  // decode: straight into the running sums
        for (int64_t t = first; t < q.n_tokens; ++t)
          add_row(q.rows + (t * n_heads_ + h) * d, sum, products);
        continue;
      }
      // Prefill: the step's sums in float (at most a chunk of rows each) and then once into the
      // running double sums, since the float loops take 4 lanes per SSE op where the library is
      // built without -march, against 2 for doubles.
      std::fill(step_products_.begin(), step_products_.end(), 0.0f);
      std::fill(step_sum_.begin(), step_sum_.end(), 0.0f);
      for (int64_t t = first; t < q.n_tokens; ++t) {
        add_row(q.rows + (t * n_heads_ + h) * d, step_sum_.data(), step_products_.data());
      }
      for (int64_t i = 0; i < d; ++i) {
        sum[i] += step_sum_[i];
        for (int64_t j = i; j < d; ++j) products[i * d + j] += step_products_[i * d + j];
      }
    }
    count_[q.layer] += static_cast<double>(n);
  }

  void score(const LayerSlots& slots, Phase, float* scores) override {
    check_cached_rows(slots.k, "expected_attention");
    check_cached_rows(slots.v, "expected_attention");
    const int64_t n_slots = slots.n_slots;
    const int64_t d = slots.k.dim(2);
    keys_.resize(static_cast<size_t>(capacity_ * d));  // the first eviction sizes the scratch
    logits_.resize(static_cast<size_t>(capacity_));
    probabilities_.resize(static_cast<size_t>(capacity_));
    value_.resize(static_cast<size_t>(d));
    const bool has_statistics = n_heads_ > 0 && count_[slots.layer] > 0.0;
    if (has_statistics) rotate_statistics_for(slots.next_position);
    const int64_t group = has_statistics ? n_heads_ / n_kv_heads_ : 1;
    for (int64_t g = 0; g < slots.n_kv_heads; ++g) {
      int64_t n_scored = 0;
      for (int64_t s = 0; s < n_slots; ++s) {
        read_cached_row(slots.k, s, g, keys_.data() + s * d);
        if (!is_sink(slots, s, g)) ++n_scored;
      }
      std::fill_n(probabilities_.begin(), n_slots, 0.0f);
      if (n_scored > 0) {
        for (int64_t j = 0; j < group; ++j) {
          if (has_statistics) {
            add_head_probabilities(slots, g, slots.layer, g * group + j, d, group);
          } else {
            // No query seen yet: every logit is 0, a uniform softmax.
            for (int64_t s = 0; s < n_slots; ++s)
              if (!is_sink(slots, s, g)) probabilities_[s] = 1.0f / static_cast<float>(n_scored);
          }
        }
      }
      for (int64_t s = 0; s < n_slots; ++s) {
        if (is_sink(slots, s, g)) {
          scores[g * n_slots + s] = kAlwaysKeep;
          continue;
        }
        read_cached_row(slots.v, s, g, value_.data());
        float norm = 0.0f;
        for (float x : value_) norm += x * x;
        scores[g * n_slots + s] = (probabilities_[s] + epsilon_) * std::sqrt(norm);
      }
    }
  }

 private:
  // Adds one query row to a head's sums: sum += q, products += q qᵀ (upper triangle). Row by row,
  // so that each inner loop updates independent sums and vectorises without reordering any sum.
  template <typename T>
  void add_row(const float* row, T* sum, T* products) const {
    for (int64_t i = 0; i < head_dim_; ++i) {
      const T qi = row[i];
      sum[i] += qi;
      T* upper = products + i * head_dim_;
      for (int64_t j = i; j < head_dim_; ++j) upper[j] += qi * static_cast<T>(row[j]);
    }
  }

  bool is_sink(const LayerSlots& slots, int64_t s, int64_t g) const {
    return slots.positions[s * slots.n_kv_heads + g] < sinks_;
  }

  void allocate(const QueryRows& q) {
    EDGELM_CHECK(q.n_heads > 0 && q.n_heads % n_kv_heads_ == 0 && q.head_dim % 2 == 0 &&
                     static_cast<int64_t>(q.inv_freq.size()) == q.head_dim / 2,
                 "[eviction] expected_attention: ", q.n_heads, " query heads of ", q.head_dim,
                 " over ", n_kv_heads_, " kv heads with ", q.inv_freq.size(), " RoPE frequencies");
    n_heads_ = q.n_heads;
    head_dim_ = q.head_dim;
    inv_freq_.assign(q.inv_freq.begin(), q.inv_freq.end());
    const auto per_layer = static_cast<size_t>(n_heads_ * (head_dim_ + head_dim_ * head_dim_));
    statistics_.assign(static_cast<size_t>(n_layers_) * per_layer, 0.0);
    mean_.resize(static_cast<size_t>(head_dim_));
    step_sum_.resize(static_cast<size_t>(head_dim_));
    step_products_.resize(static_cast<size_t>(head_dim_ * head_dim_));
    along_.resize(static_cast<size_t>(head_dim_));
    covariance_matrix_.resize(static_cast<size_t>(head_dim_ * head_dim_));
    rotated_.resize(static_cast<size_t>(head_dim_ * head_dim_));
    cos_mean_.resize(static_cast<size_t>(head_dim_ / 2));
    sin_mean_.resize(static_cast<size_t>(head_dim_ / 2));
  }

  // Running sums per (layer, head): sum of q [d], then sum of q qᵀ [d, d] (upper triangle used).
  double* query_sum(int64_t layer, int64_t head) {
    const int64_t per_head = head_dim_ + head_dim_ * head_dim_;
    return statistics_.data() + (layer * n_heads_ + head) * per_head;
  }
  double* query_products(int64_t layer, int64_t head) { return query_sum(layer, head) + head_dim_; }

  // The mean of cos(t θ_i) and sin(t θ_i) over t in [first, first + future): the average RoPE
  // rotation of the next `future` positions, pair by pair (in closed form: a geometric sum).
  void rotate_statistics_for(int64_t first) {
    if (rotation_position_ == first) return;
    rotation_position_ = first;
    const double count = static_cast<double>(future_);
    for (size_t i = 0; i < inv_freq_.size(); ++i) {
      const double theta = inv_freq_[i];
      const double half = std::sin(theta / 2.0);
      // sum_t e^{i t θ} = e^{i (first + (F-1)/2) θ} sin(F θ / 2) / sin(θ / 2)
      const double ratio =
          std::fabs(half) < 1e-12 ? 1.0 : std::sin(count * theta / 2.0) / (count * half);
      const double phase = (static_cast<double>(first) + (count - 1.0) / 2.0) * theta;
      cos_mean_[i] = ratio * std::cos(phase);
      sin_mean_[i] = ratio * std::sin(phase);
    }
  }

  // Adds head h's softmax over the non-sink slots of kv head g, divided by the group size, to
  // probabilities_.
  void add_head_probabilities(const LayerSlots& slots, int64_t g, int64_t layer, int64_t h,
                              int64_t d, int64_t group) {
    const double n = count_[layer];
    const double* sum = query_sum(layer, h);
    const double* products = query_products(layer, h);
    const int64_t half = d / 2;
    // R̄ mu: the rotate-half pairs (i, i + d/2) turn by the averaged cos and sin.
    for (int64_t i = 0; i < half; ++i) {
      const double a = sum[i] / n, b = sum[i + half] / n;
      mean_[i] = static_cast<float>(cos_mean_[i] * a - sin_mean_[i] * b);
      mean_[i + half] = static_cast<float>(sin_mean_[i] * a + cos_mean_[i] * b);
    }
    if (covariance_) rotated_covariance(sum, products, n, d);
    const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d));
    const float inv_two_d = 1.0f / (2.0f * static_cast<float>(d));
    float largest = -std::numeric_limits<float>::infinity();
    for (int64_t s = 0; s < slots.n_slots; ++s) {
      if (is_sink(slots, s, g)) continue;
      const float* key = keys_.data() + s * d;
      float linear = 0.0f;
      for (int64_t i = 0; i < d; ++i) linear += mean_[i] * key[i];
      float quadratic = 0.0f;
      if (covariance_) {
        // kᵀ (Σ' k) with Σ' k summed column by column (Σ' is symmetric), so that the inner loop
        // updates independent sums and vectorises.
        std::fill(along_.begin(), along_.end(), 0.0f);
        for (int64_t j = 0; j < d; ++j) {
          const float* column = covariance_matrix_.data() + j * d;
          const float kj = key[j];
          for (int64_t i = 0; i < d; ++i) along_[i] += column[i] * kj;
        }
        for (int64_t i = 0; i < d; ++i) quadratic += key[i] * along_[i];
      }
      logits_[s] = linear * inv_sqrt_d + quadratic * inv_two_d;
      largest = std::max(largest, logits_[s]);
    }
    double total = 0.0;
    for (int64_t s = 0; s < slots.n_slots; ++s) {
      if (is_sink(slots, s, g)) continue;
      logits_[s] = std::exp(logits_[s] - largest);
      total += logits_[s];
    }
    const auto scale = static_cast<float>(1.0 / (total * static_cast<double>(group)));
    for (int64_t s = 0; s < slots.n_slots; ++s) {
      if (!is_sink(slots, s, g)) probabilities_[s] += logits_[s] * scale;
    }
  }

  // covariance_matrix_ = R̄ Σ R̄ᵀ with Σ = E[q qᵀ] - mu muᵀ (the population covariance, as kvpress
  // divides by the count).
  void rotated_covariance(const double* sum, const double* products, double n, int64_t d) {
    const int64_t half = d / 2;
    for (int64_t i = 0; i < d; ++i) {
      for (int64_t j = i; j < d; ++j) {
        const double value = products[i * d + j] / n - (sum[i] / n) * (sum[j] / n);
        rotated_[i * d + j] = static_cast<float>(value);
        rotated_[j * d + i] = static_cast<float>(value);
      }
    }
    // Rows: M = R̄ Σ.
    for (int64_t i = 0; i < half; ++i) {
      const auto c = static_cast<float>(cos_mean_[i]), s = static_cast<float>(sin_mean_[i]);
      float* top = rotated_.data() + i * d;
      float* bottom = rotated_.data() + (i + half) * d;
      for (int64_t j = 0; j < d; ++j) {
        const float a = top[j], b = bottom[j];
        top[j] = c * a - s * b;
        bottom[j] = s * a + c * b;
      }
    }
    // Columns: M R̄ᵀ.
    for (int64_t r = 0; r < d; ++r) {
      const float* in = rotated_.data() + r * d;
      float* out = covariance_matrix_.data() + r * d;
      for (int64_t i = 0; i < half; ++i) {
        const auto c = static_cast<float>(cos_mean_[i]), s = static_cast<float>(sin_mean_[i]);
        out[i] = c * in[i] - s * in[i + half];
        out[i + half] = s * in[i] + c * in[i + half];
      }
    }
  }

  int64_t budget_;
  int64_t sinks_;
  int64_t future_;
  bool covariance_;
  float epsilon_;
  int64_t n_layers_ = 0;
  int64_t n_kv_heads_ = 0;
  int64_t capacity_ = 0;
  int64_t n_heads_ = 0;  // 0 until the first queries arrive
  int64_t head_dim_ = 0;
  std::vector<float> inv_freq_;
  std::vector<double> count_;         // [n_layers] queries summed per layer
  std::vector<double> statistics_;    // [n_layers, n_heads, head_dim + head_dim²]
  std::vector<float> step_sum_;       // [head_dim] one head's sum of q over a step
  std::vector<float> step_products_;  // [head_dim, head_dim] one head's sum of q qᵀ over a step
  int64_t rotation_position_ = -1;    // the first future position cos_mean_/sin_mean_ are for
  std::vector<double> cos_mean_, sin_mean_;  // [head_dim / 2]
  std::vector<float> mean_;                  // [head_dim] R̄ mu of one head
  std::vector<float> along_;                 // [head_dim] Σ' k of one key
  std::vector<float> rotated_;               // [head_dim, head_dim] scratch for R̄ Σ
  std::vector<float> covariance_matrix_;     // [head_dim, head_dim] R̄ Σ R̄ᵀ of one head
  std::vector<float> keys_;                  // [capacity, head_dim] one kv head's keys as F32
  std::vector<float> logits_;                // [capacity]
  std::vector<float> probabilities_;         // [capacity] group-averaged softmax
  std::vector<float> value_;                 // [head_dim]
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_expected_attention_policy(const EvictionConfig& config) {
  const int64_t sinks = *config.sink_tokens;
  if (sinks >= config.kv_budget) {
    EDGELM_FAIL("[eviction] expected_attention: --sink-tokens ", sinks,
                " must be below --kv-budget ", config.kv_budget);
  }
  if (config.ea_future_positions < 1) {
    EDGELM_FAIL("[eviction] --ea-future-positions ", config.ea_future_positions,
                " must be at least 1");
  }
  if (config.ea_epsilon < 0 || !std::isfinite(config.ea_epsilon)) {
    EDGELM_FAIL("[eviction] --ea-epsilon ", config.ea_epsilon, " must be finite and >= 0");
  }
  return std::make_unique<ExpectedAttentionPolicy>(config);
}

}  // namespace edgelm
