#!/usr/bin/python3
"""Greedy decoding from Python: the tiny Llama decode step (`mixrt gen llama`), run step by step
with the KV cache fed back (each step's present_* outputs become the next step's past_*; they are
NumPy arrays over mixrt's own buffers, so nothing is copied).

    PYTHONPATH=python MIXRT_LIBRARY=build/libmixrt.so examples/python/decode.py [MODEL.onnx] [STEPS]
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

import mixrt
import mixrt.cli


def main():
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    with tempfile.TemporaryDirectory() as tmp:
        model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tmp, "llama_tiny.onnx")
        if len(sys.argv) <= 1:
            subprocess.run([mixrt.cli.program(), "gen", "llama", "-o", model], check=True, capture_output=True)
        session = mixrt.Session(model)

    print(f"mixrt {mixrt.version()}")
    for i in session.inputs:
        print(f"input  {i.name:14} {i.dtype} {i.shape}")
    for o in session.outputs:
        print(f"output {o.name:14} {o.dtype} {o.shape}")

    # An empty cache: every symbolic dim (past_len) is 0 at the first step.
    feeds = {i.name: np.zeros([d if isinstance(d, int) else 0 for d in i.shape], i.dtype) for i in session.inputs}
    feeds["input_ids"] = np.array([[1]], np.int64)
    names = [o.name for o in session.outputs]
    tokens = []
    for _ in range(steps):
        logits, *present = session.run(None, feeds)
        token = int(np.argmax(logits))
        tokens.append(token)
        feeds = {"input_ids": np.array([[token]], np.int64)}
        feeds.update({n.replace("present_", "past_"): v for n, v in zip(names[1:], present)})
    print("tokens:", " ".join(map(str, tokens)))


if __name__ == "__main__":
    main()
