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
@pytest.mark.parametrize("size, where", [("2m", "download"), ("7m", "extraction")])
def test_disk_full_keeps_the_active_release(tmpfs, server, repos, size, where):
    # v1 (about 0.2 MB) fits; v2's 4.5 MB archive does not (2m), or its extraction does not (7m).
    data = str(tmpfs(size) / "data")
    with assetpatch.Client(data, manifest_url=server.url("v1")) as c:
        assert c.update()
        c.set("manifest_url", server.url("v2"))
        with pytest.raises(assetpatch.FilesystemError) as e:
            c.update()
        assert "No space left on device" in e.value.message
        assert_serves(c, repos["v1"])
        assert staging_is_empty(data)
    with assetpatch.Client(data) as c:  # and after a restart
        assert_serves(c, repos["v1"])


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
