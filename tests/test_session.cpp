// GenerationSession: the generation loop on a tiny random-weight model. Replies stop at an EOS id,
// at an end-of-turn id of the chat template, at the reply length (exactly n tokens with
// --ignore-eos), and where a cache without eviction or the logical context has no room; a sink
// policy runs far past the cache's capacity; a conversation continued in the cache equals one
// prefill of all of it; the callbacks see exactly the tokens, text and logits of the reply.
#include "runtime/session.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "core/error.h"
#include "eviction/cache_manager.h"
#include "models/chat.h"
#include "models/loader.h"
#include "models/make_model.h"
#include "models/tokenizer.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;

cpu::CpuBackend& backend() {
  static cpu::CpuBackend cpu(cpu::CpuOptions{.n_threads = 2, .isa = "portable"});
  return cpu;
}

// make_model's tiny preset (320 tokens, the last eight special: 312 <|begin_of_text|>, 313
// <|end_of_text|>, 318 <|eom_id|>, 319 <|eot_id|>; EOS ids 313 and 319), seed 0, as a Hugging
// Face folder with its tokenizer. Prefill steps of 8 tokens, so longer prompts take several.
const std::string& model_path() {
  static const std::string path =
      make_model({.preset = "tiny",
                  .format = "hf",
                  .quant = DType::F32,
                  .seed = 0,
                  .out_dir = (fs::path(::testing::TempDir()) /
                              ("edgelm_session_" + std::to_string(::getpid())))
                                 .string()});
  return path;
}

LlamaModel& tiny_model() {
  static LlamaModel model = [] {
    LoadedModel loaded = load_llama(model_path(), backend());
    return LlamaModel(backend(), std::move(loaded.config), std::move(loaded.weights), 8);
  }();
  return model;
}

const Tokenizer& tiny_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_model_path(model_path());
  return tokenizer;
}

GenerationSettings greedy(int64_t max_tokens, std::vector<int32_t> stop_ids = {},
                          bool ignore_eos = false) {
  GenerationSettings settings;
  settings.sampling.greedy = true;
  settings.max_tokens = max_tokens;
  settings.stop_ids = std::move(stop_ids);
  settings.ignore_eos = ignore_eos;
  return settings;
}

// A reply after `prompt` on a fresh cache of `capacity` slots (logical context `context`).
Reply reply_after(const std::vector<int32_t>& prompt, GenerationSettings settings,
                  int64_t capacity = 256, int64_t context = 0) {
  KvCache cache = tiny_model().make_cache(capacity, DType::F32, context);
  GenerationSession session(tiny_model(), cache, nullptr, std::move(settings));
  session.prefill(prompt);
  return session.generate();
}

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// Index of the first token of `tokens` that is in `ids`; tokens.size() if none.
size_t first_of(const std::vector<int32_t>& tokens, const std::vector<int32_t>& ids) {
  size_t i = 0;
  while (i < tokens.size() && !contains(ids, tokens[i])) ++i;
  return i;
}

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> all;
  for (const std::vector<int32_t>& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float most = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    most = std::max(most, std::fabs(a[i] - b[i]));
  return most;
}

// Greedy decoding after 49,0 picks 127, then EOS 313 (found by trying prompts once; the
// generate_flags CLI test uses the same model and prompt). The test takes the stop from the free
// run, so it needs only that an EOS id comes within 8 tokens.
TEST(GenerationSession, StopsAtAnEosIdAndDoesNotFeedIt) {
  const std::vector<int32_t> prompt = {49, 0};
  const std::vector<int32_t> eos = tiny_model().config().eos_token_ids;
  const Reply free_run = reply_after(prompt, greedy(8));
  const size_t stop_at = first_of(free_run.tokens, eos);
  ASSERT_LT(stop_at, free_run.tokens.size()) << "the free run samples no EOS id";

  KvCache cache = tiny_model().make_cache(64, DType::F32);
  GenerationSession session(tiny_model(), cache, nullptr, greedy(8, eos));
  session.prefill(prompt);
  const Reply reply = session.generate();
  EXPECT_EQ(reply.stop, StopReason::Eos);
  EXPECT_EQ(stop_reason_name(reply.stop), "eos");
  EXPECT_EQ(reply.tokens,
            std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + stop_at));
  // The reply's tokens are in the cache, the stop id is not; the sampler's history has it.
  EXPECT_EQ(cache.next_position(), static_cast<int64_t>(prompt.size() + stop_at));
  EXPECT_EQ(session.pending_tokens(), 0);
  EXPECT_EQ(session.history().back(), free_run.tokens[stop_at]);
}

// Greedy decoding after 103,0 runs 314 48 127 63 17 and then samples <|eom_id|> (318), which ends
// a Llama 3 turn but is not an EOS id of the model (found by trying prompts once).
TEST(GenerationSession, StopsAtAnEndOfTurnIdOfTheChatTemplate) {
  const std::vector<int32_t> prompt = {103, 0};
  const std::vector<int32_t> eos = tiny_model().config().eos_token_ids;
  const ChatTemplate chat = ChatTemplate::from_model_path(model_path(), "llama3");
  const std::vector<int32_t> stop_ids = chat_stop_ids(tiny_tokenizer(), chat, eos);
  std::vector<int32_t> end_of_turn_only;  // the template's ids that are not EOS ids
  for (int32_t id : stop_ids) {
    if (!contains(eos, id)) end_of_turn_only.push_back(id);
  }
  ASSERT_FALSE(end_of_turn_only.empty());

  const Reply free_run = reply_after(prompt, greedy(10));
  const size_t stop_at = first_of(free_run.tokens, stop_ids);
  ASSERT_LT(stop_at, free_run.tokens.size()) << "the free run samples no stop id";
  ASSERT_TRUE(contains(end_of_turn_only, free_run.tokens[stop_at]))
      << "the free run's first stop id " << free_run.tokens[stop_at] << " is an EOS id";

  const Reply reply = reply_after(prompt, greedy(10, stop_ids));
  EXPECT_EQ(reply.stop, StopReason::Eos);
  EXPECT_EQ(reply.tokens,
            std::vector<int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + stop_at));
  // The EOS ids alone do not stop it there.
  const Reply eos_only = reply_after(prompt, greedy(10, eos));
  EXPECT_GT(eos_only.tokens.size(), stop_at);
}

TEST(GenerationSession, IgnoreEosGivesExactlyNTokensWithoutAStopId) {
  const std::vector<int32_t> prompt = {49, 0};
  const std::vector<int32_t> eos = tiny_model().config().eos_token_ids;
  ASSERT_EQ(reply_after(prompt, greedy(24, eos)).stop, StopReason::Eos);  // stops early without

  KvCache cache = tiny_model().make_cache(64, DType::F32);
  GenerationSession session(tiny_model(), cache, nullptr, greedy(24, eos, /*ignore_eos=*/true));
  session.prefill(prompt);
  const Reply reply = session.generate();
  EXPECT_EQ(reply.stop, StopReason::Length);
  EXPECT_EQ(reply.tokens.size(), 24u);
  for (int32_t id : eos) EXPECT_FALSE(contains(reply.tokens, id)) << id;
  // The last token waits for whatever comes next: 23 decode steps.
  EXPECT_EQ(session.pending_tokens(), 1);
  EXPECT_EQ(session.stats().decode_steps, 23);
  EXPECT_EQ(session.stats().generated_tokens, 24);
  EXPECT_EQ(session.stats().prompt_tokens, 2);
  EXPECT_EQ(cache.next_position(), 2 + 23);
}

TEST(GenerationSession, AFullCacheWithoutEvictionStopsTheReply) {
  const std::vector<int32_t> prompt = {1, 2, 3};
  KvCache cache = tiny_model().make_cache(10, DType::F32);
  GenerationSession session(tiny_model(), cache, nullptr, greedy(100, {}, true));
  session.prefill(prompt);
  const Reply reply = session.generate();
  EXPECT_EQ(reply.stop, StopReason::ContextFull);
  EXPECT_EQ(stop_reason_name(reply.stop), "context_full");
  // 7 tokens fill the 10 slots; the 8th is sampled but has no slot.
  EXPECT_EQ(reply.tokens.size(), 8u);
  EXPECT_EQ(cache.size(0), 10);
  EXPECT_EQ(session.pending_tokens(), 1);
  // A reply that continues it has no room either, and the next prompt does not fit.
  EXPECT_EQ(session.generate().stop, StopReason::ContextFull);
  EXPECT_THROW(session.prefill(prompt), Error);
  // After a reset the conversation starts over.
  session.reset();
  EXPECT_EQ(cache.next_position(), 0);
  EXPECT_EQ(session.pending_tokens(), 0);
  EXPECT_TRUE(session.history().empty());
  session.prefill(prompt);
  EXPECT_EQ(session.generate().tokens, reply.tokens);
}

TEST(GenerationSession, TheLogicalContextStopsTheReplyEvenWithRoomInTheCache) {
  KvCache cache = tiny_model().make_cache(64, DType::F32, /*max_positions=*/12);
  GenerationSession session(tiny_model(), cache, nullptr, greedy(100, {}, true));
  session.prefill(std::vector<int32_t>{1, 2, 3});
  const Reply reply = session.generate();
  EXPECT_EQ(reply.stop, StopReason::ContextFull);
  EXPECT_EQ(reply.tokens.size(), 10u);
  EXPECT_EQ(cache.next_position(), 12);
  EXPECT_GT(cache.free_slots(), 0);
}

TEST(GenerationSession, ASinkPolicyRunsFarPastTheCacheCapacity) {
  EvictionConfig config;
  config.policy = "sink";
  config.window = 8;
  config.sink_tokens = 4;
  CacheManager manager(config, make_policy(config));
  const int64_t context = 1024;
  const int64_t capacity =
      manager.capacity_for(context, tiny_model().max_chunk(), tiny_model().config().n_layers);
  ASSERT_EQ(capacity, 12);
  KvCache cache = tiny_model().make_cache(capacity, DType::F32, context);
  GenerationSession session(tiny_model(), cache, &manager, greedy(300, {}, true));
  session.prefill(std::vector<int32_t>{5, 6, 7, 8, 9, 10});
  const Reply reply = session.generate();
  EXPECT_EQ(reply.stop, StopReason::Length);
  EXPECT_EQ(reply.tokens.size(), 300u);
  EXPECT_EQ(cache.next_position(), 6 + 299);
  const GenerationStats stats = session.stats();
  EXPECT_GT(stats.evictions, 0);
  EXPECT_GE(stats.evicted_tokens, 6 + 299 - capacity);
  EXPECT_EQ(stats.kv_capacity, capacity);
  for (int64_t l = 0; l < cache.n_layers(); ++l) EXPECT_LE(cache.size(l), capacity);
  // The sinks stay, and so does the most recent token.
  std::vector<int32_t> kept;
  for (int64_t s = 0; s < cache.size(0); ++s) kept.push_back(cache.position(0, s, 0));
  for (int32_t p : {0, 1, 2, 3, 6 + 298}) EXPECT_TRUE(contains(kept, p)) << p;
}

// Feeding a prompt, a reply and the next prompt turn by turn leaves the cache as one prefill of
// their concatenation would (the reply's stop id excluded): the same logits, the same next reply.
// Once with a reply cut at its length (its last token is fed with the next prompt), once with a
// reply ended by a stop id.
TEST(GenerationSession, AContinuedConversationEqualsOnePrefillOfIt) {
  const std::vector<int32_t> eos = tiny_model().config().eos_token_ids;
  const std::vector<int32_t> second = {40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50};  // 2 steps
  for (const auto& [first, max_tokens] : {std::pair{std::vector<int32_t>{7, 8, 9, 10, 11}, 6},
                                          std::pair{std::vector<int32_t>{49, 0}, 8}}) {
    KvCache turns_cache = tiny_model().make_cache(128, DType::F32);
    GenerationSession turns(tiny_model(), turns_cache, nullptr, greedy(max_tokens, eos));
    turns.prefill(first);
    const Reply first_reply = turns.generate();
    const std::span<const float> turn_logits = turns.prefill(second);
    const std::vector<float> continued(turn_logits.begin(), turn_logits.end());
    const Reply second_reply = turns.generate();

    KvCache whole_cache = tiny_model().make_cache(128, DType::F32);
    GenerationSession whole(tiny_model(), whole_cache, nullptr, greedy(max_tokens, eos));
    const std::vector<int32_t> all = concat({first, first_reply.tokens, second});
    const std::span<const float> whole_logits = whole.prefill(all);
    // Prefill steps and decode steps add up the same products in other groupings: float noise.
    EXPECT_LT(max_abs_diff(continued, whole_logits), 1e-4f);
    EXPECT_EQ(whole.generate().tokens, second_reply.tokens);
    EXPECT_EQ(whole_cache.next_position(), turns_cache.next_position());
  }
}

// chat_turn feeds only what the cache lacks: the second turn's feed continues the first reply,
// and the logits after it are those of one prefill of the first feed, the first reply and it.
TEST(GenerationSession, AChatTurnFeedsWhatTheCacheLacks) {
  const ChatTemplate chat_template = ChatTemplate::from_model_path(model_path(), "llama3");
  const std::vector<int32_t> stop_ids =
      chat_stop_ids(tiny_tokenizer(), chat_template, tiny_model().config().eos_token_ids);
  KvCache cache = tiny_model().make_cache(256, DType::F32);
  int resets = 0;
  bool capture = false;
  std::vector<float> second_feed_logits;
  GenerationSession session(tiny_model(), cache, nullptr, greedy(5, stop_ids), &tiny_tokenizer(),
                            {.on_logits =
                                 [&](std::span<const float> logits) {
                                   if (capture)
                                     second_feed_logits.assign(logits.begin(), logits.end());
                                   capture = false;
                                 },
                             .on_reset = [&] { ++resets; }});
  ChatSession chat(chat_template);
  std::vector<std::vector<int32_t>> feeds;
  auto record = [&](std::span<const int32_t> ids, bool from_scratch) {
    EXPECT_FALSE(from_scratch);
    feeds.emplace_back(ids.begin(), ids.end());
    capture = feeds.size() == 2;
  };
  const Reply first = session.chat_turn(chat, tiny_tokenizer(), "Hello", record);
  session.chat_turn(chat, tiny_tokenizer(), "Again", record);
  ASSERT_EQ(feeds.size(), 2u);
  EXPECT_EQ(resets, 0);
  EXPECT_EQ(feeds[0],
            tiny_tokenizer().encode(
                chat_template.render(std::vector<ChatMessage>{{"user", "Hello"}}, true), false));
  ASSERT_EQ(chat.messages().size(), 4u);
  EXPECT_EQ(chat.messages()[1].content, tiny_tokenizer().decode(first.tokens));

  KvCache whole_cache = tiny_model().make_cache(256, DType::F32);
  GenerationSession whole(tiny_model(), whole_cache, nullptr, greedy(5, stop_ids));
  const std::span<const float> whole_logits =
      whole.prefill(concat({feeds[0], first.tokens, feeds[1]}));
  EXPECT_LT(max_abs_diff(second_feed_logits, whole_logits), 1e-4f);
}

// A template that renders earlier turns anew (Mistral v3 moves the system message to the last
// user turn) has chat_turn start over: the session resets and feeds the whole conversation.
TEST(GenerationSession, AChatTurnStartsOverWhereTheTemplateRendersAnew) {
  const ChatTemplate chat_template = ChatTemplate::from_model_path(model_path(), "mistral-v3");
  ASSERT_FALSE(chat_template.prefix_stable());
  KvCache cache = tiny_model().make_cache(512, DType::F32);
  int resets = 0;
  GenerationSession session(tiny_model(), cache, nullptr, greedy(4), &tiny_tokenizer(),
                            {.on_reset = [&] { ++resets; }});
  ChatSession chat(chat_template, "Be brief.");
  session.chat_turn(chat, tiny_tokenizer(), "Hello");
  bool started_over = false;
  std::vector<int32_t> fed;
  const Reply second = session.chat_turn(chat, tiny_tokenizer(), "Again",
                                         [&](std::span<const int32_t> ids, bool from_scratch) {
                                           started_over = from_scratch;
                                           fed.assign(ids.begin(), ids.end());
                                         });
  EXPECT_TRUE(started_over);
  EXPECT_EQ(resets, 1);
  // The whole conversation up to the second reply, into the emptied cache.
  const std::vector<ChatMessage> before_reply(chat.messages().begin(), chat.messages().end() - 1);
  EXPECT_EQ(fed, tiny_tokenizer().encode(chat_template.render(before_reply, true), false));
  EXPECT_EQ(std::vector<int32_t>(session.history().begin(),
                                 session.history().begin() + static_cast<int64_t>(fed.size())),
            fed);
  const int64_t reply_fed = static_cast<int64_t>(second.tokens.size()) - session.pending_tokens();
  EXPECT_EQ(cache.next_position(), static_cast<int64_t>(fed.size()) + reply_fed);
}

// A chat that outgrows its context: every turn that fits runs, the first one that does not is
// refused with NoRoom (nothing fed, the chat and the cache as they were) instead of an error, and
// after reset() + clear() the conversation starts over as in a fresh session.
TEST(GenerationSession, AChatTurnThatDoesNotFitIsRefusedAndTheChatStays) {
  const ChatTemplate chat_template = ChatTemplate::from_model_path(model_path(), "llama3");
  const std::vector<int32_t> stop_ids =
      chat_stop_ids(tiny_tokenizer(), chat_template, tiny_model().config().eos_token_ids);
  const int64_t context = 96;
  KvCache cache = tiny_model().make_cache(context, DType::F32);
  GenerationSession session(tiny_model(), cache, nullptr, greedy(6, stop_ids), &tiny_tokenizer());
  ChatSession chat(chat_template);
  const Reply first = session.chat_turn(chat, tiny_tokenizer(), "Hello there");
  ASSERT_NE(first.stop, StopReason::NoRoom);
  EXPECT_GT(first.prompt_tokens, 0);
  Reply reply = first;
  int turns = 1;
  while (reply.stop != StopReason::NoRoom && turns < 40) {
    reply = session.chat_turn(chat, tiny_tokenizer(), "And then what happened?");
    ++turns;
  }
  ASSERT_EQ(reply.stop, StopReason::NoRoom) << "no turn was refused in " << turns;
  EXPECT_GT(turns, 2);
  EXPECT_EQ(stop_reason_name(reply.stop), "no_room");
  EXPECT_TRUE(reply.tokens.empty());
  EXPECT_FALSE(session.fits(reply.prompt_tokens));
  EXPECT_GT(reply.prompt_tokens + session.pending_tokens(), context - cache.next_position());
  // Refused again, with nothing changed: the chat, the cache, the history.
  const size_t messages = chat.messages().size();
  const int64_t position = cache.next_position();
  const size_t history = session.history().size();
  const Reply again = session.chat_turn(chat, tiny_tokenizer(), "And then what happened?");
  EXPECT_EQ(again.stop, StopReason::NoRoom);
  EXPECT_EQ(chat.messages().size(), messages);
  EXPECT_EQ(messages % 2, 0u);  // whole turns: no user message without its reply
  EXPECT_EQ(cache.next_position(), position);
  EXPECT_EQ(session.history().size(), history);
  // /reset: the next turn is the first turn of a fresh session, token for token.
  session.reset();
  chat.clear();
  const Reply restarted = session.chat_turn(chat, tiny_tokenizer(), "Hello there");
  EXPECT_EQ(restarted.tokens, first.tokens);
  EXPECT_EQ(restarted.prompt_tokens, first.prompt_tokens);
}

// With a policy that evicts, the cache's capacity does not end a chat; only the logical context
// does, and then the turn is refused as without one.
TEST(GenerationSession, AChatWithEvictionRunsPastTheCacheUntilTheContextIsUsedUp) {
  const ChatTemplate chat_template = ChatTemplate::from_model_path(model_path(), "llama3");
  EvictionConfig config;
  config.policy = "sink";
  config.window = 16;
  config.sink_tokens = 4;
  CacheManager manager(config, make_policy(config));
  const int64_t context = 160;
  const int64_t capacity =
      manager.capacity_for(context, tiny_model().max_chunk(), tiny_model().config().n_layers);
  ASSERT_LT(capacity, 40);
  KvCache cache = tiny_model().make_cache(capacity, DType::F32, context);
  GenerationSession session(tiny_model(), cache, &manager, greedy(6, {}, true), &tiny_tokenizer());
  ChatSession chat(chat_template);
  Reply reply;
  int turns = 0;
  while (reply.stop != StopReason::NoRoom && turns < 40) {
    reply = session.chat_turn(chat, tiny_tokenizer(), "Tell me more.");
    ++turns;
    if (reply.stop != StopReason::NoRoom) {
      EXPECT_LE(cache.size(0), capacity);
    }
  }
  ASSERT_EQ(reply.stop, StopReason::NoRoom);
  EXPECT_GT(cache.next_position(), capacity);  // past the cache, by eviction
  EXPECT_GT(reply.prompt_tokens, context - cache.next_position() - session.pending_tokens());
  EXPECT_GT(session.stats().evictions, 0);
}

// The callbacks see exactly the reply: each token once, in order, the stop id never; texts whose
// concatenation is the reply's text and the tokens' decoding; one logits row after the prompt and
// one per decode step, the first being prefill()'s.
TEST(GenerationSession, TheCallbacksSeeExactlyTheReply) {
  const std::vector<int32_t> prompt = {103, 0};
  const ChatTemplate chat = ChatTemplate::from_model_path(model_path(), "llama3");
  const std::vector<int32_t> stop_ids =
      chat_stop_ids(tiny_tokenizer(), chat, tiny_model().config().eos_token_ids);
  std::vector<int32_t> streamed;
  std::string text;
  int reply_ends = 0;
  std::vector<std::vector<float>> rows;
  GenerationSession::Callbacks callbacks{
      .on_token =
          [&](int32_t token, std::string_view piece) {
            streamed.push_back(token);
            text += piece;
          },
      .on_reply_end =
          [&](std::string_view rest) {
            text += rest;
            ++reply_ends;
          },
      .on_logits =
          [&](std::span<const float> logits) { rows.emplace_back(logits.begin(), logits.end()); },
  };
  KvCache cache = tiny_model().make_cache(64, DType::F32);
  GenerationSession session(tiny_model(), cache, nullptr, greedy(10, stop_ids), &tiny_tokenizer(),
                            std::move(callbacks));
  const std::span<const float> prefill_logits = session.prefill(prompt);
  const std::vector<float> first_row(prefill_logits.begin(), prefill_logits.end());
  const Reply reply = session.generate();
  ASSERT_EQ(reply.stop, StopReason::Eos);
  ASSERT_FALSE(reply.tokens.empty());
  EXPECT_EQ(streamed, reply.tokens);
  EXPECT_EQ(reply_ends, 1);
  EXPECT_EQ(text, reply.text);
  EXPECT_EQ(text, tiny_tokenizer().decode(reply.tokens, /*skip_special=*/true));
  EXPECT_FALSE(text.empty());
  ASSERT_EQ(rows.size(), 1 + static_cast<size_t>(session.stats().decode_steps));
  EXPECT_EQ(rows.size(), 1 + reply.tokens.size());  // every token fed: the stop id followed
  EXPECT_EQ(rows[0], first_row);
  // Each row is what the next token was drawn from (greedy: its argmax).
  for (size_t i = 0; i < reply.tokens.size(); ++i) {
    EXPECT_EQ(std::max_element(rows[i].begin(), rows[i].end()) - rows[i].begin(), reply.tokens[i])
        << i;
  }

  // A reply cut at its length streams its last token too (fed only with what follows).
  streamed.clear();
  text.clear();
  session.prefill(std::vector<int32_t>{1, 2, 3});
  const Reply cut = session.generate();
  ASSERT_EQ(cut.stop, StopReason::Length);
  EXPECT_EQ(streamed, cut.tokens);
  EXPECT_EQ(text, cut.text);
  EXPECT_EQ(reply_ends, 2);
}

// Text held back at the end of a reply (a character whose bytes did not all come) is streamed by
// on_reply_end and kept in Reply::text. Sampled replies from the byte-level vocabulary, half of
// whose byte tokens are UTF-8 lead or continuation bytes, end inside a character often enough.
TEST(GenerationSession, TheTextHeldBackAtTheEndOfAReplyIsStreamed) {
  int held_back = 0;
  std::string text;
  GenerationSession::Callbacks callbacks{
      .on_token = [&](int32_t, std::string_view piece) { text += piece; },
      .on_reply_end =
          [&](std::string_view rest) {
            text += rest;
            if (!rest.empty()) ++held_back;
          },
  };
  GenerationSettings settings = greedy(6);
  settings.sampling = {.temperature = 1.5f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 7};
  KvCache cache = tiny_model().make_cache(1024, DType::F32);
  GenerationSession session(tiny_model(), cache, nullptr, settings, &tiny_tokenizer(),
                            std::move(callbacks));
  for (int i = 0; i < 40; ++i) {
    text.clear();
    session.reset();
    session.prefill(std::vector<int32_t>{static_cast<int32_t>(60 + i), 0});
    const Reply reply = session.generate();
    EXPECT_EQ(text, reply.text) << i;
    EXPECT_EQ(reply.text, tiny_tokenizer().decode(reply.tokens, /*skip_special=*/true)) << i;
  }
  EXPECT_GT(held_back, 0) << "no reply ended inside a character: the test checks nothing";
}

// No reply at all with max_tokens 0: nothing sampled, nothing fed.
TEST(GenerationSession, ZeroMaxTokensGivesAnEmptyReply) {
  KvCache cache = tiny_model().make_cache(16, DType::F32);
  GenerationSession session(tiny_model(), cache, nullptr, greedy(0));
  session.prefill(std::vector<int32_t>{1, 2, 3});
  const Reply reply = session.generate();
  EXPECT_TRUE(reply.tokens.empty());
  EXPECT_EQ(reply.stop, StopReason::Length);
  EXPECT_EQ(session.history().size(), 3u);
  EXPECT_EQ(cache.next_position(), 3);
}

TEST(GenerationSession, RejectsBadInputWithAClearError) {
  KvCache cache = tiny_model().make_cache(16, DType::F32);
  GenerationSession session(tiny_model(), cache, nullptr, greedy(4));
  EXPECT_THROW(session.generate(), Error);  // nothing fed yet
  try {
    session.prefill(std::vector<int32_t>{1, 320});
    FAIL() << "an id outside the vocabulary was fed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[session] token id 320 is outside the vocabulary of 320"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(cache.next_position(), 0);
  try {
    session.prefill(std::vector<int32_t>(17, 1));
    FAIL() << "17 tokens went into 16 slots";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("17 tokens do not fit"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.next_position(), 0);
  GenerationSettings negative = greedy(-1);
  EXPECT_THROW(GenerationSession(tiny_model(), cache, nullptr, negative), Error);
}

}  // namespace
}  // namespace edgelm
