"""Plugins: shared objects built here with the C compiler, published with the real CLI, loaded
through the C ABI (via the Python package) from verified bytes only."""
import ctypes
import os
import shutil
import subprocess
import sys

import pytest

import assetpatch
from conftest import CLI

PLUGIN = """
const char *plugin_name(void) { return "greeter %(version)s"; }
int plugin_answer(void) { return %(answer)d; }
"""


def build_so(path, source, *extra):
    c = path + ".c"
    with open(c, "w") as f:
        f.write(source)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", path, c, *extra], check=True)
    os.remove(c)


@pytest.fixture(scope="module")
def plugin_repos(tmp_path_factory):
    """Signed releases 1 and 2 of a plugin (answers 1 and 2), an unsigned release 3, and the key."""
    base = str(tmp_path_factory.mktemp("plugins"))
    key = os.path.join(base, "key")
    subprocess.run([CLI, "keygen", "--out", key], check=True, stdout=subprocess.DEVNULL)
    repos = {}
    for version, signed in ((1, True), (2, True), (3, False)):
        src = os.path.join(base, f"src{version}")
        os.makedirs(os.path.join(src, "plugins"))
        build_so(os.path.join(src, "plugins", "greeter.so"), PLUGIN % {"version": version, "answer": version})
        with open(os.path.join(src, "readme.txt"), "w") as f:
            f.write(f"release {version}\n")
        repo = os.path.join(base, f"repo{version}")
        if version > 1:
            shutil.copytree(os.path.join(base, f"repo{version - 1}"), repo)
        cmd = [CLI, "publish", src, "--repo", repo, "--package", "plugins", "--version", str(version),
               "--plugin", "greeter=plugins/greeter.so:plugin_answer", "--plugin-version", f"greeter=1.{version}",
               "--plugin-abi", "greeter=demo-1"]
        subprocess.run(cmd + (["--key", key] if signed else []), check=True, stdout=subprocess.DEVNULL)
        repos[version] = "file://" + os.path.join(repo, "manifest.json")
    with open(key + ".pub") as f:
        pub = f.read().strip()
    return {"urls": repos, "pub": pub, "base": base}


def call_int(address):
    return ctypes.CFUNCTYPE(ctypes.c_int)(address)()


def test_a_signed_plugin_loads_and_a_newer_release_runs_new_code(tmp_path, plugin_repos):
    with assetpatch.Client(str(tmp_path / "data"), manifest_url=plugin_repos["urls"][1], public_keys=[plugin_repos["pub"]]) as c:
        with pytest.raises(assetpatch.NotFoundError):
            c.load_plugin("greeter")  # bundle only
        assert c.update() is True
        assert c.plugins == (assetpatch.Plugin("greeter", "1.1", "plugin_answer", "demo-1"),)
        first = c.load_plugin("greeter")
        assert call_int(first) == 1
        assert c.load_plugin("greeter") == first, "the same plugin of the same release: the same code"
        name = ctypes.CFUNCTYPE(ctypes.c_char_p)(c.load_plugin("greeter", "plugin_name"))()
        assert name == b"greeter 1"
        with pytest.raises(assetpatch.NotFoundError) as e:
            c.load_plugin("greeter", "no_such_symbol")
        assert "no_such_symbol" in e.value.message
        with pytest.raises(assetpatch.NotFoundError):
            c.load_plugin("nobody")
        c.set("manifest_url", plugin_repos["urls"][2])
        assert c.update() is True
        second = c.load_plugin("greeter")
        assert call_int(second) == 2, "the new release's code runs, not the cached old object"
        assert call_int(first) == 1, "code loaded before stays loaded"
        # After a rollback, new loads get the kept release's plugin again.
        assert c.rollback() == 1
        assert call_int(c.load_plugin("greeter")) == 1


def test_an_unsigned_release_is_refused_unless_allowed(tmp_path, plugin_repos):
    with assetpatch.Client(str(tmp_path / "data"), manifest_url=plugin_repos["urls"][3]) as c:
        assert c.update() is True
        with pytest.raises(assetpatch.SignatureError):
            c.load_plugin("greeter")
        c.set("allow_unsigned_plugins", 1)
        assert call_int(c.load_plugin("greeter")) == 3


def installed_plugin(data):
    releases = os.path.join(data, "releases")
    (rel,) = os.listdir(releases)
    return os.path.join(releases, rel, "files", "plugins", "greeter.so")


@pytest.mark.parametrize("damage", ["truncated", "corrupted", "swapped"])
def test_a_plugin_changed_on_disk_is_an_integrity_error_not_a_crash(tmp_path, plugin_repos, damage):
    data = str(tmp_path / "data")
    with assetpatch.Client(data, manifest_url=plugin_repos["urls"][1], public_keys=[plugin_repos["pub"]]) as c:
        assert c.update() is True
    path = installed_plugin(data)
    os.chmod(path, 0o644)
    if damage == "truncated":
        os.truncate(path, os.path.getsize(path) // 2)
    elif damage == "corrupted":
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) // 2)
            f.write(b"\xff" * 64)
    else:  # another shared object of the same size in its place
        other = str(tmp_path / "other.so")
        build_so(other, PLUGIN % {"version": 9, "answer": 9})
        data_bytes = open(other, "rb").read()
        size = os.path.getsize(path)
        with open(path, "wb") as f:
            f.write(data_bytes[:size].ljust(size, b"\0"))
    with assetpatch.Client(data, public_keys=[plugin_repos["pub"]]) as c:
        with pytest.raises(assetpatch.IntegrityError) as e:
            c.load_plugin("greeter")
        assert "changed on disk" in e.value.message


def test_a_plugin_for_another_machine_or_with_a_missing_dependency_is_an_archive_error(tmp_path, plugin_repos):
    base = str(tmp_path)
    src = os.path.join(base, "src")
    os.makedirs(src)
    # A dependency that exists at publish time and is gone on the client.
    dep_dir = os.path.join(base, "deps")
    os.makedirs(dep_dir)
    build_so(os.path.join(dep_dir, "libhelper.so"), "int helper(void) { return 7; }")
    build_so(os.path.join(src, "needs.so"), "int helper(void); int entry(void) { return helper(); }",
             "-L" + dep_dir, "-lhelper")
    build_so(os.path.join(src, "arm.so"), "int entry(void) { return 1; }")
    with open(os.path.join(src, "arm.so"), "r+b") as f:  # say AArch64 (183) in e_machine
        f.seek(18)
        f.write((183).to_bytes(2, "little"))
    repo = os.path.join(base, "repo")
    subprocess.run([CLI, "publish", src, "--repo", repo, "--package", "odd", "--plugin", "needs=needs.so:entry",
                    "--plugin", "arm=arm.so:entry"], check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(dep_dir)
    with assetpatch.Client(os.path.join(base, "data"), manifest_url="file://" + repo + "/manifest.json",
                           allow_unsigned_plugins=1) as c:
        assert c.update() is True
        with pytest.raises(assetpatch.ArchiveError) as e:
            c.load_plugin("needs")
        assert "libhelper.so" in e.value.message, "dlerror's text names the missing library"
        with pytest.raises(assetpatch.ArchiveError) as e:
            c.load_plugin("arm")
        assert "AArch64" in e.value.message


def test_publish_refuses_what_is_not_a_shared_object_with_its_entry(tmp_path):
    src = str(tmp_path / "src")
    os.makedirs(src)
    with open(os.path.join(src, "text.so"), "w") as f:
        f.write("not an ELF file\n")
    build_so(os.path.join(src, "real.so"), "int entry(void) { return 1; }")
    for spec, why in (("t=text.so:entry", "not an ELF file"), ("r=real.so:missing", "does not define the entry symbol missing")):
        r = subprocess.run([CLI, "publish", src, "--repo", str(tmp_path / "repo"), "--plugin", spec], capture_output=True, text=True)
        assert r.returncode == 3 and why in r.stderr, r.stderr


def test_the_python_example_updates_and_calls_the_new_plugin(tmp_path, plugin_repos):
    """examples/plugin/greeter.c, versions 1 and 2, in signed releases; the Python example host
    calls version 1, then, after an update in a new process, version 2."""
    from conftest import ROOT
    key = os.path.join(plugin_repos["base"], "key")
    repo = str(tmp_path / "repo")
    outputs = []
    for version in (1, 2):
        src = str(tmp_path / f"src{version}")
        os.makedirs(os.path.join(src, "plugins"))
        subprocess.run(["cc", "-shared", "-fPIC", f"-DGREETER_VERSION={version}", "-o", os.path.join(src, "plugins", "greeter.so"),
                        os.path.join(ROOT, "examples", "plugin", "greeter.c")], check=True)
        subprocess.run([CLI, "publish", src, "--repo", repo, "--package", "greeter", "--key", key,
                        "--plugin", "greeter=plugins/greeter.so:greeter_greet"], check=True, stdout=subprocess.DEVNULL)
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "bindings", "python"))
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bindings", "python", "examples", "plugin.py"), str(tmp_path / "data"),
                            "file://" + repo + "/manifest.json", plugin_repos["pub"]], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        outputs.append(r.stdout)
    assert "greeter says: Hello from greeter 1" in outputs[0]
    assert "greeter says: Greetings from greeter 2" in outputs[1]


def test_another_products_signed_plugin_never_loads(tmp_path, plugin_repos):
    # The same key signs "plugins" (the repositories above) and this app, "game": the app names
    # its package, so the other product's signed release is refused and its plugin never runs.
    with assetpatch.Client(str(tmp_path / "data"), manifest_url=plugin_repos["urls"][2], public_keys=[plugin_repos["pub"]],
                           package="game") as c:
        with pytest.raises(assetpatch.ManifestError) as e:
            c.update()
        assert 'package "plugins" is not this client\'s package "game"' in e.value.message
        with pytest.raises(assetpatch.NotFoundError):
            c.load_plugin("greeter")
        assert c.current_version == 0 and c.plugins == ()


def test_a_client_runs_the_code_and_reads_the_release_it_serves_while_another_updates(tmp_path, plugin_repos):
    # Client A serves release 1 (its plugin answers 1). Client B, on the same data directory,
    # installs release 2 and then resets. A's plugin, plugin list and release info speak of
    # release 1 until A is opened again; its files stay on disk meanwhile.
    data = str(tmp_path / "data")
    keys = [plugin_repos["pub"]]
    with assetpatch.Client(data, manifest_url=plugin_repos["urls"][1], public_keys=keys) as a:
        assert a.update() is True
        with assetpatch.Client(data, manifest_url=plugin_repos["urls"][2], public_keys=keys) as b:
            assert b.update() is True and b.current_version == 2
            assert call_int(b.load_plugin("greeter")) == 2
            assert call_int(a.load_plugin("greeter")) == 1
            assert [p.version for p in a.plugins] == ["1.1"] and [p.version for p in b.plugins] == ["1.2"]
            assert a.release_info("active").version == 1 and b.release_info("active").version == 2
            b.reset()
        assert call_int(a.load_plugin("greeter")) == 1
        assert open(a.resolve("readme.txt")).read() == "release 1\n"
    with assetpatch.Client(data) as again:
        assert again.current_version == 0, "after the reset, a new client serves the bundle"
        assert not os.listdir(os.path.join(data, "releases")), "release 1 went once A closed"


def test_other_processes_updating_and_resetting_never_pull_a_release_from_under_a_client(tmp_path, plugin_repos):
    # A client serves release 1; command-line processes on the same data directory update to 2,
    # then to 3 (release 1 leaves the kept list), reset, and update again. After each, every
    # path the client resolves is a file with release 1's bytes.
    data = str(tmp_path / "data")
    with assetpatch.Client(data, manifest_url=plugin_repos["urls"][1], allow_unsigned_plugins=True) as a:
        assert a.update() is True
        paths = {name: a.resolve(name) for name in ("readme.txt", "plugins/greeter.so")}
        digests = {name: sha256(p) for name, p in paths.items()}
        steps = [["update", "--url", plugin_repos["urls"][2]], ["update", "--url", plugin_repos["urls"][3]], ["reset"],
                 ["update", "--url", plugin_repos["urls"][3]]]
        for step in steps:
            subprocess.run([CLI, step[0], "--data-dir", data, *step[1:]], check=True, capture_output=True)
            for name, p in paths.items():
                assert os.path.isfile(p) and sha256(p) == digests[name], f"after {step}: {p}"
            assert a.resolve("readme.txt") == paths["readme.txt"] and a.current_version == 1


def sha256(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
