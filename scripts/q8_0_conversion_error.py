#!/usr/bin/env python3
"""Error of converting a GGUF file's Q4_1, Q5_0 and Q5_1 matrices to Q8_0, as edgelm's loader does.

The CPU's SIMD tables and the OpenCL backend multiply such matrices as Q8_0: each is dequantized
exactly and requantized with the reference Q8_0 quantizer (models/loader.cpp, for_matmul). This
script does the same with the gguf package's numpy port of GGML's reference code, which
tests/test_quant.cpp checks against edgelm's quantizers bit for bit, and reports for each matrix,
with w its exact dequantization and e = dequant(Q8_0(w)) - w:

  rel_rms    ||e|| / ||w||
  max_abs    max |e|
  e/step     RMS of e over the RMS of w's own rounding step d (the block's scale), and the largest
             |e| over its block's d: how the conversion compares with the step the file's own
             quantization already rounded to (uniform rounding to that step has RMS error
             d / sqrt(12) = 0.29 d)

Per-tensor rows with --per-tensor; otherwise a summary per matrix role (over the layers) and over
all matrices. Usage:

    python scripts/q8_0_conversion_error.py MODEL.gguf [--per-tensor]
"""

import argparse
import re
from collections import defaultdict

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize, quantize

CONVERTED = {GGMLQuantizationType.Q4_1, GGMLQuantizationType.Q5_0, GGMLQuantizationType.Q5_1}


def measure(tensor) -> dict:
    qtype = GGMLQuantizationType(tensor.tensor_type)
    raw = np.asarray(tensor.data)
    w = dequantize(raw, qtype).astype(np.float32)
    converted = dequantize(quantize(w, GGMLQuantizationType.Q8_0), GGMLQuantizationType.Q8_0)
    e = (converted.astype(np.float64) - w.astype(np.float64)).reshape(-1, 32)
    # Every block of the three types starts with its half scale d.
    bytes_per_block = {GGMLQuantizationType.Q4_1: 20, GGMLQuantizationType.Q5_0: 22,
                       GGMLQuantizationType.Q5_1: 24}[qtype]
    d = np.abs(raw.reshape(-1, bytes_per_block)[:, :2].copy().view(np.float16).astype(np.float64))
    d = d.reshape(-1)
    w64 = w.astype(np.float64).reshape(-1, 32)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_step = np.where(d[:, None] > 0, np.abs(e) / d[:, None], 0.0)
    return {
        "name": tensor.name,
        "type": qtype.name,
        "elements": w.size,
        "e2": float(np.sum(e * e)),
        "w2": float(np.sum(w64 * w64)),
        "d2": float(np.sum(d * d)) * 32,
        "max_abs": float(np.max(np.abs(e))),
        "max_per_step": float(np.max(per_step)),
    }


def row(label: str, items: list) -> str:
    e2 = sum(i["e2"] for i in items)
    w2 = sum(i["w2"] for i in items)
    d2 = sum(i["d2"] for i in items)
    n = sum(i["elements"] for i in items)
    rel = [np.sqrt(i["e2"] / i["w2"]) for i in items]
    return (f"| {label} | {len(items)} | {n:,} | {np.sqrt(e2 / w2):.3e} | "
            f"{min(rel):.3e} - {max(rel):.3e} | {max(i['max_abs'] for i in items):.3e} | "
            f"{np.sqrt(e2 / d2):.4f} | {max(i['max_per_step'] for i in items):.4f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--per-tensor", action="store_true", help="one row per matrix")
    args = parser.parse_args()

    results = [measure(t) for t in GGUFReader(args.model).tensors
               if GGMLQuantizationType(t.tensor_type) in CONVERTED]
    if not results:
        raise SystemExit(f"{args.model}: no Q4_1, Q5_0 or Q5_1 tensors")
    print("| matrices | count | elements | rel. RMS error (all) | rel. RMS per matrix | max abs "
          "error | RMS error / RMS step | max error / its block's step |")
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    if args.per_tensor:
        for r in results:
            print(row(f"{r['name']} ({r['type']})", [r]))
    else:
        groups = defaultdict(list)
        for r in results:
            groups[re.sub(r"^blk\.\d+\.", "", r["name"]) + f" ({r['type']})"].append(r)
        for label in sorted(groups):
            print(row(label, groups[label]))
    print(row("all", results))


if __name__ == "__main__":
    main()
