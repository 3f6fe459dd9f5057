#!/usr/bin/env python3
"""Writes docs/cli.md from the `--help` texts of a built `mixrt` program, so the page says what
the program says. usage: scripts/write_cli_doc.py [BUILD_DIR]   (default: build)"""
import os
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
mixrt = os.path.join(sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "build"), "tools", "mixrt")


def help_text(*args):
    r = subprocess.run([mixrt, *args, "--help"], capture_output=True, text=True)
    return (r.stdout or r.stderr).replace(root + "/", "")


top = help_text()
commands = [l.split()[0] for l in top.split("commands:")[1].split("\n\n")[0].splitlines() if l.strip()]
out = ["# The `mixrt` program\n",
       "`mixrt` is the command-line face of the library: it inspects, partitions, compiles, runs and",
       "benchmarks models, and runs the ONNX node tests. `mixrt --help` lists the commands and",
       "`mixrt COMMAND --help` describes one; this page gathers those texts (written by",
       "`scripts/write_cli_doc.py`). Every command exits with 0 when it succeeded, 1 on a run-time",
       "error (a bad model, a failed run) and 2 on a usage error, and prints its errors on stderr",
       "naming the file, node, value or option at fault.\n",
       "```\n$ mixrt --help\n" + top + "```\n"]
for c in commands:
    out.append(f"## mixrt {c}\n\n```\n{help_text(c)}```\n")
    # `mixrt bench SUITE --help` prints the whole bench help (every suite's text): a section of
    # its own only if that ever differs.
    if c == "bench" and help_text("bench", "llm") != help_text(c):
        out.append(f"### mixrt bench llm\n\n```\n{help_text('bench', 'llm')}```\n")
open(os.path.join(root, "docs", "cli.md"), "w").write("\n".join(out))
print(f"docs/cli.md: {len(commands)} commands")
