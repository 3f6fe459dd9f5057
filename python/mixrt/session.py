"""mixrt.Session: one loaded model, run step after step with NumPy arrays in and out.

Inputs are passed to mixrt without a copy when an array is C-contiguous and of the model's
element type; outputs are arrays over the buffers the session allocated (no copy), freed
together when the last array of their step is. A session serializes its own calls (a lock), so it may be
shared by threads; mixrt runs without the GIL, so sessions on different threads run at once.
"""
import ctypes
import re
import struct
import threading

import numpy as np

from . import _lib
from ._lib import lib

EXECUTORS = {"sequential": 0, "topological": 1, "multi_thread": 2}
DEVICES = {"cpu": 0, "inline": 1}

# mixrt dtype code <-> NumPy dtype, for the types NumPy has.
_DTYPES = {
    1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
    9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64,
}
_CODES = {np.dtype(t): code for code, t in _DTYPES.items()}
_NUMPY = {code: np.dtype(t) for code, t in _DTYPES.items()}

# One mx_tensor record as the struct module packs it (native alignment, like the C compiler):
# dtype, rank, dims[MAX_RANK], data, placement, name. Packing a whole record in one call is several
# times cheaper than setting the ctypes fields one by one, which matters on the per-step path.
_RECORD = struct.Struct("@ii%dqPiP" % _lib.MAX_RANK)
_RECORD_FIELDS = 5 + _lib.MAX_RANK
_NO_DIMS = (0,) * _lib.MAX_RANK
assert _RECORD.size == ctypes.sizeof(_lib.Tensor), "mx_tensor layout changed: update _RECORD"


class MixrtError(RuntimeError):
    """A failed mixrt call. str() is mixrt's message; .status is the status name
    ("MX_ERR_SHAPE", ...)."""

    def __init__(self, status, message):
        self.status = lib.mx_status_name(status).decode()
        self.code = status
        super().__init__(message)


def _check(status, message_fn):
    if status != _lib.OK:
        raise MixrtError(status, message_fn())


def _configure_step(module):
    """The C extension configured with this library's functions, or None when it does not fit
    (built against another mixrt) or is absent: Session.run then uses ctypes alone."""
    if module is None:
        return None
    address = lambda fn: ctypes.cast(fn, ctypes.c_void_p).value
    try:
        module.configure(lib.mx_version_number(), ctypes.sizeof(_lib.Tensor), address(lib.mx_session_run),
                         address(lib.mx_tensor_release), address(lib.mx_session_last_error), MixrtError)
    except ImportError:
        return None
    return module


_step = _configure_step(_lib.step)


class IoInfo:
    """An input or output of the model: name, dtype (NumPy dtype, or the mixrt type name when
    NumPy has none), shape (a list of ints and symbol names; None when the rank is unknown)."""

    def __init__(self, info):
        self.name = info.name.decode()
        self.dtype = np.dtype(_DTYPES[info.dtype]) if info.dtype in _DTYPES else lib.mx_dtype_name(info.dtype).decode()
        self.shape = _parse_shape(info.shape.decode()) if info.rank >= 0 else None

    def __repr__(self):
        return f"IoInfo(name={self.name!r}, dtype={self.dtype}, shape={self.shape})"


def _parse_shape(text):
    inner = text.strip()[1:-1].strip()
    if not inner:
        return []
    dims = []
    for part in inner.split(","):
        part = part.strip()
        dims.append(int(part) if re.fullmatch(r"-?\d+", part) else part)
    return dims


def _options(opts):
    o = _lib.new_record(_lib.SessionOptions)
    lib.mx_session_options_init(ctypes.byref(o))
    keep = []  # strings and arrays the record points to, alive until mx_session_create returns
    for key, value in opts.items():
        if key in ("streams", "executor_threads", "static_min_ops", "memory_limit", "spec_cache_size",
                   "spec_churn_limit", "intra_op_threads"):
            setattr(o, key, int(value))
        elif key in ("stable_partition", "private_weights"):
            setattr(o, key, bool(value))
        elif key == "executor":
            if value not in EXECUTORS:
                raise ValueError(f"mixrt: executor must be one of {sorted(EXECUTORS)}, not {value!r}")
            o.executor = EXECUTORS[value]
        elif key == "device":
            if value not in DEVICES:
                raise ValueError(f"mixrt: device must be one of {sorted(DEVICES)}, not {value!r}")
            o.device_options.kind = DEVICES[value]
        elif key == "passes":
            keep.append(value.encode())
            o.passes = keep[-1]
        elif key == "huge_pages":
            o.device_options.huge_pages = bool(value)
        elif key == "gears":
            specs = (ctypes.c_char_p * len(value))(*[g.encode() for g in value])
            keep.append(specs)
            o.gears = ctypes.cast(specs, ctypes.POINTER(ctypes.c_char_p))
            o.n_gears = len(value)
        elif key == "frozen_inputs":
            names = (ctypes.c_char_p * len(value))(*[n.encode() for n in value])
            keep.append(names)
            o.frozen_inputs = ctypes.cast(names, ctypes.POINTER(ctypes.c_char_p))
            o.n_frozen_inputs = len(value)
        elif key == "symbol_ranges":
            ranges = (_lib.SymbolRange * len(value))()
            for r, (name, (lo, hi)) in zip(ranges, value.items()):
                r.name, r.min, r.max = name.encode(), lo, hi
            keep.append(ranges)
            o.symbol_ranges = ranges
            o.n_symbol_ranges = len(value)
        else:
            raise TypeError(f"mixrt.Session: unknown option {key!r}")
    return o, keep


def _address(a):
    """The address of a's data. Through the buffer protocol when a is writable and not empty,
    several times faster than a.ctypes.data, which builds a helper object on every use."""
    if a.flags.writeable and a.nbytes:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    return a.ctypes.data


class _StepOutputs:
    """The host tensors one step's outputs live in (a copy of their records); frees them all when
    the last array over any of them is gone. One owner per step instead of one per output keeps
    the wrapping cheap; an output the caller did not ask for is freed at once."""

    __slots__ = ("records",)

    def __init__(self, records):
        self.records = records

    def release(self, k):
        t = self.records[k]
        if t.data:
            lib.mx_tensor_release(ctypes.byref(t))
            t.data = None

    def __del__(self):
        for t in self.records:
            if t.data:
                lib.mx_tensor_release(ctypes.byref(t))


def _wrap_outputs(owner, fields, wanted):
    """NumPy arrays over the step's outputs `wanted` (indices; each at most once), without a copy.
    `fields` is the flat tuple of the output records as _RECORD unpacks them."""
    arrays = {}
    for k in wanted:
        b = k * _RECORD_FIELDS
        code, rank, data = fields[b], fields[b + 1], fields[b + 2 + _lib.MAX_RANK]
        dims = fields[b + 2:b + 2 + rank]
        dtype = _NUMPY.get(code)
        if dtype is None:
            name = (owner.records[k].name or b"").decode()
            raise MixrtError(5, f"mixrt: output '{name}' is {lib.mx_dtype_name(code).decode()}, which NumPy cannot hold")
        count = 1
        for d in dims:
            count *= d
        if count == 0 or not data:
            arrays[k] = np.empty(dims, dtype)
            continue
        buf = (ctypes.c_char * (count * dtype.itemsize)).from_address(data)
        buf.owner = owner
        arrays[k] = np.ndarray(dims, dtype, buf)
    return arrays


class Session:
    """Session(path, **options): loads an ONNX model or a .mxm file.

    options: streams, executor ("sequential", "topological", "multi_thread"), executor_threads,
    static_min_ops, stable_partition, private_weights, device ("cpu", "inline"), huge_pages,
    frozen_inputs (a list of input names), symbol_ranges ({"past_len": (0, 2048)}), passes (the
    graph rewrite rules: "none", "default", "all" or a list like "default,-cse"), memory_limit
    (bytes), spec_cache_size, spec_churn_limit, gears (a list like ["seq=1", "seq=128"]),
    intra_op_threads (docs/session.md).
    """

    def __init__(self, path, **options):
        self._s = None
        self._lock = threading.Lock()
        o, keep = _options(options)
        handle = ctypes.c_void_p()
        err = _lib.Error()
        _check(lib.mx_session_create(ctypes.byref(o), ctypes.byref(handle), ctypes.byref(err)),
               lambda: err.message.decode(errors="replace"))
        del keep
        self._s = handle
        self.path = str(path)
        _check(lib.mx_session_load_file(self._s, self.path.encode()), self._last_error)
        self.inputs = self._infos(lib.mx_session_input_count, lib.mx_session_input_info)
        self.outputs = self._infos(lib.mx_session_output_count, lib.mx_session_output_info)
        self._input_names = [i.name.encode() for i in self.inputs]
        self._output_names = [i.name.encode() for i in self.outputs]
        self._output_index = {i.name: k for k, i in enumerate(self.outputs)}
        self._names = {}  # input name -> (buffer the records point at, its address)
        self._ins = (_lib.Tensor * len(self.inputs))()
        self._outs = (_lib.Tensor * len(self.outputs))()
        for t, name in zip(self._outs, self._output_names):
            t.name = name
        self._outs_bytes = memoryview(self._outs).cast("B")
        self._outs_template = bytes(self._outs_bytes)  # data NULL, names set: every step starts here
        self._outs_records = struct.Struct("@" + _RECORD.format[1:] * len(self.outputs))
        self._all_outputs = range(len(self.outputs))
        # The C path of run (mixrt._step), when the extension is there; ctypes otherwise.
        self._runner = _step.Runner(self._s.value, len(self.inputs), tuple(i.name for i in self.outputs)) if _step else None

    def _name_address(self, name):
        entry = self._names.get(name)
        if entry is None:
            buf = ctypes.create_string_buffer(name.encode())  # kept: the records point into it
            entry = self._names[name] = (buf, ctypes.addressof(buf))
        return entry[1]

    def _last_error(self):
        return lib.mx_session_last_error(self._s).decode(errors="replace")

    def _infos(self, count_fn, info_fn):
        infos = []
        for k in range(count_fn(self._s)):
            info = _lib.IoInfo()
            if not info_fn(self._s, k, ctypes.byref(info)):
                raise MixrtError(9, f"mixrt: no information on input/output {k}")
            infos.append(IoInfo(info))
        return infos

    def close(self):
        """Unloads the model and frees the session (also done when the object is collected).
        Waits for a step another thread is running on it."""
        lock = getattr(self, "_lock", None)
        if lock is None:  # __init__ failed before the lock existed
            return
        with lock:
            self._runner = None
            if self._s:
                lib.mx_session_destroy(self._s)
                self._s = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def run(self, output_names, feeds):
        """Runs one step. feeds: {input name: array-like}, every model input. output_names: the
        outputs to return, in that order (None: all of them). Returns a list of NumPy arrays."""
        runner = self._runner
        if runner is not None:
            # The common case in C (mixrt._step): NotImplemented leaves the step to the code below,
            # which converts the feeds or names what is wrong.
            with self._lock:
                if self._s:
                    arrays = runner.run(output_names, feeds)
                    if arrays is not NotImplemented:
                        return arrays
        return self._run_ctypes(output_names, feeds)

    def _run_ctypes(self, output_names, feeds):
        if not self._s:
            raise MixrtError(1, "mixrt: the session is closed")
        n_in = len(self.inputs)
        if len(feeds) != n_in:
            missing = [i.name for i in self.inputs if i.name not in feeds]
            raise MixrtError(1, f"mixrt: run needs every input; missing {missing}" if missing else
                             f"mixrt: run got {len(feeds)} inputs, the model has {n_in}")
        n_out = len(self.outputs)
        wanted = None
        if output_names is not None:
            wanted = []
            for name in output_names:
                if name not in self._output_index:
                    raise MixrtError(9, f"mixrt: the model has no output '{name}'")
                wanted.append(self._output_index[name])
        arrays = []  # the arrays whose memory mixrt reads, alive through the call
        for name, value in feeds.items():
            a = value if type(value) is np.ndarray and value.flags.c_contiguous else np.ascontiguousarray(value)
            code = _CODES.get(a.dtype)
            if code is None:
                raise MixrtError(8, f"mixrt: input '{name}' has NumPy type {a.dtype}, which mixrt does not take")
            if a.ndim > _lib.MAX_RANK:
                raise MixrtError(7, f"mixrt: input '{name}' has rank {a.ndim} (at most {_lib.MAX_RANK})")
            arrays.append((name, code, a))
        with self._lock:
            if not self._s:
                raise MixrtError(1, "mixrt: the session is closed")
            # The records are the session's own, rebuilt under the lock for every step.
            ins, outs = self._ins, self._outs
            pack, offset = _RECORD.pack_into, 0
            for name, code, a in arrays:
                pack(ins, offset, code, a.ndim, *(a.shape + _NO_DIMS[a.ndim:]), _address(a), 0,
                     self._name_address(name))
                offset += _RECORD.size
            self._outs_bytes[:] = self._outs_template
            _check(lib.mx_session_run(self._s, ins, n_in, outs, n_out), self._last_error)
            fields = self._outs_records.unpack_from(outs)
            owner = _StepOutputs((_lib.Tensor * n_out).from_buffer_copy(outs))
        if wanted is None:
            arrays = _wrap_outputs(owner, fields, self._all_outputs)
            return [arrays[k] for k in self._all_outputs]
        keep = set(wanted)
        for k in self._all_outputs:
            if k not in keep:
                owner.release(k)
        arrays = _wrap_outputs(owner, fields, sorted(keep))
        return [arrays[k] for k in wanted]

    def save(self, path, external_weights=False):
        """Writes the compiled model as a .mxm file, loadable later without compiling."""
        o = _lib.new_record(_lib.SaveOptions)
        lib.mx_session_save_options_init(ctypes.byref(o))
        o.external_weights = bool(external_weights)
        with self._lock:
            _check(lib.mx_session_save(self._s, str(path).encode(), ctypes.byref(o)), self._last_error)

    def stats(self):
        """{"last": {...}, "total": {...}}: the counters of mx_session_get_stats."""
        # The library fills as many bytes as this binding's record has (docs/abi.md), whatever
        # counters a newer mixrt appended.
        last, total = _lib.SessionStats(), _lib.SessionStats()
        with self._lock:
            _check(lib.mx_session_get_stats_sized(self._s, ctypes.byref(last), ctypes.byref(total),
                                                  ctypes.sizeof(_lib.SessionStats)), self._last_error)
        return {k: {f: getattr(r, f) for f in _lib.STATS_FIELDS} for k, r in (("last", last), ("total", total))}

    def memory_stats(self):
        """The session's device memory counters (mx_device_memory_stats) as a dict."""
        st = _lib.DeviceMemoryStats()
        with self._lock:
            if not self._s:
                raise MixrtError(1, "mixrt: the session is closed")
            lib.mx_device_memory_stats_get_sized(lib.mx_session_device(self._s), ctypes.byref(st),
                                                 ctypes.sizeof(st))
        return {f: getattr(st, f) for f in _lib.MEMORY_STATS_FIELDS}
