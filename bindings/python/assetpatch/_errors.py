"""One exception class per error status of the library, each with the status, its name and the
library's message."""
from __future__ import annotations

import re
from typing import Dict, Optional, Type

from ._types import Status


class AssetPatchError(Exception):
    """A failed library call: `status` (a Status), `name` ("ASSETPATCH_ERR_IO") and the message."""

    status: Status = Status.ERR_INTERNAL

    def __init__(self, status: int, message: str) -> None:
        try:
            self.status = Status(status)
        except ValueError:
            self.status = Status.ERR_INTERNAL
        self.name = "ASSETPATCH_" + self.status.name if status == self.status else f"ASSETPATCH_UNKNOWN({status})"
        self.message = message
        super().__init__(f"{self.name}: {message}")


class ArgumentError(AssetPatchError, ValueError): status = Status.ERR_ARGUMENT
class FilesystemError(AssetPatchError, OSError): status = Status.ERR_IO
class NetworkError(AssetPatchError, ConnectionError): status = Status.ERR_NETWORK
class HTTPError(AssetPatchError):
    """An HTTP status the request could not use: `status_code` (404, 503, ...) and `url` (without
    credentials or query), or None where the message does not say."""

    status = Status.ERR_HTTP

    def __init__(self, status: int, message: str) -> None:
        super().__init__(status, message)
        m = re.match(r"(?:GET|HEAD) (\S+): HTTP (\d{3})", message)
        self.url: Optional[str] = m.group(1) if m else None
        self.status_code: Optional[int] = int(m.group(2)) if m else None
class ManifestError(AssetPatchError): status = Status.ERR_MANIFEST
class SignatureError(AssetPatchError): status = Status.ERR_SIGNATURE
class IntegrityError(AssetPatchError): status = Status.ERR_INTEGRITY
class ArchiveError(AssetPatchError): status = Status.ERR_ARCHIVE
class DowngradeError(AssetPatchError): status = Status.ERR_DOWNGRADE
class ExpiredError(AssetPatchError): status = Status.ERR_EXPIRED
class IncompatibleError(AssetPatchError): status = Status.ERR_INCOMPATIBLE
class NotFoundError(AssetPatchError, LookupError): status = Status.ERR_NOT_FOUND
class RangeError(AssetPatchError): status = Status.ERR_RANGE
class CancelledError(AssetPatchError): status = Status.ERR_CANCELLED
class BusyError(AssetPatchError): status = Status.ERR_BUSY
class StateError(AssetPatchError): status = Status.ERR_STATE
class NotLocalError(AssetPatchError, LookupError):
    """A resource (or plugin) whose group is not on disk: `group` names it (fetch_groups)."""

    status = Status.ERR_NOT_LOCAL

    def __init__(self, status: int, message: str) -> None:
        super().__init__(status, message)
        m = re.search(r" is in group (\S+),", message)
        self.group: Optional[str] = m.group(1) if m else None
class QuotaError(AssetPatchError): status = Status.ERR_QUOTA
class MeteredError(AssetPatchError): status = Status.ERR_METERED
class InternalError(AssetPatchError): status = Status.ERR_INTERNAL


# One class per error status, found from the class declarations themselves.
_ERRORS: Dict[int, Type[AssetPatchError]] = {cls.status: cls for cls in AssetPatchError.__subclasses__()}
