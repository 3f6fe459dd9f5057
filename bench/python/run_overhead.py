#!/usr/bin/python3
"""Per-step overhead of mixrt's Python binding: session.run on the tiny Llama decode step against
the C call it makes (mx_session_run), in one process. Prints JSON.

Every step runs the same inputs (past_len fixed), so the work inside mixrt is the same each step.
For each step it records the wall time of session.run in Python and the session's own host time of
that step (mx_session_get_stats: the wall clock inside mx_session_run); the difference is what the
binding adds (building the tensor records, the call, wrapping the outputs as NumPy arrays).
Both paths of session.run are measured on the same session, step after step in turn: the C
extension (mixrt._step, when built) and ctypes alone. A last series calls mx_session_run straight
through ctypes with records built once and no arrays made, the floor of any ctypes binding (what
it adds is the call itself and mx_session_run's work outside the step's own clock).

    PYTHONPATH=python MIXRT_LIBRARY=build/libmixrt.so bench/python/run_overhead.py [--steps N] [--past N]
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import mixrt
import mixrt.cli
from mixrt import _lib


def quantiles(values_ns):
    v = np.sort(np.asarray(values_ns, dtype=np.float64)) / 1e3
    return {"median_us": round(float(np.median(v)), 2), "p10_us": round(float(v[len(v) // 10]), 2),
            "p90_us": round(float(v[(len(v) * 9) // 10]), 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--past", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=100)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "llama_tiny.onnx")
        subprocess.run([mixrt.cli.program(), "gen", "llama", "-o", model], check=True, capture_output=True)
        s = mixrt.Session(model)
    rng = np.random.default_rng(1)
    feeds = {}
    for i in s.inputs:
        shape = [d if isinstance(d, int) else args.past for d in i.shape]
        feeds[i.name] = rng.standard_normal(shape).astype(i.dtype) if i.dtype == np.float32 else np.ones(shape, i.dtype)

    def stats_step_ns():
        return s.stats()["last"]["step_ns"]

    # The two paths in turn, step after step, so both see the same load.
    runner = s._runner
    paths = {"extension": runner, "ctypes": None} if runner is not None else {"ctypes": None}
    wall = {p: [] for p in paths}
    freed = {p: [] for p in paths}  # wall time including freeing the step's arrays
    inside = {p: [] for p in paths}
    for k in range(args.warmup + args.steps):
        for path, r in paths.items():
            s._runner = r
            t0 = time.perf_counter_ns()
            outs = s.run(None, feeds)
            t1 = time.perf_counter_ns()
            del outs
            t2 = time.perf_counter_ns()
            if k >= args.warmup:
                wall[path].append(t1 - t0)
                freed[path].append(t2 - t0)
                inside[path].append(stats_step_ns())
    s._runner = runner

    # The floor: one ctypes call with records built once; outputs are released by hand.
    n_in, n_out = len(s.inputs), len(s.outputs)
    ins = (_lib.Tensor * n_in)()
    for t, (name, a) in zip(ins, feeds.items()):
        t.dtype, t.rank, t.name, t.data = mixrt.session._CODES[a.dtype], a.ndim, name.encode(), a.ctypes.data
        for d, n in enumerate(a.shape):
            t.dims[d] = n
    outs = (_lib.Tensor * n_out)()
    run, release, handle = _lib.lib.mx_session_run, _lib.lib.mx_tensor_release, s._s
    raw_ns, raw_inside = [], []
    for k in range(args.warmup + args.steps):
        ctypes.memset(outs, 0, ctypes.sizeof(outs))
        t0 = time.perf_counter_ns()
        st = run(handle, ins, n_in, outs, n_out)
        t1 = time.perf_counter_ns()
        if st != 0:
            sys.exit(f"mx_session_run: {s._last_error()}")
        for t in outs:
            release(ctypes.byref(t))
        if k >= args.warmup:
            raw_ns.append(t1 - t0)
            raw_inside.append(stats_step_ns())

    result = {
        "benchmark": "python_run_overhead",
        "model": "llama tiny decode step (mixrt gen llama)",
        "past_len": args.past, "steps": args.steps, "mixrt": mixrt.version(),
        "inputs": n_in, "outputs": n_out,
        "extension": runner is not None,
    }
    for path in paths:
        result[f"{path}_session_run"] = quantiles(wall[path])
        result[f"{path}_c_mx_session_run"] = quantiles(inside[path])
        result[f"{path}_added_per_step"] = quantiles([w - c for w, c in zip(wall[path], inside[path])])
        result[f"{path}_added_with_free"] = quantiles([w - c for w, c in zip(freed[path], inside[path])])
    result["ctypes_direct_call"] = quantiles(raw_ns)
    result["ctypes_direct_call_added"] = quantiles([w - c for w, c in zip(raw_ns, raw_inside)])
    result["target_added_us"] = 10
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
