"""Real caches between the client and the origin, all on 127.0.0.1 and started by pid: nginx
proxy_cache edges (revalidating and not), two edges in different states behind one load
balancer, an edge that caches 404s, two origin nodes whose copies differ in modification time,
a proxy that strips validators, a manifest URL that redirects to an opaque blob, and Varnish
where its package is installed. Each test asserts what the client installed (bytes), the
statuses, and what the servers were asked for (their access logs)."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

import assetpatch
from conftest import CLI, make_tree, sha256_file, without_head

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from nginxctl import Nginx, free_port  # noqa: E402

# One line per request, the server's own port first: which server answered what.
HTTP = """log_format cache escape=none '$server_port $request_uri $status "$http_range" $http_if_none_match|$http_if_modified_since';
  proxy_cache_path {dir}/cache-a keys_zone=a:1m;
  proxy_cache_path {dir}/cache-b keys_zone=b:1m;
  upstream edges {{ server 127.0.0.1:{edgea}; server 127.0.0.1:{edgeb}; }}
  upstream origins {{ server 127.0.0.1:{port}; server 127.0.0.1:{origin2}; }}"""

# The origin as docs/hosting.md configures it: a short max-age for manifests, archives immutable.
# Braces doubled twice: once for format(rate=...), once for the configuration writer's format.
ORIGIN = """location ~ manifest\\.json$ {{{{ add_header Cache-Control "max-age=1"; }}}}
    location /repo/archives/ {{{{ add_header Cache-Control "public, max-age=31536000, immutable"; limit_rate {rate}; }}}}"""


def edge(port, zone, revalidate="on", extra=""):
    """An nginx proxy_cache edge in front of the origin, as docs/hosting.md configures one:
    archives cached in 1 MiB slices (without them a cold edge fetches the whole archive for
    every range request), manifests revalidated or not. (A server block for the configuration
    writer, which fills {port}, the origin's, and the named ports.)"""
    block = """
  server {{
    listen 127.0.0.1:{PORT};
    location / {{
      proxy_pass http://127.0.0.1:{port};
      proxy_cache ZONE; proxy_cache_revalidate REVALIDATE; proxy_cache_lock on;
      proxy_cache_valid 200 10m;
      EXTRA
    }}
    location ~ \\.zip$ {{
      proxy_pass http://127.0.0.1:{port};
      proxy_cache ZONE; proxy_cache_lock on;
      slice 1m; proxy_cache_key $uri$slice_range; proxy_set_header Range $slice_range;
      proxy_cache_valid 200 206 10m;
      EXTRA
    }}
  }}"""
    return (block.replace("PORT", port).replace("ZONE", zone).replace("REVALIDATE", revalidate)
            .replace("EXTRA", extra.replace("{", "{{").replace("}", "}}")))


def publish(src_root, repo, version, files, *extra):
    src = src_root / f"src{version}"
    make_tree(src, files)
    subprocess.run([CLI, "publish", str(src), "--repo", str(repo), "--package", "cache", "--version", str(version), *extra],
                   check=True, stdout=subprocess.DEVNULL)
    without_head(str(repo / "manifest.json"))


def release(version, size=20_000):
    """Files of one release; every release of a test has the same sizes (equal manifest sizes)."""
    return {"a.txt": f"release {version}\n".encode(), "b/c.bin": bytes([version]) * size}


def requests(workdir, port, suffix):
    """(status, range, conditions) of each request to `port` whose URI ends with `suffix`."""
    out = []
    with open(f"{workdir}/access.log") as f:
        for line in f:
            p, uri, status, rest = line.rstrip("\n").split(" ", 3)
            rng, _, cond = rest.partition(" ")
            if int(p) == port and uri.endswith(suffix):
                out.append((int(status), rng.strip('"'), cond.strip("|-")))
    return out


def served(c):
    return open(c.resolve("a.txt")).read()


def age(path, seconds):
    t = time.time() - seconds
    os.utime(path, (t, t))


@pytest.mark.parametrize("revalidate", ["on", "off"])
def test_a_manifest_published_twice_in_one_second_reaches_new_clients_through_an_edge(tmp_path, revalidate):
    # Release 2 follows release 1 within the same second, equal in size. Once the edge's copy
    # is older than max-age, a new client must get release 2: with proxy_cache_revalidate the
    # edge asks the origin with release 1's validators, which the publisher made differ.
    repo = tmp_path / "repo"
    work = tmp_path / "nginx"
    os.makedirs(work)
    servers = edge("edgea", "a", revalidate)
    with Nginx(str(tmp_path), str(work), http=HTTP, locations=ORIGIN.format(rate=0), servers=servers,
               ports=("edgea", "edgeb", "origin2"), access_log=f"{work}/access.log cache") as n:
        url = n.url("repo/manifest.json", port=n.ports["edgea"])
        publish(tmp_path, repo, 1, release(1))
        with assetpatch.Client(str(tmp_path / "first"), manifest_url=url) as c:
            assert c.update() is True and served(c) == "release 1\n"
        publish(tmp_path, repo, 2, release(2))
        assert os.path.getsize(repo / "manifest.json") > 0
        time.sleep(2.2)  # the edge's copy of release 1 is past its max-age of 1 s
        with assetpatch.Client(str(tmp_path / "fresh"), manifest_url=url) as c:
            assert c.update() is True and served(c) == "release 2\n", "the edge kept serving release 1"
    # The logs once nginx has stopped: every request it served is in them.
    to_origin = requests(work, n.port, "manifest.json")
    if revalidate == "on":
        assert to_origin[-1][2], f"the edge did not revalidate: {to_origin}"
    assert to_origin[-1][0] == 200, to_origin


def test_edges_in_different_states_give_no_error_and_304s_from_both(tmp_path):
    # Behind one URL, edge A has release 2 and edge B still release 1 (it ignores max-age):
    # every CDN has edges like that for a while. Checks alternate between them: none is an
    # error, the older manifest is "no update" with its reason, and after one full fetch from
    # each edge every check is a 304, whichever edge answers.
    repo = tmp_path / "repo"
    work = tmp_path / "nginx"
    os.makedirs(work)
    servers = edge("edgea", "a") + edge("edgeb", "b", extra="proxy_ignore_headers Cache-Control Expires;") + """
  server {{ listen 127.0.0.1:{lb}; location / {{ proxy_pass http://edges; }} }}"""
    with Nginx(str(tmp_path), str(work), http=HTTP, locations=ORIGIN.format(rate=0), servers=servers,
               ports=("edgea", "edgeb", "origin2", "lb"), access_log=f"{work}/access.log cache") as n:
        publish(tmp_path, repo, 1, release(1))
        age(repo / "manifest.json", 30)
        urlb = n.url("repo/manifest.json", port=n.ports["edgeb"])
        with assetpatch.Client(str(tmp_path / "warm"), manifest_url=urlb) as c:
            assert c.update() is True  # edge B now holds release 1 for 10 minutes
        publish(tmp_path, repo, 2, release(2))
        age(repo / "manifest.json", 20)
        with assetpatch.Client(str(tmp_path / "data"), manifest_url=n.url("repo/manifest.json", port=n.ports["lb"])) as c:
            outcomes = []
            for _ in range(8):
                found = c.update()
                o = c.last_check
                outcomes.append((found, o.reason, o.manifest_version))
            assert served(c) == "release 2\n" and c.current_version == 2
        assert (True, None, 2) in outcomes
        assert (False, assetpatch.NoUpdateReason.OLDER, 1) in outcomes, outcomes
        assert all(found or reason in (assetpatch.NoUpdateReason.OLDER, assetpatch.NoUpdateReason.CURRENT)
                   for found, reason, _ in outcomes)
    statuses = [s for s, _, _ in requests(work, n.ports["lb"], "manifest.json")]
    assert statuses.count(200) == 2 and statuses.count(304) == 6, statuses


def test_an_edge_caching_a_404_fails_the_update_cleanly_until_purged(tmp_path):
    # The manifest was uploaded before its archive: the edge caches the archive's 404. The
    # client fails with ERR_HTTP and keeps its release; once the edge is purged it updates.
    repo = tmp_path / "repo"
    work = tmp_path / "nginx"
    os.makedirs(work)
    servers = edge("edgea", "a", extra="proxy_cache_valid 404 10m;")
    with Nginx(str(tmp_path), str(work), http=HTTP, locations=ORIGIN.format(rate=0), servers=servers,
               ports=("edgea", "edgeb", "origin2"), access_log=f"{work}/access.log cache") as n:
        url = n.url("repo/manifest.json", port=n.ports["edgea"])
        publish(tmp_path, repo, 1, release(1))
        with assetpatch.Client(str(tmp_path / "data"), manifest_url=url) as c:
            assert c.update() is True
        publish(tmp_path, repo, 2, release(2))
        age(repo / "manifest.json", 10)
        import json
        archive = repo / json.load(open(repo / "manifest.json"))["archive"]["url"]
        hidden = tmp_path / "hidden.zip"
        os.rename(archive, hidden)  # the wrong order: the archive is not there yet
        time.sleep(2.2)  # past its max-age of 1 s on the edge, which counts in whole seconds
        with assetpatch.Client(str(tmp_path / "data"), manifest_url=url) as c:
            with pytest.raises(assetpatch.HTTPError) as e:
                c.update()
            assert "404" in e.value.message and served(c) == "release 1\n"
            os.rename(hidden, archive)
            with pytest.raises(assetpatch.HTTPError):
                c.update()  # the edge still answers its cached 404
            for d, _, names in os.walk(work / "cache-a"):  # the purge
                for name in names:
                    os.remove(os.path.join(d, name))
            assert c.update() is True and served(c) == "release 2\n"
    archive_asks = [s for s, _, _ in requests(work, n.port, ".zip")]
    assert archive_asks.count(404) == 1, archive_asks


def test_a_resume_is_kept_when_another_origin_node_answers(tmp_path):
    # Two origin nodes hold the same archive with other modification times (other ETags) behind
    # a load balancer. The download is cancelled half-way; the resume goes to the other node
    # and continues with a 206 instead of starting over.
    repo = tmp_path / "repo"
    work = tmp_path / "nginx"
    mirror = tmp_path / "mirror"
    os.makedirs(work)
    servers = f"""
  server {{{{ listen 127.0.0.1:{{origin2}}; root {mirror}; {ORIGIN.format(rate="2m")} }}}}
  server {{{{ listen 127.0.0.1:{{lb}}; location / {{{{ proxy_pass http://origins; proxy_buffering off; }}}} }}}}"""
    with Nginx(str(tmp_path), str(work), http=HTTP, locations=ORIGIN.format(rate="2m"), servers=servers,
               ports=("edgea", "edgeb", "origin2", "lb"), access_log=f"{work}/access.log cache") as n:
        # The manifest from one node, the archive through the balancer: archive requests
        # alternate between the nodes.
        publish(tmp_path, repo, 1, {"a.txt": b"release 1\n", "big.bin": os.urandom(3 << 20)},
                "--archive-url-base", f"http://127.0.0.1:{n.ports['lb']}/repo/archives/")
        shutil.copytree(repo, mirror / "repo")
        for p in (mirror / "repo" / "archives").iterdir():
            age(p, 3600)
        data = tmp_path / "data"
        with assetpatch.Client(str(data), manifest_url=n.url("repo/manifest.json"), differential="off") as c:
            with pytest.raises(assetpatch.CancelledError):
                c.update(progress=lambda p: p.phase == assetpatch.Phase.DOWNLOAD and p.bytes_done > (1 << 20))
            have = next((data / "downloads").glob("*.part")).stat().st_size
            assert have > 0
            assert c.update() is True and served(c) == "release 1\n"
    archive_lines = requests(work, n.ports["lb"], ".zip")
    assert [(s, r) for s, r, _ in archive_lines] == [(200, ""), (206, f"bytes={have}-")], archive_lines
    per_node = [len(requests(work, p, ".zip")) for p in (n.port, n.ports["origin2"])]
    assert per_node == [1, 1], f"each node answered one archive request: {per_node}"


def test_a_proxy_stripping_validators_costs_full_manifests_but_no_restart(tmp_path):
    repo = tmp_path / "repo"
    work = tmp_path / "nginx"
    os.makedirs(work)
    publish(tmp_path, repo, 1, {"a.txt": b"release 1\n", "big.bin": os.urandom(3 << 20)})
    age(repo / "manifest.json", 30)
    strip = """
  server {{ listen 127.0.0.1:{edgea}; location / {{ proxy_pass http://127.0.0.1:{port};
    proxy_hide_header ETag; proxy_hide_header Last-Modified; proxy_buffering off; }} }}"""
    with Nginx(str(tmp_path), str(work), http=HTTP, locations=ORIGIN.format(rate="2m"), servers=strip,
               ports=("edgea", "edgeb", "origin2"), access_log=f"{work}/access.log cache") as n:
        data = tmp_path / "data"
        with assetpatch.Client(str(data), manifest_url=n.url("repo/manifest.json", port=n.ports["edgea"]), differential="off") as c:
            with pytest.raises(assetpatch.CancelledError):
                c.update(progress=lambda p: p.phase == assetpatch.Phase.DOWNLOAD and p.bytes_done > (1 << 20))
            have = next((data / "downloads").glob("*.part")).stat().st_size
            assert c.update() is True and served(c) == "release 1\n"
            assert c.update() is False
    archive_lines = requests(work, n.ports["edgea"], ".zip")
    assert [(s, r) for s, r, _ in archive_lines] == [(200, ""), (206, f"bytes={have}-")], archive_lines
    manifests = requests(work, n.ports["edgea"], "manifest.json")
    assert [s for s, _, c in manifests] == [200, 200, 200] and all(not c for _, _, c in manifests), manifests


def test_a_manifest_behind_a_redirect_to_an_opaque_blob(tmp_path):
    # Release assets and presigned URLs: the manifest's URL redirects to a blob URL whose path
    # says nothing of the repository. A relative archive URL then resolves against the blob and
    # 404s; publish --archive-url-base writes an absolute one for a flat asset layout.
    work = tmp_path / "nginx"
    os.makedirs(work)
    blobs = tmp_path / "blobs"
    assets = tmp_path / "assets"
    port = free_port()
    locations = """location = /latest/manifest.json {{ return 302 /blobs/7f3a9c; }}
    location /blobs/ {{ default_type application/octet-stream; }}"""
    for version, base in ((1, None), (2, f"http://127.0.0.1:{port}/assets/")):
        repo = tmp_path / f"repo{version}"
        publish(tmp_path, repo, version, release(version), *(["--archive-url-base", base] if base else []))
        subprocess.run([CLI, "verify", str(repo)], check=True, stdout=subprocess.DEVNULL)
        os.makedirs(blobs, exist_ok=True)
        os.makedirs(assets, exist_ok=True)
        shutil.copy(repo / "manifest.json", blobs / "7f3a9c")
        for p in (repo / "archives").iterdir():
            shutil.copy(p, assets / p.name)
        with Nginx(str(tmp_path), str(work), locations=locations, port=port) as n:
            with assetpatch.Client(str(tmp_path / "data"), manifest_url=n.url("latest/manifest.json")) as c:
                if base is None:
                    with pytest.raises(assetpatch.HTTPError) as e:
                        c.update()
                    assert "/blobs/archives/" in e.value.message and "404" in e.value.message
                else:
                    assert c.update() is True and served(c) == "release 2\n"


def varnishd():
    return shutil.which("varnishd") or (os.path.exists("/usr/sbin/varnishd") and "/usr/sbin/varnishd")


@pytest.mark.skipif(not varnishd(), reason="Debian's varnish package is not installed")
def test_varnish_revalidating_serves_the_manifest_published_within_the_same_second(tmp_path):
    repo = tmp_path / "repo"
    work = tmp_path / "nginx"
    os.makedirs(work)
    with Nginx(str(tmp_path), str(work), http=HTTP, locations=ORIGIN.format(rate=0), ports=("edgea", "edgeb", "origin2"),
               access_log=f"{work}/access.log cache") as n:
        vport = free_port()
        vdir = tmp_path / "varnish"
        os.makedirs(vdir)
        # Revalidation needs objects kept past their TTL (default_keep); no grace, so that an
        # expired object is revalidated before it is served.
        proc = subprocess.Popen([varnishd(), "-F", "-a", f"127.0.0.1:{vport}", "-b", f"127.0.0.1:{n.port}", "-n", str(vdir),
                                 "-s", "malloc,32m", "-p", "default_grace=0", "-p", "default_keep=60"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                try:
                    socket.create_connection(("127.0.0.1", vport), timeout=0.2).close()
                    break
                except OSError:
                    if proc.poll() is not None:
                        pytest.skip("varnishd does not start here")
                    time.sleep(0.05)
            url = f"http://127.0.0.1:{vport}/repo/manifest.json"
            publish(tmp_path, repo, 1, release(1))
            with assetpatch.Client(str(tmp_path / "first"), manifest_url=url) as c:
                assert c.update() is True and served(c) == "release 1\n"
            publish(tmp_path, repo, 2, release(2))
            time.sleep(2.2)
            with assetpatch.Client(str(tmp_path / "fresh"), manifest_url=url) as c:
                assert c.update() is True and served(c) == "release 2\n", "Varnish kept serving release 1"
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    to_origin = requests(work, n.port, "manifest.json")
    assert to_origin[-1][0] == 200 and to_origin[-1][2], f"Varnish did not revalidate: {to_origin}"
