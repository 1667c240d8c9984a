#include "eval/eviction_eval.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <memory>
#include <set>

#include "core/error.h"
#include "core/process_stats.h"
#include "core/sha256.h"
#include "models/tokenizer.h"
#include "runtime/generator.h"

namespace edgelm {
namespace {

int64_t most_slots(const KvCache& cache) {
  int64_t most = 0;
  for (int64_t l = 0; l < cache.n_layers(); ++l) most = std::max(most, cache.size(l));
  return most;
}

// The most slots the cache held at once so far: its size now, or what it held before an eviction
// (a prompt-compressing policy holds its whole prompt until prefill ends, which the size measured
// after prefill no longer shows). Between evictions a cache only grows, so this is the peak.
int64_t peak_slots(const KvCache& cache, const CacheManager* manager) {
  int64_t peak = most_slots(cache);
  if (manager != nullptr) {
    for (const EvictionEvent& event : manager->events()) peak = std::max(peak, event.slots_before);
  }
  return peak;
}

bool known_policy(const std::string& policy) {
  const auto& names = policy_names();
  return std::find(names.begin(), names.end(), policy) != names.end();
}

std::string evicting_policy_list() {
  std::string list;
  for (const std::string& name : policy_names()) {
    if (name != "none") list += (list.empty() ? "" : "|") + name;
  }
  return list;
}

bool compresses_prompt(const EvictionConfig& config) {
  return make_policy(config)->prefill_limit().has_value();
}

// A model, its cache and (for a cell) the cell's manager, as one generator runs them.
struct Lane {
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<CacheManager> manager;
  std::unique_ptr<Generator> generator;

  Lane(LlamaModel& model, int64_t capacity, DType kv_type, const EvictionConfig* config)
      : cache(std::make_unique<KvCache>(model.make_cache(capacity, kv_type))) {
    if (config != nullptr) manager = std::make_unique<CacheManager>(*config, make_policy(*config));
    generator = std::make_unique<Generator>(model, *cache, manager.get());
  }
};

int32_t greedy_token(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace

// ---- budgets ----

int64_t kv_bytes_per_slot(const LlamaConfig& config, DType kv_type) {
  EDGELM_CHECK(kv_type == DType::F32 || kv_type == DType::F16, "[eviction_eval] KV type ",
               dtype_name(kv_type), " is not f32 or f16");
  return static_cast<int64_t>(
      KvCache::slot_bytes(config.n_layers, config.n_kv_heads, config.head_dim, kv_type));
}

EvictionConfig budget_config(const std::string& name, int64_t budget, const BudgetShares& shares) {
  const std::string policy = name.substr(0, name.find('+'));
  EDGELM_CHECK(policy != "none", "[eviction_eval] --policies: 'none' is the full cache, which ",
               "runs beside every cell anyway; list evicting policies (", evicting_policy_list(),
               ")");
  EDGELM_CHECK(known_policy(policy), "[eviction_eval] --policies: '", policy, "' is not one of ",
               evicting_policy_list());
  EDGELM_CHECK(budget >= 1, "[eviction_eval] budget ", budget,
               ": a budget is at least 1 slot per layer and kv head");
  EDGELM_CHECK(shares.sink_tokens >= 0, "[eviction_eval] --sink-tokens ", shares.sink_tokens,
               " must be >= 0");
  EvictionConfig config;
  config.policy = policy;
  config.kv_budget = budget;
  config.window = budget;
  config.protected_prefix = 0;
  config.sink_tokens = shares.sink_tokens;
  config.snapkv_kernel = shares.snapkv_kernel;
  config.snapkv_pool = shares.snapkv_pool;
  config.seed = shares.policy_seed;
  config.pyramid_beta = shares.pyramid_beta;
  for (size_t at = name.find('+'); at != std::string::npos;) {
    const size_t end = name.find('+', at + 1);
    const std::string wrapper = name.substr(at + 1, end == std::string::npos ? end : end - at - 1);
    if (wrapper == "protect") {
      config.protect = "sinks";
    } else if (wrapper == "pyramid") {
      config.layer_budget = "pyramid";
    } else {
      EDGELM_FAIL("[eviction_eval] --policies: '", name, "': wrapper '", wrapper,
                  "' is not protect or pyramid (e.g. h2o+protect, snapkv+pyramid)");
    }
    at = end;
  }
  const bool keeps_sinks = policy == "sink" || policy == "snapkv" ||
                           policy == "expected_attention" || !config.protect.empty();
  if (keeps_sinks) {
    EDGELM_CHECK(shares.sink_tokens < budget, "[eviction_eval] --sink-tokens ", shares.sink_tokens,
                 " must be below the budget of ", budget, " slots (", name,
                 " keeps its sinks inside the budget)");
  }
  if (policy == "sink") config.window = budget - shares.sink_tokens;
  if (policy == "h2o") {
    EDGELM_CHECK(shares.recent_share > 0.0 && shares.recent_share < 1.0,
                 "[eviction_eval] --recent-share ", shares.recent_share, " must be in (0, 1)");
    const int64_t recent =
        std::max<int64_t>(1, std::llround(shares.recent_share * static_cast<double>(budget)));
    EDGELM_CHECK(recent < budget, "[eviction_eval] --recent-share ", shares.recent_share,
                 " leaves h2o no heavy hitters at a budget of ", budget, " slots");
    config.window = recent;
  }
  if (policy == "snapkv") {
    const int64_t window = shares.snapkv_window.value_or(std::min<int64_t>(32, budget / 2));
    EDGELM_CHECK(window >= 1 && window < budget, "[eviction_eval] snapkv's observation window (",
                 "--snapkv-window ", window, ") must be in [1, ", budget, ") at a budget of ",
                 budget, " slots");
    config.snapkv_window = window;
  }
  make_policy(config);  // the wrappers' own checks (a pyramid's top layer), named by their flags
  return config;
}

int64_t largest_layer_limit(const EvictionConfig& config, int64_t n_layers) {
  const std::unique_ptr<EvictionPolicy> policy = make_policy(config);
  int64_t largest = 0;
  for (int64_t l = 0; l < n_layers; ++l)
    largest = std::max(largest, policy->layer_limit(l, n_layers, config.kv_budget));
  return largest;
}

int64_t largest_step(const EvictionConfig& config, int64_t n_layers) {
  const std::unique_ptr<EvictionPolicy> policy = make_policy(config);
  int64_t smallest = config.kv_budget;
  for (int64_t l = 0; l < n_layers; ++l)
    smallest = std::min(smallest, policy->layer_limit(l, n_layers, config.kv_budget));
  // Protected sinks stay beside every step (CacheManager::max_step_tokens).
  const int64_t reserved =
      config.protect.empty() ? 0 : with_budget_defaults(config).sink_tokens.value_or(0);
  return std::max<int64_t>(1, (smallest - reserved) / 2);
}

EvictionConfig streaming_budget_config(const EvictionConfig& config, bool compresses,
                                       int64_t budget, int64_t evict_every) {
  EvictionConfig streaming = config;
  if (compresses) streaming.kv_budget = budget - evict_every + 1;
  return streaming;
}

// ---- texts ----

std::vector<int64_t> token_byte_ends(const Tokenizer& tokenizer, std::span<const int32_t> tokens) {
  TokenStreamDecoder decoder(tokenizer, /*skip_special=*/false);
  std::vector<int64_t> ends;
  ends.reserve(tokens.size());
  int64_t emitted = 0;
  for (const int32_t id : tokens) {
    emitted += static_cast<int64_t>(decoder.push(id).size());
    // Bytes of a character still incomplete belong to the tokens that brought them.
    ends.push_back(emitted + static_cast<int64_t>(decoder.pending_bytes()));
  }
  return ends;
}

EvalText make_eval_text(std::string name, std::string bytes, const Tokenizer& tokenizer,
                        int64_t used_tokens, std::string_view flag) {
  if (bytes.empty()) EDGELM_FAIL(flag, ": '", name, "' is empty");
  EvalText text;
  text.bytes = static_cast<int64_t>(bytes.size());
  text.sha256 = sha256_hex(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  if (bytes.back() == '\n') bytes.pop_back();
  text.tokens = tokenizer.encode(bytes, /*add_bos=*/true, /*parse_special=*/false);
  const size_t used = static_cast<size_t>(
      std::clamp<int64_t>(used_tokens, 0, static_cast<int64_t>(text.tokens.size())));
  text.byte_ends = token_byte_ends(tokenizer, std::span<const int32_t>(text.tokens.data(), used));
  if (!text.byte_ends.empty()) text.byte_ends.resize(text.tokens.size(), text.byte_ends.back());
  text.name = std::move(name);
  return text;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// ---- totals ----

EvictionTotals EvictionTotals::of(const CacheManager& manager) {
  EvictionTotals totals;
  totals.evictions = manager.evictions();
  totals.evicted_tokens = manager.evicted_tokens();
  totals.seconds = manager.eviction_seconds();
  totals.score_seconds = manager.score_seconds();
  totals.select_seconds = manager.select_seconds();
  totals.compact_seconds = manager.compact_seconds();
  return totals;
}

EvictionTotals& EvictionTotals::operator+=(const EvictionTotals& other) {
  evictions += other.evictions;
  evicted_tokens += other.evicted_tokens;
  seconds += other.seconds;
  score_seconds += other.score_seconds;
  select_seconds += other.select_seconds;
  compact_seconds += other.compact_seconds;
  return *this;
}

EvictionTotals EvictionTotals::operator-(const EvictionTotals& other) const {
  EvictionTotals d = *this;
  d.evictions -= other.evictions;
  d.evicted_tokens -= other.evicted_tokens;
  d.seconds -= other.seconds;
  d.score_seconds -= other.score_seconds;
  d.select_seconds -= other.select_seconds;
  d.compact_seconds -= other.compact_seconds;
  return d;
}

// ---- options ----

int64_t eviction_eval_batch(const EvictionEvalOptions& options, const LlamaConfig& config) {
  if (options.batch > 0) return options.batch;
  int64_t batch = kDefaultPrefillChunk;
  for (const int64_t budget : options.budgets) {
    batch = std::min(batch, budget / 2);
    // A cell whose smallest layer or protected sinks leave less room takes smaller steps; settings
    // that do not make a policy are left to check_eviction_eval_options to name.
    for (const std::string& policy : options.policies) {
      try {
        const EvictionConfig cell = budget_config(policy, budget, options.shares);
        if (!compresses_prompt(cell)) batch = std::min(batch, largest_step(cell, config.n_layers));
      } catch (const Error&) {
      }
    }
  }
  return std::max<int64_t>(1, batch);
}

void check_eviction_eval_options(const EvictionEvalOptions& options, const LlamaConfig& config) {
  EDGELM_CHECK(!options.policies.empty(), "[eviction_eval] --policies: no policy named");
  EDGELM_CHECK(!options.budgets.empty(), "[eviction_eval] no budget given (--budgets or ",
               "--budget-bytes)");
  std::set<std::string> seen_policies;
  for (const std::string& policy : options.policies) {
    budget_config(policy, 1 << 20, {});  // the name alone: 'none' and unknown names
    EDGELM_CHECK(seen_policies.insert(policy).second, "[eviction_eval] --policies: '", policy,
                 "' is listed twice");
  }
  std::set<int64_t> seen_budgets;
  for (const int64_t budget : options.budgets) {
    EDGELM_CHECK(seen_budgets.insert(budget).second, "[eviction_eval] budget ", budget,
                 " is listed twice");
  }
  EDGELM_CHECK(options.evict_every >= 1, "[eviction_eval] --evict-every ", options.evict_every,
               " must be at least 1");
  EDGELM_CHECK(options.batch >= 0, "[eviction_eval] -b/--batch-size ", options.batch,
               " must be at least 1");
  const int64_t batch = eviction_eval_batch(options, config);
  const bool texts = options.streaming || options.continuation || options.cost;
  for (const int64_t budget : options.budgets) {
    EDGELM_CHECK(budget >= 1, "[eviction_eval] budget ", budget,
                 ": a budget is at least 1 slot per layer and kv head");
    // Eviction must make room for a whole chunk before it runs (CacheManager::max_step_tokens).
    if (options.streaming) {
      EDGELM_CHECK(options.evict_every <= budget / 2, "[eviction_eval] --evict-every ",
                   options.evict_every, " is more than half the budget of ", budget,
                   " slots: a chunk must fit beside what the cache keeps (at most ", budget / 2,
                   ")");
    }
    EDGELM_CHECK(batch <= budget / 2, "[eviction_eval] -b/--batch-size ", batch,
                 " is more than half the budget of ", budget,
                 " slots: the full cache and every cell prefill in the same steps, which must fit "
                 "beside what the cache keeps (at most ",
                 budget / 2, ")");
    EDGELM_CHECK(!texts || options.window_tokens >= budget, "[eviction_eval] -c/--ctx-size ",
                 options.window_tokens, ": a text window shorter than the budget of ", budget,
                 " slots evicts nothing; use a budget of at most ", options.window_tokens);
    for (const std::string& policy : options.policies) {
      const EvictionConfig cell = budget_config(policy, budget, options.shares);
      const bool compresses = [&] {
        try {
          return compresses_prompt(cell);
        } catch (const Error& e) {
          EDGELM_FAIL("[eviction_eval] ", policy, " at a budget of ", budget, " slots: ", e.what());
        }
      }();
      if (!compresses) {  // a policy that compresses the prompt holds it whole until then
        const int64_t step = largest_step(cell, config.n_layers);
        const bool prefills = options.continuation;  // the others let the generator split steps
        const char* flag = nullptr;
        int64_t asked = 0;
        if (options.streaming && options.evict_every > step) {
          flag = "--evict-every ";
          asked = options.evict_every;
        } else if (prefills && batch > step) {
          flag = "-b/--batch-size ";
          asked = batch;
        }
        if (flag != nullptr) {
          EDGELM_FAIL("[eviction_eval] ", policy, " at a budget of ", budget,
                      " slots makes room for steps of at most ", step,
                      " tokens (half its smallest layer's share, less protected sinks): ", flag,
                      asked, " is more; lower it, or raise the budget (or lower --pyramid-beta)");
        }
      }
      if (options.streaming) {
        try {
          make_policy(streaming_budget_config(cell, compresses, budget, options.evict_every));
        } catch (const Error& e) {
          EDGELM_FAIL("[eviction_eval] ", policy, " at a budget of ", budget, " slots with ",
                      "--evict-every ", options.evict_every, ": ", e.what());
        }
      }
    }
  }
  EDGELM_CHECK(options.window_tokens >= 2, "[eviction_eval] -c/--ctx-size ", options.window_tokens,
               " must be at least 2 (a window predicts its tokens after "
               "the first)");
  EDGELM_CHECK(options.window_tokens + options.cost_decode_tokens <= config.max_position_embeddings,
               "[eviction_eval] -c/--ctx-size ", options.window_tokens, " plus ",
               options.cost_decode_tokens, " decoded tokens is beyond the model's context of ",
               config.max_position_embeddings, " tokens");
  EDGELM_CHECK(options.windows_per_text >= 1, "[eviction_eval] --windows ",
               options.windows_per_text, " must be at least 1");
  EDGELM_CHECK(options.block_tokens >= 1, "[eviction_eval] --block-tokens ", options.block_tokens,
               " must be at least 1");
  EDGELM_CHECK(options.bootstrap.resamples >= 0, "[eviction_eval] --bootstrap ",
               options.bootstrap.resamples, " must be >= 0");
  if (options.continuation) {
    EDGELM_CHECK(options.prefix_tokens >= 1 && options.continue_tokens >= 1,
                 "[eviction_eval] --prefix-tokens ", options.prefix_tokens,
                 " and --continue-tokens ", options.continue_tokens, " must be at least 1");
    EDGELM_CHECK(options.prefix_tokens + options.continue_tokens + 1 <= options.window_tokens,
                 "[eviction_eval] --prefix-tokens ", options.prefix_tokens, " + --continue-tokens ",
                 options.continue_tokens, " + 1 is longer than a text window (-c/--ctx-size ",
                 options.window_tokens, ")");
  }
  if (options.cost) {
    EDGELM_CHECK(options.cost_decode_tokens >= 1, "[eviction_eval] --cost-tokens ",
                 options.cost_decode_tokens, " must be at least 1");
  }
  if (options.bos) {
    EDGELM_CHECK(*options.bos >= 0 && *options.bos < config.vocab_size, "[eviction_eval] BOS id ",
                 *options.bos, " is outside the vocabulary of ", config.vocab_size);
  }
}

// ---- the run ----

EvictionEval::EvictionEval(LlamaModel& model, EvictionEvalOptions options)
    : backend_(model.backend()),
      config_(model.config()),
      weights_(model.weights()),
      options_(std::move(options)) {
  check_eviction_eval_options(options_, config_);
  batch_ = eviction_eval_batch(options_, config_);
  for (const int64_t budget : options_.budgets) {
    for (const std::string& policy : options_.policies) {
      CellResult cell;
      cell.policy = policy;
      cell.budget = budget;
      cell.config = budget_config(policy, budget, options_.shares);
      cell.compresses_prompt = compresses_prompt(cell.config);
      cell.streaming_config = streaming_budget_config(cell.config, cell.compresses_prompt, budget,
                                                      options_.evict_every);
      cells_.push_back(std::move(cell));
    }
  }
}

void EvictionEval::report(const std::string& line) const {
  if (progress_) progress_(line);
}

std::vector<std::vector<int32_t>> EvictionEval::windows_of(const EvalText& text) const {
  const auto n = static_cast<int64_t>(text.tokens.size());
  const int64_t size = options_.window_tokens;
  EDGELM_CHECK(n >= size, "[eviction_eval] text '", text.name, "' has ", n,
               " tokens, fewer than one window of -c/--ctx-size ", size);
  EDGELM_CHECK(text.byte_ends.empty() || text.byte_ends.size() == text.tokens.size(),
               "[eviction_eval] text '", text.name, "': ", text.byte_ends.size(),
               " byte offsets for ", n, " tokens");
  std::vector<std::vector<int32_t>> windows;
  for (int64_t w = 0; w < std::min(options_.windows_per_text, n / size); ++w) {
    std::vector<int32_t> window(text.tokens.begin() + w * size,
                                text.tokens.begin() + (w + 1) * size);
    if (options_.bos) window[0] = *options_.bos;
    windows.push_back(std::move(window));
  }
  return windows;
}

int64_t EvictionEval::cache_capacity(const CellResult& cell, int64_t sequence_tokens) const {
  // A policy that compresses a prompt when its prefill ends holds the whole prompt until then
  // (CacheManager: only a full cache evicts it in prefill), so its cache is sized for the
  // sequence; any other keeps the budget and makes room for one prefill step beside it.
  const int64_t held = largest_layer_limit(cell.config, config().n_layers);
  if (cell.compresses_prompt) return std::max(held, sequence_tokens) + batch_;
  return held + batch_;
}

void EvictionEval::run_streaming(std::span<const EvalText> texts) {
  const int64_t step = options_.evict_every;
  const int64_t block = options_.block_tokens;
  RowComparer comparer;
  for (const EvalText& text : texts) {
    const std::vector<std::vector<int32_t>> windows = windows_of(text);
    for (size_t w = 0; w < windows.size(); ++w) {
      const std::vector<int32_t>& tokens = windows[w];
      const auto n = static_cast<int64_t>(tokens.size());
      const int64_t offset = static_cast<int64_t>(w) * options_.window_tokens;
      report(str_cat("streaming: ", text.name, " window ", w + 1, "/", windows.size(), ", ", n,
                     " tokens, ", cells_.size(), " cells, ", step, " token(s) per step"));
      const Stopwatch started;

      LlamaModel full_model(backend_, config_, weights_, step);
      Lane full(full_model, n, options_.kv_type, nullptr);
      TeacherForcedStream full_stream(*full.generator, tokens, {.batch = step});
      std::vector<std::unique_ptr<LlamaModel>> models;
      std::vector<std::unique_ptr<Lane>> lanes;
      std::vector<std::unique_ptr<TeacherForcedStream>> streams;
      const int64_t units_per_window = (n - 1 + block - 1) / block;
      std::vector<std::vector<PairedSums>> filled_units(cells_.size());
      for (size_t c = 0; c < cells_.size(); ++c) {
        CellResult& cell = cells_[c];
        models.push_back(std::make_unique<LlamaModel>(backend_, config_, weights_, step));
        // The budget (a pyramid's bottom layer: its share) and room for one step beside it.
        const int64_t capacity = largest_layer_limit(cell.config, config_.n_layers) + step;
        lanes.push_back(std::make_unique<Lane>(*models.back(), capacity, options_.kv_type,
                                               &cell.streaming_config));
        streams.push_back(std::make_unique<TeacherForcedStream>(
            *lanes.back()->generator, tokens, TeacherForcingOptions{.batch = step}));
        cell.streaming.first_filled.push_back(-1);
        cell.streaming.units_all.resize(cell.streaming.units_all.size() + units_per_window);
        filled_units[c].resize(units_per_window);
        if (options_.keep_positions) cell.streaming.positions.emplace_back();
      }
      const size_t unit_base = cells_.empty() ? 0
                                              : cells_[0].streaming.units_all.size() -
                                                    static_cast<size_t>(units_per_window);

      int64_t next_report = 512;
      while (!full_stream.done()) {
        for (auto& lane : lanes) {
          // Each chunk is a prompt of its own: a policy that compresses a prompt when it ends
          // (SnapKV) compresses after every chunk, by that chunk's own observation window.
          const int64_t count = std::min(step, n - lane->cache->next_position());
          lane->manager->begin_prefill(lane->cache->next_position() + count);
        }
        const TeacherForcedChunk full_chunk = full_stream.step();
        const int64_t scored = static_cast<int64_t>(full_chunk.nll.size());
        for (size_t c = 0; c < cells_.size(); ++c) {
          StreamingCell& result = cells_[c].streaming;
          Lane& lane = *lanes[c];
          const TeacherForcedChunk chunk = streams[c]->step();
          EDGELM_CHECK(chunk.begin == full_chunk.begin && chunk.rows() == full_chunk.rows(),
                       "[eviction_eval] the streams fell out of step");
          int64_t& first_filled = result.first_filled.back();
          if (first_filled < 0 && lane.manager->evictions() > 0) first_filled = chunk.begin;
          result.max_slots = std::max(result.max_slots, most_slots(*lane.cache));
          for (int64_t r = 0; r < scored; ++r) {
            const int64_t position = chunk.begin + r;
            const RowComparison row = comparer.compare(full_chunk.row(r), chunk.row(r), position);
            const double full_nll = full_chunk.nll[static_cast<size_t>(r)];
            const double policy_nll = chunk.nll[static_cast<size_t>(r)];
            const auto unit = static_cast<size_t>(position / block);
            result.units_all[unit_base + unit].add(row, full_nll, policy_nll);
            result.policy_all.add(policy_nll);
            if (first_filled >= 0) {
              filled_units[c][unit].add(row, full_nll, policy_nll);
              result.policy_filled.add(policy_nll);
              result.full_filled.add(full_nll);
            }
            if (options_.keep_positions) {
              result.positions.back().push_back({row.kl, row.top1_agrees, full_nll, policy_nll});
            }
          }
          // After the last chunk nothing is left to make room for.
          if (!streams[c]->done()) lane.manager->end_prefill(*lane.cache);
        }
        const int64_t done = full_chunk.begin + static_cast<int64_t>(full_chunk.tokens.size());
        if (done >= next_report && done < n) {
          report(str_cat("  ", done, "/", n, " tokens, ", started.seconds(), " s"));
          next_report += 512;
        }
      }
      full_.streaming.merge(full_stream.nll());
      const bool bytes_known = !text.byte_ends.empty();
      const auto bytes_after = [&](int64_t position) {  // bytes of tokens position+1 .. n-1
        return text.byte_ends[static_cast<size_t>(offset + n - 1)] -
               text.byte_ends[static_cast<size_t>(offset + position)];
      };
      if (bytes_known) full_.streaming_bytes += bytes_after(0);
      for (size_t c = 0; c < cells_.size(); ++c) {
        StreamingCell& result = cells_[c].streaming;
        result.evictions += EvictionTotals::of(*lanes[c]->manager);
        for (const PairedSums& unit : filled_units[c]) {
          if (unit.count > 0) result.units_filled.push_back(unit);
        }
        if (bytes_known) {
          result.bytes_all += bytes_after(0);
          if (result.first_filled.back() >= 0)
            result.bytes_filled += bytes_after(result.first_filled.back());
        }
      }
      report(str_cat("  done in ", started.seconds(), " s"));
    }
  }
}

void EvictionEval::run_continuation(std::span<const EvalText> texts) {
  const int64_t prefix = options_.prefix_tokens;
  const int64_t span = prefix + options_.continue_tokens + 1;
  RowComparer comparer;
  LlamaModel full_model(backend_, config_, weights_, batch_);
  std::vector<std::unique_ptr<LlamaModel>> models;
  for (size_t c = 0; c < cells_.size(); ++c)
    models.push_back(std::make_unique<LlamaModel>(backend_, config_, weights_, batch_));
  for (const EvalText& text : texts) {
    const std::vector<std::vector<int32_t>> windows = windows_of(text);
    for (size_t w = 0; w < windows.size(); ++w) {
      const std::vector<int32_t>& tokens = windows[w];
      const auto n = static_cast<int64_t>(tokens.size());
      for (int64_t k = 0; k + span <= n; k += span) {
        std::vector<int32_t> sequence(tokens.begin() + k, tokens.begin() + k + span);
        if (options_.bos) sequence[0] = *options_.bos;
        const std::span<const int32_t> prompt(sequence.data(), static_cast<size_t>(prefix));
        report(str_cat("continuation: ", text.name, " window ", w + 1, ", tokens ", k, "..",
                       k + span, ": prefill ", prefix, ", continue ", options_.continue_tokens));
        Lane full(full_model, span, options_.kv_type, nullptr);
        full.generator->prefill(prompt);
        std::vector<std::unique_ptr<Lane>> lanes;
        for (size_t c = 0; c < cells_.size(); ++c) {
          lanes.push_back(std::make_unique<Lane>(*models[c], cache_capacity(cells_[c], span),
                                                 options_.kv_type, &cells_[c].config));
          lanes.back()->generator->prefill(prompt);
        }
        std::vector<PairedSums> units(cells_.size());
        for (int64_t i = prefix; i + 1 < span; ++i) {
          const int32_t target = sequence[static_cast<size_t>(i + 1)];
          const std::span<const float> full_logits = full.generator->decode(sequence[i]);
          const double full_nll = token_nll(full_logits, target, i);
          full_.continuation.add(full_nll);
          for (size_t c = 0; c < cells_.size(); ++c) {
            ContinuationCell& result = cells_[c].continuation;
            const std::span<const float> logits = lanes[c]->generator->decode(sequence[i]);
            const double policy_nll = token_nll(logits, target, i);
            units[c].add(comparer.compare(full_logits, logits, i), full_nll, policy_nll);
            result.policy.add(policy_nll);
            result.full.add(full_nll);
          }
        }
        for (size_t c = 0; c < cells_.size(); ++c) {
          cells_[c].continuation.max_slots =
              std::max(cells_[c].continuation.max_slots,
                       peak_slots(*lanes[c]->cache, lanes[c]->manager.get()));
          cells_[c].continuation.units.push_back(units[c]);
          cells_[c].continuation.evictions += EvictionTotals::of(*lanes[c]->manager);
        }
      }
    }
  }
}

void EvictionEval::run_retrieval(std::span<const PasskeyCase> cases, const Tokenizer& tokenizer,
                                 const PasskeyAnswerOptions& answer) {
  LlamaModel full_model(backend_, config_, weights_, batch_);
  std::vector<std::unique_ptr<LlamaModel>> models;
  for (size_t c = 0; c < cells_.size(); ++c)
    models.push_back(std::make_unique<LlamaModel>(backend_, config_, weights_, batch_));
  retrieval_cases_.insert(retrieval_cases_.end(), cases.begin(), cases.end());
  for (size_t i = 0; i < cases.size(); ++i) {
    const PasskeyCase& passkey = cases[i];
    const int64_t tokens = static_cast<int64_t>(passkey.prompt.size()) + answer.max_tokens;
    EDGELM_CHECK(tokens <= config_.max_position_embeddings, "[eviction_eval] a passkey prompt of ",
                 passkey.prompt.size(), " tokens is beyond the model's context of ",
                 config_.max_position_embeddings);
    Lane full(full_model, tokens, options_.kv_type, nullptr);
    full_.retrieval.push_back(answer_passkey(*full.generator, tokenizer, passkey, answer));
    int64_t correct = 0;
    for (size_t c = 0; c < cells_.size(); ++c) {
      CellResult& cell = cells_[c];
      Lane lane(*models[c], cache_capacity(cell, tokens), options_.kv_type, &cell.config);
      cell.retrieval.push_back(answer_passkey(*lane.generator, tokenizer, passkey, answer));
      PasskeyTrial& trial = cell.retrieval.back();
      trial.max_slots = std::max(trial.max_slots, peak_slots(*lane.cache, lane.manager.get()));
      cell.retrieval_max_slots = std::max(cell.retrieval_max_slots, trial.max_slots);
      correct += cell.retrieval.back().correct ? 1 : 0;
    }
    report(str_cat(
        "retrieval ", i + 1, "/", cases.size(), ": length ", passkey.length, ", depth ",
        passkey.depth, ", question ", passkey.placement, ", ", passkey.prompt.size(),
        " prompt tokens: full cache ", full_.retrieval.back().correct ? "right" : "wrong", " ('",
        full_.retrieval.back().answer, "'), ", correct, "/", cells_.size(), " cells right"));
  }
}

void EvictionEval::run_cost(const EvalText& text) {
  const std::vector<int32_t> tokens = windows_of(text).front();
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t decode_tokens = options_.cost_decode_tokens;
  const int64_t slot_bytes = kv_bytes_per_slot(config_, options_.kv_type);
  const auto measure = [&](const CellResult* cell) {
    CostResult cost;
    cost.measured = true;
    release_free_memory();  // what earlier runs freed must not be counted, or hide this one
    cost.peak_rss_reset = reset_peak_resident();
    cost.rss_before_bytes = resident_bytes();
    LlamaModel model(backend_, config_, weights_, batch_);
    const int64_t capacity =
        cell != nullptr ? cache_capacity(*cell, n + decode_tokens) : n + decode_tokens;
    Lane lane(model, capacity, options_.kv_type, cell != nullptr ? &cell->config : nullptr);
    std::span<const float> logits = lane.generator->prefill(tokens);
    cost.max_slots = most_slots(*lane.cache);
    const EvictionTotals after_prefill =
        lane.manager ? EvictionTotals::of(*lane.manager) : EvictionTotals{};
    for (int64_t i = 0; i < decode_tokens; ++i) {
      const int32_t token = greedy_token(logits);
      const Stopwatch step;
      logits = lane.generator->decode(token);
      cost.decode_wall_seconds += step.seconds();
      cost.max_slots = std::max(cost.max_slots, most_slots(*lane.cache));
    }
    cost.max_slots = std::max(cost.max_slots, peak_slots(*lane.cache, lane.manager.get()));
    cost.decode_tokens = decode_tokens;
    cost.decode_seconds = lane.generator->decode_seconds();
    cost.logical_length = lane.cache->next_position();
    cost.kv_bytes_allocated = static_cast<int64_t>(lane.cache->memory_bytes());
    cost.kv_bytes_peak = cost.max_slots * slot_bytes;
    if (lane.manager) {
      cost.prefill_evictions = after_prefill;
      cost.decode_evictions = EvictionTotals::of(*lane.manager) - after_prefill;
    }
    cost.peak_rss_bytes = peak_resident_bytes();
    return cost;
  };
  report(str_cat("cost: full cache, prefill ", n, " + decode ", decode_tokens));
  full_.cost = measure(nullptr);
  for (CellResult& cell : cells_) {
    report(str_cat("cost: ", cell.policy, " at ", cell.budget, " slots"));
    cell.cost = measure(&cell);
  }
}

}  // namespace edgelm
