// The two ways a tokenizer is loaded: a Hugging Face tokenizer.json and the tokenizer keys of a
// GGUF file. Each fills every component of Tokenizer::Impl (pipeline.h) and ends with
// finish_loading(); Tokenizer::from_hf_json and from_gguf document what each accepts.
#pragma once

#include <memory>
#include <string>

#include "models/tokenizer.h"

namespace edgelm::tokenizer {

// Throws edgelm::Error "[tokenizer] <path>: <field>: <what>" for anything malformed or
// unsupported.
std::shared_ptr<Tokenizer::Impl> load_hf_json(const std::string& path);

// Throws edgelm::Error "[tokenizer] <file>: <key> ..." naming the key, and for an unknown
// tokenizer.ggml.pre unless `options` allow it.
std::shared_ptr<Tokenizer::Impl> load_gguf(const GgufFile& file, const TokenizerOptions& options);

}  // namespace edgelm::tokenizer
