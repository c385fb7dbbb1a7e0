#!/usr/bin/env python3
"""A static HTTP server that misbehaves on purpose, for resume and retry tests.

Serves ROOT like a plain static host (strong ETags, Last-Modified, Range + If-Range, 206/416)
and, for archive requests (*.zip), injects the fault set through the control endpoint:

    GET /_control?mode=MODE&n=N&times=K&rate=BYTES_PER_S   set the fault (applies to K requests)
    GET /_stats                                            JSON counters (bytes_sent: archive bytes)
    GET /_reset                                            zero the counters, mode=normal

Modes: normal, reset (RST at file offset N), cut (close cleanly at file offset N: every byte
before it arrives), stall (stop at file offset N, keep the socket open) (these three leave
requests that end before N alone), ignore-range (always 200), wrong-range (206 with a
Content-Range start off by 1000), etag-change (a new ETag per request), 416 (refuse every
range), corrupt (a 206 whose last byte is flipped), corrupt-nth (the N-th archive request from
now corrupted as corrupt, once), stall-nth (the N-th archive request from now answered with its
head, then nothing: the socket held open), 503 (answer 503), 404, 429 (with
Retry-After: N if N > 0), long-length (announce 1000 bytes more than sent, then close), portal
(200 text/html login page), endless (the archive over and over, never ending), gzip
(Content-Encoding: gzip, the range asked for gzipped: a 200 or a 206), gzip-cut (a gzip 200
closed after N encoded bytes), trickle (one byte every N ms).
/_endless/* is a body without end; /_loop/* redirects to itself.
`rate` throttles every archive response (bytes per second), whatever the mode.

Ranges may be open (`bytes=N-`) or closed (`bytes=N-M`, one range per request).

/_stats has `archive_connections_open`: connections that asked for an archive and are still open
(not zeroed by /_reset). It has `archive_log`: per archive request, in order, the start offset asked for (0 without
a Range), the end asked for (inclusive; the last byte without a Range or for an open one), the
status, the bytes written and the X-Client header: what the client asked for, to
be asserted on, unlike bytes_sent, which counts what sat in socket buffers too.

Usage: faultserver.py ROOT PORT_FILE   (binds 127.0.0.1 on a free port, writes it to PORT_FILE)
"""
import email.utils
import gzip
import json
import os
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

LOCK = threading.Lock()
STATE = {"mode": "normal", "n": 0, "times": 0, "rate": 0, "generation": 0}
STATS = {"requests": 0, "archive_requests": 0, "range_requests": 0, "bytes_sent": 0, "statuses": {}, "archive_log": [],
         "loop_requests": 0, "archive_connections_open": 0}
STOP = threading.Event()


def parse_range(header, size):
    """`bytes=N-` or `bytes=N-M` (the end capped at the last byte) -> (start, end inclusive)."""
    a, _, b = header.split("=", 1)[1].partition("-")
    return int(a), min(int(b), size - 1) if b.strip() else size - 1


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = "."

    def log_message(self, *args):  # quiet
        pass

    def send_json(self, obj, status=200):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def endless(self):
        """A body that never ends (no Content-Length, connection close)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk = b" " * 65536
        try:
            self.wfile.write(b"{")
            for _ in range(1 << 20):
                self.wfile.write(chunk)
        except OSError:
            pass

    def finish(self):
        super().finish()
        if getattr(self, "archive_connection", False):
            with LOCK:
                STATS["archive_connections_open"] -= 1

    def count(self, status):
        with LOCK:
            STATS["statuses"][str(status)] = STATS["statuses"].get(str(status), 0) + 1

    def do_GET(self):
        url = urlparse(self.path)
        if url.path == "/_control":
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            with LOCK:
                STATE.update(mode=q.get("mode", "normal"), n=int(q.get("n", 0)), times=int(q.get("times", 1 << 30)),
                             rate=int(q.get("rate", 0)))
            return self.send_json(STATE)
        if url.path == "/_stats":
            with LOCK:
                return self.send_json(STATS)
        if url.path == "/_reset":
            with LOCK:
                STATE.update(mode="normal", n=0, times=0, rate=0)
                STATS.update(requests=0, archive_requests=0, range_requests=0, bytes_sent=0, statuses={}, archive_log=[],
                             loop_requests=0)
            return self.send_json(STATS)

        if url.path.startswith("/_endless/"):
            return self.endless()
        if url.path.startswith("/_loop/"):
            with LOCK:
                STATS["loop_requests"] += 1
            self.send_response(302)
            self.send_header("Location", url.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return

        path = os.path.realpath(os.path.join(self.root, url.path.lstrip("/")))
        if not path.startswith(os.path.realpath(self.root)) or not os.path.isfile(path):
            self.count(404)
            return self.send_json({"error": "not found"}, 404)
        with LOCK:
            STATS["requests"] += 1
        archive = path.endswith(".zip")
        mode, n, rate = "normal", 0, 0
        st = os.stat(path)
        size = st.st_size
        if archive:
            rng_asked = self.headers.get("Range") or ""
            try:
                asked, asked_end = parse_range(rng_asked, size) if rng_asked.startswith("bytes=") else (0, size - 1)
            except (IndexError, ValueError):
                asked, asked_end = 0, size - 1
            with LOCK:
                STATS["archive_requests"] += 1
                if not getattr(self, "archive_connection", False):
                    self.archive_connection = True
                    STATS["archive_connections_open"] += 1
                rate = STATE["rate"]
                # reset, cut and stall act at file offset N: a request that ends before it
                # passes untouched and does not count against `times`.
                passes = STATE["mode"] in ("reset", "cut", "stall") and asked_end < STATE["n"]
                if STATE["mode"] in ("corrupt-nth", "stall-nth") and STATE["times"] > 0:
                    # The n-th archive request from now is corrupted, or answered with its
                    # head and then nothing (once).
                    STATE["n"] -= 1
                    if STATE["n"] == 0:
                        STATE["times"] = 0
                        mode, n = ("corrupt", 0) if STATE["mode"] == "corrupt-nth" else ("stall", asked)
                elif STATE["times"] > 0 and STATE["mode"] != "normal" and not passes:
                    STATE["times"] -= 1
                    mode, n = STATE["mode"], STATE["n"]
                if STATE["mode"] == "etag-change":
                    STATE["generation"] += 1
                generation = STATE["generation"]
        else:
            generation = 0

        etag = '"%x-%x-%d"' % (st.st_mtime_ns, size, generation)
        last_modified = email.utils.formatdate(st.st_mtime, usegmt=True)

        entry = None
        if archive:
            entry = {"start": asked, "end": asked_end, "status": 0, "sent": 0, "client": self.headers.get("X-Client", "")}
            with LOCK:
                STATS["archive_log"].append(entry)

        if mode in ("503", "404", "429"):
            self.count(int(mode))
            entry["status"] = int(mode)
            if mode == "429" and n > 0:
                body = b'{"error": "slow down"}'
                self.send_response(429)
                self.send_header("Retry-After", str(n))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            return self.send_json({"error": mode}, int(mode))
        if mode == "portal":
            body = b"<html><body>Please log in to the hotel Wi-Fi</body></html>"
            self.count(200)
            entry["status"] = 200
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return

        start, end = 0, size - 1
        status = 200
        rng = self.headers.get("Range")
        if rng and archive:
            with LOCK:
                STATS["range_requests"] += 1
        if rng and mode != "ignore-range":
            if_range = self.headers.get("If-Range")
            if if_range is None or if_range == etag or if_range == last_modified:
                try:
                    start, end = parse_range(rng, size)
                    status = 206
                except (IndexError, ValueError):
                    start, end = 0, size - 1
                if mode == "416" or start >= size:
                    self.count(416)
                    if entry:
                        entry["status"] = 416
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
        length = end - start + 1
        self.count(status)
        if entry:
            entry["status"] = status
        if mode in ("gzip", "gzip-cut"):
            return self.send_gzip(path, start, status, size, etag, last_modified, entry, n if mode == "gzip-cut" else None)
        self.send_response(status)
        self.send_header("Content-Type", "application/zip" if archive else "application/json")
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", last_modified)
        self.send_header("Accept-Ranges", "bytes")
        announced = length + (1000 if mode == "long-length" else 0)
        if mode == "endless":
            self.send_header("Connection", "close")
        else:
            self.send_header("Content-Length", str(announced))
        if status == 206:
            shown = start + (1000 if mode == "wrong-range" else 0)
            self.send_header("Content-Range", f"bytes {shown}-{end}/{size}")
        if mode == "long-length":
            self.send_header("Connection", "close")
        self.end_headers()

        if mode == "trickle":
            # One byte every N ms: never a stall, never an end worth waiting for.
            with open(path, "rb") as f:
                f.seek(start)
                for _ in range(length):
                    try:
                        self.wfile.write(f.read(1))
                        self.wfile.flush()
                    except OSError:
                        return
                    time.sleep(max(n, 1) / 1000)
            return

        # reset and stall act at an absolute offset of the file, whatever range was asked for.
        limit = max(0, n - start) if mode in ("reset", "stall", "cut") else length
        if mode == "endless":
            self.close_connection = True
            try:
                while True:
                    with open(path, "rb") as f:
                        for chunk in iter(lambda: f.read(65536), b""):
                            self.wfile.write(chunk)
                            with LOCK:
                                STATS["bytes_sent"] += len(chunk)
            except OSError:
                return
        sent = 0
        began = time.monotonic()
        with open(path, "rb") as f:
            f.seek(start)
            while sent < min(limit, length):
                chunk = f.read(min(65536, min(limit, length) - sent))
                if not chunk:
                    break
                if mode == "corrupt" and sent + len(chunk) == length:
                    chunk = chunk[:-1] + bytes([chunk[-1] ^ 0xFF])
                try:
                    self.wfile.write(chunk)
                except OSError:
                    return
                sent += len(chunk)
                if archive:
                    with LOCK:
                        STATS["bytes_sent"] += len(chunk)
                        entry["sent"] = sent
                if rate:
                    ahead = sent / rate - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)
        if mode == "reset":
            # Let the bytes reach the client first (an RST discards unread data), then
            # SO_LINGER 0: close() sends RST, a connection reset mid-body.
            time.sleep(0.2)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
        elif mode == "cut":
            # A clean close (FIN) right after the bytes: all of them reach the client.
            self.connection.shutdown(socket.SHUT_WR)
            self.close_connection = True
        elif mode == "stall":
            STOP.wait(120)
            self.close_connection = True
        elif mode == "long-length":
            self.close_connection = True


    def send_gzip(self, path, start, status, size, etag, last_modified, entry, cut):
        """The bytes from `start` gzip-encoded, as a 200 or a 206; `cut`: close after that
        many encoded bytes."""
        with open(path, "rb") as f:
            f.seek(start)
            body = gzip.compress(f.read(), mtime=0)
        self.send_response(status)
        self.send_header("Content-Type", "application/zip")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", last_modified)
        self.send_header("Content-Length", str(len(body)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        self.end_headers()
        if cut is not None:
            body = body[:cut]
        self.wfile.write(body)
        with LOCK:
            STATS["bytes_sent"] += len(body)
            entry["sent"] = len(body)
        if cut is not None:
            self.connection.shutdown(socket.SHUT_WR)
            self.close_connection = True


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # Clients that vanish mid-response (killed updaters, cancelled transfers) are expected.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


def main():
    root, port_file = sys.argv[1], sys.argv[2]
    Handler.root = root
    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        STOP.set()


if __name__ == "__main__":
    main()
