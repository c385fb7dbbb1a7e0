"""The release lifecycle end to end: an app-store upgrade whose bundle carries newer resources
than the hot update installed for the old app (the stale overlay), with the real CLI."""
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
