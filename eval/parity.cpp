#include "eval/parity.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/error.h"

namespace edgelm {

namespace {

// True for the weight types whose dot product rounds x to 8 bits (ActivationFormat other than F32).
bool rounds_x(DType type) {
  return dtype_info(type).activation != ActivationFormat::F32;
}

// The best and second-best logits of a row, and the best's index (the lowest among equals).
struct Top2 {
  int32_t index = -1;
  double best = -std::numeric_limits<double>::infinity();
  double second = -std::numeric_limits<double>::infinity();
};

Top2 top2(std::span<const float> row) {
  Top2 top;
  for (size_t i = 0; i < row.size(); ++i) {
    const double v = row[i];
    if (v > top.best) {
      top.second = top.best;
      top.best = v;
      top.index = static_cast<int32_t>(i);
    } else if (v > top.second) {
      top.second = v;
    }
  }
  return top;
}

double log_sum_exp(std::span<const float> row, double max) {
  double sum = 0.0;
  for (const float v : row) sum += std::exp(static_cast<double>(v) - max);
  return max + std::log(sum);
}

}  // namespace

ParityBound parity_bound(DType weights_a, DType weights_b) {
  // Measured on SmolLM2-135M-Instruct Q4_1 over 512 tokens of alice29 (docs/testing.md, "Parity
  // on real models"), largest over the steps: x rounded to 8 bits on one side or both (cpu:portable
  // against cpu:avx2, cpu:avx2 against OpenCL), 2.1 per logit and 0.078 per layer output; float
  // weights, 0.013 (cpu:portable against cpu:avx2) and 0.036 (an F32 cache against F16).
  if (rounds_x(weights_a) || rounds_x(weights_b)) return {.logit = 3.0, .hidden = 0.15};
  return {.logit = 0.1, .hidden = 0.01};
}

LogitDiff compare_logits(std::span<const float> a, std::span<const float> b) {
  EDGELM_CHECK(a.size() == b.size() && !a.empty(), "[parity] logit rows of ", a.size(), " and ",
               b.size(), " values");
  LogitDiff diff;
  double max_a = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) diff.finite = false;
    diff.max_abs = std::max(diff.max_abs, std::abs(static_cast<double>(a[i]) - b[i]));
    max_a = std::max(max_a, std::abs(static_cast<double>(a[i])));
  }
  const Top2 ta = top2(a);
  const Top2 tb = top2(b);
  diff.top_a = ta.index;
  diff.top_b = tb.index;
  if (!diff.finite) {
    diff.max_abs = diff.max_rel = diff.kl = std::numeric_limits<double>::quiet_NaN();
    return diff;
  }
  diff.margin_a = ta.best - ta.second;
  diff.margin_b = tb.best - tb.second;
  diff.max_rel = max_a > 0.0 ? diff.max_abs / max_a : 0.0;
  // KL(p_a || p_b) = sum p_a (log p_a - log p_b), over log-softmaxes formed in double.
  const double lse_a = log_sum_exp(a, ta.best);
  const double lse_b = log_sum_exp(b, tb.best);
  double kl = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double log_pa = a[i] - lse_a;
    const double log_pb = b[i] - lse_b;
    kl += std::exp(log_pa) * (log_pa - log_pb);
  }
  diff.kl = std::max(kl, 0.0);
  return diff;
}

const char* verdict_name(StepVerdict verdict) {
  switch (verdict) {
    case StepVerdict::Agree:
      return "agree";
    case StepVerdict::Explained:
      return "explained";
    case StepVerdict::Unexplained:
      return "unexplained";
    case StepVerdict::BoundExceeded:
      return "bound_exceeded";
    case StepVerdict::NonFinite:
      return "non_finite";
  }
  return "?";
}

StepVerdict judge_step(const LogitDiff& diff, const ParityBound& bound) {
  if (!diff.finite) return StepVerdict::NonFinite;
  // Swapping a's best and another token needs their difference of margin_a undone, and each
  // logit may move by the bound: beyond twice the bound, no correct pair swaps them (and the
  // logits are then necessarily beyond the bound too; the divergence is the better report).
  if (!diff.agree() && diff.margin_a > 2.0 * bound.logit) return StepVerdict::Unexplained;
  if (diff.max_abs > bound.logit) return StepVerdict::BoundExceeded;
  return diff.agree() ? StepVerdict::Agree : StepVerdict::Explained;
}

void ParitySummary::add(const ParityStep& step) {
  ++steps;
  if (step.verdict == StepVerdict::Agree) ++agree;
  if (step.verdict == StepVerdict::Explained) ++explained;
  if (is_fault(step.verdict)) {
    ++faults;
    if (!first_fault) first_fault = step;
    if (step.first_departing_layer >= 0 &&
        (first_departing_layer < 0 || step.first_departing_layer < first_departing_layer)) {
      first_departing_layer = step.first_departing_layer;
    }
  }
  if (!step.diff.agree() && !first_divergence) first_divergence = step;
  if (step.diff.finite) {
    max_abs = std::max(max_abs, step.diff.max_abs);
    max_rel = std::max(max_rel, step.diff.max_rel);
    max_kl = std::max(max_kl, step.diff.kl);
    sum_kl += step.diff.kl;
  }
  for (const double layer : step.layers) max_hidden = std::max(max_hidden, layer);
}

ParityRun::ParityRun(LlamaModel& a, KvCache& cache_a, LlamaModel& b, KvCache& cache_b,
                     const ParityOptions& options)
    : a_(a), cache_a_(cache_a), b_(b), cache_b_(cache_b), options_(options) {
  EDGELM_CHECK(a.config().vocab_size == b.config().vocab_size, "[parity] vocabularies of ",
               a.config().vocab_size, " and ", b.config().vocab_size, " tokens");
  EDGELM_CHECK(a.config().n_layers == b.config().n_layers, "[parity] ", a.config().n_layers,
               " and ", b.config().n_layers, " layers");
  EDGELM_CHECK(options.batch >= 0, "[parity] batch ", options.batch, " is negative");
}

void ParityRun::step(std::span<const int32_t> tokens, int64_t logits_from, const char* phase,
                     int64_t first_index, std::span<const int32_t> next, const OnStep& on_step) {
  const ForwardOptions forward{
      .all_logits = true, .logits_from = logits_from, .export_hidden = options_.layers};
  const int64_t vocab = a_.config().vocab_size;
  const auto n = static_cast<int64_t>(tokens.size());
  const std::span<const float> la = a_.forward(tokens, cache_a_, forward);
  const std::span<const float> lb = b_.forward(tokens, cache_b_, forward);
  for (int64_t r = 0; r < n - logits_from; ++r) {
    ParityStep s;
    s.phase = phase;
    s.index = first_index + r;
    const auto row = static_cast<size_t>(r * vocab);
    s.diff = compare_logits(la.subspan(row, static_cast<size_t>(vocab)),
                            lb.subspan(row, static_cast<size_t>(vocab)));
    s.verdict = judge_step(s.diff, options_.bound);
    s.next = r < static_cast<int64_t>(next.size()) ? next[static_cast<size_t>(r)] : s.diff.top_a;
    if (options_.layers) {
      const int64_t t = logits_from + r;  // the row's index in the step
      for (int64_t l = 0; l < a_.config().n_layers; ++l) {
        const Tensor ha = a_.hidden_rows(l);
        const Tensor hb = b_.hidden_rows(l);
        const int64_t in_layer = t - (n - ha.dim(0));  // the layer ran for the last rows only
        const int64_t width = ha.dim(1);
        const float* pa = ha.data<float>() + in_layer * width;
        const float* pb = hb.data<float>() + in_layer * width;
        double diff2 = 0.0;
        double norm2 = 0.0;
        for (int64_t i = 0; i < width; ++i) {
          const double d = static_cast<double>(pa[i]) - pb[i];
          diff2 += d * d;
          norm2 += static_cast<double>(pa[i]) * pa[i];
        }
        const double rel = norm2 > 0.0 ? std::sqrt(diff2 / norm2) : std::sqrt(diff2);
        s.layers.push_back(rel);
        // NaN compares false: a non-finite layer departs too.
        if (s.first_departing_layer < 0 && !(rel <= options_.bound.hidden)) {
          s.first_departing_layer = l;
        }
      }
    }
    on_step(s);
  }
}

void ParityRun::teacher_forced(std::span<const int32_t> tokens, const OnStep& on_step) {
  EDGELM_CHECK(tokens.size() >= 2, "[parity] a teacher-forced run needs at least 2 tokens, got ",
               tokens.size());
  const int64_t batch =
      options_.batch > 0 ? options_.batch : std::min(a_.max_chunk(), b_.max_chunk());
  EDGELM_CHECK(batch <= a_.max_chunk() && batch <= b_.max_chunk(), "[parity] batch ", batch,
               " is beyond the models' chunk of ", std::min(a_.max_chunk(), b_.max_chunk()));
  const auto n = static_cast<int64_t>(tokens.size());
  // The last token predicts nothing: its chunk's rows stop one short.
  for (int64_t begin = 0; begin < n; begin += batch) {
    const int64_t count = std::min(batch, n - begin);
    const auto chunk = tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(count));
    const auto next = tokens.subspan(static_cast<size_t>(begin + 1),
                                     static_cast<size_t>(std::min(count, n - begin - 1)));
    if (begin + count < n) {
      step(chunk, 0, "teacher", begin, next, on_step);
      continue;
    }
    // The final chunk: judge every row but the last (all of them when they are all there is).
    const ForwardOptions fill{};
    if (count == 1) {
      a_.forward(chunk, cache_a_, fill);
      b_.forward(chunk, cache_b_, fill);
      continue;
    }
    step(chunk.first(static_cast<size_t>(count - 1)), 0, "teacher", begin, next, on_step);
    a_.forward(chunk.last(1), cache_a_, fill);
    b_.forward(chunk.last(1), cache_b_, fill);
  }
}

std::vector<int32_t> ParityRun::greedy(std::span<const int32_t> prompt, int64_t n,
                                       const OnStep& on_step, std::span<const int32_t> stop) {
  EDGELM_CHECK(!prompt.empty(), "[parity] a greedy run needs a prompt");
  EDGELM_CHECK(n >= 0, "[parity] ", n, " greedy steps");
  std::vector<int32_t> chosen;
  if (n == 0) return chosen;
  // The prompt in chunks; the last chunk's last row is the first greedy step.
  const int64_t batch = std::min(a_.max_chunk(), b_.max_chunk());
  const auto p = static_cast<int64_t>(prompt.size());
  int64_t begin = 0;
  for (; p - begin > batch; begin += batch) {
    const auto chunk = prompt.subspan(static_cast<size_t>(begin), static_cast<size_t>(batch));
    a_.forward(chunk, cache_a_);
    b_.forward(chunk, cache_b_);
  }
  int32_t token = -1;
  const auto record = [&](const ParityStep& s) {
    token = s.next;
    on_step(s);
  };
  const auto last = prompt.subspan(static_cast<size_t>(begin));
  step(last, static_cast<int64_t>(last.size()) - 1, "greedy", 0, {}, record);
  for (int64_t i = 0;; ++i) {
    chosen.push_back(token);
    const bool stopped = std::find(stop.begin(), stop.end(), token) != stop.end();
    if (stopped || i + 1 == n) break;
    const int32_t fed[] = {token};
    step(fed, 0, "greedy", i + 1, {}, record);
  }
  return chosen;
}

std::vector<ParityStep> compare_greedy_logits(std::span<const float> a, std::span<const float> b,
                                              int64_t vocab, const ParityBound& bound) {
  EDGELM_CHECK(vocab > 0 && a.size() % static_cast<size_t>(vocab) == 0 &&
                   b.size() % static_cast<size_t>(vocab) == 0,
               "[parity] logits of ", a.size(), " and ", b.size(), " values are not rows of ",
               vocab);
  const auto rows_a = static_cast<int64_t>(a.size()) / vocab;
  const auto rows_b = static_cast<int64_t>(b.size()) / vocab;
  std::vector<ParityStep> steps;
  for (int64_t r = 0; r < std::min(rows_a, rows_b); ++r) {
    ParityStep s;
    s.phase = "greedy";
    s.index = r;
    const auto at = static_cast<size_t>(r * vocab);
    s.diff = compare_logits(a.subspan(at, static_cast<size_t>(vocab)),
                            b.subspan(at, static_cast<size_t>(vocab)));
    s.verdict = judge_step(s.diff, bound);
    s.next = s.diff.top_a;
    steps.push_back(s);
    if (!s.diff.agree()) return steps;
  }
  EDGELM_CHECK(rows_a == rows_b, "[parity] the runs agree on every token but have ", rows_a,
               " and ", rows_b, " steps");
  return steps;
}

namespace {

// Every op as `inner` computes it, with the planted fault after matmuls by one weight.
class PlantedFaultBackend final : public Backend {
 public:
  PlantedFaultBackend(Backend& inner, const Tensor& weight, int64_t row, float delta)
      : inner_(inner), weight_(weight.raw()), row_(row), delta_(delta) {
    EDGELM_CHECK(weight.rank() == 2 && row >= 0 && row < weight.dim(0), "[parity] fault row ", row,
                 " is outside the weight's ", weight.rank() == 2 ? weight.dim(0) : 0, " rows");
  }

  std::string name() const override { return inner_.name(); }
  std::string device() const override { return inner_.device() + " (with a planted fault)"; }
  Memory& memory() override { return inner_.memory(); }
  Memory& weight_memory() override { return inner_.weight_memory(); }
  bool supports(OpKind op, std::initializer_list<DType> dtypes) const override {
    return inner_.supports(op, dtypes);
  }
  bool can_use(const Buffer& buffer) const override { return inner_.can_use(buffer); }
  DType matmul_weight_type(DType dtype) const override { return inner_.matmul_weight_type(dtype); }
  void synchronize() override { inner_.synchronize(); }
  uint64_t host_device_copy_bytes() const override { return inner_.host_device_copy_bytes(); }
  std::vector<OpTiming> op_timings() const override { return inner_.op_timings(); }
  void reset_op_timings() override { inner_.reset_op_timings(); }

  void embed(const Tensor& table, const Tensor& ids, const Tensor& out) override {
    inner_.embed(table, ids, out);
  }
  void matmul(const Tensor& x, const Tensor& w, const Tensor& y) override {
    inner_.matmul(x, w, y);
    if (w.raw() == weight_) corrupt(y);
  }
  void matmul_shared_x(const Tensor& x, std::initializer_list<Tensor> ws,
                       std::initializer_list<Tensor> ys) override {
    inner_.matmul_shared_x(x, ws, ys);
    for (size_t i = 0; i < ws.size(); ++i) {
      if (ws.begin()[i].raw() == weight_) corrupt(ys.begin()[i]);
    }
  }
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) override {
    inner_.rms_norm(x, weight, eps, y);
  }
  void rope(const Tensor& x, const Tensor& positions, const Tensor& inv_freq,
            const Tensor& out) override {
    inner_.rope(x, positions, inv_freq, out);
  }
  void attention(const AttentionArgs& args) override { inner_.attention(args); }
  void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override {
    inner_.silu_mul(gate, up, out);
  }
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override { inner_.add(a, b, out); }
  void softmax(const Tensor& x, const Tensor& y) override { inner_.softmax(x, y); }
  void cast(const Tensor& src, const Tensor& dst) override { inner_.cast(src, dst); }
  void kv_append(const Tensor& src, const Tensor& slots, const Tensor& cache) override {
    inner_.kv_append(src, slots, cache);
  }
  void kv_compact(const Tensor& cache, const Tensor& keep) override {
    inner_.kv_compact(cache, keep);
  }
  void copy(const Tensor& src, const Tensor& dst) override { inner_.copy(src, dst); }

 private:
  void corrupt(const Tensor& y) {
    inner_.synchronize();
    auto* out = y.data<float>();
    EDGELM_CHECK(out != nullptr, "[parity] a planted fault needs host-visible outputs");
    const int64_t width = y.dim(y.rank() - 1);
    for (int64_t t = 0; t < y.rows(); ++t) out[t * width + row_] += delta_;
  }

  Backend& inner_;
  const void* weight_;
  int64_t row_;
  float delta_;
};

}  // namespace

std::unique_ptr<Backend> plant_fault(Backend& inner, const Tensor& weight, int64_t row,
                                     float delta) {
  return std::make_unique<PlantedFaultBackend>(inner, weight, row, delta);
}

}  // namespace edgelm
