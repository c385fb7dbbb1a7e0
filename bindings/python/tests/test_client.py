"""The Python package as a user would use it, over file:// and over nginx."""
import hashlib
import logging
import os
import subprocess
import sys
import threading

import pytest

import assetpatch
from conftest import CLI, read


def test_context_manager_update_and_resolve(tmp_path, base_url, bundle, fixtures):
    seen = []
    with assetpatch.Client(tmp_path / "data", bundle, manifest_url=f"{base_url}/v2/manifest.json",
                           variants=("@3x", "@2x", "")) as c:
        assert c.current_version == 0
        assert read(c.resolve("readme.txt")) == read(os.path.join(bundle, "readme.txt"))
        version, size = c.check()
        assert version == 2 and size > 0
        assert c.update(progress=seen.append) is True
        assert c.current_version == 2
        assert read(c.resolve("sub/sample.png")) == read(os.path.join(fixtures, "assets-v2", "sub", "sample@3x.png"))
        assert c.check() is None
        assert c.update() is False
    phases = [p.phase for p in seen]
    assert phases[0] is assetpatch.Phase.CHECK and phases[-1] is assetpatch.Phase.DONE
    assert phases == sorted(phases)
    assert isinstance(seen[0], assetpatch.Progress)


def test_every_status_has_its_exception_class(tmp_path, base_url, bundle):
    with assetpatch.Client(tmp_path / "data", bundle) as c:
        with pytest.raises(assetpatch.NotFoundError) as e:
            c.resolve("missing.txt")
        assert e.value.status == assetpatch.Status.ERR_NOT_FOUND
        assert e.value.name == "ASSETPATCH_ERR_NOT_FOUND"
        assert "missing.txt" in e.value.message
        assert isinstance(e.value, assetpatch.AssetPatchError) and isinstance(e.value, LookupError)
        with pytest.raises(assetpatch.ArgumentError):
            c.resolve("../x")
        with pytest.raises(assetpatch.StateError):
            c.update()
        with pytest.raises(assetpatch.ArgumentError):
            c.set("no_such_option", 1)
        c.set("manifest_url", f"{base_url}/corrupt-deflate/manifest.json")
        with pytest.raises(assetpatch.ArchiveError):
            c.update()
        c.set("manifest_url", f"{base_url}/not-json/manifest.json")
        with pytest.raises(assetpatch.ManifestError):
            c.update()
        c.set("manifest_url", f"{base_url}/bad-sha/manifest.json")
        with pytest.raises(assetpatch.IntegrityError):
            c.update()
        if base_url.startswith("http"):
            c.set("manifest_url", f"{base_url}/no-such-repo/head.json")
            with pytest.raises(assetpatch.HTTPError) as h:
                c.update()
            assert h.value.status_code == 404 and h.value.url == f"{base_url}/no-such-repo/head.json", h.value.message
        html = tmp_path / "portal.json"
        html.write_text("<!DOCTYPE html><html><body>Sign in to the Wi-Fi</body></html>")
        c.set("manifest_url", html.as_uri())
        with pytest.raises(assetpatch.ManifestError, match="looks like HTML"):
            c.update()
    classes = {cls.status for cls in assetpatch.AssetPatchError.__subclasses__()}
    assert classes == {s for s in assetpatch.Status if s < 0}


def test_keyword_options_and_set(tmp_path, base_url):
    with assetpatch.Client(tmp_path / "data", manifest_url=f"{base_url}/v1/manifest.json", keep_versions=2,
                           stall_timeout_ms=5000, headers=["X-Test: 1"], user_agent="pytest", apply="next_open") as c:
        assert c.update() is True
        assert c.current_version == 0  # next_open
        with pytest.raises(assetpatch.ArgumentError):
            c.set("apply", "never")
    with assetpatch.Client(tmp_path / "data") as c:
        assert c.current_version == 1


def test_boolean_options_take_python_booleans(tmp_path, base_url):
    # differential=False must reach the core as a value it takes ("0"), and mean off: the
    # update then downloads the whole archive, which a progress callback sees as one download.
    seen = []
    with assetpatch.Client(tmp_path / "data", manifest_url=f"{base_url}/v1/manifest.json", differential=False,
                           allow_unsigned_plugins=True, tcp_quickack=False) as c:
        assert c.update(progress=seen.append) is True
        c.set("differential", True)
        c.set("allow_unsigned_plugins", False)
        with pytest.raises(assetpatch.ArgumentError):
            c.set("differential", "maybe")
    assert any(p.phase is assetpatch.Phase.DOWNLOAD for p in seen)


def test_background_update_wait_and_cancel(tmp_path, base_url):
    with assetpatch.Client(tmp_path / "data", manifest_url=f"{base_url}/v2/manifest.json") as c:
        with pytest.raises(assetpatch.StateError):
            c.wait(0)
        c.start_update()
        assert c.wait(timeout=30) is True
        assert c.current_version == 2
    with assetpatch.Client(tmp_path / "data2", manifest_url=f"{base_url}/v2/manifest.json") as c:
        gate = threading.Event()

        def progress(p):
            if p.phase == assetpatch.Phase.DOWNLOAD:
                gate.set()
                return True  # True cancels

        c.start_update(progress=progress)
        with pytest.raises(assetpatch.CancelledError):
            c.wait(30)
        assert gate.is_set() and c.current_version == 0


def test_callback_exception_cancels_and_reraises(tmp_path, base_url):
    class Stop(Exception):
        pass

    def progress(p):
        raise Stop("from the callback")

    with assetpatch.Client(tmp_path / "data", manifest_url=f"{base_url}/v2/manifest.json") as c:
        with pytest.raises(Stop):
            c.update(progress=progress)
        assert c.current_version == 0
        assert c.update() is True


def test_log_lines_go_to_logging(tmp_path, base_url, caplog):
    caplog.set_level(logging.INFO, logger="assetpatch")
    with assetpatch.Client(tmp_path / "data", manifest_url=f"{base_url}/v1/manifest.json") as c:
        c.update()
    assert any("installed version 1" in r.getMessage() for r in caplog.records if r.name == "assetpatch")


def test_closed_client_is_poisoned_and_close_is_idempotent(tmp_path):
    c = assetpatch.Client(tmp_path / "data")
    c.close()
    c.close()
    with pytest.raises(assetpatch.StateError):
        c.resolve("x")


def test_the_wheels_cli_gets_the_systems_ca_bundle(tmp_path, monkeypatch):
    import assetpatch.__main__ as launcher
    elsewhere = tmp_path / "tls-ca-bundle.pem"
    elsewhere.write_text("")
    monkeypatch.delenv("ASSETPATCH_CA_FILE", raising=False)
    monkeypatch.setattr(assetpatch, "_CA_BUNDLES", (str(tmp_path / "missing.crt"), str(elsewhere)))
    assert launcher.ca_environment() == {"ASSETPATCH_CA_FILE": str(elsewhere)}
    monkeypatch.setattr(assetpatch, "_CA_BUNDLES", (str(elsewhere),))
    assert launcher.ca_environment() == {}  # where libcurl looks: nothing to say
    monkeypatch.setenv("ASSETPATCH_CA_FILE", "/chosen.pem")
    monkeypatch.setattr(assetpatch, "_CA_BUNDLES", (str(tmp_path / "missing.crt"), str(elsewhere)))
    assert launcher.ca_environment() == {}


def test_variants_take_the_c_string_or_a_list(tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    for name in ("logo.png", "logo@2x.png", "plain.txt"):
        (bundle / name).write_text(name)
    for variants in ("@2x,", ["@2x", ""], ("@2x", "")):
        with assetpatch.Client(tmp_path / "data", bundle, variants=variants) as c:
            assert c.resolve("logo.png").endswith("logo@2x.png"), variants
            assert c.resolve("plain.txt").endswith("plain.txt"), variants
    # Without the empty item the plain name is not tried: on purpose, and documented.
    with assetpatch.Client(tmp_path / "data", bundle, variants=["@2x"]) as c:
        assert c.resolve("logo.png").endswith("logo@2x.png")
        with pytest.raises(assetpatch.NotFoundError):
            c.resolve("plain.txt")


def test_library_discovery_names_what_it_tried(tmp_path):
    code = "import assetpatch\ntry:\n    assetpatch.library_version()\nexcept assetpatch.LibraryNotFound as e:\n    print(e)\n"
    env = dict(os.environ, ASSETPATCH_LIBRARY=str(tmp_path / "nope.so"), PKG_CONFIG_PATH=str(tmp_path), LD_LIBRARY_PATH="")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "nope.so" in r.stdout and "ASSETPATCH_LIBRARY" in r.stdout and "libassetpatch.so.1" in r.stdout


def test_example_script_runs(tmp_path, base_url, bundle):
    example = os.path.join(os.path.dirname(__file__), "..", "examples", "update.py")
    r = subprocess.run([sys.executable, example, str(tmp_path / "data"), bundle, f"{base_url}/v2/manifest.json", "readme.txt"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "readme.txt ->" in r.stdout and "version 2" in r.stdout


def test_mark_good_rollback_reset_and_the_lifecycle(tmp_path, base_url, bundle):
    data = tmp_path / "data"
    with assetpatch.Client(data, bundle, manifest_url=f"{base_url}/v1/manifest.json") as c:
        with pytest.raises(assetpatch.StateError):
            c.mark_good()
        assert c.update() is True
        c.set("manifest_url", f"{base_url}/v2/manifest.json")
        assert c.update() is True
        life = c.lifecycle
        assert (life.active_version, life.marked_good, life.launches, life.last_rollback) == (2, False, 0, None)
        info = c.release_info()
        assert (info.version, info.label, info.mandatory, info.marked_good) == (2, "second", True, False)
        assert "Winter event" in info.notes and "❄" in info.notes
        assert c.release_info("pending") is None and c.release_info("candidate") is None
        assert c.rollback() == 1 and c.current_version == 1
        life = c.lifecycle
        assert life.bad_versions == 1 and life.last_rollback.from_version == 2 and life.last_rollback.to_version == 1
        assert c.update() is False, "version 2 is bad until a newer one is published"
        c.mark_good()
        assert c.lifecycle.marked_good
        releases, downloads = c.disk_usage
        assert releases > 0 and downloads == 0
        c.reset()
        assert c.current_version == 0 and c.lifecycle.active_version == 0
        assert c.disk_usage == (0, 0)
        assert c.update() is True and c.current_version == 2, "after a reset the newest release is installed"


CRASHING_APP = """
import sys
import assetpatch
c = assetpatch.Client(sys.argv[1], max_failed_launches=2)
print(c.current_version, flush=True)
if sys.argv[2] == "crash":
    import os, signal
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_an_app_killed_before_mark_good_is_rolled_back_on_the_third_launch(tmp_path, base_url, bundle):
    data = str(tmp_path / "data")
    with assetpatch.Client(data, bundle, manifest_url=f"{base_url}/v1/manifest.json") as c:
        assert c.update() is True
        c.mark_good()
        c.set("manifest_url", f"{base_url}/v2/manifest.json")
        c.set("max_failed_launches", 2)
        assert c.update() is True
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    served = []
    for _ in range(3):
        p = subprocess.run([sys.executable, "-c", CRASHING_APP, data, "crash"], capture_output=True, text=True, env=env)
        assert p.returncode == -9
        served.append(int(p.stdout.split()[0]))
    assert served == [2, 2, 1], "two launches keep version 2, the third rolls back to the good version 1"
    with assetpatch.Client(data) as c:
        assert c.current_version == 1 and c.lifecycle.launches == 0
        assert "crash loop" in c.lifecycle.last_rollback.reason


COUNTING_APP = """
import sys
import assetpatch
for _ in range(int(sys.argv[2])):
    assetpatch.Client(sys.argv[1]).close()
"""


def test_processes_opening_at_once_never_lose_a_launch(tmp_path, base_url):
    data = str(tmp_path / "data")
    with assetpatch.Client(data, manifest_url=f"{base_url}/v1/manifest.json", max_failed_launches=1000) as c:
        assert c.update() is True
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs = [subprocess.Popen([sys.executable, "-c", COUNTING_APP, data, "25"], env=env) for _ in range(4)]
    assert all(p.wait(120) == 0 for p in procs)
    with assetpatch.Client(data) as c:
        assert c.lifecycle.launches == 4 * 25 + 1 and c.current_version == 1


def test_resolve_fast_path_every_case_and_threads(tmp_path):
    """resolve's inline path (one result buffer per thread, no argtypes) against the slow path's
    cases: paths longer than the first buffer, NUL in a name, a closed client, variants."""
    bundle = tmp_path / "bundle"
    long_name = "/".join(["d" * 200] * 6) + "/deep.txt"            # a path over 1,200 bytes
    files = {long_name: b"deep", "img/icon@2x.png": b"2x", "img/icon.png": b"1x"}
    for i in range(200):
        files[f"many/{i:03}.txt"] = str(i).encode()
    for name, data in files.items():
        (bundle / name).parent.mkdir(parents=True, exist_ok=True)
        (bundle / name).write_bytes(data)
    with assetpatch.Client(tmp_path / "data", bundle, variants=("@3x", "@2x", "")) as c:
        assert read(c.resolve(long_name)) == b"deep" and len(c.resolve(long_name)) > 1200
        assert read(c.resolve("many/007.txt")) == b"7", "short after long: the grown buffer still works"
        assert c.resolve_variant("img/icon.png") == (str(bundle / "img/icon@2x.png"), 1)
        assert read(c.resolve("img/icon.png")) == b"2x"
        with pytest.raises(assetpatch.ArgumentError):
            c.resolve("many/001.txt\0../x")
        with pytest.raises(assetpatch.NotFoundError):
            c.resolve("many/999.txt")

        errors = []

        def worker(seed):
            try:
                for k in range(3000):
                    i = (seed * 7 + k) % 200
                    path = c.resolve(f"many/{i:03}.txt")
                    assert path.endswith(f"/many/{i:03}.txt"), path
                    if k % 500 == 0:
                        assert c.resolve(long_name).endswith("/deep.txt")
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
    with pytest.raises(assetpatch.StateError):
        c.resolve("many/001.txt")


def test_an_older_manifest_is_no_update_and_says_why(tmp_path, base_url):
    # A stale cache edge serving an older manifest: not an error, and the host can tell why.
    with assetpatch.Client(tmp_path / "data", manifest_url=f"{base_url}/v2/manifest.json") as c:
        assert c.last_check is None
        assert c.update() is True
        # source 0: the head came from manifest_url (there are no mirrors).
        assert c.last_check == assetpatch.CheckOutcome(assetpatch.Status.OK, None, 2, 0, "stable", source=0)
        assert c.sources() == []
        c.set("manifest_url", f"{base_url}/v1/manifest.json")
        assert c.check() is None
        assert c.update() is False and c.current_version == 2
        outcome = c.last_check
        assert outcome.status is assetpatch.Status.NO_UPDATE and outcome.reason is assetpatch.NoUpdateReason.OLDER
        assert (outcome.manifest_version, outcome.accepted_version) == (1, 2)
        c.set("manifest_url", f"{base_url}/v2/manifest.json")
        assert c.update() is False and c.last_check.reason is assetpatch.NoUpdateReason.CURRENT


def _cli(*args):
    return subprocess.run([CLI, *map(str, args)], check=True, capture_output=True, text=True).stdout


def test_rollouts_and_channels_through_python(tmp_path):
    # A staged rollout at 50%: a client inside takes it, one outside is told why, with its
    # bucket as the documented formula gives it; a beta client moving to stable waits until it
    # names the channel.
    src, repo = tmp_path / "src", tmp_path / "repo"
    src.mkdir()
    (src / "a.txt").write_text("one")
    _cli("publish", src, "--repo", repo, "--package", "py")
    (src / "a.txt").write_text("two")
    _cli("publish", src, "--repo", repo, "--rollout", "50")

    def bucket(rid):
        return int.from_bytes(hashlib.sha256(f"py/2/{rid}".encode()).digest()[:8], "big") % 10000

    ids = [f"c{i}" for i in range(200)]
    inside = next(i for i in ids if bucket(i) < 5000)
    outside = next(i for i in ids if bucket(i) >= 5000)
    url = (repo / "head.json").as_uri()
    with assetpatch.Client(tmp_path / "in", manifest_url=url, rollout_id=inside) as c:
        assert c.update() is True and c.current_version == 2
        info = c.release_info()
        assert info.channel == "stable" and info.rollout_percent == 50.0
    with assetpatch.Client(tmp_path / "out", manifest_url=url, rollout_id=outside) as c:
        assert c.update() is False and c.current_version == 0
        o = c.last_check
        assert o.reason is assetpatch.NoUpdateReason.NOT_IN_ROLLOUT
        assert (o.channel, o.rollout_percent, o.rollout_bucket) == ("stable", 50.0, bucket(outside))

    (src / "a.txt").write_text("three")
    _cli("publish", src, "--repo", repo, "--channel", "beta")
    with assetpatch.Client(tmp_path / "beta", manifest_url=(repo / "channels" / "beta" / "head.json").as_uri()) as c:
        assert c.update() is True and c.current_version == 3 and c.release_info().channel == "beta"
        c.set("manifest_url", url)
        c.set("rollout_id", inside)
        with pytest.raises(assetpatch.ManifestError, match="follows channel"):
            c.update()  # the client follows beta until its host names another channel
        c.set("channel", "stable")
        assert c.update() is True and c.current_version == 2
        with open(c.resolve("a.txt")) as f:
            assert f.read() == "two"
