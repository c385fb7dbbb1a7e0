"""Declarations of the C ABI (assetpatch.h) for ctypes: types, prototypes, library loading."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
from typing import Any, List

SONAME = "libassetpatch.so.1"


class Progress(ctypes.Structure):
    _fields_ = [
        ("phase", ctypes.c_int),
        ("bytes_done", ctypes.c_uint64),
        ("bytes_total", ctypes.c_uint64),
        ("files_done", ctypes.c_uint64),
        ("files_total", ctypes.c_uint64),
        ("paused", ctypes.c_int32),
        ("files_reused", ctypes.c_uint64),
        ("bytes_reused", ctypes.c_uint64),
    ]


class Lifecycle(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("active_version", ctypes.c_int64),
        ("pending_version", ctypes.c_int64),
        ("active_marked_good", ctypes.c_int32),
        ("launches", ctypes.c_uint32),
        ("max_failed_launches", ctypes.c_uint32),
        ("bad_versions", ctypes.c_uint32),
        ("rolled_back_from", ctypes.c_int64),
        ("rolled_back_to", ctypes.c_int64),
        ("rolled_back_at", ctypes.c_int64),
        ("rollback_reason", ctypes.c_char * 256),
    ]


class ReleaseInfo(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("version", ctypes.c_int64),
        ("created", ctypes.c_int64),
        ("signature_verified", ctypes.c_int32),
        ("marked_good", ctypes.c_int32),
        ("mandatory", ctypes.c_int32),
        ("has_notes", ctypes.c_int32),
        ("label", ctypes.c_char * 256),
        ("channel", ctypes.c_char * 64),
        ("rollout_basis_points", ctypes.c_int32),
        ("reserved2", ctypes.c_int32),
    ]


class PluginInfo(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("name", ctypes.c_char * 128),
        ("version", ctypes.c_char * 64),
        ("entry", ctypes.c_char * 128),
        ("abi", ctypes.c_char * 64),
    ]


class CheckOutcome(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("status", ctypes.c_int32),
        ("reason", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("manifest_version", ctypes.c_int64),
        ("accepted_version", ctypes.c_int64),
        ("rollout_basis_points", ctypes.c_int32),
        ("rollout_bucket", ctypes.c_int32),
        ("channel", ctypes.c_char * 64),
        ("source", ctypes.c_int32),
        ("reserved2", ctypes.c_int32),
    ]


class SourceInfo(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("demoted", ctypes.c_int32),
        ("served_head", ctypes.c_int32),
        ("reserved", ctypes.c_int32),
        ("requests", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("url", ctypes.c_char * 512),
        ("last", ctypes.c_char * 256),
    ]


class GroupInfo(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("state", ctypes.c_int32),
        ("delivery", ctypes.c_int32),
        ("pinned", ctypes.c_int32),
        ("files", ctypes.c_uint64),
        ("total_bytes", ctypes.c_uint64),
        ("local_bytes", ctypes.c_uint64),
        ("archive_bytes", ctypes.c_uint64),
        ("fetch_bytes", ctypes.c_uint64),
        ("name", ctypes.c_char * 64),
    ]


class EventsInfo(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32),
        ("pending", ctypes.c_uint64),
        ("first_seq", ctypes.c_uint64),
        ("last_seq", ctypes.c_uint64),
        ("acked_seq", ctypes.c_uint64),
        ("dropped", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
    ]


def sized(struct: Any) -> Any:
    """An instance of a struct the library fills, its leading `size` set (the header's _INIT)."""
    return struct(size=ctypes.sizeof(struct))


PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Progress), ctypes.c_void_p)
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)
TRANSPORT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                ctypes.POINTER(ctypes.c_char_p), ctypes.c_void_p)


class Transport(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint32),
        ("perform", TRANSPORT_FN),
        ("userdata", ctypes.c_void_p),
    ]


class LibraryNotFound(OSError):
    """libassetpatch could not be loaded; the message lists every place tried."""


def _candidates() -> List[str]:
    found: List[str] = []
    env = os.environ.get("ASSETPATCH_LIBRARY")
    if env:
        found.append(env)
    # A wheel carries the library in the package itself.
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native", SONAME)
    if os.path.exists(bundled):
        found.append(bundled)
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "assetpatch"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
        if libdir:
            found.append(os.path.join(libdir, SONAME))
    except (OSError, subprocess.SubprocessError):
        pass
    found.append(SONAME)
    name = ctypes.util.find_library("assetpatch")
    if name and name not in found:
        found.append(name)
    return found


def load() -> ctypes.CDLL:
    tried = []
    for candidate in _candidates():
        try:
            lib = ctypes.CDLL(candidate)
        except OSError as e:
            tried.append(f"{candidate}: {e}")
            continue
        _declare(lib)
        return lib
    raise LibraryNotFound("libassetpatch not found; tried ASSETPATCH_LIBRARY, the package's own copy (wheels), "
                          "pkg-config's libdir and the system search path:\n  " + "\n  ".join(tried))


def unchecked(lib: ctypes.CDLL, name: str, restype: Any = ctypes.c_int) -> Any:
    """A second binding of `name` without argtypes: ctypes then converts nothing and the caller
    passes ready ctypes objects (pointers, c_size_t, buffers) and bytes. For the hot calls
    (resolve), where argtypes conversion would cost more than the call itself."""
    fn = lib._FuncPtr((name, lib))
    fn.restype = restype
    return fn


def signatures() -> dict:
    """Every function of assetpatch.h: name -> (restype, argtypes). A test compares this with the
    header's prototypes, so a function added there without its declaration here fails."""
    c = ctypes
    client_p = c.c_void_p
    return {
        "assetpatch_status_name": (c.c_char_p, [c.c_int]),
        "assetpatch_version": (c.c_char_p, []),
        "assetpatch_last_error": (c.c_char_p, []),
        "assetpatch_client_open": (c.c_int, [c.c_char_p, c.c_char_p, c.POINTER(client_p)]),
        "assetpatch_client_set": (c.c_int, [client_p, c.c_char_p, c.c_char_p]),
        "assetpatch_client_close": (None, [client_p]),
        "assetpatch_check": (c.c_int, [client_p, c.POINTER(c.c_int64), c.POINTER(c.c_uint64)]),
        "assetpatch_update": (c.c_int, [client_p, PROGRESS_FN, c.c_void_p]),
        "assetpatch_update_start": (c.c_int, [client_p, PROGRESS_FN, c.c_void_p]),
        "assetpatch_update_wait": (c.c_int, [client_p, c.c_int, c.POINTER(c.c_int)]),
        "assetpatch_cancel": (None, [client_p]),
        "assetpatch_pause": (None, [client_p]),
        "assetpatch_resume": (None, [client_p]),
        "assetpatch_last_check": (c.c_int, [client_p, c.POINTER(CheckOutcome)]),
        "assetpatch_source_count": (c.c_int, [client_p, c.POINTER(c.c_size_t)]),
        "assetpatch_source_at": (c.c_int, [client_p, c.c_size_t, c.POINTER(SourceInfo)]),
        "assetpatch_resolve": (c.c_int, [client_p, c.c_char_p, c.c_char_p, c.c_size_t, c.POINTER(c.c_size_t)]),
        "assetpatch_resolve_variant": (c.c_int, [client_p, c.c_char_p, c.c_char_p, c.c_size_t, c.POINTER(c.c_size_t),
                                                 c.POINTER(c.c_int)]),
        "assetpatch_current": (c.c_int, [client_p, c.POINTER(c.c_int64)]),
        "assetpatch_mark_good": (c.c_int, [client_p]),
        "assetpatch_rollback": (c.c_int, [client_p]),
        "assetpatch_reset": (c.c_int, [client_p]),
        "assetpatch_lifecycle_get": (c.c_int, [client_p, c.POINTER(Lifecycle)]),
        "assetpatch_release_get": (c.c_int, [client_p, c.c_int, c.POINTER(ReleaseInfo)]),
        "assetpatch_group_count": (c.c_int, [client_p, c.POINTER(c.c_size_t)]),
        "assetpatch_group_at": (c.c_int, [client_p, c.c_size_t, c.POINTER(GroupInfo)]),
        "assetpatch_group_status": (c.c_int, [client_p, c.c_char_p, c.POINTER(GroupInfo)]),
        "assetpatch_group_fetch": (c.c_int, [client_p, c.POINTER(c.c_char_p), PROGRESS_FN, c.c_void_p]),
        "assetpatch_group_evict": (c.c_int, [client_p, c.c_char_p]),
        "assetpatch_group_pin": (c.c_int, [client_p, c.c_char_p, c.c_int]),
        "assetpatch_release_notes": (c.c_int, [client_p, c.c_int, c.c_char_p, c.c_size_t, c.POINTER(c.c_size_t)]),
        "assetpatch_plugin_load": (c.c_int, [client_p, c.c_char_p, c.c_char_p, c.POINTER(c.c_void_p)]),
        "assetpatch_plugin_list": (c.c_int, [client_p, c.POINTER(PluginInfo), c.c_size_t, c.POINTER(c.c_size_t)]),
        "assetpatch_disk_usage": (c.c_int, [client_p, c.POINTER(c.c_uint64), c.POINTER(c.c_uint64)]),
        "assetpatch_set_log": (c.c_int, [client_p, LOG_FN, c.c_void_p]),
        "assetpatch_events_read": (c.c_int, [client_p, c.c_char_p, c.c_size_t, c.POINTER(c.c_size_t), c.POINTER(c.c_uint64)]),
        "assetpatch_events_ack": (c.c_int, [client_p, c.c_uint64]),
        "assetpatch_events_info_get": (c.c_int, [client_p, c.POINTER(EventsInfo)]),
        "assetpatch_set_event_callback": (c.c_int, [client_p, EVENT_FN, c.c_void_p]),
        "assetpatch_set_transport": (c.c_int, [client_p, c.POINTER(Transport)]),
        "assetpatch_transport_head": (c.c_int, [c.c_void_p, c.c_int, c.POINTER(c.c_char_p), c.c_char_p]),
        "assetpatch_transport_body": (c.c_int, [c.c_void_p, c.c_void_p, c.c_size_t]),
    }


def _declare(lib: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in signatures().items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
