"""Shape specialization on a GPT-style decoder exported by torch.onnx.export (bench/zoo/models.py's
TinyGPT: input_ids [1, seq], past keys/values [1, heads, past_len, head_dim], every dim symbolic).

  latency  prefill 9 tokens, then greedy decode steps: median wall time of a decode step for a
           mixrt session with specialization (the default options) and without it
           (spec_cache_size 0), and for ONNX Runtime (the node peer of bench/peers, CPU, one
           intra-op thread) running the same decode from the same state.
  soak     random seq in 1..MAX_SEQ with a random cache length each step (seq + past_len within
           the model's positions) through one session: every SAMPLE steps the process's RSS is
           read and the step's outputs are compared with PyTorch eager on the same inputs; the
           verdict says whether RSS stayed within 1 % over the second half of the steps and
           every sample matched (rtol 1e-3, atol 1e-4, as tests/zoo).

usage: /usr/bin/python3 bench/soak/gpt_spec.py latency|soak --dir WORK_DIR [--steps N] [--sample N]
           [--max-seq N] [--positions N] [--node PATH] [--peers DIR]
The model is exported into WORK_DIR (a build directory, never the source tree); the Python
package is found as python/mixrt of this checkout, libmixrt.so by its usual search
(MIXRT_LIBRARY, else build*/libmixrt.so). Prints one JSON object."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench", "zoo"))
import models  # noqa: E402
import mixrt  # noqa: E402

CFG = dict(vocab=256, dim=64, heads=4, layers=3)


def export(work, positions):
    """TinyGPT with `positions` rows of positions, seeded weights, exported like the zoo's gpt_kv."""
    path = os.path.join(work, f"gpt_spec_{positions}.onnx")
    torch.manual_seed(1005)
    net = models.TinyGPT(max_pos=positions, **CFG).eval()
    layers, heads, hd = CFG["layers"], CFG["heads"], CFG["dim"] // CFG["heads"]
    pasts = [f"past_{k}_{i}" for i in range(layers) for k in ("key", "value")]
    presents = [f"present_{k}_{i}" for i in range(layers) for k in ("key", "value")]
    if not os.path.exists(path):
        axes = {"input_ids": {1: "seq"}, "logits": {1: "seq"}}
        axes.update({n: {2: "past_len"} for n in pasts})
        axes.update({n: {2: "total_len"} for n in presents})
        trace = (torch.randint(0, CFG["vocab"], (1, 4)),) + tuple(torch.randn(1, heads, 3, hd) for _ in pasts)
        torch.onnx.export(net, trace, path, opset_version=17, input_names=["input_ids"] + pasts,
                          output_names=["logits"] + presents, dynamic_axes=axes, do_constant_folding=True)
    return path, net, pasts, presents, heads, hd


def feeds_for(rng, seq, past, pasts, heads, hd):
    f = {"input_ids": rng.integers(0, CFG["vocab"], (1, seq), dtype=np.int64)}
    for n in pasts:
        f[n] = rng.standard_normal((1, heads, past, hd), dtype=np.float32)
    return f


def rss_kib():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def eager(net, feeds, pasts):
    with torch.no_grad():
        out = net(torch.from_numpy(feeds["input_ids"]), *(torch.from_numpy(feeds[n]) for n in pasts))
    return [o.numpy() for o in out]


def soak(args):
    path, net, pasts, presents, heads, hd = export(args.dir, args.positions)
    s = mixrt.Session(path)
    rng = np.random.default_rng(7)
    samples, worst, t0 = [], 0.0, time.time()
    ok = True
    for step in range(args.steps):
        seq = int(rng.integers(1, args.max_seq + 1))
        past = int(rng.integers(0, args.positions - seq + 1))
        f = feeds_for(rng, seq, past, pasts, heads, hd)
        got = s.run(None, f)
        if step % args.sample == 0 or step == args.steps - 1:
            want = eager(net, f, pasts)
            for g, w in zip(got, want):
                err = float(np.max(np.abs(g - w) / (1e-4 + 1e-3 * np.abs(w)))) if w.size else 0.0
                worst = max(worst, err)
                ok = ok and err <= 1.0
            st = s.stats()["total"]
            samples.append({"step": step, "rss_kib": rss_kib(), "seconds": round(time.time() - t0, 1),
                            "spec_compiles": st["spec_compiles"], "spec_evictions": st["spec_evictions"],
                            "spec_fallbacks": st["spec_fallbacks"]})
            print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
    # Flat: the second half's samples within 1 % (the first half warms the allocator's cache
    # up to the largest shapes, as bench/soak/soak.c's verdict allows).
    rss = [x["rss_kib"] for x in samples if x["step"] >= args.steps // 2] or [samples[-1]["rss_kib"]]
    flat = max(rss) <= 1.01 * min(rss)
    print(json.dumps({"mode": "soak", "model": path, "steps": args.steps, "max_seq": args.max_seq,
                      "positions": args.positions, "samples": samples, "rss_min_kib": min(rss),
                      "rss_max_kib": max(rss), "rss_flat_1pct_second_half": flat, "worst_error_over_tolerance": worst,
                      "all_samples_match": ok, "stats": s.stats()["total"]}, indent=1))
    return 0 if flat and ok else 1


def decode_times(s, state, steps, pasts, presents):
    """Greedy decode from `state` (feeds after the prefill): per-step wall times in us."""
    f = dict(state)
    times = []
    names = ["logits"] + presents
    for _ in range(steps):
        t = time.perf_counter_ns()
        out = s.run(names, f)
        times.append((time.perf_counter_ns() - t) / 1e3)
        f = {"input_ids": np.argmax(out[0][:, -1:, :], axis=-1).astype(np.int64)}
        f.update({p: o for p, o in zip(pasts, out[1:])})
    return times


def ort_decode(node, peers, path, state, steps):
    peer = os.path.join(peers, "ort_runner.js")
    with tempfile.TemporaryDirectory() as d:
        for k, v in state.items():
            np.save(os.path.join(d, k + ".npy"), v)
        p = subprocess.Popen([node, peer], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             cwd=peers)
        ready = p.stdout.readline().split()
        if not ready or ready[0] != "ready":
            return None, " ".join(ready)

        def ask(line):
            p.stdin.write(line + "\n")
            p.stdin.flush()
            return p.stdout.readline().split()

        r = ask(f"load gpt {path}")
        r = ask(f"feed gpt {d}") if r and r[0] == "ok" else r
        times = []
        for _ in range(4):  # blocks from the same state: warm-up first
            r = ask(f"decode gpt {steps}") if r and r[0] == "ok" else r
            if not r or r[0] != "ok":
                break
            times = [int(x) / 1e3 for x in r[1:]]
        ask("quit") if p.poll() is None else None
        p.wait(timeout=10)
        return (times, ready[1]) if times else (None, " ".join(r))


def latency(args):
    path = os.path.join(args.dir, "gpt_kv.onnx") if args.model is None else args.model
    _, _, pasts, presents, heads, hd = export(args.dir, 128) if args.model is None and not os.path.exists(path) \
        else (None, None, [f"past_{k}_{i}" for i in range(CFG["layers"]) for k in ("key", "value")],
              [f"present_{k}_{i}" for i in range(CFG["layers"]) for k in ("key", "value")], CFG["heads"],
              CFG["dim"] // CFG["heads"])
    if args.model is None and not os.path.exists(path):
        path = os.path.join(args.dir, "gpt_spec_128.onnx")
    rng = np.random.default_rng(3)
    prompt = feeds_for(rng, 9, 0, pasts, heads, hd)
    res = {"mode": "latency", "model": path, "decode_steps": args.steps}
    state = None
    for label, opts in (("mixrt_specialized", {}), ("mixrt_no_specialization", {"spec_cache_size": 0})):
        s = mixrt.Session(path, device="inline", **opts)
        out = s.run(["logits"] + presents, prompt)
        state = {"input_ids": np.argmax(out[0][:, -1:, :], axis=-1).astype(np.int64)}
        state.update({p: o for p, o in zip(pasts, out[1:])})
        blocks = [decode_times(s, state, args.steps, pasts, presents) for _ in range(4)]
        t = np.array(blocks[1:]).ravel()  # the first block warms up
        st = s.stats()["total"]
        res[label] = {"median_us": round(float(np.median(t)), 1), "p10_us": round(float(np.percentile(t, 10)), 1),
                      "p90_us": round(float(np.percentile(t, 90)), 1), "spec_compiles": st["spec_compiles"]}
        s.close()
    times, version = ort_decode(args.node, args.peers, path, state, args.steps)
    res["onnxruntime_1_thread"] = ({"median_us": round(float(np.median(times)), 1), "version": version}
                                   if times else {"error": version})
    print(json.dumps(res, indent=1))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["latency", "soak"])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--model", default=None, help="latency: an exported decoder (default: DIR/gpt_kv.onnx)")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--max-seq", type=int, default=512)
    ap.add_argument("--positions", type=int, default=1024)
    ap.add_argument("--node", default="node")
    ap.add_argument("--peers", default=os.path.join(ROOT, "bench", "peers"),
                    help="the directory of ort_runner.js and its node_modules")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    if args.steps is None:
        args.steps = 20000 if args.mode == "soak" else 64
    return soak(args) if args.mode == "soak" else latency(args)


if __name__ == "__main__":
    sys.exit(main())
