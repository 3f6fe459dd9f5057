#!/usr/bin/python3
"""Exports the model zoo to ONNX with torch.onnx.export (opset 17, dynamic axes) into OUT_DIR,
and for each model and a few input shapes saves the inputs and PyTorch eager's outputs as .npy
files. OUT_DIR/manifest.json lists, per model, its ONNX file, op count, and per case the input
and output files and the symbol values of that case.

usage: /usr/bin/python3 bench/zoo/export.py OUT_DIR [--only NAME,NAME...] [--opset N] [--extra]

Random weights only (nothing is downloaded), seeded, so every export is the same."""
import argparse
import json
import os
import sys
import time

import numpy as np
import onnx
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

OPSET = 17


def cnn_spec(name, make, shapes, spatial_dynamic=False, out_names=("logits",)):
    axes = {0: "batch"}
    if spatial_dynamic:
        axes.update({2: "height", 3: "width"})
    cases = []
    for batch, height, width in shapes:
        syms = {"batch": batch}
        if spatial_dynamic:
            syms.update({"height": height, "width": width})
        cases.append((f"b{batch}_{height}x{width}", syms, lambda g, b=batch, h=height, w=width: {
            "input": torch.randn(b, 3, h, w, generator=g)}))
    out_axes = {n: ({0: "batch", 2: "height", 3: "width"} if spatial_dynamic and n != "logits" else {0: "batch"})
                for n in out_names}
    height, width = shapes[0][1:]
    return dict(name=name, make=make, inputs=["input"], outputs=list(out_names),
                dynamic_axes={"input": axes, **out_axes}, cases=cases,
                calibration=lambda g: torch.randn(4, 3, height, width, generator=g))


def static_cnn_spec(name, make):
    """A CNN exported with every dim concrete (batch 1, 224x224): the whole graph is known, so
    mixrt compiles it into static models."""
    spec = cnn_spec(name, make, [(1, 224, 224)])
    spec["dynamic_axes"] = {}
    return spec


class SegOut(torch.nn.Module):
    """torchvision's segmentation models return a dict; ONNX export wants a tensor."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)["out"]


def gpt_spec(decode=False):
    """decode=False: seq and past_len both dynamic (prefill and decode in one graph, every shape
    symbolic, so mixrt runs it as dynamic ops). decode=True: the decode step proper, one new token
    (seq fixed at 1), only the cache length dynamic: the projections and the MLP have concrete
    shapes and become static models, the attention over the cache stays dynamic."""
    cfg = dict(vocab=256, dim=64, heads=4, layers=3)
    heads, head_dim, layers = cfg["heads"], cfg["dim"] // cfg["heads"], cfg["layers"]
    past_names = [f"past_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]
    present_names = [f"present_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]
    axes = {} if decode else {"input_ids": {1: "seq"}, "logits": {1: "seq"}}
    axes.update({n: {2: "past_len"} for n in past_names})
    axes.update({n: {2: "total_len"} for n in present_names})

    def case(seq, past):
        def inputs(g):
            d = {"input_ids": torch.randint(0, cfg["vocab"], (1, seq), generator=g)}
            for n in past_names:
                d[n] = torch.randn(1, heads, past, head_dim, generator=g)
            return d
        syms = {"past_len": past} if decode else {"seq": seq, "past_len": past}
        return (f"seq{seq}_past{past}", syms, inputs)

    if decode:
        # 256 positions, so the decode step past a 128-token cache (the benchmark's case) fits.
        return dict(name="gpt_kv_decode", make=lambda: models.TinyGPT(**cfg, max_pos=256), seed=1005,
                    inputs=["input_ids"] + past_names, outputs=["logits"] + present_names, dynamic_axes=axes,
                    trace_case=case(1, 3), cases=[case(1, 7), case(1, 30), case(1, 128)])
    return dict(name="gpt_kv", make=lambda: models.TinyGPT(**cfg), seed=1005, inputs=["input_ids"] + past_names,
                outputs=["logits"] + present_names, dynamic_axes=axes,
                # The export traces with a non-empty cache so the cache length stays a symbol.
                trace_case=case(4, 3),
                cases=[case(5, 0), case(1, 7), case(3, 4)])


def bert_spec():
    def case(batch, seq):
        def inputs(g):
            ids = torch.randint(0, 512, (batch, seq), generator=g)
            mask = torch.ones(batch, seq, dtype=torch.int64)
            for b in range(1, batch):  # rows after the first are padded at the end
                mask[b, seq - 2 * b:] = 0
            return {"input_ids": ids, "attention_mask": mask}
        return (f"b{batch}_s{seq}", {"batch": batch, "seq": seq}, inputs)

    both = {0: "batch", 1: "seq"}
    return dict(name="bert_encoder", make=models.TinyBert, inputs=["input_ids", "attention_mask"],
                outputs=["last_hidden_state", "pooled"],
                dynamic_axes={"input_ids": both, "attention_mask": both, "last_hidden_state": both,
                              "pooled": {0: "batch"}},
                cases=[case(1, 8), case(3, 13), case(1, 128)])


def lstm_spec():
    def case(batch, seq):
        return (f"b{batch}_s{seq}", {"batch": batch, "seq": seq},
                lambda g: {"tokens": torch.randint(0, 300, (batch, seq), generator=g)})

    both = {0: "batch", 1: "seq"}
    return dict(name="bilstm_tagger", make=models.LstmTagger, inputs=["tokens"], outputs=["tag_logprobs"],
                dynamic_axes={"tokens": both, "tag_logprobs": both}, cases=[case(1, 7), case(3, 12)])


def gru_spec():
    def case(batch, seq):
        return (f"b{batch}_s{seq}", {"batch": batch, "seq": seq},
                lambda g: {"features": torch.randn(batch, seq, 20, generator=g),
                           "h0": torch.randn(2, batch, 40, generator=g)})

    return dict(name="gru", make=models.GruModel, inputs=["features", "h0"], outputs=["prediction", "h_n"],
                dynamic_axes={"features": {0: "batch", 1: "seq"}, "h0": {1: "batch"},
                              "prediction": {0: "batch", 1: "seq"}, "h_n": {1: "batch"}},
                cases=[case(1, 5), case(4, 9)])


def all_specs():
    tv = torchvision.models
    return [
        cnn_spec("resnet50", lambda: tv.resnet50(weights=None), [(1, 224, 224)]),
        cnn_spec("mobilenet_v3_small", lambda: tv.mobilenet_v3_small(weights=None),
                 [(1, 224, 224), (2, 224, 224)]),
        cnn_spec("mobilenet_v3_large", lambda: tv.mobilenet_v3_large(weights=None), [(1, 224, 224)]),
        cnn_spec("squeezenet1_1", lambda: tv.squeezenet1_1(weights=None), [(1, 224, 224), (2, 160, 192)],
                 spatial_dynamic=True),
        cnn_spec("lraspp_mobilenet_v3_large",
                 lambda: SegOut(tv.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None)),
                 [(1, 224, 224)], spatial_dynamic=True, out_names=("out",)),
        gpt_spec(),
        gpt_spec(decode=True),
        static_cnn_spec("mobilenet_v3_small_static", lambda: tv.mobilenet_v3_small(weights=None)),
        bert_spec(),
        lstm_spec(),
        gru_spec(),
    ]


def vit_with_random_head():
    """torchvision zero-initialises ViT's classifier: every logit would be 0."""
    net = torchvision.models.vit_b_16(weights=None)
    torch.nn.init.normal_(net.heads.head.weight, std=0.5)
    return net


def extra_specs():
    """More torchvision CNNs of other shapes, exported only on request (--extra): not part of the
    ctest run, which must stay a few minutes long."""
    tv = torchvision.models
    seg = tv.segmentation
    return [
        cnn_spec("efficientnet_b0", lambda: tv.efficientnet_b0(weights=None), [(1, 224, 224)]),
        cnn_spec("shufflenet_v2_x0_5", lambda: tv.shufflenet_v2_x0_5(weights=None), [(2, 224, 224)]),
        cnn_spec("mnasnet0_5", lambda: tv.mnasnet0_5(weights=None), [(1, 224, 224)]),
        cnn_spec("regnet_y_400mf", lambda: tv.regnet_y_400mf(weights=None), [(1, 224, 224)]),
        cnn_spec("densenet121", lambda: tv.densenet121(weights=None), [(1, 224, 224)]),
        cnn_spec("googlenet", lambda: tv.googlenet(weights=None, aux_logits=False, init_weights=True),
                 [(1, 224, 224)]),
        cnn_spec("convnext_tiny", lambda: tv.convnext_tiny(weights=None), [(1, 224, 224)]),
        cnn_spec("vit_b_16", vit_with_random_head, [(1, 224, 224)]),
        cnn_spec("swin_t", lambda: tv.swin_t(weights=None), [(1, 224, 224)]),
        cnn_spec("deeplabv3_mobilenet_v3_large",
                 lambda: SegOut(seg.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                 aux_loss=False)),
                 [(1, 224, 224)], spatial_dynamic=True, out_names=("out",)),
    ]


def to_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def calibrate_batchnorm(net, sample):
    """Sets every BatchNorm's running statistics to those of a random batch. With torchvision's
    initial statistics (mean 0, variance 1) the activations of the MobileNets shrink layer after
    layer until the logits are ~1e-9, and any comparison passes on atol alone; calibrated, every
    layer sees unit-scale activations and the outputs are O(1)."""
    norms = [m for m in net.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the calibration batches
    net.train()
    with torch.no_grad():
        net(sample)
    net.eval()


def export_one(spec, out_dir, seed, opset):
    torch.manual_seed(seed)
    net = spec["make"]().eval()
    if "calibration" in spec:
        calibrate_batchnorm(net, spec["calibration"](torch.Generator().manual_seed(seed + 2)))
    g = torch.Generator().manual_seed(seed + 1)
    cases = [(n, s, make(g)) for n, s, make in spec["cases"]]
    if "trace_case" in spec:
        trace_inputs = spec["trace_case"][2](g)
    else:
        trace_inputs = cases[0][2]
    onnx_path = os.path.join(out_dir, spec["name"] + ".onnx")
    # Traced with autograd on: under no_grad torch's nn.MultiheadAttention takes its fused fast
    # path (aten::_native_multi_head_attention), which has no ONNX export.
    torch.onnx.export(net, tuple(trace_inputs[n] for n in spec["inputs"]), onnx_path, opset_version=opset,
                      input_names=spec["inputs"], output_names=spec["outputs"],
                      dynamic_axes=spec["dynamic_axes"], do_constant_folding=True)
    proto = onnx.load(onnx_path)
    op_count = len(proto.graph.node)
    entry = {"name": spec["name"], "model": os.path.basename(onnx_path), "opset": opset, "ops": op_count,
             "op_types": sorted({n.op_type for n in proto.graph.node}), "cases": []}
    for case_name, syms, inputs in cases:
        case_dir = os.path.join(out_dir, spec["name"], case_name)
        os.makedirs(case_dir, exist_ok=True)
        with torch.no_grad():
            outs = to_tuple(net(*(inputs[n] for n in spec["inputs"])))
        files_in, files_out = {}, {}
        for n in spec["inputs"]:
            files_in[n] = os.path.relpath(os.path.join(case_dir, "in_" + n + ".npy"), out_dir)
            np.save(os.path.join(out_dir, files_in[n]), inputs[n].numpy())
        for n, t in zip(spec["outputs"], outs):
            files_out[n] = os.path.relpath(os.path.join(case_dir, "want_" + n + ".npy"), out_dir)
            np.save(os.path.join(out_dir, files_out[n]), t.numpy())
        entry["cases"].append({"name": case_name, "symbols": syms, "inputs": files_in, "outputs": files_out})
    return entry


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--extra", action="store_true", help="export the extra CNNs instead (extra_specs)")
    ap.add_argument("--opset", type=int, default=OPSET,
                    help=f"ONNX opset to export with (default {OPSET}; older ones write other op forms)")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    only = set(filter(None, args.only.split(",")))
    manifest = {"opset": args.opset, "torch": torch.__version__, "models": []}
    for i, spec in enumerate(extra_specs() if args.extra else all_specs()):
        if only and spec["name"] not in only:
            continue
        t0 = time.time()
        entry = export_one(spec, args.out_dir, seed=spec.get("seed", 1000 + i), opset=args.opset)
        print(f"zoo: exported {entry['name']}: {entry['ops']} ops, {len(entry['cases'])} cases "
              f"({time.time() - t0:.1f} s)", flush=True)
        manifest["models"].append(entry)
    # Written last: its presence says the export finished.
    tmp = os.path.join(args.out_dir, "manifest.json.tmp")
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(tmp, os.path.join(args.out_dir, "manifest.json"))


if __name__ == "__main__":
    main()
