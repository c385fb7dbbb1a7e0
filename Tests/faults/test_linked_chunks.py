"""Files under the chunk threshold changed in part: from 64 KiB (the link threshold) their chunks
share history (a sync flush after each: the entry compresses as one stream), and a 0.5 client
fetches only the chunks that changed, each decoded after the bytes of the new file before it.
Clients before 0.5 read only the main index tree, which lists these files whole: they fetch
them whole, as before. Every byte is checked: a chunk the server changed, or one kept by an
interrupted attempt, never makes a wrong file."""
import glob
import hashlib
import json
import os
import random
import shutil
import subprocess
import zipfile
import zlib

import pytest

import assetpatch
import indexpages
from conftest import CLI, archive_log, make_tree
from test_chunked import assert_serves

CHUNK_SIZE = 4096
WORDS = [b'"name"', b'"type"', b'"string"', b'"description"', b'"items"', b'"format"', b'"int64"', b"{", b"}",
         b"[", b"]", b":", b",", b'"required"', b'"parameters"', b'"location"', b'"query"', b"true", b"false"]


def document(rnd, size):
    """JSON-like text: compresses about 5:1, as API schemas and level files do."""
    out = bytearray()
    while len(out) < size:
        out += rnd.choice(WORDS) + (b"\n" if rnd.random() < 0.08 else b" ")
        if rnd.random() < 0.05:
            out += str(rnd.randrange(10 ** 6)).encode() + b" "
    return bytes(out[:size])


def edited(rnd, data, edits):
    """`data` with `edits` scattered replacements of a few bytes each, one insertion, one deletion."""
    b = bytearray(data)
    for _ in range(edits):
        at = rnd.randrange(len(b) - 16)
        b[at:at + 6] = b"EDITED"
    at = rnd.randrange(len(b))
    b[at:at] = b'"added": "a new field", '
    at = rnd.randrange(len(b) - 40)
    del b[at:at + 40]
    return bytes(b)


def releases():
    """v1: twelve documents of 96 KiB to 1.5 MiB and small files. v2: five documents edited in
    a few places each, one small file changed, the rest the same."""
    rnd = random.Random(11)
    v1 = {f"schemas/doc{i:02}.json": document(rnd, rnd.choice([96, 200, 640, 1536]) << 10) for i in range(12)}
    v1["readme.txt"] = b"release 1\n"
    v1["small.json"] = document(rnd, 20_000)  # under the link threshold: whole, as before
    v2 = dict(v1)
    for i in (0, 3, 5, 8, 11):
        v2[f"schemas/doc{i:02}.json"] = edited(rnd, v1[f"schemas/doc{i:02}.json"], 3)
    v2["readme.txt"] = b"release 2\n"
    return v1, v2


@pytest.fixture(scope="module")
def linked(repos):
    """Repositories l1/l2 (chunks that share history) and u1/u2 (the same releases with
    --link-threshold 0: whole files), under the fault server's root, and a data directory with
    each's v1 installed."""
    base = repos["base"]
    v1, v2 = releases()
    out = {"v1": v1, "v2": v2}
    for kind, extra in (("l", []), ("u", ["--link-threshold", "0"])):
        for version, files in ((1, v1), (2, v2)):
            name = f"{kind}{version}"
            src = os.path.join(base, f"src-{name}")
            make_tree(src, files)
            if version == 2:
                shutil.copytree(os.path.join(base, f"{kind}1"), os.path.join(base, name))
            subprocess.run([CLI, "publish", src, "--repo", os.path.join(base, name), "--package", "linked",
                            "--version", str(version), "--chunk-size", str(CHUNK_SIZE), "--deltas", "0"] + extra,
                           check=True, stdout=subprocess.DEVNULL)
        pristine = os.path.join(base, f"{kind}-pristine")
        subprocess.run([CLI, "update", "--data-dir", pristine, "--url", "file://" + os.path.join(base, f"{kind}1", "head.json")],
                       check=True, stdout=subprocess.DEVNULL)
        out[kind] = pristine
    return out


def newest_archive(repo):
    return max(glob.glob(os.path.join(repo, "archives", "*.zip")), key=os.path.getmtime)


def start(tmp_path, fault, linked, kind="l", **options):
    data = str(tmp_path / "data")
    shutil.copytree(linked[kind], data)
    options.setdefault("stall_timeout_ms", 5000)
    return assetpatch.Client(data, manifest_url=f"{fault.base}/{kind}2/head.json", **options)


def asked(log):
    return sum(e["end"] - e["start"] + 1 for e in log)


def test_the_archive_is_a_plain_zip_and_the_main_tree_lists_linked_files_whole(repos, linked):
    repo = os.path.join(repos["base"], "l2")
    archive = newest_archive(repo)
    index = indexpages.read(os.path.join(repo, "head.json"), archive)
    main = {f["path"]: f for f in index["files"]}
    names = sorted(f["path"] for f in index["linked"])
    assert names == sorted(n for n in linked["v2"] if n.startswith("schemas/")), "every document from 64 KiB, none under"
    with open(archive, "rb") as a:
        for f in index["linked"]:
            # What clients before 0.5 read: the same file, whole (no chunk pages).
            m = main[f["path"]]
            assert m["chunk_pages"] == [] and m["method"] == 8, f["path"]
            assert {k: m[k] for k in ("size", "sha256", "data_offset", "compressed_size")} \
                == {k: f[k] for k in ("size", "sha256", "data_offset", "compressed_size")}
            # Each chunk decodes (zlib, not the library) given the 32 KiB before it, to bytes
            # that hash to its record; together they are the file.
            content = b""
            for c in f["chunks"]:
                a.seek(c["offset"])
                d = zlib.decompressobj(-15, zdict=content[-32768:]) if content else zlib.decompressobj(-15)
                out = d.decompress(a.read(c["compressed_size"]))
                assert len(out) == c["size"]
                assert hashlib.sha256(out).hexdigest() == c["sha256"]
                content += out
            assert content == linked["v2"][f["path"]]
    with zipfile.ZipFile(archive) as z:
        assert z.testzip() is None
        assert z.read("schemas/doc00.json") == linked["v2"]["schemas/doc00.json"]
    # A fresh install's archive costs about 75 bytes a chunk: its record in the linked tree
    # (36 bytes, incompressible) and its sync flush (a new block's code tables, an empty stored
    # block), plus each file's row again.
    whole = os.path.getsize(newest_archive(os.path.join(repos["base"], "u2")))
    chunks = sum(len(f["chunks"]) for f in index["linked"])
    assert whole < os.path.getsize(archive) <= whole + 80 * chunks + 120 * len(names), (os.path.getsize(archive), whole, chunks)


def test_only_the_changed_chunks_travel(tmp_path, fault, linked):
    with start(tmp_path, fault, linked, kind="u") as c:
        _, planned_whole = c.check()
        assert c.update() is True
        assert_serves(c, linked["v2"], 2)
    fault.reset()
    shutil.rmtree(tmp_path / "data")
    with start(tmp_path, fault, linked) as c:
        version, planned = c.check()
        pages = archive_log(fault)
        assert version == 2
        assert c.update() is True
        assert_serves(c, linked["v2"], 2)
    log = archive_log(fault)
    assert all(e["status"] == 206 for e in log), log
    assert asked(log[len(pages):]) == planned, "exactly the planned chunk and file ranges"
    # Five documents with five edits each: about three chunks around each (a chunk compresses
    # to about 1 KiB with its history), where whole files cost every changed document.
    assert planned * 4 < planned_whole, (planned, planned_whole)
    assert planned <= 5 * 5 * 3 * 1500 + 200, planned
    # The pages: the roots, the file-table pages of the changed files, and the chunk pages
    # around each edit (a page lists about 64 chunks, 2.3 KiB): 25 edits in five files.
    assert asked(pages) < 25 * 2400 + 8192, pages


def test_a_changed_byte_in_a_linked_chunk_costs_the_whole_archive_never_a_wrong_file(tmp_path, fault, linked):
    with start(tmp_path, fault, linked, parallel_downloads=1) as c:
        c.check()
        fault.control("corrupt", times=1)
        assert c.update() is True
        assert_serves(c, linked["v2"], 2)
    log = archive_log(fault)
    size = os.path.getsize(newest_archive(os.path.join(os.path.dirname(linked["l"]), "l2")))
    assert log[-1]["start"] == 0 and log[-1]["end"] == size - 1, log


def test_an_interrupted_update_keeps_its_linked_chunks_and_the_next_does_not_ask_again(tmp_path, fault, linked):
    with start(tmp_path, fault, linked, parallel_downloads=1) as c:
        assert c.check()[0] == 2
        fault.reset()
        # Every request reaching past the fourth new chunk is cut there, four times: the update
        # fails after its retries, keeping the chunks that arrived whole (decoded as they
        # arrived: their history was on disk).
        fault.control("cut", n=newest_offset(linked, 3), times=4)
        with pytest.raises(assetpatch.NetworkError):
            c.update()
        assert_serves(c, linked["v1"], 1)
    # Kept as chunk files, or written in place in the files being rebuilt.
    kept = [n for d in glob.glob(str(tmp_path / "data" / "downloads" / "*.chunks")) for n in os.listdir(d)]
    kept += glob.glob(str(tmp_path / "data" / "downloads" / "*.files" / ".*.rebuild"))
    assert kept, "the chunks that arrived whole are kept"
    first = [(e["start"], e["end"]) for e in archive_log(fault)]
    fault.reset()
    out = subprocess.run([CLI, "update", "--data-dir", str(tmp_path / "data"), "--url", f"{fault.base}/l2/head.json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    second = [(e["start"], e["end"]) for e in archive_log(fault)]
    assert not set(r for r in first if r[1] < newest_offset(linked, 3)) & set(second), (first, second)
    with assetpatch.Client(str(tmp_path / "data")) as c:
        assert_serves(c, linked["v2"], 2)
    assert not glob.glob(str(tmp_path / "data" / "downloads" / "*.chunks" / "*")), "nothing left behind"
    assert not glob.glob(str(tmp_path / "data" / "downloads" / "*.files" / ".*")), "nothing left behind"


def newest_offset(linked, n):
    """The archive offset just past the `n`th changed document's first changed chunk."""
    base = os.path.dirname(linked["l"])
    index = indexpages.read(os.path.join(base, "l2", "head.json"), newest_archive(os.path.join(base, "l2")))
    old = indexpages.read(os.path.join(base, "l1", "head.json"), newest_archive(os.path.join(base, "l1")))
    had = {c["sha256"] for f in old["linked"] for c in f["chunks"]}
    changed = [c for f in index["linked"] for c in f["chunks"] if c["sha256"] not in had]
    c = sorted(changed, key=lambda c: c["offset"])[n]
    return c["offset"] + c["compressed_size"]


def test_plan_counts_linked_files_as_chunked(repos, linked):
    # `assetpatch plan` counts changed files whole; it says which of them are chunked (an
    # upper bound), from the release index: the five edited documents, not the readme.
    for repo, chunked in (("l2", 5), ("u2", 0)):
        out = subprocess.run([CLI, "plan", "--repo", os.path.join(repos["base"], repo), "--from", "1", "--json"],
                             capture_output=True, text=True, check=True).stdout
        plan = json.loads(out)
        assert plan["files"] == 6, plan
        assert plan["large_files_counted_whole"] == chunked, plan


def test_a_source_changing_a_linked_chunk_is_passed_over_for_the_mirror(tmp_path, fault, linked, repos):
    # A linked chunk whose history is on disk is decoded and checked as it arrives: the source
    # that changed its bytes is passed over for the next one, and nobody downloads the whole
    # archive. The primary (the fault server) flips the last byte of its first chunk range.
    from conftest import FaultServer
    os.makedirs(tmp_path / "mirror")
    mirror = FaultServer(repos["base"], str(tmp_path / "mirror"))
    try:
        with start(tmp_path, fault, linked, parallel_downloads=1, mirrors=f"{mirror.base}/l2/head.json") as c:
            assert c.check()[0] == 2
            mirror.reset()
            fault.reset()
            fault.control("corrupt", times=1)
            assert c.update() is True
            assert_serves(c, linked["v2"], 2)
        size = os.path.getsize(newest_archive(os.path.join(repos["base"], "l2")))
        bad, good = archive_log(fault), archive_log(mirror)
        assert len(bad) == 1, f"the corrupting source got requests after its bad range: {bad}"
        assert good and all(e["status"] == 206 for e in good), good
        assert not any(e["start"] == 0 and e["end"] == size - 1 for e in bad + good), (bad, good)
    finally:
        mirror.stop()


def mostly_noise(rnd, size):
    """Noise with every fourth 4 KiB block zeros: deflate saves a quarter, as much chunk by chunk."""
    out = bytearray(rnd.randbytes(size))
    for at in range(0, size, 16384):
        out[at:at + 4096] = bytes(len(out[at:at + 4096]))
    return bytes(out)


def test_from_the_chunk_threshold_text_shares_history_unless_told_not_to(tmp_path):
    """A document from --chunk-threshold costs a sixth to three times more in chunks of its own:
    it gets chunks that share history (the main tree lists it whole, for clients before 0.5),
    while a file deflate shrinks as much chunk by chunk keeps chunks that each decode alone
    (zlib, not the library, decodes them). --chunk-cost-limit none, or --link-threshold 0, keeps
    0.4's chunks."""
    rnd = random.Random(5)
    files = {"doc.json": document(rnd, 1536 << 10), "pack.bin": mostly_noise(rnd, 1536 << 10)}
    src = str(tmp_path / "src")
    make_tree(src, files)

    def publish(name, *extra):
        repo = str(tmp_path / name)
        subprocess.run([CLI, "publish", src, "--repo", repo, "--package", "t", "--version", "1", "--chunk-threshold",
                        str(1 << 20), "--chunk-size", str(CHUNK_SIZE), *extra], check=True, stdout=subprocess.DEVNULL)
        archive = newest_archive(repo)
        return archive, indexpages.read(os.path.join(repo, "head.json"), archive)

    def alone(archive, f):
        """Each chunk of `f` inflates on its own to its record, and together they are the file."""
        content = b""
        with open(archive, "rb") as a:
            for c in f["chunks"]:
                a.seek(c["offset"])
                raw = a.read(c["compressed_size"])
                out = zlib.decompressobj(-15).decompress(raw) if f["method"] == 8 else raw
                assert len(out) == c["size"] and hashlib.sha256(out).hexdigest() == c["sha256"], f["path"]
                content += out
        return content

    archive, index = publish("default")
    main = {f["path"]: f for f in index["files"]}
    assert [f["path"] for f in index["linked"]] == ["doc.json"]
    assert main["doc.json"]["chunk_pages"] == [] and main["doc.json"]["method"] == 8
    assert main["pack.bin"]["method"] == 8 and main["pack.bin"]["chunks"]
    assert alone(archive, main["pack.bin"]) == files["pack.bin"]
    default_doc = main["doc.json"]["compressed_size"]
    assert default_doc <= len(zlib.compress(files["doc.json"], 6)) * 1.05

    for name, extra in (("own", ("--chunk-cost-limit", "none")), ("unlinked", ("--link-threshold", "0"))):
        archive, index = publish(name, *extra)
        main = {f["path"]: f for f in index["files"]}
        assert index["linked"] == [] and main["doc.json"]["chunks"], name
        assert alone(archive, main["doc.json"]) == files["doc.json"]
        assert main["doc.json"]["compressed_size"] > default_doc * 1.1

    for bad in ("-1", "1001", "5%", "some"):
        out = subprocess.run([CLI, "publish", src, "--repo", str(tmp_path / "bad"), "--package", "t", "--version", "1",
                              "--chunk-cost-limit", bad], capture_output=True, text=True)
        assert out.returncode != 0 and "--chunk-cost-limit" in out.stderr, (bad, out.stderr)
