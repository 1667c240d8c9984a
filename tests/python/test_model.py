"""Model.load, the tokenizer, teacher-forced logits and errors, on the tiny model."""

import subprocess

import numpy as np
import pytest

import edgelm

from conftest import tool


def test_tokenize_round_trip(tiny_model):
    ids = tiny_model.tokenize("hello world", add_bos=False)
    assert ids and all(isinstance(i, int) for i in ids)
    assert tiny_model.detokenize(ids) == "hello world"


def test_logits_are_float32_rows_of_the_vocabulary(tiny_model):
    ids = tiny_model.tokenize("the quick brown fox jumps over the lazy dog")
    logits = tiny_model.logits(ids)
    assert logits.dtype == np.float32
    assert logits.shape == (len(ids), tiny_model.vocab_size)
    assert logits.flags.c_contiguous and logits.flags.writeable
    assert np.isfinite(logits).all()
    # Teacher forcing runs the same steps whatever the chunk, up to rounding.
    again = tiny_model.logits(ids, batch=3)
    np.testing.assert_allclose(again, logits, rtol=1e-4, atol=1e-4)
    # The same call twice gives the same bits.
    assert np.array_equal(tiny_model.logits(ids), logits)


def test_the_last_row_is_what_a_session_samples_from(tiny_model):
    ids = tiny_model.tokenize("a session and teacher forcing agree")
    session = tiny_model.session()
    last = session.append(ids)
    np.testing.assert_allclose(last, tiny_model.logits(ids)[-1], rtol=1e-4, atol=1e-4)


def test_errors_are_edgelm_errors_with_the_tools_message(tmp_path):
    missing = str(tmp_path / "no_such_model.gguf")
    with pytest.raises(edgelm.Error) as raised:
        edgelm.Model.load(missing)
    assert isinstance(raised.value, RuntimeError)
    text = tmp_path / "text.txt"
    text.write_text("some text\n")
    tool_run = subprocess.run([tool("perplexity"), "-m", missing, "-f", str(text)],
                              capture_output=True, text=True)
    assert tool_run.returncode == 1
    # The tool prints "perplexity: <message>" as its last line.
    assert tool_run.stderr.strip().splitlines()[-1] == f"perplexity: {raised.value}"


def test_bad_settings_raise(tiny_model_path, tiny_model):
    with pytest.raises(edgelm.Error, match="kv_type: 'q4_0' is not one of f32|f16"):
        edgelm.Model.load(tiny_model_path, kv_type="q4_0")
    with pytest.raises(edgelm.Error, match="--eviction-policy"):
        tiny_model.session("no_such_policy", budget=8)
    with pytest.raises(edgelm.Error, match="unknown eviction option 'windw'"):
        tiny_model.session("sink", budget=8, windw=4)
    with pytest.raises(edgelm.Error, match="outside the vocabulary"):
        tiny_model.session().append([tiny_model.vocab_size])
