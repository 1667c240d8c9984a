#!/usr/bin/env python3
"""Markdown table from bench's JSON (and optionally llama-bench's JSON of the same tests).

Rows are matched on model file name, n_prompt, n_gen, n_depth and n_threads, the field names the
two tools share. Usage:

    bench_compare.py edgelm.json [llama.cpp.json] [--json OUT.json] [--machine CPU]

The table goes to stdout. --json also writes the rows as a data file for the docs' tables
(results/README.md): one record per row with the machine (--machine, default the CPU as
/proc/cpuinfo names it), the date and time of the edgelm run, the file, threads, test, edgelm's
tokens/s and standard deviation, the bandwidth fraction and llama.cpp's tokens/s where present,
and a table layout that scripts/make_docs_tables.py writes as the same columns as stdout.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_docs_tables  # noqa: E402  (the data file format)


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


def record(row, other, machine):
    """One row as a data record, the numbers as bench and llama-bench give them."""
    time = row.get("test_time", "")  # "2026-11-26T09:24:31Z"
    out = {"machine": machine, "date": time[:10] or None, "time_utc": time[11:16] or None,
           "file": os.path.basename(row["model_filename"]),
           "weights": row.get("weight_type", "").upper() or None,
           "backend": row.get("backend_label"), "threads": row["n_threads"],
           "test": test_name(row), "edgelm_ts": row["avg_ts"], "edgelm_sd": row["stddev_ts"]}
    if row.get("bw_fraction") is not None:
        out["bw_pct"] = 100 * row["bw_fraction"]
        out["bw_gbs"] = row["bw_gbs"]
    if other:
        out["llama_cpp_ts"] = other["avg_ts"]
        out["llama_cpp_sd"] = other["stddev_ts"]
    return {k: v for k, v in out.items() if v is not None}


def table_layout(compared):
    """The columns of stdout's table, for make_docs_tables.py."""
    columns = [{"header": "model", "cell": "{file}"},
               {"header": "threads", "align": "right", "cell": "{threads}"},
               {"header": "test", "cell": "{test}"},
               {"header": "edgelm t/s", "align": "right",
                "cell": "{edgelm_ts:.2f} ± {edgelm_sd:.2f}"},
               {"header": "bw GB/s", "align": "right", "cell": "{bw_gbs:.1f}"},
               {"header": "bw %", "align": "right", "cell": "{bw_pct:.1f}"}]
    if compared:
        columns += [{"header": "llama.cpp t/s", "align": "right",
                     "cell": "{llama_cpp_ts:.2f} ± {llama_cpp_sd:.2f}"},
                    {"header": "edgelm / llama.cpp", "align": "right", "cell": "{ratio:.2f}"}]
    return {"columns": columns}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("edgelm", help="bench -o json output")
    parser.add_argument("llama_cpp", nargs="?", help="llama-bench -o json output")
    parser.add_argument("--json", metavar="OUT", help="also write the rows as a data file")
    parser.add_argument("--machine", help="the CPU's name for the data file (default: "
                        "/proc/cpuinfo's model name)")
    args = parser.parse_args()
    ours = load(args.edgelm)
    theirs = {key(r): r for r in load(args.llama_cpp)} if args.llama_cpp else {}
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
    if args.json:
        machine = args.machine or make_docs_tables.cpu_name()
        records = [record(row, theirs.get(key(row)), machine) for row in ours]
        tools = "bench and llama-bench" if theirs else "bench"
        make_docs_tables.write_data(
            args.json, f"{tools} on {machine}, joined by scripts/bench_compare.py",
            table_layout(bool(theirs)), records)


if __name__ == "__main__":
    main()
