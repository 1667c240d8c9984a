// libFuzzer target: a .safetensors file through SafetensorsFile::open, which parses the header's
// JSON and checks every tensor's dtype, shape and byte range against the data block (in range,
// no overlaps, no gaps).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_support.h"
#include "models/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace edgelm;
  const std::string_view input = fuzz::as_text(data, size);
  static const fuzz::ScratchDir dir("safetensors");
  const std::string path = dir.file("model.safetensors");
  fuzz::write_file(path, input);
  fuzz::expect_edgelm_errors_only(input, [&] { SafetensorsFile::open(path); });
  return 0;
}
