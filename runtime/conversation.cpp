#include "runtime/conversation.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "core/npy.h"
#include "core/process_stats.h"
#include "eviction/protect_policy.h"

namespace edgelm {
namespace {

// printf into a string, for the report lines whose numbers are printed as the tools always did.
__attribute__((format(printf, 1, 2))) std::string format(const char* pattern, ...) {
  va_list args;
  va_start(args, pattern);
  va_list again;
  va_copy(again, args);
  const int length = std::vsnprintf(nullptr, 0, pattern, args);
  va_end(args);
  std::string text(static_cast<size_t>(std::max(length, 0)) + 1, '\0');
  std::vsnprintf(text.data(), text.size(), pattern, again);
  va_end(again);
  text.pop_back();
  return text;
}

// The --protect classes in force: none without a policy.
unsigned protect_classes(const Runtime& runtime) {
  const EvictionConfig& eviction = runtime.settings().eviction;
  const unsigned protect = eviction.policy != "none" && !eviction.protect.empty()
                               ? parse_protect_classes(eviction.protect)
                               : 0;
  if ((protect & kProtectTemplate) != 0 && runtime.tokenizer() == nullptr) {
    EDGELM_FAIL(
        "--protect template needs the model's tokenizer, which knows the special "
        "tokens: ",
        runtime.tokenizer_error());
  }
  return protect;
}

}  // namespace

std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, const ChatTemplate* chat,
                                   const std::string& system, const std::string& text) {
  if (chat == nullptr) return tokenizer.encode(text);
  std::vector<ChatMessage> messages;
  if (!system.empty()) messages.push_back({"system", system});
  messages.push_back({"user", text});
  return tokenizer.encode(chat->render(messages, true), /*add_bos=*/false);
}

nlohmann::json session_summary(const std::string& model_path, const std::string& format,
                               DType kv_type, double load_s, const GenerationStats& stats,
                               CacheManager& manager, const CopyBytes& copies,
                               int64_t peak_rss_bytes, const Reply& reply) {
  return {
      {"model", model_path},
      {"format", format},
      {"kv_type", dtype_name(kv_type)},
      {"load_s", load_s},
      {"prompt_tokens", stats.prompt_tokens},
      {"generated_tokens", stats.generated_tokens},
      {"prefill_s", stats.prefill_seconds},
      {"decode_s", stats.decode_seconds},
      {"prefill_tok_s", stats.prefill_tok_s()},
      {"decode_tok_s", stats.decode_tok_s()},
      {"kv_bytes", stats.kv_bytes},
      {"kv_capacity", stats.kv_capacity},
      {"kv_context", stats.kv_context},
      {"kv_slots", stats.kv_slots},
      {"next_position", stats.next_position},
      {"eviction_policy", manager.policy().name()},
      {"evictions", stats.evictions},
      {"evicted_tokens", stats.evicted_tokens},
      {"eviction_s", stats.eviction_seconds},
      {"rss_bytes", resident_bytes()},
      {"peak_rss_bytes", peak_rss_bytes},
      {"host_device_copy_bytes", copies.at_end - copies.after_prefill},
      {"host_device_copy_bytes_prefill", copies.after_prefill - copies.load},
      {"host_device_copy_bytes_load", copies.load},
      {"stop", std::string(stop_reason_name(reply.stop))},
      {"tokens", reply.tokens},
  };
}

void write_kv_positions(const std::string& path, const KvCache& cache) {
  int64_t slots = 1;
  for (int64_t l = 0; l < cache.n_layers(); ++l) slots = std::max(slots, cache.size(l));
  const int64_t heads = cache.n_kv_heads();
  std::vector<float> values(static_cast<size_t>(cache.n_layers() * heads * slots), -1.0f);
  cache.backend().synchronize();
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    const KvCache::View view = cache.view(l);
    const auto* positions = view.kv_pos.data<int32_t>();  // [size, heads]
    for (int64_t s = 0; s < cache.size(l); ++s) {
      for (int64_t g = 0; g < heads; ++g)
        values[static_cast<size_t>((l * heads + g) * slots + s)] =
            static_cast<float>(positions[s * heads + g]);
    }
  }
  write_npy(path, {cache.n_layers(), heads, slots}, values.data());
}

Conversation::Conversation(Runtime& runtime, ConversationOptions options,
                           GenerationSession::Callbacks callbacks)
    : runtime_(runtime),
      options_(std::move(options)),
      protect_(protect_classes(runtime)),
      manager_(runtime.make_manager()),
      cache_(runtime.make_cache(manager_)) {
  const Settings& settings = runtime_.settings();
  const LlamaConfig& config = runtime_.model().config();
  const Tokenizer* tokenizer = runtime_.tokenizer();
  EDGELM_CHECK(tokenizer != nullptr || !options_.chat, "[conversation] a chat needs a tokenizer");
  options_.stream_text = options_.stream_text && tokenizer != nullptr;
  can_evict_ = manager_.policy().evicts();
  if (can_evict_ && settings.eviction.kv_budget >= settings.context) {
    log_warn("[eviction] --kv-budget ", settings.eviction.kv_budget, " is not below -c/--ctx-size ",
             settings.context, ": the context never fills it");
  }
  if (tokenizer == nullptr && !runtime_.tokenizer_error().empty()) {
    note(str_cat("note: no tokenizer (", runtime_.tokenizer_error(), "); printing token ids"));
  }
  // Transfers are counted per phase; on a zero-copy backend all of them stay at 0.
  Backend& backend = runtime_.backend();
  copies_.load = backend.host_device_copy_bytes();
  backend.reset_op_timings();
  note(runtime_.describe());
  // Positions past the length the model was trained for run, but may give poor text.
  if (options_.context_given && settings.context > config.max_position_embeddings) {
    log_warn("-c/--ctx-size ", settings.context, " is past the model's context of ",
             config.max_position_embeddings,
             " positions (the length it was trained for); the text may degrade past it");
  }

  GenerationSettings generation = options_.generation;
  generation.stop_ids = options_.chat
                            ? chat_stop_ids(*tokenizer, *options_.chat, config.eos_token_ids)
                            : config.eos_token_ids;
  if (!options_.dump_logits.empty()) {
    callbacks.on_logits = [this](std::span<const float> logits) {
      logit_rows_.insert(logit_rows_.end(), logits.begin(), logits.end());
    };
  }
  callbacks.on_reset = [this] { reset_managers(); };  // a new conversation: the policy starts over
  session_ = std::make_unique<GenerationSession>(
      runtime_.model(), cache_, &manager_, std::move(generation),
      options_.stream_text ? tokenizer : nullptr, std::move(callbacks));
  set_up_drafter();
  if (options_.chat) {
    const ChatTemplate& chat = *options_.chat;
    note(str_cat(
        "chat template: ", chat.name(),
        chat.has_thinking_switch()
            ? (chat.thinking() ? " (thinking on; --no-think turns it off)" : " (thinking off)")
            : ""));
    for (const std::string& text : chat.end_of_turn_texts()) {
      if (!tokenizer->token_id(text)) {
        log_warn("[chat] the template ends turns with '", text,
                 "', which is not a token of this model; it stops on its EOS ids only");
      }
    }
  }
  set_up_protection();
}

void Conversation::note(const std::string& text) const {
  if (options_.on_note) options_.on_note(text);
}

void Conversation::set_up_drafter() {
  if (options_.lookup_ngram > 0) {
    drafter_ = std::make_unique<PromptLookupDrafter>(
        PromptLookupDrafter::Options{.ngram_max = options_.lookup_ngram});
  } else if (!options_.draft_model.empty()) {
    // The draft model's cache under the same policy and budget in slots as the target's.
    Settings draft_settings = runtime_.settings();
    draft_settings.model_path = options_.draft_model;
    draft_settings.require_tokenizer = false;
    draft_settings.budget_bytes = 0;
    draft_runtime_ = Runtime::load(std::move(draft_settings));
    check_same_vocabulary(runtime_, runtime_.settings().model_path, *draft_runtime_,
                          options_.draft_model);
    draft_manager_ = draft_runtime_->make_manager();
    draft_cache_ = draft_runtime_->make_cache(*draft_manager_);
    // Drafts drawn as the target samples, from a seed of their own.
    SamplerConfig draft_sampling = options_.generation.sampling;
    draft_sampling.seed = draft_sampling.seed ^ 0x9E3779B97F4A7C15ull;
    drafter_ = std::make_unique<ModelDrafter>(draft_runtime_->model(), *draft_cache_,
                                              &*draft_manager_, draft_sampling);
  }
  if (drafter_) session_->set_drafter(drafter_.get(), options_.max_draft);
}

void Conversation::set_up_protection() {
  // --protect template: every special token of the vocabulary (the chat template's boundaries).
  if ((protect_ & kProtectTemplate) != 0) {
    const Tokenizer& tokenizer = *runtime_.tokenizer();
    for (int32_t id = 0; id < static_cast<int32_t>(tokenizer.vocab_size()); ++id) {
      if (tokenizer.is_special(id)) special_ids_.push_back(id);
    }
    if (special_ids_.empty()) {
      log_warn("[eviction] --protect template: the tokenizer has no special tokens");
    }
    manager_.tokens().set_special_ids(special_ids_);
    if (draft_manager_) draft_manager_->tokens().set_special_ids(special_ids_);
  }
  // --protect system: the tokens the first feed of a conversation shares with the rendering of
  // its system message alone.
  if ((protect_ & kProtectSystem) != 0) {
    EDGELM_CHECK(options_.chat.has_value(), "[conversation] --protect system needs a chat");
    system_prefix_ = ChatSession(*options_.chat, options_.system_prompt).system_prefix();
    if (system_prefix_.empty()) {
      log_warn(
          "[eviction] --protect system: the conversation has no system message that "
          "the ",
          std::string(options_.chat->name()),
          " template renders first; no position is protected as the system prompt");
    }
  }
}

void Conversation::reset_managers() {
  const bool protect_template = (protect_ & kProtectTemplate) != 0;
  manager_ = runtime_.make_manager();
  if (protect_template) manager_.tokens().set_special_ids(special_ids_);
  if (draft_manager_) {
    *draft_manager_ = draft_runtime_->make_manager();
    if (protect_template) draft_manager_->tokens().set_special_ids(special_ids_);
  }
}

void Conversation::declare_system_prompt(std::span<const int32_t> ids) {
  if (system_prefix_.empty()) return;
  const std::vector<int32_t> prefix_ids =
      runtime_.tokenizer()->encode(system_prefix_, /*add_bos=*/false);
  size_t n = 0;
  while (n < prefix_ids.size() && n < ids.size() && prefix_ids[n] == ids[n]) ++n;
  const int64_t start = cache_.next_position();
  const int64_t end = start + static_cast<int64_t>(n);
  manager_.tokens().set_system_prompt(start, end);
  if (draft_manager_) draft_manager_->tokens().set_system_prompt(start, end);
}

void Conversation::warn_reply_room(int64_t prompt_tokens) const {
  // A reply of n tokens takes n - 1 positions after its prompt's: an -n that the logical context
  // cannot hold stops early, so say so before the wait rather than after it.
  const int64_t context = runtime_.settings().context;
  const int64_t room = context - prompt_tokens + 1;
  const int64_t n_generate = session_->settings().max_tokens;
  if (n_generate <= room) return;
  log_warn("-n/--n-predict ", n_generate, " is more than the ", room,
           " tokens a reply can take after a ", prompt_tokens, "-token prompt in -c/--ctx-size ",
           context, " (model context ", runtime_.model().config().max_position_embeddings,
           "); the reply stops when the context is full");
}

bool Conversation::context_used_up() const {
  return cache_.next_position() >= cache_.max_positions();
}

std::vector<int32_t> Conversation::encode(const std::string& text) const {
  EDGELM_CHECK(runtime_.tokenizer() != nullptr, "[conversation] text needs a tokenizer");
  return encode_prompt(*runtime_.tokenizer(), options_.chat ? &*options_.chat : nullptr,
                       options_.system_prompt, text);
}

void Conversation::check_prompt(std::span<const int32_t> ids) const {
  // The session checks the same, in its own words; these name the flags to change.
  const int64_t vocab_size = runtime_.model().config().vocab_size;
  for (int32_t id : ids) {
    if (id >= vocab_size)
      EDGELM_FAIL("prompt: token id ", id, " is outside the vocabulary of ", vocab_size);
  }
  // A reply cut at -n leaves its last token for the next feed.
  const int64_t n = static_cast<int64_t>(ids.size()) + session_->pending_tokens();
  const int64_t context = runtime_.settings().context;
  if (!can_evict_ && n > cache_.free_slots()) {
    EDGELM_FAIL("prompt: ", n, " tokens do not fit: -c/--ctx-size ", context, " leaves ",
                cache_.free_slots(), " free slots (raise it or use --eviction-policy)");
  }
  const int64_t positions_left = context - cache_.next_position();
  if (n > positions_left) {
    EDGELM_FAIL("prompt: ", n, " tokens do not fit: the logical context, -c/--ctx-size ", context,
                ", leaves ", positions_left, " positions (raise it)");
  }
}

void Conversation::prefill(std::span<const int32_t> ids) {
  check_prompt(ids);
  warn_reply_room(static_cast<int64_t>(ids.size()));
  if (options_.chat) declare_system_prompt(ids);
  session_->prefill(ids);
  if (!options_.dump_kv_positions.empty()) write_kv_positions(options_.dump_kv_positions, cache_);
  Backend& backend = runtime_.backend();
  copies_.after_prefill = backend.host_device_copy_bytes();
  prefill_profile_ = backend.op_timings();
  backend.reset_op_timings();
}

Reply Conversation::reply() {
  Reply reply = session_->generate();
  if (reply.stop == StopReason::ContextFull && context_used_up()) {
    note(str_cat("stopped: the logical context of ", runtime_.settings().context,
                 " positions is used up; raise -c/--ctx-size"));
  } else if (reply.stop == StopReason::ContextFull) {
    note(str_cat("stopped: the KV cache is full (", cache_.capacity(),
                 " slots); raise -c/--ctx-size or use --eviction-policy"));
  }
  if (!options_.dump_logits.empty()) write_logits(options_.dump_logits);
  return reply;
}

void Conversation::finish() {
  runtime_.backend().synchronize();
  copies_.at_end = runtime_.backend().host_device_copy_bytes();
}

void Conversation::write_logits(const std::string& path) const {
  const int64_t vocab_size = runtime_.model().config().vocab_size;
  const auto rows = static_cast<int64_t>(logit_rows_.size() / static_cast<size_t>(vocab_size));
  write_npy(path, {rows, vocab_size}, logit_rows_.data());
}

void Conversation::start_chat() {
  EDGELM_CHECK(options_.chat.has_value(), "[conversation] a chat needs a chat template");
  chat_session_.emplace(*options_.chat, options_.system_prompt);
  warn_reply_room(1);
}

bool Conversation::chat_line(const std::string& line) {
  EDGELM_CHECK(chat_session_.has_value(), "[conversation] chat_line before start_chat");
  if (line == "/quit" || line == "/exit") return false;
  if (line == "/reset") {
    session_->reset();
    chat_session_->clear();
    note("(conversation cleared)");
    return true;
  }
  if (line.empty()) return true;
  // Only what the cache lacks; the whole conversation again where the template renders the
  // earlier turns differently now (ChatSession says so). A message that does not fit is not fed:
  // the conversation stays as it was, and the user chooses what to do.
  const Reply reply = session_->chat_turn(
      *chat_session_, *runtime_.tokenizer(), line,
      [&](std::span<const int32_t> ids, bool from_scratch) {
        if (from_scratch) {
          note(str_cat("(", options_.chat->name(),
                       " renders the conversation anew: prefilling all of it)"));
        }
        if (session_->history().empty()) declare_system_prompt(ids);  // a conversation's first
      });
  const int64_t context = runtime_.settings().context;
  const char* restart = can_evict_ ? "" : ", or restart with a larger -c/--ctx-size";
  if (reply.stop == StopReason::NoRoom) {
    note(str_cat("(the message needs ", reply.prompt_tokens, " positions and the context has ",
                 context - cache_.next_position(), " of ", context,
                 " left: /reset starts a new conversation", restart, ")"));
    return true;
  }
  // How full the context is, after each turn: what a chat user needs to see coming.
  const int64_t used = cache_.next_position();
  std::string status =
      str_cat("[", reply.tokens.size(), " tokens, ", stop_reason_name(reply.stop), "; context ",
              used, " of ", context, " positions used (", used * 100 / context, "%)");
  if (can_evict_ || cache_.capacity() < context) {
    status += str_cat("; cache ", cache_.size(0), " of ", cache_.capacity(), " slots");
  }
  note(status + "]");
  if (reply.stop == StopReason::ContextFull) {
    note(str_cat("(", context_used_up() ? "the context is full" : "the KV cache is full",
                 ": /reset starts a new conversation", restart, ")"));
  }
  return true;
}

std::string Conversation::speculative_line() const {
  if (!drafter_) return {};
  const GenerationStats stats = session_->stats();
  return format(
      "speculative (%s): drafted %lld, accepted %lld (%.1f %%), %.2f tokens per target step",
      drafter_->name().c_str(), static_cast<long long>(stats.drafted),
      static_cast<long long>(stats.accepted), 100.0 * stats.acceptance_rate(),
      stats.tokens_per_target_forward());
}

std::string Conversation::stats_line(int64_t peak_rss_bytes, const Reply& reply) const {
  const GenerationStats stats = session_->stats();
  const ModelInfo& info = runtime_.info();
  return format(
      "load %.3f s | prefill %lld tokens, %.2f tok/s | decode %lld steps, %.2f tok/s | "
      "weights %.2f MiB (%s) | KV cache %.2f MiB (%s, %lld slots, context %lld) | "
      "evictions %lld (%.3f s) | peak RSS %.1f MiB | stop: %s",
      info.load_seconds, static_cast<long long>(stats.prompt_tokens), stats.prefill_tok_s(),
      static_cast<long long>(stats.decode_steps), stats.decode_tok_s(),
      static_cast<double>(runtime_.model().weight_bytes()) / 1048576.0, info.weight_types.c_str(),
      static_cast<double>(stats.kv_bytes) / 1048576.0, dtype_name(runtime_.settings().kv_type),
      static_cast<long long>(stats.kv_capacity), static_cast<long long>(stats.kv_context),
      static_cast<long long>(stats.evictions), stats.eviction_seconds,
      static_cast<double>(peak_rss_bytes) / 1048576.0,
      std::string(stop_reason_name(reply.stop)).c_str());
}

void Conversation::log_eviction_summary() {
  // One line for the whole run, in place of the line per eviction (debug level).
  if (!manager_.policy().evicts() && manager_.evictions() == 0) return;
  const int64_t fallbacks = manager_.fallback_count();
  log_info("[eviction] ", manager_.policy().name(), ": ", manager_.evictions(), " evictions, ",
           manager_.evicted_tokens(), " tokens evicted, ",
           format("%.3f ms", manager_.eviction_seconds() * 1e3),
           manager_.released_bytes() > 0
               ? str_cat(", ", manager_.released_bytes(), " bytes given back")
               : std::string(),
           fallbacks > 0 ? str_cat(", fallbacks: ", fallbacks) : std::string());
}

nlohmann::json Conversation::summary(int64_t peak_rss_bytes, const Reply& reply) {
  const GenerationStats stats = session_->stats();
  const Settings& settings = runtime_.settings();
  const ModelInfo& info = runtime_.info();
  const LlamaModel& model = runtime_.model();
  nlohmann::json summary =
      session_summary(settings.model_path, info.format, settings.kv_type, info.load_seconds, stats,
                      manager_, copies_, peak_rss_bytes, reply);
  summary.update({
      {"backend", settings.backend},
      {"device", runtime_.backend().device()},
      {"weight_type", dtype_name(info.weight_type)},
      {"weight_types", info.weight_types},
      {"weight_layout", dtype_name(info.weight_layout)},
      {"kv_resident_bytes", stats.kv_resident_bytes},
      {"kv_budget", manager_.config().kv_budget},
      {"kv_used_bytes", stats.kv_used_bytes},
      {"protected_system_positions",
       manager_.tokens().system_end() - manager_.tokens().system_begin()},
      {"eviction_fallbacks", stats.eviction_fallbacks},
      {"eviction_fallback_kinds", manager_.fallbacks()},
      {"released_bytes", stats.released_bytes},
      {"rss_drop_bytes", stats.rss_drop_bytes},
      {"weight_bytes_per_token", model.weight_bytes_per_token()},
      {"weight_bytes", model.weight_bytes()},
  });
  if (settings.budget_bytes > 0) summary["kv_budget_bytes"] = settings.budget_bytes;
  if (drafter_) {
    summary.update({{"drafter", drafter_->name()},
                    {"drafted", stats.drafted},
                    {"accepted", stats.accepted},
                    {"acceptance_rate", stats.acceptance_rate()},
                    {"target_forwards", stats.target_forwards()},
                    {"tokens_per_target_forward", stats.tokens_per_target_forward()},
                    {"draft_seconds", stats.draft_seconds}});
  }
  if (options_.stream_text) summary["text"] = reply.text;
  return summary;
}

}  // namespace edgelm
