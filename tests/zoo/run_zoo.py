#!/usr/bin/python3
"""Runs every zoo model (bench/zoo/export.py) on every saved input shape through `mixrt run`
(the hybrid runtime) and `mixrt run --reference` (the reference interpreter), and compares each
output with PyTorch eager's at rtol 1e-3, atol 1e-4 (|got - want| <= atol + rtol * |want|).

usage: /usr/bin/python3 tests/zoo/run_zoo.py --mixrt PATH --dir ZOO_DIR [--only NAME,...]
                                              [--skip NAME,...] [--steps N] [--no-reference]

The models are exported into ZOO_DIR once (again when the exporter changed). Exit status 0 when
everything matches, 1 otherwise. With --steps N (N > 1) it also reports the hybrid step latency
and the number of static models and dynamic ops, the figures the docs quote."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np

RTOL = 1e-3
ATOL = 1e-4
HERE = os.path.dirname(os.path.abspath(__file__))
EXPORTER_DIR = os.path.join(HERE, "..", "..", "bench", "zoo")


def export_is_current(zoo_dir):
    manifest = os.path.join(zoo_dir, "manifest.json")
    if not os.path.exists(manifest):
        return False
    stamp = os.path.getmtime(manifest)
    return all(os.path.getmtime(os.path.join(EXPORTER_DIR, f)) <= stamp
               for f in os.listdir(EXPORTER_DIR) if f.endswith(".py"))


def export(zoo_dir):
    t0 = time.time()
    print(f"zoo: exporting the models into {zoo_dir}", flush=True)
    r = subprocess.run([sys.executable, os.path.join(EXPORTER_DIR, "export.py"), zoo_dir],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("zoo:") or r.returncode != 0:
            print(line)
    if r.returncode != 0:
        sys.exit(f"zoo: the export failed (exit {r.returncode})")
    print(f"zoo: export done in {time.time() - t0:.0f} s", flush=True)


def run_mixrt(mixrt, zoo_dir, model, case, out_dir, extra):
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    cmd = [mixrt, "run", os.path.join(zoo_dir, model["model"])]
    for name, path in case["inputs"].items():
        cmd += ["--input", f"{name}={os.path.join(zoo_dir, path)}"]
    cmd += ["--output-dir", out_dir] + extra
    t0 = time.time()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return r.returncode, r.stdout, time.time() - t0


def compare(zoo_dir, case, out_dir):
    """Returns (ok, max abs error, max rel error, problems)."""
    ok, max_abs, max_rel, problems = True, 0.0, 0.0, []
    for name, path in case["outputs"].items():
        want = np.load(os.path.join(zoo_dir, path))
        got_path = os.path.join(out_dir, name + ".npy")
        if not os.path.exists(got_path):
            ok = False
            problems.append(f"{name}: no output written")
            continue
        got = np.load(got_path)
        if got.shape != want.shape or got.dtype != want.dtype:
            ok = False
            problems.append(f"{name}: got {got.dtype}{list(got.shape)}, want {want.dtype}{list(want.shape)}")
            continue
        if want.size == 0:
            continue
        if want.dtype.kind == "f" and np.abs(want).max() < 100 * ATOL:
            # An output this small passes on atol alone whatever mixrt computes.
            ok = False
            problems.append(f"{name}: the expected output is too small to compare (max |want| "
                            f"{np.abs(want).max():.3g}): fix the model's scale in bench/zoo")
        g64, w64 = got.astype(np.float64), want.astype(np.float64)
        err = np.abs(g64 - w64)
        max_abs = max(max_abs, float(err.max()))
        max_rel = max(max_rel, float((err / np.maximum(np.abs(w64), 1e-30)).max()))
        bad = ~(err <= ATOL + RTOL * np.abs(w64))
        if bad.any():
            ok = False
            i = np.unravel_index(np.argmax(np.where(bad, err, -1.0)), want.shape)
            problems.append(f"{name}: {int(bad.sum())} of {want.size} elements differ, worst at {list(i)}: "
                            f"got {g64[i]:.6g}, want {w64[i]:.6g}")
    return ok, max_abs, max_rel, problems


def hybrid_figures(text):
    """Static models, dynamic ops and the median step latency from `mixrt run`'s report."""
    figures = {}
    m = re.search(r"(\d+) static and (\d+) dynamic partitions", text)
    if m:
        figures["static"], figures["dynamic"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"step latency: median ([0-9.]+ ?[mu]?s), p10 ([0-9.]+ ?[mu]?s)", text)
    if m:
        figures["median"], figures["p10"] = m.group(1).replace(" ", ""), m.group(2).replace(" ", "")
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mixrt", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--skip", default="", help="comma-separated model names not to run")
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    zoo_dir = os.path.abspath(args.dir)
    if not export_is_current(zoo_dir):
        export(zoo_dir)
    with open(os.path.join(zoo_dir, "manifest.json")) as f:
        manifest = json.load(f)
    only = set(filter(None, args.only.split(",")))
    skip = set(filter(None, args.skip.split(",")))
    paths = [("hybrid", ["--steps", str(args.steps)])]
    if not args.no_reference:
        paths.append(("reference", ["--reference"]))
    failures = 0
    for model in manifest["models"]:
        if (only and model["name"] not in only) or model["name"] in skip:
            continue
        for case in model["cases"]:
            for path_name, extra in paths:
                out_dir = os.path.join(zoo_dir, "got", model["name"], case["name"], path_name)
                rc, text, seconds = run_mixrt(args.mixrt, zoo_dir, model, case, out_dir, extra)
                label = f"{model['name']} {case['name']} {path_name}"
                if rc != 0:
                    failures += 1
                    print(f"FAIL {label}: mixrt run exited {rc}")
                    print("\n".join("    " + line for line in text.strip().splitlines()[-12:]))
                    continue
                ok, max_abs, max_rel, problems = compare(zoo_dir, case, out_dir)
                figures = hybrid_figures(text) if path_name == "hybrid" else {}
                extra_text = "".join(f" {k}={v}" for k, v in figures.items())
                print(f"{'ok  ' if ok else 'FAIL'} {label}: max abs {max_abs:.3g}, max rel {max_rel:.3g}, "
                      f"{seconds:.1f} s{extra_text}", flush=True)
                if args.verbose:
                    print(text)
                for p in problems:
                    print("    " + p)
                failures += 0 if ok else 1
    print(f"zoo: {'all outputs match PyTorch eager' if failures == 0 else f'{failures} runs failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
