// Small helpers shared by the command-line tools: the flag table's registration (bin/flags.h) and
// the parse every tool runs (parse_flags), list, size and dtype parsers, and reading a text file
// named by a flag.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "bin/flags.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/parse_list.h"
#include "eviction/policy.h"

namespace edgelm::cli {

// ---- one flag table ----

// The help text of `entry` as tools show it: "{policies}" filled in.
inline std::string help_of(const flag::Flag& entry) {
  std::string help = entry.help;
  const std::string_view mark = "{policies}";
  if (const size_t at = help.find(mark); at != std::string::npos) {
    help.replace(at, mark.size(), policy_list());
  }
  return help;
}

// Registers a flag of the table (bin/flags.h) with its names and help; a bool is a switch. A tool
// shows its own default with ->capture_default_str() or ->default_str(...), and a list where it
// takes several values (a vector, or ->delimiter(',')).
template <class T>
CLI::Option* add_shared(CLI::App& app, const flag::Flag& entry, T& value) {
  return app.add_option(entry.names, value, help_of(entry));
}
inline CLI::Option* add_shared(CLI::App& app, const flag::Flag& entry, bool& value) {
  return app.add_flag(entry.names, value, help_of(entry));
}
// A flag of the table that always takes a value, a bool included ("--ea-covariance off").
template <class T>
CLI::Option* add_shared_option(CLI::App& app, const flag::Flag& entry, T& value) {
  return app.add_option(entry.names, value, help_of(entry));
}

// A note of the tool's own beside the shared help, a line of its --help footer: what a shared flag
// means in this tool beyond the help text (a list, a default chosen from other settings, ...).
inline void add_note(CLI::App& app, const std::string& note) {
  const std::string footer = app.get_footer();
  app.footer((footer.empty() ? "" : footer + "\n") + note);
}

// ---- spellings CLI11 cannot declare ----

// A spelling of a flag that CLI11 cannot declare, and the long flag it stands for. parse_flags
// rewrites the spelling to the long flag before anything else reads the arguments, so the rest of
// the parse (and --help's footer, which lists them) sees one flag.
struct FlagAlias {
  const char* alias;
  const char* long_name;
};

// llama.cpp's multi-letter short flags that edgelm takes, in every tool that has the long flag:
// CLI11 knows only one-letter short names.
inline constexpr FlagAlias kMultiLetterAliases[] = {
    {"-pg", "--pg"},         // llama-bench: a prompt + generation test
    {"-nr", "--no-repack"},  // keep weights in their stored layout
};

// tokenize's older spelling of -p/--prompt, the text to encode.
inline constexpr FlagAlias kTokenizeAliases[] = {
    {"--text", "--prompt"},
};

// llama-bench's spellings that bench takes beyond those, passed to parse_flags by bench alone:
// -p is llama-bench's prompt length, where it is the prompt text in every other edgelm tool (a
// tool with --n-prompt that does not pass these refuses -p with a hint). With them, bench takes
// llama-bench's -m, -p, -n, -pg, -d, -r, -t and -o with llama-bench's meaning, and comma-separated
// lists where llama-bench takes lists.
inline constexpr FlagAlias kLlamaBenchAliases[] = {
    {"-p", "--n-prompt"},  // prompt lengths, a pp test each
};

namespace detail {

// "-m,--model" -> {"-m", "--model"}.
inline std::vector<std::string> split_names(std::string_view names) {
  std::vector<std::string> out;
  while (!names.empty()) {
    const size_t comma = names.find(',');
    out.emplace_back(names.substr(0, comma));
    names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
  }
  return out;
}

// Every name of `option`, with its dashes: {"-n", "--n-predict"}.
inline std::vector<std::string> dashed_names(const CLI::Option& option) {
  std::vector<std::string> names;
  for (const std::string& s : option.get_snames()) names.push_back("-" + s);
  for (const std::string& l : option.get_lnames()) names.push_back("--" + l);
  return names;
}

// Throws when a flag of `app` shares a name with an entry of the flag table but is not that entry:
// other names, or another help text. A programming error of the tool, caught by any run of it
// (the CLI tests run every tool, and help_vocabulary.py compares their --help).
inline void check_vocabulary(const CLI::App& app) {
  for (const CLI::Option* option : app.get_options()) {
    const std::vector<std::string> names = dashed_names(*option);
    for (const flag::Flag* entry : flag::kTable) {
      const std::vector<std::string> wanted = split_names(entry->names);
      const bool shares = std::any_of(wanted.begin(), wanted.end(), [&](const std::string& w) {
        return std::find(names.begin(), names.end(), w) != names.end();
      });
      if (!shares) continue;
      if (names != wanted) {
        EDGELM_FAIL("[cli] flag ", option->get_name(), " must be declared as '", entry->names,
                    "' (one meaning per flag name across the tools: add_shared)");
      }
      if (option->get_description() != help_of(*entry)) {
        EDGELM_FAIL("[cli] flag ", option->get_name(), " must be registered with add_shared ",
                    "(one spelling and help text across the tools)");
      }
    }
  }
}

// What to use instead of a flag a tool does not take: flags of llama.cpp's tools (and the old
// meaning of a few short names). A hint applies in a tool that has the flag `needs` (any tool when
// null); "%V" in the text stands for the value given after the flag.
struct FlagHint {
  const char* names;
  const char* needs;
  const char* text;
};
inline constexpr FlagHint kFlagHints[] = {
    {"-p,--prompt", "--n-prompt",
     "-p/--prompt is the prompt text in edgelm's tools; use --n-prompt %V for the prompt length"},
    {"-b", "--backend",
     "-b is the batch size in edgelm's tools; the backend is chosen with --backend"},
    {"-f", "--filter", "-f is a text file in edgelm's tools; cases are chosen with --filter"},
    {"-ngl,--n-gpu-layers,--gpu-layers", "--backend",
     "edgelm does not offload layers one by one: --backend opencl runs every layer on the GPU"},
    {"-ctk,--cache-type-k,-ctv,--cache-type-v", "--kv-type",
     "use --kv-type, which sets the type of K and V together"},
    {"-fa,--flash-attn", "--backend",
     "attention is always one fused op in edgelm; there is nothing to switch on or off"},
    {"-ub,--ubatch-size", "--batch-size", "edgelm has one prefill step size: -b/--batch-size"},
    {"-tb,--threads-batch", "--threads", "-t/--threads sets the threads of prefill and decode"},
    {"-nkvo,--no-kv-offload", "--backend",
     "the KV cache lives in memory the CPU and the GPU share; there is nothing to offload"},
    {"-sm,--split-mode,-ts,--tensor-split,-mg,--main-gpu,-dev,--device", "--backend",
     "edgelm runs a model on one device, chosen with --backend"},
    {"-C,--cpu-mask", "--cpus", "use --cpus, a CPU list such as 0-3,6"},
    {"-mmp,--mmap,--no-mmap,--mlock,-lm,--load-mode", "--model",
     "edgelm always memory-maps the model file"},
    {"-hf,-hfr,--hf-repo,-hff,--hf-file,-mu,--model-url", "--model",
     "edgelm reads local files only: -m PATH (a .gguf file or a Hugging Face folder)"},
    {"-sys,--system-prompt", "--system", "the system message is --system"},
    {"-cnv,--conversation", "--interactive", "use -i/--interactive for a multi-turn chat"},
    {"-no-cnv,--no-conversation", "--interactive",
     "generate answers one prompt and exits unless -i/--interactive is given"},
    {"-v,--verbose,-lv,--verbosity,--log-verbosity", nullptr,
     "set the environment variable EDGELM_LOG=debug for more output"},
    {"-help", nullptr, "use -h or --help"},
};

// True for a token that reads as a number ("-1", "-0.5", ".5"), which is a value, never a flag.
inline bool is_number(std::string_view token) {
  if (!token.empty() && token.front() == '-') token.remove_prefix(1);
  return !token.empty() && (std::isdigit(static_cast<unsigned char>(token.front())) ||
                            (token.front() == '.' && token.size() > 1));
}

// "unknown flag '-ngl'", with the hint for it where one applies.
[[noreturn]] inline void fail_unknown_flag(const CLI::App& app, const std::string& flag,
                                           const char* value) {
  for (const FlagHint& hint : kFlagHints) {
    const std::vector<std::string> names = split_names(hint.names);
    if (std::find(names.begin(), names.end(), flag) == names.end()) continue;
    if (hint.needs != nullptr && app.get_option_no_throw(hint.needs) == nullptr) continue;
    const std::string shown =
        value != nullptr && is_number(value) && value[0] != '-' ? value : std::string("N");
    std::string text = hint.text;
    for (size_t at = text.find("%V"); at != std::string::npos; at = text.find("%V", at)) {
      text.replace(at, 2, shown);
      at += shown.size();
    }
    EDGELM_FAIL("unknown flag '", flag, "': ", text);
  }
  EDGELM_FAIL("unknown flag '", flag, "' (--help lists the flags)");
}

// Items `option` takes from the tokens after it: 0 for a switch.
inline int values_taken(const CLI::Option& option) {
  return std::max(0, option.get_items_expected_min());
}

// The aliases that apply in `app`: `own` (the tool's, as passed to parse_flags), then the
// multi-letter aliases whose long flag the tool has.
inline std::vector<FlagAlias> aliases_of(const CLI::App& app, std::span<const FlagAlias> own) {
  std::vector<FlagAlias> aliases(own.begin(), own.end());
  for (const FlagAlias& alias : kMultiLetterAliases) {
    if (app.get_option_no_throw(alias.long_name) != nullptr) aliases.push_back(alias);
  }
  return aliases;
}

// Rewrites `token` to the long flag of the alias it spells, "-pg" -> "--pg"; a one-letter alias
// also with its value attached, as CLI11 takes "-t4": "-p512" -> "--n-prompt=512". Any other
// token stays as it is.
inline void rewrite_alias(std::string& token, std::span<const FlagAlias> aliases) {
  for (const FlagAlias& alias : aliases) {
    if (token == alias.alias) {
      token = alias.long_name;
      return;
    }
    const std::string_view name = alias.alias;
    if (name.starts_with("--") && token.starts_with(name) && token.size() > name.size() &&
        token[name.size()] == '=') {
      token = edgelm::str_cat(alias.long_name, token.substr(name.size()));  // "--text=hi"
      return;
    }
  }
  for (const FlagAlias& alias : aliases) {
    const std::string_view name = alias.alias;
    if (name.size() == 2 && token.size() > 2 && token.starts_with(name) &&
        std::isdigit(static_cast<unsigned char>(token[2]))) {
      token = edgelm::str_cat(alias.long_name, "=", token.substr(2));
      return;
    }
  }
}

// The pre-parse of parse_flags. Walks the arguments as CLI11 will, skipping the values of
// options, rewrites the aliases that apply (aliases_of) to their long flags, and fails on a flag
// the tool does not have: in particular a single-dash token of two or more letters, which CLI11
// 2.x would otherwise read as a one-letter flag and a value ("-ngl 99" as "-n gl") or as several
// one-letter switches. Returns the arguments to parse, argv[0] first.
inline std::vector<std::string> preparse(const CLI::App& app, int argc, char** argv,
                                         std::span<const FlagAlias> own_aliases = {}) {
  const std::vector<FlagAlias> aliases = aliases_of(app, own_aliases);
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& token = args[i];
    const char* next = i + 1 < args.size() ? args[i + 1].c_str() : nullptr;
    if (token == "--") break;  // the rest is positional
    if (token.size() < 2 || token[0] != '-' || is_number(token)) continue;  // a value
    rewrite_alias(token, aliases);
    const CLI::Option* option = nullptr;
    bool value_attached = token.find('=') != std::string::npos;
    if (token[1] == '-') {
      const std::string name = token.substr(0, token.find('='));
      option = app.get_option_no_throw(name);
      if (option == nullptr) {
        if (app.get_allow_extras()) continue;  // passed on, e.g. to Google Benchmark
        fail_unknown_flag(app, name, value_attached ? nullptr : next);
      }
    } else if (std::isalpha(static_cast<unsigned char>(token[1])) && token.size() > 2 &&
               std::isalpha(static_cast<unsigned char>(token[2]))) {
      fail_unknown_flag(app, token, next);
    } else {
      option = app.get_option_no_throw(token.substr(0, 2));
      if (option == nullptr) fail_unknown_flag(app, token.substr(0, 2), next);
      value_attached = token.size() > 2;  // "-t4"
    }
    if (!value_attached) i += static_cast<size_t>(values_taken(*option));
  }
  return args;
}

}  // namespace detail

// Parses the flags: true to go on, false after --help printed the usage (exit 0). Every tool calls
// this once. It checks the tool's flags against the vocabulary above, then runs the pre-parse
// (aliases rewritten: the multi-letter ones such as -pg, and `own_aliases`, spellings that only
// this tool takes, such as bench's kLlamaBenchAliases; unknown flags, with a hint where edgelm
// has an equivalent of a llama.cpp flag), then CLI11. A bad flag throws edgelm::Error with the
// reason, so it ends as one line on stderr with exit 1, like every other error of the tools.
inline bool parse_flags(CLI::App& app, int argc, char** argv,
                        std::span<const FlagAlias> own_aliases = {}) {
  detail::check_vocabulary(app);
  std::string aliases;  // named in --help, since CLI11 cannot list them beside their flags
  for (const FlagAlias& alias : detail::aliases_of(app, own_aliases)) {
    aliases += edgelm::str_cat(aliases.empty() ? "" : ", ", alias.alias, " = ", alias.long_name);
  }
  if (!aliases.empty()) {
    const std::string footer = app.get_footer();
    app.footer((footer.empty() ? "" : footer + "\n") + "Also taken: " + aliases);
  }
  const std::vector<std::string> args = detail::preparse(app, argc, argv, own_aliases);
  std::vector<const char*> pointers;
  for (const std::string& arg : args) pointers.push_back(arg.c_str());
  try {
    app.parse(static_cast<int>(pointers.size()), pointers.data());
    return true;
  } catch (const CLI::Success& e) {  // --help
    app.exit(e);
    return false;
  } catch (const CLI::ParseError& e) {
    EDGELM_FAIL(e.what());
  }
}

// The bytes of the text file `path`; throws edgelm::Error naming `flag` when it is missing, a
// directory, not a regular file, or cannot be read. The file's kind is checked with stat before it
// is opened: opening a FIFO blocks until a writer comes, and /dev/zero never ends.
inline std::string read_text_file(const std::string& path, const char* flag) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (std::filesystem::is_directory(status))
    EDGELM_FAIL(flag, ": '", path, "' is a directory, not a text file");
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    EDGELM_FAIL(flag, ": '", path, "' is not a regular file (a FIFO, device or socket)");
  std::ifstream in(path, std::ios::binary);
  if (!in) EDGELM_FAIL(flag, ": cannot open '", path, "': ", std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) EDGELM_FAIL(flag, ": cannot read '", path, "'");
  return text.str();
}

// Closes `out`, a file the tool wrote for `flag`, and throws edgelm::Error naming the flag and
// `path` when any write to it failed: an ofstream keeps what it buffers until it is flushed, so a
// full disk often shows only here.
inline void close_written_file(std::ofstream& out, const std::string& path, const char* flag) {
  out.close();
  if (!out) EDGELM_FAIL(flag, ": cannot write '", path, "' (disk full or not writable?)");
}

// Flushes stdout and throws edgelm::Error when a write to it failed (stdout on a full disk, or
// /dev/full): a tool whose output is its result must not exit 0 without it. Call last in run().
inline void finish_stdout() {
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0)
    EDGELM_FAIL("stdout: write failed: ", std::strerror(errno));
}

// `value` as one line of JSON on stdout (the tools' --json summaries). Strings that are not valid
// UTF-8 (a token's bytes cut mid-character) get U+FFFD instead of throwing.
inline void print_json_line(const nlohmann::json& value) {
  std::printf("%s\n", value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

// A tool's main(): runs run(argc, argv) and turns an exception into one line on stderr, "tool:
// message", after what stdout already holds, and exit status 1.
inline int run_tool(const char* tool, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n", tool, e.what());
    return 1;
  }
}

// A check for unsigned 64-bit flags (seeds). CLI11 2.3 reads "-1" into such a flag as 2^64-1 and
// clamps a number past 2^64-1 to it without a word; this rejects both before the conversion.
inline const CLI::Validator kUint64(
    [](std::string& text) -> std::string {
      uint64_t value = 0;
      const char* end = text.data() + text.size();
      const auto [stop, error] = std::from_chars(text.data(), end, value);
      if (text.empty() || error != std::errc() || stop != end) {
        return "'" + text + "' is not a whole number in [0, 18446744073709551615]";
      }
      return {};
    },
    "UINT64");

// "1.5MiB" -> 1572864: a byte count with an optional suffix (B; KiB, MiB, GiB: powers of 1024; KB,
// MB, GB: powers of 1000). Throws edgelm::Error naming `flag`.
inline uint64_t parse_byte_size(const std::string& text, const char* flag) {
  size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string suffix = used > 0 ? text.substr(used) : "";
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1.0},   {"B", 1.0},  {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}};
  for (const auto& [name, scale] : kUnits) {
    if (used > 0 && suffix == name && value >= 0 && value * scale < 9e18)
      return static_cast<uint64_t>(value * scale);
  }
  EDGELM_FAIL(flag, ": '", text, "' is not a size (e.g. 1536KiB, 4MiB, 2MB)");
}

// A byte size flag (--budget-bytes, with ->transform): the text given becomes its count of bytes
// before CLI11 converts it, so that "6MiB" and "6291456" are the same value.
inline const CLI::Validator kByteSize(
    [](std::string& text) -> std::string {
      try {
        text = std::to_string(parse_byte_size(text, "size"));
      } catch (const Error&) {
        return "'" + text + "' is not a size (a byte count, or e.g. 1536KiB, 4MiB, 2MB)";
      }
      return {};
    },
    "");

// The comma-list parsers (core/parse_list.h), under the names the tools use.
using edgelm::kIdListSyntax;
using edgelm::parse_cpu_list;
using edgelm::parse_id_list;

// A dtype name that must be one of `allowed`; throws edgelm::Error naming `flag`.
inline DType parse_dtype(const std::string& text, const char* flag,
                         std::initializer_list<DType> allowed) {
  const auto dtype = dtype_from_name(text);
  std::string names;
  for (DType d : allowed) {
    if (dtype == d) return d;
    names += names.empty() ? dtype_name(d) : std::string("|") + dtype_name(d);
  }
  EDGELM_FAIL(flag, ": '", text, "' is not one of ", names);
}

// --weight-type: the types every matrix can be converted to on load (generate, bench, perplexity).
inline DType parse_weight_type(const std::string& text) {
  return parse_dtype(text, "--weight-type",
                     {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                      DType::Q5_1, DType::Q4_K, DType::Q5_K, DType::Q6_K});
}

}  // namespace edgelm::cli
