"""Deltas: a publish writes, beside the new archive, the changed files said against the release
the channel offered before (`deltas/<sha256>.delta`, named in the signed head), and a client that
has that release fetches those deltas instead of the files or their chunks. The bytes are only
ever a shortcut: whatever a host (a CDN edge, a mirror) does to a delta file, the client installs
exactly the release the head describes, and a delta that does not make its file costs only that
file, fetched from the archive."""
import hashlib
import json
import os
import random
import shutil
import subprocess
import zlib

import pytest

import assetpatch
from conftest import CLI, archive_log, make_tree

WORDS = [b'"name"', b'"type"', b'"string"', b'"items"', b'"format"', b"{", b"}", b"[", b"]", b":", b",", b"true"]


def document(rnd, size):
    out = bytearray()
    while len(out) < size:
        out += rnd.choice(WORDS) + (b"\n" if rnd.random() < 0.08 else b" ")
    return bytes(out[:size])


def releases():
    """v1: JSON documents from 3 KB to 1.5 MiB (whole, linked chunks), a 5 MiB pack (chunks on
    their own) and small files. v2: most documents and the pack edited in a few places, one
    file added, one removed."""
    rnd = random.Random(41)
    v1 = {f"schemas/doc{i:02}.json": document(rnd, rnd.choice([3000, 40_000, 300_000, 1_500_000])) for i in range(10)}
    v1["pack/levels.bin"] = b"".join(rnd.randbytes(65536) if i % 2 else document(rnd, 65536) for i in range(80))
    v1["readme.txt"] = b"release 1\n"
    v1["old.txt"] = b"gone in v2\n"
    v2 = dict(v1)
    del v2["old.txt"]
    v2["new.txt"] = b"new in v2\n"
    for name in [n for n in v1 if n.endswith((".json", ".bin"))][:8] + ["pack/levels.bin"]:
        b = bytearray(v1[name])
        for _ in range(3):
            at = rnd.randrange(len(b) - 16)
            b[at:at + 8] = b"EDITED!!"
        at = rnd.randrange(len(b))
        b[at:at] = b'"added": "a field", '
        v2[name] = bytes(b)
    v2["readme.txt"] = b"release 2\n"
    return v1, v2


@pytest.fixture(scope="module")
def deltas(repos):
    """dl2: v1 then v2 published (deltas from v1, the default); dn2: the same with --deltas 0;
    a data directory with v1 installed."""
    base = repos["base"]
    v1, v2 = releases()
    out = {"v1": v1, "v2": v2, "base": base}
    for src, files in (("src-dl1", v1), ("src-dl2", v2)):
        make_tree(os.path.join(base, src), files)
    for name, extra in (("dl2", []), ("dn2", ["--deltas", "0"])):
        repo = os.path.join(base, name)
        for version, src in ((1, "src-dl1"), (2, "src-dl2")):
            subprocess.run([CLI, "publish", os.path.join(base, src), "--repo", repo, "--package", "deltas", "--version", str(version),
                            "--chunk-size", "4096"] + (extra if version == 2 else []), check=True, stdout=subprocess.DEVNULL)
            if version == 1:
                pristine = os.path.join(base, f"{name}-pristine")
                subprocess.run([CLI, "update", "--data-dir", pristine, "--url", "file://" + os.path.join(repo, "head.json")],
                               check=True, stdout=subprocess.DEVNULL)
                out[f"{name}-pristine"] = pristine
    return out


def head(repo):
    with open(os.path.join(repo, "head.json")) as f:
        return json.load(f)


def client(tmp_path, fault, deltas, repo, pristine="dl2-pristine"):
    data = str(tmp_path / "data")
    shutil.copytree(deltas[pristine], data)
    return assetpatch.Client(data, manifest_url=f"{fault.base}/{repo}/head.json", stall_timeout_ms=5000)


def assert_v2(c, deltas):
    assert c.current_version == 2
    for name, content in deltas["v2"].items():
        with open(c.resolve(name), "rb") as f:
            assert hashlib.sha256(f.read()).digest() == hashlib.sha256(content).digest(), name
    with pytest.raises(assetpatch.AssetPatchError):
        c.resolve("old.txt")


def asked(log):
    return sum(e["end"] - e["start"] + 1 for e in log)


def data_requests(log, repo):
    """The archive requests outside the release index (index pages are ranges of it too)."""
    index = head(repo)["index"]
    return [e for e in log if not (index["offset"] <= e["start"] and e["end"] < index["offset"] + index["size"])]


def test_the_head_names_a_delta_file_from_the_release_before(deltas):
    d2, n2 = head(os.path.join(deltas["base"], "dl2")), head(os.path.join(deltas["base"], "dn2"))
    assert "deltas" not in n2["index"]
    [d] = d2["index"]["deltas"]
    v1_archive = json.load(open(os.path.join(deltas["base"], "dl2", "history", "1", "manifest.json")))["archive"]["sha256"]
    assert d["from"] == v1_archive
    path = os.path.join(deltas["base"], "dl2", d["url"])
    data = open(path, "rb").read()
    assert len(data) == d["size"] and d["url"] == f"deltas/{hashlib.sha256(data).hexdigest()}.delta"
    page = zlib.decompress(data[:d["page_size"]], -15)
    assert hashlib.sha256(page).hexdigest() == d["page"] and page[:5] == b"APX1\x05"
    # The archive is the same with or without deltas.
    assert d2["archive"] == n2["archive"]


def test_an_update_from_the_release_before_fetches_deltas_not_the_archive(tmp_path, fault, deltas):
    c = client(tmp_path, fault, deltas, "dl2")
    _, planned = c.check()
    assert c.update()
    assert_v2(c, deltas)
    # Every changed file came from the delta file: the archive was asked for index pages and
    # the two files no delta makes (one new, one of 10 bytes) only.
    assert len(data_requests(archive_log(fault), os.path.join(deltas["base"], "dl2"))) == 2
    delta_file = head(os.path.join(deltas["base"], "dl2"))["index"]["deltas"][0]
    assert 0 < planned < delta_file["size"]
    # Without deltas the same update fetches chunks and whole files: many times the bytes.
    fault.reset()
    shutil.copytree(deltas["dn2-pristine"], str(tmp_path / "other"))
    other = assetpatch.Client(str(tmp_path / "other"), manifest_url=f"{fault.base}/dn2/head.json", stall_timeout_ms=5000)
    _, without = other.check()
    assert other.update()
    assert asked(archive_log(fault)) >= without > 10 * planned, (without, planned)


def tampered(deltas, name, change):
    """A copy of dl2 whose delta file's bytes `change` alters (what an edge serves instead)."""
    base = deltas["base"]
    repo = os.path.join(base, name)
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(os.path.join(base, "dl2"), repo)
    d = head(repo)["index"]["deltas"][0]
    path = os.path.join(repo, d["url"])
    data = bytearray(open(path, "rb").read())
    change(data, d)
    os.chmod(path, 0o644)
    open(path, "wb").write(bytes(data))
    return name


def page_entries(data, d):
    """(target sha256, target size, base sha256, base size, offset, length) of each delta."""
    page = zlib.decompress(bytes(data[:d["page_size"]]), -15)
    at = 5

    def varint():
        nonlocal at
        v, shift = 0, 0
        while True:
            b = page[at]
            at += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v

    out, offset = [], d["page_size"]
    for _ in range(varint()):
        t = page[at:at + 32]
        at += 32
        ts = varint()
        b = page[at:at + 32]
        at += 32
        bs, n = varint(), varint()
        out.append((t.hex(), ts, b.hex(), bs, offset, n))
        offset += n
    return out


def test_a_delta_changed_on_the_way_costs_only_its_file(tmp_path, fault, deltas):
    """An edge flips a byte in one delta: that delta does not make its file, which comes from
    the archive; the others are used; the release installed is exactly v2."""
    def flip(data, d):
        _, _, _, _, offset, n = max(page_entries(data, d), key=lambda e: e[5])
        data[offset + n // 2] ^= 0x40
    c = client(tmp_path, fault, deltas, tampered(deltas, "dl2-flipped", flip))
    assert c.update()
    assert_v2(c, deltas)
    log = data_requests(archive_log(fault), os.path.join(deltas["base"], "dl2"))
    assert len(log) == 3, log  # that file (and the new and the tiny one), not the rest


def test_a_well_formed_delta_that_makes_other_bytes_is_refused(tmp_path, fault, deltas):
    """An edge that knows the format replaces a delta with one of the same length that inflates
    and applies cleanly to a file of the right size, with other bytes: its sha256 is not the
    index's, so it is not installed; the file comes from the archive."""
    def forge(data, d):
        target, size, _, base_size, offset, n = max(page_entries(data, d), key=lambda e: e[5])

        def varint(v):
            out = bytearray()
            while v >= 0x80:
                out.append(v & 0x7F | 0x80)
                v >>= 7
            return bytes(out + bytes([v]))
        for k in range(1, n):
            instructions = varint(k << 1) + b"A" * k + (varint((size - k) << 1 | 1) + varint(0) if size > k else b"")
            stored = bytes([1]) + len(instructions).to_bytes(2, "little") + (len(instructions) ^ 0xFFFF).to_bytes(2, "little") + instructions
            if len(stored) == n and size - k <= base_size:
                data[offset:offset + n] = stored
                return
        raise AssertionError("no forgery of the same length")
    c = client(tmp_path, fault, deltas, tampered(deltas, "dl2-forged", forge))
    assert c.update()
    assert_v2(c, deltas)
    assert len(data_requests(archive_log(fault), os.path.join(deltas["base"], "dl2"))) == 3


def test_a_delta_page_that_does_not_match_the_head_is_not_used(tmp_path, fault, deltas):
    """The page is named by its sha256 in the signed head: an edge's other page is refused, and
    the update costs what it costs without deltas, byte for byte."""
    def flip(data, d):
        data[3] ^= 1
    c = client(tmp_path, fault, deltas, tampered(deltas, "dl2-page", flip))
    assert c.update()
    assert_v2(c, deltas)
    with_bad_page = asked(archive_log(fault))
    fault.reset()
    shutil.rmtree(str(tmp_path / "other"), ignore_errors=True)
    shutil.copytree(deltas["dn2-pristine"], str(tmp_path / "other"))
    other = assetpatch.Client(str(tmp_path / "other"), manifest_url=f"{fault.base}/dn2/head.json", stall_timeout_ms=5000)
    assert other.update()
    assert with_bad_page == asked(archive_log(fault)) > 0


def test_a_client_without_the_release_before_does_not_use_deltas(tmp_path, fault, deltas):
    """A fresh data directory has no base: the head's delta file is not read, the archive is."""
    c = assetpatch.Client(str(tmp_path / "fresh"), manifest_url=f"{fault.base}/dl2/head.json", stall_timeout_ms=5000)
    assert c.update()
    assert_v2(c, deltas)
    assert asked(archive_log(fault)) > 0
    assert not any(n.endswith(".delta-part") for _, _, ns in os.walk(str(tmp_path / "fresh")) for n in ns)
