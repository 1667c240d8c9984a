#!/usr/bin/env python3
"""Markdown table from bench's JSON (and optionally llama-bench's JSON of the same tests).

Rows are matched on model file name, n_prompt, n_gen, n_depth and n_threads, the field names the
two tools share. Usage: bench_compare.py edgelm.json [llama.cpp.json]
"""
import json
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def key(row):
    return (os.path.basename(row["model_filename"]), row["n_prompt"], row["n_gen"],
            row.get("n_depth", 0), row["n_threads"])


def test_name(row):
    n_prompt, n_gen = row["n_prompt"], row["n_gen"]
    name = (f"pp{n_prompt}" if n_gen == 0 else f"tg{n_gen}" if n_prompt == 0 else
            f"pp{n_prompt}+tg{n_gen}")
    if row.get("n_depth", 0):
        name += f" @ d{row['n_depth']}"
    return name


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    ours = load(sys.argv[1])
    theirs = {key(r): r for r in load(sys.argv[2])} if len(sys.argv) == 3 else {}
    header = "| model | threads | test | edgelm t/s | bw GB/s | bw % |"
    rule = "| --- | ---: | --- | ---: | ---: | ---: |"
    if theirs:
        header += " llama.cpp t/s | edgelm / llama.cpp |"
        rule += " ---: | ---: |"
    print(header)
    print(rule)
    for row in ours:
        bw = f"{row['bw_gbs']:.1f}" if row.get("bw_fraction") is not None else ""
        fraction = f"{100 * row['bw_fraction']:.1f}" if row.get("bw_fraction") is not None else ""
        line = (f"| {os.path.basename(row['model_filename'])} | {row['n_threads']} | "
                f"{test_name(row)} | {row['avg_ts']:.2f} ± {row['stddev_ts']:.2f} | {bw} | "
                f"{fraction} |")
        if theirs:
            other = theirs.get(key(row))
            if other:
                line += (f" {other['avg_ts']:.2f} ± {other['stddev_ts']:.2f} | "
                         f"{row['avg_ts'] / other['avg_ts']:.2f} |")
            else:
                line += " | |"
        print(line)


if __name__ == "__main__":
    main()
