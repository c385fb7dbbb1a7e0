"""The release manager's tools, through the CLI: --dry-run changes nothing in the repository
(byte for byte), a rollback release installs an earlier version's content as the next version,
and `plan` says what a client on an earlier version would fetch, as the client itself does."""
import hashlib
import json
import os
import shutil

import assetpatch
from conftest import make_tree, release_files
from trust import cli, keygen, publish


def snapshot(path):
    out = {}
    for d, _, files in os.walk(path):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, path)] = (open(p, "rb").read(), os.stat(p).st_mtime_ns)
    return out


def test_dry_runs_change_nothing(tmp_path):
    repo, src, key = tmp_path / "repo", tmp_path / "src", tmp_path / "k.key"
    keygen(key)
    publish(src, repo, "one", "--package", "dry", "--key", key)
    publish(src, repo, "beta two", "--channel", "beta", "--key", key)
    before = snapshot(repo)
    make_tree(src, {"level.txt": b"three"})
    out = cli("publish", src, "--repo", repo, "--key", key, "--dry-run").stdout
    assert "would have published dry version 3" in out, out
    out = cli("promote", "--repo", repo, "--from", "beta", "--to", "stable", "--key", key, "--dry-run").stdout
    assert out.startswith("would: channel stable offers dry version 2"), out
    assert "would:" in cli("rollout", "--repo", repo, "--halt", "--key", key, "--dry-run").stdout
    assert "would:" in cli("resign", "--repo", repo, "--key", key, "--dry-run").stdout
    assert "would:" in cli("rollback-release", "--repo", repo, "--to", "1", "--key", key, "--dry-run").stdout
    assert snapshot(repo) == before
    # A dry run still refuses what the real command would.
    r = cli("promote", "--repo", repo, "--from", "stable", "--to", "beta", "--key", key, "--dry-run", check=False)
    assert r.returncode == 3


def test_a_rollback_release_installs_the_earlier_content_as_the_next_version(tmp_path):
    repo, src, key = tmp_path / "repo", tmp_path / "src", tmp_path / "k.key"
    pub = keygen(key)
    publish(src, repo, "good", "--package", "back", "--key", key)
    publish(src, repo, "bad", "--key", key)
    with assetpatch.Client(tmp_path / "data", manifest_url=f"file://{repo}/head.json", public_keys=[pub]) as c:
        assert c.update() is True and open(c.resolve("level.txt")).read() == "bad"
        out = cli("rollback-release", "--repo", repo, "--to", "1", "--key", key).stdout
        assert "offers version 3 carrying version 1's archive" in out, out
        assert c.update() is True and c.current_version == 3 and open(c.resolve("level.txt")).read() == "good"
    m1 = json.load(open(repo / "history" / "1" / "manifest.json"))
    m3 = json.load(open(repo / "history" / "3" / "manifest.json"))
    assert m3["archive"] == m1["archive"] and m3["version"] == 3
    assert json.load(open(repo / "history" / "3" / "channels.json"))["channels"] == ["stable"]


def bucket(package, version, rollout_id):
    return int.from_bytes(hashlib.sha256(f"{package}/{version}/{rollout_id}".encode()).digest()[:8], "big") % 10000


def test_plan_says_what_a_client_would_fetch(tmp_path):
    repo, src = tmp_path / "repo", tmp_path / "src"
    files = release_files(5, 16, 50_000)
    make_tree(src, files)
    cli("publish", src, "--repo", repo, "--package", "plan")
    shutil.copytree(repo, tmp_path / "as-of-1")
    name = next(n for n in files if n.endswith(".bin"))
    make_tree(src, {name: os.urandom(50_000)})
    cli("publish", src, "--repo", repo, "--rollout", "50")
    inside = next(f"id-{i}" for i in range(1000) if bucket("plan", 2, f"id-{i}") < 5000)
    outside = next(f"id-{i}" for i in range(1000) if bucket("plan", 2, f"id-{i}") >= 5000)
    url = f"file://{repo}/manifest.json"
    for rid, takes in ((inside, True), (outside, False)):
        plan = json.loads(cli("plan", "--repo", repo, "--from", "1", "--rollout-id", rid, "--json").stdout)
        assert plan["takes"] is takes and plan["rollout"]["bucket"] == bucket("plan", 2, rid), plan
        data = tmp_path / f"data-{rid}"
        cli("update", "--data-dir", data, "--url", f"file://{tmp_path}/as-of-1/manifest.json")
        r = cli("check", "--data-dir", data, "--url", url, "--rollout-id", rid, "--json", check=False)
        check = json.loads(r.stdout)
        assert check["current_version"] == 1 and (check["status"] == "available") is takes, check
        if takes:
            assert plan["files"] == 1 and plan["fetch_bytes"] == check["next"]["transfer_bytes"], (plan, check)
    whole = json.loads(cli("plan", "--repo", repo, "--from", "0", "--json").stdout)
    assert whole["files"] == len(files) and whole["fetch_bytes"] <= whole["archive_bytes"]
