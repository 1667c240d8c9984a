// libFuzzer target: a Hugging Face tokenizer.json through Tokenizer::from_hf_json, then, when it
// loads, an encode and decode of a fixed text (with an added-token spelling, digits, punctuation
// and a multi-byte character), so the pipeline the file describes runs too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "models/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace edgelm;
  const std::string_view input = fuzz::as_text(data, size);
  static const fuzz::ScratchDir dir("tokenizer_json");
  const std::string path = dir.file("tokenizer.json");
  fuzz::write_file(path, input);
  fuzz::expect_edgelm_errors_only(input, [&] {
    const Tokenizer tokenizer = Tokenizer::from_hf_json(path);
    const std::vector<int32_t> ids =
        tokenizer.encode("Hello, world! 2026 <|im_end|> caf\xc3\xa9\n");
    tokenizer.decode(ids);
    tokenizer.decode(ids, /*skip_special=*/true);
  });
  return 0;
}
