#!/usr/bin/env python3
"""SnapKV on a prompt longer than its cache against one-shot SnapKV, on a planted passkey.

For each depth, a passkey sentence is planted at that depth of a filler text, the question follows
the text, and the whole is wrapped in SmolLM2's ChatML turn (its default system message). Then
`generate` answers it greedily three times over the same prompt ids:

  full      no eviction (the whole prompt in the cache);
  one-shot  SnapKV with --kv-budget B in a cache that holds the whole prompt (--kv-capacity = -c),
            compressed once when prefill ends, by the prompt's last window;
  chunked   SnapKV with --kv-budget B in the cache it allocates by default, B + one prefill step,
            so the prompt streams through it and is compressed chunk by chunk.

It prints, per depth: whether each answer contains the passkey; how many of the one-shot run's
kept slots the chunked run kept too (over every layer and kv head, from --dump-kv-positions at the
end of prefill); and in how many (layer, kv head) pairs each SnapKV run kept every token of the
passkey. --json writes the same rows to a file.

Usage:
  scripts/snapkv_needle.py --bin build/bin -m SmolLM2-135M-Instruct.Q4_1.gguf \\
      --filler alice29.txt [--budget 256] [--filler-bytes 7000] [--depths 0.1,0.3,0.5,0.7,0.9]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
QUESTION = "\n\nWhat is the pass key? Answer with the number only."


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command[:3])} ...: exit {result.returncode}\n{result.stderr[-2000:]}")
    return result.stdout


def planted_prompt(filler, depth, key):
    """The user message: the filler with the passkey sentence at a line break near `depth`."""
    cut = filler.find("\n", int(len(filler) * depth))
    cut = len(filler) if cut < 0 else cut + 1
    needle = f"The pass key is {key}. Remember it. {key} is the pass key.\n"
    message = filler[:cut] + needle + filler[cut:] + QUESTION
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{message}<|im_end|>\n"
            "<|im_start|>assistant\n")


def find(ids, pattern):
    for i in range(len(ids) - len(pattern) + 1):
        if ids[i:i + len(pattern)] == pattern:
            return i
    return -1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", required=True, help="folder with generate and tokenize")
    parser.add_argument("-m", "--model", required=True)
    parser.add_argument("--filler", required=True, help="a plain text file (e.g. alice29.txt)")
    parser.add_argument("--filler-bytes", type=int, default=7000, help="bytes of filler used")
    parser.add_argument("--budget", type=int, default=256)
    parser.add_argument("--depths", default="0.1,0.3,0.5,0.7,0.9")
    parser.add_argument("-t", "--threads", default="2")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()
    generate = os.path.join(args.bin, "generate")
    tokenize = os.path.join(args.bin, "tokenize")
    with open(args.filler, encoding="utf-8", errors="replace") as f:
        filler = f.read()[:args.filler_bytes]

    rows = []
    with tempfile.TemporaryDirectory() as work:
        for index, depth in enumerate(float(d) for d in args.depths.split(",")):
            key = 10000 + (index * 7919 + 4243) % 90000  # five digits, fixed per depth
            text_path = os.path.join(work, "prompt.txt")
            with open(text_path, "w", encoding="utf-8") as f:
                f.write(planted_prompt(filler, depth, key))
            ids = json.loads(run([tokenize, "-m", args.model, "-f", text_path, "--no-bos",
                                  "--ids-only"]))
            digits = json.loads(run([tokenize, "-m", args.model, "-p", f" {key}", "--no-bos",
                                     "--ids-only"]))
            digits = digits[1:] if len(digits) == 6 else digits  # the leading space's token
            start = find(ids, digits)
            assert start >= 0, "passkey tokens not found in the prompt"
            needle = set(range(start, start + len(digits)))
            context = len(ids) + 32
            common = [generate, "-m", args.model, "--prompt-ids", ",".join(map(str, ids)),
                      "-n", "12", "--greedy", "-q", "--json", "-t", args.threads,
                      "-c", str(context)]
            snapkv = ["--eviction-policy", "snapkv", "--kv-budget", str(args.budget)]
            row = {"depth": depth, "prompt_tokens": len(ids), "key": key,
                   "needle_positions": sorted(needle)}
            kept = {}
            for name, extra in (("full", []),
                                ("one_shot", snapkv + ["--kv-capacity", str(context)]),
                                ("chunked", snapkv)):
                dump = os.path.join(work, name + ".npy")
                if name != "full":
                    extra = extra + ["--dump-kv-positions", dump]
                summary = json.loads(run(common + extra).strip().splitlines()[-1])
                row[name + "_answer"] = summary["text"].strip()
                row[name + "_correct"] = str(key) in summary["text"]
                row[name + "_kv_capacity"] = summary["kv_capacity"]
                row[name + "_fallbacks"] = summary["eviction_fallbacks"]
                if name != "full":
                    positions = np.load(dump)  # [layers, kv heads, slots], -1 past the filled
                    kept[name] = [[set(int(p) for p in head if p >= 0) for head in layer]
                                  for layer in positions]
            pairs = [(a, b) for la, lb in zip(kept["one_shot"], kept["chunked"])
                     for a, b in zip(la, lb)]
            shares = [len(a & b) / len(a) for a, b in pairs]
            row["slots_agree_mean"] = float(np.mean(shares))
            row["slots_agree_min"] = float(np.min(shares))
            for name in ("one_shot", "chunked"):
                heads = [h for layer in kept[name] for h in layer]
                row[name + "_needle_kept"] = sum(needle <= h for h in heads) / len(heads)
            rows.append(row)
            print(json.dumps(row), flush=True)

    print(f"\nbudget {args.budget} slots; chunked cache {rows[0]['chunked_kv_capacity']} slots\n")
    print("| depth | prompt tokens | full | one-shot | chunked | slots agreeing (mean, min) "
          "| passkey kept, one-shot | passkey kept, chunked |")
    print("| --- | ---: | --- | --- | --- | --- | ---: | ---: |")
    for r in rows:
        mark = {True: "yes", False: "no"}
        print(f"| {r['depth']:.1f} | {r['prompt_tokens']} | {mark[r['full_correct']]} "
              f"| {mark[r['one_shot_correct']]} | {mark[r['chunked_correct']]} "
              f"| {100 * r['slots_agree_mean']:.1f} %, {100 * r['slots_agree_min']:.1f} % "
              f"| {100 * r['one_shot_needle_kept']:.0f} % | {100 * r['chunked_needle_kept']:.0f} % |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
