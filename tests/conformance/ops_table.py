#!/usr/bin/env python3
"""Writes the table of supported operators in docs/onnx.md (between the lines
<!-- ops-table:begin --> and <!-- ops-table:end -->) from what a build of mixrt says of itself:
`mixrt kernels --ops` (every op definition and the element types its CPU kernels take) and
`mixrt conformance --by-op` over the ONNX node tests, with the opsets those tests import
(tests/data/onnx-node/MANIFEST.tsv). Standard library only.

usage: tests/conformance/ops_table.py [BUILD_DIR] [--run FILE]
  BUILD_DIR   the build to ask (default: build)
  --run FILE  the saved output of `mixrt conformance DATA --quiet --by-op` (update_gaps.sh passes
              the run it made), instead of running the suite again"""
import os
import re
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
args = sys.argv[1:]
saved_run = None
if "--run" in args:
    k = args.index("--run")
    saved_run = args[k + 1]
    del args[k:k + 2]
build = args[0] if args else os.path.join(root, "build")
mixrt = os.path.join(build, "tools", "mixrt")
data = os.path.join(root, "tests", "data", "onnx-node")
doc = os.path.join(root, "docs", "onnx.md")

ops = {}  # "domain:Op" or "Op" -> dtypes text
listing = subprocess.run([mixrt, "kernels", "--ops"], capture_output=True, text=True, check=True).stdout
for line in listing.splitlines()[1:]:
    parts = line.split()
    if not parts:
        continue
    name, rest = parts[0], parts[1:]
    domain = ""
    if rest and (rest[0] == "mixrt" or rest[0].startswith("ai.onnx") or rest[0].startswith("com.")):
        domain, rest = rest[0], rest[1:]
    key = f"{domain}:{name}" if domain else name
    text = " ".join(rest)
    ops[key] = "(runs no CPU kernel: executed by the runtime)" if text == "(no CPU kernel)" else text

by_op = {}
if saved_run:
    with open(saved_run) as f:
        run_out = f.read()
else:
    run_out = subprocess.run([mixrt, "conformance", data, "--quiet", "--by-op"], capture_output=True, text=True).stdout
table = False
for line in run_out.splitlines():
    if line.startswith("operator "):
        table = True
        continue
    m = re.match(r"(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$", line)
    if table and m:
        by_op[m.group(1)] = tuple(int(m.group(k)) for k in range(2, 6))
totals = [l for l in run_out.strip().splitlines() if " passed, " in l][-1]

opsets = {}
with open(os.path.join(data, "MANIFEST.tsv")) as f:
    next(f)
    for line in f:
        cols = line.rstrip("\n").split("\t")
        for op in cols[1].split("+"):
            opsets.setdefault(op, set()).add(int(cols[2]))

rows = ["| operator | domain | element types of the CPU kernels | node tests (passed / all) | opsets the tests import |",
        "|---|---|---|---|---|"]
for key in sorted(ops, key=lambda k: (k.split(":")[0] if ":" in k else "", k.split(":")[-1].lower())):
    domain, name = (key.split(":", 1) if ":" in key else ("", key))
    t = by_op.get(key)
    tests = f"{t[1]} / {t[0]}" if t else "none upstream"
    os_ = sorted(opsets.get(key, ()))
    span = (f"{os_[0]}" if len(os_) == 1 else f"{os_[0]}-{os_[-1]}") if os_ else ""
    rows.append(f"| {name} | {domain or 'ai.onnx'} | {ops[key]} | {tests} | {span} |")
missing = sorted(k for k in by_op if k not in ops)
body = [f"{len(ops)} operator definitions. Conformance of this build: `{totals}` "
        f"(`mixrt conformance tests/data/onnx-node --by-op`).", ""] + rows
if missing:
    body += ["", "Operators the node tests use that mixrt does not define: " + ", ".join(f"`{m}`" for m in missing) + "."]

text = open(doc).read()
begin, end = "<!-- ops-table:begin -->", "<!-- ops-table:end -->"
if begin in text:
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    text = head + begin + "\n" + "\n".join(body) + "\n" + end + tail
else:
    text = text.rstrip("\n") + "\n\n## Supported operators\n\n" + begin + "\n" + "\n".join(body) + "\n" + end + "\n"
gaps = []
run_fail = [l for l in run_out.splitlines() if l.startswith("FAIL ")]
for l in run_fail:
    name, why = l[5:].split(": ", 1)
    gaps.append(f"- `{name}`: {why.replace(data + '/', '')}")
gbegin, gend = "<!-- gaps:begin -->", "<!-- gaps:end -->"
gbody = [f"{len(gaps)} tests do not pass; each with the reason its run gives "
         "(the same list, with the same reasons, is tests/conformance/KNOWN_GAPS.md):", ""] + gaps
if gbegin in text:
    head, rest = text.split(gbegin, 1)
    text = head + gbegin + "\n" + "\n".join(gbody) + "\n" + gend + rest.split(gend, 1)[1]
else:
    text = text.rstrip("\n") + "\n\n## Node tests that do not pass\n\n" + gbegin + "\n" + "\n".join(gbody) + "\n" + gend + "\n"
open(doc, "w").write(text)
print(f"{doc}: {len(ops)} operators; {totals}")
