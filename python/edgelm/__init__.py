"""edgelm from Python: models, teacher-forced logits, generation under any eviction policy,
KV caches as numpy views, eviction policies scored in Python, and eviction_eval's cells.

    import edgelm
    model = edgelm.Model.load("build/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    logits = model.logits(model.tokenize("The cat sat"))        # float32 [n, vocab]
    for token in model.generate("What is the capital of France?", 32, greedy=True):
        print(token.text, end="")

docs/python.md describes every part.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple, Optional, Sequence, Union

from ._edgelm import Error, Model, Session
from .policy import Policy
from . import eviction

__all__ = ["Error", "Model", "Session", "Policy", "Token", "eviction"]


class Token(NamedTuple):
    """One generated token: its id and the text it completes (often empty while the bytes of a
    character are split across tokens)."""

    id: int
    text: str


def _session_generate(
    self: Session,
    n: int = 128,
    *,
    greedy: bool = False,
    temperature: float = 0.8,
    top_k: int = 40,
    top_p: float = 0.95,
    min_p: float = 0.05,
    repeat_penalty: float = 1.0,
    repeat_window: int = 64,
    seed: int = 0,
    stop_ids: Optional[Sequence[int]] = None,
    ignore_eos: bool = False,
) -> Iterator[Token]:
    """Samples up to n tokens after what the session holds, one per iteration. It stops early at a
    stop id (default: the model's end-of-sequence ids), or when the logical context is used up."""
    stops = list(self.model.eos_ids if stop_ids is None else stop_ids)
    tokens = self._generate(n, greedy, temperature, top_k, top_p, min_p, repeat_penalty,
                            repeat_window, seed, stops, ignore_eos)
    for token_id, text in tokens:
        yield Token(token_id, text)


def _model_session(self: Model, policy=None, budget: Optional[int] = None,
                   context: Optional[int] = None, **options) -> Session:
    """A Session over this model: a KV cache with an eviction policy (a registry name such as
    "tova", a Policy object scored in Python, or None) under a budget of slots per layer and kv
    head; options are EvictionConfig's fields (window, sink_tokens, ...)."""
    return Session(self, policy, budget, context, **options)


def _model_generate(
    self: Model,
    prompt: Union[str, Sequence[int]],
    n: int = 128,
    *,
    chat: bool = True,
    system: Optional[str] = None,
    policy=None,
    budget: Optional[int] = None,
    context: Optional[int] = None,
    session: Optional[Session] = None,
    eviction: Optional[dict] = None,
    **sampling,
) -> Iterator[Token]:
    """Generates a reply to `prompt` (text, or token ids fed as they are), one Token per
    iteration. chat=True renders the text through the model's chat template (with `system` as the
    system message) and stops at its end of turn. policy and budget choose the eviction, as in
    Model.session(); a given `session` is continued instead. Sampling options are
    Session.generate's (greedy, temperature, top_k, top_p, min_p, repeat_penalty, seed, ...)."""
    if session is None:
        session = self.session(policy, budget, context, **(eviction or {}))
    stop_ids = sampling.pop("stop_ids", None)
    if isinstance(prompt, str):
        if chat:
            messages = ([("system", system)] if system is not None else []) + [("user", prompt)]
            ids, chat_stops = self._chat_prompt(messages)
            if stop_ids is None:
                stop_ids = chat_stops
        else:
            ids = self.tokenize(prompt)
    else:
        ids = list(prompt)
    session.append(ids)
    return session.generate(n, stop_ids=stop_ids, **sampling)


Session.generate = _session_generate
Model.session = _model_session
Model.generate = _model_generate
