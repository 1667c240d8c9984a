"""Reads a results folder and turns it into tables, for summary, plot and scripts/report.py.

A results folder is what run_matrix or foreground_impact writes (manifest.json and runs/*.json),
or any folder of the tools' own output files, found by their content:

  bench -o json             a JSON array of rows with "avg_ts" and "n_prompt"
  perplexity --json         stdout whose last line is an object with "ppl" and "running_ppl"
  generate --json           stdout whose last line is an object with "decode_tok_s"
  generate_hybrid --json    stdout whose last line is an object with "switches" and "backends"
  parity --json             stdout whose last line is an object with "agree" and "bound_logit"
  eviction_eval --json F    JSON lines of schema edgelm.eviction_eval/1
  run_matrix's run files    objects of schema edgelm.device_run/1 (also without a manifest)

Other files (PNGs, markdown, CSV) are passed over. A file that cannot be read, a manifest naming a
missing run file, or a run file of another schema is a ResultsError (one line naming the file).
"""

import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import plot_eviction  # noqa: E402  (scripts/plot_eviction.py: the eviction_eval schema check)

RUN_SCHEMA = "edgelm.device_run/1"
MANIFEST_SCHEMA = "edgelm.device_runs/1"
MIB = 1024.0 * 1024.0


class ResultsError(Exception):
    """Bad input: reported as one line, exit code 1."""


class Run:
    """One tool run: its tool, its JSON (`result`), where it came from, and the device's facts
    around it when run_matrix recorded them."""

    def __init__(self, tool, result, source, record=None):
        self.tool = tool
        self.result = result
        self.source = source
        record = record or {}
        self.id = record.get("id") or os.path.basename(source)
        self.ok = record.get("ok", True)
        self.error = record.get("error")
        self.axes = record.get("axes") or {}
        self.facts_before = record.get("facts_before")
        self.facts_after = record.get("facts_after")
        self.seconds = record.get("seconds")
        self.command = record.get("command")


class Results:
    """Every run found in a folder, and the manifests that describe where they ran."""

    def __init__(self, folder):
        self.folder = folder
        self.manifests = []
        self.runs = []
        self.skipped = []

    def of(self, tool):
        return [run for run in self.runs if run.tool == tool and run.ok]

    def failed(self):
        return [run for run in self.runs if not run.ok]


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise ResultsError(f"{path}: no such file")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ResultsError(f"{path}: not JSON ({getattr(error, 'msg', error)})")


def check_eviction_cells(cells, where):
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("schema") != plot_eviction.SCHEMA:
            raise ResultsError(f"{where}: cell {number} is not of schema {plot_eviction.SCHEMA}")
        try:
            plot_eviction.check(cell, plot_eviction.CELL, f"{where}: cell {number}", "")
        except plot_eviction.InputError as error:
            raise ResultsError(str(error))


def check_result(tool, result, where):
    """Raises ResultsError when a tool's JSON lacks the fields the tables read."""
    needed = {"bench": ["avg_ts", "stddev_ts", "n_prompt", "n_gen", "n_threads", "backend",
                        "weight_type", "model_filename", "test"],
              "perplexity": ["ppl", "ppl_stderr", "threads", "backend", "weight_type", "model",
                             "n_ctx", "chunks", "tokens_per_second"],
              "generate": ["decode_tok_s", "prefill_tok_s", "backend", "weight_type", "model",
                           "eviction_policy", "kv_budget", "kv_bytes", "peak_rss_bytes",
                           "prompt_tokens", "generated_tokens"],
              "generate_hybrid": ["decode_tok_s", "prefill_tok_s", "weight_type", "model",
                                  "schedule", "switches", "switch_s", "backends",
                                  "host_device_copy_bytes", "host_device_copy_bytes_prefill",
                                  "prompt_tokens", "generated_tokens"],
              "parity": ["steps", "agree", "explained", "faults", "max_abs", "mean_kl",
                         "max_hidden", "bound_logit", "bound_hidden", "first_divergence",
                         "first_fault", "first_departing_layer", "a", "b"]}
    if tool == "eviction_eval":
        check_eviction_cells(result, where)
        return
    rows = result if tool == "bench" else [result]
    if tool == "bench" and not isinstance(result, list):
        raise ResultsError(f"{where}: bench's result is not a JSON array")
    for row in rows:
        if not isinstance(row, dict):
            raise ResultsError(f"{where}: a {tool} row is not a JSON object")
        for field in needed.get(tool, []):
            if field not in row:
                raise ResultsError(f"{where}: {tool} field '{field}' is missing")


def classify(path):
    """(tool, result) for a tool's own output file, or None when it is none of them."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        return None
    except OSError as error:
        raise ResultsError(f"{path}: cannot read: {error.strerror}")
    stripped = text.strip()
    if not stripped:
        return None
    try:
        whole = json.loads(stripped)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, list) and whole and all(isinstance(r, dict) for r in whole) and \
            "avg_ts" in whole[0] and "n_prompt" in whole[0]:
        return "bench", whole
    if isinstance(whole, dict) and whole.get("schema") == RUN_SCHEMA:
        return "record", whole
    lines = [line for line in stripped.splitlines() if line.strip()]
    if lines[0].lstrip().startswith('{"schema":"edgelm.eviction_eval/'):
        try:
            return "eviction_eval", [json.loads(line) for line in lines]
        except json.JSONDecodeError:
            raise ResultsError(f"{path}: eviction_eval JSON lines with a line that is not JSON")
    try:
        last = json.loads(lines[-1])
    except json.JSONDecodeError:
        return None
    if isinstance(last, dict) and "ppl" in last and "running_ppl" in last:
        return "perplexity", last
    if isinstance(last, dict) and "switches" in last and "backends" in last:
        return "generate_hybrid", last
    if isinstance(last, dict) and "decode_tok_s" in last:
        return "generate", last
    if isinstance(last, dict) and "agree" in last and "bound_logit" in last:
        return "parity", last
    return None


def add_record(results, record, path):
    if record.get("schema") != RUN_SCHEMA:
        raise ResultsError(f"{path}: schema {record.get('schema')!r}, expected {RUN_SCHEMA!r}")
    for field in ("id", "tool", "ok"):
        if field not in record:
            raise ResultsError(f"{path}: field '{field}' is missing")
    if record["ok"]:
        check_result(record["tool"], record.get("result"), path)
    results.runs.append(Run(record["tool"], record.get("result"), path, record))


def load(folder):
    """Every run in `folder` (and its subfolders)."""
    if not os.path.isdir(folder):
        raise ResultsError(f"{folder}: no such folder")
    results = Results(folder)
    claimed = set()
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        if "manifest.json" not in files:
            continue
        path = os.path.join(root, "manifest.json")
        manifest = read_json(path)
        if not isinstance(manifest, dict) or manifest.get("schema") != MANIFEST_SCHEMA:
            raise ResultsError(f"{path}: not a manifest of schema {MANIFEST_SCHEMA}")
        manifest["_folder"] = root
        results.manifests.append(manifest)
        claimed.add(os.path.abspath(path))
        for entry in manifest.get("runs", []):
            run_path = os.path.join(root, entry["file"])
            record = read_json(run_path)
            add_record(results, record, run_path)
            claimed.add(os.path.abspath(run_path))
            if record.get("result_file"):
                claimed.add(os.path.abspath(os.path.join(os.path.dirname(run_path),
                                                         record["result_file"])))
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            if os.path.abspath(path) in claimed or not name.endswith((".json", ".jsonl", ".txt",
                                                                        ".out")):
                continue
            found = classify(path)
            if found is None:
                results.skipped.append(path)
                continue
            tool, result = found
            if tool == "record":
                add_record(results, result, path)
            else:
                check_result(tool, result, path)
                results.runs.append(Run(tool, result, path))
    if not results.runs:
        raise ResultsError(f"{folder}: no results of bench, perplexity, eviction_eval, "
                           "generate, generate_hybrid or parity found")
    return results


# ---------------------------------------------------------------------------------------------
# Tables: a title, column names, rows of text, and a note.

class Table:
    """A titled table of text cells; columns empty in every row are left out."""

    def __init__(self, title, headers, rows, note=""):
        keep = [i for i in range(len(headers)) if any(row[i] for row in rows)]
        self.title = title
        self.headers = [headers[i] for i in keep]
        self.rows = [[row[i] for i in keep] for row in rows]
        self.note = note

    def markdown(self):
        aligns = ["---:" if self.numeric(i) else "---" for i in range(len(self.headers))]
        lines = [f"### {self.title}", ""]
        if self.note:
            lines += [self.note, ""]
        lines.append("| " + " | ".join(h.replace("|", "\\|") for h in self.headers) + " |")
        lines.append("| " + " | ".join(aligns) + " |")
        for row in self.rows:
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
        return "\n".join(lines) + "\n"


    def numeric(self, column):
        """Whether a column holds numbers (right-aligned): every filled cell starts with one."""
        cells = [row[column] for row in self.rows if row[column]]
        return bool(cells) and all(is_number(cell) for cell in cells)


def is_number(text):
    head = text.split(" ")[0].replace(",", "")
    try:
        float(head)
        return True
    except ValueError:
        return False


def fmt(value, digits=2):
    if value is None:
        return ""
    if isinstance(value, float) and (value != value):
        return "nan"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def mib(nbytes):
    return "" if nbytes is None else f"{nbytes / MIB:.2f}"


def size_text(nbytes):
    """Bytes in KiB below one MiB (a tiny model's KV cache), else in MiB."""
    if nbytes is None:
        return ""
    if nbytes < MIB:
        return f"{nbytes / 1024:.1f} KiB"
    return f"{nbytes / MIB:.2f} MiB"


def ghz(khz):
    return f"{khz / 1e6:.2f} GHz"


def model_of(path):
    return os.path.basename(str(path))


def hottest(facts):
    values = [t["celsius"] for t in (facts or {}).get("temperatures") or []]
    return max(values) if values else None


def temperature_text(run):
    before, after = hottest(run.facts_before), hottest(run.facts_after)
    if before is None and after is None:
        return ""
    return f"{fmt(before, 1)} → {fmt(after, 1)}"


def clusters_text(facts):
    clusters = facts.get("clusters") or []
    if not clusters:
        return ""
    def cpus(c):
        first, last = c["cpus"][0], c["cpus"][-1]
        return f"cpu {first}" if first == last else f"cpu {first}-{last}"
    return " + ".join(f"{len(c['cpus'])}x {ghz(c['max_khz'])} ({cpus(c)})" for c in clusters)


def device_rows(results):
    """One row per target: from each manifest's facts, or the first run's facts."""
    seen = []
    for manifest in results.manifests:
        runner = manifest.get("runner", {})
        where = runner.get("kind", "?")
        if runner.get("serial"):
            where += " " + runner["serial"]
        if runner.get("emulator"):
            where += " (" + runner["emulator"] + ")"
        seen.append((where, manifest.get("facts") or {}, manifest.get("created", "")))
    if not seen:
        for run in results.runs:
            if run.facts_before:
                seen.append(("?", run.facts_before, run.facts_before.get("time", "")))
                break
    return seen


def device_table(results):
    rows = []
    for where, facts, created in device_rows(results):
        battery = facts.get("battery") or {}
        battery_text = ""
        if battery:
            battery_text = " ".join(filter(None, [
                f"{battery['level_percent']} %" if battery.get("level_percent") is not None else "",
                battery.get("status") or "",
                f"{battery['celsius']:.1f} °C" if battery.get("celsius") is not None else ""]))
        temperature = hottest(facts)
        rows.append([where, created, facts.get("device") or "", facts.get("soc") or "",
                     facts.get("cpu_model") or "", str(facts.get("n_cpus") or ""),
                     clusters_text(facts), ", ".join(facts.get("governors") or []),
                     (f"{facts['mem_total_bytes'] / 2**30:.1f} GiB"
                      if facts.get("mem_total_bytes") else ""),
                     fmt(temperature, 1) if temperature is not None else "", battery_text])
    if not rows:
        return None
    return Table("Devices", ["runner", "started", "device", "SoC", "CPU", "cpus",
                             "clusters (max freq)", "governor", "memory", "hottest °C",
                             "battery"], rows,
                 "Read from /proc, /sys and Android's properties when the matrix started; an "
                 "empty cell: the target does not expose it.")


def bench_table(results):
    rows = []
    for run in results.of("bench"):
        for row in run.result:
            bw = "" if row.get("bw_fraction") is None else f"{100 * row['bw_fraction']:.0f} %"
            rows.append([model_of(row["model_filename"]), row["weight_type"],
                         row.get("backend_label") or row["backend"], str(row["n_threads"]),
                         row["test"], f"{fmt(row['avg_ts'])} ± {fmt(row['stddev_ts'])}", bw,
                         mib(row.get("peak_rss_bytes")), temperature_text(run)])
    rows.sort(key=lambda r: (r[0], r[1], r[2], r[4], int(r[3])))
    if not rows:
        return None
    return Table("bench: throughput", ["model", "weights", "backend", "threads", "test",
                                       "t/s", "of bw limit", "peak RSS MiB", "°C before → after"],
                 rows, "pp: prompt processing, tg: generation; mean ± standard deviation over "
                       "the repetitions.")


def perplexity_table(results):
    rows = []
    for run in results.of("perplexity"):
        r = run.result
        rows.append([model_of(r["model"]), r["weight_type"], r["backend"], str(r["threads"]),
                     str(r["n_ctx"]), str(r["chunks"]),
                     f"{r['ppl']:.4f} ± {r['ppl_stderr']:.4f}", fmt(r["tokens_per_second"]),
                     temperature_text(run)])
    rows.sort(key=lambda r: (r[0], r[1], r[2], int(r[3])))
    if not rows:
        return None
    return Table("perplexity", ["model", "weights", "backend", "threads", "ctx", "windows",
                                "perplexity", "tokens/s", "°C before → after"], rows)


def generate_rows(results, foreground):
    return [run for run in results.of("generate") if ("load" in run.axes) == foreground]


def threads_of(run):
    """The thread count of a generate or generate_hybrid run: its matrix axis, else the one its
    `device` names (generate_hybrid's: the CPU's)."""
    if "threads" in run.axes:
        return str(run.axes["threads"])
    device = run.result.get("device", "")
    if isinstance(device, dict):
        device = device.get("cpu", "")
    match = re.search(r"(\d+) threads?\)", device)
    return match.group(1) if match else ""


def budget_of(result):
    return result["kv_budget"] if result["eviction_policy"] != "none" else None


def generate_table(results):
    rows = []
    for run in generate_rows(results, False):
        r = run.result
        budget = budget_of(r)
        rows.append([model_of(r["model"]), r["weight_type"], r["backend"],
                     threads_of(run), r["eviction_policy"],
                     "" if budget is None else str(budget), str(r["prompt_tokens"]),
                     str(r["generated_tokens"]), fmt(r["prefill_tok_s"]), fmt(r["decode_tok_s"]),
                     size_text(r["kv_bytes"]), mib(r["peak_rss_bytes"]), str(r.get("evictions", "")),
                     temperature_text(run)])
    rows.sort(key=lambda r: (r[0], r[1], r[2], r[3].zfill(4), r[4] != "none", r[4],
                             r[5].zfill(8)))
    if not rows:
        return None
    return Table("generate: prefill and decode", [
        "model", "weights", "backend", "threads", "eviction", "budget", "prompt", "generated",
        "prefill t/s", "decode t/s", "KV cache", "peak RSS MiB", "evictions",
        "°C before → after"], rows,
        "budget: KV slots per layer and kv head; eviction none: the full cache.")


def bytes_text(nbytes):
    """A byte count: bytes below one KiB (none copied is "0 B"), else size_text."""
    if nbytes is None:
        return ""
    return f"{nbytes} B" if nbytes < 1024 else size_text(nbytes)


def side_of(label):
    """(backend, weights) from a parity side's label, "opencl (q4_1, f16 KV)"; the weights may
    hold parentheses themselves ("q4_1 (token embedding q8_0)"), and what follows them (", fault
    planted in layer 1's down projection") stays with the backend."""
    match = re.match(r"(\S+) \((.*), \S+ KV\)", label or "")
    if not match:
        return label or "", ""
    return match.group(1) + label[match.end():], match.group(2)


def step_text(step):
    """A parity step as "teacher 13 (explained)"; empty for none."""
    if not step:
        return ""
    return f"{step['phase']} {step['index']} ({step['verdict']})"


def layers_compared(run):
    """Whether a parity run compared every layer's output (--layers): its command says so, or,
    for a loose file, a layer difference was measured."""
    if run.command is not None:
        return "--layers" in run.command.split()
    return run.result["max_hidden"] > 0


def parity_table(results):
    rows = []
    for run in results.of("parity"):
        r = run.result
        reference, _ = side_of(r["a"])
        backend, weights = side_of(r["b"])
        layers = layers_compared(run)
        departing = ""
        if layers:
            departing = ("none" if r["first_departing_layer"] < 0
                         else str(r["first_departing_layer"]))
        rows.append([model_of(run.axes.get("model", "")),
                     weights or run.axes.get("weight_type", ""),
                     str(run.axes.get("threads", "")), reference, backend,
                     "faults" if r["faults"] else "ok", str(r["steps"]), str(r["agree"]),
                     str(r["explained"]), str(r["faults"]),
                     f"{r['max_abs']:.3g} / {r['bound_logit']:.3g}",
                     f"{r['max_hidden']:.3g} / {r['bound_hidden']:.3g}" if layers else "",
                     f"{r['mean_kl']:.3g}", step_text(r["first_divergence"]),
                     step_text(r["first_fault"]), departing])
    rows.sort(key=lambda r: (r[0], r[1], r[4], r[2].zfill(4)))
    if not rows:
        return None
    return Table("parity: each backend against the reference", [
        "model", "weights", "threads", "reference", "backend", "verdict", "steps", "agree",
        "explained", "faults", "max |a-b| / bound", "max layer diff / bound", "mean KL",
        "first divergence", "first fault", "first departing layer"], rows,
        "Teacher-forced over the text, then greedy from the prompt, the reference's choice fed to "
        "both. A step agrees (the same best token, logits within the bound), is explained (the "
        "best tokens differ at a top-2 margin within twice the bound) or is a fault; a run with "
        "a fault exits 1 and is listed here, not among the failed runs. Layer diff: the largest "
        "relative difference of a layer's output (--layers); KL(reference ‖ backend).")


def share_text(counts):
    """{backend: count} as "cpu 53 %, opencl 47 %" (backends with none left out)."""
    total = sum(counts.values())
    if not total:
        return ""
    return ", ".join(f"{name} {100 * n / total:.0f} %" for name, n in sorted(counts.items()) if n)


def switching_table(results):
    rows = []
    for run in results.of("generate_hybrid"):
        r = run.result
        backends = r["backends"]
        switches = r["switches"]
        per_step = ", ".join(
            f"{name} {1000 * b['decode_s'] / b['decode_steps']:.2f}"
            for name, b in sorted(backends.items()) if b["decode_steps"])
        rows.append([model_of(r["model"]), r["weight_type"], threads_of(run),
                     run.axes.get("schedule") or r["schedule"], str(switches),
                     fmt(1e6 * r["switch_s"], 1),
                     fmt(1e6 * r["switch_s"] / switches, 2) if switches else "",
                     fmt(r["prefill_tok_s"]), fmt(r["decode_tok_s"]),
                     share_text({n: b["prefill_tokens"] for n, b in backends.items()}),
                     share_text({n: b["decode_steps"] for n, b in backends.items()}), per_step,
                     bytes_text(r["host_device_copy_bytes_prefill"]),
                     bytes_text(r["host_device_copy_bytes"]), temperature_text(run)])
    rows.sort(key=lambda r: (r[0], r[1], r[2].zfill(4), r[3]))
    if not rows:
        return None
    return Table("generate_hybrid: switching between backends", [
        "model", "weights", "threads", "schedule", "switches", "switch time µs", "µs/switch",
        "prefill t/s", "decode t/s", "prefill tokens on", "decode steps on", "decode ms/step",
        "copied in prefill", "copied in decode", "°C before → after"], rows,
        "The backends share the weights and the KV cache; a switch's time is waiting for the "
        "backend it leaves to finish and handing the cache over. Decode ms/step: each backend's "
        "decode time over its steps. Copied: bytes between host and device memory.")


def interval_text(interval, digits=4):
    if interval is None or interval.get("mean") is None:
        return ""
    text = f"{interval['mean']:.{digits}f}"
    if interval.get("low") is not None and interval.get("high") is not None:
        text += f" [{interval['low']:.{digits}f}, {interval['high']:.{digits}f}]"
    return text


def eviction_cells(results):
    """(run, cell) for every eviction_eval cell."""
    return [(run, cell) for run in results.of("eviction_eval") for cell in run.result]


def eviction_table(results):
    rows = []
    for run, cell in eviction_cells(results):
        info = cell["run"]
        streaming = cell.get("streaming") or {}
        paired = streaming.get("paired") or {}
        continuation = (cell.get("continuation") or {}).get("paired") or {}
        evictions = streaming.get("evictions") or {}
        rows.append([model_of(info["model"]), info["weight_types"], info["backend"],
                     str(info["threads"]), cell["policy"], str(cell["budget_slots"]),
                     size_text(cell["budget_bytes"]),
                     f"{streaming['all']['ppl']:.3f}" if streaming.get("all") else "",
                     f"{streaming['full_all']['ppl']:.3f}" if streaming.get("full_all") else "",
                     interval_text(paired.get("delta_nll")), interval_text(paired.get("kl")),
                     interval_text(paired.get("top1"), 3),
                     interval_text(continuation.get("delta_nll")),
                     fmt(evictions.get("ms_per_eviction"), 3)])
    rows.sort(key=lambda r: (r[0], r[1], r[2], int(r[3]), r[4], int(r[5])))
    if not rows:
        return None
    return Table("eviction_eval: quality against the full cache", [
        "model", "weights", "backend", "threads", "policy", "budget", "KV cache", "ppl",
        "full-cache ppl", "ΔNLL [95 % CI]", "KL [95 % CI]", "top-1 [95 % CI]",
        "continuation ΔNLL", "ms/eviction"], rows,
        "Streaming over the same tokens as the full cache; ΔNLL: policy − full cache, nats per "
        "token; KL(full ‖ policy).")


def foreground_groups(results):
    """{(model, weights, backend, threads): {load: [decode tok/s, ...]}} of foreground_impact."""
    groups = {}
    for run in generate_rows(results, True):
        r = run.result
        key = (model_of(r["model"]), r["weight_type"], r["backend"], threads_of(run))
        groups.setdefault(key, {}).setdefault(run.axes["load"], []).append(r["decode_tok_s"])
    return groups


def foreground_table(results):
    rows = []
    for key, loads in sorted(foreground_groups(results).items()):
        base = statistics.median(loads["none"]) if "none" in loads else None
        for load, speeds in sorted(loads.items(), key=lambda item: item[0] != "none"):
            median = statistics.median(speeds)
            slowdown = "" if base is None or load == "none" else f"{100 * (1 - median / base):.1f} %"
            rows.append(list(key) + [load, str(len(speeds)), fmt(median),
                                     f"{fmt(min(speeds))} – {fmt(max(speeds))}", slowdown])
    if not rows:
        return None
    return Table("foreground_impact: decode speed under another load", [
        "model", "weights", "backend", "threads", "load", "runs", "median decode t/s",
        "range", "slowdown"], rows,
        "Runs without and with the load alternate; slowdown: 1 − median with / median without.")


def failed_table(results):
    rows = [[run.id, run.tool, run.error or ""] for run in results.failed()]
    if not rows:
        return None
    return Table("Failed runs", ["run", "tool", "error"], rows)


def tables(results):
    """Every table the results fill, in report order."""
    makers = [device_table, bench_table, generate_table, switching_table, perplexity_table,
              parity_table, eviction_table, foreground_table, failed_table]
    return [table for table in (make(results) for make in makers) if table is not None]
