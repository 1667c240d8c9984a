"""Eviction policies scored in Python: TOVA written in Python keeps what the built-in one keeps,
and a policy that raises leaves the cache as it was."""

import numpy as np
import pytest

import edgelm


class PythonTova(edgelm.Policy):
    """TOVA: rank slots by the attention the newest query paid them (its statistic, "last")."""

    stats = "last"

    def score(self, layer, keys, values, stats):
        return stats[:, :, 0].T


def cache_state(session):
    return [session.positions(layer).copy() for layer in range(session.n_layers)]


@pytest.mark.parametrize("step", [1, 5])
def test_python_tova_evicts_as_the_built_in_one(tiny_model, step):
    ids = tiny_model.tokenize("the quick brown fox jumps over the lazy dog " * 6)
    built_in = tiny_model.session("tova", budget=16, context=512)
    python = tiny_model.session(PythonTova(), budget=16, context=512)
    assert python.policy == "PythonTova"
    compared = 0
    for start in range(0, len(ids), step):
        built_in.append(ids[start:start + step])
        python.append(ids[start:start + step])
        assert len(python.events) == len(built_in.events)
        for a, b in zip(cache_state(python), cache_state(built_in)):
            assert np.array_equal(a, b)
        compared += 1
    assert len(built_in.events) > 3  # the budget was reached, and evicted many times
    np.testing.assert_array_equal(python.logits, built_in.logits)


class Raises(edgelm.Policy):
    stats = None

    def __init__(self, layer):
        self.layer = layer
        self.calls = 0

    def score(self, layer, keys, values, stats):
        self.calls += 1
        if layer.layer == self.layer:
            raise ValueError(f"no score for layer {layer.layer}")
        return -layer.positions.T.astype(np.float32)  # keep the oldest


def test_a_policy_that_raises_leaves_the_cache_intact(tiny_model):
    policy = Raises(layer=1)
    session = tiny_model.session(policy, budget=8, context=128)
    session.append(tiny_model.tokenize("one two three four five six")[:8])
    before = cache_state(session)
    keys = [session.keys(layer).copy() for layer in range(session.n_layers)]
    position = session.next_position
    with pytest.raises(ValueError, match="no score for layer 1"):
        session.append([7])
    assert policy.calls == 2  # layer 0 scored, layer 1 raised, nothing compacted
    assert session.next_position == position
    for layer, state in enumerate(before):
        assert np.array_equal(session.positions(layer), state)
        assert np.array_equal(session.keys(layer), keys[layer])
    # The session goes on once the policy scores again.
    policy.layer = -1
    session.append([7])
    assert session.size == 8 and session.next_position == position + 1
    # The oldest seven were kept beside the new token.
    assert session.positions(0)[:, 0].tolist() == [0, 1, 2, 3, 4, 5, 6, 8]


def test_a_score_of_the_wrong_shape_is_an_error(tiny_model):
    class Wrong(edgelm.Policy):
        stats = None

        def score(self, layer, keys, values, stats):
            return np.zeros(3, dtype=np.float32)

    session = tiny_model.session(Wrong(), budget=4, context=64)
    session.append([1, 2, 3, 4])
    with pytest.raises(edgelm.Error, match=r"Wrong.score returned \(3,\) scores for layer 0"):
        session.append([5])
