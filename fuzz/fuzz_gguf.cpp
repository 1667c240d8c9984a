// libFuzzer target: a GGUF file, through everything that reads one. GgufFile::open validates the
// structure; then, each on its own so that one refusal does not hide the others, the llama.* keys
// (load_gguf_config), the tokenizer keys (Tokenizer::from_gguf, with an encode/decode round of
// a fixed text) and the whole model (load_llama on the portable CPU backend: tensor names, shapes,
// types, the layer count, tied embeddings).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/registry.h"
#include "fuzz/fuzz_support.h"
#include "models/config.h"
#include "models/gguf.h"
#include "models/loader.h"
#include "models/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace edgelm;
  const std::string_view input = fuzz::as_text(data, size);
  static const fuzz::ScratchDir dir("gguf");
  // One thread: the parsers are what is fuzzed, and a pool would only slow every run down.
  static const std::unique_ptr<Backend> backend =
      create_backend("cpu:portable", BackendOptions{.n_threads = 1});
  const std::string path = dir.file("model.gguf");
  fuzz::write_file(path, input);

  fuzz::expect_edgelm_errors_only(input, [&] { GgufFile::open_metadata(path); });
  fuzz::expect_edgelm_errors_only(input, [&] {
    const GgufFile file = GgufFile::open(path);
    fuzz::expect_edgelm_errors_only(input, [&] { load_gguf_config(file); });
    fuzz::expect_edgelm_errors_only(input, [&] {
      const Tokenizer tokenizer = Tokenizer::from_gguf(file);
      const std::vector<int32_t> ids = tokenizer.encode("Hello, world! 123 <|im_end|>\n");
      tokenizer.decode(ids);
    });
  });
  fuzz::expect_edgelm_errors_only(input, [&] { load_llama(path, *backend); });
  return 0;
}
