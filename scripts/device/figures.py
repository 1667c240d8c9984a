"""PNG figures from a results folder (results.load), for plot and scripts/report.py.

Each figure is drawn only when the results hold its data:

  bench_threads.png       bench t/s against threads, one panel per test (pp, tg), one line per
                          model, weight type and backend, the standard deviation as error bars
  generate_threads.png    generate's prefill and decode t/s against threads (full cache)
  generate_budget.png     generate's decode t/s against the KV budget, one line per policy,
                          backend and weight type, at the largest thread count; the full cache's
                          speed as a dashed line
  eviction_quality.png    eviction_eval's streaming ΔNLL and KL against the full cache with their
                          95 % intervals, against the KV budget, one line per policy and backend,
                          a panel per model and weight type
  perplexity.png          perplexity ± its standard error per model, weight type and backend
  foreground.png          foreground_impact's decode t/s per load, every run as a dot
"""

import os

import results as res

FIGURE_NAMES = ["bench_threads", "generate_threads", "generate_budget", "eviction_quality",
                "perplexity", "foreground"]


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise res.ResultsError("matplotlib is not installed (Debian: python3-matplotlib; "
                               "scripts/install_deps.sh installs it)")
    return plt


def spread_scale(ax, values):
    """A log axis when the values span more than 20x (CPU and GPU rows on one plot)."""
    positive = [v for v in values if v and v > 0]
    if positive and max(positive) / min(positive) > 20:
        ax.set_yscale("log")


def lines(ax, series, xlabel, ylabel):
    """series: {label: {x: (y, error or None)}}; one line per label."""
    values, ticks = [], set()
    for label, points in sorted(series.items()):
        xs = sorted(points)
        ys = [points[x][0] for x in xs]
        errors = [points[x][1] or 0.0 for x in xs]
        ax.errorbar(xs, ys, yerr=errors if any(errors) else None, marker="o", capsize=3,
                    label=label)
        values += ys
        ticks.update(xs)
    spread_scale(ax, values)
    ax.set_xticks(sorted(ticks))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)


def legend(fig, axes):
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(3, len(labels)), fontsize=8,
                   frameon=False)


def finish(plt, fig, path, dpi, rows_of_legend):
    fig.tight_layout(rect=(0, 0.04 + 0.035 * rows_of_legend, 1, 1))
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def bench_threads(plt, found, path, dpi):
    by_test = {}
    for run in found.of("bench"):
        for row in run.result:
            label = " ".join([res.model_of(row["model_filename"]), row["weight_type"],
                              row.get("backend_label") or row["backend"]])
            by_test.setdefault(row["test"], {}).setdefault(label, {})[row["n_threads"]] = (
                row["avg_ts"], row["stddev_ts"])
    if not by_test:
        return None
    tests = sorted(by_test, key=lambda t: (not t.startswith("pp"), t))
    fig, axes = plt.subplots(1, len(tests), figsize=(5.5 * len(tests), 4.4), squeeze=False)
    for ax, test in zip(axes[0], tests):
        lines(ax, by_test[test], "threads", "tokens/s")
        ax.set_title(f"bench {test}")
    legend(fig, axes[0])
    finish(plt, fig, path, dpi, (len(by_test[tests[0]]) + 2) // 3)
    return "bench: tokens/s against threads per test (error bars: standard deviation)"


def generate_threads(plt, found, path, dpi):
    runs = res.generate_rows(found, False)
    full = [run for run in runs if run.result["eviction_policy"] == "none"] or runs
    series = {"prefill": {}, "decode": {}}
    for run in full:
        r = run.result
        threads = res.threads_of(run)
        if not threads:
            continue
        label = " ".join([res.model_of(r["model"]), r["weight_type"], r["backend"]])
        if r["eviction_policy"] != "none":
            label += f" {r['eviction_policy']} {r['kv_budget']}"
        series["prefill"].setdefault(label, {})[int(threads)] = (r["prefill_tok_s"], None)
        series["decode"].setdefault(label, {})[int(threads)] = (r["decode_tok_s"], None)
    if not series["decode"]:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), squeeze=False)
    for ax, phase in zip(axes[0], ("prefill", "decode")):
        lines(ax, series[phase], "threads", "tokens/s")
        ax.set_title(f"generate: {phase}")
    legend(fig, axes[0])
    finish(plt, fig, path, dpi, (len(series["decode"]) + 2) // 3)
    return "generate: prefill and decode tokens/s against threads, full KV cache"


def generate_budget(plt, found, path, dpi):
    runs = res.generate_rows(found, False)
    if not any(run.result["eviction_policy"] != "none" for run in runs):
        return None
    # One panel per model and weight type; a colour per backend, a line style per policy; only
    # the largest thread count of each, so that threads do not multiply the lines.
    most_threads = {}
    for run in runs:
        r = run.result
        key = (res.model_of(r["model"]), r["weight_type"], r["backend"])
        most_threads[key] = max(most_threads.get(key, 0), int(res.threads_of(run) or 0))
    panels = {}
    for run in runs:
        r = run.result
        key = (res.model_of(r["model"]), r["weight_type"], r["backend"])
        if int(res.threads_of(run) or 0) != most_threads[key]:
            continue
        panel = panels.setdefault(key[:2], {})
        entry = panel.setdefault(r["backend"], {"full": None, "policies": {}})
        if r["eviction_policy"] == "none":
            entry["full"] = r["decode_tok_s"]
        else:
            entry["policies"].setdefault(r["eviction_policy"], {})[r["kv_budget"]] = (
                r["decode_tok_s"])
    keys = sorted(panels)
    columns = min(2, len(keys))
    rows = (len(keys) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(6.5 * columns, 4.6 * rows), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", "-.", ":"]
    markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
    backends = sorted({b for panel in panels.values() for b in panel})
    policies = sorted({p for panel in panels.values() for e in panel.values()
                       for p in e["policies"]})
    for index, key in enumerate(keys):
        ax = axes[index // columns][index % columns]
        budgets, values = set(), []
        for backend, entry in sorted(panels[key].items()):
            colour = colours[backends.index(backend) % len(colours)]
            for policy, points in sorted(entry["policies"].items()):
                xs = sorted(points)
                budgets.update(xs)
                values += [points[x] for x in xs]
                number = policies.index(policy)
                ax.plot(xs, [points[x] for x in xs], color=colour,
                        linestyle=styles[number % len(styles)],
                        marker=markers[number % len(markers)], label=f"{backend}: {policy}")
            if entry["full"] is not None:
                values.append(entry["full"])
                ax.axhline(entry["full"], color=colour, linestyle=":", linewidth=1.2,
                           label=f"{backend}: full cache")
        spread_scale(ax, values)
        ax.set_xticks(sorted(budgets))
        ax.set_xlabel("KV budget (slots per layer and kv head)")
        ax.set_ylabel("decode tokens/s")
        ax.set_title(f"{key[0]} {key[1]}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    for index in range(len(keys), rows * columns):
        axes[index // columns][index % columns].axis("off")
    fig.suptitle("generate: decode speed under a KV budget, at the most threads run per backend")
    finish(plt, fig, path, dpi, 0)
    return ("generate: decode tokens/s against the KV budget per policy and backend (dotted: the "
            "full cache)")


def eviction_quality(plt, found, path, dpi):
    panels = {}
    seen = set()
    for run, cell in res.eviction_cells(found):
        info = cell["run"]
        paired = (cell.get("streaming") or {}).get("paired")
        if not paired:
            continue
        key = (res.model_of(info["model"]), info["weight_types"], info["backend"],
               cell["policy"], cell["budget_slots"])
        if key in seen:  # the same cell at another thread count: the same tokens and values
            continue
        seen.add(key)
        panel = panels.setdefault((key[0], key[1]), {"delta_nll": {}, "kl": {}})
        label = f"{cell['policy']} ({info['backend']})"
        for metric in ("delta_nll", "kl"):
            interval = paired[metric]
            if interval["mean"] is None:
                continue
            low = interval["low"] if interval["low"] is not None else interval["mean"]
            high = interval["high"] if interval["high"] is not None else interval["mean"]
            # Asymmetric intervals: matplotlib takes (below, above) distances.
            panel[metric].setdefault(label, {})[cell["budget_slots"]] = (
                interval["mean"], (interval["mean"] - low, high - interval["mean"]))
    if not panels:
        return None
    keys = sorted(panels)
    fig, axes = plt.subplots(len(keys), 2, figsize=(11, 3.8 * len(keys)), squeeze=False)
    for row, key in enumerate(keys):
        for column, (metric, name, short) in enumerate((
                ("delta_nll", "ΔNLL (nats/token)", "ΔNLL"), ("kl", "KL(full ‖ policy)", "KL"))):
            ax = axes[row][column]
            labels = sorted(panels[key][metric])
            budgets = sorted({x for points in panels[key][metric].values() for x in points})
            # Lines side by side around each budget, so equal values (the same cell on two
            # backends) stay visible.
            step = 0.03 * (budgets[-1] - budgets[0] or budgets[0])
            for index, label in enumerate(labels):
                points = panels[key][metric][label]
                xs = sorted(points)
                shift = (index - (len(labels) - 1) / 2) * step
                ys = [points[x][0] for x in xs]
                errors = [[points[x][1][0] for x in xs], [points[x][1][1] for x in xs]]
                ax.errorbar([x + shift for x in xs], ys, yerr=errors, marker="o", capsize=3,
                            label=label)
            ax.set_xticks(budgets)
            if metric == "delta_nll":
                ax.axhline(0.0, color="gray", linewidth=0.8)
            ax.set_xlabel("KV budget (slots per layer and kv head)")
            ax.set_ylabel(name)
            ax.set_title(f"{key[0]} {key[1]}: streaming {short}")
            ax.grid(True, alpha=0.3)
    legend(fig, axes[0])
    finish(plt, fig, path, dpi, (len(panels[keys[0]]["kl"]) + 2) // 3)
    return ("eviction_eval: streaming ΔNLL and KL against the full cache per policy "
            "(error bars: 95 % bootstrap intervals)")


def perplexity(plt, found, path, dpi):
    bars = {}
    for run in found.of("perplexity"):
        r = run.result
        key = (res.model_of(r["model"]), r["weight_type"], r["backend"])
        bars.setdefault(key, (r["ppl"], r["ppl_stderr"]))
    if not bars:
        return None
    keys = sorted(bars)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(keys) + 2), 4.4))
    ax.bar(range(len(keys)), [bars[k][0] for k in keys], yerr=[bars[k][1] for k in keys],
           capsize=4, color="#4c72b0")
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels(["\n".join(k) for k in keys], fontsize=8)
    ax.set_ylabel("perplexity")
    ax.set_title("perplexity per weight type and backend")
    ax.grid(True, axis="y", alpha=0.3)
    finish(plt, fig, path, dpi, 0)
    return "perplexity ± standard error per model, weight type and backend"


def foreground(plt, found, path, dpi):
    groups = res.foreground_groups(found)
    if not groups:
        return None
    labels, medians, dots = [], [], []
    for key, loads in sorted(groups.items()):
        for load, speeds in sorted(loads.items(), key=lambda item: item[0] != "none"):
            model, weights, backend, threads = key
            labels.append(f"{model} {weights}\n{backend}, {threads} threads\nload: {load}")
            medians.append(sorted(speeds)[len(speeds) // 2])
            dots.append(speeds)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.4 * len(labels) + 2), 4.4))
    ax.bar(range(len(labels)), medians, color="#55a868", alpha=0.7)
    for i, speeds in enumerate(dots):
        ax.plot([i] * len(speeds), speeds, "o", color="black", markersize=4)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("decode tokens/s")
    ax.set_title("decode speed without and with another load")
    ax.grid(True, axis="y", alpha=0.3)
    finish(plt, fig, path, dpi, 0)
    return "foreground_impact: decode tokens/s per load (bar: median, dots: runs)"


def draw(found, out_dir, dpi=110):
    """Writes every figure the results fill into out_dir; returns [(path, caption)]."""
    plt = pyplot()
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for name in FIGURE_NAMES:
        path = os.path.join(out_dir, name + ".png")
        caption = globals()[name](plt, found, path, dpi)
        if caption:
            written.append((path, caption))
    return written
