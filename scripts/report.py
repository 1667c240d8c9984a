#!/usr/bin/env python3
"""One self-contained static HTML page from results folders: the devices and their facts, the
tables of bench, generate, generate_hybrid (switching), perplexity, parity, eviction_eval and
foreground_impact runs, and their plots.

Usage: scripts/report.py RESULTS_DIR [RESULTS_DIR ...] -o report.html [--title TEXT]

A results folder is what scripts/device/run_matrix or foreground_impact wrote (manifest.json and
runs/), or any folder of the tools' own JSON output (bench -o json, perplexity, generate,
generate_hybrid and parity --json, eviction_eval --json FILE; scripts/device/results.py says how
each is recognised). The
page needs nothing else: the CSS is inline, the PNGs are embedded as data URIs, there is no
script. eviction_eval cells that belong together (one model, the same settings) also get
scripts/plot_eviction.py's figures. scripts/check_report.sh takes a screenshot of the page in
headless Chromium. Bad input stops with one line on stderr and exit code 1.
"""

import argparse
import base64
import html
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "device"))
sys.path.insert(0, HERE)
import figures  # noqa: E402
import plot_eviction  # noqa: E402
import results  # noqa: E402

PROG = "report"

STYLE = """
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 24px 32px;
       color: #1d1f21; background: #fff; font-size: 14px; }
h1 { font-size: 24px; margin-bottom: 4px; }
h2 { font-size: 19px; margin-top: 32px; border-bottom: 2px solid #d0d7de; padding-bottom: 4px; }
h3 { font-size: 16px; margin-top: 22px; }
p.meta, p.note { color: #57606a; margin: 4px 0 10px 0; }
div.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 6px 0 14px 0; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 4px 9px; white-space: nowrap; }
th { background: #eef1f4; text-align: left; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #f7f8fa; }
figure { margin: 10px 0 24px 0; }
figure img { max-width: 100%; border: 1px solid #d0d7de; }
figcaption { color: #57606a; font-size: 13px; margin-top: 4px; }
pre { background: #f6f8fa; border: 1px solid #d0d7de; padding: 8px; font-size: 12px;
      overflow-x: auto; }
nav a { margin-right: 14px; }
"""


def table_html(table):
    numeric = [table.numeric(i) for i in range(len(table.headers))]
    parts = [f"<h3>{html.escape(table.title)}</h3>"]
    if table.note:
        parts.append(f'<p class="note">{html.escape(table.note)}</p>')
    parts.append('<div class="scroll"><table><thead><tr>' +
                 "".join(f"<th>{html.escape(h)}</th>" for h in table.headers) +
                 "</tr></thead><tbody>")
    for row in table.rows:
        parts.append("<tr>" + "".join(
            f'<td class="num">{html.escape(cell)}</td>' if numeric[i] else
            f"<td>{html.escape(cell)}</td>" for i, cell in enumerate(row)) + "</tr>")
    parts.append("</tbody></table></div>")
    return "\n".join(parts)


def image_html(path, caption):
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode("ascii")
    return (f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def cores_table(facts):
    rows = [[str(c["cpu"]), f"{c['max_khz'] / 1e6:.2f}" if c.get("max_khz") else "",
             f"{c['cur_khz'] / 1e6:.2f}" if c.get("cur_khz") else "",
             c.get("governor") or "", str(c["capacity"]) if c.get("capacity") else ""]
            for c in facts.get("cores") or []]
    if not rows:
        return None
    return results.Table("Cores", ["cpu", "max GHz", "GHz at the start", "governor",
                                   "capacity"], rows)


def temperatures_table(facts):
    rows = [[t["type"], f"{t['celsius']:.1f}"] for t in facts.get("temperatures") or []]
    if not rows:
        return None
    return results.Table("Thermal zones at the start", ["zone", "°C"], rows)


def manifest_html(manifest):
    runner = manifest.get("runner", {})
    facts = manifest.get("facts") or {}
    parts = [f"<h3>{html.escape(manifest['_folder'])}</h3>",
             '<p class="meta">' + html.escape(
                 f"started {manifest.get('created', '?')}; runner {runner.get('kind', '?')}"
                 + (f" {runner['serial']}" if runner.get("serial") else "")
                 + (f" under {runner['emulator']}" if runner.get("emulator") else "")
                 + f"; device folder {runner.get('device_dir', '?')}; "
                 f"{len(manifest.get('runs', []))} runs") + "</p>"]
    if facts.get("kernel"):
        parts.append(f'<p class="meta">kernel: {html.escape(facts["kernel"])}</p>')
    for table in (cores_table(facts), temperatures_table(facts)):
        if table is not None:
            parts.append(table_html(table))
    binaries = manifest.get("binaries") or {}
    if binaries:
        parts.append(table_html(results.Table(
            "Binaries on the target", ["binary", "bytes", "sha256"],
            [[name, str(b["bytes"]), b["sha256"]] for name, b in sorted(binaries.items())])))
    parts.append("<details><summary>matrix</summary><pre>" +
                 html.escape(json.dumps(manifest.get("matrix"), indent=1)) + "</pre></details>")
    return "\n".join(parts)


def eviction_figures(found, out_dir, notes):
    """scripts/plot_eviction.py's figures when all eviction_eval cells can be drawn together."""
    cells = []
    for run, cell in results.eviction_cells(found):
        cells.append(dict(cell, _where=run.source))
    if not cells:
        return []
    os.makedirs(out_dir, exist_ok=True)
    try:
        by_run = plot_eviction.merge(cells)
        written, _ = plot_eviction.plot(by_run, out_dir, False, 100)
    except plot_eviction.InputError as error:
        # Several weight types, backends or thread counts give each (policy, budget) cell more
        # than once; plot_eviction.py draws one set of cells, so it is left to the user to pick.
        notes.append("scripts/plot_eviction.py's figures are left out (" +
                     str(error).split(": ", 1)[-1] + "); run it on one runs/<id>.jsonl for them.")
        return []
    return [(path, "plot_eviction.py: " + os.path.basename(path)[:-4].replace("_", " "))
            for path in written]


def build(folders, title):
    found = results.Results(", ".join(folders))
    for folder in folders:
        one = results.load(folder)
        found.manifests += one.manifests
        found.runs += one.runs
    notes = []
    with tempfile.TemporaryDirectory() as scratch:
        plots = figures.draw(found, os.path.join(scratch, "figures"))
        plots += eviction_figures(found, os.path.join(scratch, "eviction"), notes)
        images = [image_html(path, caption) for path, caption in plots]
    counts = {}
    for run in found.runs:
        counts[run.tool] = counts.get(run.tool, 0) + 1
    tables = results.tables(found)
    body = [f"<h1>{html.escape(title)}</h1>",
            '<p class="meta">' + html.escape(
                f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; from "
                f"{', '.join(folders)}; runs: " +
                ", ".join(f"{n} {tool}" for tool, n in sorted(counts.items())) +
                (f" ({len(found.failed())} failed)" if found.failed() else "")) + "</p>",
            '<nav><a href="#tables">tables</a><a href="#plots">plots</a>'
            '<a href="#devices">devices</a></nav>',
            '<h2 id="tables">Tables</h2>']
    body += [table_html(table) for table in tables]
    body.append('<h2 id="plots">Plots</h2>')
    body += [f'<p class="note">{html.escape(note)}</p>' for note in notes]
    body += images or ['<p class="note">No plots: the results hold nothing to draw.</p>']
    if found.manifests:
        body.append('<h2 id="devices">Devices and runners</h2>')
        body += [manifest_html(manifest) for manifest in found.manifests]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>\n" +
            "\n".join(body) + "\n</body></html>\n")


def main():
    parser = argparse.ArgumentParser(prog="report.py", description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="+", metavar="RESULTS_DIR")
    parser.add_argument("-o", "--output", required=True, help="the HTML file to write")
    parser.add_argument("--title", default="edgelm results", help="the page's title")
    args = parser.parse_args()
    try:
        page = build(args.folders, args.title)
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(page)
    except results.ResultsError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"{PROG}: {error.filename}: {error.strerror}", file=sys.stderr)
        return 1
    print(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
