#!/bin/sh
# Builds the seed corpora of the fuzz targets into OUT/<target>/ (replacing OUT):
#   - the generated seeds (fuzz_seeds: small llama / MoE / encoder models, TensorProto files of
#     every dtype, static-plan .mxm files, well-formed session steps),
#   - the ONNX conformance models and their input/output TensorProto files, from
#     MIXRT_ONNX_NODE_DIR (default tests/data/onnx-node in the repository), when present,
#   - session .mxm files written by `mixrt compile` (small generated models, bound and unbound
#     symbols, and a few conformance models),
#   - every kept regression input of tests/reliability/data/fuzz/<target>/.
# usage: fuzz/corpus.sh BUILD_DIR OUT   (BUILD_DIR holds fuzz/fuzz_seeds and tools/mixrt)
set -eu
build=$1
out=$2
here=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$out"
mkdir -p "$out/onnx" "$out/tensor_pb" "$out/mxm" "$out/session_mxm" "$out/session_run"
out=$(cd "$out" && pwd) # absolute: the conformance copies below run from the conformance folder

"$build/fuzz/fuzz_seeds" "$out"

node=${MIXRT_ONNX_NODE_DIR:-$here/tests/data/onnx-node}
if [ -d "$node" ]; then
    # One cp each for the ~1,500 models and ~5,300 TensorProto files (a cp and a basename per
    # file took over a minute of the fuzz stage in process starts): the seeds keep the
    # conformance layout, <test>/model.onnx and <test>/test_data_set_0/<name>.pb, and libFuzzer
    # reads its corpus folders recursively.
    (cd "$node" && cp --parents -- */model.onnx "$out/onnx/")
    (cd "$node" && cp --parents -- */test_data_set_0/*.pb "$out/tensor_pb/")
else
    echo "fuzz corpus: no ONNX conformance data at $node (set MIXRT_ONNX_NODE_DIR): generated seeds only"
fi

mixrt=$build/tools/mixrt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
compile() { # name, onnx, extra compile options...
    name=$1
    model=$2
    shift 2
    "$mixrt" compile "$model" "$@" -o "$out/session_mxm/$name.mxm" >/dev/null
}
"$mixrt" gen llama --layers 1 --hidden 16 --heads 2 --kv-heads 1 --ffn 24 --vocab 32 --max-pos 16 \
    -o "$tmp/llama.onnx" >/dev/null
"$mixrt" gen moe --hidden 8 --ffn 8 --experts 3 -o "$tmp/moe.onnx" >/dev/null
"$mixrt" gen encoder --hidden 16 --heads 2 -o "$tmp/encoder.onnx" >/dev/null
compile llama "$tmp/llama.onnx"
compile llama_static "$tmp/llama.onnx" --shape past_len=2
compile llama_2streams "$tmp/llama.onnx" --streams 2 --static-min-ops 0
compile moe "$tmp/moe.onnx"
compile encoder "$tmp/encoder.onnx" --static-min-ops 0
if [ -d "$node" ]; then
    for name in test_add test_matmul_2d test_nonzero_example test_reshape_extended_dims test_gather_0; do
        [ -f "$node/$name/model.onnx" ] && compile "$name" "$node/$name/model.onnx"
    done
fi

for t in onnx tensor_pb mxm session_mxm session_run; do
    kept=$here/tests/reliability/data/fuzz/$t
    if [ -d "$kept" ]; then
        for f in "$kept"/*; do
            [ -f "$f" ] && cp "$f" "$out/$t/kept-$(basename "$f")"
        done
    fi
    echo "fuzz corpus: $t: $(find "$out/$t" -type f | wc -l) seeds"
done
