"""Fixtures of the mixrt Python tests: the mixrt program and the built-in tiny Llama decode step
written as ONNX. Run by ctest (entry `python`) with MIXRT_LIBRARY, MIXRT_CLI and PYTHONPATH set;
by hand: PYTHONPATH=python MIXRT_LIBRARY=build/libmixrt.so /usr/bin/python3 -m pytest python/tests"""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import mixrt  # noqa: E402
import mixrt.cli  # noqa: E402


@pytest.fixture(scope="session")
def cli():
    return mixrt.cli.program()


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    base = os.environ.get("MIXRT_TEST_TMP")
    if base:
        os.makedirs(base, exist_ok=True)
        return base
    return str(tmp_path_factory.mktemp("mixrt"))


@pytest.fixture(scope="session")
def llama(cli, workdir):
    path = os.path.join(workdir, "llama_tiny.onnx")
    subprocess.run([cli, "gen", "llama", "-o", path], check=True, capture_output=True)
    return path
