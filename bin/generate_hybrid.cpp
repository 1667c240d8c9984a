// generate_hybrid: generate's run (one prompt, one reply) with the CPU and OpenCL backends taking
// turns over the same weights and KV cache in OpenCL's shared memory, nothing copied between
// them: prefill on one and decode on the other, decode moving over at a KV length
// (--switch-threshold), alternating (--switch-every), measured then picked (--warmup-tokens), or
// moved to the CPU under memory pressure or while the GPU is busy (--switch-on-pressure). Every
// switch is logged with its cost; the stats line and --json add what ran where.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "backends/registry.h"
#include "bin/cli_util.h"
#include "bin/generate_flags.h"
#include "core/error.h"
#include "core/log.h"
#include "core/npy.h"
#include "core/process_stats.h"
#include "eviction/cache_manager.h"
#include "eviction/protect_policy.h"
#include "models/chat.h"
#include "models/tokenizer.h"
#include "runtime/conversation.h"
#include "runtime/hybrid.h"
#include "runtime/session.h"
#include "runtime/setup.h"

namespace {

using edgelm::HybridSide;

// The flags of generate that a hybrid run has no use for, and what to do instead.
void refuse_generate_only_flags(const CLI::App& app) {
  struct Refusal {
    const char* flag;
    const char* why;
  };
  static constexpr Refusal kRefused[] = {
      {"--backend",
       "a hybrid run names its two backends with --prefill-backend and "
       "--decode-backend"},
      {"--interactive", "generate_hybrid answers one prompt; use generate -i for a chat"},
      {"--profile", "op profiles are generate's (run it with --backend cpu or --backend opencl)"},
      {"--profile-out", "op profiles are generate's (run it with --backend cpu or opencl)"},
      {"--dump-kv-positions", "use generate --dump-kv-positions (positions are the same on both)"},
  };
  for (const Refusal& refusal : kRefused) {
    if (app.count(refusal.flag) > 0) EDGELM_FAIL(refusal.flag, ": ", refusal.why);
  }
}

nlohmann::json share_json(const edgelm::BackendShare& share) {
  return {{"prefill_tokens", share.prefill_tokens},
          {"prefill_steps", share.prefill_steps},
          {"decode_steps", share.decode_steps},
          {"prefill_s", share.prefill_seconds},
          {"decode_s", share.decode_seconds}};
}

int run(int argc, char** argv) {
  CLI::App app{
      "Generates text with the CPU and OpenCL backends taking turns over one copy of the weights "
      "and the KV cache (no copies between them)."};
  edgelm::cli::GenerateFlags f;
  edgelm::cli::add_generate_flags(app, f);
  std::string prefill_name = "opencl";
  std::string decode_name = "cpu";
  int64_t switch_threshold = 0;
  int64_t switch_every = 0;
  int64_t warmup_tokens = 0;
  bool switch_on_pressure = false;
  double switch_memory_mb = 0.0;
  std::string simulate_gpu_busy;
  std::string weight_sharing_text = "per-backend";
  app.add_option("--prefill-backend", prefill_name,
                 "Backend of the prompt's steps: opencl (default), cpu or cpu:<isa>");
  app.add_option("--decode-backend", decode_name,
                 "Backend of the reply's steps: cpu (default), cpu:<isa> or opencl; the other of "
                 "the two");
  app.add_option("--switch-threshold", switch_threshold,
                 "Decode stays on --prefill-backend while the KV cache holds fewer than N filled "
                 "slots before a step (physical slots, which eviction lowers; not positions) and "
                 "runs on --decode-backend from N on (default 0: from the first decode step)");
  app.add_option("--switch-every", switch_every,
                 "Alternate decode between the two backends every K steps, starting on "
                 "--decode-backend (0: off)");
  app.add_option("--warmup-tokens", warmup_tokens,
                 "Run N tokens of prefill and N of decode on each backend, alternating, then the "
                 "rest of each phase on the one with less time per token (0: off)");
  app.add_flag("--switch-on-pressure", switch_on_pressure,
               "Run on the CPU while available memory is below --switch-memory-mb or the GPU is "
               "busy (--simulate-gpu-busy)");
  app.add_option("--switch-memory-mb", switch_memory_mb,
                 "With --switch-on-pressure: the available memory (MiB; /proc/meminfo, or the "
                 "--simulate-memory curve) below which steps run on the CPU");
  app.add_option("--simulate-gpu-busy", simulate_gpu_busy,
                 "With --switch-on-pressure: a scripted GPU-busy signal step:0|1,... over forward "
                 "steps (e.g. 0:0,20:1,40:0: busy from step 20 to 39)");
  app.add_option("--hybrid-weights", weight_sharing_text,
                 "per-backend (default): the CPU also keeps its repacked copy of the matrices "
                 "OpenCL cannot read (each backend computes as it does alone; more memory); "
                 "shared: one copy in OpenCL's layouts, read by both");
  if (!edgelm::cli::parse_flags(app, argc, argv)) return 0;
  if (!edgelm::cli::apply_generate_flags(app, f)) return 0;
  // Everything that can be checked without the model, first.
  refuse_generate_only_flags(app);
  if (f.model_path.empty()) EDGELM_FAIL("-m/--model is required (a HF folder or a .gguf file)");
  const HybridSide prefill_side = edgelm::parse_hybrid_side(prefill_name, "--prefill-backend");
  const HybridSide decode_side = edgelm::parse_hybrid_side(decode_name, "--decode-backend");
  if (prefill_side == decode_side) {
    EDGELM_FAIL("--prefill-backend ", prefill_name, " and --decode-backend ", decode_name,
                " name the same backend: a hybrid run pairs the CPU with OpenCL (for one "
                "backend, use generate --backend ",
                prefill_name, ")");
  }
  const std::string cpu_name = prefill_side == HybridSide::Cpu ? prefill_name : decode_name;
  if (switch_threshold < 0) {
    EDGELM_FAIL("--switch-threshold ", switch_threshold,
                " is negative: give the filled KV slots from which decode runs on "
                "--decode-backend (0: from its first step)");
  }
  if (switch_every < 0)
    EDGELM_FAIL("--switch-every ", switch_every, " is negative: give decode steps (0: off)");
  if (warmup_tokens < 0)
    EDGELM_FAIL("--warmup-tokens ", warmup_tokens, " is negative: give tokens (0: off)");
  if (switch_threshold > 0 && switch_every > 0)
    EDGELM_FAIL("--switch-threshold and --switch-every are exclusive");
  if (warmup_tokens > 0 && (switch_threshold > 0 || switch_every > 0)) {
    EDGELM_FAIL(
        "--warmup-tokens picks the backends itself: it does not take --switch-threshold "
        "or --switch-every");
  }
  if (!switch_on_pressure && (app.count("--switch-memory-mb") > 0 || !simulate_gpu_busy.empty()))
    EDGELM_FAIL("--switch-memory-mb and --simulate-gpu-busy need --switch-on-pressure");
  if (switch_on_pressure && app.count("--switch-memory-mb") == 0 && simulate_gpu_busy.empty()) {
    EDGELM_FAIL(
        "--switch-on-pressure needs a signal: --switch-memory-mb MiB and/or "
        "--simulate-gpu-busy step:0|1,...");
  }
  if (switch_memory_mb < 0) EDGELM_FAIL("--switch-memory-mb ", switch_memory_mb, " is negative");
  const edgelm::WeightSharing sharing =
      edgelm::parse_weight_sharing(weight_sharing_text, "--hybrid-weights");
  std::vector<int> cpus;
  if (!f.cpu_list.empty()) cpus = edgelm::cli::parse_cpu_list(f.cpu_list, "--cpus");
  edgelm::cli::read_prompt_flags(app, f);
  if (f.prompt.empty() && f.prompt_ids_text.empty())
    EDGELM_FAIL("give a prompt with -p/--prompt TEXT, -f/--file FILE or --prompt-ids 1,2,3");
  if (f.chat && !f.prompt_ids_text.empty()) EDGELM_FAIL("--chat needs a text --prompt");
  if ((!f.chat_template_name.empty() || !f.system_prompt.empty() || f.no_think) && !f.chat)
    EDGELM_FAIL("--chat-template, --system and --no-think need --chat");
  std::optional<edgelm::ChatTemplate> chat_template;
  if (f.chat) {
    chat_template = edgelm::ChatTemplate::from_model_path(f.model_path, f.chat_template_name);
    if (f.no_think) chat_template->set_thinking(false);
  }
  std::vector<int32_t> prompt_ids;
  if (!f.prompt_ids_text.empty())
    prompt_ids = edgelm::cli::parse_id_list(f.prompt_ids_text, "--prompt-ids");
  const edgelm::DType kv_type = edgelm::cli::parse_dtype(f.kv_type_text, "--kv-type",
                                                         {edgelm::DType::F32, edgelm::DType::F16});
  std::optional<edgelm::DType> weight_type;
  if (!f.weight_type_text.empty()) weight_type = edgelm::cli::parse_weight_type(f.weight_type_text);
  if (app.count("--kv-budget") > 0 && f.eviction.kv_budget == 0)
    EDGELM_FAIL("--kv-budget 0 keeps nothing: give at least 1 slot (or leave the flag out)");
  if (app.count("--budget-bytes") > 0 && f.budget_bytes == 0)
    EDGELM_FAIL("--budget-bytes 0 keeps nothing: give the bytes K and V may take");
  if (f.eviction.policy != "none" && !f.eviction.protect.empty() &&
      (edgelm::parse_protect_classes(f.eviction.protect) & ~unsigned{edgelm::kProtectSinks}) != 0) {
    EDGELM_FAIL(
        "--protect: generate_hybrid protects sinks only; system and template are "
        "generate's (they need its chat bookkeeping)");
  }
  // The cache's settings, checked now; the budget in bytes becomes slots once the shape is known.
  edgelm::KvPlan plan({.max_chunk = f.chunk,
                       .kv_type = kv_type,
                       .context = f.max_seq_len,
                       .kv_capacity = f.kv_capacity,
                       .eviction = f.eviction,
                       .budget_bytes = f.budget_bytes,
                       .simulate_memory = f.simulate_memory});
  for (const std::string& flag : edgelm::eviction_flags()) {
    if (app.count(flag) > 0 && !edgelm::policy_reads(f.eviction, flag)) {
      edgelm::log_warn("[eviction] ", flag, " has no effect with --eviction-policy ",
                       f.eviction.policy);
    }
  }
  // Each poller gets a monitor of its own: the cache manager's and the switch's memory curves
  // advance one point per forward step each, so they stay in step.
  auto memory_monitor = [&]() -> std::unique_ptr<edgelm::SystemMonitor> {
    if (!f.simulate_memory.empty()) return edgelm::SimulatedMonitor::parse(f.simulate_memory);
    return std::make_unique<edgelm::LinuxSystemMonitor>();
  };
  std::unique_ptr<edgelm::SystemMonitor> gpu_busy;
  if (!simulate_gpu_busy.empty()) gpu_busy = edgelm::SimulatedMonitor::parse(simulate_gpu_busy);

  const edgelm::Stopwatch load_time;
  edgelm::HybridModel hybrid(f.model_path, {.cpu = cpu_name,
                                            .backend = {.n_threads = f.threads,
                                                        .cpus = cpus,
                                                        .cl_platform = f.cl_platform,
                                                        .cl_device = f.cl_device,
                                                        .repack_weights = !f.no_repack},
                                            .weights = sharing,
                                            .weight_type = weight_type,
                                            .max_chunk = f.chunk});
  const edgelm::LlamaConfig& config = hybrid.config();
  plan.resolve(config);
  f.eviction = plan.settings().eviction;  // the budget in slots, where it was given in bytes
  edgelm::CacheManager manager = plan.make_manager();
  const bool can_evict = manager.policy().evicts();
  const int64_t capacity = plan.capacity(manager);
  edgelm::KvCache cache = hybrid.make_cache(capacity, kv_type, f.max_seq_len);
  std::optional<edgelm::Tokenizer> tokenizer;
  if (!f.prompt.empty() || !f.print_ids) {
    try {
      tokenizer = edgelm::Tokenizer::from_model_path(f.model_path, f.tokenizer_options);
    } catch (const edgelm::Error& e) {
      if (!f.prompt.empty()) throw;
      std::fprintf(stderr, "note: no tokenizer (%s); printing token ids\n", e.what());
    }
  }
  for (HybridSide side : {HybridSide::OpenCl, HybridSide::Cpu}) hybrid.backend(side).synchronize();
  const double load_s = load_time.seconds();
  const uint64_t copy_bytes_load = hybrid.host_device_copy_bytes();
  std::fprintf(stderr, "model: %s (%s; weights %s, %s)\n%s\nbackends: %s | %s\n",
               f.model_path.c_str(), hybrid.format().c_str(), hybrid.weight_types().c_str(),
               edgelm::weight_sharing_name(sharing), config.describe().c_str(),
               hybrid.backend(HybridSide::Cpu).device().c_str(),
               hybrid.backend(HybridSide::OpenCl).device().c_str());

  // The schedule over the two backends: phases (with a threshold or an alternation) or the
  // warmup, under the pressure signals when asked.
  const edgelm::BackendNames names = edgelm::HybridModel::backend_names();
  const std::string prefill = edgelm::hybrid_side_name(prefill_side);
  const std::string decode = edgelm::hybrid_side_name(decode_side);
  edgelm::PhaseSchedule phases(names, {.prefill = prefill,
                                       .decode = decode,
                                       .switch_threshold = switch_threshold,
                                       .switch_every = switch_every});
  std::optional<edgelm::WarmupSchedule> warmup;
  if (warmup_tokens > 0) warmup.emplace(names, prefill, decode, warmup_tokens);
  edgelm::BackendSchedule& base = warmup ? static_cast<edgelm::BackendSchedule&>(*warmup) : phases;
  std::optional<edgelm::PressureSchedule> pressure;
  if (switch_on_pressure) {
    pressure.emplace(base, edgelm::hybrid_side_name(HybridSide::Cpu),
                     app.count("--switch-memory-mb") > 0 ? memory_monitor() : nullptr,
                     switch_memory_mb, std::move(gpu_busy));
  }
  edgelm::BackendSchedule& schedule =
      pressure ? static_cast<edgelm::BackendSchedule&>(*pressure) : base;
  std::fprintf(stderr, "schedule: %s\n", schedule.describe().c_str());
  edgelm::StepScheduler scheduler(hybrid.backends(), cache, schedule);
  const size_t cpu = scheduler.index_of(edgelm::hybrid_side_name(HybridSide::Cpu));
  const size_t opencl = scheduler.index_of(edgelm::hybrid_side_name(HybridSide::OpenCl));

  edgelm::GenerationSettings settings{.sampling = edgelm::cli::sampling_for(f, config),
                                      .max_tokens = f.n_generate,
                                      .stop_ids = config.eos_token_ids,
                                      .ignore_eos = f.ignore_eos};
  if (chat_template)
    settings.stop_ids = edgelm::chat_stop_ids(*tokenizer, *chat_template, config.eos_token_ids);
  const bool stream_text = tokenizer && !f.print_ids;
  std::vector<float> logit_rows;  // --dump-logits: [steps, vocab]
  edgelm::GenerationSession::Callbacks callbacks = edgelm::cli::printing_callbacks(f, stream_text);
  if (!f.dump_logits.empty()) {
    callbacks.on_logits = [&](std::span<const float> logits) {
      logit_rows.insert(logit_rows.end(), logits.begin(), logits.end());
    };
  }
  edgelm::GenerationSession session(hybrid.model(prefill_side), cache, &manager,
                                    std::move(settings), stream_text ? &*tokenizer : nullptr,
                                    std::move(callbacks));
  session.generator().set_router(&scheduler);

  if (!f.prompt.empty()) {
    prompt_ids = edgelm::encode_prompt(*tokenizer, chat_template ? &*chat_template : nullptr,
                                       f.system_prompt, f.prompt);
  }
  for (int32_t id : prompt_ids) {
    if (id >= config.vocab_size)
      EDGELM_FAIL("prompt: token id ", id, " is outside the vocabulary of ", config.vocab_size);
  }
  const auto n_prompt = static_cast<int64_t>(prompt_ids.size());
  if (!can_evict && n_prompt > cache.free_slots()) {
    EDGELM_FAIL("prompt: ", n_prompt, " tokens do not fit: -c/--ctx-size ", f.max_seq_len,
                " leaves ", cache.free_slots(), " free slots (raise it or use --eviction-policy)");
  }
  if (n_prompt > f.max_seq_len) {
    EDGELM_FAIL("prompt: ", n_prompt, " tokens do not fit: the logical context, -c/--ctx-size ",
                f.max_seq_len, ", leaves ", f.max_seq_len, " positions (raise it)");
  }
  session.prefill(prompt_ids);
  const uint64_t copy_bytes_after_prefill = hybrid.host_device_copy_bytes();
  const edgelm::Reply reply = session.generate();
  const std::string stop(edgelm::stop_reason_name(reply.stop));
  if (reply.stop == edgelm::StopReason::ContextFull) {
    std::fprintf(stderr,
                 "stopped: the KV cache or the logical context is full; raise "
                 "-c/--ctx-size or use --eviction-policy\n");
  }
  if (!f.dump_logits.empty()) {
    const auto rows =
        static_cast<int64_t>(logit_rows.size() / static_cast<size_t>(config.vocab_size));
    edgelm::write_npy(f.dump_logits, {rows, config.vocab_size}, logit_rows.data());
  }
  for (HybridSide side : {HybridSide::OpenCl, HybridSide::Cpu}) hybrid.backend(side).synchronize();
  const uint64_t copy_bytes_decode = hybrid.host_device_copy_bytes() - copy_bytes_after_prefill;
  const edgelm::GenerationStats stats = session.stats();
  const int64_t peak = edgelm::peak_resident_bytes();
  std::fprintf(stderr,
               "load %.3f s | prefill %lld tokens, %.2f tok/s | decode %lld steps, %.2f tok/s | "
               "KV cache %.2f MiB (%s, %lld slots, context %lld) | evictions %lld (%.3f s) | "
               "peak RSS %.1f MiB | stop: %s\n",
               load_s, static_cast<long long>(stats.prompt_tokens), stats.prefill_tok_s(),
               static_cast<long long>(stats.decode_steps), stats.decode_tok_s(),
               static_cast<double>(stats.kv_bytes) / 1048576.0, edgelm::dtype_name(kv_type),
               static_cast<long long>(stats.kv_capacity), static_cast<long long>(stats.kv_context),
               static_cast<long long>(stats.evictions), stats.eviction_seconds,
               static_cast<double>(peak) / 1048576.0, stop.c_str());
  const edgelm::BackendShare& on_cpu = scheduler.share(cpu);
  const edgelm::BackendShare& on_cl = scheduler.share(opencl);
  std::fprintf(stderr,
               "hybrid: cpu prefill %lld tokens (%.3f s), decode %lld steps (%.3f s) | opencl "
               "prefill %lld tokens (%.3f s), decode %lld steps (%.3f s) | %lld switches, %.1f us "
               "| weights %.2f MiB shared, %.2f MiB cpu-only | host<->device copies %llu bytes\n",
               static_cast<long long>(on_cpu.prefill_tokens), on_cpu.prefill_seconds,
               static_cast<long long>(on_cpu.decode_steps), on_cpu.decode_seconds,
               static_cast<long long>(on_cl.prefill_tokens), on_cl.prefill_seconds,
               static_cast<long long>(on_cl.decode_steps), on_cl.decode_seconds,
               static_cast<long long>(scheduler.switches()), scheduler.switch_seconds() * 1e6,
               static_cast<double>(hybrid.shared_weight_bytes()) / 1048576.0,
               static_cast<double>(hybrid.cpu_only_weight_bytes()) / 1048576.0,
               static_cast<unsigned long long>(hybrid.host_device_copy_bytes()));
  if (f.json) {
    nlohmann::json events = nlohmann::json::array();
    for (const edgelm::SwitchEvent& event : scheduler.events()) {
      events.push_back({{"step", event.step},
                        {"phase", event.phase == edgelm::Phase::Prefill ? "prefill" : "decode"},
                        {"kv_slots", event.kv_slots},
                        {"position", event.next_position},
                        {"from", scheduler.name(event.from)},
                        {"to", scheduler.name(event.to)},
                        {"reason", event.reason},
                        {"us", event.seconds * 1e6}});
    }
    nlohmann::json summary = edgelm::session_summary(
        f.model_path, hybrid.format(), kv_type, load_s, stats, manager,
        {copy_bytes_load, copy_bytes_after_prefill, copy_bytes_after_prefill + copy_bytes_decode},
        peak, reply);
    summary.update({
        {"backend", "hybrid"},
        {"prefill_backend", prefill_name},
        {"decode_backend", decode_name},
        {"schedule", schedule.describe()},
        {"switch_threshold", switch_threshold},
        {"switch_every", switch_every},
        {"warmup_tokens", warmup_tokens},
        {"device",
         {{"cpu", hybrid.backend(HybridSide::Cpu).device()},
          {"opencl", hybrid.backend(HybridSide::OpenCl).device()}}},
        {"weight_type", edgelm::dtype_name(hybrid.weight_type())},
        {"weight_types", hybrid.weight_types()},
        {"weight_sharing", edgelm::weight_sharing_name(sharing)},
        {"shared_weight_bytes", hybrid.shared_weight_bytes()},
        {"cpu_only_weight_bytes", hybrid.cpu_only_weight_bytes()},
        {"switches", scheduler.switches()},
        {"switch_s", scheduler.switch_seconds()},
        {"switch_events", events},
        {"backends", {{"cpu", share_json(on_cpu)}, {"opencl", share_json(on_cl)}}},
        {"pressure_steps", pressure ? pressure->pressure_steps() : 0},
    });
    if (warmup) {
      nlohmann::json measured;
      for (edgelm::Phase phase : {edgelm::Phase::Prefill, edgelm::Phase::Decode}) {
        const edgelm::WarmupSchedule::Measured& m = warmup->measured(phase);
        measured[phase == edgelm::Phase::Prefill ? "prefill" : "decode"] = {
            {"cpu_s_per_token", m.seconds_per_token(cpu)},
            {"opencl_s_per_token", m.seconds_per_token(opencl)},
            {"pick", m.pick ? warmup->name(*m.pick) : "undecided"}};
      }
      summary["warmup"] = measured;
    }
    if (stream_text) summary["text"] = reply.text;
    edgelm::cli::print_json_line(summary);
  }
  edgelm::cli::finish_stdout();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return edgelm::cli::run_tool("generate_hybrid", run, argc, argv);
}
