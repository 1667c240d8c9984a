// bench: throughput of the whole model path, in the manner of llama.cpp's llama-bench. For every
// model x backend x thread count it runs prompt-processing tests (pp<p>: one forward pass over p
// tokens), text-generation tests (tg<n>: n single-token decode steps) and, as llama-bench's -pg,
// prompt + generation tests (pp<p>+tg<n>: both, timed together, tokens/s counting p + n tokens),
// each after d tokens already in the KV cache (-d; that prefill is not timed). Each test runs once
// untimed to warm up, then -r times on a fresh KV cache, and reports the mean and standard
// deviation of tokens/s. The flags are llama-bench's, with its meaning: -m, -p (also --n-prompt;
// -p is prompt text in edgelm's other tools), -n, -pg, -d, -r, -t and -o, lists comma-separated
// where llama-bench takes lists.
//
// Rows also carry the load time, the peak resident memory (without bench's own bandwidth buffer),
// and for tg tests the fraction of the memory-bandwidth limit reached: bench measures the
// streaming read bandwidth once per thread count at start, and around every timed run of a tg
// test (before the first, between runs, after the last). Each run's limit is the better of the
// two measurements around it divided by the bytes one decode step must read (every weight matrix
// once, plus the K/V rows attention reads at that depth); the row's fraction is the mean of the
// runs' fractions. Measuring beside each run matters on VMs, where the bandwidth a pair of vCPUs
// gets can switch within seconds by more than the effects being measured. --no-bw-probe skips
// every measurement (a tiny model then benches in seconds; rows carry no limit or fraction), and
// --bw-mib shrinks the buffer.
//
//   bench -m model-q4_0.gguf -p 128,512 -n 128 -t 1,2 -r 3
//   bench -m a.gguf,b.gguf --backend cpu:avx2,cpu:avx512 --n-prompt 0 -n 64 -d 0,1024 -o json
//   bench -m model.gguf -pg 512,128 --no-bw-probe
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/registry.h"
#include "bin/cli_util.h"
#include "core/buffer.h"
#include "core/cpu_topology.h"
#include "core/error.h"
#include "core/log.h"
#include "core/process_stats.h"
#include "core/thread_pool.h"
#include "runtime/setup.h"

namespace {

// ---- memory bandwidth ----

// How the probe walks a thread's share of the buffer. Which reads fastest depends on the machine,
// so the probe runs each and keeps the fastest:
// - kOneStream: front to back. The AMD EPYC Zen 4's best with one thread (31-32 GB/s).
// - kPrefetch: the same, each cache line also prefetched 2 KiB ahead, as the matmul kernels once
//   did. On the AMD EPYC Zen 3 one thread's demand misses alone left bandwidth unused (~14 GB/s
//   without, while decode itself pulled 16); on the Zen 4 it cost a quarter (24-25 GB/s).
// - kTwoStreams: the two halves of the share side by side, a cache line of each in turn. On the
//   AMD EPYC Zen 5 one core gets ~40 GB/s this way against ~33 from one stream; against the
//   one-stream figure, Q8_0 and F16 decode on one thread read 101-114 % of the limit
//   (docs/performance.md).
enum class ReadPattern { kOneStream, kPrefetch, kTwoStreams };
constexpr ReadPattern kReadPatterns[] = {ReadPattern::kOneStream, ReadPattern::kPrefetch,
                                         ReadPattern::kTwoStreams};

// Sum of 64-bit words, read in `pattern`. Four independent accumulators keep the add chain off
// the critical path (the compiler vectorises each).
uint64_t sum_words(const uint64_t* words, size_t n, ReadPattern pattern) {
  constexpr size_t kAhead = 2048 / sizeof(uint64_t);
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  auto line = [&](const uint64_t* p) {
    s0 += p[0] + p[4];
    s1 += p[1] + p[5];
    s2 += p[2] + p[6];
    s3 += p[3] + p[7];
  };
  size_t i = 0;
  if (pattern == ReadPattern::kPrefetch) {
    for (; i + 8 <= n; i += 8) {
      __builtin_prefetch(words + i + kAhead);
      line(words + i);
    }
  } else if (pattern == ReadPattern::kTwoStreams) {
    const size_t half = n / 16 * 8;  // whole lines of 8 words
    for (; i < half; i += 8) {
      line(words + i);
      line(words + half + i);
    }
    i = 2 * half;
  }
  for (; i + 8 <= n; i += 8) line(words + i);
  for (; i < n; ++i) s0 += words[i];
  return s0 + s1 + s2 + s3;
}

// A buffer for measuring streaming read bandwidth, allocated and written once (so its pages are
// real memory rather than the shared zero page) and kept for the whole
// run: decode tests measure beside themselves, and reallocating 1 GiB each time would disturb
// both the page cache and the peak-RSS figures. Peak RSS is reported without it. It comes from
// the same allocator as the weights the CPU backend multiplies (huge pages where the kernel gives
// them), so the limit is measured on the pages decode reads.
class BandwidthProbe {
 public:
  BandwidthProbe(size_t bytes, const std::vector<int>& cpus)
      : n_words_(bytes / sizeof(uint64_t)),
        buffer_(edgelm::HostMemory().allocate(n_words_ * sizeof(uint64_t))),
        words_(static_cast<uint64_t*>(buffer_->host_ptr())) {
    edgelm::ThreadPool pool(2, cpus);
    pool.parallel_for(static_cast<int64_t>(n_words_), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        words_[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    });
  }

  size_t bytes() const { return n_words_ * sizeof(uint64_t); }

  // Bytes/s with `n_threads` threads, each summing its contiguous share; the best of `passes`
  // passes in each read pattern, the patterns taking turns. The threads are pinned as the CPU
  // backend pins that many (plan_cpu_threads), so the limit is measured on the cores decode uses.
  double measure(int n_threads, int passes, const std::vector<int>& cpus) {
    const edgelm::CpuThreadPlan plan = edgelm::plan_cpu_threads(n_threads, cpus);
    edgelm::ThreadPool pool(n_threads, plan.cpus);
    auto share = [&](int index, size_t& begin, size_t& end) {
      begin = n_words_ * static_cast<size_t>(index) / static_cast<size_t>(n_threads);
      end = n_words_ * static_cast<size_t>(index + 1) / static_cast<size_t>(n_threads);
    };
    // One sum per thread, a cache line apart so the threads do not share a line.
    std::vector<uint64_t> sums(static_cast<size_t>(n_threads) * 8);
    double best = 0.0;
    constexpr int kPatterns = static_cast<int>(std::size(kReadPatterns));
    for (int pass = 0; pass < kPatterns * passes; ++pass) {
      const ReadPattern pattern = kReadPatterns[pass % kPatterns];
      const edgelm::Stopwatch stopwatch;
      pool.run([&](int index) {
        size_t begin = 0, end = 0;
        share(index, begin, end);
        sums[static_cast<size_t>(index) * 8] = sum_words(words_ + begin, end - begin, pattern);
      });
      const double seconds = stopwatch.seconds();
      best = std::max(best, static_cast<double>(bytes()) / seconds);
    }
    // Use the sums, so the reads cannot be optimised away.
    uint64_t total = 0;
    for (uint64_t s : sums) total += s;
    if (total == 1) std::fprintf(stderr, " ");
    return best;
  }

 private:
  size_t n_words_;
  std::shared_ptr<edgelm::Buffer> buffer_;
  uint64_t* words_;
};

// ---- tests ----

// pp test: n_prompt > 0, n_gen == 0; tg test: n_prompt == 0, n_gen > 0; pg test: both > 0.
struct TestSpec {
  int64_t n_prompt = 0;  // prompt tokens, one forward pass
  int64_t n_gen = 0;     // decode steps after it
  int64_t n_depth = 0;

  // llama-bench's names: "pp512", "tg128", "pp512+tg128", then " @ d<depth>".
  std::string name() const {
    std::string text = n_gen == 0      ? "pp" + std::to_string(n_prompt)
                       : n_prompt == 0 ? "tg" + std::to_string(n_gen)
                                       : edgelm::str_cat("pp", n_prompt, "+tg", n_gen);
    if (n_depth > 0) text += " @ d" + std::to_string(n_depth);
    return text;
  }
  // The tokens the timed run processes, which its tokens/s counts.
  int64_t tokens() const { return n_prompt + n_gen; }
  // The flags that asked for the test, for messages: "--n-prompt 512 -d 1024".
  std::string flags() const {
    std::string text = n_gen == 0      ? edgelm::str_cat("--n-prompt ", n_prompt)
                       : n_prompt == 0 ? edgelm::str_cat("-n ", n_gen)
                                       : edgelm::str_cat("-pg ", n_prompt, ",", n_gen);
    if (n_depth > 0) text += edgelm::str_cat(" -d ", n_depth);
    return text;
  }
};

// "512,128" -> a pg test of 512 prompt tokens and 128 generated ones; throws naming --pg.
TestSpec parse_pg(const std::string& text) {
  const size_t comma = text.find(',');
  int64_t values[2] = {-1, -1};
  const std::string parts[2] = {text.substr(0, comma),
                                comma == std::string::npos ? "" : text.substr(comma + 1)};
  for (int i = 0; i < 2; ++i) {
    const char* end = parts[i].data() + parts[i].size();
    const auto [stop, error] = std::from_chars(parts[i].data(), end, values[i]);
    if (parts[i].empty() || error != std::errc() || stop != end || values[i] < 0 ||
        values[i] > (int64_t{1} << 20)) {
      EDGELM_FAIL("-pg: '", text,
                  "' is not PP,TG (prompt and generated tokens, each in [0, 1048576], e.g. "
                  "512,128)");
    }
  }
  return {.n_prompt = values[0], .n_gen = values[1], .n_depth = 0};
}

// Deterministic pseudo-random token ids (splitmix64) below the special tokens: Llama 3 keeps its
// 256 reserved/special ids at the end of the vocabulary, make_model's tiny vocabularies their 8.
std::vector<int32_t> make_token_ids(int64_t count, int64_t vocab_size) {
  const int64_t limit = vocab_size > 512 ? vocab_size - 256 : std::max<int64_t>(1, vocab_size - 8);
  std::vector<int32_t> ids(static_cast<size_t>(count));
  uint64_t state = 0x5EED;
  for (int32_t& id : ids) {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    id = static_cast<int32_t>(z % static_cast<uint64_t>(limit));
  }
  return ids;
}

// Runs `test` once on a fresh KV cache and returns the timed seconds: the forward pass over the
// prompt, then the decode steps, one token each. The depth prefill before them is not timed.
double run_test_once(edgelm::LlamaModel& model, const TestSpec& test, edgelm::DType kv_type,
                     std::span<const int32_t> ids) {
  edgelm::KvCache cache = model.make_cache(test.n_depth + test.tokens(), kv_type);
  if (test.n_depth > 0) model.forward(ids.first(static_cast<size_t>(test.n_depth)), cache);
  const std::span<const int32_t> timed =
      ids.subspan(static_cast<size_t>(test.n_depth), static_cast<size_t>(test.tokens()));
  const auto n_prompt = static_cast<size_t>(test.n_prompt);
  const edgelm::Stopwatch stopwatch;
  if (n_prompt > 0) model.forward(timed.first(n_prompt), cache);
  for (size_t i = n_prompt; i < timed.size(); ++i) model.forward(timed.subspan(i, 1), cache);
  return stopwatch.seconds();
}

struct Stats {
  double mean = 0.0;
  double stddev = 0.0;  // sample standard deviation (n - 1), 0 for one sample
};

Stats stats_of(const std::vector<double>& values) {
  Stats s;
  for (double v : values) s.mean += v;
  s.mean /= static_cast<double>(values.size());
  if (values.size() > 1) {
    double squares = 0.0;
    for (double v : values) squares += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(squares / static_cast<double>(values.size() - 1));
  }
  return s;
}

// ---- model description ----

struct ModelSummary {
  size_t bytes = 0;  // every weight tensor once (a tied output counted once)
  int64_t params = 0;
  std::string type;  // "llama 1.2B Q4_0"
};

ModelSummary summarize(const edgelm::LlamaWeights& weights, edgelm::DType weight_type,
                       const edgelm::LlamaConfig& config) {
  const bool tied_embeddings = config.tie_word_embeddings;
  ModelSummary summary;
  auto count = [&](const edgelm::Tensor& t) {
    summary.bytes += t.nbytes();
    summary.params += t.numel();
  };
  count(weights.embedding);
  count(weights.output_norm);
  // A tied output counts once, as in the file, even when the backend holds it repacked.
  if (!tied_embeddings) count(weights.output);
  for (const edgelm::LlamaLayerWeights& w : weights.layers) {
    for (const edgelm::Tensor* t :
         {&w.attn_norm, &w.wq, &w.wk, &w.wv, &w.wo, &w.ffn_norm, &w.w_gate, &w.w_up, &w.w_down,
          &w.bq, &w.bk, &w.bv, &w.q_norm, &w.k_norm}) {
      if (t->defined()) count(*t);
    }
  }
  std::string dtype = edgelm::dtype_name(weight_type);
  for (char& c : dtype) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  char size[32];
  if (summary.params >= 1'000'000'000) {
    std::snprintf(size, sizeof size, "%.1fB", static_cast<double>(summary.params) / 1e9);
  } else if (summary.params >= 1'000'000) {
    std::snprintf(size, sizeof size, "%.0fM", static_cast<double>(summary.params) / 1e6);
  } else {
    std::snprintf(size, sizeof size, "%.0fK", static_cast<double>(summary.params) / 1e3);
  }
  summary.type = edgelm::str_cat(config.architecture, " ", size, " ", dtype);
  return summary;
}

std::string format_bytes(double bytes) {
  char text[32];
  if (bytes >= 1024.0 * 1024.0 * 1024.0) {
    std::snprintf(text, sizeof text, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  } else {
    std::snprintf(text, sizeof text, "%.2f MiB", bytes / (1024.0 * 1024.0));
  }
  return text;
}

std::string format_params(int64_t params) {
  char text[32];
  if (params >= 1'000'000'000) {
    std::snprintf(text, sizeof text, "%.2f B", static_cast<double>(params) / 1e9);
  } else {
    std::snprintf(text, sizeof text, "%.2f M", static_cast<double>(params) / 1e6);
  }
  return text;
}

// "cpu (avx512)" for the cpu alias ("cpu (avx512, prefetch)" where decode uses the prefetching
// kernels), the name itself when it already names the kernels.
std::string backend_label(const std::string& name, edgelm::Backend& backend) {
  auto* cpu = dynamic_cast<edgelm::cpu::CpuBackend*>(&backend);
  if (cpu == nullptr) return name;
  const std::string prefetch = cpu->decode_prefetch() ? "prefetch" : "";
  if (name != "cpu") return prefetch.empty() ? name : name + " (" + prefetch + ")";
  return name + " (" + cpu->kernels().isa + (prefetch.empty() ? "" : ", " + prefetch) + ")";
}

std::string iso_time_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// ---- output ----

// Prints rows as they finish: a markdown table, or a JSON array of objects (llama-bench's field
// names where the two overlap).
class Report {
 public:
  explicit Report(bool json) : json_(json) {}

  void begin(const std::string& header) {
    if (json_) {
      std::printf("[\n");
    } else {
      std::printf("%s\n", header.c_str());
      std::printf(
          "| model | size | params | backend | threads | test | t/s | bw GB/s | bw limit t/s | "
          "bw %% | load s | peak RSS |\n");
      std::printf(
          "| --- | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    }
    std::fflush(stdout);
  }

  void row(const nlohmann::json& row) {
    if (json_) {
      std::printf("%s%s", rows_ > 0 ? ",\n" : "",
                  row.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::string bw_gbs, bw_limit, bw_percent;  // blank where the row has no limit
      if (!row["bw_limit_ts"].is_null()) {
        bw_gbs = str_format("%.1f", row["bw_gbs"].get<double>());
        bw_limit = str_format("%.2f", row["bw_limit_ts"].get<double>());
        bw_percent = str_format("%.1f", 100.0 * row["bw_fraction"].get<double>());
      }
      std::printf("| %s | %s | %s | %s | %d | %s | %.2f ± %.2f | %s | %s | %s | %.2f | %s |\n",
                  row["model_type"].get<std::string>().c_str(),
                  format_bytes(row["model_size"].get<double>()).c_str(),
                  format_params(row["model_n_params"].get<int64_t>()).c_str(),
                  row["backend_label"].get<std::string>().c_str(), row["n_threads"].get<int>(),
                  row["test"].get<std::string>().c_str(), row["avg_ts"].get<double>(),
                  row["stddev_ts"].get<double>(), bw_gbs.c_str(), bw_limit.c_str(),
                  bw_percent.c_str(), row["load_s"].get<double>(),
                  format_bytes(row["peak_rss_bytes"].get<double>()).c_str());
    }
    ++rows_;
    std::fflush(stdout);
  }

  void end() {
    if (json_) std::printf("%s]\n", rows_ > 0 ? "\n" : "");
    std::fflush(stdout);
  }

 private:
  template <class... Args>
  static std::string str_format(const char* format, Args... args) {
    char text[64];
    std::snprintf(text, sizeof text, format, args...);
    return text;
  }

  bool json_;
  int rows_ = 0;
};

// ---- main ----

int run(int argc, char** argv) {
  CLI::App app{
      "Measures prompt processing (pp) and text generation (tg) speed of Llama models, "
      "llama-bench style, with each decode speed set against the memory-bandwidth limit."};
  std::vector<std::string> models;
  std::vector<int64_t> prompts = {512};
  std::vector<int64_t> gens = {128};
  std::vector<int64_t> depths = {0};
  std::vector<int> threads;
  int repetitions = 5;
  std::vector<std::string> backends = {"cpu"};
  std::string weight_type_text;
  std::string kv_type_text = "f16";
  int64_t chunk = edgelm::kDefaultPrefillChunk;
  size_t bw_mib = 1024;
  int bw_passes = 5;
  std::string output = "md";
  std::vector<std::string> pg_texts;
  bool no_bw_probe = false;
  namespace flag = edgelm::cli::flag;
  edgelm::cli::add_shared(app, flag::kModel, models)->required()->delimiter(',');
  edgelm::cli::add_shared(app, flag::kNPrompt, prompts)
      ->capture_default_str()
      ->delimiter(',')
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  edgelm::cli::add_shared(app, flag::kPredict, gens)
      ->capture_default_str()
      ->delimiter(',')
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  app.add_option("--pg", pg_texts,
                 "-pg PP,TG: a test of PP prompt tokens then TG generated ones, timed together "
                 "(llama-bench's pg rows; repeatable)");
  app.add_option(
         "-d,--n-depth", depths,
         "Tokens already in the KV cache before each test, prefilled untimed (default 0). A test "
         "past the model's context gets a warning; one whose KV cache is larger than "
         "the machine's memory is refused")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  edgelm::cli::add_shared(app, flag::kThreads, threads)->delimiter(',')->check(CLI::Range(0, 1024));
  std::string cpu_list;
  edgelm::cli::add_shared(app, flag::kCpus, cpu_list);
  app.add_option("-r,--repetitions", repetitions, "Timed runs of each test (default 5)")
      ->check(CLI::Range(1, 100000));
  edgelm::cli::add_shared(app, flag::kBackend, backends)->capture_default_str()->delimiter(',');
  edgelm::cli::add_shared(app, flag::kWeightType, weight_type_text);
  bool no_repack = false;
  edgelm::cli::add_shared(app, flag::kNoRepack, no_repack);
  edgelm::cli::add_shared(app, flag::kKvType, kv_type_text);
  edgelm::cli::add_shared(app, flag::kBatchSize, chunk)
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  app.add_flag("--no-bw-probe", no_bw_probe,
               "Do not measure the read bandwidth (seconds instead of minutes on a tiny model); "
               "decode rows then carry no bandwidth limit or fraction");
  app.add_option("--bw-mib", bw_mib,
                 "Buffer of the bandwidth measurement, MiB (default 1024; keep it far above the "
                 "last-level cache)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--bw-passes", bw_passes,
                 "Timed passes of the bandwidth measurement per read pattern (best kept)")
      ->check(CLI::Range(1, 1000));
  edgelm::cli::add_shared(app, flag::kOutput, output)
      ->capture_default_str()
      ->check(CLI::IsMember({"md", "json"}));
  edgelm::cli::add_note(
      app,
      "As llama-bench: -m, -p (--n-prompt), -n, -d, -t and --backend take comma-separated lists "
      "(and repeat), and every combination is a test: a pp test per prompt length and a tg test "
      "per generated length (0: none). -p is a prompt length here, not prompt text.");
  if (!edgelm::cli::parse_flags(app, argc, argv, edgelm::cli::kLlamaBenchAliases)) return 0;

  // Everything that can be checked without loading a model, first.
  for (const std::string& path : models) {
    if (!std::filesystem::exists(path)) EDGELM_FAIL("-m: '", path, "' does not exist");
  }
  const std::vector<std::string> known = edgelm::backend_names();
  for (const std::string& name : backends) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      EDGELM_FAIL("--backend: '", name, "' is not available here; available: ", list);
    }
  }
  std::vector<int> cpus;
  if (!cpu_list.empty()) cpus = edgelm::cli::parse_cpu_list(cpu_list, "--cpus");
  const unsigned hardware = std::thread::hardware_concurrency();
  if (threads.empty()) threads.push_back(0);
  for (int& t : threads) {
    if (t == 0) t = edgelm::plan_cpu_threads(0, cpus).n_threads;
    if (hardware > 0 && t > static_cast<int>(hardware)) {
      std::fprintf(stderr,
                   "bench: note: -t %d is more threads than the %u this machine runs at once; "
                   "they will take turns on its cores\n",
                   t, hardware);
    }
  }
  const edgelm::DType kv_type =
      edgelm::cli::parse_dtype(kv_type_text, "--kv-type", {edgelm::DType::F32, edgelm::DType::F16});
  std::optional<edgelm::DType> weight_type;
  if (!weight_type_text.empty()) weight_type = edgelm::cli::parse_weight_type(weight_type_text);
  std::vector<TestSpec> pg_tests;
  for (const std::string& text : pg_texts) pg_tests.push_back(parse_pg(text));
  std::vector<TestSpec> tests;
  for (int64_t depth : depths) {
    for (int64_t p : prompts) {
      if (p > 0) tests.push_back({.n_prompt = p, .n_gen = 0, .n_depth = depth});
    }
    for (int64_t n : gens) {
      if (n > 0) tests.push_back({.n_prompt = 0, .n_gen = n, .n_depth = depth});
    }
    for (TestSpec pg : pg_tests) {
      pg.n_depth = depth;
      if (pg.tokens() > 0) tests.push_back(pg);
    }
  }
  if (tests.empty()) EDGELM_FAIL("-p/--n-prompt, -n and -pg are all 0: no test to run");
  int64_t longest = 0;  // the most positions a test fills
  for (const TestSpec& test : tests) longest = std::max(longest, test.n_depth + test.tokens());

  // Bandwidth once per thread count, before any model is mapped, so nothing else competes.
  std::optional<BandwidthProbe> probe;
  if (!no_bw_probe) probe.emplace(bw_mib << 20, cpus);
  std::vector<double> bandwidth(threads.size());
  std::string bw_header;
  for (size_t i = 0; probe && i < threads.size(); ++i) {
    const auto same =
        std::find(threads.begin(), threads.begin() + static_cast<long>(i), threads[i]);
    if (same != threads.begin() + static_cast<long>(i)) {
      bandwidth[i] = bandwidth[static_cast<size_t>(same - threads.begin())];
      continue;
    }
    std::fprintf(stderr, "bench: measuring read bandwidth, %d thread%s...\n", threads[i],
                 threads[i] == 1 ? "" : "s");
    bandwidth[i] = probe->measure(threads[i], bw_passes, cpus);
    char entry[64];
    std::snprintf(entry, sizeof entry, "%s%d thread%s %.1f GB/s", bw_header.empty() ? "" : " | ",
                  threads[i], threads[i] == 1 ? "" : "s", bandwidth[i] / 1e9);
    bw_header += entry;
  }
  char bw_line[512];
  std::snprintf(bw_line, sizeof bw_line,
                "read bandwidth (streaming 64-bit loads over %zu MiB, best of %d passes in each "
                "of three patterns: one stream, with software prefetch, two streams): %s",
                bw_mib, bw_passes, bw_header.c_str());
  const std::string header =
      probe ? edgelm::str_cat(
                  bw_line, "\n", "KV cache ", edgelm::dtype_name(kv_type), ", prefill chunk ",
                  chunk, ", ", repetitions,
                  " repetitions after one warm-up; per timed run, bw limit = read bandwidth "
                  "measured just before or just after it (the better) / bytes read per decoded "
                  "token (weights + K/V at the test's mean depth); bw GB/s, bw limit and bw % are "
                  "the means over the runs\n")
            : edgelm::str_cat(
                  "read bandwidth not measured (--no-bw-probe): no row carries a "
                  "bandwidth limit or fraction\n",
                  "KV cache ", edgelm::dtype_name(kv_type), ", prefill chunk ", chunk, ", ",
                  repetitions, " repetitions after one warm-up\n");

  Report report(output == "json");
  report.begin(header);
  const std::string test_time = iso_time_now();
  for (const std::string& model_path : models) {
    for (const std::string& backend_name : backends) {
      // The model is set up as in every tool (Runtime::load: loaded and converted once per
      // backend, with the first thread count's backend); the other thread counts run the same
      // weights through backends of their own (Runtime::model_on). The peak counter restarts
      // here, so each model's rows report its own peak rather than the largest of the models
      // before it (and not the bandwidth buffer).
      const bool peak_is_per_model = edgelm::reset_peak_resident();
      auto backend_options = [&](int n_threads) {
        return edgelm::BackendOptions{
            .n_threads = n_threads, .cpus = cpus, .repack_weights = !no_repack};
      };
      const edgelm::Runtime runtime =
          edgelm::Runtime::load({.model_path = model_path,
                                 .backend = backend_name,
                                 .backend_options = backend_options(threads[0]),
                                 .weight_type = weight_type,
                                 .max_chunk = chunk,
                                 .load_tokenizer = false,
                                 .require_tokenizer = false,
                                 .kv_type = kv_type,
                                 .context = longest});
      const edgelm::ModelInfo& info = runtime.info();
      const double load_s = info.load_seconds;
      const edgelm::LlamaConfig& config = runtime.model().config();
      const ModelSummary summary = summarize(runtime.model().weights(), info.weight_type, config);
      const std::string model_name = std::filesystem::path(model_path).filename().string();
      std::fprintf(stderr, "bench: loaded %s (%s, %s, %s) in %.2f s\n", model_name.c_str(),
                   info.format.c_str(), summary.type.c_str(),
                   format_bytes(static_cast<double>(summary.bytes)).c_str(), load_s);
      const double kv_bytes_per_slot =
          static_cast<double>(2 * config.n_layers * config.kv_dim() *
                              static_cast<int64_t>(edgelm::dtype_row_bytes(kv_type, 1)));
      // A test past the model's context runs (its speed is still a speed) on positions the model
      // never saw, and takes long: say so before it starts. A test whose KV cache, which it fills
      // whole, is larger than the machine's memory cannot run at all.
      const double memory_bytes = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) *
                                  static_cast<double>(::sysconf(_SC_PAGESIZE));
      for (const TestSpec& test : tests) {
        const int64_t positions = test.n_depth + test.tokens();
        const double kv_bytes = kv_bytes_per_slot * static_cast<double>(positions);
        if (memory_bytes > 0 && kv_bytes > memory_bytes) {
          EDGELM_FAIL(test.flags(), ": ", test.name(), " fills a KV cache of ", positions,
                      " positions, ", format_bytes(kv_bytes), ", more than this machine's ",
                      format_bytes(memory_bytes), " of memory");
        }
        if (positions > config.max_position_embeddings) {
          edgelm::log_warn("[bench] ", test.flags(), ": ", test.name(), " needs ", positions,
                           " positions, past the model's context of ",
                           config.max_position_embeddings,
                           " (the length it was trained for); it runs all the same");
        }
      }
      const std::vector<int32_t> ids = make_token_ids(longest, config.vocab_size);

      for (size_t ti = 0; ti < threads.size(); ++ti) {
        const int n_threads = threads[ti];
        edgelm::Runtime::ModelOnBackend own;
        if (ti > 0) own = runtime.model_on(backend_options(n_threads));
        edgelm::LlamaModel& model = own.model ? *own.model : runtime.model();
        edgelm::Backend* backend = &model.backend();
        const std::string label = backend_label(backend_name, *backend);
        for (const TestSpec& test : tests) {
          const std::string where =
              edgelm::str_cat("[", summary.type, " ", label, " t", n_threads, "] ", test.name());
          std::fprintf(stderr, "bench: %s warm-up...\n", where.c_str());
          // The warm-up maps the weights in and wakes the threads; it needs no depth, and a few
          // decode steps touch every weight as well as 128 would.
          TestSpec warm_up = test;
          warm_up.n_depth = 0;
          if (warm_up.n_gen > 0) warm_up.n_gen = std::min<int64_t>(warm_up.n_gen, 16);
          run_test_once(model, warm_up, kv_type, ids);
          // Decode tests get their own bandwidth measurements around every timed run (pg tests,
          // mostly prefill, get no limit).
          const bool decode = probe && test.n_prompt == 0;
          std::vector<double> samples_bw;  // bytes/s: before run 1, between runs, after the last
          if (decode) samples_bw.push_back(probe->measure(n_threads, bw_passes, cpus));
          std::vector<double> samples_ns, samples_ts;
          for (int rep = 0; rep < repetitions; ++rep) {
            const double seconds = run_test_once(model, test, kv_type, ids);
            samples_ns.push_back(seconds * 1e9);
            samples_ts.push_back(static_cast<double>(test.tokens()) / seconds);
            if (decode) samples_bw.push_back(probe->measure(n_threads, bw_passes, cpus));
            std::fprintf(stderr, "bench: %s rep %d/%d: %.2f t/s", where.c_str(), rep + 1,
                         repetitions, samples_ts.back());
            if (decode) {
              std::fprintf(stderr, " (read bandwidth before/after %.1f/%.1f GB/s)",
                           samples_bw[samples_bw.size() - 2] / 1e9, samples_bw.back() / 1e9);
            }
            std::fprintf(stderr, "\n");
          }
          const Stats ns = stats_of(samples_ns);
          const Stats ts = stats_of(samples_ts);
          nlohmann::json row = {
              {"model_filename", model_path},
              {"model_type", summary.type},
              {"model_size", summary.bytes},
              {"model_n_params", summary.params},
              {"backend", backend_name},
              {"backend_label", label},
              {"device", backend->device()},
              {"n_threads", n_threads},
              {"weight_type", edgelm::dtype_name(info.weight_type)},
              {"kv_type", edgelm::dtype_name(kv_type)},
              {"type_k", edgelm::dtype_name(kv_type)},
              {"type_v", edgelm::dtype_name(kv_type)},
              {"n_prompt", test.n_prompt},
              {"n_gen", test.n_gen},
              {"n_depth", test.n_depth},
              {"n_ubatch", chunk},
              {"test", test.name()},
              {"test_time", test_time},
              {"repetitions", repetitions},
              {"avg_ns", ns.mean},
              {"stddev_ns", ns.stddev},
              {"avg_ts", ts.mean},
              {"stddev_ts", ts.stddev},
              {"samples_ns", samples_ns},
              {"samples_ts", samples_ts},
              {"load_s", load_s},
              {"peak_rss_bytes",
               static_cast<size_t>(edgelm::peak_resident_bytes()) - (probe ? probe->bytes() : 0)},
              {"peak_rss_scope", peak_is_per_model ? "model" : "process"},
              {"bw_probe", probe.has_value()},
              {"bw_gbs", nullptr},
              {"bw_gbs_at_start", nullptr},
              {"samples_bw_gbs", nullptr},
              {"samples_bw_fraction", nullptr},
              {"bytes_per_token", nullptr},
              {"bw_limit_ts", nullptr},
              {"bw_fraction", nullptr},
          };
          if (probe) {
            row["bw_gbs"] = bandwidth[ti] / 1e9;
            row["bw_gbs_at_start"] = bandwidth[ti] / 1e9;
          }
          if (decode) {
            // Step i attends over depth + i + 1 slots; the mean over the n steps is taken.
            const double mean_slots =
                static_cast<double>(test.n_depth) + static_cast<double>(test.n_gen + 1) / 2.0;
            const double bytes_per_token = static_cast<double>(model.weight_bytes_per_token()) +
                                           kv_bytes_per_slot * mean_slots;
            // Run i is bracketed by measurements i and i + 1; the better of the two is its limit,
            // so a run during which the bandwidth rose is not credited with the lower figure.
            std::vector<double> run_bw, run_limit, run_fraction, samples_bw_gbs;
            for (size_t i = 0; i < samples_ts.size(); ++i) {
              const double bw = std::max(samples_bw[i], samples_bw[i + 1]);
              run_bw.push_back(bw / 1e9);
              run_limit.push_back(bw / bytes_per_token);
              run_fraction.push_back(samples_ts[i] / run_limit.back());
            }
            for (double bw : samples_bw) samples_bw_gbs.push_back(bw / 1e9);
            row["bw_gbs"] = stats_of(run_bw).mean;
            row["samples_bw_gbs"] = samples_bw_gbs;
            row["bytes_per_token"] = bytes_per_token;
            row["bw_limit_ts"] = stats_of(run_limit).mean;
            row["bw_fraction"] = stats_of(run_fraction).mean;
            row["samples_bw_fraction"] = run_fraction;
          }
          report.row(row);
        }
      }
    }
  }
  report.end();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return edgelm::cli::run_tool("bench", run, argc, argv);
}
