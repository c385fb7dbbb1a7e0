"""The values the library hands back: statuses, phases, progress, release information, the
lifecycle and what a check found (mirrors of the header's enums and structs)."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional


class Status(enum.IntEnum):
    OK = 0
    NO_UPDATE = 1
    ERR_ARGUMENT = -1
    ERR_IO = -2
    ERR_NETWORK = -3
    ERR_HTTP = -4
    ERR_MANIFEST = -5
    ERR_SIGNATURE = -6
    ERR_INTEGRITY = -7
    ERR_ARCHIVE = -8
    ERR_DOWNGRADE = -9
    ERR_EXPIRED = -10
    ERR_INCOMPATIBLE = -11
    ERR_NOT_FOUND = -12
    ERR_RANGE = -13
    ERR_CANCELLED = -14
    ERR_BUSY = -15
    ERR_STATE = -16
    ERR_NOT_LOCAL = -17
    ERR_QUOTA = -18
    ERR_METERED = -19
    ERR_INTERNAL = -99


class Phase(enum.IntEnum):
    CHECK = 1
    DOWNLOAD = 2
    INSTALL = 3
    ACTIVATE = 4
    DONE = 5


@dataclass(frozen=True)
class Plugin:
    """A plugin the active release declares: name, its own version, entry symbol, ABI tag ("" when absent)."""
    name: str
    version: str
    entry: str
    abi: str


@dataclass(frozen=True)
class ReleaseInfo:
    """What an app may show about a release: version, creation time (Unix seconds, 0 unknown),
    label, notes, whether the publisher marked it mandatory, whether its signature was verified,
    whether it is marked good, the channel it comes from and its rollout share (percent; None
    when its manifest had no rollout)."""
    version: int
    created: int
    label: str
    notes: str
    mandatory: bool
    signature_verified: bool
    marked_good: bool
    channel: str = "stable"
    rollout_percent: Optional[float] = None


@dataclass(frozen=True)
class Rollback:
    """The last rollback: the version left, the one gone to (0: the bundle), when, and why."""
    from_version: int
    to_version: int
    time: int
    reason: str


@dataclass(frozen=True)
class Lifecycle:
    """What assetpatch_lifecycle_get reports: versions served and pending (0: none), whether the
    active release is marked good, launches counted towards max_failed_launches (and the limit in
    force), how many versions are bad, and the last rollback."""
    active_version: int
    pending_version: int
    marked_good: bool
    launches: int
    max_failed_launches: int
    bad_versions: int
    last_rollback: Optional[Rollback]


class NoUpdateReason(enum.IntEnum):
    """Why a check or update found nothing to install (assetpatch_no_update_reason)."""
    CURRENT = 1      # the manifest offers the release installed
    OLDER = 2        # older than one accepted before: a stale cache edge, or a replay
    BAD_VERSION = 3  # a version this client rolled back from
    IN_BUNDLE = 4    # the app's bundle carries it or a newer one
    NOT_IN_ROLLOUT = 5   # the manifest's staged rollout does not include this client (yet), or is halted
    CHANNEL_BEHIND = 6   # not given since 0.5: a client moves to another channel when its host names it


@dataclass(frozen=True)
class CheckOutcome:
    """What the last check or update found (assetpatch_last_check): its status, why there was
    nothing to install (None unless status is NO_UPDATE), the version the manifest offered and
    the highest version accepted before from the manifest's channel; the manifest's channel, its
    rollout share in force (percent; None without a rollout) and this client's bucket (0..9999;
    None when not computed): the client takes the release iff bucket < share x 100."""
    status: Status
    reason: Optional[NoUpdateReason]
    manifest_version: int
    accepted_version: int
    channel: str = ""
    rollout_percent: Optional[float] = None
    rollout_bucket: Optional[int] = None
    #: Whose head it took: 0 manifest_url, N the Nth mirror; None when it took none.
    source: Optional[int] = None


@dataclass(frozen=True)
class Progress:
    phase: Phase
    bytes_done: int
    bytes_total: int
    files_done: int
    files_total: int
    paused: bool = False
    """Transfers hold: the client is paused, or this background work yields to foreground work."""
    files_reused: int = 0
    """INSTALL: of files_done, those taken from disk (an installed release, the bundle) rather
    than from bytes this update fetched."""
    bytes_reused: int = 0
    """INSTALL: their bytes, and a chunked file's chunks found on disk."""


@dataclass(frozen=True)
class Group:
    """One group of the release a client serves: its state ("absent", "partial", "local"), its
    delivery ("install" or "on_demand"), whether it is pinned, its files, their unpacked bytes,
    the bytes of them on disk, their bytes in the archive, and what a fetch would transfer (0 when
    local; planned by the update that installed the release: a chunked file counts whole)."""
    name: str
    state: str
    delivery: str
    pinned: bool
    files: int
    total_bytes: int
    local_bytes: int
    archive_bytes: int
    fetch_bytes: int


@dataclass(frozen=True)
class SourceInfo:
    """One source of the repository (manifest_url, then the mirrors in order) as the last check
    or update left it (assetpatch_source_at): its head's URL, whether it was demoted, whether
    its head was taken, the requests sent to it, the body bytes it delivered, its last result."""
    url: str
    demoted: bool
    served_head: bool
    requests: int
    bytes: int
    last: str


@dataclass(frozen=True)
class EventsInfo:
    """The data directory's outbox of outcome events (assetpatch_events_info_get): events not
    acknowledged, the oldest and newest of them, the last acknowledged seq, events dropped to
    keep the outbox within events_max_bytes, and its size on disk."""
    pending: int
    first_seq: int
    last_seq: int
    acked_seq: int
    dropped: int
    bytes: int
