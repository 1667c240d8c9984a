// Two configurations of one model compared step by step: two backends (cpu:portable against
// cpu:avx2, the CPU against OpenCL), two weight types or two KV types, over the same tokens. The
// library of bin/parity (docs/testing.md, "Parity on real models").
//
// Two correct configurations do not give equal logits: they sum in other orders, and where x is
// rounded to 8 bits for the weights' integer dot products, a difference of one ulp upstream can
// move a rounding and so a logit by far more. So each step is judged by a bound (ParityBound) and
// the tie rule: a step is a fault when its logits lie further apart than the bound, or when the
// two configurations pick different best tokens although the first one's top-2 margin is more
// than twice the bound (neither difference within the bound could have swapped them). A
// different best token below that margin is an explained divergence: a near tie.
//
//   ParityRun run(model_a, cache_a, model_b, cache_b, {.bound = parity_bound(DType::Q4_1)});
//   run.teacher_forced(text_ids, [&](const ParityStep& step) { summary.add(step); });
//   run.greedy(prompt_ids, 128, [&](const ParityStep& step) { summary.add(step); });
//   if (summary.faults > 0) ...
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/dtype.h"
#include "core/kv_cache.h"
#include "models/llama.h"

namespace edgelm {

// How far apart two correct configurations' numbers may lie.
struct ParityBound {
  // The largest |a - b| over one step's logits.
  double logit = 0.0;
  // The largest relative difference ||a - b|| / ||a|| of one layer's output row (with layers on):
  // the first layer above it is the one where the configurations depart.
  double hidden = 0.0;
};

// The bound for a pair whose weights are of these types (the coarser one decides): types whose dot
// product rounds x to 8 bits (Q8_0, Q4_0 ... Q6_K) against float-activation types (F32, F16,
// BF16). Measured on SmolLM2-135M-Instruct and the tiny fixtures (docs/testing.md).
ParityBound parity_bound(DType weights_a, DType weights_b);

// One step's logits of a against b's.
struct LogitDiff {
  double max_abs = 0.0;  // max |a_i - b_i|
  double max_rel = 0.0;  // max_abs / max |a_i|
  double kl = 0.0;       // KL(softmax(a) || softmax(b)), in nats
  int32_t top_a = -1;    // a's best token (the lowest id among equal logits)
  int32_t top_b = -1;
  double margin_a = 0.0;  // a's best logit less a's second best
  double margin_b = 0.0;
  bool finite = true;  // false when either row holds a NaN or an infinity
  bool agree() const { return top_a == top_b; }
};
// Throws edgelm::Error when the rows differ in length or are empty.
LogitDiff compare_logits(std::span<const float> a, std::span<const float> b);

enum class StepVerdict : uint8_t {
  Agree,          // the same best token, logits within the bound
  Explained,      // different best tokens at a near tie: a's margin within twice the bound
  Unexplained,    // different best tokens, a's margin above twice the bound: a fault
  BoundExceeded,  // the logits lie further apart than the bound: a fault
  NonFinite,      // a NaN or an infinity in either row: a fault
};
const char* verdict_name(StepVerdict verdict);
inline bool is_fault(StepVerdict v) {
  return v == StepVerdict::Unexplained || v == StepVerdict::BoundExceeded ||
         v == StepVerdict::NonFinite;
}
StepVerdict judge_step(const LogitDiff& diff, const ParityBound& bound);

struct ParityStep {
  const char* phase = "";  // "teacher" (a text fed to both) or "greedy" (a's choices fed to both)
  int64_t index = 0;       // the position in the text, or the greedy step
  int32_t next = -1;       // the token fed after this step (the text's next, or a's choice); -1
  LogitDiff diff;
  StepVerdict verdict = StepVerdict::Agree;
  // With ParityOptions::layers: each layer's relative output difference (see ParityBound::hidden),
  // and the first layer above the bound (-1: none).
  std::vector<double> layers;
  int64_t first_departing_layer = -1;
};

// What a run found, step by step and in sum.
struct ParitySummary {
  int64_t steps = 0;
  int64_t agree = 0;
  int64_t explained = 0;
  int64_t faults = 0;
  double max_abs = 0.0;
  double max_rel = 0.0;
  double max_kl = 0.0;
  double sum_kl = 0.0;
  double max_hidden = 0.0;  // the largest layer-output difference (with layers on)
  // The first step whose best tokens differ, and the first fault, as "phase index".
  std::optional<ParityStep> first_divergence;
  std::optional<ParityStep> first_fault;
  // The lowest first departing layer of any fault (-1: none seen, or layers off).
  int64_t first_departing_layer = -1;

  void add(const ParityStep& step);
  double mean_kl() const { return steps > 0 ? sum_kl / static_cast<double>(steps) : 0.0; }
};

struct ParityOptions {
  ParityBound bound;
  // Compare every layer's output too (ForwardOptions::export_hidden).
  bool layers = false;
  // Tokens per teacher-forced step; 0: the smaller of the two models' max_chunk().
  int64_t batch = 0;
};

// Runs two models in lockstep, each over its own cache (which the run continues from: clear them
// first for a fresh start). The models may share nothing or a backend; their vocabularies must be
// the same size.
class ParityRun {
 public:
  using OnStep = std::function<void(const ParityStep&)>;

  // Throws edgelm::Error when the models' vocabularies or layer counts differ.
  ParityRun(LlamaModel& a, KvCache& cache_a, LlamaModel& b, KvCache& cache_b,
            const ParityOptions& options);

  // Feeds `tokens` to both in chunks and judges the logits after every token but the last (the
  // prediction of the next one).
  void teacher_forced(std::span<const int32_t> tokens, const OnStep& on_step);

  // Feeds `prompt` to both, then n times: a's best token is fed to both (so a divergence does not
  // change what either sees next), and each step's logits are judged. Stops early after a token
  // in `stop` (end of turn, EOS). Returns the tokens a chose.
  std::vector<int32_t> greedy(std::span<const int32_t> prompt, int64_t n, const OnStep& on_step,
                              std::span<const int32_t> stop = {});

 private:
  void step(std::span<const int32_t> tokens, int64_t logits_from, const char* phase,
            int64_t first_index, std::span<const int32_t> next, const OnStep& on_step);

  LlamaModel& a_;
  KvCache& cache_a_;
  LlamaModel& b_;
  KvCache& cache_b_;
  ParityOptions options_;
};

// Two free-running greedy runs given as their logits ([steps, vocab] each, as generate and
// generate_hybrid write them with --dump-logits): every step is judged up to and including the
// first whose best tokens differ (past it the runs saw different tokens, so nothing more is
// comparable). The steps judged, in order. Throws edgelm::Error for rows of different lengths.
std::vector<ParityStep> compare_greedy_logits(std::span<const float> a, std::span<const float> b,
                                              int64_t vocab, const ParityBound& bound);

// A backend that computes as `inner` does but for one planted fault: after every matmul by
// `weight` (a model's tensor, matched by its data), `delta` is added to output column `row` of
// every token — one wrong row of a kernel. For proving that the parity tool reports a wrong
// kernel as a fault, and at the layer it is in. The outputs must be host-visible once
// synchronised (the CPU backend; OpenCL's shared buffers). Keeps references: `inner` and the
// weight's buffer must outlive it.
std::unique_ptr<Backend> plant_fault(Backend& inner, const Tensor& weight, int64_t row,
                                     float delta);

}  // namespace edgelm
