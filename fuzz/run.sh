#!/bin/sh
# `make fuzz`: builds the libFuzzer targets with clang (build-fuzz/, -DMIXRT_FUZZ=ON), makes
# their seed corpora (fuzz/corpus.sh) and runs every target for FUZZ_SECONDS seconds,
# FUZZ_JOBS targets at a time. Inputs libFuzzer finds interesting accumulate in
# build-fuzz/corpus/<target>/ across runs. A crash, sanitizer report, leak, timeout or
# out-of-memory is saved as build-fuzz/findings/<target>-<kind>-<hash> and fails the run; once
# fixed, the input goes to tests/reliability/data/fuzz/<target>/ as a regression test.
# Without clang or libFuzzer the run is skipped with a loud message (exit 0).
#
# Environment: FUZZ_SECONDS (60), FUZZ_JOBS (2), FUZZ_TARGETS (all), FUZZ_BUILD (build-fuzz),
# FUZZ_SEED (libFuzzer's -seed; unset: a new seed each run, except under CI=true, where it is 1
# so that a CI failure replays exactly: same seeds, same mutations, in the same order),
# MIXRT_ONNX_NODE_DIR (the conformance models for the seeds).
set -eu
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-2}
build=${FUZZ_BUILD:-build-fuzz}
targets=${FUZZ_TARGETS:-onnx tensor_pb mxm session_mxm session_run}
seed=${FUZZ_SEED:-}
if [ -z "$seed" ] && [ "${CI:-}" = true ]; then
    seed=1
fi

skip() {
    echo
    echo "**********************************************************************"
    echo "*** FUZZING SKIPPED: $1"
    echo "*** Install clang and libclang-rt-14-dev (scripts/deps.sh) to run it."
    echo "**********************************************************************"
    echo
    exit 0
}

command -v clang >/dev/null 2>&1 || skip "clang is not installed"
probe=$(mktemp -d)
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
if ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >/dev/null 2>&1; then
    rm -rf "$probe"
    skip "clang cannot build a libFuzzer program (-fsanitize=fuzzer)"
fi
rm -rf "$probe"

if [ ! -f "$build/CMakeCache.txt" ]; then
    CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMIXRT_FUZZ=ON >/dev/null
fi
cmake --build "$build" -j "$jobs" --target fuzz_all

sh fuzz/corpus.sh "$build" "$build/seeds"
mkdir -p "$build/findings" "$build/logs"

# One target: libFuzzer with its growing corpus and the seeds; writes $build/logs/<t>.rc.
run_one() {
    t=$1
    mkdir -p "$build/corpus/$t"
    set +e
    "$build/fuzz/fuzz_$t" ${seed:+-seed="$seed"} -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$build/findings/$t-" \
        "$build/corpus/$t" "$build/seeds/$t" >"$build/logs/$t.log" 2>&1
    echo $? >"$build/logs/$t.rc"
    set -e
}

echo "fuzz: $seconds s per target, $jobs at a time, seed ${seed:-new each run}: $targets"
running=0
for t in $targets; do
    rm -f "$build/logs/$t.rc"
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait
        running=0
    fi
done
wait

failed=""
for t in $targets; do
    rc=$(cat "$build/logs/$t.rc" 2>/dev/null || echo missing)
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/logs/$t.log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]*' "$build/logs/$t.log" | tail -n 1)
    echo "fuzz: $t: exit $rc, ${runs:-?} inputs, ${cov:-cov: ?}"
    if [ "$rc" != 0 ]; then
        failed="$failed $t"
        grep -E 'ERROR|SUMMARY|runtime error|harness|Test unit written' "$build/logs/$t.log" | head -n 20 || true
    fi
done
if [ -n "$failed" ]; then
    echo "fuzz: FINDINGS in:$failed (inputs in $build/findings/, logs in $build/logs/)"
    echo "fuzz: reproduce with $build/fuzz/fuzz_<target> FILE or $build/fuzz/fuzz_replay <target> FILE"
    exit 1
fi
echo "fuzz: no findings"
