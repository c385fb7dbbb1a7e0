"""What a new user meets first, black-box: a development host without Range support (Python's
http.server), where a check and `status --url` must move no archive byte and leave nothing
behind; the scripting contract of the CLI (exit codes and --json per outcome); rollouts that
say what they change; the first publish naming its package."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest

import assetpatch
from conftest import ROOT, make_tree, release_files
from trust import cli, keygen, publish

sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import free_port  # noqa: E402


@pytest.fixture
def http_server(tmp_path):
    """`python3 -m http.server` on 127.0.0.1 serving tmp_path/www: it ignores Range headers."""
    root = tmp_path / "www"
    root.mkdir()
    port = free_port()
    log = open(tmp_path / "http.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(root), str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.02)
    yield {"root": root, "url": f"http://127.0.0.1:{port}", "log": tmp_path / "http.log"}
    proc.terminate()
    proc.wait()
    log.close()


def tree(path):
    """Every file under `path` with its size."""
    out = {}
    for d, _, files in os.walk(path):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, path)] = os.path.getsize(p)
    return out


def archive_gets(log):
    return [line for line in open(log).read().splitlines() if "GET /repo/archives/" in line]


def test_a_check_moves_no_archive_bytes_from_a_host_without_ranges(tmp_path, http_server):
    repo, src = http_server["root"] / "repo", tmp_path / "src"
    make_tree(src, release_files(1, 12, 200_000))
    cli("publish", src, "--repo", repo, "--package", "dev")
    url = f"{http_server['url']}/repo/head.json"
    with assetpatch.Client(tmp_path / "data", manifest_url=url) as c:
        assert c.update() is True and c.current_version == 1
    make_tree(src, release_files(2, 12, 200_000))
    cli("publish", src, "--repo", repo)
    size = json.loads(open(repo / "manifest.json").read())["archive"]["size"]
    gets = len(archive_gets(http_server["log"]))
    with assetpatch.Client(tmp_path / "data", manifest_url=url) as c:
        found = c.check()
        # The whole archive is what the update would transfer: the host cannot serve a plan.
        assert found == (2, size), found
        assert c.current_version == 1
    assert not os.listdir(tmp_path / "data" / "downloads")
    # At most the one index request, whose answer (the whole archive) was cut off at its head.
    assert len(archive_gets(http_server["log"])) - gets <= 1
    out = cli("check", "--data-dir", tmp_path / "data", "--url", url, check=False)
    assert out.returncode == 0 and "does not answer range requests" in out.stdout, out.stdout + out.stderr


def test_status_and_inspect_change_nothing_in_the_data_directory(tmp_path, http_server):
    repo, src = http_server["root"] / "repo", tmp_path / "src"
    make_tree(src, release_files(3, 12, 200_000))
    cli("publish", src, "--repo", repo, "--package", "dev", "--rollout", "100")  # a rollout: the look needs an id
    url = f"{http_server['url']}/repo/head.json"
    data = tmp_path / "fresh"  # opened once, with no rollout id yet: a look must not draw one
    assetpatch.Client(data).close()
    before = tree(data)
    size = json.loads(open(repo / "manifest.json").read())["archive"]["size"]
    out = cli("status", "--data-dir", data, "--url", url, "--json").stdout
    nxt = json.loads(out)["next"]
    assert nxt is None or (nxt["method"] == "whole" and nxt["transfer_bytes"] == size), out
    out = cli("inspect", url, "--data-dir", data).stdout
    assert "whole archive" in out, out
    assert tree(data) == before, (before, tree(data))


def outcome(*args):
    r = cli(*args, "--json", check=False)
    return r.returncode, json.loads(r.stdout)


def test_check_and_update_say_what_happened_in_exit_codes_and_json(tmp_path):
    repo, src, key = tmp_path / "repo", tmp_path / "src", tmp_path / "k.key"
    pub = keygen(key)
    publish(src, repo, "one", "--package", "script", "--key", key)
    data, url = tmp_path / "data", f"file://{repo}/head.json"
    args = ("--data-dir", data, "--url", url, "--public-key", pub)
    code, o = outcome("check", *args)
    assert code == 0 and o["status"] == "available" and o["offered_version"] == 1 and o["next"]["transfer_bytes"] > 0, o
    code, o = outcome("update", *args)
    assert code == 0 and o["status"] == "installed" and o["current_version"] == 1 and o["key_document"] == 0, o
    code, o = outcome("update", *args)
    assert code == 2 and o["status"] == "no_update" and o["reason"] == "current", o
    publish(src, repo, "two", "--key", key, "--rollout", "0")
    code, o = outcome("check", *args)
    assert code == 4 and o["reason"] == "not_in_rollout" and o["rollout"]["percent"] == 0 and 0 <= o["rollout"]["bucket"] < 10000, o
    before = (repo / "head.json").read_bytes()
    cli("rollout", "--repo", repo, "--halt", "--key", key)
    r = cli("update", *args, check=False)
    assert r.returncode == 4 and "halted" in r.stdout, r.stdout
    (repo / "head.json").write_bytes(before)  # a copy signed before the halt: older
    code, o = outcome("update", *args)
    assert code == 5 and o["reason"] == "older" and o["accepted_version"] == 2, o
    cli("rollout", "--repo", repo, "--percent", "100", "--key", key)
    assert outcome("update", *args)[0] == 0
    cli("rollback", "--data-dir", data)
    code, o = outcome("update", *args)
    assert code == 6 and o["reason"] == "bad_version" and o["current_version"] == 1, o
    code, o = outcome("update", "--data-dir", data, "--url", f"file://{tmp_path}/none.json")
    assert code == 3 and o["status"] == "error" and o["error"]["status"] == "ASSETPATCH_ERR_IO", o
    out = json.loads(cli("publish", src, "--repo", repo, "--key", key, "--json").stdout)
    assert out["version"] == 3 and out["signed"] and out["channel"] == "stable" and out["revision"] >= 1 and out["expires"], out
    status = json.loads(cli("status", "--data-dir", data, "--json").stdout)
    assert status["key_documents"] == []


def test_rollout_changes_say_what_they_keep_and_drop(tmp_path):
    repo, src = tmp_path / "repo", tmp_path / "src"
    publish(src, repo, "one", "--package", "roll")
    publish(src, repo, "two", "--rollout", "5", "--rollout-schedule", "1d=20,2d=50,3d=100")
    r = cli("rollout", "--repo", repo, "--percent", "25")
    assert "kept" in r.stderr and "dropped" in r.stderr, r.stderr
    rollout = json.loads(open(repo / "manifest.json").read())["rollout"]
    assert rollout["percent"] == 25 and [s["percent"] for s in rollout["schedule"]] == [50, 100], rollout
    r = cli("rollout", "--repo", repo, "--halt")
    assert "dropped" in r.stderr and "keep it" in r.stderr, r.stderr
    assert "schedule" not in json.loads(open(repo / "manifest.json").read())["rollout"]
    cli("rollout", "--repo", repo, "--percent", "100")
    r = cli("rollout", "--repo", repo, "--percent", "10")
    assert "holds back only those that have not" in r.stderr, r.stderr


def test_the_first_publish_without_a_package_is_warned(tmp_path):
    src, repo = tmp_path / "src", tmp_path / "repo"
    make_tree(src, {"a.txt": b"a"})
    r = cli("publish", src, "--repo", repo)
    assert "--package" in r.stderr, r.stderr
    r = cli("publish", src, "--repo", repo)
    assert "--package" not in r.stderr, r.stderr


def test_a_new_key_document_starts_from_the_previous_one(tmp_path):
    repo, src = tmp_path / "repo", tmp_path / "src"
    for n in ("pinned", "root-a", "root-b", "s1", "s2"):
        keygen(tmp_path / f"{n}.key")
    publish(src, repo, "one", "--package", "carry", "--key", tmp_path / "pinned.key")
    cli("keys", "create", "--repo", repo, "--root-key", tmp_path / "root-a.key.pub", "--root-key", tmp_path / "root-b.key.pub",
        "--root-threshold", "2", "--signing-key", tmp_path / "s1.key.pub")
    for k in ("pinned", "root-a", "root-b"):
        cli("keys", "sign", repo / "keys" / "staged.json", "--key", tmp_path / f"{k}.key")
    cli("keys", "publish", "--repo", repo, "--pinned-key", tmp_path / "pinned.key.pub")
    assert not (repo / "keys" / "staged.json").exists()
    # As the docs say it: only the new signing key; roots and their threshold of 2 carry over.
    out = cli("keys", "create", "--repo", repo, "--signing-key", tmp_path / "s2.key.pub").stdout
    assert "root keys (2 of 2 needed)" in out, out
    # Naming the roots again keeps the threshold; lowering it, or dropping a root, needs --weaken.
    out = cli("keys", "create", "--repo", repo, "--root-key", tmp_path / "root-a.key.pub", "--root-key", tmp_path / "root-b.key.pub",
              "--signing-key", tmp_path / "s2.key.pub").stdout
    assert "root keys (2 of 2 needed)" in out, out
    r = cli("keys", "create", "--repo", repo, "--root-threshold", "1", check=False)
    assert r.returncode == 3 and "root threshold lowered from 2 to 1" in r.stderr and "--weaken" in r.stderr, r.stderr
    r = cli("keys", "create", "--repo", repo, "--root-key", tmp_path / "root-a.key.pub", check=False)
    assert r.returncode == 3 and "--root-threshold 2 (carried over" in r.stderr, r.stderr
    r = cli("keys", "create", "--repo", repo, "--root-key", tmp_path / "root-a.key.pub", "--root-threshold", "1", check=False)
    assert r.returncode == 3 and "dropped" in r.stderr, r.stderr
    out = cli("keys", "create", "--repo", repo, "--root-threshold", "1", "--weaken").stdout
    assert "root threshold 2 -> 1 (LOWERED)" in out, out
