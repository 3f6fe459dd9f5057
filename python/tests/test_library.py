"""libmixrt.so as bindings see it: only the public API is exported, and the version agrees."""
import re
import shutil
import subprocess

import pytest

import mixrt
from mixrt._lib import lib


def exported_symbols():
    nm = shutil.which("nm")
    if not nm or "/" not in lib.path:
        pytest.skip("needs nm and a library path")
    out = subprocess.run([nm, "-D", "--defined-only", lib.path], check=True, capture_output=True, text=True).stdout
    return [line.split()[-1] for line in out.splitlines() if line.strip()]


def test_only_public_symbols_exported():
    symbols = exported_symbols()
    assert "mx_session_run" in symbols and "mx_version" in symbols
    internal = [s for s in symbols if s.startswith("mx__")]
    assert not internal, internal[:10]
    assert all(s.startswith("mx_") for s in symbols), [s for s in symbols if not s.startswith("mx_")][:10]


def test_version_matches_soname():
    major, minor, _ = mixrt.version().split(".")
    objdump = shutil.which("objdump")
    if not objdump:
        pytest.skip("needs objdump")
    out = subprocess.run([objdump, "-p", lib.path], check=True, capture_output=True, text=True).stdout
    soname = re.search(r"SONAME\s+(\S+)", out).group(1)
    assert soname == (f"libmixrt.so.{major}.{minor}" if major == "0" else f"libmixrt.so.{major}")
