// Conversation: generate's loop over a loaded Runtime, for one prompt or an interactive chat. It
// owns what one conversation needs beside the model: the cache manager (its policy state started
// over on a reset) and the KV cache, a drafter (prompt lookup, or a draft model set up through
// Runtime::load like the target), the positions --protect keeps (the template's special tokens,
// the system prompt), the prompt's checks in terms of the flags to change, the chat's commands
// (/reset, /quit) and, for the tool to print, every note and report line: the model's
// description, each turn's context line, why a reply stopped, the stats line and the --json
// fields. The tool streams the reply through the session's callbacks and prints the notes.
//
//   Conversation conversation(runtime, {.generation = {.max_tokens = 32}, .on_note = print_line},
//                             {.on_token = print_token});
//   conversation.prefill(conversation.encode("Once upon a time"));
//   const Reply reply = conversation.reply();
//   conversation.finish();
//   print_line(conversation.stats_line(peak_resident_bytes(), reply));
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend.h"
#include "core/kv_cache.h"
#include "eviction/cache_manager.h"
#include "models/chat.h"
#include "models/tokenizer.h"
#include "runtime/session.h"
#include "runtime/setup.h"
#include "runtime/speculative.h"

namespace edgelm {

// The prompt as the model reads it: `text` in the chat template's user turn after `system` (when
// not empty), with the generation prompt, when a template is given; else `text` encoded with the
// tokenizer's BOS.
std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, const ChatTemplate* chat,
                                   const std::string& system, const std::string& text);

// Bytes moved between host and device, as the backend's counter read after loading, after the
// prompt and at the end.
struct CopyBytes {
  uint64_t load = 0;
  uint64_t after_prefill = 0;
  uint64_t at_end = 0;
};

// The --json fields that generate and generate_hybrid share: the session's counts and times, the
// cache and its eviction, memory, the host-device transfers of each phase, how the reply stopped
// and its token ids. Each tool adds its own (backend, weights, switches, ...).
nlohmann::json session_summary(const std::string& model_path, const std::string& format,
                               DType kv_type, double load_s, const GenerationStats& stats,
                               CacheManager& manager, const CopyBytes& copies,
                               int64_t peak_rss_bytes, const Reply& reply);

// --dump-kv-positions: the logical position of every (layer, kv head, slot), -1 past a layer's
// filled slots, as float32 .npy [layers, kv heads, slots] (exact below 2^24 positions).
void write_kv_positions(const std::string& path, const KvCache& cache);

struct ConversationOptions {
  // Sampling, the reply length and ignore_eos; the stop ids are set from the model (its EOS ids)
  // or, with a chat template, from the template's end-of-turn tokens too (chat_stop_ids).
  GenerationSettings generation;
  // The chat template (--chat, --interactive; it needs the tokenizer) and the system message.
  std::optional<ChatTemplate> chat;
  std::string system_prompt;
  // Replies as text (false: token ids only, --print-ids, or a model without a tokenizer).
  bool stream_text = true;
  // Files written on the way (empty: none): after the prompt, the cache's positions
  // (write_kv_positions, --dump-kv-positions); after the reply, every logits row the sampler drew
  // from, float32 .npy [rows, vocab] (--dump-logits).
  std::string dump_kv_positions;
  std::string dump_logits;
  // -c/--ctx-size was given: warn when it is past the model's trained context.
  bool context_given = false;
  // Speculative decoding: prompt lookup of n-grams up to lookup_ngram (0: none), or the draft
  // model at draft_model (empty: none), at most max_draft drafts per target step.
  int64_t lookup_ngram = 0;
  std::string draft_model;
  int64_t max_draft = 4;
  // Each note for the user, one or more lines without the final newline (generate: stderr).
  std::function<void(std::string_view)> on_note;
};

class Conversation {
 public:
  // Sets up the conversation over `runtime` (which must outlive it): the cache manager and the
  // cache, the session with `callbacks` (on_logits and on_reset are the conversation's own), the
  // drafter, the protected positions. Notes, in this order: the tokenizer's absence, the
  // model's description, the chat template. Warns (log_warn) where a setting cannot do what it
  // says. Throws edgelm::Error for a draft model with another vocabulary, or a --protect class
  // the model cannot serve.
  Conversation(Runtime& runtime, ConversationOptions options,
               GenerationSession::Callbacks callbacks = {});
  Conversation(const Conversation&) = delete;
  Conversation& operator=(const Conversation&) = delete;

  // `text` as the prompt (encode_prompt, with the template and the system message when given).
  std::vector<int32_t> encode(const std::string& text) const;
  // Throws edgelm::Error "prompt: ..." naming the flag to change when `ids` cannot be fed now: an
  // id outside the vocabulary, more tokens than the cache (without eviction) or the logical
  // context has room for.
  void check_prompt(std::span<const int32_t> ids) const;
  // Feeds a prompt: checks it, warns when -n cannot fit after it, declares the system prompt's
  // positions (--protect system), prefills, writes dump_kv_positions, and takes the counters
  // after it (copy bytes, the ops' timings, which then start over).
  void prefill(std::span<const int32_t> ids);
  // Generates the reply to what was fed; notes why it stopped when the context or cache is full;
  // writes dump_logits.
  Reply reply();
  // Waits for the backend and reads the transfer counter at the end (after the last reply).
  void finish();

  // The interactive chat: warns when -n cannot fit after a one-token message; then each line of
  // input through chat_line.
  void start_chat();
  // One line of the interactive chat: "/quit" or "/exit" ends it (false); "/reset" starts a new
  // conversation; an empty line does nothing; anything else is a message, answered in the cache
  // (GenerationSession::chat_turn), with a note of how full the context is then, or why the
  // message was not fed.
  bool chat_line(const std::string& line);

  // The run's report. The stats line: load, prefill and decode speeds, weights, the KV cache,
  // evictions, peak memory, why `reply` stopped.
  std::string stats_line(int64_t peak_rss_bytes, const Reply& reply) const;
  // With a drafter, its line: drafted, accepted, tokens per target step; else empty.
  std::string speculative_line() const;
  // Logs one line for the run's evictions (info level), when the policy evicts or evicted.
  void log_eviction_summary();
  // generate's --json object: session_summary and generate's own fields (backend, weights, the
  // budget, protection, speculative decoding, the reply's text when streamed).
  nlohmann::json summary(int64_t peak_rss_bytes, const Reply& reply);
  // The ops' timings of the prompt (Backend::op_timings, taken by prefill()).
  const std::vector<OpTiming>& prefill_profile() const { return prefill_profile_; }

  GenerationSession& session() { return *session_; }
  CacheManager& manager() { return manager_; }
  KvCache& cache() { return cache_; }
  const Drafter* drafter() const { return drafter_.get(); }

 private:
  void note(const std::string& text) const;
  // A fresh policy state for a new conversation, for the target and the draft model.
  void reset_managers();
  // --protect system: the positions of the first feed `ids` that render the system message.
  void declare_system_prompt(std::span<const int32_t> ids);
  // A warning when -n cannot fit after `prompt_tokens` in the logical context.
  void warn_reply_room(int64_t prompt_tokens) const;
  void set_up_drafter();
  void set_up_protection();
  bool context_used_up() const;
  void write_logits(const std::string& path) const;

  Runtime& runtime_;
  ConversationOptions options_;
  unsigned protect_ = 0;  // ProtectClass bits
  CacheManager manager_;
  bool can_evict_ = false;
  KvCache cache_;
  std::vector<int32_t> special_ids_;  // --protect template
  std::string system_prefix_;         // --protect system
  std::vector<float> logit_rows_;     // dump_logits: [rows, vocab]
  std::optional<Runtime> draft_runtime_;
  std::optional<CacheManager> draft_manager_;
  std::optional<KvCache> draft_cache_;
  std::unique_ptr<Drafter> drafter_;
  std::unique_ptr<GenerationSession> session_;
  std::optional<ChatSession> chat_session_;
  CopyBytes copies_;
  std::vector<OpTiming> prefill_profile_;
};

}  // namespace edgelm
