"""mixrt.torch: run a PyTorch nn.Module through mixrt.

    import mixrt.torch
    m = mixrt.torch.Module(model, example_inputs=(ids, past_k, past_v),
                           input_names=["ids", "past_k", "past_v"],
                           output_names=["logits", "present_k", "present_v"],
                           dynamic_axes={"past_k": {2: "past_len"}, "past_v": {2: "past_len"}},
                           state={"past_k": "present_k", "past_v": "present_v"})
    logits, = m(ids)            # the state inputs come from the session's previous step

The module is exported with torch.onnx.export once per (module, input shapes with the dynamic
axes left out, dtypes) and the ONNX file is cached (in memory for the process and on disk under
$MIXRT_TORCH_CACHE, default ~/.cache/mixrt/torch). Every call runs one step of a mixrt session.
CPU tensors go in without a copy (torch.Tensor.numpy shares memory) and outputs come back as
tensors over mixrt's buffers (torch.from_numpy). Declared state (state={input: output}) stays
inside the binding between calls: each step's output is the next step's input, as arrays over
mixrt's memory; reset() (or passing the state inputs explicitly) starts over.
"""
import hashlib
import io
import os

import numpy as np
import torch

from .session import Session

_sessions = {}  # export key -> Session


def _cache_dir():
    d = os.environ.get("MIXRT_TORCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "mixrt", "torch")
    os.makedirs(d, exist_ok=True)
    return d


class Module:
    def __init__(self, module, example_inputs, input_names, output_names, dynamic_axes=None, state=None,
                 opset=17, **session_options):
        self.module = module
        self.example_inputs = tuple(example_inputs)
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self.dynamic_axes = dict(dynamic_axes or {})
        self.state = dict(state or {})
        self.opset = opset
        self.session_options = session_options
        for i, o in self.state.items():
            if i not in self.input_names or o not in self.output_names:
                raise ValueError(f"mixrt.torch: state {i!r} -> {o!r} names no input or no output")
        self._state_values = {}
        self._by_signature = {}  # input signature -> Session
        self.refresh()

    def refresh(self):
        """Call after changing the module's weights: the next call exports it again."""
        h = hashlib.sha256()
        h.update(repr(self.module).encode())
        for name, p in self.module.state_dict().items():
            h.update(name.encode())
            h.update(p.detach().cpu().contiguous().numpy().tobytes())
        h.update(f"{self.input_names}{self.output_names}{self.dynamic_axes}{self.opset}".encode())
        self._module_hash = h.hexdigest()
        self._by_signature = {}

    def _signature(self, inputs):
        """The inputs' dtypes and dims, the dynamic axes left out."""
        sig = []
        for name, t in zip(self.input_names, inputs):
            dyn = self.dynamic_axes.get(name, {})
            sig.append((str(t.dtype), tuple(-1 if k in dyn else d for k, d in enumerate(t.shape))))
        return tuple(sig)

    def session(self, inputs=None):
        """The mixrt session for inputs (default: the example inputs), exported on first use."""
        inputs = tuple(inputs if inputs is not None else self.example_inputs)
        sig = self._signature(inputs)
        s = self._by_signature.get(sig)
        if s is not None:
            return s
        key = hashlib.sha256(f"{self._module_hash}{sig}".encode()).hexdigest()[:32]
        s = _sessions.get(key)
        if s is None:
            path = os.path.join(_cache_dir(), key + ".onnx")
            if not os.path.exists(path):
                buf = io.BytesIO()
                with torch.no_grad():
                    torch.onnx.export(self.module, inputs, buf, input_names=self.input_names,
                                      output_names=self.output_names, dynamic_axes=self.dynamic_axes,
                                      opset_version=self.opset)
                tmp = path + f".{os.getpid()}.tmp"
                with open(tmp, "wb") as f:
                    f.write(buf.getvalue())
                os.replace(tmp, path)
            s = _sessions[key] = Session(path, **self.session_options)
        self._by_signature[sig] = s
        return s

    def reset(self):
        """Forgets the state: the next call takes the state inputs from its arguments or, when
        they are left out, from the example inputs."""
        self._state_values = {}

    def __call__(self, *args):
        """Arguments: the inputs in input_names order; with declared state, the state inputs may
        be left out (they come from the previous step). Returns the outputs that are not state,
        as torch tensors (one tensor alone when there is one)."""
        free = [n for n in self.input_names if n not in self.state]
        if len(args) == len(self.input_names):
            given = dict(zip(self.input_names, args))
        elif len(args) == len(free):
            given = dict(zip(free, args))
            for k, n in enumerate(self.input_names):
                if n in self.state:
                    given[n] = self._state_values.get(n, self.example_inputs[k])
        else:
            raise TypeError(f"mixrt.torch: expected {len(self.input_names)} or {len(free)} inputs, got {len(args)}")
        feeds = {}
        for n, v in given.items():
            feeds[n] = v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else np.asarray(v)
        s = self.session([torch.from_numpy(np.asarray(feeds[n])) for n in self.input_names])
        outs = dict(zip(self.output_names, s.run(self.output_names, feeds)))
        for i, o in self.state.items():
            self._state_values[i] = outs[o]
        result = [torch.from_numpy(outs[n]) for n in self.output_names if n not in self.state.values()]
        return result[0] if len(result) == 1 else tuple(result)
