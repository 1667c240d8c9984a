#include "models/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>

#include "core/error.h"

namespace edgelm::tokenizer {
namespace {

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> buffer{};
  pcre2_get_error_message(code, buffer.data(), buffer.size());
  return reinterpret_cast<const char*>(buffer.data());
}

// Rewrites `\s` and `\S` to Oniguruma's meaning (Unicode White_Space) before PCRE2 compiles the
// pattern: with PCRE2_UCP, PCRE2 also counts U+180E MONGOLIAN VOWEL SEPARATOR as a space, which
// `tokenizers` does not. Inside a character class `\S` cannot be rewritten and keeps PCRE2's
// meaning (no common tokenizer pattern has one).
std::string onig_compatible_pattern(std::string_view pattern) {
  static constexpr std::string_view kSpaces =
      "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
      "\\x{205F}\\x{3000}";
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += in_class ? std::string(kSpaces) : str_cat("[", kSpaces, "]");
      } else if (next == 'S' && !in_class) {
        out += str_cat("[^", kSpaces, "]");
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      // A ']' right after '[' or '[^' is a literal, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
    } else if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t end = pattern.find(":]", i + 2);  // a POSIX class such as [:alpha:]
      if (end != std::string_view::npos) {
        out.append(pattern.substr(i + 1, end + 2 - (i + 1)));
        i = end + 1;
      }
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

}  // namespace

// Match data and a JIT stack per thread: the compiled pattern is shared read-only between
// threads, these are the per-match scratch PCRE2 needs.
struct Regex::Scratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;

  Scratch() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    // Grows from 32 KiB up to 16 MiB, so that a pathological input (a megabyte of one character
    // class) fails cleanly long before it could exhaust memory.
    stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
    if (context != nullptr && stack != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~Scratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

Regex::Scratch& Regex::thread_scratch() {
  thread_local Scratch scratch;
  if (scratch.data == nullptr || scratch.context == nullptr) {
    EDGELM_FAIL("[tokenizer] out of memory for regex match data");
  }
  return scratch;
}

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;

  ~Compiled() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view pattern, const std::string& where) {
  const std::string translated = onig_compatible_pattern(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                    PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (code == nullptr) {
    EDGELM_FAIL(where, ": bad regex '", pattern, "' at offset ", offset, ": ",
                pcre2_message(error));
  }
  auto compiled = std::make_shared<Compiled>();
  compiled->code = code;
  compiled->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  compiled_ = std::move(compiled);
}

int Regex::run(Scratch& scratch, std::string_view text, size_t from) const {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  return compiled_->jit ? pcre2_jit_match(compiled_->code, subject, text.size(), from, 0,
                                          scratch.data, scratch.context)
                        : pcre2_match(compiled_->code, subject, text.size(), from,
                                      PCRE2_NO_UTF_CHECK, scratch.data, scratch.context);
}

bool Regex::find(Scratch& scratch, std::string_view text, size_t from, Match& match) const {
  const int rc = run(scratch, text, from);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) EDGELM_FAIL("[tokenizer] pre-tokenizer regex failed: ", pcre2_message(rc));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
  match = {ovector[0], ovector[1]};
  return true;
}

size_t Regex::match_at_start(std::string_view text) const {
  Scratch& scratch = thread_scratch();
  if (run(scratch, text, 0) < 0) return 0;
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.data);
  return ovector[0] == 0 ? ovector[1] : 0;
}

}  // namespace edgelm::tokenizer
