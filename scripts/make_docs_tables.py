#!/usr/bin/env python3
"""Writes the measurement tables of the docs from the data under results/.

    scripts/make_docs_tables.py [--check] [DOC.md ...]   # default: docs/performance.md
    scripts/make_docs_tables.py --self-test

A table in a doc sits between two marker lines naming its data file (a path from the repository
root):

    <!-- table: results/performance/2026-11-26-xeon-1b-shape.json -->
    ...the table, written by this script...
    <!-- end table -->

Without --check the script rewrites what lies between every pair of markers and says which docs
changed. With --check it changes nothing and exits 1 with one line naming the first table whose
text differs from what its data gives (a hand edit of a table, or data changed without running
this script); 0 when every table matches. Bad data or markers exit 1 too, with one line.
--self-test checks the renderer and the check on small inputs of its own.

A data file is JSON: {"about": "...", "table": {...}, "records": [{...}, ...]}. Each record is
one measurement (results/README.md lists the fields); "table" says how records become rows:

    "columns":  [{"header": "threads", "align": "right", "cell": "{threads}"}, ...]
                Each cell is a str.format template over the row's fields, or a list of templates
                of which the first whose fields are all present (and not null) is used; "" when
                none is. "align" is "left" (default) or "right".
    "where":    {"field": value, ...}   only records with these values (null: field absent)
    "group_by": ["field", ...]          one row per distinct value of these fields, in the order
                the records first give them; without it, one row per record
    "pivot":    "field"                 with group_by: each record of a row is also reachable
                under the name of its value of this field, e.g. {pp128[edgelm_ts]:.2f}
                (an integer value v of field f is named f<v>, e.g. run1)
    "ratios":   {"name": ["numerator", "denominator"], ...}   fields computed for each record

Every record (and so every row) also gets "ratio" = edgelm_ts / llama_cpp_ts where it has both,
and for a list of numbers f, "f_mean"; a list formats item by item, "{f:.2f}" as "6.38, 7.80".
A "|" in a cell is written as "\\|". A summary file is {"about": ..., "summary": [...]}, rows
computed from other data files: see render_summary. write_data writes a data file in the layout
of the committed ones (bench_compare.py --json and ab_bench.sh use it). Python 3 standard library
only.
"""

import contextlib
import json
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DOCS = ["docs/performance.md"]
BEGIN = re.compile(r"^<!-- table: (\S+) -->$")
END = "<!-- end table -->"


class DataError(Exception):
    """Bad data or markers; the message names the file."""


def load(path):
    full = os.path.join(ROOT, path)
    try:
        with open(full, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e.strerror}")
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: not JSON: {e}")


class Numbers(list):
    """A list of numbers that formats as its items, each with the cell's spec: "6.38, 7.80"."""

    def __format__(self, spec):
        return ", ".join(format(v, spec) for v in self)


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def with_derived(record, ratios=None):
    """The record without its null fields; a list of numbers f as Numbers, with f_mean; "ratio"
    = edgelm_ts / llama_cpp_ts where both are given, and each of the table's "ratios"."""
    out = {}
    for key, value in record.items():
        if value is None:
            continue
        if isinstance(value, list) and value and all(is_number(v) for v in value):
            value = Numbers(value)
            out[key + "_mean"] = sum(value) / len(value)
        out[key] = value
    if "ratio" not in out and out.get("edgelm_ts") is not None and out.get("llama_cpp_ts"):
        out["ratio"] = out["edgelm_ts"] / out["llama_cpp_ts"]
    for name, (numerator, denominator) in (ratios or {}).items():
        if out.get(numerator) is not None and out.get(denominator):
            out[name] = out[numerator] / out[denominator]
    return out


def matches(record, where):
    return all(record.get(k) == v for k, v in where.items())


def pivot_name(field, value):
    return f"{field}{value}" if isinstance(value, int) else str(value)


def format_cell(templates, context, path):
    if isinstance(templates, str):
        templates = [templates]
    for template in templates:
        try:
            text = template.format_map(context)
        except (KeyError, IndexError, TypeError):
            continue  # a field this template needs is absent: try the next
        except ValueError as e:
            raise DataError(f"{path}: template {template!r}: {e}")
        return text.replace("|", "\\|")
    return ""


def rows_of(table, records, path):
    """The context of each row: the fields of its (first) record, plus the pivot's names."""
    records = [with_derived(r, table.get("ratios")) for r in records
               if matches(r, table.get("where", {}))]
    group_by = table.get("group_by")
    if not group_by:
        return records
    pivot = table.get("pivot")
    groups = {}
    for record in records:
        key = tuple(json.dumps(record.get(f)) for f in group_by)
        context = groups.setdefault(key, dict(record))
        if pivot is not None:
            if pivot not in record:
                raise DataError(f"{path}: a record has no pivot field '{pivot}'")
            context[pivot_name(pivot, record[pivot])] = record
    return list(groups.values())


def markdown(headers, aligns, rows):
    def line(cells):
        return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"
    return ([line(headers), line("---:" if a == "right" else "---" for a in aligns)] +
            [line(row) for row in rows])


def render_table(data, path):
    table = data.get("table")
    if not isinstance(table, dict) or not isinstance(table.get("columns"), list):
        raise DataError(f"{path}: no \"table\" with \"columns\"")
    if not isinstance(data.get("records"), list):
        raise DataError(f"{path}: no \"records\" list")
    columns = table["columns"]
    for column in columns:
        if "header" not in column or "cell" not in column:
            raise DataError(f"{path}: a column lacks \"header\" or \"cell\"")
        if column.get("align", "left") not in ("left", "right"):
            raise DataError(f"{path}: column '{column['header']}': align is left or right")
    rows = [[format_cell(c["cell"], context, path) for c in columns]
            for context in rows_of(table, data["records"], path)]
    return markdown([c["header"] for c in columns], [c.get("align", "left") for c in columns],
                    rows)


def span(values, digits, suffix=""):
    """"1.35-1.38x" over the values as their table shows them ("1.35x" when they agree)."""
    low, high = (f"{v:.{digits}f}" for v in (min(values), max(values)))
    return (low if low == high else f"{low}-{high}") + suffix


def summary_cell(records, value, split, digits, suffix, path):
    """The span of `value` over `records`; one span per value of `split` where it is given:
    joined by " / " for weights, or labelled by thread count ("89.1-89.7 (1 thread), 65.0 (2)")."""
    if not records:
        raise DataError(f"{path}: a summary cell has no records")
    if split is None:
        return span([value(r) for r in records], digits, suffix)
    groups = {}
    for r in records:
        groups.setdefault(r[split], []).append(value(r))
    parts = [span(values, digits, suffix) for values in groups.values()]
    if split == "threads":
        keys = list(groups)
        labels = [f" ({keys[0]} thread{'s' if keys[0] != 1 else ''})"] + \
                 [f" ({k})" for k in keys[1:]]
        return ", ".join(p + label for p, label in zip(parts, labels))
    return " / ".join(parts)


def render_summary(data, path):
    """Per row: its machine, model and date as written, then the spans of the ratios of prefill
    (pp tests) and decode (tg tests) and of decode's bandwidth fraction, over the records of
    "source" that match "where", each split by the field the row's "prefill", "decode" or "bw"
    names (null: one span); "*_note" text follows a cell, and "decode_also": {"label", "source"}
    adds the span of the decode ratios of another file, "(label 1.56-1.64x)"."""
    rows = []
    for row in data["summary"]:
        source = row["source"]
        records = [with_derived(r) for r in load(source)["records"]
                   if matches(r, row.get("where", {}))]
        prefill = [r for r in records if r["test"].startswith("pp") and "+" not in r["test"]]
        decode = [r for r in records if r["test"].startswith("tg")]
        with_bw = [r for r in decode if "bw_pct" in r]
        cells = [row["machine"], row["model"], row["date"],
                 summary_cell(prefill, lambda r: r["ratio"], row.get("prefill"), 2, "x", source),
                 summary_cell(decode, lambda r: r["ratio"], row.get("decode"), 2, "x", source),
                 summary_cell(with_bw, lambda r: r["bw_pct"], row.get("bw"), 1, "", source)]
        also = row.get("decode_also")
        if also:
            extra = [with_derived(r) for r in load(also["source"])["records"]
                     if r["test"].startswith("tg")]
            cells[4] += f" ({also['label']} " + summary_cell(
                extra, lambda r: r["ratio"], None, 2, "x", also["source"]) + ")"
        for i, key in ((3, "prefill_note"), (4, "decode_note"), (5, "bw_note")):
            cells[i] += row.get(key, "")
        rows.append([c.replace("|", "\\|") for c in cells])
    headers = ["machine", "model", "date", "prefill", "decode", "decode, % of the limit"]
    return markdown(headers, ["left"] * len(headers), rows)


def render(path):
    data = load(path)
    if not isinstance(data, dict):
        raise DataError(f"{path}: not a JSON object")
    try:
        return render_summary(data, path) if "summary" in data else render_table(data, path)
    except KeyError as e:
        raise DataError(f"{path}: missing field {e}")


def regenerate(text, doc):
    """`text` with every marked table written from its data; the data files it names."""
    lines = text.split("\n")
    out, used, i = [], [], 0
    while i < len(lines):
        match = BEGIN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not match:
            if lines[i - 1] == END:
                raise DataError(f"{doc}:{i}: '{END}' without a table marker before it")
            continue
        end = i
        while end < len(lines) and lines[end] != END and not BEGIN.match(lines[end]):
            end += 1
        if end == len(lines) or lines[end] != END:
            raise DataError(f"{doc}:{i}: table marker without '{END}' after it")
        used.append(match.group(1))
        out += [""] + render(match.group(1)) + ["", END]
        i = end + 1
    return "\n".join(out), used


def first_difference(old, new):
    old_lines, new_lines = old.split("\n"), new.split("\n")
    for n, (a, b) in enumerate(zip(old_lines, new_lines), 1):
        if a != b:
            return n
    return min(len(old_lines), len(new_lines)) + 1


def table_at(text, line):
    """The data file of the table around `line` (1-based) of `text`."""
    name = None
    for n, l in enumerate(text.split("\n")[:line], 1):
        m = BEGIN.match(l)
        if m:
            name = m.group(1)
        elif l == END and n < line:
            name = None
    return name


# ---- writing data files (also used by bench_compare.py and ab_bench.sh) ----


def data_text(data):
    """`data` as the data files are written: JSON, one record (and one column) per line."""
    def one(value):
        return json.dumps(value, ensure_ascii=False)

    def items(values, indent):
        return ",\n".join(indent + one(v) for v in values)

    parts = []
    for key, value in data.items():
        if key in ("records", "summary"):
            parts.append(f" {one(key)}: [\n{items(value, '  ')}\n ]")
        elif key == "table":
            fields = []
            for tkey, tvalue in value.items():
                if tkey == "columns":
                    fields.append(f'  "columns": [\n{items(tvalue, "   ")}\n  ]')
                else:
                    fields.append(f"  {one(tkey)}: {one(tvalue)}")
            parts.append(' "table": {\n' + ",\n".join(fields) + "\n }")
        else:
            parts.append(f" {one(key)}: {one(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def write_data(path, about, table, records):
    """Writes a data file: {"about", "table", "records"}, records one per line."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(data_text({"about": about, "table": table, "records": records}))


def cpu_name():
    """The CPU as /proc/cpuinfo names it ("model name"), else the platform's word for it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine() or "unknown"


def run(docs, check):
    changed = []
    for doc in docs:
        full = os.path.join(ROOT, doc)
        with open(full, encoding="utf-8") as f:
            text = f.read()
        new, _ = regenerate(text, doc)
        if new == text:
            continue
        if check:
            line = first_difference(text, new)
            print(f"make_docs_tables: {doc}:{line}: the table of {table_at(text, line)} is not "
                  "what its data gives (run scripts/make_docs_tables.py, or edit the data)",
                  file=sys.stderr)
            return 1
        with open(full, "w", encoding="utf-8") as f:
            f.write(new)
        changed.append(doc)
    if not check:
        print("make_docs_tables: " + (f"rewrote {', '.join(changed)}" if changed else
                                      "every table is up to date"))
    return 0


def self_test():
    global ROOT
    failures = []

    def expect(name, got, want):
        if got != want:
            failures.append(f"{name}: got {got!r}, want {want!r}")

    data = {
        "about": "self-test",
        "table": {
            "group_by": ["threads"], "pivot": "test",
            "columns": [
                {"header": "threads", "align": "right", "cell": "{threads}"},
                {"header": "pp8", "cell": "{pp8[edgelm_ts]:.2f} / {pp8[llama_cpp_ts]:.2f} "
                                          "({pp8[ratio]:.2f})"},
                {"header": "tg4: bw %", "align": "right",
                 "cell": ["{tg4[bw_pct]:.1f} ({tg4[bw_gbs]:.1f} GB/s)", "{tg4[bw_pct]:.1f}"]},
                {"header": "note", "cell": "{note}"},
            ]},
        "records": [
            {"threads": 1, "test": "pp8", "edgelm_ts": 10.0, "llama_cpp_ts": 4.0, "note": "a|b"},
            {"threads": 1, "test": "tg4", "edgelm_ts": 5.0, "llama_cpp_ts": 4.0, "bw_pct": 90.04,
             "bw_gbs": 20.0},
            {"threads": 2, "test": "pp8", "edgelm_ts": 3.0, "llama_cpp_ts": 2.0},
            {"threads": 2, "test": "tg4", "edgelm_ts": 5.0, "llama_cpp_ts": 2.5, "bw_pct": 80.0,
             "bw_gbs": None},
        ]}
    summary = {"about": "self-test", "summary": [
        {"machine": "m", "model": "x", "date": "d", "source": "data.json", "bw": "threads",
         "bw_note": " (n)"}]}
    with tempfile.TemporaryDirectory() as root, open(os.devnull, "w") as quiet, \
            contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        ROOT = root
        with open(os.path.join(root, "data.json"), "w") as f:
            json.dump(data, f)
        with open(os.path.join(root, "summary.json"), "w") as f:
            json.dump(summary, f)
        expect("table", render("data.json"), [
            "| threads | pp8 | tg4: bw % | note |",
            "| ---: | --- | ---: | --- |",
            "| 1 | 10.00 / 4.00 (2.50) | 90.0 (20.0 GB/s) | a\\|b |",
            "| 2 | 3.00 / 2.00 (1.50) | 80.0 | |"])
        expect("summary", render("summary.json")[2],
               "| m | x | d | 1.50-2.50x | 1.25-2.00x | 90.0 (1 thread), 80.0 (2) (n) |")
        doc = "intro\n<!-- table: data.json -->\nstale\n<!-- end table -->\nafter\n"
        with open(os.path.join(root, "doc.md"), "w") as f:
            f.write(doc)
        expect("check of a stale table", run(["doc.md"], check=True), 1)
        expect("rewrite", run(["doc.md"], check=False), 0)
        with open(os.path.join(root, "doc.md")) as f:
            written = f.read()
        expect("rewritten text", written.split("\n")[:4],
               ["intro", "<!-- table: data.json -->", "", "| threads | pp8 | tg4: bw % | note |"])
        expect("check after the rewrite", run(["doc.md"], check=True), 0)
        with open(os.path.join(root, "doc.md"), "w") as f:
            f.write(written.replace("10.00 / 4.00", "10.50 / 4.00"))
        expect("check of a hand edit", run(["doc.md"], check=True), 1)
        for bad, name in (("<!-- table: data.json -->\n| x |\n", "no end marker"),
                          ("<!-- table: none.json -->\n<!-- end table -->\n", "missing data"),
                          ("text\n<!-- end table -->\n", "end without begin")):
            try:
                regenerate(bad, "bad.md")
                failures.append(f"{name}: no error")
            except DataError:
                pass
    if failures:
        print("make_docs_tables self-test FAILED\n" + "\n".join(failures), file=sys.stderr)
        return 1
    print("make_docs_tables self-test: renderer, rewrite and check behave")
    return 0


def main(argv):
    args = argv[1:]
    if args == ["--self-test"]:
        return self_test()
    check = "--check" in args
    docs = [a for a in args if a != "--check"] or DEFAULT_DOCS
    if any(d.startswith("-") for d in docs):
        print("usage: make_docs_tables.py [--check] [DOC.md ...] | --self-test", file=sys.stderr)
        return 2
    try:
        return run(docs, check)
    except DataError as e:
        print(f"make_docs_tables: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"make_docs_tables: {e.filename}: {e.strerror}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
