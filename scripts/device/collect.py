"""Runs one tool on the target and records it as runs/<id>.json of a results folder
(schema edgelm.device_run/1), for run_matrix and foreground_impact.

A record holds the command, its exit code and time, the device's facts before and after, the last
lines of stderr, and the tool's JSON as it printed it: bench's array (`-o json`), the last stdout
line of perplexity, generate, generate_hybrid and parity (`--json`), or the cells of eviction_eval's
`--json FILE`, which is pulled back next to the record as runs/<id>.jsonl. `ok` is false, with a
one-line `error`, when the tool failed or printed no JSON; parity's exit code 1 with its summary
(it found a fault) is a result, `ok` true.
"""

import json
import os
import time

from runner import DeviceError, device_facts, quote, wait_until_cool

RUN_SCHEMA = "edgelm.device_run/1"
MANIFEST_SCHEMA = "edgelm.device_runs/1"


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=1, ensure_ascii=False)
        f.write("\n")


def parse_output(output, stdout, pulled_text):
    """The tool's JSON for an output kind: "stdout" (the whole of it), "last_line" or "file"
    (JSON lines pulled back); raises ValueError when it is not there."""
    if output == "stdout":
        return json.loads(stdout)
    if output == "last_line":
        lines = [line for line in stdout.splitlines() if line.strip()]
        if not lines:
            raise ValueError("no output on stdout")
        return json.loads(lines[-1])
    if pulled_text is None:
        raise ValueError("the --json file was not written")
    return [json.loads(line) for line in pulled_text.splitlines() if line.strip()]


def record_run(runner, out_dir, identifier, tool, axes, argv, output, timeout, max_temp, log,
               result_codes=(0,), summary_fields=()):
    """Runs argv (argv[0]: a binary in the device folder) and writes runs/<identifier>.json;
    returns the record. With max_temp, first waits until the target has cooled to it.

    An exit code in result_codes other than 0 (parity's 1: it found a fault) still gives a result
    when the JSON is there and holds every one of summary_fields (the summary line, not a step's
    line printed before a crash); the record keeps the code in "rc"."""
    output_name = identifier + ".jsonl" if output == "file" else None
    command = runner.tool(argv[0]) + " " + " ".join(quote(a) for a in argv[1:])
    if max_temp is not None:
        facts_before = wait_until_cool(runner, max_temp, 600, log)
    else:
        facts_before = device_facts(runner)
    if output_name:
        runner.shell(f"rm -f {quote(output_name)}", timeout=60)
    started = now()
    result = runner.shell(command, timeout=timeout)
    facts_after = device_facts(runner)
    record = {
        "schema": RUN_SCHEMA, "id": identifier, "tool": tool,
        "axes": {key: list(value) if isinstance(value, tuple) else value
                 for key, value in axes.items()},
        "command": command, "started": started, "seconds": round(result.seconds, 3),
        "rc": result.rc, "ok": False, "error": None,
        "facts_before": facts_before, "facts_after": facts_after,
        "stderr_tail": result.stderr.splitlines()[-20:], "result": None, "result_file": None,
    }
    pulled = None
    if output_name and result.rc in result_codes:
        local = os.path.join(out_dir, "runs", output_name)
        try:
            runner.pull(output_name, local)
            with open(local, encoding="utf-8") as f:
                pulled = f.read()
            record["result_file"] = output_name
        except (DeviceError, OSError) as error:
            record["error"] = str(error)
    failure = None
    if result.rc != 0:
        last = (result.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        failure = f"exit code {result.rc}: {last}"
    if result.rc not in result_codes:
        record["error"] = failure
    elif record["error"] is None:
        try:
            found = parse_output(output, result.stdout, pulled)
            if summary_fields and (not isinstance(found, dict) or
                                   any(field not in found for field in summary_fields)):
                raise ValueError("the last line is not its summary")
            record["result"] = found
            record["ok"] = True
        except ValueError as error:
            record["error"] = failure or f"no JSON from {tool}: {error}"
    write_json(os.path.join(out_dir, "runs", identifier + ".json"), record)
    return record


def new_manifest(runner, what, binaries):
    """The manifest of a results folder: the runner, what was run, the binaries' sizes and
    sha256 on the target, and the device's facts now; runs are appended as they finish."""
    return {"schema": MANIFEST_SCHEMA, "created": now(), "runner": runner.describe(),
            "matrix": what, "binaries": binaries, "facts": device_facts(runner), "runs": []}


def binary_digests(runner, tools):
    digests = {}
    for tool in tools:
        found = runner.file_digest(tool)
        if found is None:
            raise DeviceError(f"no '{tool}' in {runner.device_dir} on the {runner.kind} target "
                              "(scripts/device/deploy pushes it)")
        digests[tool] = {"bytes": found[0], "sha256": found[1]}
    return digests


def check_files(runner, names):
    for name in names:
        if runner.file_digest(name) is None:
            raise DeviceError(f"no '{name}' in {runner.device_dir} on the {runner.kind} target "
                              "(scripts/device/deploy -m/-f pushes it)")
