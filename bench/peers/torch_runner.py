#!/usr/bin/python3
"""PyTorch eager peer of `mixrt bench models`: a persistent process driven over stdin/stdout with
one request per line and one reply line per request (the protocol of ort_runner.js). The models
are the zoo's own torch modules (bench/zoo/export.py, models.py), built with the same seeds and
BatchNorm calibration as the export, so eager runs what the ONNX file holds. Steps run under
torch.inference_mode() and are timed with time.perf_counter_ns() around the forward call.

Requests (words without spaces):
  load NAME ZOO_MODEL THREADS  build the zoo model ZOO_MODEL (a name in export.py's all_specs or
                               extra_specs); its runs use THREADS intra-op threads -> ok
  feed NAME DIR                read DIR/<input>.npy for every input of the model -> ok
  run NAME N                   N forward calls on the fed inputs -> ok NS NS ...
  drop NAME                    release the model -> ok
  quit                         exit (no reply)
A failed request is answered with `err MESSAGE`. On start the process prints
`ready torch VERSION`, or `err MESSAGE` and exits with status 1 when torch cannot be imported.

usage: /usr/bin/python3 bench/peers/torch_runner.py"""
import os
import sys
import time


def reply(text):
    sys.stdout.write(text.replace("\n", " ") + "\n")
    sys.stdout.flush()


try:
    import numpy as np
    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "zoo"))
    import export  # noqa: E402  (bench/zoo/export.py: the specs of the zoo's models)
except Exception as e:  # noqa: BLE001  (any import failure means no peer)
    reply(f"err cannot import torch and the zoo (bench/zoo): {e}")
    sys.exit(1)

SESSIONS = {}  # NAME -> dict(net, inputs, threads, feeds)


def find_spec(name):
    for i, spec in enumerate(export.all_specs()):
        if spec["name"] == name:
            return spec, spec.get("seed", 1000 + i)
    for i, spec in enumerate(export.extra_specs()):
        if spec["name"] == name:
            return spec, spec.get("seed", 1000 + i)
    raise ValueError(f"no zoo model called {name}")


def load(name, model, threads):
    spec, seed = find_spec(model)
    torch.manual_seed(seed)
    net = spec["make"]().eval()
    if "calibration" in spec:
        export.calibrate_batchnorm(net, spec["calibration"](torch.Generator().manual_seed(seed + 2)))
    SESSIONS[name] = dict(net=net, inputs=spec["inputs"], threads=int(threads), feeds=None)


def feed(name, folder):
    entry = SESSIONS[name]
    entry["feeds"] = tuple(torch.from_numpy(np.load(os.path.join(folder, n + ".npy"))) for n in entry["inputs"])


def run(name, count):
    entry = SESSIONS[name]
    if entry["feeds"] is None:
        raise ValueError(f"{name}: no feeds yet")
    n = int(count)
    if n < 1:
        raise ValueError(f"run needs a count >= 1, not {count}")
    torch.set_num_threads(entry["threads"])
    times = []
    with torch.inference_mode():
        for _ in range(n):
            t0 = time.perf_counter_ns()
            entry["net"](*entry["feeds"])
            times.append(time.perf_counter_ns() - t0)
    return " ".join(str(t) for t in times)


def main():
    torch.set_num_interop_threads(1)
    reply(f"ready torch {torch.__version__}")
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            return
        try:
            if words[0] == "load" and len(words) == 4:
                load(words[1], words[2], words[3])
                reply("ok")
            elif words[0] == "feed" and len(words) == 3:
                feed(words[1], words[2])
                reply("ok")
            elif words[0] == "run" and len(words) == 3:
                reply("ok " + run(words[1], words[2]))
            elif words[0] == "drop" and len(words) == 2:
                del SESSIONS[words[1]]
                reply("ok")
            else:
                reply("err unknown request " + line.strip())
        except Exception as e:  # noqa: BLE001  (the error goes back to mixrt, the peer keeps serving)
            reply(f"err {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
