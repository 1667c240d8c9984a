// perplexity: the perplexity of a Llama model over a text file, computed as llama.cpp's
// llama-perplexity does (eval/perplexity.h, docs/model.md): the whole text tokenized once,
// non-overlapping windows of -c tokens from an empty cache, the second half of each scored.
// Prints the running perplexity after each window ("[1]12.3456,[2]..."), then the estimate with
// its standard error, the speed and the time; --json adds one JSON object as the last stdout line.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "bin/cli_util.h"
#include "core/error.h"
#include "eval/perplexity.h"
#include "models/tokenizer.h"
#include "runtime/setup.h"

namespace {

using Clock = std::chrono::steady_clock;

// Tokens per forward step unless -b says otherwise (capped at -c): the prefill chunk. The
// result does not depend on it (on SmolLM2 Q8_0, -b 128, 256 and 512 gave the same perplexity to
// every printed digit), and neither did the speed measurably (docs/model.md), but the step's
// logits take batch x vocab floats: 24 MiB at 128 for SmolLM2's 49,152 tokens, 96 MiB at 512
// (llama.cpp's batch at -c 512), 250 MiB for Llama 3.2's 128,256.
constexpr int64_t kDefaultBatch = edgelm::kDefaultPrefillChunk;

// The text of -f, as llama.cpp reads it: the whole file, less one trailing newline.
std::string read_text(const std::string& path) {
  std::string text = edgelm::cli::read_text_file(path, "-f/--file");
  if (text.empty()) EDGELM_FAIL("-f/--file: '", path, "' is empty");
  if (text.back() == '\n') text.pop_back();
  return text;
}

int run(int argc, char** argv) {
  CLI::App app{
      "Perplexity of a Llama model over a text file, computed as llama.cpp's llama-perplexity "
      "does."};
  std::string model_path;
  std::string file;
  int64_t n_ctx = 512;
  int64_t max_chunks = -1;
  int64_t batch = kDefaultBatch;
  std::string kv_type_text = "f16";
  int threads = 0;
  std::string backend_name = "cpu";
  std::string weight_type_text;
  bool json = false;
  // The flags, from the tools' one table (bin/flags.h), in llama-perplexity's spellings.
  namespace flag = edgelm::cli::flag;
  edgelm::cli::add_shared(app, flag::kModel, model_path);
  edgelm::cli::add_shared(app, flag::kFile, file);
  edgelm::cli::add_shared(app, flag::kCtxSize, n_ctx)->capture_default_str();
  app.add_option("--chunks", max_chunks, "Score at most this many windows (default: all)");
  edgelm::cli::add_shared(app, flag::kBatchSize, batch)->capture_default_str();
  edgelm::cli::add_shared(app, flag::kKvType, kv_type_text);
  edgelm::cli::add_shared(app, flag::kThreads, threads)->check(CLI::Range(0, 1024));
  edgelm::cli::add_shared(app, flag::kBackend, backend_name);
  edgelm::cli::add_shared(app, flag::kWeightType, weight_type_text);
  edgelm::cli::add_shared(app, flag::kJson, json);
  edgelm::cli::add_note(app, "-c is the window scored (512, as llama.cpp), -b capped at it");
  if (!edgelm::cli::parse_flags(app, argc, argv)) return 0;

  // Everything that can be checked without the model, first.
  if (model_path.empty()) EDGELM_FAIL("-m/--model is required (a HF folder or a .gguf file)");
  if (file.empty()) EDGELM_FAIL("-f/--file is required (the text to score)");
  // A window of n tokens scores n - 1 - n/2 of them: none for 2.
  if (n_ctx < 3)
    EDGELM_FAIL("-c/--ctx-size ", n_ctx, ": must be at least 3 (a window scores ",
                "its second half, which is empty below 3 tokens)");
  if (app.count("--chunks") > 0 && max_chunks < 1)
    EDGELM_FAIL("--chunks ", max_chunks, ": must be at least 1");
  if (batch < 1) EDGELM_FAIL("-b/--batch-size ", batch, ": must be at least 1");
  const int64_t step_tokens = std::min(batch, n_ctx);
  edgelm::Settings settings{
      .model_path = model_path,
      .backend = backend_name,
      .backend_options = {.n_threads = threads},
      .max_chunk = step_tokens,
      .kv_type = edgelm::cli::parse_dtype(kv_type_text, "--kv-type",
                                          {edgelm::DType::F32, edgelm::DType::F16}),
      .context = n_ctx};
  if (!weight_type_text.empty()) {
    settings.weight_type = edgelm::cli::parse_weight_type(weight_type_text);
  }
  const std::string text = read_text(file);

  const edgelm::Runtime runtime = edgelm::Runtime::load(std::move(settings));
  const edgelm::DType kv_type = runtime.settings().kv_type;
  edgelm::Backend* backend = &runtime.backend();
  edgelm::LlamaModel& model = runtime.model();
  const edgelm::DType weight_type = runtime.info().weight_type;
  const std::string& format = runtime.info().format;
  const std::string& weight_types = runtime.info().weight_types;  // "q4_1 (token embedding q8_0)"
  const edgelm::LlamaConfig& config = model.config();
  if (n_ctx > config.max_position_embeddings) {
    EDGELM_FAIL("-c/--ctx-size ", n_ctx, " is beyond the model's context of ",
                config.max_position_embeddings, " tokens");
  }
  const edgelm::Tokenizer& tokenizer = *runtime.tokenizer();
  std::fprintf(stderr, "%s\n", runtime.describe().c_str());

  // What the tokenizer adds around a text (its add-BOS setting): BOS alone, or nothing. llama.cpp
  // refuses a vocabulary that appends EOS, and so does this.
  const std::vector<int32_t> added = tokenizer.encode("", /*add_bos=*/true);
  std::optional<int32_t> bos;
  if (!added.empty()) {
    if (added.size() != 1 || added[0] != tokenizer.bos_id()) {
      EDGELM_FAIL("[perplexity] the tokenizer adds ", added.size(),
                  " tokens around a text, not BOS alone; perplexity as llama.cpp computes it "
                  "needs a vocabulary that appends no EOS");
    }
    bos = added[0];
  }
  // As llama.cpp: special tokens written in the text are plain text.
  const auto tokenize_start = Clock::now();
  const std::vector<int32_t> tokens =
      tokenizer.encode(text, /*add_bos=*/true, /*parse_special=*/false);
  const double tokenize_s = std::chrono::duration<double>(Clock::now() - tokenize_start).count();
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  if (n_tokens < 2 * n_ctx) {
    EDGELM_FAIL("-f/--file: '", file, "' tokenizes to only ", n_tokens, " tokens; -c ", n_ctx,
                " needs at least ", 2 * n_ctx, " (two windows)");
  }
  const int64_t available = n_tokens / n_ctx;
  const int64_t chunks = max_chunks < 0 ? available : std::min(max_chunks, available);
  std::fprintf(stderr,
               "%lld tokens (%s BOS) in %.3f s; %lld windows of %lld, %lld tokens scored per "
               "window, %lld tokens per step, %s KV cache\n",
               static_cast<long long>(n_tokens), bos ? "with" : "without", tokenize_s,
               static_cast<long long>(chunks), static_cast<long long>(n_ctx),
               static_cast<long long>(edgelm::perplexity_tokens_per_chunk(n_ctx)),
               static_cast<long long>(step_tokens), edgelm::dtype_name(kv_type));

  edgelm::KvCache cache = model.make_cache(n_ctx, kv_type);
  const edgelm::PerplexityResult result = edgelm::compute_perplexity(
      model, cache, tokens,
      {.n_ctx = n_ctx, .batch = step_tokens, .max_chunks = chunks, .bos = bos},
      [](int64_t chunk, const edgelm::PerplexityResult& so_far) {
        std::printf("[%lld]%.4f,", static_cast<long long>(chunk + 1),
                    so_far.running_perplexity.back());
        std::fflush(stdout);
      });
  const edgelm::NllStats& nll = result.nll;
  const double tokens_per_s =
      result.seconds > 0 ? static_cast<double>(result.tokens_evaluated) / result.seconds : 0.0;
  std::printf("\n");
  std::printf("estimate: PPL = %.4f +/- %.5f (%lld tokens scored in %lld windows of %lld)\n",
              nll.perplexity(), nll.perplexity_stderr(), static_cast<long long>(nll.count),
              static_cast<long long>(result.chunks), static_cast<long long>(n_ctx));
  std::printf("%lld tokens evaluated in %.2f s: %.2f tokens/s\n",
              static_cast<long long>(result.tokens_evaluated), result.seconds, tokens_per_s);
  if (json) {
    const nlohmann::json summary = {
        {"model", model_path},
        {"format", format},
        {"file", file},
        {"n_ctx", n_ctx},
        {"batch", result.batch},
        {"chunks", result.chunks},
        {"text_tokens", n_tokens},
        {"add_bos", bos.has_value()},
        {"tokens_evaluated", result.tokens_evaluated},
        {"tokens_scored", nll.count},
        {"ppl", nll.perplexity()},
        {"ppl_stderr", nll.perplexity_stderr()},
        {"mean_nll", nll.mean()},
        {"mean_nll_stderr", nll.mean_stderr()},
        {"running_ppl", result.running_perplexity},
        {"seconds", result.seconds},
        {"tokenize_seconds", tokenize_s},
        {"tokens_per_second", tokens_per_s},
        {"backend", backend_name},
        {"device", backend->device()},
        {"threads", threads},
        {"weight_type", edgelm::dtype_name(weight_type)},
        {"weight_types", weight_types},
        {"kv_type", edgelm::dtype_name(kv_type)},
    };
    std::printf("%s\n", summary.dump().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return edgelm::cli::run_tool("perplexity", run, argc, argv);
}
