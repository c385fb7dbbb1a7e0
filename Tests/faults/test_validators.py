"""Conditional manifest requests against a real nginx, whose validators come from the file's
modification time in whole seconds (ETag "<mtime hex>-<size hex>", a one-second Last-Modified).

A manifest replaced by one of the same size within the second it was served keeps both
validators. The client must not send such racy validators back (it would get 304 and stay on
the old release until the next publish), while a manifest older than a second must still cost
one 304 per check that finds nothing. The modification times are set by hand so that what the
test checks does not depend on when the requests happen."""
import os
import shutil
import subprocess
import sys
import time

import pytest

import assetpatch
from conftest import CLI, ROOT, make_tree, without_head

sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import Nginx  # noqa: E402

LOG = """log_format manifest escape=none '$request_uri $status $http_if_none_match|$http_if_modified_since';"""


def publish_same_size(base):
    """Two releases of one package whose manifests have exactly the same size, kept aside as
    manifest-1.json and manifest-2.json; the repository's manifest.json is release 1's."""
    repo = base / "repo"
    for version in (1, 2):
        src = base / f"src{version}"
        make_tree(src, {"a.txt": f"release {version}\n".encode(), "b/c.bin": bytes([version]) * 5000})
        subprocess.run([CLI, "publish", str(src), "--repo", str(repo), "--package", "racy", "--version", str(version)],
                       check=True, stdout=subprocess.DEVNULL)
        without_head(str(repo / "manifest.json"))
        shutil.copy(repo / "manifest.json", base / f"manifest-{version}.json")
    sizes = {os.path.getsize(base / f"manifest-{v}.json") for v in (1, 2)}
    assert len(sizes) == 1, f"manifests differ in size: {sizes}"
    shutil.copy(base / "manifest-1.json", repo / "manifest.json")
    return repo


def place(base, repo, version, mtime):
    """Makes release `version`'s manifest the repository's, with modification time `mtime`."""
    tmp = repo / "manifest.json.tmp"
    shutil.copy(base / f"manifest-{version}.json", tmp)
    os.utime(tmp, (mtime, mtime))
    os.replace(tmp, repo / "manifest.json")


def manifest_requests(workdir, name="manifest.json"):
    """(status, conditional headers sent) of every request for `name` nginx logged, in order."""
    lines = open(f"{workdir}/access.log").read().splitlines()
    return [(int(status), cond.strip("|-")) for uri, status, cond in (line.split(" ", 2) for line in lines)
            if uri.endswith(name)]


@pytest.mark.parametrize("etag", ["on", "off"])
def test_a_manifest_replaced_within_the_second_it_was_served_is_fetched_again(tmp_path, etag):
    repo = publish_same_size(tmp_path)
    work = tmp_path / "nginx"
    os.makedirs(work)
    # Both manifests carry one modification time that is not yet a second old when served:
    # equal ETags and Last-Modified. (A time ahead of the server's clock is the same case.)
    racy = int(time.time()) + 30
    place(tmp_path, repo, 1, racy)
    with Nginx(str(tmp_path), str(work), http=LOG, locations=f"etag {etag};",
               access_log=f"{work}/access.log manifest") as n:
        url = n.url("repo/manifest.json")
        with assetpatch.Client(str(tmp_path / "data"), manifest_url=url) as c:
            assert c.update() is True and c.current_version == 1
            place(tmp_path, repo, 2, racy)
            assert c.check() is not None, "release 2 was not seen: a racy validator was sent back"
            assert c.update() is True and c.current_version == 2
            assert open(c.resolve("a.txt")).read() == "release 2\n"
    requests = manifest_requests(work)
    assert [s for s, _ in requests] == [200, 200, 200], requests
    assert all(cond == "" for _, cond in requests), f"racy validators were sent: {requests}"


@pytest.mark.parametrize("etag", ["on", "off"])
def test_a_check_that_finds_nothing_costs_one_304_when_the_manifest_is_old(tmp_path, etag):
    repo = publish_same_size(tmp_path)
    work = tmp_path / "nginx"
    os.makedirs(work)
    place(tmp_path, repo, 1, int(time.time()) - 10)
    with Nginx(str(tmp_path), str(work), http=LOG, locations=f"etag {etag};",
               access_log=f"{work}/access.log manifest") as n:
        url = n.url("repo/manifest.json")
        with assetpatch.Client(str(tmp_path / "data"), manifest_url=url) as c:
            assert c.update() is True
            assert c.check() is None
            assert c.update() is False
            # A new manifest a second later than the old one: seen at once.
            place(tmp_path, repo, 2, int(time.time()) - 5)
            assert c.update() is True and c.current_version == 2
    requests = manifest_requests(work)
    assert [s for s, _ in requests] == [200, 304, 304, 200], requests
    assert all(cond.startswith('"') if etag == "on" else cond.endswith("GMT") for _, cond in requests[1:3]), requests


def test_an_expired_manifest_kept_for_a_304_is_an_error_not_no_update(tmp_path):
    # Release 5 expires a few seconds after it is installed. The server keeps answering 304 (as
    # a replaying cache would): the kept manifest is judged again, and its expiry is reported.
    key = tmp_path / "key"
    subprocess.run([CLI, "keygen", "--out", str(key)], check=True, stdout=subprocess.DEVNULL)
    pub = (tmp_path / "key.pub").read_text().strip()
    src = tmp_path / "src"
    make_tree(src, {"a.txt": b"release 5\n"})
    deadline = int(time.time()) + 4
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deadline))
    repo = tmp_path / "repo"
    subprocess.run([CLI, "publish", str(src), "--repo", str(repo), "--package", "exp", "--version", "5", "--key", str(key),
                    "--expires", expires], check=True, stdout=subprocess.DEVNULL)
    old = int(time.time()) - 10
    os.utime(repo / "head.json", (old, old))
    work = tmp_path / "nginx"
    os.makedirs(work)
    with Nginx(str(tmp_path), str(work), http=LOG, access_log=f"{work}/access.log manifest") as n:
        with assetpatch.Client(str(tmp_path / "data"), manifest_url=n.url("repo/head.json"), public_keys=[pub]) as c:
            assert c.update() is True and c.current_version == 5
            while time.time() < deadline + 1:  # past the expiry, whatever the machine's speed
                time.sleep(0.2)
            with pytest.raises(assetpatch.ExpiredError):
                c.check()
            with pytest.raises(assetpatch.ExpiredError):
                c.update()
            assert open(c.resolve("a.txt")).read() == "release 5\n"
    assert [s for s, _ in manifest_requests(work, "head.json")] == [200, 304, 304]


def test_a_304_naming_no_kept_copy_is_asked_again_once_also_by_a_look_that_changes_nothing(tmp_path):
    """The client keeps two copies of the head (releases 1 and 2, each with its ETag); then the
    server (or an edge) answers every conditional request with a 304 whose ETag names neither.
    The client asks once more without conditions and takes the 200. `status --url` keeps the
    copies (it changes nothing), so it must not ask the same again and again (it recursed until
    the stack ran out)."""
    import http.server
    import threading
    repo = tmp_path / "repo"
    heads = []
    for version in (1, 2):
        make_tree(tmp_path / f"src{version}", {"a.txt": f"release {version}\n".encode()})
        subprocess.run([CLI, "publish", str(tmp_path / f"src{version}"), "--repo", str(repo), "--package", "odd",
                        "--version", str(version)], check=True, stdout=subprocess.DEVNULL)
        heads.append((repo / "head.json").read_bytes())
    served = {"head": heads[0], "etag": '"one"', "odd": False}
    asked = []

    class Odd(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            conditional = "If-None-Match" in self.headers
            asked.append((self.path, conditional))
            if self.path != "/head.json":
                data = (repo / self.path.lstrip("/")).read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if conditional and (served["odd"] or served["etag"] in self.headers["If-None-Match"]):
                self.send_response(304)
                self.send_header("ETag", '"other"' if served["odd"] else served["etag"])
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("ETag", served["etag"])
            self.send_header("Content-Length", str(len(served["head"])))
            self.end_headers()
            self.wfile.write(served["head"])

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Odd)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/head.json"
        data = str(tmp_path / "data")
        for head, etag in ((heads[0], '"one"'), (heads[1], '"two"')):
            served.update(head=head, etag=etag)
            r = subprocess.run([CLI, "update", "--data-dir", data, "--url", url], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
        served["odd"] = True
        for command in (["status", "--data-dir", data, "--url", url], ["check", "--data-dir", data, "--url", url]):
            del asked[:]
            r = subprocess.run([CLI, *command], capture_output=True, text=True, timeout=60)
            assert r.returncode in (0, 2), (command, r.returncode, r.stderr[-2000:])
            assert [a for a in asked if a[0] == "/head.json"] == [("/head.json", True), ("/head.json", False)], (command, asked)
    finally:
        server.shutdown()
