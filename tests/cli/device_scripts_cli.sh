#!/usr/bin/env bash
# The device scripts (scripts/device/) against the local runner on a tiny model of make_model:
# deploy copies the tools, the model and a text and skips what is there already; run_matrix runs
# 2 thread counts x 2 weight types x cpu (+ opencl where a device is found) x 2 eviction policies
# (and the full cache) through bench, perplexity, eviction_eval and generate, parity of each
# backend against cpu:portable, and (with OpenCL) generate_hybrid over 2 schedules; a parity run
# that finds a planted fault is recorded as a result, not a failure; summary, plot,
# foreground_impact (a busy loop beside generate) and scripts/report.py read the results, and
# scripts/check_report.sh takes a screenshot of the page in headless Chromium. The device facts
# are also read from a fake phone /proc and /sys tree (EDGELM_FACTS_ROOT) with a fake getprop, and
# loose tool output files are summarised as well. Bad input exits 1 with one line on stderr.
# Needs python3 with matplotlib and numpy, and Chromium; without either it exits 77 (skipped).
# Usage: device_scripts_cli.sh <bin dir with the tools and make_model> <scripts dir> <work dir>
set -u
bin=$1
scripts=$2

source "$(dirname "$0")/common.sh"
start_cli_test "$3"
export MPLCONFIGDIR="$work/matplotlib"

python=""
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c "import matplotlib.pyplot, numpy" > /dev/null 2>&1; then
    python=$candidate
    break
  fi
done
if [ -z "$python" ]; then
  echo "SKIPPED: no python3 with matplotlib and numpy (scripts/install_deps.sh installs them)"
  exit 77
fi
if ! command -v chromium > /dev/null && ! command -v chromium-browser > /dev/null &&
  ! command -v google-chrome > /dev/null; then
  echo "SKIPPED: no Chromium for scripts/check_report.sh (scripts/install_deps.sh installs it)"
  exit 77
fi

check() { if [ "$2" -eq 0 ]; then ok "$1"; else fail "$1"; fi; }
device="$scripts/device"
run_script() { "$python" "$@"; }

make_tiny_models "$bin/make_model" f32
for i in $(seq 1 40); do
  echo "Line $i: the quick brown fox jumps over the lazy dog, and the dog sleeps on."
done > "$work/text.txt"
target="$work/target"

# --- deploy: everything pushed once, then nothing; a changed file alone again.
run_script "$device/deploy" --local --device-dir "$target" --bin-dir "$bin" -m "$gguf" \
  -f "$work/text.txt" > "$work/deploy1.txt" 2> "$work/err.txt"
check "deploy: exit 0" $?
[ "$(grep -c ': pushed (' "$work/deploy1.txt")" -eq 8 ] &&
  cmp -s "$bin/generate" "$target/generate" && [ -x "$target/generate" ] &&
  cmp -s "$gguf" "$target/$(basename "$gguf")"
check "deploy: 6 tools, the model and the text pushed, the tools executable" $?
echo "one more line" >> "$work/text.txt"
run_script "$device/deploy" --local --device-dir "$target" --bin-dir "$bin" -m "$gguf" \
  -f "$work/text.txt" > "$work/deploy2.txt" 2> "$work/err.txt" &&
  [ "$(grep -c ': up to date (' "$work/deploy2.txt")" -eq 7 ] &&
  grep -q '^deploy: text.txt: pushed (' "$work/deploy2.txt"
check "deploy again: 7 up to date, the changed text pushed" $?

# --- run_matrix: the matrix from a JSON file, the tools' arguments from flags.
backends='"cpu"'
n_backends=1
tools='"bench", "perplexity", "eviction_eval", "generate", "parity"'
n_hybrid=0
# A build without the OpenCL backend says so and exits 0: no device then either.
if devices=$("$bin/generate" --list-devices 2>&1) && [[ "$devices" != *"no OpenCL backend"* ]]; then
  backends='"cpu", "opencl"'
  n_backends=2
  tools="$tools, \"generate_hybrid\""
  n_hybrid=$((2 * 2 * 2))  # weight types x threads x schedules
elif [ -n "${EDGELM_REQUIRE_OPENCL:-}" ]; then
  fail "EDGELM_REQUIRE_OPENCL is set but generate --list-devices found no OpenCL device"
fi
model=$(basename "$gguf")
cat > "$work/matrix.json" << EOF
{"models": ["$model"], "weight_types": ["q8_0", "q4_0"], "threads": [1, 2],
 "backends": [$backends], "policies": ["none", "sink", "h2o"], "budgets": [16, 32],
 "schedules": ["prefill=cpu,decode=opencl", "every=2"], "tools": [$tools], "text": "text.txt"}
EOF
results="$work/results"
# parity's default bound (3.0 per logit) is sized for real models' logits; the tiny model's are
# small, so its bound is 0.3 here (the kernels agree within 0.1).
tool_args=(--bench-args "--n-prompt 16 -n 8 -r 2 --no-bw-probe" --perplexity-args "-c 64 --chunks 2"
  --eviction-eval-args "-c 64 --windows 1 --runs streaming --bootstrap 20 --block-tokens 8"
  --generate-args "-n 16 --ignore-eos" --parity-args "--tokens 32 -n 8 --layers --bound 0.3"
  --generate-hybrid-args "-n 16 --ignore-eos")
run_script "$device/run_matrix" --local --device-dir "$target" --matrix "$work/matrix.json" \
  "${tool_args[@]}" -o "$results" > /dev/null 2> "$work/err.txt"
check "run_matrix: exit 0" $?
per_point=$((2 * 2 * n_backends))
# bench, perplexity, eviction_eval, parity; generate x 5 caches; generate_hybrid
expected_runs=$((per_point * (4 + 5) + n_hybrid))
"$python" - "$results" "$expected_runs" << 'EOF' > "$work/err.txt" 2>&1
import json, os, sys
folder, expected = sys.argv[1], int(sys.argv[2])
manifest = json.load(open(os.path.join(folder, "manifest.json")))
runs = manifest["runs"]
assert len(runs) == expected, f"{len(runs)} runs, expected {expected}"
assert all(r["ok"] for r in runs), "a run failed"
assert manifest["facts"]["n_cpus"] and manifest["facts"]["arch"], "no facts"
for entry in runs:
    record = json.load(open(os.path.join(folder, entry["file"])))
    assert record["facts_before"]["n_cpus"], entry["id"]
    if record["tool"] == "eviction_eval":
        assert len(record["result"]) == 4, entry["id"]  # 2 policies x 2 budgets
        assert os.path.exists(os.path.join(folder, "runs", record["result_file"]))
    if record["tool"] == "generate":
        policy, budget = record["axes"]["eviction"]
        assert record["result"]["eviction_policy"] == policy, entry["id"]
        assert record["result"]["weight_type"] == record["axes"]["weight_type"], entry["id"]
    if record["tool"] == "parity":
        result = record["result"]
        assert record["rc"] == 0 and result["faults"] == 0, entry["id"]
        assert result["steps"] == 31 + 8 and result["bound_logit"] == 0.3, entry["id"]
        assert result["a"].startswith("cpu:portable ("), entry["id"]
        assert result["b"].startswith(record["axes"]["backend"] + " ("), entry["id"]
    if record["tool"] == "generate_hybrid":
        result = record["result"]
        shares = result["backends"]
        if record["axes"]["schedule"] == "every=2":
            assert "--switch-every 2" in record["command"], entry["id"]
            assert result["switches"] >= 7, entry["id"]  # 15 decode steps, turns of 2
            assert shares["cpu"]["decode_steps"] and shares["opencl"]["decode_steps"], entry["id"]
        else:
            assert result["switches"] == 1, entry["id"]
            assert shares["cpu"]["prefill_tokens"] == 25, entry["id"]
            assert shares["opencl"]["decode_steps"] == 15, entry["id"]
EOF
check "run_matrix: $expected_runs runs, all ok, each with facts and its tool's JSON" $?

# --resume keeps every run that succeeded: nothing runs again; another matrix is refused.
run_script "$device/run_matrix" --local --device-dir "$target" --matrix "$work/matrix.json" \
  "${tool_args[@]}" -o "$results" --resume > /dev/null 2> "$work/err.txt" &&
  [ "$(grep -c ': kept$' "$work/err.txt")" -eq "$expected_runs" ]
check "run_matrix --resume: all $expected_runs runs kept" $?
expect_flag_error "$python" run_matrix "run_matrix --resume: another matrix" \
  "--resume: 'bench_args' differs" "$device/run_matrix" --local --device-dir "$target" \
  --matrix "$work/matrix.json" -o "$results" --resume

# --- summary: one row per run (bench: two tests each).
run_script "$device/summary" "$results" -o "$work/summary.md" 2> "$work/err.txt"
check "summary: exit 0" $?
count_rows() { grep -cE "$1" "$work/summary.md"; }
[ "$(count_rows "^\| $model \| q(8|4)_0 \| (cpu \(|opencl).* \| [12] \| (pp16|tg8) \|")" -eq \
  $((per_point * 2)) ]
check "summary: bench rows" $?
generate_row="^\| $model \| q(8|4)_0 \| (cpu|opencl) \| [12] \|"
[ "$(count_rows "$generate_row (none \| |(sink|h2o) \| (16|32)) \| 25 \| 16 \|")" -eq \
  $((per_point * 5)) ] && [ "$(count_rows "\| h2o \| 32 \| 25 \| 16 \|")" -eq "$per_point" ]
check "summary: generate rows, one per eviction setting" $?
[ "$(count_rows "^\| $model \| q(8|4)_0 \| (cpu|opencl) \| [12] \| 64 \| 2 \| [0-9.]+ ± ")" -eq \
  "$per_point" ]
check "summary: perplexity rows" $?
[ "$(count_rows "$generate_row (sink|h2o) \| (16|32) \| [48].0 KiB \| [0-9.]+ \| [0-9.]+ \| -?0\.")" \
  -eq $((per_point * 4)) ]
check "summary: eviction_eval rows" $?
parity_row="^\| $model \| q(8|4)_0 \| [12] \| cpu:portable \| (cpu|opencl) \| ok \| 39 \|"
grep -qF '### parity: each backend against the reference' "$work/summary.md" &&
  [ "$(count_rows "$parity_row( [0-9]+ \|){3} 0\.[0-9]+ / 0\.3 \| 0\.[0-9]+ / 0\.15 \| ")" -eq \
    "$per_point" ]
check "summary: parity rows, one per backend, weight type and threads, within the bound" $?
if [ "$n_hybrid" -gt 0 ]; then
  hybrid_row="^\| $model \| q(8|4)_0 \| [12] \|"
  hybrid_row+=" (prefill=cpu,decode=opencl \| 1|every=2 \| [0-9]+) \|"
  grep -qF '### generate_hybrid: switching between backends' "$work/summary.md" &&
    [ "$(count_rows "$hybrid_row [0-9.,]+ \| [0-9.,]+ \|")" -eq "$n_hybrid" ] &&
    [ "$(count_rows "\| every=2 \| .* \| opencl 100 % \| cpu [0-9]+ %, opencl [0-9]+ % \|")" -eq 4 ]
  check "summary: generate_hybrid rows, one per schedule, with switches and shares" $?
fi

# A parity run that finds a fault (one planted in layer 1 on side b) is a result with exit code 1;
# an unknown backend is a failed run. run_matrix exits 1 for the failure alone.
run_script "$device/run_matrix" --local --device-dir "$target" --models "$model" --threads 1 \
  --backends cpu,nosuch --tools parity --text text.txt \
  --parity-args "--tokens 16 -n 2 --bound 0.3 --plant-fault 1" -o "$work/faults" \
  > /dev/null 2> "$work/err.txt"
rc=$?
fault_row="^\| $model \| f32 \| 1 \| cpu:portable \| cpu, fault planted in layer 1.* \| faults \|"
fault_row+=" 17( \| [0-9]+){2} \| [1-9][0-9]* \|"
[ $rc -eq 1 ] && grep -q 'parity found faults in 1 runs: 0000-parity-' "$work/err.txt" &&
  grep -q '"rc": 1,' "$work/faults/runs/0000-parity-"*.json &&
  grep -q '"ok": true,' "$work/faults/runs/0000-parity-"*.json &&
  run_script "$device/summary" "$work/faults" -o "$work/faults.md" 2> "$work/err.txt" &&
  grep -qE "$fault_row" "$work/faults.md" &&
  grep -qE "^\| 0001-parity-.*-nosuch \| parity \| exit code 1: parity: .*'nosuch'" \
    "$work/faults.md" &&
  [ "$(grep -c '^| 000.-parity-' "$work/faults.md")" -eq 1 ]
check "run_matrix: a parity fault is a row of the parity table, an unknown backend a failed run" $?
grep -qF "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //; s/  */ /g') |" \
  <(grep '^| local |' "$work/summary.md") || ! grep -q 'model name' /proc/cpuinfo
check "summary: this machine's CPU in the devices table" $?

# --- plot: every figure of the matrix.
run_script "$device/plot" "$results" -o "$work/plots" > "$work/paths.txt" 2> "$work/err.txt"
check "plot: exit 0" $?
for name in bench_threads generate_threads generate_budget eviction_quality perplexity; do
  [ "$(od -An -tx1 -N8 "$work/plots/$name.png" 2> /dev/null | tr -d ' \n')" = \
    "89504e470d0a1a0a" ] && [ "$(wc -c < "$work/plots/$name.png")" -gt 20000 ] &&
    grep -qx "$work/plots/$name.png" "$work/paths.txt"
  check "plot: $name.png" $?
done

# --- foreground_impact with a fake phone's /proc and /sys and getprop.
fake="$work/fake-phone"
cpu="$fake/sys/devices/system/cpu"
for i in 0 1 2 3 4 5 6 7; do
  mkdir -p "$cpu/cpu$i/cpufreq"
  case $i in 0 | 1 | 2 | 3) khz=1804800 cap=325 ;; 7) khz=3187200 cap=1024 ;; *) khz=2419200 cap=870 ;; esac
  echo $khz > "$cpu/cpu$i/cpufreq/cpuinfo_max_freq"
  echo schedutil > "$cpu/cpu$i/cpufreq/scaling_governor"
  echo $cap > "$cpu/cpu$i/cpu_capacity"
done
mkdir -p "$fake/proc" "$fake/sys/class/thermal/thermal_zone0" "$fake/sys/class/thermal/thermal_zone1" \
  "$fake/sys/class/power_supply/battery" "$fake/bin"
for i in 0 1 2 3 4 5 6 7; do
  case $i in 0 | 1 | 2 | 3) part=0xd46 ;; 7) part=0xd4e ;; *) part=0xd4d ;; esac
  printf 'processor\t: %d\nCPU implementer\t: 0x41\nCPU part\t: %s\n\n' $i $part
done > "$fake/proc/cpuinfo"
echo "MemTotal:        7864320 kB" > "$fake/proc/meminfo"
echo cpu-1-0 > "$fake/sys/class/thermal/thermal_zone0/type"
echo 48500 > "$fake/sys/class/thermal/thermal_zone0/temp"
echo battery > "$fake/sys/class/thermal/thermal_zone1/type"
echo 31200 > "$fake/sys/class/thermal/thermal_zone1/temp"
echo Battery > "$fake/sys/class/power_supply/battery/type"
echo 87 > "$fake/sys/class/power_supply/battery/capacity"
echo Discharging > "$fake/sys/class/power_supply/battery/status"
cat > "$fake/bin/getprop" << 'EOF'
#!/bin/sh
case $1 in
  ro.soc.manufacturer) echo QTI ;; ro.soc.model) echo SM8550 ;;
  ro.product.manufacturer) echo Example ;; ro.product.model) echo Phone-8 ;;
  ro.build.version.release) echo 14 ;; ro.build.version.sdk) echo 34 ;;
esac
EOF
chmod +x "$fake/bin/getprop"
EDGELM_FACTS_ROOT=$fake PATH="$fake/bin:$PATH" run_script "$device/foreground_impact" --local \
  --device-dir "$target" -m "$model" --load busy:1 -t 1 --repeats 2 --settle 0.2 \
  --generate-args "-n 64 --ignore-eos" -o "$work/foreground" > "$work/foreground.md" \
  2> "$work/err.txt"
check "foreground_impact: exit 0" $?
grep -qE "^\| $model \| f32 \| cpu \| 1 \| none \| 2 \| [0-9,.]+ \|" "$work/foreground.md" &&
  grep -qE "^\| $model \| f32 \| cpu \| 1 \| busy:1 \| 2 \| [0-9,.]+ \| .* \| -?[0-9.]+ % \|$" \
    "$work/foreground.md"
check "foreground_impact: a row without and one with the load, with its slowdown" $?
run_script "$device/summary" "$work/foreground" -o "$work/foreground_summary.md" 2> "$work/err.txt"
grep -qF "| Example Phone-8 | QTI SM8550 | 4x Cortex-A510 + 3x Cortex-A715 + Cortex-X3 | 8 | 4x 1.80 GHz (cpu 0-3) + 3x 2.42 GHz (cpu 4-6) + 1x 3.19 GHz (cpu 7) | schedutil | 7.5 GiB | 48.5 | 87 % Discharging |" \
  "$work/foreground_summary.md"
check "device facts from a fake phone tree: SoC, cores, clusters, governor, memory, heat, battery" $?
left=0
for process in /proc/[0-9]*; do
  [ "$(readlink "$process/cwd" 2> /dev/null)" = "$target" ] &&
    tr '\0' ' ' < "$process/cmdline" 2> /dev/null | grep -q 'while :' && left=1
done
[ $left -eq 0 ]
check "foreground_impact: no busy loop left running in the device folder" $?

# --- The adb runner, through a fake adb that does here what adb does on a phone: "shell" runs
# the line in sh (from a home folder of its own), "push"/"pull" copy, "get-state" says "device".
adb_home="$work/adb-home"
mkdir -p "$adb_home" "$fake/adb"
cat > "$fake/adb/adb" << EOF
#!/bin/sh
[ "\$1" = "-s" ] && [ "\$2" = "PHONE1" ] && shift 2 || { echo "want -s PHONE1" >&2; exit 1; }
case \$1 in
  get-state) echo device ;;
  shell) shift; cd "$adb_home" && exec sh -c "\$*" ;;
  push | pull) cp "\$2" "\$3" ;;
  *) echo "fake adb: \$1?" >&2; exit 1 ;;
esac
EOF
chmod +x "$fake/adb/adb"
on_phone=(--adb "$fake/adb/adb" -s PHONE1 --device-dir "$work/phone")
run_script "$device/deploy" "${on_phone[@]}" --bin-dir "$bin" --tools generate -m "$gguf" \
  > "$work/deploy3.txt" 2> "$work/err.txt" &&
  [ "$(grep -c ': pushed (' "$work/deploy3.txt")" -eq 2 ] &&
  run_script "$device/deploy" "${on_phone[@]}" --bin-dir "$bin" --tools generate -m "$gguf" \
    > "$work/deploy3.txt" 2> "$work/err.txt" &&
  [ "$(grep -c ': up to date (' "$work/deploy3.txt")" -eq 2 ]
check "adb runner: deploy pushes, then finds the files there" $?
run_script "$device/foreground_impact" "${on_phone[@]}" -m "$model" --load busy:1 -t 1 \
  --repeats 1 --settle 0.2 --generate-args "-n 8 --ignore-eos" -o "$work/adb-foreground" \
  > /dev/null 2> "$work/err.txt" &&
  grep -q '"kind": "adb"' "$work/adb-foreground/manifest.json" &&
  grep -q '"serial": "PHONE1"' "$work/adb-foreground/manifest.json"
check "adb runner: foreground_impact runs generate beside a busy loop" $?
left=0
for process in /proc/[0-9]*; do
  [ "$(readlink "$process/cwd" 2> /dev/null)" = "$adb_home" ] &&
    tr '\0' ' ' < "$process/cmdline" 2> /dev/null | grep -q 'while :' && left=1
done
[ $left -eq 0 ]
check "adb runner: the busy loop started with nohup is killed again" $?

# --- The tools' own output files, without a manifest.
loose="$work/loose"
mkdir -p "$loose"
(cd "$target" && ./bench -m "$model" --n-prompt 8 -n 4 -r 1 --no-bw-probe -t 1 -o json \
  > "$loose/bench.json" 2> /dev/null &&
  ./perplexity -m "$model" -f text.txt -c 64 --chunks 1 -t 1 --json > "$loose/ppl.txt" 2> /dev/null &&
  ./generate -m "$model" -p hello -n 4 -t 1 --json > "$loose/generate.out" 2> /dev/null &&
  ./eviction_eval -m "$model" -f text.txt -c 64 --windows 1 --runs streaming --budgets 16 \
    --policies tova --bootstrap 20 --block-tokens 8 -t 1 --json "$loose/eviction.jsonl" > /dev/null 2>&1)
check "the tools' own output files" $?
(cd "$target" && ./parity -m "$model" -f text.txt --tokens 16 -p hello -n 2 --bound 0.3 -t 1 -q \
  --json > "$loose/parity.txt" 2> /dev/null)
check "parity's own output file" $?
if [ "$n_hybrid" -gt 0 ]; then
  (cd "$target" && ./generate_hybrid -m "$model" -p hello -n 8 -t 1 --switch-every 2 --json \
    > "$loose/hybrid.out" 2> /dev/null)
  check "generate_hybrid's own output file" $?
fi
run_script "$device/summary" "$loose" -o "$work/loose.md" 2> "$work/err.txt" &&
  grep -qE "^\| f32 \| cpu:portable \| cpu \| ok \| 17 \|" "$work/loose.md" &&
  { [ "$n_hybrid" -eq 0 ] ||
    grep -qE "^\| $model \| f32 \| 1 \| prefill opencl, decode cpu, alternating .* \| [0-9]+ \|" \
      "$work/loose.md"; } &&
  grep -qE "^\| $model \| f32 \| cpu \(.*\) \| 1 \| tg4 \|" "$work/loose.md" &&
  grep -qE "^\| $model \| f32 \| cpu \| 1 \| 64 \| 1 \| [0-9.]+ ± " "$work/loose.md" &&
  grep -qE "^\| $model \| f32 \| cpu \| 1 \| none \|" "$work/loose.md" &&
  grep -qE "^\| $model \| f32 \| cpu \| 1 \| tova \| 16 \|" "$work/loose.md"
check "summary of loose files: rows of every tool" $?

# --- report.py and the screenshot.
run_script "$scripts/report.py" "$results" "$work/foreground" "$loose" -o "$work/report.html" \
  > /dev/null 2> "$work/err.txt"
check "report.py: exit 0" $?
page="$work/report.html"
[ "$(grep -o '<img alt="[^"]*" src="data:image/png;base64,' "$page" | wc -l)" -ge 6 ] &&
  ! grep -qE '(src|href)="(https?:)?//' "$page" && ! grep -qi '<script' "$page" &&
  [ "$(grep -c '<tr><td>' "$page")" -ge $((per_point * 12)) ] &&
  grep -q '<td>QTI SM8550</td>' "$page" && grep -q '<h3>foreground_impact' "$page" &&
  grep -q '<td>tova</td>' "$page" && grep -q '<h3>parity: each backend' "$page" &&
  { [ "$n_hybrid" -eq 0 ] || grep -q '<h3>generate_hybrid: switching' "$page"; }
check "report.py: one page with embedded plots, no links out, no script, every table" $?
bash "$scripts/check_report.sh" --skip-missing "$page" "$work/report.png" 1400 2000 \
  > /dev/null 2> "$work/err.txt"
check "check_report.sh: exit 0" $?
[ "$(od -An -tx1 -N8 "$work/report.png" | tr -d ' \n')" = "89504e470d0a1a0a" ] &&
  [ "$(od -An -tu1 -j16 -N4 "$work/report.png" | awk '{print ($3 * 256 + $4)}')" -eq 1400 ] &&
  [ "$(wc -c < "$work/report.png")" -gt 50000 ]
check "check_report.sh: a 1400-pixel-wide screenshot with content" $?

# --- Bad input: one line, exit code 1.
expect_error() {
  local name=$1 prefix=$2 expected=$3
  shift 3
  expect_flag_error "$python" "$prefix" "$name" "$expected" "$@"
}
local_target=(--local --device-dir "$target")
expect_error "run_matrix: unknown policy" run_matrix "unknown policy 'h20'" "$device/run_matrix" \
  "${local_target[@]}" --models "$model" --policies h20 --budgets 8 -o "$work/bad"
expect_error "run_matrix: unknown weight type" run_matrix "unknown weight type 'q3_k'" \
  "$device/run_matrix" "${local_target[@]}" --models "$model" --weight-types q3_k -o "$work/bad"
expect_error "run_matrix: a schedule's bad value" run_matrix "every takes a number" \
  "$device/run_matrix" "${local_target[@]}" --models "$model" --tools generate_hybrid \
  --schedules "prefill=cpu;every=two" -o "$work/bad"
expect_error "run_matrix: parity without a text" run_matrix "--tools parity: give --text" \
  "$device/run_matrix" "${local_target[@]}" --models "$model" --tools parity -o "$work/bad"
run_script "$device/run_matrix" "${local_target[@]}" --models "$model" --backends cpu:portable,cpu \
  --tools parity,generate_hybrid --text text.txt --schedules "prefill=cpu,decode=opencl;every=2" \
  --dry-run -o "$work/bad" > "$work/dry.txt" 2> "$work/err.txt" &&
  [ "$(wc -l < "$work/dry.txt")" -eq 3 ] &&
  grep -q -- '-parity-.*-cpu: parity -m .* --a cpu:portable --b cpu ' "$work/dry.txt" &&
  grep -q -- '-every_2: generate_hybrid .* --switch-every 2 ' "$work/dry.txt" &&
  grep -q -- '--prefill-backend cpu --decode-backend opencl ' "$work/dry.txt"
check "run_matrix --dry-run: no parity of cpu:portable with itself; schedules split at ';'" $?
expect_error "run_matrix: policy without budgets" run_matrix "give --budgets" \
  "$device/run_matrix" "${local_target[@]}" --models "$model" --policies h2o -o "$work/bad"
expect_error "run_matrix: model not on the target" run_matrix "no 'none.gguf' in" \
  "$device/run_matrix" "${local_target[@]}" --models none.gguf -o "$work/bad"
echo '{"models": ["a"], "colour": 1}' > "$work/bad_matrix.json"
expect_error "run_matrix: unknown matrix key" run_matrix "unknown key 'colour'" \
  "$device/run_matrix" "${local_target[@]}" --matrix "$work/bad_matrix.json" -o "$work/bad"
expect_error "run_matrix: results there already" run_matrix "holds results already" \
  "$device/run_matrix" "${local_target[@]}" --models "$model" -o "$results"
expect_error "run_matrix: --qemu without --local" run_matrix "it needs --local" \
  "$device/run_matrix" --qemu --models "$model" -o "$work/bad"
expect_error "deploy: missing model" deploy "--model $work/none.gguf: no such file" \
  "$device/deploy" "${local_target[@]}" -m "$work/none.gguf"
expect_error "foreground_impact: bad load" foreground_impact "--load busy:0: busy:N" \
  "$device/foreground_impact" "${local_target[@]}" -m "$model" --load busy:0 -o "$work/bad"
expect_error "summary: no folder" summary "$work/none: no such folder" "$device/summary" \
  "$work/none"
mkdir -p "$work/empty"
expect_error "summary: no results" summary "no results of bench" "$device/summary" "$work/empty"
cp -r "$results" "$work/broken"
run_file=$(ls "$work/broken/runs/"*-generate-*.json | head -n 1)
sed -i 's/"decode_tok_s"/"decode_speed"/' "$run_file"
expect_error "summary: a run without its field" summary "field 'decode_tok_s' is missing" \
  "$device/summary" "$work/broken"
rm "$run_file"
expect_error "report.py: a run file missing" report "$(basename "$run_file"): no such file" \
  "$scripts/report.py" "$work/broken" -o "$work/bad.html"
[ ! -e "$work/bad" ] && [ ! -e "$work/bad.html" ]
check "bad input writes nothing" $?

finish_cli_test device_scripts_cli
