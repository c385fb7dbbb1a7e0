"""Hot-updatable resources: Python bindings to libassetpatch.

    with assetpatch.Client(data_dir, bundle_dir, manifest_url=url) as client:
        client.update(progress=print)
        path = client.resolve("sub/sample.png")
"""
from __future__ import annotations

import ctypes
import os
import logging
import threading
from typing import Any, Callable, Iterable, List, Optional, Tuple, Union

from . import _ffi
from ._errors import (_ERRORS, ArchiveError, ArgumentError, AssetPatchError, BusyError, CancelledError, DowngradeError,  # noqa: F401
                      ExpiredError, FilesystemError, HTTPError, IncompatibleError, IntegrityError, InternalError, ManifestError,
                      NetworkError, NotFoundError, NotLocalError, QuotaError, MeteredError, RangeError, SignatureError, StateError)
from . import _transport
from ._events import EventsMixin
from ._groups import GroupsMixin
from ._transport import HTTPClientTransport, TransportResponse  # noqa: F401
from ._types import CheckOutcome, EventsInfo, Group, Lifecycle, NoUpdateReason, Phase, Plugin, Progress, ReleaseInfo, Rollback, SourceInfo, Status  # noqa: F401

__all__ = [
    "Client", "EventsInfo", "HTTPClientTransport", "TransportResponse", "Group", "Phase", "Plugin", "Progress", "Lifecycle", "ReleaseInfo", "Rollback", "SourceInfo", "Status", "CheckOutcome", "NoUpdateReason",
    "AssetPatchError", "ArgumentError", "FilesystemError",
    "NetworkError", "HTTPError", "ManifestError", "SignatureError", "IntegrityError", "ArchiveError",
    "DowngradeError", "ExpiredError", "IncompatibleError", "NotFoundError", "RangeError", "CancelledError",
    "BusyError", "StateError", "NotLocalError", "QuotaError", "MeteredError", "InternalError", "LibraryNotFound", "library_version", "__version__",
]

# The release this package belongs to; equal to ASSETPATCH_VERSION_STRING in assetpatch.h (a test
# checks it). pyproject.toml reads it from here.
__version__ = "0.4.0"

LibraryNotFound = _ffi.LibraryNotFound
_lib: Optional[ctypes.CDLL] = None
_lib_lock = threading.Lock()
_log = logging.getLogger("assetpatch")


def _library() -> ctypes.CDLL:
    global _lib
    with _lib_lock:
        if _lib is None:
            _lib = _ffi.load()
        return _lib


def library_version() -> str:
    """The loaded library's version, e.g. "0.2.0"."""
    return _library().assetpatch_version().decode()


def _error(rc: int) -> AssetPatchError:
    message = (_library().assetpatch_last_error() or b"").decode("utf-8", "replace")
    return _ERRORS.get(rc, InternalError)(rc, message)


def _check(rc: int) -> int:
    if rc < 0:
        raise _error(rc)
    return rc


ProgressCallback = Callable[[Progress], Any]
_LEVELS = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR}


class _ProgressTrampoline:
    """Keeps the ctypes callback alive for the call and carries a callback's exception out:
    an exception cancels the update (ctypes would otherwise swallow it) and is re-raised."""

    def __init__(self, fn: Optional[ProgressCallback]) -> None:
        self.fn = fn
        self.error: Optional[BaseException] = None
        self.c_fn = _ffi.PROGRESS_FN(self._call) if fn else _ffi.PROGRESS_FN()

    def _call(self, p: Any, _userdata: Any) -> int:
        if self.error is not None:
            return 1
        try:
            q = p.contents
            result = self.fn(Progress(Phase(q.phase), q.bytes_done, q.bytes_total, q.files_done, q.files_total, bool(q.paused),
                                      q.files_reused, q.bytes_reused))  # type: ignore[misc]
            return 1 if result is True else 0
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            self.error = e
            return 1

    def reraise(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error


class _ResolveBuffer:
    """One thread's result buffer for resolve, with its capacity and length as ready ctypes objects."""

    __slots__ = ("buf", "cap", "length", "len_ref")

    def __init__(self, size: int) -> None:
        self.buf = ctypes.create_string_buffer(size)
        self.cap = ctypes.c_size_t(size)
        self.length = ctypes.c_size_t()
        self.len_ref = ctypes.byref(self.length)


# Where distributions keep their CA bundle. The libcurl a wheel carries looks where Debian keeps
# it; on a system that keeps it elsewhere, the client is pointed at the system's own.
_CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem",
               "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/cert.pem")


def _system_ca_bundle() -> Optional[str]:
    """None where Debian's path exists (libcurl's default); else the first bundle found."""
    if os.path.exists(_CA_BUNDLES[0]):
        return None
    return next((p for p in _CA_BUNDLES[1:] if os.path.exists(p)), None)


class Client(GroupsMixin, EventsMixin):
    """A client of one data directory. Thread-safe; use as a context manager or call close().

    Options are keyword arguments (any option of the C API by its name) or set(name, value):
    manifest_url, public_keys, key_document, package, channel, rollout_id, app_version, variants,
    apply, keep_versions,
    max_failed_launches, connect_timeout_ms, stall_timeout_ms, low_speed_limit, low_speed_time_ms,
    max_manifest_bytes, max_release_bytes, max_legacy_archive_bytes, ca_file, headers, user_agent,
    parallel_downloads, differential, differential_max_percent, allow_unsigned_plugins,
    allow_cross_origin_keys, tcp_quickack, groups, group_quota_bytes, max_recv_speed, update_priority,
    fetch_priority, metered, metered_max_bytes, mirrors (a comma-separated string or a
    list of URLs), hedge_ms, head_mirrors. On/off options take Python booleans.
    """

    def __init__(self, data_dir: str, bundle_dir: Optional[str] = None, *, manifest_url: Optional[str] = None,
                 public_keys: Iterable[str] = (), app_version: Optional[str] = None, variants: Union[str, Iterable[str]] = (),
                 apply: str = "immediate", headers: Iterable[str] = (), **options: Any) -> None:
        lib = _library()
        self._lib = lib
        handle = ctypes.c_void_p()
        _check(lib.assetpatch_client_open(str(data_dir).encode(), None if bundle_dir is None else str(bundle_dir).encode(),
                                          ctypes.byref(handle)))
        # The handle as a ready ctypes pointer: resolve's calls bound without argtypes take it
        # as it is. Those calls write into one result buffer per thread (resolve may run on
        # many threads at once).
        self._handle: Optional[ctypes.c_void_p] = handle
        self._resolve_fn = _ffi.unchecked(lib, "assetpatch_resolve")
        self._resolve_variant_fn = _ffi.unchecked(lib, "assetpatch_resolve_variant")
        self._buffers = threading.local()
        self._background: Optional[_ProgressTrampoline] = None
        self._transports: List[Any] = []
        self._event_fn: Any = None
        self._log_fn = _ffi.LOG_FN(self._on_log)
        try:
            _check(lib.assetpatch_set_log(self._handle, self._log_fn, None))
            if manifest_url is not None:
                self.set("manifest_url", manifest_url)
            keys = list(public_keys)
            if keys:
                self.set("public_keys", ",".join(keys))
            if app_version is not None:
                self.set("app_version", app_version)
            # A string is the C API's form ("@3x,@2x,"); a list is joined into it. Either way the
            # plain name is tried only where an empty item says so: ["@2x", ""].
            v = variants if isinstance(variants, str) else ",".join(variants)
            if v:
                self.set("variants", v)
            self.set("apply", apply)
            ca = _system_ca_bundle()
            if ca is not None and "ca_file" not in options:
                self.set("ca_file", ca)
            for h in headers:
                self.set("header", h)
            for name, value in options.items():
                self.set(name, value)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _on_log(level: int, message: bytes, _userdata: Any) -> None:
        try:
            _log.log(_LEVELS.get(level, logging.INFO), "%s", message.decode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - never let logging unwind into C
            pass

    def _h(self) -> ctypes.c_void_p:
        if self._handle is None:
            raise StateError(Status.ERR_STATE, "client is closed")
        return self._handle

    def set(self, option: str, value: Any) -> None:
        """Sets one option (see the class docs); booleans become "1"/"0"."""
        if isinstance(value, bool):
            value = "1" if value else "0"
        elif option == "mirrors" and not isinstance(value, str):
            value = ",".join(value)
        _check(self._lib.assetpatch_client_set(self._h(), option.encode(), str(value).encode()))

    def check(self) -> Optional[Tuple[int, int]]:
        """(version, download_bytes) of a newer release, or None when there is nothing new."""
        version, size = ctypes.c_int64(), ctypes.c_uint64()
        rc = _check(self._lib.assetpatch_check(self._h(), ctypes.byref(version), ctypes.byref(size)))
        return None if rc == Status.NO_UPDATE else (version.value, size.value)

    def update(self, progress: Optional[ProgressCallback] = None) -> bool:
        """Blocking update. True when a release was installed, False when there was nothing new.
        `progress(Progress)` returning True cancels; an exception it raises cancels and is re-raised."""
        t = _ProgressTrampoline(progress)
        rc = self._lib.assetpatch_update(self._h(), t.c_fn, None)
        t.reraise()
        return _check(rc) == Status.OK

    def start_update(self, progress: Optional[ProgressCallback] = None) -> None:
        """Runs update() on a background thread; collect the result with wait()."""
        t = _ProgressTrampoline(progress)
        _check(self._lib.assetpatch_update_start(self._h(), t.c_fn, None))
        self._background = t

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits for start_update()'s update: True installed, False nothing new; raises its error,
        TimeoutError if still running after `timeout` seconds."""
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        result = ctypes.c_int()
        rc = self._lib.assetpatch_update_wait(self._h(), ms, ctypes.byref(result))
        if rc == Status.ERR_BUSY:
            raise TimeoutError("the update is still running")
        _check(rc)
        t, self._background = self._background, None
        if t is not None:
            t.reraise()
        return _check(result.value) == Status.OK

    @property
    def last_check(self) -> Optional[CheckOutcome]:
        """What the last check() or update() found, and why it found nothing to install; None
        before the first. An older manifest than one accepted before (a stale cache edge) is
        no update, reason OLDER, not an error."""
        raw = _ffi.sized(_ffi.CheckOutcome)
        rc = self._lib.assetpatch_last_check(self._h(), ctypes.byref(raw))
        if rc == Status.ERR_STATE:
            return None
        _check(rc)
        known = {r.value for r in NoUpdateReason}
        reason = NoUpdateReason(raw.reason) if raw.status == Status.NO_UPDATE and raw.reason in known else None
        return CheckOutcome(Status(raw.status), reason, raw.manifest_version, raw.accepted_version,
                            raw.channel.decode("utf-8", "replace"),
                            None if raw.rollout_basis_points < 0 else raw.rollout_basis_points / 100,
                            None if raw.rollout_bucket < 0 else raw.rollout_bucket,
                            None if raw.source < 0 else raw.source)

    def sources(self) -> List[SourceInfo]:
        """Each source (manifest_url, then the mirrors) as the last check or update left it;
        empty without mirrors or before the first."""
        count = ctypes.c_size_t()
        _check(self._lib.assetpatch_source_count(self._h(), ctypes.byref(count)))
        out = []
        for i in range(count.value):
            raw = _ffi.sized(_ffi.SourceInfo)
            _check(self._lib.assetpatch_source_at(self._h(), i, ctypes.byref(raw)))
            out.append(SourceInfo(raw.url.decode("utf-8", "replace"), bool(raw.demoted), bool(raw.served_head), raw.requests,
                                  raw.bytes, raw.last.decode("utf-8", "replace")))
        return out

    def cancel(self) -> None:
        """Asks a running update to stop soon."""
        if self._handle is not None:
            self._lib.assetpatch_cancel(self._handle)

    def set_transport(self, perform: Optional["_transport.Perform"]) -> None:
        """Makes `perform(method, url, headers, response)` do every later request of this client
        in place of libcurl (None: libcurl again); see HTTPClientTransport and docs/transfers.md.
        It reports through response.head(status, headers, final_url) and response.body(bytes);
        an exception it raises is a failed transfer, retried like a network failure."""
        if perform is None:
            _check(self._lib.assetpatch_set_transport(self._h(), None))
            return
        struct, fn = _transport.c_transport(self._lib, perform)
        _check(self._lib.assetpatch_set_transport(self._h(), ctypes.byref(struct)))
        # Every transport set stays alive with the client: an update that began before another
        # was set goes on calling this one.
        self._transports.append((struct, fn, perform))

    def pause(self) -> None:
        """Pauses every transfer of this client (running or started while paused); past 2 s
        the connections close, and resume() goes on from the byte each range reached."""
        if self._handle is not None:
            self._lib.assetpatch_pause(self._handle)

    def resume(self) -> None:
        """Lets paused transfers go on."""
        if self._handle is not None:
            self._lib.assetpatch_resume(self._handle)

    def _resolve_slow(self, name: str, variant: Optional[ctypes.c_int]) -> "_ResolveBuffer":
        """resolve and resolve_variant: every case, raising for errors, growing the buffer."""
        handle = self._handle
        if handle is None:
            raise StateError(Status.ERR_STATE, "client is closed")
        if "\0" in name:
            raise ArgumentError(Status.ERR_ARGUMENT, f"resource name {name!r} contains NUL")
        encoded = name.encode()
        b = getattr(self._buffers, "b", None) or _ResolveBuffer(1024)
        while True:
            if variant is None:
                rc = self._resolve_fn(handle, encoded, b.buf, b.cap, b.len_ref)
            else:
                rc = self._resolve_variant_fn(handle, encoded, b.buf, b.cap, b.len_ref, ctypes.byref(variant))
            if rc == 0:
                self._buffers.b = b
                return b
            if rc != Status.ERR_RANGE or b.length.value < b.cap.value:
                _check(rc)
            b = _ResolveBuffer(b.length.value + 1)

    def resolve(self, name: str) -> str:
        """The absolute path for a resource name: the active release first, then the bundle."""
        # The common case inline (one ctypes call, nothing converted); the rest in _resolve_slow.
        b = getattr(self._buffers, "b", None)
        handle = self._handle
        if b is not None and handle is not None and "\0" not in name and \
                self._resolve_fn(handle, name.encode(), b.buf, b.cap, b.len_ref) == 0:
            return b.buf.value.decode()
        return self._resolve_slow(name, None).buf.value.decode()

    def resolve_variant(self, name: str) -> Tuple[str, int]:
        """As resolve, with the index in `variants` of the variant that matched (for "@3x,@2x,":
        0 for an @3x file, 2 for the plain name): the host learns the scale of what it loads."""
        variant = ctypes.c_int()
        path = self._resolve_slow(name, variant).buf.value.decode()
        return path, variant.value

    @property
    def current_version(self) -> int:
        """The active release's version; 0 when only the bundle is served."""
        v = ctypes.c_int64()
        _check(self._lib.assetpatch_current(self._h(), ctypes.byref(v)))
        return v.value

    def mark_good(self) -> None:
        """Confirms the active release: never rolled back automatically (max_failed_launches).
        Raises StateError when only the bundle is served."""
        _check(self._lib.assetpatch_mark_good(self._h()))

    def rollback(self) -> int:
        """Goes back to the newest kept release, or the bundle; updates skip the version left.
        Returns the version now served (0: the bundle). StateError when only the bundle is served."""
        _check(self._lib.assetpatch_rollback(self._h()))
        return self.current_version

    def reset(self) -> None:
        """Drops every release and partial download and serves the bundle only; the downgrade
        mark and the pinned package stay. BusyError while an update runs on the data directory."""
        _check(self._lib.assetpatch_reset(self._h()))

    @property
    def lifecycle(self) -> Lifecycle:
        """The data directory's lifecycle state, read now (see assetpatch_lifecycle_get)."""
        raw = _ffi.sized(_ffi.Lifecycle)
        _check(self._lib.assetpatch_lifecycle_get(self._h(), ctypes.byref(raw)))
        rollback = None
        if raw.rolled_back_from:
            rollback = Rollback(raw.rolled_back_from, raw.rolled_back_to, raw.rolled_back_at,
                                raw.rollback_reason.decode("utf-8", "replace"))
        return Lifecycle(raw.active_version, raw.pending_version, bool(raw.active_marked_good), raw.launches,
                         raw.max_failed_launches, raw.bad_versions, rollback)

    def load_plugin(self, name: str, symbol: Optional[str] = None) -> int:
        """Loads plugin `name` of the active release from verified bytes and returns the address
        of `symbol` (None: its declared entry); wrap it with ctypes, e.g.
        `ctypes.CFUNCTYPE(ctypes.c_int)(address)()`."""
        address = ctypes.c_void_p()
        _check(self._lib.assetpatch_plugin_load(self._h(), name.encode(), symbol.encode() if symbol else None,
                                                ctypes.byref(address)))
        return int(address.value or 0)

    @property
    def plugins(self) -> Tuple[Plugin, ...]:
        """The active release's plugins."""
        count = ctypes.c_size_t()
        _check(self._lib.assetpatch_plugin_list(self._h(), None, 0, ctypes.byref(count)))
        items = (_ffi.PluginInfo * max(1, count.value))()
        items[0].size = ctypes.sizeof(_ffi.PluginInfo)  # the stride the library lays the list out by
        _check(self._lib.assetpatch_plugin_list(self._h(), items, count.value, ctypes.byref(count)))
        return tuple(Plugin(i.name.decode(), i.version.decode(), i.entry.decode(), i.abi.decode()) for i in items[:count.value])

    _WHICH = {"active": 1, "pending": 2, "candidate": 3}

    def release_info(self, which: str = "active") -> Optional[ReleaseInfo]:
        """The "active" or "pending" release, or the "candidate" the last check() found; None
        when there is no such release."""
        code = self._WHICH.get(which)
        if code is None:
            raise ValueError(f"which must be one of {sorted(self._WHICH)}")
        raw = _ffi.sized(_ffi.ReleaseInfo)
        rc = self._lib.assetpatch_release_get(self._h(), code, ctypes.byref(raw))
        if rc == Status.ERR_NOT_FOUND:
            return None
        _check(rc)
        notes = ""
        if raw.has_notes:
            length = ctypes.c_size_t()
            buf = ctypes.create_string_buffer(65537)
            _check(self._lib.assetpatch_release_notes(self._h(), code, buf, len(buf), ctypes.byref(length)))
            notes = buf.raw[:length.value].decode("utf-8")
        return ReleaseInfo(raw.version, raw.created, raw.label.decode("utf-8", "replace"), notes, bool(raw.mandatory),
                           bool(raw.signature_verified), bool(raw.marked_good), raw.channel.decode("utf-8", "replace"),
                           None if raw.rollout_basis_points < 0 else raw.rollout_basis_points / 100)

    @property
    def disk_usage(self) -> Tuple[int, int]:
        """(bytes of installed releases, bytes of downloads), hard links counted once."""
        releases, downloads = ctypes.c_uint64(), ctypes.c_uint64()
        _check(self._lib.assetpatch_disk_usage(self._h(), ctypes.byref(releases), ctypes.byref(downloads)))
        return releases.value, downloads.value

    def close(self) -> None:
        """Cancels a running update, waits for it, frees the client. Safe to call twice."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self._lib.assetpatch_client_close(handle)
        self._background = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # Safe at interpreter shutdown: the library object may already be gone.
        try:
            if getattr(self, "_handle", None) is not None and self._lib is not None:
                self.close()
        except Exception:  # noqa: BLE001
            pass
