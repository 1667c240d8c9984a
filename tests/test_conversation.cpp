// Conversation, generate's loop over a Runtime, on make_model's tiny model: one prompt gives the
// reply a plain session gives and a report that says so; the chat's lines answer, reset and quit;
// a message that does not fit is refused with the numbers; a prompt that cannot be fed names the
// flag to change; prompt lookup keeps the greedy reply and reports its drafts; --protect system
// declares the system prompt's positions, and a reset starts the policy over; the dumps hold the
// cache's positions and every logits row.
#include "runtime/conversation.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/npy.h"
#include "models/chat.h"
#include "models/make_model.h"
#include "tests/temp_dir.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;

fs::path work_dir() {
  static const fs::path dir =
      fs::path(::testing::TempDir()) / ("edgelm_conversation_" + std::to_string(::getpid()));
  return dir;
}

// make_model's tiny preset as a GGUF file with its tokenizer (no chat template of its own).
const std::string& model_path() {
  static const std::string path = make_model({.preset = "tiny",
                                              .format = "gguf",
                                              .quant = DType::F32,
                                              .seed = 0,
                                              .out_dir = work_dir().string()});
  return path;
}

Settings tiny_settings(int64_t context = 128) {
  Settings settings;
  settings.model_path = model_path();
  settings.backend = "cpu:portable";
  settings.backend_options.n_threads = 1;
  settings.context = context;
  settings.max_chunk = 8;
  return settings;
}

ConversationOptions greedy(int64_t max_tokens, std::vector<std::string>* notes) {
  ConversationOptions options;
  options.generation.sampling.greedy = true;
  options.generation.max_tokens = max_tokens;
  options.on_note = [notes](std::string_view text) { notes->emplace_back(text); };
  return options;
}

// greedy() in a chat under the llama3 template.
ConversationOptions chat(int64_t max_tokens, std::vector<std::string>* notes) {
  ConversationOptions options = greedy(max_tokens, notes);
  options.chat = ChatTemplate::from_model_path(model_path(), "llama3");
  return options;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Conversation, OnePromptGivesThePlainSessionsReplyAndItsReport) {
  Runtime runtime = Runtime::load(tiny_settings());
  std::vector<std::string> notes;
  ConversationOptions options = greedy(6, &notes);
  options.generation.ignore_eos = true;
  Conversation conversation(runtime, options);
  ASSERT_FALSE(notes.empty());
  EXPECT_TRUE(notes[0].starts_with("model: " + model_path() + " (gguf; weights f32"));
  EXPECT_TRUE(contains(notes[0], "\nbackend: ")) << notes[0];
  EXPECT_TRUE(contains(notes[0], "\ntokenizer: ")) << notes[0];

  const std::vector<int32_t> ids = conversation.encode("Once upon a time");
  EXPECT_EQ(ids, runtime.tokenizer()->encode("Once upon a time"));
  conversation.prefill(ids);
  const Reply reply = conversation.reply();
  conversation.finish();
  EXPECT_EQ(reply.tokens.size(), 6u);

  CacheManager manager = runtime.make_manager();
  KvCache cache = runtime.make_cache(manager);
  GenerationSession plain(runtime.model(), cache, &manager,
                          {.sampling = {.greedy = true},
                           .max_tokens = 6,
                           .stop_ids = runtime.model().config().eos_token_ids,
                           .ignore_eos = true});
  plain.prefill(ids);
  EXPECT_EQ(reply.tokens, plain.generate().tokens);

  const std::string line = conversation.stats_line(1 << 20, reply);
  EXPECT_TRUE(contains(line, "prefill " + std::to_string(ids.size()) + " tokens")) << line;
  EXPECT_TRUE(contains(line, "peak RSS 1.0 MiB | stop: length")) << line;
  EXPECT_TRUE(conversation.speculative_line().empty());
  const nlohmann::json summary = conversation.summary(1 << 20, reply);
  EXPECT_EQ(summary["stop"], "length");
  EXPECT_EQ(summary["tokens"].get<std::vector<int32_t>>(), reply.tokens);
  EXPECT_EQ(summary["prompt_tokens"], static_cast<int64_t>(ids.size()));
  EXPECT_EQ(summary["generated_tokens"], 6);
  EXPECT_EQ(summary["backend"], "cpu:portable");
  EXPECT_EQ(summary["eviction_policy"], "none");
  EXPECT_EQ(summary["text"], reply.text);
  EXPECT_FALSE(summary.contains("drafter"));
  EXPECT_FALSE(summary.contains("kv_budget_bytes"));
}

TEST(Conversation, TheChatLinesAnswerResetAndQuit) {
  Runtime runtime = Runtime::load(tiny_settings(/*context=*/512));
  std::vector<std::string> notes;
  Conversation conversation(runtime, chat(4, &notes));
  EXPECT_EQ(notes.back(), "chat template: llama3");
  conversation.start_chat();

  notes.clear();
  ASSERT_TRUE(conversation.chat_line("Hello"));
  ASSERT_EQ(notes.size(), 1u);
  const int64_t used = conversation.cache().next_position();
  EXPECT_GT(used, 0);
  EXPECT_TRUE(notes[0].starts_with("["));
  EXPECT_TRUE(contains(notes[0], "; context " + std::to_string(used) + " of 512 positions used ("))
      << notes[0];
  EXPECT_FALSE(contains(notes[0], "; cache "));  // the whole context is cached

  EXPECT_TRUE(conversation.chat_line(""));  // nothing fed, nothing said
  EXPECT_EQ(notes.size(), 1u);
  EXPECT_EQ(conversation.cache().next_position(), used);

  EXPECT_TRUE(conversation.chat_line("/reset"));
  EXPECT_EQ(notes.back(), "(conversation cleared)");
  EXPECT_EQ(conversation.cache().next_position(), 0);
  EXPECT_TRUE(conversation.session().history().empty());

  EXPECT_FALSE(conversation.chat_line("/quit"));
  EXPECT_FALSE(conversation.chat_line("/exit"));
}

TEST(Conversation, AMessageThatDoesNotFitIsRefusedWithTheNumbers) {
  Runtime runtime = Runtime::load(tiny_settings(/*context=*/24));
  std::vector<std::string> notes;
  Conversation conversation(runtime, chat(4, &notes));
  conversation.start_chat();
  notes.clear();
  EXPECT_TRUE(conversation.chat_line(std::string(200, 'a')));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_TRUE(notes[0].starts_with("(the message needs ")) << notes[0];
  EXPECT_TRUE(contains(notes[0],
                       "positions and the context has 24 of 24 left: /reset starts a "
                       "new conversation, or restart with a larger -c/--ctx-size)"))
      << notes[0];
  EXPECT_EQ(conversation.cache().next_position(), 0);
}

TEST(Conversation, APromptThatCannotBeFedNamesTheFlagToChange) {
  Runtime runtime = Runtime::load(tiny_settings(/*context=*/16));
  std::vector<std::string> notes;
  Conversation conversation(runtime, greedy(4, &notes));
  const int32_t vocab = static_cast<int32_t>(runtime.model().config().vocab_size);
  EXPECT_TRUE(contains(error_of([&] {
                         conversation.check_prompt(std::vector<int32_t>{1, vocab});
                       }),
                       "prompt: token id " + std::to_string(vocab) + " is outside the vocabulary"));
  const std::vector<int32_t> long_prompt(17, 5);
  EXPECT_TRUE(contains(error_of([&] { conversation.prefill(long_prompt); }),
                       "prompt: 17 tokens do not fit: -c/--ctx-size 16 leaves 16 free slots"));
  EXPECT_EQ(conversation.cache().next_position(), 0);  // nothing fed
}

TEST(Conversation, PromptLookupKeepsTheGreedyReplyAndReportsItsDrafts) {
  Runtime runtime = Runtime::load(tiny_settings());
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7};
  auto reply_of = [&](int64_t lookup_ngram, nlohmann::json* summary) {
    std::vector<std::string> notes;
    ConversationOptions options = greedy(12, &notes);
    options.generation.ignore_eos = true;
    options.lookup_ngram = lookup_ngram;
    Conversation conversation(runtime, options);
    conversation.prefill(prompt);
    const Reply reply = conversation.reply();
    conversation.finish();
    *summary = conversation.summary(0, reply);
    if (lookup_ngram > 0) {
      EXPECT_TRUE(conversation.speculative_line().starts_with("speculative (lookup): drafted "));
    }
    return reply.tokens;
  };
  nlohmann::json plain, drafted;
  EXPECT_EQ(reply_of(3, &drafted), reply_of(0, &plain));
  EXPECT_EQ(drafted["drafter"], "lookup");
  EXPECT_GT(drafted["drafted"].get<int64_t>(), 0);
  EXPECT_FALSE(plain.contains("drafter"));
}

TEST(Conversation, ProtectSystemDeclaresTheSystemPromptAndAResetStartsThePolicyOver) {
  Settings settings = tiny_settings();
  settings.eviction.policy = "sink";
  settings.eviction.kv_budget = 48;
  settings.eviction.protect = "system";
  settings.context = 512;
  Runtime runtime = Runtime::load(settings);
  std::vector<std::string> notes;
  ConversationOptions options = chat(8, &notes);
  options.system_prompt = "Be brief.";
  Conversation conversation(runtime, options);
  conversation.start_chat();
  ASSERT_TRUE(conversation.chat_line("Tell me a story about a dragon"));
  const TokenRecord& tokens = conversation.manager().tokens();
  EXPECT_EQ(tokens.system_begin(), 0);
  EXPECT_GT(tokens.system_end(), 0);
  EXPECT_TRUE(contains(notes.back(), "; cache ")) << notes.back();  // a policy that evicts
  EXPECT_GT(conversation.summary(0, {})["protected_system_positions"].get<int64_t>(), 0);

  ASSERT_TRUE(conversation.chat_line("/reset"));
  EXPECT_EQ(conversation.manager().tokens().system_end(), 0);  // a fresh policy state
  EXPECT_EQ(conversation.manager().evictions(), 0);
}

TEST(Conversation, TheDumpsHoldTheCachesPositionsAndEveryLogitsRow) {
  Runtime runtime = Runtime::load(tiny_settings());
  std::vector<std::string> notes;
  ConversationOptions options = greedy(3, &notes);
  options.generation.ignore_eos = true;
  const testing::TempDir dir("edgelm_conversation_");
  options.dump_kv_positions = dir.file("positions.npy");
  options.dump_logits = dir.file("logits.npy");
  Conversation conversation(runtime, options);
  conversation.prefill(std::vector<int32_t>{5, 6, 7, 8, 9});
  conversation.reply();
  const LlamaConfig& config = runtime.model().config();
  const NpyArray positions = read_npy(options.dump_kv_positions);
  EXPECT_EQ(positions.shape, (std::vector<int64_t>{config.n_layers, config.n_kv_heads, 5}));
  EXPECT_EQ(positions.data[4], 4.0f);  // layer 0, kv head 0, slot 4
  const NpyArray logits = read_npy(options.dump_logits);
  // After the prompt and after each of the two reply tokens fed (the last one is not).
  EXPECT_EQ(logits.shape, (std::vector<int64_t>{3, config.vocab_size}));
}

}  // namespace
}  // namespace edgelm
