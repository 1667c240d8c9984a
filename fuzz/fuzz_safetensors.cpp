// libFuzzer target: a .safetensors file through SafetensorsFile::open, which parses the header's
// JSON and checks every tensor's dtype, shape and byte range against the data block (in range,
// no overlaps, no gaps).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_support.h"
#include "models/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace edgelm;
  static const fuzz::ScratchDir dir("safetensors");
  const std::string path = dir.file("model.safetensors");
  fuzz::write_file(path, fuzz::as_text(data, size));
  fuzz::expect_edgelm_errors_only([&] { SafetensorsFile::open(path); });
  return 0;
}
