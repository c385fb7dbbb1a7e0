"""Content on demand: the groups of the release a client serves (docs/groups.md)."""
from __future__ import annotations

import ctypes
from typing import Any, Iterable, Optional, Tuple, Union

from . import _ffi
from ._types import Group

_STATES = {0: "absent", 1: "partial", 2: "local"}
_DELIVERIES = {0: "install", 1: "on_demand"}


def _group(raw: Any) -> Group:
    return Group(raw.name.decode("utf-8", "replace"), _STATES.get(raw.state, "absent"), _DELIVERIES.get(raw.delivery, "on_demand"),
                 bool(raw.pinned), raw.files, raw.total_bytes, raw.local_bytes, raw.archive_bytes, raw.fetch_bytes)


class GroupsMixin:
    """The Client's group calls; `_h`, `_lib` and `_call` come from Client."""

    _lib: Any

    def _h(self) -> Any: ...

    def groups(self) -> Tuple[Group, ...]:
        """Every group of the release this client serves, in the release's order."""
        from . import _check
        count = ctypes.c_size_t()
        _check(self._lib.assetpatch_group_count(self._h(), ctypes.byref(count)))
        out = []
        for i in range(count.value):
            raw = _ffi.sized(_ffi.GroupInfo)
            _check(self._lib.assetpatch_group_at(self._h(), i, ctypes.byref(raw)))
            out.append(_group(raw))
        return tuple(out)

    def group(self, name: str) -> Group:
        """One group's state, from memory (NotFoundError when there is no such group)."""
        from . import _check
        raw = _ffi.sized(_ffi.GroupInfo)
        _check(self._lib.assetpatch_group_status(self._h(), name.encode(), ctypes.byref(raw)))
        return _group(raw)

    def fetch_groups(self, names: Union[str, Iterable[str]], progress: Optional[Any] = None) -> None:
        """Fetches on-demand groups of the served release (blocking; resumable; cancel() stops it).
        `progress` as for update()."""
        from . import _check, _ProgressTrampoline
        items = [names] if isinstance(names, str) else list(names)
        array = (ctypes.c_char_p * (len(items) + 1))(*[n.encode() for n in items], None)
        t = _ProgressTrampoline(progress)
        rc = self._lib.assetpatch_group_fetch(self._h(), array, t.c_fn, None)
        t.reraise()
        _check(rc)

    def evict_group(self, name: str) -> None:
        """Evicts an on-demand group (its files go once no other client serves them)."""
        from . import _check
        _check(self._lib.assetpatch_group_evict(self._h(), name.encode()))

    def pin_group(self, name: str, on: bool = True) -> None:
        """Pins (or unpins) a group: never evicted to make room under group_quota_bytes."""
        from . import _check
        _check(self._lib.assetpatch_group_pin(self._h(), name.encode(), 1 if on else 0))
