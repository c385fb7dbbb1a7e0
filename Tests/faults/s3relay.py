"""A fault-injecting relay in front of an S3-compatible server: bytes pass through unchanged
(the signature covers the Host the client sent, which is the relay's), and requests that
upload a part can be held forever or refused. The client makes one request per connection,
so a connection's first line says what it is."""
import re
import socket
import threading


class Relay:
    def __init__(self, upstream_port):
        self.upstream = ("127.0.0.1", upstream_port)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.hold_after = None    # part uploads passed before every later one is held
        self.refuse_part = None   # this part number is answered refuse_status, every time
        self.refuse_status = 400
        self.parts = []           # (part number, Content-Length) of each part upload passed on
        self.held = threading.Event()
        self.hold_key = None      # the first PUT to a path ending so waits for release, then goes on
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.closing = False
        self.open = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.closing:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.open.append(conn)
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn):
        head = b""
        while b"\r\n\r\n" not in head:
            data = conn.recv(65536)
            if not data:
                conn.close()
                return
            head += data
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        headers = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
        part = re.search(r"[?&]partNumber=(\d+)", line) if line.startswith("PUT ") else None
        if self.hold_key and line.startswith("PUT ") and line.split(" ")[1].split("?")[0].endswith(self.hold_key):
            with self.lock:
                first = not self.held.is_set()
                self.held.set()
            if first:
                self.release.wait(120)
        if part:
            number = int(part.group(1))
            length = int(re.search(r"\ncontent-length:\s*(\d+)", headers).group(1))
            with self.lock:
                if self.hold_after is not None and len(self.parts) >= self.hold_after:
                    self.held.set()
                    return  # never answered: the client is killed while it waits
                if number == self.refuse_part:
                    code = b"SlowDown" if self.refuse_status == 503 else b"InvalidRequest"
                    body = b"<?xml version=\"1.0\"?><Error><Code>" + code + b"</Code><Message>refused by the relay</Message></Error>"
                    conn.sendall(b"HTTP/1.1 " + str(self.refuse_status).encode() + b" Refused\r\nContent-Type: application/xml\r\nConnection: close\r\n"
                                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                    conn.close()
                    return
                self.parts.append((number, length))
        up = socket.create_connection(self.upstream)
        up.sendall(head)
        threading.Thread(target=self.pump, args=(conn, up), daemon=True).start()
        self.pump(up, conn)

    @staticmethod
    def pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.closing = True
        self.sock.close()
        for c in self.open:
            try:
                c.close()
            except OSError:
                pass
