"""A host that still gives clients a repository's manifest.json: the manifest names the head
beside it ("head": "head.json"), and a client reads the head and its paged index from then on,
so an update costs what it costs a host that gives head.json (every byte nginx sent counted).
Who holds what: a CDN edge can serve any bytes at either URL, a publisher can stop publishing
heads; neither may make the client take a release the signed manifests do not offer, or stay on
an old head while the manifest offers a newer release."""
import base64
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

import assetpatch
from conftest import CLI, ROOT, make_tree
from test_chunked import CHUNK_SIZE, assert_serves, chunked_releases
from trust import cli, keygen, payload, sign

sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import Nginx  # noqa: E402


def publish(src, repo, files, version, *extra):
    make_tree(src, files)
    subprocess.run([CLI, "publish", src, "--repo", repo, "--package", "named", "--version", str(version),
                    "--chunk-size", str(CHUNK_SIZE), "--chunk-threshold", str(1 << 20), *extra],
                   check=True, stdout=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """One URL whose content a test moves from release 1 to release 2 (the chunked pack of
    test_chunked, a few records changed), under a real nginx logging every byte it sends."""
    base = str(tmp_path_factory.mktemp("named-head"))
    v1, v2, new_bytes = chunked_releases()
    key = os.path.join(base, "key")
    public = keygen(key)
    r1, r2 = os.path.join(base, "r1"), os.path.join(base, "r2")
    publish(os.path.join(base, "src1"), r1, v1, 1, "--key", key)
    shutil.copytree(r1, r2)
    publish(os.path.join(base, "src2"), r2, v2, 2, "--key", key)
    r3 = os.path.join(base, "r3")
    shutil.copytree(r2, r3)
    v3 = dict(v2, **{"readme.txt": b"release 3\n"})
    publish(os.path.join(base, "src3"), r3, v3, 3, "--key", key)
    www = os.path.join(base, "www")
    os.makedirs(www)
    http = "log_format sent '$request $status $bytes_sent';"
    busy = "location = /busy/head.json {{ return 503; }}"
    with Nginx(www, os.path.join(base, "nginx"), http=http, locations=busy, access_log=f"{base}/access.log sent") as n:
        yield {"base": base, "www": www, "r1": r1, "r2": r2, "r3": r3, "v1": v1, "v2": v2, "v3": v3, "new_bytes": new_bytes,
               "key": key, "public": public, "port": n.port, "log": f"{base}/access.log"}


SERVED = {"time": 0}


def serve(site, name, repo):
    """The repository `repo` as it is, at /NAME/ (replacing what was there). Its manifests get a
    modification time of their own, well in the past: a client keeps validators only from a
    response a second newer than them (the racy rule), and two copies must not share an ETag."""
    dest = os.path.join(site["www"], name)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(repo, dest)
    SERVED["time"] = max(int(time.time()) - 600, SERVED["time"] + 2)
    for f in ("manifest.json", "head.json"):
        os.utime(os.path.join(dest, f), (SERVED["time"], SERVED["time"]))
    return f"http://127.0.0.1:{site['port']}/{name}"


class Sent:
    """The requests nginx answered, and every byte it sent, while the block ran."""

    def __init__(self, site):
        self.path = site["log"]

    def __enter__(self):
        with open(self.path) as f:
            self.start = len(f.readlines())
        return self

    def __exit__(self, *exc):
        with open(self.path) as f:
            self.lines = f.readlines()[self.start:]
        self.bytes = sum(int(line.split()[-1]) for line in self.lines)

    def asked(self, suffix):
        return [line for line in self.lines if line.split()[1].endswith(suffix)]


def declined(repo):
    """How named-head records the order of `repo`'s manifest.json."""
    m = payload(os.path.join(repo, "manifest.json"))
    return f"{m['version']} {m['revision']}"


def named_head(data):
    """The head kept (manifest URL, reference) and the order whose head was declined."""
    path = os.path.join(data, "named-head")
    return open(path).read().split("\n")[:3] if os.path.exists(path) else None


def update(data, url, site):
    with assetpatch.Client(data, manifest_url=url, public_keys=[site["public"]]) as c:
        return c.update()


def test_the_publisher_names_the_head_in_every_manifest_json(site):
    for repo in (site["r1"], site["r2"]):
        assert payload(os.path.join(repo, "manifest.json"))["head"] == "head.json"
    # Every signing of a channel keeps it: a promotion to another channel names that channel's head.
    repo = os.path.join(site["base"], "promoted")
    shutil.copytree(site["r2"], repo)
    cli("promote", "--repo", repo, "--from", "stable", "--to", "beta", "--key", site["key"])
    assert payload(os.path.join(repo, "channels", "beta", "manifest.json"))["head"] == "head.json"
    assert os.path.exists(os.path.join(repo, "channels", "beta", "head.json"))


def test_a_client_given_manifest_json_sends_the_bytes_of_one_given_head_json(tmp_path, site):
    """Both clients install release 1 from the same URL, one given manifest.json, one head.json;
    release 2 then costs the first what it costs the second (within 1%), every byte counted,
    and the manifest that lists every file is not asked for again."""
    url = serve(site, "same", site["r1"])
    given_manifest, given_head = str(tmp_path / "m"), str(tmp_path / "h")
    with Sent(site) as first:
        with assetpatch.Client(given_manifest, manifest_url=f"{url}/manifest.json", public_keys=[site["public"]]) as c:
            assert c.update() is True
            assert_serves(c, site["v1"], 1)
    # The first check read the manifest once, then the head it names.
    assert len(first.asked("/same/manifest.json")) == 1 and len(first.asked("/same/head.json")) == 1, first.lines
    assert named_head(given_manifest) == [f"{url}/manifest.json", "head.json", ""]
    # A check that then finds nothing costs two 304s: the manifest read in full was this copy.
    with Sent(site) as settled:
        assert update(given_manifest, f"{url}/manifest.json", site) is False
    assert sorted((line.split()[1].rsplit("/", 1)[1], line.split()[-2]) for line in settled.lines) == \
        [("head.json", "304"), ("manifest.json", "304")], settled.lines
    with assetpatch.Client(given_head, manifest_url=f"{url}/head.json", public_keys=[site["public"]]) as c:
        assert c.update() is True

    serve(site, "same", site["r2"])
    with Sent(site) as via_manifest:
        with assetpatch.Client(given_manifest, manifest_url=f"{url}/manifest.json", public_keys=[site["public"]]) as c:
            assert c.update() is True
            assert_serves(c, site["v2"], 2)
    with Sent(site) as via_head:
        with assetpatch.Client(given_head, manifest_url=f"{url}/head.json", public_keys=[site["public"]]) as c:
            assert c.update() is True
            assert_serves(c, site["v2"], 2)
    assert via_manifest.asked("/same/manifest.json") == [], via_manifest.lines
    assert abs(via_manifest.bytes - via_head.bytes) <= 0.01 * via_head.bytes, (via_manifest.lines, via_head.lines)
    # Checks that then find nothing: the head's 304, and the manifest's first KiB (once, then a 304).
    with Sent(site) as nothing:
        assert update(given_manifest, f"{url}/manifest.json", site) is False
    assert sorted((line.split()[1].rsplit("/", 1)[1], line.split()[-2]) for line in nothing.lines) == \
        [("head.json", "304"), ("manifest.json", "206")], nothing.lines
    assert nothing.bytes < 2048, nothing.lines  # the manifest's first KiB, once after each release
    with Sent(site) as again:
        assert update(given_manifest, f"{url}/manifest.json", site) is False
    assert sorted((line.split()[1].rsplit("/", 1)[1], line.split()[-2]) for line in again.lines) == \
        [("head.json", "304"), ("manifest.json", "304")], again.lines
    assert again.bytes < 1024, again.lines
    # What the manifest alone would have cost: the whole pack again.
    assert via_manifest.bytes * 4 < os.path.getsize(os.path.join(site["r2"], "manifest.json")) + len(site["v2"]["data/pack.bin"]) // 2


def test_check_and_status_say_what_was_read(tmp_path, site):
    url = serve(site, "said", site["r2"])
    data = str(tmp_path / "d")
    r = cli("check", "--data-dir", data, "--url", f"{url}/manifest.json", "--public-key", site["public"], "--json", check=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["read"] == f"{url}/head.json"
    status = json.loads(cli("status", "--data-dir", data, "--json").stdout)
    assert status["named_head"] == {"manifest_url": f"{url}/manifest.json", "head": "head.json"}
    # Given head.json itself, the check reads what it was given.
    r = cli("check", "--data-dir", str(tmp_path / "e"), "--url", f"{url}/head.json", "--public-key", site["public"], "--json", check=False)
    assert json.loads(r.stdout)["read"] == "manifest_url"


def test_a_head_that_is_gone_sends_the_client_back_to_manifest_json(tmp_path, site):
    """A publisher back on a tool without heads deletes head.json: the client that followed it
    reads manifest.json again, installs from it, and keeps no head."""
    url = serve(site, "gone", site["r1"])
    data = str(tmp_path / "d")
    with assetpatch.Client(data, manifest_url=f"{url}/manifest.json", public_keys=[site["public"]]) as c:
        assert c.update() is True
    assert named_head(data) is not None
    serve(site, "gone", site["r2"])
    os.unlink(os.path.join(site["www"], "gone", "head.json"))
    # The manifest without its "head": as a 0.3 publisher writes it, signed.
    body = payload(os.path.join(site["r2"], "manifest.json"))
    del body["head"]
    with open(os.path.join(site["www"], "gone", "manifest.json"), "w") as f:
        json.dump(sign(site["key"], json.dumps(body).encode()), f)
    with Sent(site) as sent:
        with assetpatch.Client(data, manifest_url=f"{url}/manifest.json", public_keys=[site["public"]]) as c:
            assert c.update() is True
            assert_serves(c, site["v2"], 2)
    assert [line.split()[-2] for line in sent.asked("/gone/head.json")] == ["404"]
    assert len(sent.asked("/gone/manifest.json")) == 1
    assert named_head(data) is None


def test_a_head_left_behind_does_not_freeze_the_client(tmp_path, site):
    """The client follows the head since release 1. Then only manifest.json moves to release 2
    (a publisher back on a tool that writes no heads, or a cache that keeps head.json longer):
    the kept head offers nothing new, the watched manifest changed, so the client reads it,
    finds the head behind it, installs release 2 and declines that head."""
    url = serve(site, "behind", site["r1"])
    data = str(tmp_path / "d")
    assert update(data, f"{url}/manifest.json", site) is True
    assert named_head(data)[1] == "head.json"
    assert update(data, f"{url}/manifest.json", site) is False  # nothing new: the head, the manifest's HEAD
    shutil.copy(os.path.join(site["r2"], "manifest.json"), os.path.join(site["www"], "behind", "manifest.json"))
    for archive in os.listdir(os.path.join(site["r2"], "archives")):
        shutil.copy(os.path.join(site["r2"], "archives", archive), os.path.join(site["www"], "behind", "archives"))
    with assetpatch.Client(data, manifest_url=f"{url}/manifest.json", public_keys=[site["public"]]) as c:
        assert c.update() is True
        assert_serves(c, site["v2"], 2)
    assert named_head(data) == [f"{url}/manifest.json", "", declined(site["r2"])]


def test_a_head_that_moves_but_stays_behind_does_not_freeze_the_client(tmp_path, site):
    """The client was away for releases 2 and 3; an edge still serves release 2's head beside
    release 3's manifest. The kept head offers release 2, which installs; the next check finds
    the head offering nothing new while the manifest's first bytes name version 3, so it reads
    the manifest, declines the head and installs release 3."""
    url = serve(site, "moved", site["r1"])
    data = str(tmp_path / "d")
    assert update(data, f"{url}/manifest.json", site) is True
    serve(site, "moved", site["r3"])
    shutil.copy(os.path.join(site["r2"], "head.json"), os.path.join(site["www"], "moved", "head.json"))
    with assetpatch.Client(data, manifest_url=f"{url}/manifest.json", public_keys=[site["public"]]) as c:
        assert c.update() is True
        assert_serves(c, site["v2"], 2)
        assert c.update() is True
        assert_serves(c, site["v3"], 3)
    assert named_head(data) == [f"{url}/manifest.json", "", declined(site["r3"])]


def test_a_busy_head_leaves_the_manifest_to_install_and_is_tried_again(tmp_path, site):
    """The head answers 503 (past the retries) the first time the manifest names it: the check
    installs from the manifest's bytes and keeps nothing, so a later check tries the head."""
    url = serve(site, "busy", site["r2"])
    data = str(tmp_path / "d")
    with Sent(site) as sent:
        with assetpatch.Client(data, manifest_url=f"{url}/manifest.json", public_keys=[site["public"]]) as c:
            assert c.update() is True
            assert_serves(c, site["v2"], 2)
    assert {line.split()[-2] for line in sent.asked("/busy/head.json")} == {"503"}, sent.lines
    assert len(sent.asked("/busy/manifest.json")) == 1, sent.lines
    assert named_head(data) is None


def test_a_head_the_server_refuses_is_declined(tmp_path, site):
    """A bucket answers 403 for a missing object: the head is declined for this manifest, which
    the check installs from; the next check reads the manifest alone."""
    url = serve(site, "refused", site["r2"])
    os.unlink(os.path.join(site["www"], "refused", "head.json"))
    os.makedirs(os.path.join(site["www"], "refused", "head.json"))  # a directory without an index: 403
    data = str(tmp_path / "d")
    assert update(data, f"{url}/manifest.json", site) is True
    assert named_head(data) == [f"{url}/manifest.json", "", declined(site["r2"])]
    with Sent(site) as again:
        assert update(data, f"{url}/manifest.json", site) is False
    assert again.asked("/refused/head.json") == [] and len(again.asked("/refused/manifest.json")) == 1, again.lines


def test_a_head_older_than_the_manifest_is_not_followed(tmp_path, site):
    """A CDN edge (or a publisher's half-finished upload) serves release 2's manifest.json beside
    release 1's head.json: the client installs release 2 from the manifest's bytes (fetched
    once), keeps no head, and declines it while the manifest is that one: the next check reads
    the manifest alone. A new signing of the channel names a good head, which is followed."""
    url = serve(site, "stale", site["r2"])
    shutil.copy(os.path.join(site["r1"], "head.json"), os.path.join(site["www"], "stale", "head.json"))
    data = str(tmp_path / "d")
    with Sent(site) as sent:
        with assetpatch.Client(data, manifest_url=f"{url}/manifest.json", public_keys=[site["public"]]) as c:
            assert c.update() is True
            assert_serves(c, site["v2"], 2)
    assert len(sent.asked("/stale/manifest.json")) == 1 and len(sent.asked("/stale/head.json")) == 1, sent.lines
    assert named_head(data) == [f"{url}/manifest.json", "", declined(site["r2"])]
    with Sent(site) as again:
        with assetpatch.Client(data, manifest_url=f"{url}/manifest.json", public_keys=[site["public"]]) as c:
            assert c.update() is False
    assert len(again.asked("/stale/manifest.json")) == 1 and again.asked("/stale/head.json") == [], again.lines
    # The publisher signs the channel again (a re-signing: revision 2) and uploads both files.
    repo = os.path.join(site["base"], "stale-resigned")
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(site["r2"], repo)
    cli("resign", "--repo", repo, "--key", site["key"])
    serve(site, "stale", repo)
    with assetpatch.Client(data, manifest_url=f"{url}/manifest.json", public_keys=[site["public"]]) as c:
        assert c.update() is False
    assert named_head(data) == [f"{url}/manifest.json", "head.json", ""]


def test_an_edge_cannot_point_a_client_at_a_head_of_its_choosing(tmp_path, site):
    """What an edge changes in manifest.json breaks its signature, and a publisher's signed
    manifest naming a head on another origin is not followed: the client keeps no head."""
    url = serve(site, "edge", site["r2"])
    target = os.path.join(site["www"], "edge", "manifest.json")
    envelope = json.load(open(target))
    body = payload(target)
    body["head"] = "../same/head.json"
    envelope["payload"] = base64.b64encode(json.dumps(body).encode()).decode()
    with open(target, "w") as f:
        json.dump(envelope, f)
    data = str(tmp_path / "d")
    with assetpatch.Client(data, manifest_url=f"{url}/manifest.json", public_keys=[site["public"]]) as c:
        with pytest.raises(assetpatch.SignatureError):
            c.update()
    assert named_head(data) is None

    # Signed by the publisher's key, naming a head elsewhere (a valid head, on another origin
    # of the same server): judged, not followed, never asked for.
    body["head"] = f"http://localhost:{site['port']}/same/head.json"
    with open(target, "w") as f:
        json.dump(sign(site["key"], json.dumps(body).encode()), f)
    with Sent(site) as sent:
        with assetpatch.Client(data, manifest_url=f"{url}/manifest.json", public_keys=[site["public"]]) as c:
            assert c.update() is True
            assert_serves(c, site["v2"], 2)
    assert named_head(data) is None
    assert len(sent.asked("/edge/manifest.json")) == 1, sent.lines  # judged once, its bytes then read as the manifest
    assert sent.asked("/same/head.json") == [], sent.lines


def test_an_unsigned_head_is_not_taken_in_place_of_a_signed_manifest(tmp_path, site):
    """An edge that keeps the signed manifest.json but serves an unsigned head.json of its own
    (a release the publisher never signed): the head is refused, the client installs the
    manifest's release, and keeps no head."""
    url = serve(site, "forged", site["r2"])
    forged = payload(os.path.join(site["r2"], "head.json"))
    forged["label"] = "not the publisher's"
    with open(os.path.join(site["www"], "forged", "head.json"), "w") as f:
        json.dump(forged, f)
    data = str(tmp_path / "d")
    with assetpatch.Client(data, manifest_url=f"{url}/manifest.json", public_keys=[site["public"]]) as c:
        assert c.update() is True
        assert_serves(c, site["v2"], 2)
        assert c.release_info().label != "not the publisher's"
    assert named_head(data) == [f"{url}/manifest.json", "", declined(site["r2"])]
