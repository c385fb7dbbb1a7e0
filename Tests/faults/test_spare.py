"""The spare tree: a release leaving the store (beyond keep_versions) is not deleted but made a
copy of the new release's files (DATA_DIR/spare/<id>), and the next update builds on it, changing
only what its release changes. What must hold: every release built on a spare is exactly its
files (bytes, and no file or directory more), whatever the releases did to paths (files become
directories and back, directories emptied, files added and removed); a spare is a copy of the
release it names; a spare that can't serve costs only its use; and a kill -9 at any moment of
updates that make and take spares leaves the data directory serving one complete release, and
the next update installs the newest exactly."""
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import time

import pytest

import assetpatch
from conftest import CLI, make_tree


def publish(src, repo, version, options=()):
    subprocess.run([CLI, "publish", src, "--repo", repo, "--package", "spare", "--version", str(version), *options],
                   check=True, stdout=subprocess.DEVNULL)


def update(data, repo, check=True):
    return subprocess.run([CLI, "update", "--data-dir", data, "--url", "file://" + os.path.join(repo, "head.json")],
                          check=check, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def state(data):
    with open(os.path.join(data, "state.json")) as f:
        return json.load(f)


def tree(root):
    """Every file under root by relative path, and every directory (the index excluded)."""
    files, dirs = {}, set()
    for d, subdirs, names in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel == ".":
            # The release index (a file of every release, not of the sources) and nothing more.
            subdirs[:] = [x for x in subdirs if not (x == ".assetpatch" and os.listdir(os.path.join(d, x)) == ["index"])]
        if rel != ".":
            dirs.add(rel)
        for n in names:
            p = os.path.join(d, n)
            files[os.path.normpath(os.path.join(rel, n))] = p
    return files, dirs


def assert_is(release_files, src):
    """The release's files directory holds exactly the source's files and directories."""
    got, got_dirs = tree(release_files)
    want, want_dirs = tree(src)
    assert sorted(got) == sorted(want)
    assert got_dirs == want_dirs
    for rel, p in want.items():
        with open(got[rel], "rb") as a, open(p, "rb") as b:
            assert a.read() == b.read(), rel


def spare(data):
    root = os.path.join(data, "spare")
    names = os.listdir(root) if os.path.isdir(root) else []
    assert len(names) <= 1, names
    return (names[0], os.path.join(root, names[0])) if names else (None, None)


def releases(big=False):
    """Ten releases of 300 small files in nested directories, each changing a few files and
    paths: edits, additions, removals, a file becoming a directory and back, a directory
    emptied, a whole directory removed. `big`: also two 48 KiB packs, one edited in place by
    each release (chunked files)."""
    rnd = random.Random(9)
    v = {f"d{i % 6}/e{i % 4}/f{i:03}.bin": rnd.randbytes(200 + rnd.randrange(400)) for i in range(300)}
    v["top.txt"] = b"top\n"
    if big:
        v.update({f"big/p{k}.bin": rnd.randbytes(48 << 10) for k in range(2)})
    out = [dict(v)]
    steps = [
        lambda v: v.update({"d0/e0/f000.bin": b"edited"}),
        lambda v: (v.pop("d1/e1/f001.bin"), v.update({"new/deep/er/x.txt": b"x"})),
        lambda v: (v.pop("top.txt"), v.update({"top.txt/inside.txt": b"a file became a directory"})),
        lambda v: [v.pop(k) for k in list(v) if k.startswith("d2/")],
        lambda v: (v.pop("top.txt/inside.txt"), v.update({"top.txt": b"and back"})),
        lambda v: [v.update({k: rnd.randbytes(50)}) for k in list(v)[::37]],
        lambda v: v.update({"d2/e0/f002.bin": b"returns"}),
        lambda v: [v.pop(k) for k in list(v) if k.startswith("new/")],
        lambda v: v.update({"d0/e0/f000.bin": out[0]["d0/e0/f000.bin"]}),  # back to v1's bytes
    ]
    for n, step in enumerate(steps):
        step(v)
        if big:
            pack = bytearray(v[f"big/p{n % 2}.bin"])
            pack[n * 3000:n * 3000 + 100] = rnd.randbytes(100)
            v[f"big/p{n % 2}.bin"] = bytes(pack)
        out.append(dict(v))
    return out


def assert_copies(sdir, release):
    """The spare is a copy of the release's files: the same paths and directories, each file
    the same inode."""
    got, got_dirs = tree(os.path.join(sdir, "files"))
    want, want_dirs = tree(release)
    assert sorted(got) == sorted(want) and got_dirs == want_dirs
    for rel in want:
        assert os.stat(got[rel]).st_ino == os.stat(want[rel]).st_ino, rel
    assert sorted(os.listdir(sdir)) == ["files", "release.json"]


@pytest.mark.parametrize("options", [(), ("--chunk-threshold", "16384", "--chunk-size", "4096", "--deltas", "0")], ids=["whole", "chunked"])
def test_every_release_built_on_a_spare_is_exactly_its_files(tmp_path, options):
    work, data, repo = str(tmp_path), str(tmp_path / "data"), str(tmp_path / "repo")
    built_on = 0
    for n, files in enumerate(releases(big=bool(options)), start=1):
        src = os.path.join(work, f"src{n}")
        make_tree(src, files)
        publish(src, repo, n, options)
        before_id, before = spare(data)
        spare_files = os.stat(os.path.join(before, "files")).st_ino if before else None
        update(data, repo)
        active = state(data)["active"]["id"]
        release = os.path.join(data, "releases", active, "files")
        assert_is(release, src)
        if spare_files is not None:
            # Built on the spare: its files directory became the release's.
            assert os.stat(release).st_ino == spare_files, f"release {n} was not built on the spare"
            built_on += 1
        sid, sdir = spare(data)
        if n >= 3:
            # A release left (keep_versions 1): its tree is now a copy of the active release's.
            assert sid == active
            assert_copies(sdir, release)
        else:
            assert sid is None
    assert built_on == 7
    # Nothing a release left behind: two releases and one spare.
    assert len(os.listdir(os.path.join(data, "releases"))) == 2


def test_a_spare_that_cannot_serve_costs_only_its_use(tmp_path):
    work, data, repo = str(tmp_path), str(tmp_path / "data"), str(tmp_path / "repo")
    rs = releases()
    for n, files in enumerate(rs[:4], start=1):
        make_tree(os.path.join(work, f"src{n}"), files)
        publish(os.path.join(work, f"src{n}"), repo, n)
        update(data, repo)
    sid, sdir = spare(data)
    assert sid is not None
    # Its record gone: the update builds without it, and the release is exact (a file no
    # record names, left in the spare, would be in a release built on it).
    os.unlink(os.path.join(sdir, "release.json"))
    with open(os.path.join(sdir, "files", "stray.txt"), "wb") as f:
        f.write(b"in the spare only")
    make_tree(os.path.join(work, "src5"), rs[4])
    publish(os.path.join(work, "src5"), repo, 5)
    update(data, repo)
    release = os.path.join(data, "releases", state(data)["active"]["id"], "files")
    assert_is(release, os.path.join(work, "src5"))
    assert not os.listdir(os.path.join(data, "staging"))
    # A new spare was made, and the next update builds on it again.
    sid, sdir = spare(data)
    assert sid == state(data)["active"]["id"]
    inode = os.stat(os.path.join(sdir, "files")).st_ino
    make_tree(os.path.join(work, "src6"), rs[5])
    publish(os.path.join(work, "src6"), repo, 6)
    update(data, repo)
    release = os.path.join(data, "releases", state(data)["active"]["id"], "files")
    assert os.stat(release).st_ino == inode
    assert_is(release, os.path.join(work, "src6"))
    # A reset drops it with the releases.
    with assetpatch.Client(data) as c:
        c.reset()
    assert spare(data) == (None, None)
    assert not os.path.exists(os.path.join(data, "spare.old"))


def test_a_damaged_release_leaving_leaves_no_hole_in_the_spare(tmp_path):
    """A kept release whose files were removed or replaced behind the library's back (a
    cleaner, a user) leaves: the spare made from it takes those files from the new release,
    so the release built on it next is complete."""
    work, data, repo = str(tmp_path), str(tmp_path / "data"), str(tmp_path / "repo")
    rs = releases()
    for n in (1, 2):
        make_tree(os.path.join(work, f"src{n}"), rs[n - 1])
        publish(os.path.join(work, f"src{n}"), repo, n)
        update(data, repo)
    (v1,) = [r for r in os.listdir(os.path.join(data, "releases")) if r.startswith("1-")]
    files1 = os.path.join(data, "releases", v1, "files")
    # Shared by every later release: one removed, one replaced by a writable copy of its size.
    os.unlink(os.path.join(files1, "d3/e3/f003.bin"))
    replaced = os.path.join(files1, "d4/e0/f004.bin")
    size = os.path.getsize(replaced)
    os.unlink(replaced)
    with open(replaced, "wb") as f:
        f.write(b"x" * size)
    for n in (3, 4, 5):
        make_tree(os.path.join(work, f"src{n}"), rs[n - 1])
        publish(os.path.join(work, f"src{n}"), repo, n)
        update(data, repo)
        release = os.path.join(data, "releases", state(data)["active"]["id"], "files")
        assert_is(release, os.path.join(work, f"src{n}"))
        sid, sdir = spare(data)
        assert sid == state(data)["active"]["id"]
        assert_copies(sdir, release)


def served_tree_is_complete(data, srcs):
    """The release the state names active is complete: exactly one of the sources."""
    s = state(data)
    version = s["active"]["version"]
    assert_is(os.path.join(data, "releases", s["active"]["id"], "files"), srcs[version])
    return version


def test_kills_while_spares_are_made_and_taken_leave_one_complete_release(tmp_path):
    """kill -9 at moments spread over updates that take a spare and make the next (3,000 files,
    so that each has time to be hit), each followed by a check from outside and a next
    update: the active release is always complete, and the last is exactly the newest."""
    work, data, repo = str(tmp_path), str(tmp_path / "data"), str(tmp_path / "repo")
    rnd = random.Random(3)
    files = {f"d{i % 30}/e{i % 7}/f{i:04}.bin": rnd.randbytes(300) for i in range(3000)}
    srcs = {}
    versions = 12
    for n in range(1, versions + 1):
        for k in rnd.sample(sorted(files), 40):
            files[k] = rnd.randbytes(300)
        files[f"added/{n}.txt"] = b"%d" % n
        files.pop(f"added/{n - 2}.txt", None)
        srcs[n] = os.path.join(work, f"src{n}")
        make_tree(srcs[n], files)
    # Three releases installed whole: from then on every update takes a spare and makes one.
    for n in (1, 2, 3):
        publish(srcs[n], repo, n)
        update(data, repo)
    start = time.monotonic()
    publish(srcs[4], repo, 4)
    update(data, repo)
    took = time.monotonic() - start
    kills = 0
    for n in range(5, versions + 1):
        publish(srcs[n], repo, n)
        # Two kills at spread moments of this update's span (a publish's time is a bound on it),
        # then the update that finishes it.
        for _ in range(2):
            p = subprocess.Popen([CLI, "update", "--data-dir", data, "--url", "file://" + os.path.join(repo, "head.json")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rnd.uniform(0, took))
            p.send_signal(signal.SIGKILL)
            p.wait()
            kills += 1
            v = served_tree_is_complete(data, srcs)
            assert v in (n - 1, n)
        update(data, repo, check=False)
        assert served_tree_is_complete(data, srcs) == n
        sid, sdir = spare(data)
        if sid is not None:
            assert sid == state(data)["active"]["id"]
            assert_copies(sdir, os.path.join(data, "releases", sid, "files"))
        assert not os.path.exists(os.path.join(data, "spare.new")) and not os.path.exists(os.path.join(data, "spare.old"))
    assert kills == 2 * (versions - 4)
