"""The bindings against the tools on the real default model (SmolLM2-135M-Instruct): the same
logits as perplexity's teacher-forced path, the same tokens as generate, the same records as
eviction_eval. Skipped without the file, failed then under EDGELM_REQUIRE_REAL_MODEL=1."""

import json
import subprocess

import edgelm

from conftest import tool


def test_logits_are_perplexitys_bit_for_bit(smollm2, smollm2_path, text_path):
    n_ctx = 256
    run = subprocess.run([tool("perplexity"), "-m", smollm2_path, "-f", text_path, "-c",
                          str(n_ctx), "--chunks", "1", "-t", "2", "--json"],
                         capture_output=True, text=True, check=True)
    reported = json.loads(run.stdout.strip().splitlines()[-1])
    # The window as perplexity cuts it: the text without its last newline, its first token BOS
    # when the tokenizer adds one (SmolLM2's does not).
    with open(text_path, encoding="utf-8") as f:
        text = f.read()
    if text.endswith("\n"):
        text = text[:-1]
    window = smollm2.tokenize(text, add_bos=True, special=False)[:n_ctx]
    if smollm2.tokenize("", add_bos=True) == [smollm2.bos_id]:
        window[0] = smollm2.bos_id
    assert reported["add_bos"] == (window[0] == smollm2.bos_id)
    logits = smollm2.logits(window)
    # The second half scored, each NLL from its row as perplexity takes it, summed in its order:
    # any bit of a scored row that differed would move the sum.
    total = 0.0
    count = 0
    for position in range(n_ctx // 2, n_ctx - 1):
        total += edgelm.Model._token_nll(logits[position], window[position + 1])
        count += 1
    assert count == reported["tokens_scored"]
    assert total / count == reported["mean_nll"]


def test_greedy_generation_is_generates(smollm2, smollm2_path):
    prompt = "What is the capital of France?"
    run = subprocess.run([tool("generate"), "-m", smollm2_path, "-p", prompt, "--chat",
                          "--greedy", "-n", "24", "-t", "2", "--eviction-policy", "tova",
                          "--kv-budget", "24", "--json"],
                         capture_output=True, text=True, check=True)
    reported = json.loads(run.stdout.strip().splitlines()[-1])
    tokens = list(smollm2.generate(prompt, 24, greedy=True, policy="tova", budget=24))
    assert [t.id for t in tokens] == reported["tokens"]
    assert "".join(t.text for t in tokens) == reported["text"]


def test_evaluate_returns_eviction_evals_records(smollm2, smollm2_path, text_path, tmp_path):
    out = tmp_path / "cells.jsonl"
    subprocess.run([tool("eviction_eval"), "-m", smollm2_path, "-f", text_path, "-c", "256",
                    "--runs", "streaming", "--policies", "sink,tova", "--budgets", "32",
                    "--evict-every", "8", "-t", "2", "--json", str(out)],
                   capture_output=True, text=True, check=True)
    expected = [json.loads(line) for line in out.read_text().splitlines()]
    records = edgelm.eviction.evaluate(smollm2, text_path, ["sink", "tova"], [32],
                                       window_tokens=256, evict_every=8, frame=False)
    assert len(records) == len(expected) == 2
    for got, want in zip(records, expected):
        assert got.keys() == want.keys()
        # Every measurement to the last bit; only the times differ between two runs.
        assert untimed(got["streaming"]) == untimed(want["streaming"])
        for key in ("schema", "policy", "budget_slots", "budget_bytes", "settings"):
            assert got[key] == want[key]
    assert records[0]["streaming"]["evictions"]["count"] > 0


def untimed(value):
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if "seconds" not in k and not k.startswith("ms_")}
    return value
