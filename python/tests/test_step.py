"""Session.run's two paths: the C extension (mixrt._step) and ctypes give the same arrays, the C
path hands every step it does not take (conversions, errors) to the ctypes one, and the extension
is there when the build made it."""
import os

import numpy as np
import pytest

import mixrt
from mixrt import _lib, session as session_module

from test_session import greedy_decode, random_feeds


class Subclass(np.ndarray):
    pass


def ctypes_only(s):
    s._runner = None  # what a package without the extension does
    return s


def test_extension_is_used_when_built():
    built = [p for p in _lib._step_candidates(_lib.lib.path) if os.path.exists(p)]
    if os.environ.get("MIXRT_PYTHON_EXTENSION") == "0" or not built:
        pytest.skip("mixrt._step not built or disabled")
    assert session_module._step is not None, "mixrt._step was built but did not load: " + built[0]


@pytest.fixture
def fast(llama):
    if session_module._step is None:
        pytest.skip("mixrt._step not available")
    s = mixrt.Session(llama)
    assert s._runner is not None
    return s


def test_both_paths_equal(fast, llama):
    slow = ctypes_only(mixrt.Session(llama))
    for k in range(6):
        feeds = random_feeds(fast, past_len=k * 3, seed=40 + k)
        a, b = fast.run(None, feeds), slow.run(None, feeds)
        assert len(a) == len(b) == len(fast.outputs)
        for x, y in zip(a, b):
            assert x.dtype == y.dtype and x.shape == y.shape and x.flags.c_contiguous
            np.testing.assert_array_equal(x, y)
        key1, logits, again = fast.run(["present_key_1", "logits", "present_key_1"], feeds)
        np.testing.assert_array_equal(logits, b[0])
        np.testing.assert_array_equal(key1, b[3])
        assert again is key1
    assert greedy_decode(fast, 16) == greedy_decode(slow, 16)


def test_steps_the_c_path_leaves_to_ctypes(fast):
    """Fortran order, lists and an ndarray subclass go through the ctypes path, which converts
    them; unknown names, missing inputs and mixrt's own refusals raise their errors."""
    feeds = random_feeds(fast, past_len=3, seed=11)
    want = fast.run(["logits"], feeds)[0]
    odd = dict(feeds)
    odd["past_key_0"] = np.asfortranarray(feeds["past_key_0"])
    odd["input_ids"] = feeds["input_ids"].tolist()
    odd["past_value_1"] = feeds["past_value_1"].view(Subclass)
    np.testing.assert_array_equal(fast.run(["logits"], odd)[0], want)
    with pytest.raises(mixrt.MixrtError, match="nope"):
        fast.run(["nope"], feeds)
    partial = dict(feeds)
    del partial["past_key_0"]
    with pytest.raises(mixrt.MixrtError, match="past_key_0"):
        fast.run(None, partial)
    bad = dict(feeds)
    bad["past_key_0"] = np.zeros([1, 3, 3, 16], np.float32)  # 3 heads where the model has 2
    with pytest.raises(mixrt.MixrtError) as e:
        fast.run(None, bad)
    assert "past_key_0" in str(e.value) and e.value.status.startswith("MX_ERR_")
    np.testing.assert_array_equal(fast.run(["logits"], feeds)[0], want)  # still usable


def test_c_path_outputs_outlive_steps_and_session(fast):
    feeds = random_feeds(fast, past_len=2, seed=7)
    outs = fast.run(None, feeds)
    copies = [o.copy() for o in outs]
    logits = outs[0]
    del outs
    for k in range(20):
        fast.run(["logits"], random_feeds(fast, past_len=k % 5, seed=100 + k))
    fast.close()
    np.testing.assert_array_equal(logits, copies[0])
    with pytest.raises(mixrt.MixrtError, match="closed"):
        fast.run(None, feeds)


def test_close_waits_for_a_running_step(llama):
    """close() on one thread while another runs steps: each step either completes with valid
    arrays or is refused as closed, never runs on a freed session."""
    import threading
    import time

    for runner in (True, False):
        s = mixrt.Session(llama)
        if not runner:
            ctypes_only(s)
        feeds = random_feeds(s, past_len=3, seed=9)
        want = s.run(["logits"], feeds)[0].copy()
        done, errors = [], []

        def steps():
            try:
                while True:
                    np.testing.assert_array_equal(s.run(["logits"], feeds)[0], want)
                    done.append(1)
            except mixrt.MixrtError as e:
                if "closed" not in str(e):
                    errors.append(e)
            except Exception as e:  # reported below
                errors.append(e)

        t = threading.Thread(target=steps)
        t.start()
        while len(done) < 20:
            time.sleep(0.001)
        s.close()
        t.join()
        assert not errors and len(done) >= 20
