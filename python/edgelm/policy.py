"""Eviction policies scored in Python.

A policy is an object with a score() method; the cache manager calls it for every layer it evicts
and keeps the highest-scoring slots of each kv head (ties: the newer token). This is the slow
path: each call takes the GIL and crosses into Python, so it is for trying an idea before writing
it in C++ (docs/adding_a_policy.md), not for speed.

    class Tova(edgelm.Policy):
        stats = "last"          # the newest query's attention to each slot, kept per slot
        def score(self, layer, keys, values, stats):
            return stats[:, :, 0].T            # [n_kv_heads, n_slots]

    session = model.session(Tova(), budget=128)
"""

from __future__ import annotations


class Policy:
    """Base class of the policies scored in Python (subclassing it is optional: any object with
    score() will do).

    stats: what the manager keeps per (slot, kv head) for the policy, in one float32 channel,
      moved with the slots when the cache is compacted:
      "last" (default): the attention mass the newest query of each forward step paid the slot,
        summed over the query heads of the kv head (what TOVA ranks by);
      "sum": the mass of every query, accumulated over the steps (H2O's);
      None: nothing (scores from keys, values and positions alone).
    name: how the policy is reported (default: the class name).

    An observe(layer, phase, mass, stats) method, when defined, replaces the rule of `stats`: it
    receives the step's mass, float32 [n_kv_heads, n_slots] (read-only), and the layer's
    statistics, float32 [n_slots, n_kv_heads, 1], to update in place. The forward step has run by
    then: an exception it raises leaves that step's tokens in the cache.
    """

    stats = "last"

    def score(self, layer, keys, values, stats):
        """Scores every slot of one layer: returns float32 [n_kv_heads, n_slots], higher kept first
        (float("inf") promises to keep a slot).

        layer: layer (its index), positions (int32 [n_slots, n_kv_heads], logical positions),
          next_position, incoming (tokens the coming step appends), keep (slots the manager keeps
          per kv head) and phase ("prefill" or "decode").
        keys, values: [n_slots, n_kv_heads, head_dim] in the cache's type (float16 by default), K
          after RoPE; stats: [n_slots, n_kv_heads, 1] float32, or None with stats = None.
        All arrays are read-only views of the cache's memory, valid during the call only: copy
        what must be kept. An exception raised here reaches the caller of the step (append,
        generate, evict) and the cache is left as it was: the manager scores every layer before it
        compacts any.
        """
        raise NotImplementedError("a Policy must define score(layer, keys, values, stats)")
