"""Archives written by the zippers people use, each checked to really have the feature it is
named after, installed through a format-1 manifest and a legacy one, every file compared.

Info-ZIP zip (deflate with directory entries, stored with a comment, forced ZIP64), Python's
zipfile (data descriptors from a stream, forced ZIP64 entries), bsdtar writing to a pipe
(padded with NULs to its block size), 7-Zip, and readers' tolerances: junk appended after the
end record, a comment longer than its length field says, and a classic end record whose fields
are all 0xFFFF, deferring to the ZIP64 one."""
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import zipfile

import pytest

import assetpatch

EOCD = b"PK\x05\x06"
EOCD64 = b"PK\x06\x06"


def source_tree(root):
    files = {
        "readme.txt": b"hello from a real zipper\n" * 40,
        "img/noise.bin": os.urandom(70_000),
        "levels/1/map.json": json.dumps({"tiles": list(range(2000))}).encode(),
        "empty.dat": b"",
        "deep/a/b/c/d.txt": b"deep\n",
    }
    for name, data in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return files


def run(*args, cwd=None, stdin=None):
    subprocess.run(args, cwd=cwd, check=True, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def eocd_offset(data):
    return data.rfind(EOCD)


def local_header_flags(data):
    """Flags of every local file header, walking them from the start."""
    flags, pos = [], 0
    while data[pos:pos + 4] == b"PK\x03\x04":
        flag, _method, _t, _d, _crc, comp, _unc, nlen, xlen = struct.unpack("<HHHHIIIHH", data[pos + 6:pos + 30])
        flags.append((flag, data[pos + 30 + nlen:pos + 30 + nlen + xlen]))
        if flag & 0x08:
            break  # sizes follow the data: stop walking, one is enough
        pos += 30 + nlen + xlen + comp
    return flags


class Unseekable(io.RawIOBase):
    """A write-only stream: zipfile then writes data descriptors (flag bit 3)."""

    def __init__(self, f):
        self.f = f

    def writable(self):
        return True

    def write(self, b):
        return self.f.write(b)


def make_infozip_deflate(src, out):
    run("zip", "-q", "-r", "-9", out, ".", cwd=src)
    with zipfile.ZipFile(out) as z:
        assert any(i.is_dir() for i in z.infolist()) and any(i.compress_type == zipfile.ZIP_DEFLATED for i in z.infolist())


def make_infozip_stored_comment(src, out):
    subprocess.run(["zip", "-q", "-r", "-0", "-z", out, "."], cwd=src, input=b"release notes\n.\n", check=True)
    with zipfile.ZipFile(out) as z:
        assert z.comment.startswith(b"release notes") and all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())


def make_infozip_zip64(src, out):
    run("zip", "-q", "-r", "-fz", out, ".", cwd=src)
    assert EOCD64 in open(out, "rb").read()


def make_python_streamed(src, files, out):
    with open(out, "wb") as f, zipfile.ZipFile(Unseekable(f), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            with z.open(name, "w") as w:
                w.write(data)
    assert local_header_flags(open(out, "rb").read())[0][0] & 0x08, "data descriptor flag"


def make_python_zip64(src, files, out):
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            with z.open(name, "w", force_zip64=True) as w:
                w.write(data)
    _, extra = local_header_flags(open(out, "rb").read())[0]
    assert struct.unpack("<H", extra[:2])[0] == 0x0001, "ZIP64 extra field in the local header"


def make_bsdtar_pipe(src, out):
    with open(out, "wb") as f:
        p1 = subprocess.Popen(["bsdtar", "--format", "zip", "-cf", "-", "-C", src, *sorted(os.listdir(src))], stdout=subprocess.PIPE)
        p2 = subprocess.run(["cat"], stdin=p1.stdout, stdout=f, check=True)
        assert p1.wait() == 0 and p2.returncode == 0
    data = open(out, "rb").read()
    end = eocd_offset(data) + 22
    assert len(data) % 512 == 0 and len(data) > end and set(data[end:]) == {0}, "padded with NULs after the end record"


def make_7z(src, out):
    run("7z", "a", "-tzip", "-r", out, ".", cwd=src)
    with zipfile.ZipFile(out) as z:
        assert z.testzip() is None


def make_junk_appended(src, out):
    make_infozip_deflate(src, out)
    with open(out, "ab") as f:
        f.write(b"appended by a careless uploader\n" * 50)


def make_comment_longer_than_said(src, out):
    make_infozip_stored_comment(src, out)
    data = open(out, "rb").read()
    assert data[eocd_offset(data) + 22:].startswith(b"release notes")
    with open(out, "ab") as f:
        f.write(b" and more comment than the length field says")


def make_all_ffff_end_record(src, out):
    make_infozip_zip64(src, out)
    data = bytearray(open(out, "rb").read())
    e = eocd_offset(data)
    data[e + 4:e + 20] = b"\xff" * 16  # disk numbers, counts, directory size and offset
    open(out, "wb").write(data)
    with zipfile.ZipFile(out) as z:  # an established reader takes it
        assert z.testzip() is None


ZIPPERS = {
    "infozip-deflate": lambda src, files, out: make_infozip_deflate(src, out),
    "infozip-stored-comment": lambda src, files, out: make_infozip_stored_comment(src, out),
    "infozip-zip64": lambda src, files, out: make_infozip_zip64(src, out),
    "python-data-descriptors": make_python_streamed,
    "python-zip64": make_python_zip64,
    "bsdtar-pipe-padded": lambda src, files, out: make_bsdtar_pipe(src, out),
    "7z": lambda src, files, out: make_7z(src, out),
    "junk-appended": lambda src, files, out: make_junk_appended(src, out),
    "comment-longer-than-said": lambda src, files, out: make_comment_longer_than_said(src, out),
    "all-ffff-end-record": lambda src, files, out: make_all_ffff_end_record(src, out),
}


def write_manifests(repo, archive, files):
    data = open(archive, "rb").read()
    with open(os.path.join(repo, "format1.json"), "w") as f:
        json.dump({
            "format": 1, "package": "zippers", "version": 1,
            "archive": {"url": os.path.basename(archive), "size": len(data), "sha256": hashlib.sha256(data).hexdigest()},
            "files": [{"path": n, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in files.items()],
        }, f)
    with open(os.path.join(repo, "legacy.json"), "w") as f:
        json.dump({"url": os.path.basename(archive), "md5": hashlib.md5(data).hexdigest()}, f)


@pytest.mark.parametrize("zipper", sorted(ZIPPERS))
@pytest.mark.parametrize("manifest", ["format1", "legacy"])
def test_archive_from_a_real_zipper_installs(tmp_path, zipper, manifest):
    src, repo = tmp_path / "src", tmp_path / "repo"
    src.mkdir()
    repo.mkdir()
    files = source_tree(str(src))
    archive = str(repo / "release.zip")
    ZIPPERS[zipper](str(src), files, archive)
    if zipper not in ("all-ffff-end-record",):
        run("unzip", "-tq", archive)
    write_manifests(str(repo), archive, files)
    with assetpatch.Client(str(tmp_path / "data"), manifest_url=f"file://{repo}/{manifest}.json") as c:
        assert c.update() is True
        for name, data in files.items():
            with open(c.resolve(name), "rb") as f:
                assert f.read() == data, name
