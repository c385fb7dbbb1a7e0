"""Content codings, servers without ranges, and legacy manifests' limits.

An archive answer may come gzip-encoded although the request asked for identity (nginx
`gzip_static always`, CDN objects stored compressed): it is decoded, and a range of an
encoded representation is never spliced onto identity bytes. The manifest request accepts
compressed codings."""
import hashlib
import json
import os
import shutil
import subprocess
import zipfile

import pytest

import assetpatch
from conftest import ROOT, archive_log, assert_serves, partial_files, sha256_file

import sys
sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import Nginx  # noqa: E402


def client(tmp_path, url, **options):
    options.setdefault("stall_timeout_ms", 5000)
    return assetpatch.Client(str(tmp_path / "data"), manifest_url=url, **options)


def leave_partial(c, fault, at):
    """Exactly `at` bytes of the archive on disk, fetched as identity with a validator."""
    fault.control("cut", n=at)
    with pytest.raises(assetpatch.NetworkError):
        c.update()
    fault.reset()


def test_gzip_encoded_archive_is_decoded(tmp_path, fault, repos):
    fault.control("gzip", times=1)
    with client(tmp_path, fault.url("v2")) as c:
        assert c.update() is True
        assert_serves(c, repos["v2"])
    assert [(e["start"], e["status"]) for e in archive_log(fault)] == [(0, 200)]


def test_an_encoded_range_is_never_spliced_onto_identity_bytes(tmp_path, fault, repos):
    size = repos["v2"].archive_size
    with client(tmp_path, fault.url("v2")) as c:
        leave_partial(c, fault, size // 2)
        fault.control("gzip", times=1)  # the resume gets a gzip-encoded 206
        assert c.update() is True
        assert_serves(c, repos["v2"])
    assert [(e["start"], e["status"]) for e in archive_log(fault)] == [(size // 2, 206), (0, 200)]


def test_bytes_decoded_from_an_encoding_are_not_resumed_with_ranges(tmp_path, fault, repos):
    size = repos["v2"].archive_size
    fault.control("gzip-cut", n=size // 3, times=1)
    with client(tmp_path, fault.url("v2")) as c:
        assert c.update() is True
        assert_serves(c, repos["v2"])
    log = archive_log(fault)
    assert [e["start"] for e in log] == [0, 0], "decoded bytes are no offset into the encoded representation"


@pytest.fixture(scope="module")
def gzip_nginx(repos, tmp_path_factory):
    """nginx that sends every file of v2 gzip-encoded, asked or not (`gzip_static always`), and
    a second server without range support (`max_ranges 0`)."""
    root = str(tmp_path_factory.mktemp("gzroot"))
    shutil.copytree(os.path.join(repos["base"], "v2"), os.path.join(root, "v2"))
    for dirpath, _, names in os.walk(os.path.join(root, "v2")):
        for n in names:
            path = os.path.join(dirpath, n)
            subprocess.run(["gzip", "-k", "-n", path], check=True)
    work = str(tmp_path_factory.mktemp("gznginx"))
    locations = "location /v2/ {{ gzip_static always; }}"
    servers = "server {{ listen 127.0.0.1:{noranges}; root {root}; max_ranges 0; }}"
    with Nginx(root, work, locations=locations, servers=servers, ports=("noranges",)) as n:
        yield {"port": n.port, "noranges": n.ports["noranges"], "root": root}


def head(url, *extra):
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-D", "-", *extra, url], capture_output=True, text=True, check=True)
    return out.stdout.lower()


def test_nginx_gzip_static_always_is_decoded(tmp_path, gzip_nginx, repos):
    base = f"http://127.0.0.1:{gzip_nginx['port']}/v2"
    archive = repos["v2"].manifest["archive"]["url"]
    # The configuration really sends gzip to a request for identity, for manifest and archive.
    for path in ("manifest.json", archive):
        assert "content-encoding: gzip" in head(f"{base}/{path}", "-H", "Accept-Encoding: identity"), path
    with client(tmp_path, f"{base}/manifest.json") as c:
        assert c.update() is True
        assert_serves(c, repos["v2"])


def test_nginx_gzip_static_never_splices_a_resume(tmp_path, gzip_nginx, repos):
    """A partial fetched as identity, resumed against a server that now sends gzip."""
    v2 = repos["v2"]
    data = tmp_path / "data"
    archive_path = os.path.join(repos["base"], "v2", v2.manifest["archive"]["url"])
    digest = v2.manifest["archive"]["sha256"]
    (data / "downloads").mkdir(parents=True)
    with open(archive_path, "rb") as f:
        (data / "downloads" / f"{digest}.part").write_bytes(f.read(v2.archive_size // 2))
    url = f"http://127.0.0.1:{gzip_nginx['port']}/v2/{v2.manifest['archive']['url']}"
    # The validator the server now sends, so that it answers the resume with a 206 of the
    # gzip-encoded file: bytes that must not be appended to the identity prefix.
    etag = [line.split(":", 1)[1].strip() for line in head(url).splitlines() if line.startswith("etag:")][0]
    (data / "downloads" / f"{digest}.meta").write_text(json.dumps({"url": url, "validator": etag}))
    with client(tmp_path, f"http://127.0.0.1:{gzip_nginx['port']}/v2/manifest.json") as c:
        assert c.update() is True
        assert_serves(c, v2)


def test_server_without_ranges_restarts_cleanly(tmp_path, gzip_nginx, fault, repos):
    base = f"http://127.0.0.1:{gzip_nginx['noranges']}/v2"
    archive = repos["v2"].manifest["archive"]["url"]
    assert head(f"{base}/{archive}", "-H", "Range: bytes=100-").startswith("http/1.1 200"), "the server ignores ranges"
    size = repos["v2"].archive_size
    with client(tmp_path, fault.url("v2")) as c:
        leave_partial(c, fault, size // 2)
    assert partial_files(str(tmp_path / "data"))
    with client(tmp_path, f"{base}/manifest.json") as c:
        assert c.update() is True
        assert_serves(c, repos["v2"])


# Legacy manifests: {url, md5}, no sizes.

def legacy_repo(path, files, method=zipfile.ZIP_STORED):
    os.makedirs(path, exist_ok=True)
    archive = os.path.join(path, "patch.zip")
    with zipfile.ZipFile(archive, "w", method) as z:
        for name, data in files.items():
            z.writestr(name, data)
    with open(archive, "rb") as f:
        md5 = hashlib.md5(f.read()).hexdigest()
    with open(os.path.join(path, "manifest.json"), "w") as f:
        json.dump({"url": "patch.zip", "md5": md5}, f)
    return archive


def test_legacy_release_is_judged_on_unpacked_size(tmp_path):
    repo = str(tmp_path / "repo")
    archive = legacy_repo(repo, {"big.bin": os.urandom(3950)})
    assert os.path.getsize(archive) > 4000, "the archive is larger than the limit, its content is not"
    with assetpatch.Client(str(tmp_path / "data"), manifest_url=f"file://{repo}/manifest.json", max_release_bytes=4000) as c:
        assert c.update() is True
        assert os.path.getsize(c.resolve("big.bin")) == 3950


def test_legacy_release_over_max_release_bytes_is_an_archive_error(tmp_path):
    repo = str(tmp_path / "repo")
    legacy_repo(repo, {"big.bin": os.urandom(6000)})
    with assetpatch.Client(str(tmp_path / "data"), manifest_url=f"file://{repo}/manifest.json", max_release_bytes=4000) as c:
        with pytest.raises(assetpatch.ArchiveError) as e:
            c.update()
        assert "max_release_bytes" in e.value.message
        assert c.current_version == 0


def test_legacy_archive_download_is_bounded_by_its_own_cap(tmp_path, fault):
    repo = str(tmp_path / "repo")
    archive = legacy_repo(repo, {"big.bin": os.urandom(6000)})
    with assetpatch.Client(str(tmp_path / "data"), manifest_url=f"file://{repo}/manifest.json",
                           max_legacy_archive_bytes=5000) as c:
        with pytest.raises(assetpatch.ArchiveError) as e:
            c.update()
        assert "max_legacy_archive_bytes" in e.value.message
    assert os.path.getsize(archive) > 5000


def test_legacy_check_reports_the_archive_size(tmp_path, gzip_nginx):
    files = {"a.txt": b"legacy\n" * 100, "b.bin": os.urandom(2000)}
    repo = str(tmp_path / "repo")
    archive = legacy_repo(repo, files, zipfile.ZIP_DEFLATED)
    size = os.path.getsize(archive)
    with assetpatch.Client(str(tmp_path / "file-data"), manifest_url=f"file://{repo}/manifest.json") as c:
        assert c.check() == (1, size)
    # Over HTTP the size comes from a HEAD request (the no-ranges server serves this root too).
    served = os.path.join(gzip_nginx["root"], "legacy")
    shutil.copytree(repo, served)
    url = f"http://127.0.0.1:{gzip_nginx['noranges']}/legacy/manifest.json"
    with assetpatch.Client(str(tmp_path / "http-data"), manifest_url=url) as c:
        assert c.check() == (1, size)
        assert c.update() is True
        for name, data in files.items():
            with open(c.resolve(name), "rb") as f:
                assert f.read() == data


def test_a_legacy_archive_resumes_only_while_its_validator_holds(tmp_path, fault, repos):
    # A legacy archive is replaced in place at its URL and named by nothing: its resume keeps
    # If-Range, so a changed ETag (the file replaced) restarts it from byte 0.
    import time
    repo = os.path.join(repos["base"], "legacy-resume")
    if not os.path.exists(os.path.join(repo, "manifest.json")):
        legacy_repo(repo, {f"f{i}.bin": os.urandom(200_000) for i in range(4)})
        old = time.time() - 10  # validators a second older than any Date: not racy
        for name in os.listdir(repo):
            os.utime(os.path.join(repo, name), (old, old))
    size = os.path.getsize(os.path.join(repo, "patch.zip"))
    with client(tmp_path, fault.base + "/legacy-resume/manifest.json") as c:
        fault.control("cut", n=size // 2)
        with pytest.raises(assetpatch.NetworkError):
            c.update()
        fault.reset()
        fault.control("etag-change", times=1)
        assert c.update() is True
    log = [(e["start"], e["status"]) for e in archive_log(fault)]
    assert log == [(size // 2, 200)], log
