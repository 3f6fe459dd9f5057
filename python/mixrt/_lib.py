"""ctypes declarations of libmixrt.so's public API (include/mixrt/*.h) and where the library is found.

The library is looked for, in order: $MIXRT_LIBRARY (a path to libmixrt.so), the build trees of the
source checkout this package sits in (build*/libmixrt.so), the lib folder of an install prefix
holding this package (<prefix>/lib/libmixrt.so), then the system's library path.
"""
import ctypes
import glob
import importlib.machinery
import importlib.util
import os

# Caller-filled records are allocated this much larger than the fields mirrored here and filled by
# the library's own *_init function first, so fields a newer library appends get its defaults.
RECORD_SLACK = 512

MAX_RANK = 8
FAULT_POINT_COUNT = 4
OK = 0


class DeviceOptions(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("kind", ctypes.c_int),
        ("max_workers", ctypes.c_uint32),
        ("pinning", ctypes.c_int),
        ("memory_limit", ctypes.c_uint64),
        ("check", ctypes.c_int),
        ("fault_from_env", ctypes.c_bool),
        ("fault_nth", ctypes.c_uint64 * FAULT_POINT_COUNT),
        ("ring_slots", ctypes.c_uint32),
        ("spin_ns", ctypes.c_int64),
        ("skip_kernels", ctypes.c_bool),
        ("huge_pages", ctypes.c_bool),
    ]


class SymbolRange(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("min", ctypes.c_int64), ("max", ctypes.c_int64)]


class SessionOptions(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),  # MX_SESSION_OPTIONS_VERSION, set by mx_session_options_init
        ("device", ctypes.c_void_p),
        ("device_options", DeviceOptions),
        ("streams", ctypes.c_uint32),
        ("executor", ctypes.c_int),
        ("executor_threads", ctypes.c_uint32),
        ("static_min_ops", ctypes.c_int64),
        ("stable_partition", ctypes.c_bool),
        ("frozen_inputs", ctypes.POINTER(ctypes.c_char_p)),
        ("n_frozen_inputs", ctypes.c_size_t),
        ("symbol_ranges", ctypes.POINTER(SymbolRange)),
        ("n_symbol_ranges", ctypes.c_size_t),
        ("log", ctypes.c_void_p),
        ("log_user", ctypes.c_void_p),
        ("uv_loop", ctypes.c_void_p),
        ("private_weights", ctypes.c_bool),
        ("passes", ctypes.c_char_p),
        ("memory_limit", ctypes.c_uint64),
        ("spec_cache_size", ctypes.c_uint32),  # version 2
        ("spec_churn_limit", ctypes.c_uint32),
        ("gears", ctypes.POINTER(ctypes.c_char_p)),
        ("n_gears", ctypes.c_size_t),
        ("intra_op_threads", ctypes.c_uint32),  # version 3
        ("max_loop_iterations", ctypes.c_int64),  # version 4
    ]


class Tensor(ctypes.Structure):
    _fields_ = [
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int32),
        ("dims", ctypes.c_int64 * MAX_RANK),
        ("data", ctypes.c_void_p),
        ("placement", ctypes.c_int),
        ("name", ctypes.c_char_p),
    ]


class Error(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("message", ctypes.c_char * 512)]


class IoInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_char_p),
    ]


STATS_FIELDS = (
    "steps", "step_ns", "static_ns", "dynamic_ns", "host_ns", "static_executes", "dynamic_launches",
    "refreshed_entries", "device_allocations", "allocator_hits", "allocator_misses", "bytes_in_use",
    "bytes_cached", "peak_bytes", "kernels_run", "output_copies",
    "spec_hits", "spec_misses", "spec_compiles", "spec_evictions", "spec_compile_ns", "spec_fallbacks",
)


class SessionStats(ctypes.Structure):
    _fields_ = [(f, ctypes.c_uint64) for f in STATS_FIELDS]


MEMORY_STATS_FIELDS = ("bytes_in_use", "peak_bytes", "limit_bytes", "allocations", "frees", "live",
                       "shared_blocks", "shared_bytes", "shared_hits")


class DeviceMemoryStats(ctypes.Structure):
    _fields_ = [(f, ctypes.c_uint64) for f in MEMORY_STATS_FIELDS]


class SaveOptions(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("external_weights", ctypes.c_bool)]


def new_record(cls):
    """A zeroed record of type cls with RECORD_SLACK spare bytes behind it (see above)."""
    raw = ctypes.create_string_buffer(ctypes.sizeof(cls) + RECORD_SLACK)
    record = cls.from_buffer(raw)
    record._raw = raw  # keeps the storage alive as long as the record
    return record


def _candidates():
    env = os.environ.get("MIXRT_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = []
    # python/mixrt inside a source checkout: its build trees, the default one first.
    root = os.path.dirname(os.path.dirname(here))
    found += [os.path.join(root, "build", "libmixrt.so")]
    found += sorted(glob.glob(os.path.join(root, "build*", "libmixrt.so")))
    # <prefix>/lib/python3/dist-packages/mixrt or <prefix>/lib/pythonX.Y/site-packages/mixrt.
    prefix = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(here))))
    found += sorted(glob.glob(os.path.join(prefix, "lib*", "libmixrt.so")))
    found += ["libmixrt.so"]  # the dynamic loader's own search path
    return found


def _declare(lib):
    c = ctypes
    P = c.POINTER
    sigs = {
        "mx_version": (c.c_char_p, []),
        "mx_version_number": (c.c_int, []),
        "mx_status_name": (c.c_char_p, [c.c_int]),
        "mx_status_string": (c.c_char_p, [c.c_int]),
        "mx_dtype_name": (c.c_char_p, [c.c_int]),
        "mx_session_options_init": (None, [c.c_void_p]),
        "mx_session_create": (c.c_int, [c.c_void_p, P(c.c_void_p), P(Error)]),
        "mx_session_destroy": (None, [c.c_void_p]),
        "mx_session_last_error": (c.c_char_p, [c.c_void_p]),
        "mx_session_load_file": (c.c_int, [c.c_void_p, c.c_char_p]),
        "mx_session_load_memory": (c.c_int, [c.c_void_p, c.c_char_p, c.c_size_t]),
        "mx_session_save_options_init": (None, [c.c_void_p]),
        "mx_session_save": (c.c_int, [c.c_void_p, c.c_char_p, P(SaveOptions)]),
        "mx_session_input_count": (c.c_size_t, [c.c_void_p]),
        "mx_session_output_count": (c.c_size_t, [c.c_void_p]),
        "mx_session_input_info": (c.c_bool, [c.c_void_p, c.c_size_t, P(IoInfo)]),
        "mx_session_output_info": (c.c_bool, [c.c_void_p, c.c_size_t, P(IoInfo)]),
        "mx_session_run": (c.c_int, [c.c_void_p, P(Tensor), c.c_size_t, P(Tensor), c.c_size_t]),
        # Records the library fills take the caller's size of them (docs/abi.md).
        "mx_session_get_stats_sized": (c.c_int, [c.c_void_p, c.c_void_p, c.c_void_p, c.c_size_t]),
        "mx_session_device": (c.c_void_p, [c.c_void_p]),
        "mx_device_memory_stats_get_sized": (None, [c.c_void_p, c.c_void_p, c.c_size_t]),
        "mx_device_get_info_sized": (None, [c.c_void_p, c.c_void_p, c.c_size_t]),
        "mx_tensor_release": (None, [P(Tensor)]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def load():
    """Loads libmixrt.so (see the module comment) with its functions declared."""
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            continue
        try:
            # CDLL (not PyDLL) releases the GIL for the duration of every call into mixrt.
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
            continue
        _declare(lib)
        lib.path = path
        return lib
    raise ImportError("mixrt: libmixrt.so not found (set MIXRT_LIBRARY to its path): " + "; ".join(errors))


def _step_candidates(lib_path):
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.join(here, "_step" + s) for s in importlib.machinery.EXTENSION_SUFFIXES]
    if os.sep in lib_path:  # a build tree: <build>/libmixrt.so and <build>/python/mixrt/_step*.so
        build = os.path.dirname(os.path.abspath(lib_path))
        found += [os.path.join(build, "python", "mixrt", "_step" + s) for s in importlib.machinery.EXTENSION_SUFFIXES]
    return found


def load_step(lib_path):
    """mixrt._step, the optional C extension doing Session.run's per-step work (python/mixrt/_step.c),
    or None: not built, not found, or MIXRT_PYTHON_EXTENSION=0. Looked for beside this file (an
    install), then in the build tree of the libmixrt.so in use."""
    if os.environ.get("MIXRT_PYTHON_EXTENSION", "1") == "0":
        return None
    for path in _step_candidates(lib_path):
        if not os.path.exists(path):
            continue
        try:
            spec = importlib.util.spec_from_file_location("mixrt._step", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except ImportError:
            continue  # built for another Python
        module.path = path
        return module
    return None


lib = load()
step = load_step(lib.path)
