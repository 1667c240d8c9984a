#!/usr/bin/env python3
"""edgelm against llama.cpp on one GGUF file: token ids, greedy text and perplexity.

llama.cpp is built outside this repository; point --llama-bin at its bin/ folder (llama-tokenize,
llama-completion, llama-perplexity). With --hf, transformers (which dequantizes the GGUF to
float32) joins the greedy comparison as the exact reference. Prints one markdown report; the
numbers in docs/model.md and docs/tokenizer.md come from runs of this kind.

    scripts/llama_cpp_parity.py --llama-bin ~/llama.cpp/build/bin --text alice29.txt
    scripts/llama_cpp_parity.py --llama-bin ... --only greedy --hf --backend cpu:portable --no-repack

Standard library only, except --hf (torch, transformers, accelerate, gguf). Runs on a developer
machine, never in CI.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The three primary colors are",
    "Water boils at a temperature of",
    "In 1969, the first humans",
    "The recipe for a simple pancake batter:",
    "Photosynthesis is the process by which",
    "Q: What is 12 times 12?\nA:",
    "The most important rule of machine learning is",
    "Dear Sir or Madam,\n\nI am writing to",
    "import numpy as np\n\n# Compute the mean of",
]


def run(cmd):
    result = subprocess.run(cmd, capture_output=True)
    if result.returncode != 0:
        sys.exit(f"llama_cpp_parity: {' '.join(map(str, cmd[:3]))} ... failed:\n"
                 f"{result.stderr.decode(errors='replace')[-2000:]}")
    return result.stdout


def edgelm_ids(args, text_path):
    out = run([args.build / "bin/tokenize", "-m", args.model, "-f", text_path, "--ids-only"])
    return json.loads(out)


def llama_ids(args, text_path):
    out = run([args.llama_bin / "llama-tokenize", "-m", args.model, "-f", text_path, "--ids",
               "--log-disable"])
    return json.loads(out.decode().strip().splitlines()[-1])


def compare_tokens(args):
    lines = [json.loads(line) for line in open(args.corpus, encoding="utf-8")]
    differ = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "line.txt"
        for i, line in enumerate(lines):
            path.write_bytes(line.encode("utf-8", errors="surrogatepass"))
            if edgelm_ids(args, path) != llama_ids(args, path):
                differ.append(i)
    print(f"## Token ids\n\n{len(lines)} lines of {args.corpus}: {len(differ)} differ"
          + (f" (lines {differ[:20]}{' ...' if len(differ) > 20 else ''})" if differ else "")
          + "\n")


def first_difference(a, b):
    return next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))


def edgelm_greedy(args, prompt):
    cmd = [args.build / "bin/generate", "-m", args.model, "-p", prompt, "-n", str(args.n),
           "--greedy", "--ignore-eos", "--json", "-q", "-t", str(args.threads), "--kv-type",
           args.kv_type, "--backend", args.backend]
    if args.no_repack:
        cmd.append("--no-repack")
    return json.loads(run(cmd).decode().strip().splitlines()[-1])["tokens"]


def llama_greedy(args, prompt):
    # A few tokens more than compared, so that re-tokenizing the text cannot merge across its end.
    text = run([args.llama_bin / "llama-completion", "-m", args.model, "-p", prompt, "-n",
                str(args.n + 8), "--temp", "0", "-no-cnv", "--ignore-eos", "-t", str(args.threads),
                "--no-display-prompt", "--simple-io", "-s", "1"]).decode("utf-8", "replace")
    # Token ids of the continuation, through edgelm's tokenizer (equal to llama.cpp's, above).
    with tempfile.TemporaryDirectory() as tmp:
        both, alone = Path(tmp) / "both.txt", Path(tmp) / "alone.txt"
        both.write_text(prompt + text, encoding="utf-8")
        alone.write_text(prompt, encoding="utf-8")
        ids, prompt_ids = edgelm_ids(args, both), edgelm_ids(args, alone)
    return ids[len(prompt_ids):len(prompt_ids) + args.n]


def hf_greedy(args):
    import torch
    from transformers import AutoModelForCausalLM
    model_path = Path(args.model).resolve()
    model = AutoModelForCausalLM.from_pretrained(model_path.parent, gguf_file=model_path.name,
                                                 dtype=torch.float32).eval()
    runs = []
    for prompt in PROMPTS:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "p.txt"
            path.write_text(prompt, encoding="utf-8")
            ids = edgelm_ids(args, path)
        with torch.no_grad():
            x = torch.tensor([ids])
            out = model.generate(x, max_new_tokens=args.n, do_sample=False, min_new_tokens=args.n,
                                 pad_token_id=0)
            logits = model(out).logits[0, len(ids) - 1:-1]
        runs.append((out[0, len(ids):].tolist(), logits))
    return runs


def compare_greedy(args):
    edgelm = [edgelm_greedy(args, p) for p in PROMPTS]
    llama = [llama_greedy(args, p) for p in PROMPTS]
    setting = f"--backend {args.backend}, --kv-type {args.kv_type}" + (
        ", --no-repack" if args.no_repack else "")
    print(f"## Greedy text\n\n{len(PROMPTS)} prompts, {args.n} tokens, edgelm with {setting}.\n")
    same = [first_difference(e, l) for e, l in zip(edgelm, llama)]
    print(f"edgelm = llama.cpp for all {args.n} tokens on {sum(s == args.n for s in same)} of "
          f"{len(PROMPTS)} prompts; first difference at {same}\n")
    if args.hf:
        hf = hf_greedy(args)
        rows = [("edgelm", edgelm), ("llama.cpp", llama)]
        print("| run | prompts equal to transformers | first difference |\n| --- | ---: | --- |")
        for name, tokens in rows:
            firsts = [first_difference(t, h[0]) for t, h in zip(tokens, hf)]
            print(f"| {name} | {sum(f == args.n for f in firsts)} / {len(PROMPTS)} | {firsts} |")
        # How far apart transformers puts its own token and llama.cpp's where they part: a small
        # margin is a near tie that any rounding can flip.
        margins = []
        for (tokens, logits), other in zip(hf, llama):
            k = first_difference(other, tokens)
            if k < min(len(other), args.n):
                margins.append(f"{float(logits[k, tokens[k]] - logits[k, other[k]]):.3f}")
        print(f"\ntransformers' logit of its token minus llama.cpp's, where llama.cpp leaves its "
              f"text: {margins}\n")


def compare_perplexity(args):
    common = ["-m", args.model, "-f", args.text, "-c", str(args.ctx), "-b", str(args.ctx), "-t",
              str(args.threads)]
    llama = subprocess.run([args.llama_bin / "llama-perplexity"] + common, capture_output=True)
    final = re.search(r"PPL = ([0-9.]+) \+/- ([0-9.]+)",
                      (llama.stdout + llama.stderr).decode(errors="replace"))
    summary = json.loads(run([args.build / "bin/perplexity", "--json"] + common)
                         .decode().strip().splitlines()[-1])
    line = (f"## Perplexity\n\n{args.text}, -c {args.ctx}: edgelm {summary['ppl']:.4f} ± "
            f"{summary['ppl_stderr']:.5f} ({summary['chunks']} windows)")
    if final:
        ppl = float(final.group(1))
        line += (f"; llama.cpp {ppl:.4f} ± {final.group(2)}; edgelm / llama.cpp = "
                 f"{summary['ppl'] / ppl:.4f}")
    else:
        line += "; llama-perplexity printed no final estimate"
    print(line + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-bin", type=Path, required=True)
    parser.add_argument("-m", "--model", type=Path,
                        default=REPO / "build/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    parser.add_argument("--build", type=Path, default=REPO / "build")
    parser.add_argument("--corpus", type=Path,
                        default=REPO / "tests/fixtures/tokenizer/corpus.jsonl")
    parser.add_argument("--text", type=Path, help="text for perplexity (skipped without it)")
    parser.add_argument("--only", choices=["tokens", "greedy", "ppl"])
    parser.add_argument("-n", type=int, default=64, help="greedy tokens per prompt")
    parser.add_argument("-c", "--ctx", type=int, default=512)
    parser.add_argument("-t", "--threads", type=int, default=2)
    parser.add_argument("--backend", default="cpu",
                        help="edgelm's backend for the greedy runs, as generate's --backend (cpu, cpu:ISA)")
    parser.add_argument("--no-repack", action="store_true")
    parser.add_argument("--kv-type", default="f16")
    parser.add_argument("--hf", action="store_true", help="add transformers as the reference")
    args = parser.parse_args()
    if args.only in (None, "tokens"):
        compare_tokens(args)
    if args.only in (None, "greedy"):
        compare_greedy(args)
    if args.only in (None, "ppl") and args.text:
        compare_perplexity(args)


if __name__ == "__main__":
    main()
