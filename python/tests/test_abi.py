"""Records the library fills are written at the caller's size (docs/abi.md): a record of an older
mixrt (smaller) gets only its own bytes, one of a newer mixrt (larger) gets zeros past the fields
this library knows, and size 0 is refused."""
import ctypes

import numpy as np

import mixrt
from mixrt import _lib
from mixrt._lib import lib

from test_session import random_feeds

SENTINEL = 0xA5


def filled(fill, size, room=256):
    """Calls fill(buffer, size) on a buffer of size + room bytes set to SENTINEL; returns it."""
    buf = (ctypes.c_uint8 * (size + room))(*([SENTINEL] * (size + room)))
    fill(buf, size)
    return bytes(buf)


def test_session_stats_at_every_size(llama):
    s = mixrt.Session(llama)
    s.run(None, random_feeds(s, past_len=2, seed=1))
    own = ctypes.sizeof(_lib.SessionStats)

    def fill(buf, size):
        assert lib.mx_session_get_stats_sized(s._s, buf, None, size) == _lib.OK

    full = filled(fill, own)
    steps = int.from_bytes(full[:8], "little")
    assert steps == 1 and full[own:] == bytes([SENTINEL]) * 256
    older = filled(fill, 16)  # a layout with two counters
    assert older[:16] == full[:16] and older[16:] == bytes([SENTINEL]) * (len(older) - 16)
    newer = filled(fill, own + 64)  # a layout with 8 more counters: this library zeroes them
    assert newer[:own] == full[:own] and newer[own:own + 64] == bytes(64)
    assert newer[own + 64:] == bytes([SENTINEL]) * 256
    record = _lib.SessionStats()
    assert lib.mx_session_get_stats_sized(s._s, ctypes.byref(record), None, 0) != _lib.OK


def test_device_memory_stats_at_every_size(llama):
    s = mixrt.Session(llama)
    dev = lib.mx_session_device(s._s)
    own = ctypes.sizeof(_lib.DeviceMemoryStats)

    def fill(buf, size):
        lib.mx_device_memory_stats_get_sized(dev, buf, size)

    full = filled(fill, own)
    assert full[own:] == bytes([SENTINEL]) * 256
    assert int.from_bytes(full[8 * 3:8 * 4], "little") > 0  # allocations: the weights at least
    older = filled(fill, 24)
    assert older[24:] == bytes([SENTINEL]) * (len(older) - 24)
    newer = filled(fill, own + 32)
    assert newer[own:own + 32] == bytes(32) and newer[own + 32:] == bytes([SENTINEL]) * 256
    assert filled(fill, 0) == bytes([SENTINEL]) * 256  # size 0: nothing written
    stats = s.memory_stats()
    assert stats["allocations"] >= stats["live"] > 0


def test_stats_dict_has_every_counter(llama):
    s = mixrt.Session(llama)
    s.run(None, random_feeds(s, past_len=1, seed=2))
    st = s.stats()
    assert set(st["last"]) == set(_lib.STATS_FIELDS) and st["total"]["steps"] == 1
    assert np.all([v >= 0 for v in st["total"].values()])


def test_device_info_at_every_size(llama):
    """mx_device_info has no Python mirror: a small record gets only its bytes, a record far
    larger than any layout ends in zeros, and nothing past the size given is written."""
    s = mixrt.Session(llama)
    dev = lib.mx_session_device(s._s)

    def fill(buf, size):
        lib.mx_device_get_info_sized(dev, buf, size)

    small = filled(fill, 8)  # kind and pinning
    assert small[8:] == bytes([SENTINEL]) * 256
    assert int.from_bytes(small[:4], "little") == 0  # MX_DEVICE_CPU
    large = filled(fill, 4096)
    assert large[:8] == small[:8]
    assert large[2048:4096] == bytes(2048) and large[4096:] == bytes([SENTINEL]) * 256


def test_save_options_versions(llama, workdir):
    """mx_session_save_options: version 0 (a zeroed record) reads as 1, a newer version is refused."""
    import os

    s = mixrt.Session(llama)
    path = os.path.join(workdir, "abi_save.mxm")
    o = _lib.SaveOptions()
    assert o.version == 0
    assert lib.mx_session_save(s._s, path.encode(), ctypes.byref(o)) == _lib.OK
    o.version = 99
    assert lib.mx_session_save(s._s, path.encode(), ctypes.byref(o)) != _lib.OK
    assert "mx_session_save_options_init" in s._last_error()
    lib.mx_session_save_options_init(ctypes.byref(o))
    assert o.version == 1 and not o.external_weights
    s.save(path, external_weights=True)
    assert os.path.exists(path + ".weights")
    assert len(mixrt.Session(path).run(None, random_feeds(s, past_len=1, seed=3))) == len(s.outputs)
