"""A transport of the host's own (docs/transfers.md): Python code performs the library's HTTP
requests in place of libcurl. `HTTPClientTransport` is one over http.client."""
from __future__ import annotations

import ctypes
import http.client
import logging
import ssl
import threading
import urllib.parse
from typing import Any, Callable, Iterable, List, Optional, Tuple

from . import _ffi

_REDIRECTS = (301, 302, 303, 307, 308)


class TransportResponse:
    """Where a transport reports one response: head() once, then body() for each piece, in
    order. Both return False when the library wants no more (cancelled, refused): stop then."""

    def __init__(self, lib: Any, pointer: int) -> None:
        self._lib, self._pointer = lib, pointer

    def head(self, status: int, headers: Iterable[Tuple[str, str]], final_url: Optional[str] = None) -> bool:
        lines = [f"{k}: {v}".encode("latin-1", "replace") for k, v in headers]
        array = (ctypes.c_char_p * (len(lines) + 1))(*lines, None)
        return self._lib.assetpatch_transport_head(self._pointer, status, array,
                                                   None if final_url is None else final_url.encode()) == 0

    def body(self, data: bytes) -> bool:
        return self._lib.assetpatch_transport_body(self._pointer, data, len(data)) == 0


Perform = Callable[[str, str, List[str], TransportResponse], None]


def c_transport(lib: Any, perform: Perform) -> Tuple[Any, Any]:
    """The C struct for `perform` and the callback object the caller must keep alive."""
    def trampoline(_user: Any, method: bytes, url: bytes, headers: Any, response: int) -> int:
        lines: List[str] = []
        i = 0
        while headers[i] is not None:
            lines.append(headers[i].decode("latin-1"))
            i += 1
        try:
            perform(method.decode(), url.decode(), lines, TransportResponse(lib, response))
            return 0
        except BaseException:  # a failed transfer: the library retries it like a network failure
            logging.getLogger("assetpatch").warning("%s %s: the transport failed", method.decode(), url.decode(), exc_info=True)
            return 1
    fn = _ffi.TRANSPORT_FN(trampoline)
    return _ffi.Transport(size=ctypes.sizeof(_ffi.Transport), perform=fn, userdata=None), fn


class HTTPClientTransport:
    """Requests over Python's http.client: a kept-alive connection per host and thread, redirects
    followed (up to 5, http and https only; Authorization and Cookie are not sent on to another
    host), bodies handed over in 64 KiB pieces as they arrive. Raises OSError (or http.client's
    errors) for a failed transfer. `context`: the TLS context (its CA bundle; the client's
    ca_file option does not reach a transport). close() closes the connections."""

    def __init__(self, timeout: float = 30.0, context: Optional[ssl.SSLContext] = None) -> None:
        self.timeout = timeout
        self.context = context
        # By thread id: the library calls from its own threads, where ctypes gives each
        # callback a fresh thread state (a threading.local would not last between requests).
        self._pools: dict = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            pools, self._pools = self._pools, {}
        for pool in pools.values():
            for conn in pool.values():
                conn.close()

    def _pool(self) -> dict:
        with self._lock:
            return self._pools.setdefault(threading.get_ident(), {})

    def _connection(self, u: urllib.parse.SplitResult) -> http.client.HTTPConnection:
        pool = self._pool()
        key = (u.scheme, u.hostname, u.port)
        conn = pool.get(key)
        if conn is None:
            if u.scheme == "https":
                conn = http.client.HTTPSConnection(u.hostname or "", u.port, timeout=self.timeout, context=self.context)
            else:
                conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=self.timeout)
            pool[key] = conn
        return conn

    def _drop(self, u: urllib.parse.SplitResult) -> None:
        conn = self._pool().pop((u.scheme, u.hostname, u.port), None)
        if conn is not None:
            conn.close()

    def __call__(self, method: str, url: str, headers: List[str], response: TransportResponse) -> None:
        first_host = urllib.parse.urlsplit(url).netloc
        for _ in range(6):
            u = urllib.parse.urlsplit(url)
            if u.scheme not in ("http", "https"):
                raise OSError(f"{method} {url}: not an http(s) URL")
            if u.netloc != first_host:
                headers = [h for h in headers if not h.lower().startswith(("authorization:", "cookie:"))]
            path = (u.path or "/") + ("?" + u.query if u.query else "")
            for attempt in range(2):  # a kept-alive connection the server closed meanwhile: once more
                conn = self._connection(u)
                fresh = conn.sock is None
                try:
                    conn.putrequest(method, path, skip_accept_encoding=True)
                    for line in headers:
                        name, _, value = line.partition(":")
                        conn.putheader(name.strip(), value.strip())
                    conn.endheaders()
                    r = conn.getresponse()
                    break
                except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
                    self._drop(u)
                    if fresh or attempt == 1:
                        raise
                except BaseException:  # a timeout, a name not resolved: the connection is in no state to reuse
                    self._drop(u)
                    raise
            location = r.getheader("Location")
            if r.status in _REDIRECTS and location:
                try:
                    r.read()
                except BaseException:
                    self._drop(u)
                    raise
                if r.will_close:
                    self._drop(u)
                url = urllib.parse.urljoin(url, location)
                continue
            try:
                if not response.head(r.status, r.getheaders(), url):
                    self._drop(u)
                    return
                while True:
                    chunk = r.read(65536)
                    if not chunk:
                        break
                    if not response.body(chunk):
                        self._drop(u)
                        return
                if r.length:  # the connection ended before the Content-Length: read(amt) does not raise
                    raise http.client.IncompleteRead(b"", r.length)
            except BaseException:
                self._drop(u)
                raise
            if r.will_close:
                self._drop(u)
            return
        raise OSError(f"{method} {url}: more than 5 redirects")
