// libFuzzer target: the strict comma-list parsers of core/parse_list.h (--prompt-ids, --decode,
// --cpus). Beyond "edgelm::Error or a result", a list that parses must round-trip: printing its
// ids with commas and parsing that again gives the same ids, every id is within int32 and every
// CPU within the parser's bound, and there is one id per comma-separated item.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/parse_list.h"
#include "fuzz/fuzz_support.h"

namespace {

void require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_id_list: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace edgelm;
  const std::string_view input = fuzz::as_text(data, size);
  const std::string text(input);
  fuzz::expect_edgelm_errors_only(input, [&] {
    const std::vector<int32_t> ids = parse_id_list(text, "--prompt-ids");
    require(!ids.empty(), "an accepted id list is empty");
    size_t commas = 0;
    for (const char c : text) commas += c == ',';
    require(ids.size() == commas + 1, "not one id per item");
    std::string printed;
    for (const int32_t id : ids) {
      require(id >= 0, "a negative id was accepted");
      printed += (printed.empty() ? "" : ",") + std::to_string(id);
    }
    require(parse_id_list(printed, "--prompt-ids") == ids, "ids do not round-trip");
  });
  fuzz::expect_edgelm_errors_only(input, [&] {
    const std::vector<int> cpus = parse_cpu_list(text, "--cpus");
    require(!cpus.empty(), "an accepted CPU list is empty");
    for (const int cpu : cpus) require(cpu >= 0 && cpu <= 4095, "a CPU index out of range");
  });
  return 0;
}
