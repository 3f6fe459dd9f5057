"""mixrt.Session against the mixrt program: same outputs as `mixrt run`, the same greedy tokens as
`mixrt demo`, metadata with symbolic dims, .mxm files, the JSON dumps, errors and threads."""
import os
import re
import subprocess
import threading

import numpy as np
import pytest

import mixrt

STEPS = 64


def empty_cache_feeds(session, token=1):
    """Decode-step inputs with an empty KV cache (past_len 0)."""
    feeds = {}
    for i in session.inputs:
        feeds[i.name] = np.zeros([d if isinstance(d, int) else 0 for d in i.shape], i.dtype)
    feeds["input_ids"] = np.array([[token]], np.int64)
    return feeds


def random_feeds(session, past_len, seed):
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in session.inputs:
        shape = [d if isinstance(d, int) else past_len for d in i.shape]
        feeds[i.name] = rng.standard_normal(shape).astype(i.dtype) if i.dtype == np.float32 else \
            rng.integers(0, 128, shape).astype(i.dtype)
    return feeds


def greedy_decode(session, steps, token=1):
    names = [o.name for o in session.outputs]
    feeds = empty_cache_feeds(session, token)
    tokens = []
    for _ in range(steps):
        outs = session.run(None, feeds)
        token = int(np.argmax(outs[0]))
        tokens.append(token)
        feeds = {"input_ids": np.array([[token]], np.int64)}
        for name, value in zip(names[1:], outs[1:]):
            feeds[name.replace("present_", "past_")] = value  # present -> past, no copy
    return tokens


def test_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", mixrt.version())
    assert mixrt.__version__ == mixrt.version()


def test_metadata_keeps_symbolic_dims(llama):
    s = mixrt.Session(llama)
    assert [i.name for i in s.inputs] == ["input_ids", "past_key_0", "past_value_0", "past_key_1", "past_value_1"]
    assert s.inputs[0].dtype == np.int64 and s.inputs[0].shape == [1, 1]
    assert s.inputs[1].dtype == np.float32 and s.inputs[1].shape == [1, 2, "past_len", 16]
    assert s.outputs[0].name == "logits" and s.outputs[0].shape == [1, 1, 128]
    assert s.outputs[1].shape == [1, 2, "past_len + 1", 16]


def test_run_equals_cli(llama, cli, workdir):
    s = mixrt.Session(llama)
    feeds = random_feeds(s, past_len=5, seed=7)
    args = [cli, "run", llama, "--output-dir", None]
    indir = os.path.join(workdir, "run_inputs")
    outdir = os.path.join(workdir, "run_outputs")
    os.makedirs(indir, exist_ok=True)
    os.makedirs(outdir, exist_ok=True)
    args[-1] = outdir
    for name, value in feeds.items():
        path = os.path.join(indir, name + ".npy")
        np.save(path, value)
        args += ["--input", f"{name}={path}"]
    subprocess.run(args, check=True, capture_output=True)
    results = s.run(None, feeds)
    for info, got in zip(s.outputs, results):
        want = np.load(os.path.join(outdir, info.name + ".npy"))
        assert got.dtype == want.dtype and got.shape == want.shape, info.name
        np.testing.assert_array_equal(got, want, err_msg=info.name)


def test_selected_outputs_in_given_order(llama):
    s = mixrt.Session(llama)
    feeds = random_feeds(s, past_len=2, seed=3)
    every = s.run(None, feeds)
    key1, logits = s.run(["present_key_1", "logits"], feeds)
    np.testing.assert_array_equal(logits, every[0])
    np.testing.assert_array_equal(key1, every[3])


def test_outputs_outlive_later_steps_and_each_other(llama):
    """One step's outputs share one owner: an array kept alone stays valid while its siblings are
    dropped and later steps run; a name asked twice gives the same values twice."""
    s = mixrt.Session(llama)
    feeds = random_feeds(s, past_len=4, seed=5)
    first = s.run(None, feeds)
    logits, want = first[0], first[0].copy()
    del first
    for k in range(30):
        s.run(None, random_feeds(s, past_len=k % 7, seed=10 + k))
        s.run(["logits"], feeds)
    np.testing.assert_array_equal(logits, want)
    a, b = s.run(["logits", "logits"], feeds)
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(b, want)
    s.close()
    np.testing.assert_array_equal(logits, want)


def test_specialization_options_and_counters(llama):
    """The options of version 2 and 3 reach the library: a declared gear compiles at load, and
    the specialization counters come back in stats()."""
    plain = mixrt.Session(llama, spec_cache_size=0)
    geared = mixrt.Session(llama, gears=["past_len=3"], spec_cache_size=4, spec_churn_limit=2,
                           intra_op_threads=1, memory_limit=1 << 30)
    feeds = random_feeds(plain, past_len=3, seed=9)
    want = plain.run(None, feeds)
    got = geared.run(None, feeds)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    total = geared.stats()["total"]
    assert total["spec_compiles"] >= 1 and total["spec_hits"] >= 1, total
    assert plain.stats()["total"]["spec_compiles"] == 0
    with pytest.raises(mixrt.MixrtError):
        mixrt.Session(llama, gears=["no_such_symbol=3"])


def test_greedy_decode_equals_demo(llama, cli):
    demo = subprocess.run([cli, "demo", "--size", "tiny", "--steps", str(STEPS), "--device", "cpu"],
                          check=True, capture_output=True, text=True).stdout
    first = [int(t) for t in re.search(r"^tokens: ([\d ]+)", demo, re.M).group(1).split()]
    every8 = {int(step): int(tok) for step, tok in re.findall(r"^step\s+(\d+)/\d+ .*next token\s+(\d+)", demo, re.M)}
    tokens = greedy_decode(mixrt.Session(llama), STEPS)
    assert tokens[:len(first)] == first
    assert every8 and all(tokens[step - 1] == tok for step, tok in every8.items())


def test_non_contiguous_and_list_inputs(llama):
    s = mixrt.Session(llama)
    feeds = random_feeds(s, past_len=3, seed=11)
    want = s.run(["logits"], feeds)[0]
    odd = dict(feeds)
    odd["past_key_0"] = np.asfortranarray(feeds["past_key_0"])
    odd["input_ids"] = feeds["input_ids"].tolist()
    np.testing.assert_array_equal(s.run(["logits"], odd)[0], want)


def test_compile_to_mxm(llama, workdir):
    mxm = os.path.join(workdir, "llama_tiny.mxm")
    mixrt.compile(llama, mxm)
    a = mixrt.Session(llama)
    b = mixrt.Session(mxm)
    feeds = random_feeds(a, past_len=4, seed=5)
    for x, y in zip(a.run(None, feeds), b.run(None, feeds)):
        np.testing.assert_array_equal(x, y)


def test_options(llama):
    want = greedy_decode(mixrt.Session(llama), 8)
    s = mixrt.Session(llama, executor="topological", streams=2, static_min_ops=-1, device="inline",
                      symbol_ranges={"past_len": (0, 64)}, private_weights=True, passes="none")
    assert greedy_decode(s, 8) == want


def test_inspect_and_partition_are_dicts(llama):
    info = mixrt.inspect(llama)
    assert info["inputs"][1]["shape"] == "[1, 2, past_len, 16]"
    part = mixrt.partition(llama, shapes={"past_len": 3})
    assert isinstance(part["clusters"], list) and part["clusters"]


def test_errors_carry_mixrts_message(llama, workdir):
    with pytest.raises(mixrt.MixrtError) as e:
        mixrt.Session(os.path.join(workdir, "no_such_model.onnx"))
    assert "no_such_model.onnx" in str(e.value)
    s = mixrt.Session(llama)
    feeds = empty_cache_feeds(s)
    feeds["past_key_0"] = np.zeros([1, 3, 0, 16], np.float32)  # 3 heads where the model has 2
    with pytest.raises(mixrt.MixrtError) as e:
        s.run(None, feeds)
    assert "past_key_0" in str(e.value) and e.value.status.startswith("MX_ERR_")
    del feeds["past_key_0"]
    with pytest.raises(mixrt.MixrtError, match="past_key_0"):
        s.run(None, feeds)
    with pytest.raises(mixrt.MixrtError, match="nope"):
        s.run(["nope"], empty_cache_feeds(s))
    with pytest.raises(TypeError, match="colour"):
        mixrt.Session(llama, colour="red")
    with pytest.raises(ValueError):
        mixrt.Session(llama, executor="fast")
    with pytest.raises(mixrt.MixrtError):
        mixrt.inspect(os.path.join(workdir, "no_such_model.onnx"))
    assert greedy_decode(s, 4) == greedy_decode(mixrt.Session(llama), 4)  # still usable


def test_threads(llama):
    want = greedy_decode(mixrt.Session(llama), 16)
    shared = mixrt.Session(llama)
    results, errors = {}, []

    def worker(k):
        try:
            own = mixrt.Session(llama)
            results[("own", k)] = greedy_decode(own, 16)
            results[("shared", k)] = greedy_decode(shared, 16)
        except Exception as e:  # reported below, a thread's exception would be lost
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 8 and all(r == want for r in results.values())


def test_outputs_outlive_the_session(llama):
    s = mixrt.Session(llama)
    feeds = random_feeds(s, past_len=1, seed=2)
    outs = s.run(None, feeds)
    copy = [o.copy() for o in outs]
    s.close()
    for a, b in zip(outs, copy):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(mixrt.MixrtError, match="closed"):
        s.run(None, feeds)
