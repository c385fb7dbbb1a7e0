"""Disk full, failed writes and permissions: the update fails with ERR_IO, the active release
stays complete and served, staging is removed."""
import os
import resource
import shutil
import signal
import subprocess

import pytest

import assetpatch
from conftest import CLI, assert_serves

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount, setpriv)")


@pytest.fixture
def tmpfs(tmp_path):
    mounts = []

    def mount(size):
        d = tmp_path / f"tmpfs{len(mounts)}"
        d.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount tmpfs: {r.stderr.strip()}")
        mounts.append(d)
        return d

    yield mount
    for d in mounts:
        subprocess.run(["umount", "-l", str(d)])


def staging_is_empty(data):
    s = os.path.join(data, "staging")
    return not os.path.isdir(s) or os.listdir(s) == []


@root_only
def test_too_little_free_space_fails_before_any_archive_byte(tmpfs, fault, repos):
    # v1 (about 0.2 MB) fits; v2 (a 4.5 MB archive, 6 MB unpacked) does not fit in 8 MB.
    data = str(tmpfs("8m") / "data")
    with assetpatch.Client(data, manifest_url=fault.url("v1")) as c:
        assert c.update()
        fault.reset()
        c.set("manifest_url", fault.url("v2"))
        with pytest.raises(assetpatch.FilesystemError) as e:
            c.update()
        assert "not enough free space for version 2" in e.value.message and "available" in e.value.message
        assert fault.stats()["archive_requests"] == 0, "refused before downloading"
        assert_serves(c, repos["v1"])
        assert staging_is_empty(data)


def fill(directory):
    """Writes zeros into `directory` until the filesystem is full."""
    with open(os.path.join(directory, "filler"), "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        except OSError:
            pass


@root_only
@pytest.mark.parametrize("phase", [assetpatch.Phase.DOWNLOAD, assetpatch.Phase.INSTALL])
def test_disk_filling_up_mid_update_keeps_the_active_release(tmpfs, server, repos, phase):
    # Room enough when the update checks; then another program fills the disk as the download
    # (or the extraction) starts: the write fails with ENOSPC.
    mount = tmpfs("40m")
    data = str(mount / "data")
    with assetpatch.Client(data, manifest_url=server.url("v1")) as c:
        assert c.update()
        c.set("manifest_url", server.url("v2"))
        filled = []

        def progress(p):
            if p.phase == phase and not filled:
                fill(str(mount))
                filled.append(True)
            return False

        with pytest.raises(assetpatch.FilesystemError) as e:
            c.update(progress=progress)
        assert filled and "No space left on device" in e.value.message
        assert_serves(c, repos["v1"])
        assert staging_is_empty(data)
    os.remove(os.path.join(str(mount), "filler"))
    with assetpatch.Client(data, manifest_url=server.url("v2")) as c:  # and after a restart
        assert_serves(c, repos["v1"])
        assert c.update() is True, "with room again the update completes"
        assert_serves(c, repos["v2"])


def test_file_size_limit_is_an_io_error(tmp_path, server, repos):
    data = str(tmp_path / "data")
    subprocess.run([CLI, "update", "--data-dir", data, "--url", server.url("v1")], check=True, capture_output=True)

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    r = subprocess.run([CLI, "update", "--data-dir", data, "--url", server.url("v2")], capture_output=True, text=True,
                       preexec_fn=limit)
    assert r.returncode == 3
    assert "ASSETPATCH_ERR_IO" in r.stderr and "File too large" in r.stderr
    with assetpatch.Client(data) as c:
        assert_serves(c, repos["v1"])
        assert staging_is_empty(data)


@root_only
def test_unwritable_data_dir_is_an_io_error_for_an_unprivileged_user(tmp_path, server):
    # Root ignores mode bits: run the client as nobody.
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", CLI, "update",
                        "--data-dir", str(data), "--url", server.url("v1")], capture_output=True, text=True)
    assert r.returncode == 3
    assert "ASSETPATCH_ERR_IO" in r.stderr and "Permission denied" in r.stderr


@root_only
def test_a_download_of_unknown_size_stops_before_the_disk_fills(tmpfs, server, repos):
    # A legacy {url, md5} manifest declares no size: the archive (48 MiB, random, stored) is
    # larger than the 40 MiB file system. The download stops before it eats into the reserve
    # (16 MiB here), drops what it wrote, and the state can still be written afterwards.
    import hashlib, json, zipfile
    legacy = os.path.join(repos["base"], "legacy-big")
    os.makedirs(legacy, exist_ok=True)
    archive = os.path.join(legacy, "patch.zip")
    if not os.path.exists(archive):
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
            for i in range(6):
                z.writestr(f"big{i}.bin", os.urandom(8 << 20))
        with open(archive, "rb") as f:
            md5 = hashlib.md5(f.read()).hexdigest()
        with open(os.path.join(legacy, "manifest.json"), "w") as f:
            json.dump({"url": "patch.zip", "md5": md5}, f)
    mount = tmpfs("40m")
    data = str(mount / "data")
    with assetpatch.Client(data, manifest_url=server.url("v1")) as c:
        assert c.update()
        c.set("manifest_url", server.base + "/legacy-big/manifest.json")
        with pytest.raises(assetpatch.FilesystemError) as e:
            c.update()
        assert "less than the reserve" in e.value.message
        free = shutil.disk_usage(str(mount)).free
        assert free >= 15 << 20, f"only {free} bytes left free"
        assert os.listdir(os.path.join(data, "downloads")) == [], "the partial download was dropped"
        assert_serves(c, repos["v1"])
        c.mark_good()  # a state write still succeeds
        assert c.lifecycle.marked_good


@root_only
def test_a_download_that_hits_a_full_disk_is_dropped(tmpfs, fault, repos):
    server = fault
    # Another program fills the disk while a format-1 download runs: ENOSPC drops the partial,
    # giving its bytes back, and the active release stays.
    mount = tmpfs("40m")
    data = str(mount / "data")
    with assetpatch.Client(data, manifest_url=server.url("v1")) as c:
        assert c.update()
        c.set("manifest_url", server.url("v2"))
        c.set("differential", "off")
        server.control("normal", rate=1 << 20)  # about 5 s for the archive: the disk fills during it
        filled = []

        def progress(p):
            if p.phase == assetpatch.Phase.DOWNLOAD and p.bytes_done > 0 and not filled:
                fill(str(mount))
                filled.append(True)
            return False

        with pytest.raises(assetpatch.FilesystemError):
            c.update(progress=progress)
        assert filled
        assert not [n for n in os.listdir(os.path.join(data, "downloads")) if n.endswith(".part")]
        assert_serves(c, repos["v1"])
