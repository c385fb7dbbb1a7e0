"""Outcome events: the data directory's outbox, read in batches and acknowledged
(docs/release-management.md, "Rollout health")."""
from __future__ import annotations

import ctypes
import json
from typing import Any, Callable, Dict, List, Optional

from . import _ffi
from ._types import EventsInfo


class EventsMixin:
    """The Client's event calls; `_h` and `_lib` come from Client."""

    _lib: Any
    _event_fn: Any

    def _h(self) -> Any: ...

    def events(self, max_bytes: int = 65536) -> List[Dict[str, Any]]:
        """The oldest events not acknowledged yet, oldest first, as dicts (at most about
        max_bytes of JSON, but always the oldest one). Acknowledge them with ack_events(seq) once
        they are delivered; until then every read returns them again."""
        from . import _check, Status
        cap = max(int(max_bytes), 1) + 1
        while True:
            buf = ctypes.create_string_buffer(cap)
            length = ctypes.c_size_t()
            last = ctypes.c_uint64()
            rc = self._lib.assetpatch_events_read(self._h(), buf, cap, ctypes.byref(length), ctypes.byref(last))
            if rc == Status.ERR_RANGE and length.value + 1 > cap:
                cap = length.value + 1
                continue
            _check(rc)
            text = buf.raw[:length.value].decode("utf-8")
            return [json.loads(line) for line in text.splitlines() if line]

    def ack_events(self, seq: int) -> None:
        """Acknowledges every event up to seq: no read returns them again, in any process."""
        from . import _check
        _check(self._lib.assetpatch_events_ack(self._h(), ctypes.c_uint64(seq)))

    def events_info(self) -> EventsInfo:
        """The outbox's counts: pending, first_seq, last_seq, acked_seq, dropped, bytes."""
        from . import _check
        raw = _ffi.sized(_ffi.EventsInfo)
        _check(self._lib.assetpatch_events_info_get(self._h(), ctypes.byref(raw)))
        return EventsInfo(raw.pending, raw.first_seq, raw.last_seq, raw.acked_seq, raw.dropped, raw.bytes)

    def on_event(self, fn: Optional[Callable[[Dict[str, Any]], None]]) -> None:
        """Calls fn with each event (a dict) as this client appends it, on the thread that
        appended it (None: stop). An exception fn raises is logged, not raised in the update."""
        from . import _check, _log
        if fn is None:
            _check(self._lib.assetpatch_set_event_callback(self._h(), _ffi.EVENT_FN(), None))
            self._event_fn = None
            return

        def trampoline(data: bytes, length: int, _user: Any) -> None:
            try:
                fn(json.loads(ctypes.string_at(data, length).decode("utf-8")))
            except Exception:  # an exception must not cross the C boundary
                _log.exception("event callback failed")

        c_fn = _ffi.EVENT_FN(trampoline)
        _check(self._lib.assetpatch_set_event_callback(self._h(), c_fn, None))
        self._event_fn = c_fn
