#!/usr/bin/env python3
"""Encode throughput of the Hugging Face `tokenizers` package on one thread, next to edgelm's.

Encodes every record of a corpus (one JSON string per line, e.g.
tests/fixtures/tokenizer/corpus.jsonl) with `tokenizers`, once record by record (`encode`) and
once as one batch (`encode_batch`), and reports MB/s of UTF-8 input. With --edgelm it also runs
`tokenize --bench` on the same files and prints the three numbers together.

    /tmp/tokenv/bin/pip install tokenizers
    /tmp/tokenv/bin/python scripts/bench_tokenizer.py --edgelm build/bin/tokenize

Both sides add BOS (the post-processor) and parse special tokens, and both warm up with one pass
first (so that their word caches hold the corpus's words).
"""

import os

# One thread for tokenizers' rayon pool; both variables must be set before the import.
os.environ["RAYON_RS_NUM_CPUS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "tokenizer"


def measure(fn, total_bytes, seconds):
    fn()  # warm-up pass
    passes, start = 0, time.perf_counter()
    while True:
        fn()
        passes += 1
        elapsed = time.perf_counter() - start
        if passes >= 3 and elapsed >= seconds:
            return total_bytes * passes / elapsed / 1e6


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", type=Path, default=FIXTURES / "llama3-style.json")
    parser.add_argument("--corpus", type=Path, default=FIXTURES / "corpus.jsonl")
    parser.add_argument("--seconds", type=float, default=3.0, help="least time per measurement")
    parser.add_argument("--edgelm", type=Path, help="path of edgelm's tokenize binary to run too")
    args = parser.parse_args()

    tok = Tokenizer.from_file(str(args.tokenizer))
    # Split on "\n" only: records keep U+2028, U+0085 and the like raw, which splitlines() breaks on.
    lines = args.corpus.read_text(encoding="utf-8").split("\n")
    records = [json.loads(line) for line in lines if line]
    total = sum(len(r.encode("utf-8")) for r in records)

    def one_by_one():
        for r in records:
            tok.encode(r)

    def batch():
        tok.encode_batch(records)

    results = {
        "tokenizers encode": measure(one_by_one, total, args.seconds),
        "tokenizers encode_batch": measure(batch, total, args.seconds),
    }
    if args.edgelm:
        out = subprocess.run([str(args.edgelm), "--tokenizer", str(args.tokenizer), "--file",
                              str(args.corpus), "--bench", "--bench-seconds", str(args.seconds)],
                             check=True, capture_output=True, text=True).stdout
        results["edgelm encode"] = json.loads(out.strip().splitlines()[-1])["mb_per_s"]

    print(f"corpus {args.corpus.name}: {len(records)} records, {total / 1e6:.3f} MB; tokenizer "
          f"{args.tokenizer.name}; tokenizers {tokenizers.__version__}; 1 thread; {cpu_name()}")
    for name, mb_per_s in results.items():
        print(f"  {name:<26} {mb_per_s:8.2f} MB/s")
    print(json.dumps({"mb_per_s": results, "tokenizers": tokenizers.__version__,
                      "cpu": cpu_name(), "records": len(records), "bytes": total}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
