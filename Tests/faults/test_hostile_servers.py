"""TLS verification against a private nginx with a throwaway CA, redirects (to file://, loops,
relative targets), endless bodies, and unsupported schemes."""
import logging
import os
import subprocess
import sys

import pytest

import assetpatch
from conftest import ROOT, assert_serves

sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import Nginx  # noqa: E402


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d):
    """A CA, a certificate for 127.0.0.1/localhost and one for another name, all signed by it."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-subj", "/CN=assetpatch test CA", "-days", "2", cwd=d)
    for name, san in (("good", "IP:127.0.0.1,DNS:localhost"), ("wrong", "DNS:wrong.example")):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key",
                "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(f"subjectAltName={san}\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)


@pytest.fixture(scope="module")
def nginx(repos, tmp_path_factory):
    d = str(tmp_path_factory.mktemp("tls"))
    make_pki(d)
    locations = """
    location = /to-file/manifest.json {{ return 302 file:///etc/passwd; }}
    location = /loop/manifest.json {{ return 302 /loop/manifest.json; }}
    location = /hop1/manifest.json {{ return 301 /hop2/manifest.json; }}
    location = /hop2/manifest.json {{ return 302 http://127.0.0.1:{port}/v2/manifest.json; }}
    location = /to-https/manifest.json {{ return 302 https://127.0.0.1:{good}/v1/manifest.json; }}
"""
    servers = """
  server {{ listen 127.0.0.1:{good} ssl http2; ssl_certificate {dir}/good.pem; ssl_certificate_key {dir}/good.key; root {root}; }}
  server {{ listen 127.0.0.1:{wrong} ssl; ssl_certificate {dir}/wrong.pem; ssl_certificate_key {dir}/wrong.key; root {root}; }}
"""
    with Nginx(repos["base"], d, locations=locations, servers=servers, ports=("good", "wrong"),
               access_log=f"{d}/access.log") as n:
        yield {"dir": d, "ca": f"{d}/ca.pem", "http": n.port, "log": f"{d}/access.log", **n.ports}


def client(tmp_path, url, **kw):
    return assetpatch.Client(str(tmp_path / "data"), manifest_url=url, **kw)


def test_https_over_http2_with_the_ca_file_verifies_and_updates(tmp_path, nginx, repos):
    with client(tmp_path, f"https://127.0.0.1:{nginx['good']}/v1/manifest.json", ca_file=nginx["ca"]) as c:
        assert c.update()
        assert_serves(c, repos["v1"])
    with open(nginx["log"]) as f:
        archive_lines = [line for line in f if "/v1/archives/" in line]
    assert archive_lines and all('HTTP/2.0"' in line for line in archive_lines), archive_lines


def test_the_cli_takes_its_ca_bundle_from_the_environment(tmp_path, nginx):
    """What `python -m assetpatch` sets where the system keeps its CA bundle elsewhere than the
    wheel's libcurl looks: the tool verifies with it, and without it refuses the server."""
    from conftest import CLI
    url = f"https://127.0.0.1:{nginx['good']}/v1/manifest.json"
    env = {k: v for k, v in os.environ.items() if k != "ASSETPATCH_CA_FILE"}
    r = subprocess.run([CLI, "update", "--data-dir", tmp_path / "a", "--url", url], env=env, capture_output=True, text=True)
    assert r.returncode == 3 and "certificate" in r.stderr.lower(), r.stderr
    env["ASSETPATCH_CA_FILE"] = nginx["ca"]
    r = subprocess.run([CLI, "update", "--data-dir", tmp_path / "b", "--url", url], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_https_with_an_unknown_ca_is_refused_at_once(tmp_path, nginx, caplog):
    caplog.set_level(logging.DEBUG, logger="assetpatch")
    with client(tmp_path, f"https://127.0.0.1:{nginx['good']}/v1/manifest.json") as c:
        with pytest.raises(assetpatch.NetworkError) as e:
            c.update()
        assert "certificate" in e.value.message.lower()
        assert c.current_version == 0
    assert not [r for r in caplog.records if "retry" in r.getMessage()], "TLS verification is not retried"


def test_https_certificate_for_another_name_is_refused(tmp_path, nginx):
    with client(tmp_path, f"https://127.0.0.1:{nginx['wrong']}/v1/manifest.json", ca_file=nginx["ca"]) as c:
        with pytest.raises(assetpatch.NetworkError) as e:
            c.update()
        assert "127.0.0.1" in e.value.message or "match" in e.value.message.lower()


def test_redirect_to_file_url_is_refused_at_once(tmp_path, nginx, caplog):
    caplog.set_level(logging.DEBUG, logger="assetpatch")
    with client(tmp_path, f"http://127.0.0.1:{nginx['http']}/to-file/manifest.json") as c:
        with pytest.raises(assetpatch.NetworkError):
            c.update()
    assert not [r for r in caplog.records if "retry" in r.getMessage()], "a redirect to file:// is not retried"


def test_redirect_loop_is_bounded(tmp_path, nginx):
    with client(tmp_path, f"http://127.0.0.1:{nginx['http']}/loop/manifest.json") as c:
        with pytest.raises(assetpatch.NetworkError) as e:
            c.update()
        assert "redirect" in e.value.message.lower()


def test_redirects_are_followed_and_relative_archive_urls_use_the_final_url(tmp_path, nginx, repos):
    with client(tmp_path, f"http://127.0.0.1:{nginx['http']}/hop1/manifest.json") as c:
        assert c.update()
        assert_serves(c, repos["v2"])


def test_redirect_from_http_to_https_verifies_tls(tmp_path, nginx, repos):
    with client(tmp_path, f"http://127.0.0.1:{nginx['http']}/to-https/manifest.json") as c:
        with pytest.raises(assetpatch.NetworkError):
            c.update()
        c.set("ca_file", nginx["ca"])
        assert c.update()
        assert_serves(c, repos["v1"])


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/m.json", "scp://host/m.json", "gopher://127.0.0.1/m", "m.json", "", "HTTP:/x"])
def test_unsupported_manifest_url_schemes_are_argument_errors(tmp_path, url):
    with assetpatch.Client(str(tmp_path / "data")) as c:
        if url == "HTTP:/x":
            c.set("manifest_url", url)  # schemes are case-insensitive
            return
        with pytest.raises(assetpatch.ArgumentError):
            c.set("manifest_url", url)


def test_endless_manifest_body_hits_the_byte_limit(tmp_path, fault):
    with client(tmp_path, fault.base + "/_endless/manifest.json", max_manifest_bytes=100000) as c:
        with pytest.raises(assetpatch.ManifestError) as e:
            c.update()
        assert "100000" in e.value.message


def test_endless_archive_body_hits_the_manifest_size(tmp_path, fault, repos):
    # What the client accepted, not what the server wrote (that includes whatever sat in
    # socket buffers when the client hung up): it stopped at the manifest's size, kept nothing
    # beyond it, and made one request (a too-long archive is not retried).
    size = repos["v2"].archive_size
    fault.control("endless")
    with client(tmp_path, fault.url("v2")) as c:
        with pytest.raises(assetpatch.IntegrityError) as e:
            c.update()
        assert str(size) in e.value.message
        assert c.current_version == 0
    downloads = tmp_path / "data" / "downloads"
    assert all(p.stat().st_size <= size for p in downloads.iterdir())
    assert fault.stats()["archive_requests"] == 1
