// The one flag table of the command-line tools: every flag that more than one tool takes, with its
// names (llama.cpp's spelling first, then edgelm's older names, which stay as aliases) and the one
// help text every tool's --help shows for it. A tool registers such a flag with cli::add_shared
// (cli_util.h), and parse_flags refuses a tool that declares one by hand with other names or
// another help, so "-c" is the same flag wherever it appears. What differs from tool to tool stays
// out of the help: the default, which the type column shows ("INT=512"), a list where a tool takes
// several values ("TEXT ..."), and the tool's own notes, in its footer. Flags that only one tool
// takes are declared in that tool.
//
// "{policies}" in a help text stands for the policy names (policy_list()).
#pragma once

namespace edgelm::cli::flag {

struct Flag {
  const char* names;  // CLI11's name list: "-n,--n-predict,--n-gen"
  const char* help;
};

// ---- the model and the text ----
inline constexpr Flag kModel = {"-m,--model,--model-path",
                                "Model: a Hugging Face folder or a .gguf file"};
inline constexpr Flag kPrompt = {"-p,--prompt", "Prompt text"};
inline constexpr Flag kFile = {"-f,--file",
                               "Read the text from this file: the prompt, or the text to score"};
inline constexpr Flag kPredict = {"-n,--n-predict,--n-gen", "Tokens to generate"};
inline constexpr Flag kNPrompt = {"--n-prompt",
                                  "Prompt length in tokens (of made-up ids)"};
inline constexpr Flag kCtxSize = {
    "-c,--ctx-size,--max-seq-len",
    "Context in tokens: the most positions one sequence takes (a conversation, or a window of a "
    "text); also the KV cache's slots unless an eviction limit sizes it"};
inline constexpr Flag kBatchSize = {"-b,--batch-size,--chunk",
                                    "Tokens per forward step over a prompt or a text (prefill)"};
inline constexpr Flag kSeed = {"-s,--seed",
                               "Seed of the run's random draws (sampling, weights, inputs, "
                               "bootstrap): the same seed repeats the run"};
inline constexpr Flag kAllowUnknownPreTokenizer = {
    "--allow-unknown-pre-tokenizer",
    "GGUF: use Llama 3's pre-tokenizer, with a warning, for an unknown tokenizer.ggml.pre"};

// ---- the backend and the weights ----
inline constexpr Flag kBackend = {
    "--backend",
    "Backend: cpu (the best kernel table of this CPU), cpu:<isa> (one table: cpu:portable, "
    "cpu:avx2, cpu:avx512, cpu:neon, ...), opencl"};
inline constexpr Flag kThreads = {
    "-t,--threads",
    "CPU threads (0: the big cores, pinned, on a CPU with slower cores such as a phone's; else "
    "one per hardware thread)"};
inline constexpr Flag kCpus = {
    "--cpus", "Pin CPU thread i to the i-th CPU of this list, e.g. 4-7 (a phone's big cores)"};
inline constexpr Flag kWeightType = {
    "--weight-type",
    "Convert every matrix on load: f32|f16|q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k|q6_k (default: each "
    "as stored; a conversion rounds the file's values again)"};
inline constexpr Flag kNoRepack = {
    "--no-repack",
    "Multiply weights as stored instead of in the backend's faster layout (the CPU's Q4_0, Q8_0 "
    "and F16 with rows interleaved: the same values)"};
inline constexpr Flag kListDevices = {"--list-devices",
                                      "List the OpenCL platforms and devices, then exit"};
inline constexpr Flag kClPlatform = {"--cl-platform",
                                     "OpenCL platform index (default: the first with a GPU)"};
inline constexpr Flag kClDevice = {
    "--cl-device", "OpenCL device index within the platform (default: its first GPU)"};
inline constexpr Flag kProfile = {
    "--profile",
    "Print time per op and kernel for prefill and decode: device time on OpenCL, each op call's "
    "wall time on the CPU (with weight GB/s for matmuls)"};
inline constexpr Flag kProfileOut = {
    "--profile-out",
    "Also write the profile as CSV (phase,op,kernel,calls,total_ms,bytes); implies --profile"};

// ---- the KV cache and eviction ----
inline constexpr Flag kKvType = {"--kv-type", "KV cache type: f32|f16 (default f16)"};
inline constexpr Flag kEvictionPolicy = {"--eviction-policy", "KV eviction: {policies}"};
inline constexpr Flag kPolicies = {"--policies", "Comma-separated eviction policies, of {policies}"};
inline constexpr Flag kKvBudget = {"--kv-budget",
                                   "Most KV slots per layer and kv head (needed by snapkv, h2o, "
                                   "tova); the cache allocates this, not -c"};
inline constexpr Flag kBudgetBytes = {
    "--budget-bytes",
    "The KV budget in bytes of K and V over all layers (a count, or a size such as 1.5MiB or "
    "6MB) instead of in slots: rounded down to whole slots"};
inline constexpr Flag kKvCapacity = {
    "--kv-capacity",
    "KV slots to allocate (default: the eviction limit, plus one prefill step for snapkv; -c "
    "without a limit); a snapkv cache that holds the whole prompt compresses it in one shot"};
inline constexpr Flag kEvictionWindow = {
    "--eviction-window",
    "Recent tokens kept (sliding, sink, h2o); unset: what the budget leaves (budget - sinks, "
    "budget - prefix, budget/2 for h2o), or 512 without a budget"};
inline constexpr Flag kProtectedPrefix = {"--protected-prefix",
                                          "sliding: first tokens always kept"};
inline constexpr Flag kSinkTokens = {
    "--sink-tokens",
    "Attention-sink tokens, the first positions always kept (sink, snapkv, expected_attention, "
    "--protect sinks); unset: budget/64 in [1, 4] with a budget, else 4"};
inline constexpr Flag kMemoryThresholdMb = {"--memory-threshold-mb",
                                            "Evict while available memory is below this (MiB)"};
inline constexpr Flag kPressureFloor = {
    "--pressure-floor",
    "Slots memory pressure never cuts the cache below (default: what the policy always keeps + "
    "16 recent + one prefill step)"};
inline constexpr Flag kSnapkvWindow = {
    "--snapkv-window", "snapkv: last prompt queries that score the prompt (its observation window)"};
inline constexpr Flag kSnapkvKernel = {"--snapkv-kernel",
                                       "snapkv: pooling kernel over slots (odd)"};
inline constexpr Flag kSnapkvPool = {"--snapkv-pool", "snapkv: max|avg pooling"};
inline constexpr Flag kSimulateMemory = {
    "--simulate-memory",
    "Replace /proc/meminfo with a scripted curve step:MiB,... (e.g. 0:4000,200:100)"};
inline constexpr Flag kEvictionSeed = {"--eviction-seed", "random: seed of the kept subset"};
inline constexpr Flag kEaFuturePositions = {
    "--ea-future-positions",
    "expected_attention: future positions the query statistics are rotated to (default 512)"};
inline constexpr Flag kEaCovariance = {
    "--ea-covariance",
    "expected_attention: include the query covariance term (on|off, default on)"};
inline constexpr Flag kEaEpsilon = {
    "--ea-epsilon",
    "expected_attention: added to the expected attention before the value-norm weight (default 0)"};
inline constexpr Flag kProtect = {
    "--protect",
    "Keep these out of any policy's competition, within its limit: sinks,system,template (the "
    "first --sink-tokens, the system prompt, special tokens)"};
inline constexpr Flag kLayerBudget = {
    "--layer-budget",
    "uniform|pyramid: pyramid shares the budget out over the layers, more below (PyramidKV)"};
inline constexpr Flag kPyramidBeta = {"--pyramid-beta",
                                      "pyramid: bottom-to-top steepness (default 20; 1 is uniform)"};

// ---- generation ----
inline constexpr Flag kPromptIds = {
    "--prompt-ids",
    "Prompt as token ids, comma-separated decimal numbers without spaces, e.g. 1,2,3 (bypasses "
    "the tokenizer)"};
inline constexpr Flag kChat = {"--chat", "Wrap the prompt in the model's chat template"};
inline constexpr Flag kChatTemplate = {
    "--chat-template", "Chat template instead of the model's (a name of --list-chat-templates)"};
inline constexpr Flag kListChatTemplates = {"--list-chat-templates",
                                            "List the chat template names, then exit"};
inline constexpr Flag kSystem = {"--system", "System message for --chat / --interactive"};
inline constexpr Flag kNoThink = {
    "--no-think",
    "Answer without a reasoning block first, where the template has that switch (Qwen3's "
    "enable_thinking=false)"};
inline constexpr Flag kInteractive = {"-i,--interactive",
                                      "Multi-turn chat on stdin (/reset, /quit)"};
inline constexpr Flag kPrintIds = {"--print-ids", "Stream token ids instead of text"};
inline constexpr Flag kTemp = {"--temp,--temperature", "Sampling temperature (0: greedy)"};
inline constexpr Flag kTopK = {"--top-k", "Keep the k most likely tokens (0: off)"};
inline constexpr Flag kTopP = {"--top-p", "Nucleus sampling threshold (1: off)"};
inline constexpr Flag kMinP = {"--min-p",
                               "Drop tokens below min-p times the top probability (0: off)"};
inline constexpr Flag kRepeatPenalty = {"--repeat-penalty", "Repetition penalty (1: off)"};
inline constexpr Flag kRepeatLastN = {"--repeat-last-n",
                                      "Tokens the repetition penalty looks back at"};
inline constexpr Flag kGreedy = {"--greedy", "Always take the most likely token"};
inline constexpr Flag kIgnoreEos = {
    "--ignore-eos",
    "Generate exactly -n tokens: an end-of-sequence or end-of-turn token never ends the run (for "
    "benchmarks and long runs)"};
inline constexpr Flag kDumpLogits = {
    "--dump-logits",
    "Write float32 .npy [steps, vocab]: logits of the last prompt position and of every decode "
    "step"};
inline constexpr Flag kDumpKvPositions = {
    "--dump-kv-positions",
    "Write float32 .npy [layers, kv heads, slots]: the logical position each slot holds when "
    "prefill ends (-1: empty)"};

// ---- output ----
inline constexpr Flag kJson = {
    "--json",
    "Results as JSON, one object a line, the summary last: on stdout, or in FILE where the flag "
    "takes one"};
inline constexpr Flag kQuiet = {
    "-q,--quiet", "Print the results only, not the running output (streamed text, agreeing steps)"};
inline constexpr Flag kOutput = {"-o,--output", "Output format: md|json"};
inline constexpr Flag kList = {"--list",
                               "List what this tool can run (presets, or backends and cases), "
                               "then exit"};

// Every entry above: parse_flags checks each tool's flags against these.
inline constexpr const Flag* kTable[] = {
    &kModel,           &kPrompt,         &kFile,
    &kPredict,         &kNPrompt,        &kCtxSize,
    &kBatchSize,       &kSeed,           &kAllowUnknownPreTokenizer,
    &kBackend,         &kThreads,        &kCpus,
    &kWeightType,      &kNoRepack,       &kListDevices,
    &kClPlatform,      &kClDevice,       &kProfile,
    &kProfileOut,      &kKvType,         &kEvictionPolicy,
    &kPolicies,        &kKvBudget,       &kBudgetBytes,
    &kKvCapacity,      &kEvictionWindow, &kProtectedPrefix,
    &kSinkTokens,      &kMemoryThresholdMb, &kPressureFloor,
    &kSnapkvWindow,    &kSnapkvKernel,   &kSnapkvPool,
    &kSimulateMemory,  &kEvictionSeed,   &kEaFuturePositions,
    &kEaCovariance,    &kEaEpsilon,      &kProtect,
    &kLayerBudget,     &kPyramidBeta,    &kPromptIds,
    &kChat,            &kChatTemplate,   &kListChatTemplates,
    &kSystem,          &kNoThink,        &kInteractive,
    &kPrintIds,        &kTemp,           &kTopK,
    &kTopP,            &kMinP,           &kRepeatPenalty,
    &kRepeatLastN,     &kGreedy,         &kIgnoreEos,
    &kDumpLogits,      &kDumpKvPositions, &kJson,
    &kQuiet,           &kOutput,         &kList,
};

}  // namespace edgelm::cli::flag
