"""assetpatch report, opened in a real headless browser (Debian's chromium): the page renders,
and every figure it shows (channels, signings, the update-cost matrix, the rollout's health per
step, the gate's decision) is the one `report --json` gives; costs agree with `assetpatch plan`."""
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from conftest import CLI
from test_events import cli, head_rollout, publish, run_fleet

CHROMIUM = shutil.which("chromium")


class Figures(HTMLParser):
    """Every element with a data- attribute: (tag, {attr: value}, its text)."""

    def __init__(self):
        super().__init__()
        self.found, self.stack = [], []
        self.polylines = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "polyline":
            self.polylines += 1
        if any(k.startswith("data-") for k in a):
            self.stack.append([tag, a, ""])
        elif self.stack:
            self.stack.append(None)

    def handle_endtag(self, tag):
        if self.stack:
            item = self.stack.pop()
            if item is not None:
                self.found.append(tuple(item))
                if self.stack and self.stack[-1] is not None:
                    self.stack[-1][2] += item[2]

    def handle_data(self, data):
        for item in reversed(self.stack):
            if item is not None:
                item[2] += data
                break


def browse(page, tmp_path):
    """The DOM chromium built from the page, and a screenshot of it."""
    profile = tmp_path / "profile"
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}", "--window-size=1200,2400"]
    dom = subprocess.run(base + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0 and "</html>" in dom.stdout, dom.stderr[-2000:]
    shot = tmp_path / "page.png"
    subprocess.run(base + [f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    return dom.stdout, shot


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (the test command installs it)")
def test_the_report_renders_in_a_browser_with_the_cli_figures(tmp_path):
    cli("keygen", "--out", tmp_path / "k.key")
    cli("keygen", "--out", tmp_path / "root.key")
    pub = open(tmp_path / "k.key.pub").read().strip()
    key = ("--key", tmp_path / "k.key")
    files = {f"levels/{i}.bin": os.urandom(30_000) for i in range(6)}
    repo = publish(tmp_path, 1, files, *key)
    files["levels/2.bin"] = os.urandom(30_000)
    publish(tmp_path, 2, files, *key)
    cli("promote", "--repo", repo, "--from", "stable", "--to", "beta", *key)
    cli("keys", "create", "--repo", repo, "--root-key", tmp_path / "root.key.pub", "--signing-key", tmp_path / "k.key.pub")
    for signer in ("k", "root"):
        cli("keys", "sign", repo / "keys" / "staged.json", "--key", tmp_path / f"{signer}.key")
    cli("keys", "publish", "--repo", repo, "--pinned-key", tmp_path / "k.key.pub")
    files["levels/4.bin"] = os.urandom(30_000)
    files["new.txt"] = b"added in 3"
    publish(tmp_path, 3, files, "--rollout", "40", *key)
    # Devices report: every other one that took it crash-loops.
    export, activated = run_fleet(tmp_path, repo, 30, lambda k: k % 2 == 0, pub)
    assert activated >= 3
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"steps": [40, 100], "min_devices": 4, "max_crash_loop_rate": 0.1}))
    assert cli("rollout", "advance", "--repo", repo, "--events", export, "--policy", policy, *key, check=False).returncode == 4
    assert head_rollout(repo) == {"percent": 0}

    args = ["report", repo, "--events", export, "--policy", policy]
    expected = json.loads(cli(*args, "--json").stdout)
    page = tmp_path / "report.html"
    cli(*args, "--out", page)
    dom, shot = browse(page, tmp_path)
    figures = Figures()
    figures.feed(dom)
    by = lambda key: [a for tag, a, _ in figures.found if key in a]  # noqa: E731

    # Channels: each as --json gives it, the halt shown as one.
    rows = [(a["data-channel"], int(a["data-version"]), a["data-percent"]) for a in by("data-version") if "data-from" not in a
            and "signing" not in a.get("class", "")]
    assert rows == [(c["name"], c["version"], str(c["percent"] if c["percent"] is not None else 100)) for c in expected["channels"]]
    assert ("stable", 3, "0") in rows and ("beta", 2, "100") in rows
    # Every signing, the halt among them, in the table and drawn (one line per channel).
    signings = [a for tag, a, _ in figures.found if a.get("class") == "signing"]
    assert len(signings) == len(expected["signings"]) >= 5 and figures.polylines == 2
    assert signings[0]["data-percent"] == "0"  # newest first: the halt
    # The update-cost matrix: every cell, byte for byte.
    cells = {(int(a["data-from"]), a["data-channel"]): (int(a["data-bytes"]) if a["data-bytes"] else None) for a in by("data-from")}
    assert cells == {(c["from"], c["channel"]): c["bytes"] for c in expected["costs"]}
    assert set(expected["versions"]) == {1, 2, 3} and cells[(3, "stable")] is None and cells[(2, "beta")] is None
    for frm in (0, 1, 2):
        plan = json.loads(cli("plan", "--repo", repo, "--from", frm, "--json").stdout)
        assert cells[(frm, "stable")] == plan["fetch_bytes"] > 0
    assert cells[(1, "stable")] < cells[(0, "stable")]
    # The key chain.
    assert [a["data-key-document"] for a in by("data-key-document")] == ["1"] == [str(k["version"]) for k in expected["keys"]]
    # Rollout health per step, and the gate's decision.
    steps = [(a["data-channel"], a["data-percent"]) for tag, a, _ in figures.found if a.get("class") == "step"]
    want = [(h["channel"], str(h["percent"]) if h["percent"] is not None else "") for h in expected["health"]]
    assert steps == want and ("stable", "40") in steps
    crossed = [a for tag, a, _ in figures.found if a.get("data-rate") == "crash_loop_rate"]
    stable40 = next(h for h in expected["health"] if h["channel"] == "stable" and h["percent"] == 40)
    assert any(int(a["data-failures"]) == stable40["counts"]["crash_loops"] >= 2 for a in crossed)
    assert [(a["data-channel"], a["data-decision"]) for a in by("data-decision")] == \
        [(d["channel"], d["decision"]) for d in expected["decisions"]] and ("stable", "halted") in [
            (d["channel"], d["decision"]) for d in expected["decisions"]]
    # It rendered: a screenshot of real size with more than a blank page's bytes.
    assert shot.exists() and shot.stat().st_size > 20_000
    assert b"IHDR" in open(shot, "rb").read(32)


def test_the_report_of_a_repository_without_a_signing_log_or_keys_says_so(tmp_path):
    repo = publish(tmp_path, 1, {"a.txt": b"one"})
    os.remove(repo / "history" / "signings.jsonl")  # as in a repository published before 0.5
    r = json.loads(cli("report", repo, "--json").stdout)
    assert r["signings"] == [] and r["keys"] == [] and r["health"] == [] and r["costs"][0]["bytes"] > 0
    cli("report", repo, "--out", tmp_path / "r.html")
    page = open(tmp_path / "r.html").read()
    assert "No signing log" in page and "No key documents" in page and "<script" not in page and "http" not in page.split("<body>")[1]
    assert subprocess.run([CLI, "report", tmp_path / "nothing"], capture_output=True).returncode == 3
