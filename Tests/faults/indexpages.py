"""Reads a format-2 release's index from its head and archive, independently of the library
(docs/format.md, "The release index"): the files with their zip locations, and each chunked
file's chunks with the archive range of each. Tests and benchmarks use it to know which byte
ranges hold what."""
import hashlib
import json
import zlib

MAGIC = b"APX1"


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def byte(self):
        b = self.data[self.at]
        self.at += 1
        return b

    def take(self, n):
        out = self.data[self.at:self.at + n]
        if len(out) != n:
            raise ValueError("truncated page")
        self.at += n
        return out

    def varint(self):
        value, shift = 0, 0
        while True:
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def ref(self):
        return self.take(32).hex(), self.varint()


def unseal(stored, sha):
    page = zlib.decompress(stored, -15)
    if hashlib.sha256(page).hexdigest() != sha:
        raise ValueError(f"page {sha[:12]} does not match its sha256")
    if page[:4] != MAGIC:
        raise ValueError("not an index page")
    return Reader(page[4:])


def read(head_path, archive_path):
    """{"files": [{path, size, sha256, header_offset, data_offset, compressed_size, method,
    chunks: [{sha256, size, compressed_size, offset}]}], "pages": [(sha, stored size)],
    "linked": the same list of the linked tree's files (their chunks share history), or []}:
    what the main tree alone says is what clients before 0.5 read."""
    with open(head_path) as f:
        head = json.load(f)
    if "payload" in head:  # a signed envelope
        import base64
        head = json.loads(base64.b64decode(head["payload"]))
    index = head["index"]
    with open(archive_path, "rb") as f:
        f.seek(index["offset"])
        entry = f.read(index["size"])
    pages = []
    at = 0

    def next_page(sha, size):
        nonlocal at
        stored = entry[at:at + size]
        at += size
        pages.append((sha, size))
        return unseal(stored, sha)

    def tree(root, root_size):
        r = next_page(root, root_size)
        assert r.byte() == 1
        tables = []
        for _ in range(r.varint()):
            sha, size = r.ref()
            tables.append((sha, size, r.varint()))
        files = []
        for sha, size, base in tables:
            p = next_page(sha, size)
            assert p.byte() == 2
            for _ in range(p.varint()):
                path = p.take(p.varint()).decode()
                fsize = p.varint()
                fsha = p.take(32).hex()
                header = base + p.varint()
                data = header + p.varint()
                compressed = p.varint()
                method = p.byte()
                refs = [p.ref() for _ in range(p.varint())]
                files.append({"path": path, "size": fsize, "sha256": fsha, "header_offset": header, "data_offset": data,
                              "compressed_size": compressed, "method": method, "chunk_pages": refs, "chunks": []})
        for f in files:
            offset = f["data_offset"]
            for sha, size in f["chunk_pages"]:
                p = next_page(sha, size)
                assert p.byte() == 3
                for _ in range(p.varint()):
                    csha = p.take(32).hex()
                    csize, ccomp = p.varint(), p.varint()
                    f["chunks"].append({"sha256": csha, "size": csize, "compressed_size": ccomp, "offset": offset})
                    offset += ccomp
        return files

    files = tree(index["root"], index["root_size"])
    linked = []
    if "linked" in index:
        at = index["linked"]["offset"] - index["offset"]
        linked = tree(index["linked"]["sha256"], index["linked"]["size"])
    return {"head": head, "files": files, "pages": pages, "linked": linked}
