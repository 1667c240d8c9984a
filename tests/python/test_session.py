"""Sessions: generation as an iterator, eviction, and the cache's K, V and positions as views."""

import os
import subprocess
import sys
import textwrap

import numpy as np

import edgelm

from conftest import SOURCE_DIR


def test_greedy_generation_repeats_and_continues(tiny_model):
    first = list(tiny_model.generate("once upon a time", 12, chat=False, greedy=True,
                                     ignore_eos=True))
    assert len(first) == 12 and all(isinstance(t, edgelm.Token) for t in first)
    again = [t.id for t in tiny_model.generate("once upon a time", 12, chat=False, greedy=True,
                                              ignore_eos=True)]
    assert again == [t.id for t in first]
    # Two generations of 6 in one session are one of 12.
    session = tiny_model.session()
    session.append(tiny_model.tokenize("once upon a time"))
    halves = [t.id for t in session.generate(6, greedy=True, ignore_eos=True)]
    halves += [t.id for t in session.generate(6, greedy=True, ignore_eos=True)]
    assert halves == again


def test_eviction_holds_the_budget(tiny_model):
    session = tiny_model.session("sink", budget=16, context=256, sink_tokens=4)
    session.append(tiny_model.tokenize("the cat sat on the mat " * 4))
    for _ in session.generate(40, greedy=True, ignore_eos=True):
        assert session.size <= 16
    assert session.events and session.policy == "sink"
    positions = session.positions(0)
    assert positions.shape == (session.size, tiny_model.n_kv_heads)
    assert (positions[:4] == np.arange(4)[:, None]).all()  # the sinks
    assert session.next_position > 16


def test_kv_views_are_the_cache_read_only(tiny_model):
    session = tiny_model.session(context=64)
    session.append(tiny_model.tokenize("zero copy views of the cache"))
    keys, values = session.keys(1), session.values(1)
    assert keys.shape == (session.size, tiny_model.n_kv_heads, tiny_model.head_dim)
    assert keys.dtype == np.float16 and values.dtype == np.float16
    assert not keys.flags.writeable and not values.flags.writeable
    # Zero-copy: the next token's K row appears in a view taken before it was computed, at the
    # same address.
    address = keys.__array_interface__["data"][0]
    before = keys.copy()
    session.append([5])
    after = session.keys(1)
    assert after.__array_interface__["data"][0] == address
    assert np.array_equal(after[:-1], before)
    assert np.array_equal(session.positions(1)[-1], [session.next_position - 1] *
                          tiny_model.n_kv_heads)


def test_ctrl_c_stops_a_generation_and_the_session_goes_on(tiny_model_path):
    # In a child process: SIGINT arrives while tokens are generated; KeyboardInterrupt comes out of
    # the iteration, and the session takes another prompt and generates after it.
    script = textwrap.dedent(f"""
        import os, signal, threading, edgelm
        model = edgelm.Model.load({tiny_model_path!r}, threads=1)
        session = model.session("sink", budget=32, context=100000)
        session.append(model.tokenize("interrupt me"))
        count = 0
        try:
            for token in session.generate(10**6, ignore_eos=True):
                count += 1
                if count == 5:
                    threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
        except KeyboardInterrupt:
            print("interrupted after", count)
        session.append(model.tokenize(" and again"))
        print("then", len(list(session.generate(3, ignore_eos=True))))
    """)
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(edgelm.__file__)))
    env = dict(os.environ, PYTHONPATH=package_dir)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, env=env, cwd=str(SOURCE_DIR))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("interrupted after ") and int(lines[0].split()[-1]) >= 5
    assert lines[1] == "then 3"
