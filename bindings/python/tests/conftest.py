"""Fixtures: release repositories made by the e2e fixture generator with the real CLI, served
over file:// and by a private nginx on 127.0.0.1 (started and stopped by pid)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
from nginxctl import Nginx  # noqa: E402
PREFIX = os.environ.get("ASSETPATCH_PREFIX", os.path.join(ROOT, "build", "prefix"))
CLI = os.path.join(PREFIX, "bin", "assetpatch")


@pytest.fixture(autouse=True)
def host_transport(monkeypatch):
    """ASSETPATCH_TEST_TRANSPORT=python: every client performs its requests through
    assetpatch.HTTPClientTransport (Python's http.client) instead of libcurl."""
    if os.environ.get("ASSETPATCH_TEST_TRANSPORT") != "python":
        return
    import assetpatch
    opened = assetpatch.Client.__init__

    def init(self, *args, **kwargs):
        opened(self, *args, **kwargs)
        self.set_transport(assetpatch.HTTPClientTransport())
    monkeypatch.setattr(assetpatch.Client, "__init__", init)


@pytest.fixture(scope="session")
def fixtures(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("fx"))
    subprocess.run([sys.executable, os.path.join(ROOT, "Tests", "e2e", "fixtures.py"), "--cli", CLI, "--out", out], check=True)
    return out


@pytest.fixture(scope="session")
def nginx_base(fixtures, tmp_path_factory):
    with Nginx(fixtures, str(tmp_path_factory.mktemp("nginx"))) as n:
        yield n.url("repos")


@pytest.fixture(params=["file", "http"])
def base_url(request, fixtures):
    if request.param == "file":
        return "file://" + os.path.join(fixtures, "repos")
    return request.getfixturevalue("nginx_base")


@pytest.fixture
def bundle(fixtures):
    return os.path.join(fixtures, "bundle")


def read(path):
    with open(path, "rb") as f:
        return f.read()
