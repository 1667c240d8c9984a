"""eviction_eval from Python: each (policy, budget) cell beside the full cache over the same
tokens, returned as the records eviction_eval writes with --json (one dict per cell, the same
fields), as a pandas DataFrame when pandas is installed.
"""

from __future__ import annotations

import json
from typing import Iterable, Optional, Sequence, Union

from ._edgelm import _evaluate

__all__ = ["evaluate", "flatten"]


def flatten(record: dict, prefix: str = "") -> dict:
    """A record's scalar fields with nested names joined by '.', as eviction_eval's CSV has them
    (arrays left out)."""
    out = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        elif not isinstance(value, list):
            out[name] = value
    return out


def evaluate(
    model,
    texts: Union[str, Sequence[str]],
    policies: Iterable[str],
    budgets: Iterable[int],
    *,
    runs: Sequence[str] = ("streaming",),
    window_tokens: int = 2048,
    windows: int = 1,
    evict_every: int = 1,
    frame: Optional[bool] = None,
    progress: bool = False,
    markdown: bool = False,
    **settings,
):
    """Runs eviction_eval's streaming, compress-then-continue and cost runs (`runs`) on `model`
    for every policy (registry names, with +protect / +pyramid) and budget (slots per layer and kv
    head) over the text files `texts`, each cut into `windows` windows of `window_tokens` tokens.
    Other settings take eviction_eval's flag names with underscores: batch, sink_tokens,
    recent_share, snapkv_window, snapkv_kernel, snapkv_pool, pyramid_beta, prefix_tokens,
    continue_tokens, block_tokens, bootstrap, seed, floor_policy, cost_tokens.

    Returns the records (one dict per cell, eviction_eval's JSON objects) as a pandas DataFrame of
    their flattened scalar fields when pandas is installed (frame=None) or asked for (frame=True),
    else as the list of dicts; with markdown=True, a pair (records, eviction_eval's markdown
    summary). Retrieval (passkey) runs only in the tool.
    """
    paths = [texts] if isinstance(texts, str) else list(texts)
    policies = list(policies)
    budgets = [int(b) for b in budgets]
    settings = dict(settings, window_tokens=window_tokens, windows=windows,
                    evict_every=evict_every)
    command = "edgelm.eviction.evaluate(" + ", ".join(
        [repr(model.path), repr(paths), repr(policies), repr(budgets), f"runs={list(runs)!r}"]
        + [f"{k}={v!r}" for k, v in sorted(settings.items())]) + ")"
    lines, summary = _evaluate(model, paths, policies, budgets, list(runs), settings, command,
                               progress)
    records = [json.loads(line) for line in lines]
    result = records
    if frame is not False:
        try:
            import pandas
        except ImportError:
            if frame:
                raise
        else:
            result = pandas.DataFrame([flatten(r) for r in records])
    return (result, summary) if markdown else result
