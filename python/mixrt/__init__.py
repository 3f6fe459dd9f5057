"""mixrt from Python: load an ONNX model (or a compiled .mxm), run it on NumPy arrays.

    import mixrt
    s = mixrt.Session("model.onnx")
    print(s.inputs, s.outputs)
    logits, = s.run(["logits"], {"input_ids": ids, ...})

See docs/python.md.
"""
from ._lib import lib as _library
from .cli import inspect, partition
from .session import IoInfo, MixrtError, Session

__all__ = ["Session", "IoInfo", "MixrtError", "compile", "inspect", "partition", "version"]


def version():
    """The version of the libmixrt.so in use."""
    return _library.mx_version().decode()


__version__ = version()


def compile(model, output, external_weights=False, **options):
    """Compiles an ONNX model into a .mxm file (partitioned, static models planned) that later
    sessions load without compiling. options as for Session."""
    with Session(model, **options) as s:
        s.save(output, external_weights=external_weights)
