"""The release lifecycle end to end: an app-store upgrade whose bundle carries newer resources
than the hot update installed for the old app (the stale overlay), with the real CLI."""
import logging
import os
import shutil
import subprocess

import assetpatch
from conftest import CLI, make_tree


def publish(src, repo, version, *extra):
    subprocess.run([CLI, "publish", src, "--repo", repo, "--package", "game", "--version", str(version), *extra],
                   check=True, stdout=subprocess.DEVNULL)


def read(client, name):
    with open(client.resolve(name), "rb") as f:
        return f.read()


def test_an_app_upgrade_is_not_shadowed_by_the_old_apps_hot_update(tmp_path):
    repo, app_dir, data = str(tmp_path / "repo"), str(tmp_path / "app"), str(tmp_path / "data")
    # App 1.0 ships release 1 in its bundle; hot update 2 follows for app 1.x.
    make_tree(str(tmp_path / "r1"), {"level.json": b'{"level": "v1"}', "logo.png": b"logo v1"})
    make_tree(str(tmp_path / "r2"), {"level.json": b'{"level": "v2 hot fix"}', "logo.png": b"logo v1"})
    publish(str(tmp_path / "r1"), repo, 1)
    shutil.copytree(str(tmp_path / "r1"), app_dir)
    subprocess.run([CLI, "stamp-bundle", app_dir, "--repo", repo], check=True, stdout=subprocess.DEVNULL)
    publish(str(tmp_path / "r2"), repo, 2, "--max-app-version", "1.9")
    url = "file://" + os.path.join(repo, "manifest.json")
    with assetpatch.Client(data, app_dir, manifest_url=url, app_version="1.0") as c:
        assert c.update() is True
        assert read(c, "level.json") == b'{"level": "v2 hot fix"}'
        c.mark_good()

    # App 2.0 from the store: its bundle carries release 3 (new level, new logo), stamped.
    make_tree(str(tmp_path / "r3"), {"level.json": b'{"level": "v3 from the store"}', "logo.png": b"logo v3"})
    publish(str(tmp_path / "r3"), repo, 3)
    shutil.rmtree(app_dir)
    shutil.copytree(str(tmp_path / "r3"), app_dir)
    subprocess.run([CLI, "stamp-bundle", app_dir, "--repo", repo], check=True, stdout=subprocess.DEVNULL)
    with assetpatch.Client(data, app_dir, manifest_url=url, app_version="2.0") as c:
        assert c.current_version == 0, "the stale overlay (release 2) is not served"
        assert read(c, "level.json") == b'{"level": "v3 from the store"}' and read(c, "logo.png") == b"logo v3"
        life = c.lifecycle
        assert life.last_rollback.from_version == 2 and "app upgrade" in life.last_rollback.reason
        assert c.update() is False, "release 3 is the bundle's own"
    status = subprocess.run([CLI, "status", "--data-dir", data], capture_output=True, text=True, check=True).stdout
    assert "bundle:   carries version 3" in status and "app upgrade" in status

    # Release 4 is a hot update for app 2.0: taken.
    make_tree(str(tmp_path / "r4"), {"level.json": b'{"level": "v4"}', "logo.png": b"logo v3"})
    publish(str(tmp_path / "r4"), repo, 4, "--min-app-version", "2.0")
    with assetpatch.Client(data, app_dir, manifest_url=url, app_version="2.0") as c:
        assert c.update() is True and read(c, "level.json") == b'{"level": "v4"}'


def lost_release_setup(tmp_path):
    """Version 1 kept, version 2 active, both installed from file:// with a bundle."""
    repo, bundle, data = str(tmp_path / "repo"), str(tmp_path / "bundle"), str(tmp_path / "data")
    make_tree(bundle, {"level.json": b"bundle level"})
    url = "file://" + os.path.join(repo, "manifest.json")
    for v in (1, 2):
        make_tree(str(tmp_path / f"r{v}"), {"level.json": f"level v{v}".encode(), f"only{v}.txt": b"x" * 100 * v})
        publish(str(tmp_path / f"r{v}"), repo, v)
        with assetpatch.Client(data, bundle, manifest_url=url) as c:
            assert c.update()
    return url, bundle, data


def state_ids(data):
    import json
    state = json.load(open(os.path.join(data, "state.json")))
    return {r["version"]: r["id"] for r in [state.get("active")] + state.get("kept", []) if r}


def test_a_release_whose_files_are_gone_falls_back_to_the_kept_one_and_is_installed_again(tmp_path, caplog):
    # A file system that lost what the library made durable (or a user deleting files) leaves
    # a state naming release 2 with nothing behind it: the client serves release 1, kept on
    # disk, not the bundle, and the next update installs 2 again.
    url, bundle, data = lost_release_setup(tmp_path)
    ids = state_ids(data)
    assert set(ids) == {1, 2}
    shutil.rmtree(os.path.join(data, "releases", ids[2]))
    caplog.set_level(logging.INFO, logger="assetpatch")
    with assetpatch.Client(data, bundle) as c:
        assert c.current_version == 1
        assert read(c, "level.json") == b"level v1"
        assert any("version 2 lost from" in r.getMessage() for r in caplog.records), caplog.text
        assert state_ids(data) == {1: ids[1]}
        c.set("manifest_url", url)
        assert c.update()
        assert c.current_version == 2 and read(c, "level.json") == b"level v2"


def test_a_release_whose_record_is_gone_is_not_served(tmp_path):
    url, bundle, data = lost_release_setup(tmp_path)
    ids = state_ids(data)
    os.unlink(os.path.join(data, "releases", ids[2], "release.json"))
    with assetpatch.Client(data, bundle) as c:
        assert c.current_version == 1
        assert c.release_info("active").version == 1


def test_a_lost_kept_release_leaves_the_active_one_served(tmp_path):
    url, bundle, data = lost_release_setup(tmp_path)
    ids = state_ids(data)
    shutil.rmtree(os.path.join(data, "releases", ids[1], "files"))
    with assetpatch.Client(data, bundle) as c:
        assert c.current_version == 2 and read(c, "level.json") == b"level v2"
        assert state_ids(data) == {2: ids[2]}
        # Nothing to roll back to: the bundle.
        assert c.rollback() == 0 and read(c, "level.json") == b"bundle level"
