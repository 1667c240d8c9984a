#!/usr/bin/env bash
# Before/after speed of two builds on one machine, in turns: for each turn, micro_bench's rows and
# bench's pp/tg rows run once with each build, the order alternating from turn to turn, so that a
# noisy or shared machine disturbs both sides alike. Prints a markdown table per tool: the median
# of the turns for each side and the after/before ratio of the medians (> 1: after is faster for
# throughput rows). The same tables go to OUT_DIR as data files for the docs' tables
# (summary_micro_bench.json, summary_bench.json: one record per row with the machine's CPU and the
# date; results/README.md).
#
# Usage: scripts/ab_bench.sh BEFORE_BIN AFTER_BIN OUT_DIR [TURNS] [MODEL.gguf...]
#   BEFORE_BIN, AFTER_BIN: folders holding micro_bench and bench (copies of build/bin)
#   OUT_DIR: where the raw JSON of every run goes (and summary.md)
# Environment: AB_MICRO_FILTER (micro_bench rows, a --benchmark_filter regex), AB_BACKENDS
# (bench --backend list, default cpu:avx2,cpu:avx512), AB_THREADS (default "1 2"), AB_PP, AB_TG
# (prompt and generated lengths, default 64 and 16), AB_REPS (bench repetitions per run, default 2).
# Needs python3 for the summary.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 BEFORE_BIN AFTER_BIN OUT_DIR [TURNS] [MODEL.gguf...]" >&2
  exit 2
fi
before=$1 after=$2 out=$3
turns=${4:-3}
shift $(($# < 4 ? $# : 4))
models=("$@")
filter=${AB_MICRO_FILTER:-'^(matmul/avx(2|512)/[a-z0-9_]+/1b\.ffn_up\.8192x2048/M(1|64)/t[12]|attention/avx(2|512)/f16/1b\.h32kv8d64/(q64\.)?slots512/t1|(rms_norm|rope|softmax|silu_mul)/avx(2|512))/'}
backends=${AB_BACKENDS:-cpu:avx2,cpu:avx512}
read -r -a threads <<<"${AB_THREADS:-1 2}"
thread_flags=()
for t in "${threads[@]}"; do thread_flags+=(-t "$t"); done
for side in "$before" "$after"; do
  for tool in micro_bench bench; do
    [ -x "$side/$tool" ] || { echo "ab_bench: $side/$tool is not an executable" >&2; exit 2; }
  done
done
mkdir -p "$out"

run_side() {  # side-name folder turn
  local name=$1 dir=$2 turn=$3
  echo "ab_bench: turn $turn, $name" >&2
  "$dir/micro_bench" --full --benchmark_filter="$filter" --benchmark_min_time=0.2 \
    --benchmark_format=json >"$out/micro_${name}_$turn.json" 2>/dev/null
  local i=0
  for model in ${models[@]+"${models[@]}"}; do
    "$dir/bench" -m "$model" --backend "$backends" "${thread_flags[@]}" --n-prompt "${AB_PP:-64}" \
      -n "${AB_TG:-16}" -r "${AB_REPS:-2}" --no-bw-probe -o json >"$out/bench_${name}_${turn}_$i.json"
    i=$((i + 1))
  done
}

for turn in $(seq 1 "$turns"); do
  if [ $((turn % 2)) = 1 ]; then
    run_side before "$before" "$turn"
    run_side after "$after" "$turn"
  else
    run_side after "$after" "$turn"
    run_side before "$before" "$turn"
  fi
done

PYTHONPATH="$(dirname "$0")" python3 - "$out" <<'PY' | tee "$out/summary.md"
import datetime, glob, json, os, statistics, sys
import make_docs_tables
out = sys.argv[1]
machine = make_docs_tables.cpu_name()
date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
def collect(pattern, rows_of):
    values = {}
    for side in ("before", "after"):
        for path in sorted(glob.glob(os.path.join(out, pattern.format(side=side)))):
            with open(path) as f:
                for key, value in rows_of(json.load(f)):
                    values.setdefault(key, {"before": [], "after": []})[side].append(value)
    return values
def micro_rows(doc):
    for b in doc["benchmarks"]:
        yield b["name"].replace("/real_time", ""), b["real_time"] / 1e3  # us
def bench_rows(doc):
    for r in doc:
        yield (os.path.basename(r["model_filename"]), r["backend"], r["n_threads"], r["test"]), r["avg_ts"]
def table(tool, title, unit, values):
    print(f"\n### {title}\n")
    print(f"| row | before ({unit}) | after ({unit}) | after/before | turns |")
    print("|---|---:|---:|---:|---:|")
    records = []
    for key in sorted(values):
        b, a = values[key]["before"], values[key]["after"]
        if not b or not a:
            continue
        mb, ma = statistics.median(b), statistics.median(a)
        ratio = ma / mb
        name = key if isinstance(key, str) else " ".join(str(k) for k in key)
        print(f"| {name} | {mb:.4g} | {ma:.4g} | {ratio:.3f} | {min(len(a), len(b))} |")
        records.append({"machine": machine, "date": date, "tool": tool, "row": name, "unit": unit,
                        "before": mb, "after": ma, "turns": min(len(a), len(b))})
    layout = {"ratios": {"after_over_before": ["after", "before"]}, "columns": [
        {"header": "row", "cell": "{row}"},
        {"header": f"before ({unit})", "align": "right", "cell": "{before:.4g}"},
        {"header": f"after ({unit})", "align": "right", "cell": "{after:.4g}"},
        {"header": "after/before", "align": "right", "cell": "{after_over_before:.3f}"},
        {"header": "turns", "align": "right", "cell": "{turns}"}]}
    make_docs_tables.write_data(os.path.join(out, f"summary_{tool}.json"),
                                f"scripts/ab_bench.sh on {machine}: {title}", layout, records)
table("micro_bench", "micro_bench (time per call, median of turns; ratio < 1: after faster)",
      "us", collect("micro_{side}_*.json", micro_rows))
table("bench", "bench (tokens/s, median of turns; ratio > 1: after faster)", "tok/s",
      collect("bench_{side}_*.json", bench_rows))
PY
