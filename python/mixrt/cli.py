"""The JSON dumps of the `mixrt` program (partition, inspect) as dicts.

The program is $MIXRT_CLI, else the one installed beside libmixrt.so (<prefix>/bin/mixrt) or
built beside it (<build>/tools/mixrt), else `mixrt` on PATH.
"""
import json
import os
import shutil
import subprocess

from ._lib import lib
from .session import MixrtError


def program():
    env = os.environ.get("MIXRT_CLI")
    if env:
        return env
    libdir = os.path.dirname(os.path.abspath(lib.path)) if os.sep in lib.path else ""
    for candidate in (os.path.join(libdir, "..", "bin", "mixrt"), os.path.join(libdir, "tools", "mixrt")):
        if libdir and os.access(candidate, os.X_OK):
            return os.path.normpath(candidate)
    found = shutil.which("mixrt")
    if not found:
        raise MixrtError(9, "mixrt: the mixrt program was not found (set MIXRT_CLI to its path)")
    return found


def _shape_args(shapes):
    args = []
    for sym, value in (shapes or {}).items():
        args += ["--shape", f"{sym}={int(value)}"]
    return args


def _run_json(args):
    p = subprocess.run([program()] + args, capture_output=True, text=True)
    if p.returncode != 0:
        raise MixrtError(1, p.stderr.strip() or f"mixrt {args[0]} failed with status {p.returncode}")
    return json.loads(p.stdout)


def inspect(path, shapes=None):
    """`mixrt inspect --json`: inputs, outputs, opsets, op histogram, inference counts."""
    return _run_json(["inspect", str(path), "--json"] + _shape_args(shapes))


def partition(path, shapes=None, static_min_ops=None, stable=False):
    """`mixrt partition --format json`: the clusters, their nodes and reasons, totals."""
    args = ["partition", str(path), "--format", "json"] + _shape_args(shapes)
    if static_min_ops is not None:
        args += ["--static-min-ops", str(int(static_min_ops))]
    if stable:
        args.append("--stable")
    return _run_json(args)
