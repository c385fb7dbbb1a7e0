"""A data directory another user could write, or one with symbolic links planted in it: the
library refuses it or never writes through the links. Each case names the file outside the
data directory that a careless library would delete or overwrite, and checks it is intact."""
import os

import pytest

import assetpatch
from conftest import assert_serves

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown)")


@pytest.fixture
def victim(tmp_path):
    """A directory outside the data directory, with a file in it."""
    d = tmp_path / "victim"
    d.mkdir()
    (d / "precious.txt").write_text("keep me\n")
    return d


def intact(victim):
    return sorted(os.listdir(victim)) == ["precious.txt"] and (victim / "precious.txt").read_text() == "keep me\n"


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_data_directory_others_can_write_is_refused(tmp_path, mode):
    data = tmp_path / "data"
    data.mkdir()
    os.chmod(data, mode)
    with pytest.raises(assetpatch.FilesystemError) as e:
        assetpatch.Client(str(data))
    assert "writable by group or others" in e.value.message


@root_only
def test_a_data_directory_of_another_user_is_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chown(data, 65534, 65534)
    with pytest.raises(assetpatch.FilesystemError) as e:
        assetpatch.Client(str(data))
    assert "belongs to user 65534" in e.value.message


@pytest.mark.parametrize("sub", ["staging", "releases", "downloads"])
def test_a_symlinked_sub_directory_is_refused_and_nothing_outside_is_touched(tmp_path, victim, server, repos, sub):
    data = tmp_path / "data"
    with assetpatch.Client(str(data), manifest_url=server.url("v1")) as c:
        assert c.update()
    os.rename(data / sub, tmp_path / f"{sub}.moved")
    os.symlink(victim, data / sub)
    with pytest.raises(assetpatch.FilesystemError) as e:
        with assetpatch.Client(str(data)) as c:
            c.reset()  # would empty the directory the link points to
    assert "symbolic link" in e.value.message
    assert intact(victim)


def test_a_planted_temporary_link_is_never_written_through(tmp_path, victim, server, repos):
    # 0.3 wrote the state through "state.json.tmp", truncating whatever a link there named.
    data = tmp_path / "data"
    with assetpatch.Client(str(data), manifest_url=server.url("v1")) as c:
        assert c.update()
        for name in ("state.json.tmp", "manifest-cache.tmp", "bundle-digests.tmp", f"state.json.tmp.{os.getpid()}.1"):
            os.symlink(victim / "precious.txt", data / name)
        c.mark_good()
        c.set("manifest_url", server.url("v2"))
        assert c.update()
        c.mark_good()
        assert_serves(c, repos["v2"])
    assert intact(victim)


def test_links_planted_at_the_lock_and_state_files_are_errors_not_followed(tmp_path, victim, server):
    data = tmp_path / "data"
    with assetpatch.Client(str(data), manifest_url=server.url("v1")) as c:
        assert c.update()
    os.remove(data / "lock")
    os.symlink(victim / "precious.txt", data / "lock")
    with pytest.raises(assetpatch.FilesystemError) as e:
        with assetpatch.Client(str(data), manifest_url=server.url("v1")) as c:
            c.update()
    assert "symbolic links" in e.value.message
    os.remove(data / "lock")
    os.rename(data / "state.json", tmp_path / "state.json")
    os.symlink(tmp_path / "state.json", data / "state.json")
    with pytest.raises(assetpatch.FilesystemError):
        assetpatch.Client(str(data))
    assert intact(victim)


def test_a_data_directory_reached_through_a_link_is_fine(tmp_path, server, repos):
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    with assetpatch.Client(str(tmp_path / "link"), manifest_url=server.url("v2")) as c:
        assert c.update()
        assert_serves(c, repos["v2"])
