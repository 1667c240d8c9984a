// libFuzzer target: a Hugging Face config.json, and optionally a generation_config.json, through
// load_hf_config. The input is config.json up to its first NUL byte (which JSON text never holds)
// and generation_config.json after it; without a NUL there is no generation_config.json.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "fuzz/fuzz_support.h"
#include "models/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace edgelm;
  const std::string_view input = fuzz::as_text(data, size);
  static const fuzz::ScratchDir dir("config");
  const std::string_view text = input;
  const size_t nul = text.find('\0');
  fuzz::write_file(dir.file("config.json"), text.substr(0, nul));
  const std::string generation = dir.file("generation_config.json");
  if (nul == std::string_view::npos) {
    std::filesystem::remove(generation);
  } else {
    fuzz::write_file(generation, text.substr(nul + 1));
  }
  fuzz::expect_edgelm_errors_only(input, [&] { load_hf_config(dir.path().string()); });
  return 0;
}
