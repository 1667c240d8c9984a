#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets (fuzz/) into fuzz/corpus/<target>/.

Each seed is a small valid input (or one just past a rule) that reaches deep into its parser, so
that mutations start from inputs the parser accepts rather than from random bytes:

    fuzz_gguf            tiny Llama GGUF files (F32 and Q8_0 tensors, gpt2 and llama tokenizers,
                         GGUF v2 and v3), and one written by the `gguf` package when it is installed
    fuzz_safetensors     small .safetensors files (F32, F16, I32, metadata, empty tensors)
    fuzz_config          the config.json (and generation_config.json) of the HF test fixtures
    fuzz_tokenizer_json  tokenizer.json files: the gpt2-style test fixture and variants of the tiny
                         vocabulary with each pre-tokenizer, normalizer and post-processor kind
    fuzz_id_list         id and CPU lists, valid and not
    fuzz_chat_template   every template of tests/fixtures/chat with a short conversation

Regression inputs of fixed findings sit beside the seeds as regress-*.bin and are kept when the
seeds are rewritten. Regenerate (numpy; the output is the same on every run):

    python3 scripts/fuzz/make_seeds.py
"""

import json
import os
import shutil
import struct
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "fixtures"))
import tiny_model_bytes as tiny  # noqa: E402

import numpy as np  # noqa: E402

CORPUS = ROOT / "fuzz" / "corpus"
SMALL = tiny.Shape(vocab=48, hidden=8, ffn=16, layers=1, heads=2, kv_heads=1, context=32)
SMALL_Q8 = tiny.Shape(vocab=48, hidden=32, ffn=32, layers=1, heads=2, kv_heads=1, context=32)


def gguf_seeds():
    seeds = {"llama_f32.gguf": tiny.llama_gguf(SMALL).to_bytes(),
             "llama_q8_0.gguf": tiny.llama_gguf(SMALL_Q8, quant="q8_0").to_bytes()}
    v2 = tiny.llama_gguf(SMALL)
    v2.version = 2
    seeds["llama_v2.gguf"] = v2.to_bytes()
    untied = tiny.llama_gguf(SMALL)
    embedding = untied.tensor("token_embd.weight")
    untied.tensors.append(tiny.GgufTensor("output.weight", embedding.dims, tiny.GGML_F32,
                                          embedding.data))
    seeds["llama_untied.gguf"] = untied.to_bytes()
    # SentencePiece vocabulary (tokenizer.ggml.model llama): scores, byte tokens, an unknown token.
    sp = tiny.llama_gguf(SMALL)
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(16)] + \
        ["▁", "▁h", "he", "ll", "o", "▁w", "or", "ld", "h", "e", "l", "w", "r", "d", ",", "!",
         "▁t", "t", "i", "n", "▁a"]
    types = [2, 3, 3] + [6] * 16 + [1] * (len(pieces) - 19)
    sp.set("tokenizer.ggml.model", tiny.STRING, "llama")
    sp.remove("tokenizer.ggml.pre")
    sp.remove("tokenizer.ggml.merges")
    sp.set("tokenizer.ggml.tokens", tiny.ARRAY, (tiny.STRING, pieces))
    sp.set("tokenizer.ggml.token_type", tiny.ARRAY, (tiny.I32, types))
    sp.set("tokenizer.ggml.scores", tiny.ARRAY, (tiny.F32, [-float(i) for i in range(len(pieces))]))
    sp.set("tokenizer.ggml.unknown_token_id", tiny.U32, 0)
    sp.set("tokenizer.chat_template", tiny.STRING,
           (ROOT / "tests/fixtures/chat/llama2.jinja").read_text())
    seeds["llama_sentencepiece.gguf"] = sp.to_bytes()
    # Every metadata value type once, nested arrays included, and no tensors.
    kinds = tiny.Gguf()
    kinds.set("general.architecture", tiny.STRING, "llama")
    for i, (value_type, value) in enumerate([(tiny.U8, 7), (tiny.I8, -7), (tiny.U16, 700),
                                             (tiny.I16, -700), (tiny.U32, 70000),
                                             (tiny.I32, -70000), (tiny.F32, 0.5),
                                             (tiny.BOOL, True), (tiny.U64, 2**40),
                                             (tiny.I64, -2**40), (tiny.F64, 0.25)]):
        kinds.set(f"test.scalar{i}", value_type, value)
    kinds.set("test.nested", tiny.ARRAY, (tiny.ARRAY, [(tiny.U8, [1, 2]), (tiny.STRING, ["a"])]))
    seeds["metadata_types.gguf"] = kinds.to_bytes()
    gguf_package = gguf_package_seed()
    if gguf_package is not None:
        seeds["gguf_package.gguf"] = gguf_package
    return seeds


def gguf_package_seed():
    """The tiny model as the `gguf` package writes it (an independent writer), or None."""
    try:
        import gguf
    except ImportError:
        print("make_seeds: the gguf package is not installed; skipping its seed")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.gguf")
        writer = gguf.GGUFWriter(path, "llama")
        writer.add_block_count(SMALL.layers)
        writer.add_context_length(SMALL.context)
        writer.add_embedding_length(SMALL.hidden)
        writer.add_feed_forward_length(SMALL.ffn)
        writer.add_head_count(SMALL.heads)
        writer.add_head_count_kv(SMALL.kv_heads)
        writer.add_layer_norm_rms_eps(1e-5)
        writer.add_rope_freq_base(10000.0)
        tokens, merges, types = tiny.tiny_vocab(SMALL.vocab)
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("smollm")
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges(merges)
        writer.add_bos_token_id(1)
        writer.add_eos_token_id(2)
        writer.add_chat_template((ROOT / "tests/fixtures/chat/smollm2.jinja").read_text())
        for name, values in tiny.llama_weights(SMALL).items():
            writer.add_tensor(name, values)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return Path(path).read_bytes()


def safetensors_seeds():
    rng = np.random.default_rng(1)
    weights = tiny.hf_weights(SMALL)
    seeds = {"tiny_llama.safetensors": tiny.safetensors_bytes(weights, metadata={"format": "pt"})}
    mixed = {"a.f32": rng.standard_normal((3, 5)).astype(np.float32),
             "b.f16": rng.standard_normal((2, 7)).astype(np.float16),
             "c.i32": np.arange(6, dtype=np.int32).reshape(2, 3),
             "d.scalar": np.array(1.5, dtype=np.float32),
             "e.empty": np.zeros((0, 4), dtype=np.float32)}
    seeds["mixed_dtypes.safetensors"] = tiny.safetensors_bytes(mixed)
    seeds["empty.safetensors"] = tiny.safetensors_bytes({})

    def to_bf16(header):  # the same bytes read as BF16 (twice the elements)
        for entry in header.values():
            if isinstance(entry, dict) and entry.get("dtype") == "F32":
                entry["dtype"] = "BF16"
                entry["shape"] = entry["shape"][:-1] + [entry["shape"][-1] * 2] if entry["shape"] else [2]
    seeds["bf16.safetensors"] = tiny.safetensors_bytes(
        {"w": rng.standard_normal((2, 4)).astype(np.float32)}, header_override=to_bf16)
    return seeds


def config_seeds():
    seeds = {}
    for model in sorted((ROOT / "tests/fixtures/hf").iterdir()):
        config = (model / "config.json").read_bytes()
        seeds[f"{model.name}.json"] = config
        generation = model / "generation_config.json"
        if generation.exists():
            seeds[f"{model.name}_with_generation.bin"] = config + b"\0" + generation.read_bytes()
    seeds["tiny.json"] = json.dumps(tiny.hf_config(SMALL), indent=2).encode()
    return seeds


def tokenizer_json_seeds():
    seeds = {"gpt2-style.json": (ROOT / "tests/fixtures/tokenizer/gpt2-style.json").read_bytes()}
    base = tiny.hf_tokenizer_json(SMALL)
    seeds["tiny_byte_level.json"] = json.dumps(base).encode()
    llama3 = json.loads(json.dumps(base))
    llama3["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+"
                                               r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    llama3["post_processor"] = {"type": "TemplateProcessing",
                                "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                                           {"Sequence": {"id": "A", "type_id": 0}}],
                                "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                         {"Sequence": {"id": "B", "type_id": 1}}],
                                "special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [1],
                                                                     "tokens": ["<|im_start|>"]}}}
    seeds["tiny_split_template.json"] = json.dumps(llama3).encode()
    digits = json.loads(json.dumps(base))
    digits["normalizer"] = {"type": "NFC"}
    digits["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "Punctuation", "behavior": "Contiguous"},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}]}
    digits["model"]["ignore_merges"] = True
    digits["model"]["merges"] = [m.split(" ") for m in digits["model"]["merges"]]
    seeds["tiny_digits_nfc.json"] = json.dumps(digits).encode()
    return seeds


def id_list_seeds():
    lists = ["1,2,3", "0", "007,2147483647", "2147483648", "1,,2", "1,", "+1", " ", "0-3,6",
             "3-1", "4095", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16"]
    return {f"list{i:02d}.txt": text.encode() for i, text in enumerate(lists)}


def chat_template_seeds():
    conversation = b"\0".join([b"system", b"Be brief.", b"user", b"Hi there", b"assistant",
                               b"Hello! How can I help?", b"user", b"What is 2+2?"])
    seeds = {}
    for template in sorted((ROOT / "tests/fixtures/chat").glob("*.jinja")):
        seeds[template.stem + ".bin"] = (template.read_bytes() + b"\0<s>\0</s>\0" + conversation)
    return seeds


def main():
    targets = {"fuzz_gguf": gguf_seeds(), "fuzz_safetensors": safetensors_seeds(),
               "fuzz_config": config_seeds(), "fuzz_tokenizer_json": tokenizer_json_seeds(),
               "fuzz_id_list": id_list_seeds(), "fuzz_chat_template": chat_template_seeds()}
    for target, seeds in targets.items():
        folder = CORPUS / target
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.iterdir():
            if not old.name.startswith("regress-"):
                old.unlink()
        for name, data in sorted(seeds.items()):
            (folder / name).write_bytes(data)
        total = sum(len(d) for d in seeds.values())
        print(f"make_seeds: {target}: {len(seeds)} seeds, {total} bytes, largest "
              f"{max(len(d) for d in seeds.values())}")


if __name__ == "__main__":
    main()
