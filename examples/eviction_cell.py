"""One cell of docs/eviction_results.md from Python: SmolLM2-135M-Instruct streamed over the
first 2,048 tokens of alice29.txt and plrabn12.txt with StreamingLLM's attention sinks (`sink`:
4 sinks and a window of 124) in 128 slots per layer and kv head, the cache cut before every
16-token step, beside the full cache: the "Streaming" table's sink row at 128 slots.

    scripts/fetch_smollm2.sh && scripts/fetch_texts.sh
    PYTHONPATH=build/python python3 examples/eviction_cell.py

It prints the cell as eviction_eval's markdown prints it, then the numbers the table quotes.
The same cell from the tool, for comparison:

    build/bin/eviction_eval -m build/models/SmolLM2-135M-Instruct.Q4_1.gguf \
      -f build/texts/alice29.txt -f build/texts/plrabn12.txt -c 2048 --budgets 128 \
      --policies sink --evict-every 16 --runs streaming -t 2
"""

import pathlib
import sys

import edgelm

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODEL = ROOT / "build" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
TEXTS = [ROOT / "build" / "texts" / name for name in ("alice29.txt", "plrabn12.txt")]


def interval(value):
    return f"{value['mean']:.3f} [{value['low']:.3f}, {value['high']:.3f}]"


def main():
    missing = [str(p) for p in [MODEL, *TEXTS] if not p.exists()]
    if missing:
        sys.exit("missing " + ", ".join(missing) +
                 ": run scripts/fetch_smollm2.sh and scripts/fetch_texts.sh")
    model = edgelm.Model.load(str(MODEL), threads=2)
    records, summary = edgelm.eviction.evaluate(
        model, [str(p) for p in TEXTS], ["sink"], [128], window_tokens=2048, evict_every=16,
        frame=False, markdown=True)
    print(summary)
    cell = records[0]["streaming"]
    print(f"sink, 128 slots: mean ΔNLL {interval(cell['paired']['delta_nll'])}, "
          f"KL {cell['paired']['kl']['mean']:.3f}, top-1 {cell['paired']['top1']['mean']:.3f}; "
          f"full cache perplexity {cell['full_all']['ppl']:.2f}")


if __name__ == "__main__":
    main()
