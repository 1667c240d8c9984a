#!/usr/bin/env python3
"""PNG plots of eviction_eval's JSON lines (schema edgelm.eviction_eval/1).

Usage: scripts/plot_eviction.py [--filled] [--dpi N] -o OUT_DIR FILE.jsonl [FILE.jsonl ...]

The cells of every file are put together (each (policy, budget) cell's runs may come from
different files, but a run only once). Written into OUT_DIR, each only when its run is present
(otherwise a one-line note on stderr says why it is left out):

  quality_streaming.png     per policy against the KV bytes of its budgets: mean ΔNLL (policy −
                            full cache) and mean KL(full ‖ policy), with their 95 % bootstrap
                            intervals, and top-1 agreement; --filled: only the predictions made
                            after each window's first eviction (`paired_filled`)
  quality_continuation.png  the same for compress-then-continue
  retrieval_<B>slots.png    per budget B: passkey accuracy per policy over depth × document length
                            beside the full cache's, each cell's count annotated
  eviction_time.png         ms per eviction split into scoring, selection and compaction, per
                            policy and budget: streaming, and the cost run's decode steps

The paths written are printed, one a line. Bad input (a missing file, a line that is not a JSON
object, another schema, a missing field, cells of different models) stops the script with one
line on stderr and exit code 1. Needs matplotlib and numpy (scripts/install_deps.sh installs them).
"""

import argparse
import json
import math
import os
import sys

SCHEMA = "edgelm.eviction_eval/1"
PROG = "plot_eviction"
MIB = 1024.0 * 1024.0
RUNS = ("streaming", "continuation", "retrieval", "cost")


class InputError(Exception):
    """Bad input: reported as one line, exit code 1."""


# ---------------------------------------------------------------------------------------------
# Reading and checking the cells

NUMBER = (int, float)
INTEGER = (int,)
TEXT = (str,)
LIST = (list,)
BOOL = (bool,)

INTERVAL = {"mean": NUMBER, "low": NUMBER, "high": NUMBER}
PAIRED = {"units": INTEGER, "kl": INTERVAL, "top1": INTERVAL, "delta_nll": INTERVAL}
EVICTIONS = {"count": INTEGER, "seconds": NUMBER, "score_seconds": NUMBER,
             "select_seconds": NUMBER, "compact_seconds": NUMBER, "ms_per_eviction": NUMBER}
# The fields the plots read (a dict: an object with these fields); others are not looked at.
CELL = {
    "policy": TEXT, "budget_slots": INTEGER, "budget_bytes": NUMBER,
    "run": {"model": TEXT, "model_sha256": TEXT, "weight_types": TEXT, "kv_type": TEXT,
            "device": TEXT, "texts": LIST, "window_tokens": INTEGER, "windows_per_text": INTEGER,
            "evict_every": INTEGER, "prefix_tokens": INTEGER, "continue_tokens": INTEGER,
            "block_tokens": INTEGER, "bootstrap_resamples": INTEGER, "interval_level": NUMBER,
            "cost_tokens": INTEGER, "kv_bytes_per_slot": INTEGER, "commit": TEXT, "date": TEXT},
}
RUN_SPECS = {
    "streaming": {"paired": PAIRED, "paired_filled": PAIRED, "evictions": EVICTIONS},
    "continuation": {"windows": INTEGER, "paired": PAIRED, "evictions": EVICTIONS},
    "retrieval": {"grid": LIST, "correct": INTEGER, "scored": INTEGER},
    "cost": {"logical_length": INTEGER, "decode_tokens": INTEGER, "decode_evictions": EVICTIONS},
}
GRID_ROW = {"length": INTEGER, "depth": NUMBER, "placement": TEXT, "trials": INTEGER,
            "full_correct": INTEGER, "full_failed": BOOL, "scored": INTEGER, "correct": INTEGER}
PASSKEY = {"trials": INTEGER, "digits": INTEGER, "haystack": TEXT, "chat_template": TEXT}
# Values that may be null in the tool's output (an interval of one unit, no eviction).
NULLABLE = {"low", "high", "mean", "ms_per_eviction"}


def type_name(types):
    return {NUMBER: "a number", INTEGER: "an integer", TEXT: "a string", LIST: "a list",
            BOOL: "true or false"}[types]


def check(value, spec, where, path):
    """Raises InputError naming `where` and the dotted field when `value` does not fit `spec`."""
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            raise InputError(f"{where}: field '{path}' is not an object")
        for key, sub in spec.items():
            name = f"{path}.{key}" if path else key
            if key not in value:
                raise InputError(f"{where}: field '{name}' is missing")
            if value[key] is None and key in NULLABLE:
                continue
            check(value[key], sub, where, name)
        return
    # bool is an int in Python: an integer field holding true is still wrong.
    if isinstance(value, bool) and spec is not BOOL or not isinstance(value, spec):
        raise InputError(f"{where}: field '{path}' is {json.dumps(value)[:40]}, not "
                         f"{type_name(spec)}")


def read_cells(path):
    """The cells of one JSON-lines file, each checked, with "_where" (file:line) added."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text (eviction_eval --json writes JSON lines)")
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror}")
    cells = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            cell = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{where}: not a JSON line ({error.msg} at column {error.colno}); "
                             "eviction_eval --json writes one object a line")
        if not isinstance(cell, dict):
            raise InputError(f"{where}: not a JSON object")
        if cell.get("schema") != SCHEMA:
            raise InputError(f"{where}: schema {json.dumps(cell.get('schema'))}, "
                             f"expected \"{SCHEMA}\"")
        check(cell, CELL, where, "")
        for i, text in enumerate(cell["run"]["texts"]):
            check(text, {"path": TEXT}, where, f"run.texts[{i}]")
        for run, spec in RUN_SPECS.items():
            if cell.get(run) is not None:
                check(cell[run], spec, where, run)
        if cell.get("retrieval") is not None:
            for i, row in enumerate(cell["retrieval"]["grid"]):
                check(row, GRID_ROW, where, f"retrieval.grid[{i}]")
            check(cell["run"], {"passkey": PASSKEY}, where, "run")
        cell["_where"] = where
        cells.append(cell)
    if not cells:
        raise InputError(f"{path}: no cells (an empty file)")
    return cells


def same_model(a, b):
    """By sha256 where both runs hashed the model (not with --no-hash), else by file name."""
    sha_a, sha_b = a["run"]["model_sha256"], b["run"]["model_sha256"]
    if sha_a and sha_b:
        return sha_a == sha_b
    return os.path.basename(a["run"]["model"]) == os.path.basename(b["run"]["model"])


def model_name(cell):
    """The model's file name and sha256 prefix, as the plots name it."""
    run = cell["run"]
    sha = run["model_sha256"]
    return os.path.basename(run["model"]) + (f" (sha256 {sha[:12]}…)" if sha else "")


def same_settings(cells, what, fields):
    """Raises InputError when cells plotted together ran with different settings."""
    def value(cell):
        run = cell["run"]
        return tuple(json.dumps(run.get(f), sort_keys=True) for f in fields)
    first = cells[0]
    for cell in cells[1:]:
        if value(cell) != value(first):
            differing = [f for f, a, b in zip(fields, value(first), value(cell)) if a != b]
            raise InputError(
                f"{first['_where']} and {cell['_where']}: {what} with different run."
                f"{differing[0]} ({first['run'].get(differing[0])!r} and "
                f"{cell['run'].get(differing[0])!r}); plot them separately")


def merge(cells):
    """The cells of each run, a (policy, budget) cell's runs possibly from different lines. Raises
    InputError when a run of a cell is given twice, or when cells plotted together come from
    different models or ran with different settings."""
    for cell in cells[1:]:
        if not same_model(cell, cells[0]):
            raise InputError(
                f"{cells[0]['_where']} and {cell['_where']}: different models "
                f"({model_name(cells[0])} and {model_name(cell)}); plot them separately")
    same_settings(cells, "cells", ["kv_type", "kv_bytes_per_slot"])
    merged = {}
    for cell in cells:
        key = (cell["policy"], cell["budget_slots"])
        entry = merged.setdefault(key, {"cells": {}})
        for run in RUNS:
            if cell.get(run) is None:
                continue
            if run in entry["cells"]:
                raise InputError(
                    f"{entry['cells'][run]['_where']} and {cell['_where']}: {run} results of "
                    f"'{cell['policy']}' at budget {key[1]} twice")
            entry["cells"][run] = cell
    by_run = {run: [e["cells"][run] for e in merged.values() if run in e["cells"]]
              for run in RUNS}
    text_fields = ["texts", "window_tokens", "windows_per_text", "block_tokens",
                   "bootstrap_resamples", "interval_level", "seed"]
    if by_run["streaming"]:
        same_settings(by_run["streaming"], "streaming results", text_fields + ["evict_every"])
    if by_run["continuation"]:
        same_settings(by_run["continuation"], "continuation results",
                      text_fields + ["prefix_tokens", "continue_tokens", "batch"])
    if by_run["retrieval"]:
        same_settings(by_run["retrieval"], "retrieval results", ["passkey"])
    if by_run["cost"]:
        same_settings(by_run["cost"], "cost results",
                      ["window_tokens", "cost_tokens", "batch", "device"])
    return by_run


# ---------------------------------------------------------------------------------------------
# Plotting

def mib_text(nbytes):
    mib = nbytes / MIB
    return f"{mib:.3g}" if mib >= 0.01 else f"{mib:.2g}"


def short_list(values, most=3):
    values = list(dict.fromkeys(values))
    return ", ".join(values[:most]) + (f" and {len(values) - most} more" if len(values) > most
                                       else "")


class Style:
    """One colour and marker per policy, from the sorted names, so every plot agrees."""

    MARKERS = "osD^vP*Xh<>p"

    def __init__(self, policies, plt):
        names = sorted(set(policies))
        cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
        self.colour = {n: cmap(i % cmap.N) for i, n in enumerate(names)}
        self.marker = {n: self.MARKERS[i % len(self.MARKERS)] for i, n in enumerate(names)}


def footnote(cells, extra=""):
    """Model, its sha256 prefix, weights, KV type, texts, device, commit and date of the cells."""
    runs = [c["run"] for c in cells]
    model = os.path.basename(runs[0]["model"])
    sha = runs[0]["model_sha256"]
    texts = short_list(os.path.basename(t["path"]) for r in runs for t in r["texts"])
    line1 = (f"model {model} (sha256 {sha[:12] + '…' if sha else 'not computed'}, "
             f"{runs[0]['weight_types']} weights), {runs[0]['kv_type']} KV cache"
             + (f"; texts: {texts}" if texts else ""))
    line2 = (f"{short_list(r['device'] for r in runs)}; commit "
             f"{short_list(r['commit'][:12] for r in runs)}; "
             f"{short_list(r['date'] for r in runs)}; edgelm eviction_eval")
    return "\n".join(x for x in (extra, line1, line2) if x)


def place_axes(fig, nrows, ncols, margins, gaps):
    """Positions a figure's subplot grid by margins (left, right, top, bottom) and gaps (between
    columns, between rows) in inches, so labels keep their room whatever the figure's size."""
    width, height = fig.get_size_inches()
    left, right, top, bottom = margins
    axes_w = (width - left - right - (ncols - 1) * gaps[0]) / ncols
    axes_h = (height - top - bottom - (nrows - 1) * gaps[1]) / nrows
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height,
                        bottom=bottom / height, wspace=gaps[0] / axes_w, hspace=gaps[1] / axes_h)


def finish(fig, path, dpi, written):
    try:
        fig.savefig(path, dpi=dpi)
    except OSError as error:
        raise InputError(f"{path}: cannot write: {error.strerror}")
    fig.clf()
    written.append(path)


def quality_figure(plt, style, cells, run, summary, out_path, dpi, written):
    """Three panels against KV bytes: ΔNLL, KL(full ‖ policy), top-1 agreement."""
    first = cells[0]["run"]
    level = int(round(100 * first["interval_level"]))
    policies = sorted({c["policy"] for c in cells})
    # The legend (policies and the full cache) in rows of 8 below the title; the panels below it.
    legend_columns = min(len(policies) + 1, 8)
    legend_rows = math.ceil((len(policies) + 1) / legend_columns)
    height = 6.15 + 0.25 * legend_rows
    fig, axes = plt.subplots(1, 3, figsize=(16, height))
    place_axes(fig, 1, 3, (0.95, 0.15, 0.85 + 0.25 * legend_rows, 1.6), (0.95, 0))
    panels = [("delta_nll",
               "mean ΔNLL (policy − full), nats/token\nfull cache = 0 by definition",
               "ΔNLL of the next token", 0.0),
              ("kl", "mean KL(full ‖ policy), nats/token\nfull cache = 0 by definition",
               "KL divergence from the full cache", 0.0),
              ("top1", "top-1 agreement with the full cache\nfull cache = 1 by definition",
               "same most likely next token", 1.0)]
    # What the full cache holds at the end, against which a budget's share is given.
    if run == "streaming":
        full_tokens = first["window_tokens"]
        of_what = f"share of the {full_tokens}-token window"
    else:
        full_tokens = first["prefix_tokens"] + first["continue_tokens"]
        of_what = (f"share of the {full_tokens} tokens ({first['prefix_tokens']} prefilled + "
                   f"{first['continue_tokens']} continued)")
    full_bytes = full_tokens * first["kv_bytes_per_slot"]
    # Each policy's points are shifted a little along the log axis so error bars do not overlap.
    step = min(0.05, 0.3 / max(1, len(policies)))
    for ax, (metric, ylabel, title, reference) in zip(axes, panels):
        for i, policy in enumerate(policies):
            rows = sorted((c for c in cells if c["policy"] == policy),
                          key=lambda c: c["budget_bytes"])
            shift = 2.0 ** ((i - (len(policies) - 1) / 2) * step)
            xs, ys, err_x, err_y, err_low, err_high = [], [], [], [], [], []
            for c in rows:
                interval = c[run][summary][metric]
                if interval["mean"] is None:
                    continue
                x = c["budget_bytes"] / MIB * shift
                xs.append(x)
                ys.append(interval["mean"])
                if interval["low"] is not None and interval["high"] is not None:
                    err_x.append(x)
                    err_y.append(interval["mean"])
                    err_low.append(max(0.0, interval["mean"] - interval["low"]))
                    err_high.append(max(0.0, interval["high"] - interval["mean"]))
            ax.plot(xs, ys, marker=style.marker[policy], color=style.colour[policy], lw=1.6,
                    ms=6, label=policy, zorder=3)
            if err_x:
                ax.errorbar(err_x, err_y,
                            yerr=[err_low, err_high], fmt="none", ecolor=style.colour[policy],
                            elinewidth=1.1, capsize=3, alpha=0.8, zorder=2)
        ax.axhline(reference, color="0.35", lw=1, ls="--", zorder=1)
        ax.plot([full_bytes / MIB], [reference], marker="*", ms=13, color="black", ls="none",
                label=f"full cache ({full_tokens} tokens)", zorder=4)
        ax.set_xscale("log")
        budgets = sorted({(c["budget_bytes"], c["budget_slots"], c["budget_slots"] / full_tokens)
                          for c in cells})
        ticks = [b / MIB for b, _, _ in budgets] + [full_bytes / MIB]
        labels = [f"{mib_text(b)}\n{s} slots\n{100 * share:.3g} %"
                  for b, s, share in budgets] + [f"{mib_text(full_bytes)}\nfull\n100 %"]
        ax.set_xticks(ticks)
        ax.set_xticklabels(labels, fontsize=8)
        ax.minorticks_off()
        lo, hi = min(ticks), max(ticks)
        ax.set_xlim(lo / 1.35, hi * 1.35)
        ax.set_xlabel("KV cache: MiB of K+V (log scale), slots per layer and kv head,\n"
                      + of_what, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.45 / height),
               ncol=legend_columns, fontsize=9, frameon=False)
    model = os.path.basename(first["model"])
    if run == "streaming":
        which = ("predictions after each window's first eviction" if summary == "paired_filled"
                 else "every prediction")
        units = cells[0][run][summary]["units"]
        heading = f"{model}: streaming quality against KV cache size"
        detail = (f"streaming {first['windows_per_text']} window(s) of {first['window_tokens']} "
                  f"tokens per text, evicting before each {first['evict_every']}-token step; "
                  f"{which}; {level} % paired bootstrap intervals ({first['bootstrap_resamples']}"
                  f" resamples of {units} blocks of {first['block_tokens']} predictions)")
    else:
        heading = f"{model}: compress-then-continue quality against KV cache size"
        detail = (f"{cells[0][run]['windows']} sequences: {first['prefix_tokens']} tokens "
                  f"prefilled (the policy compresses or evicts), then {first['continue_tokens']}"
                  f" teacher-forced decode steps scored; {level} % paired bootstrap intervals "
                  f"({first['bootstrap_resamples']} resamples over sequences)")
    fig.suptitle(heading, fontsize=13, y=0.985)
    fig.text(0.5, 0.005, footnote(cells, detail), ha="center", va="bottom", fontsize=8,
             color="0.25")
    finish(fig, out_path, dpi, written)


PLACEMENTS = {"end": "after the document", "both": "before and after the document"}


def retrieval_figures(plt, np, style, cells, out_dir, dpi, written):
    """Per budget, one heat map per policy (depth × length) beside the full cache's."""
    from matplotlib.patches import Rectangle

    passkey = cells[0]["run"]["passkey"]
    for budget in sorted({c["budget_slots"] for c in cells}):
        at_budget = sorted((c for c in cells if c["budget_slots"] == budget),
                           key=lambda c: c["policy"])
        grid0 = at_budget[0]["retrieval"]["grid"]
        every = [g for c in at_budget for g in c["retrieval"]["grid"]]
        lengths = sorted({g["length"] for g in every})
        depths = sorted({g["depth"] for g in every})
        placements = list(dict.fromkeys(g["placement"] for g in every))
        panels = [None] + at_budget  # None: the full cache
        ncols = min(len(panels), 7)
        rows_per_placement = math.ceil(len(panels) / ncols)
        nrows = rows_per_placement * len(placements)
        # Inches: each heat map's cells stay readable, the gaps hold tick labels and titles.
        axes_w, axes_h = max(1.3, 0.6 * len(lengths)), max(1.0, 0.4 * len(depths))
        gap_w, gap_h = 0.65, 0.95
        margins = (1.05, 1.15, 1.55, 1.15)
        width = margins[0] + margins[1] + ncols * axes_w + (ncols - 1) * gap_w
        height = margins[2] + margins[3] + nrows * axes_h + (nrows - 1) * gap_h
        width = max(width, 8.0)
        fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False)
        place_axes(fig, nrows, ncols, margins, (gap_w, gap_h))
        for ax in axes.flat:
            ax.set_visible(False)
        image = None
        for p, placement in enumerate(placements):
            for k, cell in enumerate(panels):
                ax = axes[p * rows_per_placement + k // ncols][k % ncols]
                ax.set_visible(True)
                source = [g for g in (cell["retrieval"]["grid"] if cell else grid0)
                          if g["placement"] == placement]
                accuracy = np.full((len(depths), len(lengths)), np.nan)
                texts, failed = {}, set()
                for g in source:
                    r, col = depths.index(g["depth"]), lengths.index(g["length"])
                    if cell is None:
                        if g["trials"] > 0:
                            accuracy[r, col] = g["full_correct"] / g["trials"]
                        texts[r, col] = f"{g['full_correct']}/{g['trials']}"
                    elif g["full_failed"]:
                        texts[r, col] = "—"
                    else:
                        accuracy[r, col] = g["correct"] / g["scored"]
                        texts[r, col] = f"{g['correct']}/{g['scored']}"
                    if g["full_failed"]:
                        failed.add((r, col))
                image = ax.imshow(accuracy, cmap="viridis", vmin=0, vmax=1, aspect="auto",
                                  interpolation="nearest")
                for r, col in failed:
                    ax.add_patch(Rectangle((col - 0.5, r - 0.5), 1, 1, lw=0, hatch="///",
                                           facecolor="0.85" if cell else "none",
                                           edgecolor="0.45"))
                for (r, col), text in texts.items():
                    dark = not np.isnan(accuracy[r, col]) and accuracy[r, col] < 0.6
                    ax.text(col, r, text, ha="center", va="center", fontsize=9,
                            fontweight="bold", color="white" if dark else "black")
                ax.set_xticks(range(len(lengths)))
                ax.set_xticklabels([str(x) for x in lengths], fontsize=8)
                ax.set_yticks(range(len(depths)))
                ax.set_yticklabels([f"{d:g}" for d in depths], fontsize=8)
                if cell is None:
                    right = sum(g["full_correct"] for g in source)
                    total = sum(g["trials"] for g in source)
                    title, colour = f"full cache\n{right}/{total} right", "black"
                else:
                    right = sum(g["correct"] for g in source)
                    total = sum(g["scored"] for g in source)
                    title = f"{cell['policy']}\n{right}/{total} right" if total else \
                        f"{cell['policy']}\nnone scored"
                    colour = style.colour[cell["policy"]]
                ax.set_title(title, fontsize=9, color=colour)
                for spine in ax.spines.values():
                    spine.set_edgecolor(colour)
                    spine.set_linewidth(2)
                if k % ncols == 0:
                    ax.set_ylabel("key depth", fontsize=8)
                    if len(placements) > 1 and k == 0:
                        ax.annotate(f"question: {placement}", xy=(0, 0.5), xycoords="axes fraction",
                                    xytext=(-0.75 * 72, 0), textcoords="offset points",
                                    rotation=90, ha="center", va="center", fontsize=9,
                                    fontweight="bold")
                ax.set_xlabel("document tokens", fontsize=8)
        cax = fig.add_axes([1 - 0.9 / width, margins[3] / height, 0.15 / width,
                            1 - (margins[2] + margins[3]) / height])
        fig.colorbar(image, cax=cax).set_label("accuracy", fontsize=8)
        first = at_budget[0]
        fig.suptitle(
            f"{os.path.basename(first['run']['model'])}: passkey retrieval at a budget of "
            f"{budget} slots ({mib_text(first['budget_bytes'])} MiB of K+V)", fontsize=12,
            y=1 - 0.12 / height, va="top")
        explained = "; ".join(f"'{p}': asked {PLACEMENTS.get(p, p)}" for p in placements)
        fig.text(0.5, 1 - 0.48 / height,
                 "each cell: right answers / trials that the full cache answered right "
                 "(full cache: right / trials)\nhatched, —: the full cache never answered that "
                 f"group right, so it is not scored\nquestion {explained}", ha="center",
                 va="top", fontsize=8)
        detail = (f"{passkey['trials']} key(s) of {passkey['digits']} digits per group; haystack "
                  f"{passkey['haystack']}; chat template {passkey['chat_template'] or 'none'}")
        fig.text(0.5, 0.08 / height, footnote(at_budget, detail), ha="center", va="bottom",
                 fontsize=7, color="0.25", wrap=True)
        finish(fig, os.path.join(out_dir, f"retrieval_{budget}slots.png"), dpi, written)


COMPONENTS = [("score_seconds", "scoring (policy score())", 1.0, ""),
              ("select_seconds", "selection (top-k per kv head)", 0.55, "///"),
              ("compact_seconds", "compaction (kv_compact)", 0.3, "..."),
              (None, "other (synchronisation, bookkeeping)", 0.0, "")]


def time_figure(plt, style, by_run, out_path, dpi, written):
    """Stacked bars of ms per eviction for the streaming run and the cost run's decode steps."""
    from matplotlib.patches import Patch

    panels = []
    if by_run["streaming"]:
        run = by_run["streaming"][0]["run"]
        panels.append((by_run["streaming"], lambda c: c["streaming"]["evictions"],
                       f"streaming: before each {run['evict_every']}-token step"))
    if by_run["cost"]:
        run = by_run["cost"][0]["run"]
        panels.append((by_run["cost"], lambda c: c["cost"]["decode_evictions"],
                       f"cost run: {run['cost_tokens']} decode steps after a "
                       f"{run['window_tokens']}-token prefill"))
    # Two legends below the title, the policies' in rows of 8, then the panels.
    n_policies = len({c["policy"] for cells, _, _ in panels for c in cells})
    policy_rows = math.ceil(n_policies / 8)
    height = 6.15 + 0.25 * policy_rows
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels) + 1, height),
                             squeeze=False)
    place_axes(fig, 1, len(panels), (0.85, 0.15, 1.2 + 0.25 * policy_rows, 1.3), (0.9, 0))
    all_cells = []
    for ax, (cells, evictions_of, title) in zip(axes[0], panels):
        all_cells += cells
        budgets = sorted({(c["budget_slots"], c["budget_bytes"]) for c in cells})
        policies = sorted({c["policy"] for c in cells})
        width = 0.8 / len(policies)
        for b, (slots, _) in enumerate(budgets):
            for i, policy in enumerate(policies):
                match = [c for c in cells if c["policy"] == policy and c["budget_slots"] == slots]
                x = b - 0.4 + width * (i + 0.5)
                if not match or evictions_of(match[0])["count"] == 0:
                    ax.text(x, 0, "none", rotation=90, ha="center", va="bottom", fontsize=7)
                    continue
                e = evictions_of(match[0])
                per = 1e3 / e["count"]
                parts = [e[key] * per for key, _, _, _ in COMPONENTS[:3]]
                parts.append(max(0.0, e["seconds"] * per - sum(parts)))
                bottom = 0.0
                colour = style.colour[policy]
                for value, (_, _, alpha, hatch) in zip(parts, COMPONENTS):
                    ax.bar(x, value, width * 0.92, bottom=bottom,
                           color=colour if alpha > 0 else "white",
                           alpha=alpha if alpha > 0 else 1.0, hatch=hatch, edgecolor=colour,
                           lw=0.8)
                    bottom += value
        ax.set_xticks(range(len(budgets)))
        ax.set_xticklabels([f"{s} slots\n{mib_text(nb)} MiB" for s, nb in budgets], fontsize=9)
        ax.set_xlim(-0.6, len(budgets) - 0.4)
        ax.set_xlabel("budget (slots per layer and kv head, K+V MiB)", fontsize=9)
        ax.set_ylabel("ms per eviction (all layers)", fontsize=9)
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    policies = sorted({c["policy"] for c in all_cells})
    policy_handles = [Patch(facecolor=style.colour[p], edgecolor=style.colour[p], label=p)
                      for p in policies]
    part_handles = [Patch(facecolor="0.3" if alpha > 0 else "white", alpha=alpha or 1.0,
                          hatch=hatch, edgecolor="0.3", label=label)
                    for _, label, alpha, hatch in COMPONENTS]
    fig.legend(handles=policy_handles, loc="upper center",
               bbox_to_anchor=(0.5, 1 - 0.45 / height), ncol=min(n_policies, 8), fontsize=9,
               frameon=False)
    fig.legend(handles=part_handles, loc="upper center",
               bbox_to_anchor=(0.5, 1 - (0.55 + 0.25 * policy_rows) / height),
               ncol=len(part_handles), fontsize=9, frameon=False)
    model = os.path.basename(all_cells[0]["run"]["model"])
    fig.suptitle(f"{model}: time per eviction", fontsize=13, y=0.985)
    fig.text(0.5, 0.005, footnote(all_cells, "each bar: the run's eviction time over its "
                                             "evictions, split as the CacheManager times it"),
             ha="center", va="bottom", fontsize=8, color="0.25")
    finish(fig, out_path, dpi, written)


def plot(by_run, out_dir, filled, dpi):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError as error:
        raise InputError(f"{error.name} is not installed (Debian: python3-matplotlib "
                         "python3-numpy; scripts/install_deps.sh installs them)")
    style = Style([c["policy"] for cells in by_run.values() for c in cells], plt)
    written = []
    notes = []
    if by_run["streaming"]:
        quality_figure(plt, style, by_run["streaming"], "streaming",
                       "paired_filled" if filled else "paired",
                       os.path.join(out_dir, "quality_streaming.png"), dpi, written)
    else:
        notes.append("no streaming results: quality_streaming.png not written")
    if by_run["continuation"]:
        quality_figure(plt, style, by_run["continuation"], "continuation", "paired",
                       os.path.join(out_dir, "quality_continuation.png"), dpi, written)
    else:
        notes.append("no continuation results: quality_continuation.png not written")
    if by_run["retrieval"]:
        retrieval_figures(plt, np, style, by_run["retrieval"], out_dir, dpi, written)
    else:
        notes.append("no retrieval results: retrieval_<B>slots.png not written")
    if by_run["streaming"] or by_run["cost"]:
        time_figure(plt, style, by_run, os.path.join(out_dir, "eviction_time.png"), dpi, written)
    else:
        notes.append("no streaming or cost results: eviction_time.png not written")
    plt.close("all")
    return written, notes


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are one line and exit code 1, like the other bad input."""

    def error(self, message):
        print(f"{PROG}: {message}", file=sys.stderr)
        sys.exit(1)


def main():
    parser = ArgumentParser(
        prog="plot_eviction.py",
        description="PNG plots of eviction_eval --json output (one or more JSON-lines files).")
    parser.add_argument("files", nargs="+", metavar="FILE.jsonl")
    parser.add_argument("-o", "--out-dir", required=True, help="folder for the PNGs (created)")
    parser.add_argument("--filled", action="store_true",
                        help="streaming quality over the predictions after each window's first "
                             "eviction (paired_filled) instead of all (paired)")
    parser.add_argument("--dpi", type=int, default=120, help="resolution of the PNGs (120)")
    args = parser.parse_args()
    try:
        if args.dpi < 30 or args.dpi > 600:
            raise InputError(f"--dpi {args.dpi}: from 30 to 600")
        cells = [cell for path in args.files for cell in read_cells(path)]
        by_run = merge(cells)
        if not any(by_run.values()):
            raise InputError("the cells hold no streaming, continuation, retrieval or cost "
                             "results: nothing to plot")
        try:
            os.makedirs(args.out_dir, exist_ok=True)
        except OSError as error:
            raise InputError(f"-o/--out-dir {args.out_dir}: {error.strerror}")
        written, notes = plot(by_run, args.out_dir, args.filled, args.dpi)
    except InputError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 1
    for note in notes:
        print(f"{PROG}: note: {note}", file=sys.stderr)
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
