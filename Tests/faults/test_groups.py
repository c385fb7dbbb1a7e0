"""Content on demand: groups published, installed without their on-demand groups, fetched by
range from the served release's own archive, resolved only when complete, evicted, pinned,
held to a quota, moved forward by updates, resumed after kill -9, and refused when a host
changes their bytes. Bytes are counted from what the client asked the server for."""
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

import assetpatch
from conftest import CLI, FaultServer, make_tree, sha256_file

KEY_FILES = 12


def level_files(seed, level, count=KEY_FILES, size=30_000):
    rnd = random.Random(seed * 1000 + level)
    return {f"levels/{level}/{i:02}.bin": rnd.randbytes(size) for i in range(count)}


def tree(seed):
    files = {"base/readme.txt": f"release {seed}\n".encode(), "ui/button.png": random.Random(seed).randbytes(9_000)}
    for level in (1, 2, 3):
        files.update(level_files(seed if level == 1 else 1, level))
    files["lang/fr/strings.txt"] = ("bonjour\n" * 2000).encode()
    files["lang/de/strings.txt"] = ("hallo\n" * 2000).encode()
    return files


GROUP_ARGS = ["--group", "level1=levels/1/*", "--group", "level2=levels/2/*", "--group", "level3=levels/3/*",
              "--group", "fr=lang/fr/*", "--group", "de=lang/de/*", "--install-group", "ui=ui/*"]


def publish(src, repo, version, files):
    shutil.rmtree(src, ignore_errors=True)
    make_tree(src, files)
    out = subprocess.run([CLI, "publish", str(src), "--repo", str(repo), "--package", "groups", "--version", str(version),
                          "--json", *GROUP_ARGS], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def locations(repo):
    """Each file's bytes in the archive (local header to data end), from the format-1 manifest."""
    with open(os.path.join(repo, "manifest.json")) as f:
        m = json.load(f)
    return {e["path"]: (e["zip"]["header_offset"], e["zip"]["data_offset"] + e["zip"]["compressed_size"]) for e in m["files"]}


def asked(server):
    """The archive ranges the client asked for: (start, end exclusive)."""
    return [(e["start"], e["end"] + 1) for e in server.stats()["archive_log"]]


def overlaps(ranges, span):
    return any(a < span[1] and span[0] < b for a, b in ranges)


@pytest.fixture
def site(tmp_path):
    """A repository with groups served by the fault server: v1 published; `republish` adds v2."""
    root = tmp_path / "site"
    root.mkdir()
    published = publish(tmp_path / "src", root / "repo", 1, tree(1))
    server = FaultServer(str(root), str(tmp_path))

    class Site:
        pass
    s = Site()
    s.server, s.repo, s.groups = server, str(root / "repo"), {g["name"]: g for g in published["groups"]}
    s.url = f"{server.base}/repo/head.json"
    s.files = tree(1)
    s.tmp = tmp_path

    def republish(files):
        s.files = files
        s.groups = {g["name"]: g for g in publish(tmp_path / "src", root / "repo", 2, files)["groups"]}
    s.republish = republish
    yield s
    server.stop()


def client(site, name="data", **options):
    return assetpatch.Client(str(site.tmp / name), manifest_url=site.url, **options)


def assert_local(c, files, prefix):
    for path, data in files.items():
        if path.startswith(prefix):
            assert sha256_file(c.resolve(path)) == hashlib.sha256(data).hexdigest(), path


def assert_not_local(c, files, prefix, group):
    for path in files:
        if path.startswith(prefix):
            with pytest.raises(assetpatch.NotLocalError) as e:
                c.resolve(path)
            assert e.value.group == group


def test_publish_lists_groups_with_their_counts(site):
    g = site.groups
    assert set(g) == {"level1", "level2", "level3", "fr", "de", "ui"}
    assert g["level1"]["files"] == KEY_FILES and g["level1"]["bytes"] == KEY_FILES * 30_000
    assert g["ui"]["delivery"] == "install" and g["fr"]["delivery"] == "on_demand"
    spans = locations(site.repo)
    stored = sum(b - a for p, (a, b) in spans.items() if p.startswith("levels/1/"))
    assert g["level1"]["archive_bytes"] == stored


def test_first_install_moves_the_base_and_install_groups_only(site):
    site.server.reset()
    with client(site) as c:
        assert c.update() is True
        assert_local(c, site.files, "base/")
        assert_local(c, site.files, "ui/")
        assert_not_local(c, site.files, "levels/2/", "level2")
        assert_not_local(c, site.files, "lang/fr/", "fr")
        states = {g.name: g.state for g in c.groups()}
        assert states == {"level1": "absent", "level2": "absent", "level3": "absent", "fr": "absent", "de": "absent", "ui": "local"}
    spans = locations(site.repo)
    ranges = asked(site.server)
    for path, span in spans.items():
        if path.startswith(("levels/", "lang/")):
            assert not overlaps(ranges, span), f"{path} was asked for"
    wanted = sum(b - a for p, (a, b) in spans.items() if p.startswith(("base/", "ui/")))
    index = sum(b - a for a, b in ranges) - wanted
    assert 0 <= index < 4096, f"{index} bytes besides the files: the head's index pages"
    assert not os.path.exists(os.path.join(site.tmp, "data", "releases", os.listdir(site.tmp / "data" / "releases")[0], "groups"))


def test_a_fetched_group_moves_its_bytes_and_resolves_byte_identical(site):
    with client(site) as c:
        c.update()
        site.server.reset()
        c.fetch_groups(["level2"])
        assert_local(c, site.files, "levels/2/")
        assert_not_local(c, site.files, "levels/3/", "level3")
        info = c.group("level2")
        assert (info.state, info.local_bytes, info.files) == ("local", KEY_FILES * 30_000, KEY_FILES)
    ranges = asked(site.server)
    spans = locations(site.repo)
    group = [s for p, s in spans.items() if p.startswith("levels/2/")]
    moved = sum(b - a for a, b in ranges)
    assert moved >= sum(b - a for a, b in group)
    assert moved <= sum(b - a for a, b in group) + 8192, "the group's bytes and at most a page of index"
    for path, span in spans.items():
        if not path.startswith("levels/2/"):
            assert not overlaps(ranges, span), f"{path} was asked for"


def test_fetch_bytes_is_what_the_fetch_then_transfers(site, tmp_path):
    """`fetch_bytes` is planned as the fetch plans: the archive bytes of a group's files not on
    disk. Two files of level3 are in the bundle at other paths: neither is counted nor fetched."""
    spans = locations(site.repo)
    bundle = tmp_path / "bundle"
    make_tree(bundle, {"old/a.bin": site.files["levels/3/00.bin"], "old/b.bin": site.files["levels/3/05.bin"]})
    with assetpatch.Client(str(tmp_path / "data"), str(bundle), manifest_url=site.url) as c:
        c.update()
        for name, prefix, kept in (("level2", "levels/2/", ()), ("level3", "levels/3/", ("levels/3/00.bin", "levels/3/05.bin"))):
            info = c.group(name)
            whole = sum(b - a for p, (a, b) in spans.items() if p.startswith(prefix))
            assert info.archive_bytes == whole
            kept_bytes = sum(spans[p][1] - spans[p][0] for p in kept)
            # level2's files lie together in the archive: one range, no gap; level3's two
            # holes are wider than any gap a range bridges.
            assert info.fetch_bytes == whole - kept_bytes, (name, info.fetch_bytes, whole, kept_bytes)
            site.server.reset()
            c.fetch_groups([name])
            ranges = asked(site.server)
            for p in kept:
                assert not overlaps(ranges, spans[p]), f"{p} was fetched though the bundle has it"
            moved = sum(b - a for a, b in ranges)
            assert info.fetch_bytes <= moved <= info.fetch_bytes + 8192, "its bytes and at most a page of chunk lists"
            assert c.group(name).fetch_bytes == 0, "local: nothing to fetch"
            assert_local(c, site.files, prefix)


def test_a_second_client_sees_the_group_another_fetched_without_transfer(site):
    with client(site) as a:
        a.update()
        with client(site) as b:
            a.fetch_groups("fr")
            site.server.reset()
            with pytest.raises(assetpatch.NotLocalError):
                b.resolve("lang/fr/strings.txt")  # b's view is its own until it asks
            b.fetch_groups("fr")
            assert asked(site.server) == [], "taken as it is on disk"
            assert_local(b, site.files, "lang/fr/")


def test_the_bundle_never_stands_in_for_a_group_not_on_disk(site, tmp_path):
    bundle = tmp_path / "bundle"
    make_tree(bundle, {"levels/1/00.bin": b"the old level shipped with the app", "base/readme.txt": b"old"})
    with assetpatch.Client(str(tmp_path / "data"), str(bundle), manifest_url=site.url, variants="@2x,") as c:
        assert c.resolve("levels/1/00.bin") == str(bundle / "levels/1/00.bin"), "before the update the bundle serves it"
        c.update()
        with pytest.raises(assetpatch.NotLocalError):
            c.resolve("levels/1/00.bin")
        c.fetch_groups("level1")
        assert sha256_file(c.resolve("levels/1/00.bin")) == hashlib.sha256(site.files["levels/1/00.bin"]).hexdigest()


def test_an_update_moves_local_groups_forward_and_leaves_the_others_absent(site):
    with client(site) as c:
        c.update()
        c.fetch_groups(["level1", "fr"])
        v2 = dict(site.files)
        v2.update(level_files(2, 1))          # level 1 changes entirely
        v2.update({k: v[::-1] for k, v in level_files(1, 2).items()})  # level 2 changes, and is not local
        v2["base/readme.txt"] = b"release 2\n"
        site.republish(v2)
        site.server.reset()
        expected = c.check()
        assert c.update() is True
        assert c.current_version == 2
        assert_local(c, v2, "levels/1/")
        assert_local(c, v2, "lang/fr/")
        assert_not_local(c, v2, "levels/2/", "level2")
        ranges = asked(site.server)
    spans = locations(site.repo)
    for path, span in spans.items():
        if path.startswith(("levels/2/", "levels/3/")):
            assert not overlaps(ranges, span), f"{path} was asked for: not local"
    files_moved = sum(b - a for p, (a, b) in spans.items() if p.startswith("levels/1/") or p == "base/readme.txt")
    # Ranges may join the few bytes between wanted files (docs/format.md: at most 1/20 of them).
    assert files_moved <= expected[1] <= files_moved * 21 // 20 + 4096, "check plans the changed files of local groups"
    moved = sum(b - a for a, b in ranges)
    assert files_moved <= moved <= expected[1] + 4096, "the update moves what check planned, and the index pages"


def test_the_groups_option_installs_its_groups_with_every_update(site):
    with client(site, groups="de,level3") as c:
        c.update()
        assert_local(c, site.files, "lang/de/")
        assert_local(c, site.files, "levels/3/")
        assert_not_local(c, site.files, "levels/1/", "level1")


def test_an_evicted_group_is_gone_and_comes_back_byte_identical(site):
    with client(site) as c:
        c.update()
        c.fetch_groups("level3")
        release = os.path.dirname(os.path.dirname(c.resolve("levels/3/00.bin")))
        c.evict_group("level3")
        assert not os.path.exists(os.path.join(release, "level3")), "deleted: no other client serves it"
        assert_not_local(c, site.files, "levels/3/", "level3")
        assert c.group("level3").state == "absent"
        c.fetch_groups("level3")
        assert_local(c, site.files, "levels/3/")
    with client(site) as again:
        assert again.group("level3").state == "local", "the state lists it for the next open"


def test_an_eviction_leaves_the_files_another_client_serves(site):
    with client(site) as a:
        a.update()
        a.fetch_groups("level2")
        path = a.resolve("levels/2/00.bin")
        with client(site) as b:
            assert b.group("level2").state == "local"
            b.evict_group("level2")
            assert_not_local(b, site.files, "levels/2/", "level2")
            assert os.path.exists(path), "a serves it: the files stay"
            assert sha256_file(a.resolve("levels/2/00.bin")) == hashlib.sha256(site.files["levels/2/00.bin"]).hexdigest()
        a.close()
    with client(site) as c:  # the next open's clean-up removes them
        assert not os.path.exists(path)
        assert c.group("level2").state == "absent"


def test_the_quota_evicts_the_least_recently_used_unpinned_group(site):
    size = KEY_FILES * 30_000
    with client(site, group_quota_bytes=2 * size + 1000) as c:
        c.update()
        c.fetch_groups("level1")
        c.pin_group("level1")
        c.fetch_groups("level2")
        c.fetch_groups("level3")  # level2 goes: level1 is pinned
        states = {g.name: (g.state, g.pinned) for g in c.groups() if g.name.startswith("level")}
        assert states == {"level1": ("local", True), "level2": ("absent", False), "level3": ("local", False)}
        c.pin_group("level3")
        with pytest.raises(assetpatch.QuotaError):
            c.fetch_groups("level2")
        assert c.group("level2").state == "absent"
        assert_local(c, site.files, "levels/1/")
        assert_local(c, site.files, "levels/3/")


def test_a_group_whose_bytes_a_host_changed_is_refused_and_stays_absent(site):
    spans = locations(site.repo)
    start, end = spans["levels/2/05.bin"]
    archive = [os.path.join(site.repo, "archives", n) for n in os.listdir(os.path.join(site.repo, "archives"))][0]
    with client(site) as c:
        c.update()
        with open(archive, "r+b") as f:  # a CDN edge serving other bytes for this file
            f.seek(end - 100)
            byte = f.read(1)
            f.seek(end - 100)
            f.write(bytes([byte[0] ^ 0xFF]))
        with pytest.raises(assetpatch.IntegrityError):
            c.fetch_groups("level2")
        assert_not_local(c, site.files, "levels/2/", "level2")
        assert c.group("level2").state == "absent"


def test_install_groups_and_unknown_groups(site):
    with client(site) as c:
        c.update()
        with pytest.raises(assetpatch.ArgumentError):
            c.evict_group("ui")
        with pytest.raises(assetpatch.NotFoundError):
            c.fetch_groups("level9")
        with pytest.raises(assetpatch.NotFoundError):
            c.group("level9")
        c.fetch_groups("ui")  # always on disk: nothing to do


def test_a_fetch_killed_mid_way_resumes_without_fetching_kept_files_again(site):
    data = site.tmp / "data"
    with client(site) as c:
        c.update()
    site.server.reset()
    site.server.control("normal", rate=60_000)  # slow enough to be killed mid-way
    child = subprocess.Popen([CLI, "group", "fetch", "--data-dir", str(data), "level1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kept_dir = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        groups = data / "downloads" / "groups"
        dirs = [d for d in (os.listdir(groups) if groups.exists() else []) if not d.endswith(".lock")]
        # The fetch makes its directory, then files/ in it: polled between the two, files/ is
        # not there yet.
        files = groups / dirs[0] / "files" if dirs else None
        if files is not None and files.is_dir() and len(os.listdir(files)) >= 3:
            kept_dir = files
            break
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert kept_dir is not None, "the fetch kept files before the kill"
    kept = set(os.listdir(kept_dir))
    site.server.control("normal")
    site.server.reset()
    with client(site) as c:
        assert_not_local(c, site.files, "levels/1/", "level1")
        c.fetch_groups("level1")
        assert_local(c, site.files, "levels/1/")
    spans = locations(site.repo)
    ranges = asked(site.server)
    refetched = [p for p, d in site.files.items() if p.startswith("levels/1/") and hashlib.sha256(d).hexdigest() in kept
                 and overlaps(ranges, spans[p])]
    assert refetched == [], f"kept files asked for again: {refetched}"


def test_the_whole_archive_route_installs_the_same_files(site):
    with client(site, differential=False) as c:
        assert c.update() is True
        assert_local(c, site.files, "base/")
        assert_local(c, site.files, "ui/")
        assert_not_local(c, site.files, "levels/1/", "level1")
        c.fetch_groups("level1")
        assert_local(c, site.files, "levels/1/")
    release = os.path.join(site.tmp, "data", "releases")
    on_disk = {os.path.relpath(os.path.join(dp, n), release) for dp, _, ns in os.walk(release) for n in ns}
    assert not [p for p in on_disk if "/levels/2/" in p or "/lang/" in p], "absent groups were extracted"


def bytes_on_disk(*roots):
    """Bytes of the regular files under `roots`, each inode once (a link is not a second copy)."""
    seen, total = set(), 0
    for root in roots:
        for dp, _, names in os.walk(root):
            for n in names:
                try:
                    st = os.lstat(os.path.join(dp, n))
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_size
    return total


def test_a_group_fetch_never_holds_its_chunks_and_the_files_made_of_them_together(tmp_path):
    """Files from 64 KiB are fetched as chunks and rebuilt: each chunk is dropped once the last
    file taking it is rebuilt, so a group's fetch holds about one copy of the group, not its
    chunks and its files both (which doubled what a quota lets an app keep on disk). Sampled
    at every progress report of the fetch, the final one included."""
    rnd = random.Random(7)
    shared = rnd.randbytes(200_000)
    big = {f"levels/1/{i:02}.bin": rnd.randbytes(300_000) for i in range(8)}
    big["levels/1/twin-a.bin"] = shared + rnd.randbytes(100_000)  # chunks in common: rebuilt, not fetched whole
    big["levels/1/twin-b.bin"] = shared + rnd.randbytes(120_000)
    files = {"base/readme.txt": b"base\n", **big}
    root = tmp_path / "site"
    make_tree(tmp_path / "src", files)
    subprocess.run([CLI, "publish", str(tmp_path / "src"), "--repo", str(root / "repo"), "--package", "groups", "--version", "1",
                    "--group", "level1=levels/1/*"], check=True, capture_output=True)
    server = FaultServer(str(root), str(tmp_path))
    try:
        data = tmp_path / "data"
        group_bytes = sum(len(d) for d in big.values())
        samples = []
        with assetpatch.Client(str(data), manifest_url=f"{server.base}/repo/head.json") as c:
            c.update()
            downloads = data / "downloads" / "groups"
            release = os.path.dirname(os.path.dirname(c.resolve("base/readme.txt")))

            def sample(p):
                samples.append((p.phase, bytes_on_disk(downloads, os.path.join(release, "groups"))))
            c.fetch_groups("level1", progress=sample)
            assert_local(c, files, "levels/1/")
        rebuilding = [b for phase, b in samples if phase == assetpatch.Phase.INSTALL]
        assert rebuilding, "the fetch reported its install"
        # One copy of the group, and the chunk lists' and a file's worth of slack: never two.
        assert max(b for _, b in samples) <= group_bytes + 300_000, (max(b for _, b in samples), group_bytes)
        assert max(rebuilding) >= group_bytes * 0.9  # the samples saw the group built
        assert not os.path.exists(downloads) or bytes_on_disk(downloads) == 0
    finally:
        server.stop()


def test_a_group_larger_than_the_quota_is_refused(site):
    with client(site, group_quota_bytes=KEY_FILES * 30_000 - 1) as c:
        c.update()
        with pytest.raises(assetpatch.QuotaError):
            c.fetch_groups("level1")
        assert c.group("level1").state == "absent"
        c.fetch_groups("fr")  # a small one fits
        assert_local(c, site.files, "lang/fr/")


def test_an_update_to_the_first_release_with_groups_keeps_what_the_player_had(site, tmp_path):
    """A release from before groups had every file; a group that was installed with every
    update becomes on-demand; a group is renamed: content on disk stays on disk."""
    plain = tmp_path / "plain"
    files = tree(1)
    make_tree(tmp_path / "plain-src", files)
    subprocess.run([CLI, "publish", str(tmp_path / "plain-src"), "--repo", str(plain), "--package", "groups", "--version", "1",
                    "--install-group", "level1=levels/1/*"], check=True, stdout=subprocess.DEVNULL)
    with assetpatch.Client(str(tmp_path / "d"), manifest_url=f"file://{plain}/head.json") as c:
        c.update()
        assert_local(c, files, "levels/2/")
    shutil.copytree(tmp_path / "plain-src", tmp_path / "v2-src")
    with open(tmp_path / "v2-src" / "base" / "readme.txt", "wb") as f:
        f.write(b"release 2\n")
    subprocess.run([CLI, "publish", str(tmp_path / "v2-src"), "--repo", str(plain), "--package", "groups", "--version", "2",
                    "--group", "world1=levels/1/*", "--group", "level2=levels/2/*", "--group", "level3=levels/3/*"],
                   check=True, stdout=subprocess.DEVNULL)
    with assetpatch.Client(str(tmp_path / "d"), manifest_url=f"file://{plain}/head.json") as c:
        assert c.update() is True
        assert c.current_version == 2
        assert_local(c, files, "levels/1/")  # was an install group named level1: now world1, on demand
        assert_local(c, files, "levels/2/")  # the release before had no such group: it had the files
        assert {g.name: g.state for g in c.groups()} == {"world1": "local", "level2": "local", "level3": "local"}


def test_a_fetch_that_cannot_fit_evicts_nothing(site):
    size = KEY_FILES * 30_000
    with client(site, group_quota_bytes=2 * size + 1000) as c:
        c.update()
        c.fetch_groups(["level1", "fr"])
        c.pin_group("level1")
        c.set("group_quota_bytes", str(size + 1000))
        with pytest.raises(assetpatch.QuotaError):
            c.fetch_groups("level2")  # level1 is pinned: no eviction makes room
        assert c.group("fr").state == "local", "nothing evicted for a fetch that fails"


def test_a_group_gone_from_disk_is_listed_no_more_and_fetched_again(site):
    with client(site) as c:
        c.update()
        c.fetch_groups("level2")
        group_dir = os.path.dirname(os.path.dirname(os.path.dirname(c.resolve("levels/2/00.bin"))))
        assert os.path.basename(group_dir) == "level2"
    shutil.rmtree(group_dir)  # a file system that lost it, a user deleting it
    with client(site) as c:
        assert c.group("level2").state == "absent"
        c.fetch_groups("level2")
        assert_local(c, site.files, "levels/2/")


def test_a_release_whose_every_file_is_in_a_group_installs_nothing_and_downloads_nothing(site, tmp_path):
    src, repo = tmp_path / "all-src", tmp_path / "all-repo"
    make_tree(src, {"g1/a.bin": os.urandom(50_000), "g2/b.bin": os.urandom(50_000)})
    subprocess.run([CLI, "publish", str(src), "--repo", str(repo), "--package", "all", "--group", "g1=g1/*", "--group", "g2=g2/*"],
                   check=True, stdout=subprocess.DEVNULL)
    with assetpatch.Client(str(tmp_path / "d"), manifest_url=f"file://{repo}/head.json") as c:
        assert c.check()[1] < 4096, "no archive download planned: the index pages only"
        assert c.update() is True
        with pytest.raises(assetpatch.NotLocalError):
            c.resolve("g1/a.bin")
        c.fetch_groups("g1")
        assert open(c.resolve("g1/a.bin"), "rb").read() == open(src / "g1" / "a.bin", "rb").read()


def test_a_bundle_copy_with_the_same_sha256_counts_as_local(site, tmp_path):
    bundle = tmp_path / "bundle"
    same, other = site.files["levels/1/00.bin"], b"an older level 1 tile"
    make_tree(bundle, {"levels/1/00.bin": same, "levels/1/01.bin": other})
    time.sleep(2.1)  # past the bundle digests' racy window (BundleDigests.racyWindowNs): digests get cached
    with assetpatch.Client(str(tmp_path / "data"), str(bundle), manifest_url=site.url) as c:
        c.update()
        assert c.resolve("levels/1/00.bin") == str(bundle / "levels/1/00.bin"), "the identical bundle copy serves it"
        with pytest.raises(assetpatch.NotLocalError):
            c.resolve("levels/1/01.bin")  # the bundle's copy is not the release's
    with open(bundle / "levels/1/00.bin", "ab") as f:
        f.write(b"changed by an app upgrade")  # its fingerprint moves: no longer vouched for
    with assetpatch.Client(str(tmp_path / "data"), str(bundle)) as c:
        with pytest.raises(assetpatch.NotLocalError):
            c.resolve("levels/1/00.bin")
