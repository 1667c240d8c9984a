// make_model: writes a random-weight Llama model with real shapes (seeded) as a Hugging Face
// folder or a GGUF file, for tests, demos and benchmarks without a downloaded checkpoint.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "bin/cli_util.h"
#include "core/error.h"
#include "models/make_model.h"

int main(int argc, char** argv) {
  try {
    CLI::App app{
        "Writes a random-weight Llama model (seeded) as a Hugging Face folder or GGUF file."};
    edgelm::MakeModelOptions options;
    std::string quant = "f32";
    bool list = false;
    app.add_option("--preset", options.preset, "Model shape (see --list)");
    app.add_option("--format", options.format,
                   "hf (config.json + model.safetensors + tokenizer.json) or gguf")
        ->check(CLI::IsMember({"hf", "gguf"}));
    app.add_option("--quant", quant,
                   "Weight type: f32|f16|bf16 (hf, gguf), q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k|q6_k "
                   "(gguf), or llama.cpp's mixes q4_k_m|q5_k_m (gguf: Q6_K for the output and for "
                   "attn_v and ffn_down of some layers)");
    edgelm::cli::add_shared(app, edgelm::cli::flag::kSeed, options.seed)
        ->capture_default_str()
        ->check(edgelm::cli::kUint64);
    app.add_option("--out", options.out_dir, "Output folder");
    edgelm::cli::add_shared(app, edgelm::cli::flag::kList, list);
    if (!edgelm::cli::parse_flags(app, argc, argv)) return 0;
    if (list) {
      for (const auto& preset : edgelm::model_presets()) {
        std::printf("%-16s %s\n", preset.name.c_str(), preset.description.c_str());
      }
      return 0;
    }
    if (options.out_dir.empty()) EDGELM_FAIL("--out: give an output folder");
    std::string type_name = quant;
    if (quant == "q4_k_m" || quant == "q5_k_m") {
      options.k_quant_mix = true;
      type_name = quant.substr(0, 4);
    }
    const auto dtype = edgelm::dtype_from_name(type_name);
    if (!dtype) EDGELM_FAIL("--quant: unknown type '", quant, "'");
    options.quant = *dtype;
    const auto start = std::chrono::steady_clock::now();
    const std::string path = edgelm::make_model(options);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "make_model: wrote %s (%s, %s, seed %llu) in %.1f s\n", path.c_str(),
                 options.preset.c_str(), quant.c_str(),
                 static_cast<unsigned long long>(options.seed), seconds);
    std::printf("%s\n", path.c_str());
    edgelm::cli::finish_stdout();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_model: %s\n", e.what());
    return 1;
  }
}
