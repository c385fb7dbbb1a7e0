"""Which failures are retried: transient ones (resets, stalls, 5xx, 429 with Retry-After) are,
with the download resuming; what a retry can't change (a redirect loop, a redirect to another
scheme, a 4xx, TLS verification) fails at once. Request counts come from the fault server;
every failed update logs its message once at error level."""
import logging

import pytest

import assetpatch
from conftest import archive_log, assert_serves


def client(tmp_path, url, **options):
    return assetpatch.Client(str(tmp_path / "data"), manifest_url=url, **options)


def retry_lines(caplog):
    return [r for r in caplog.records if r.name == "assetpatch" and "retry" in r.getMessage()]


def error_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "assetpatch" and r.levelno == logging.ERROR]


def test_redirect_loop_fails_after_one_round_of_redirects(tmp_path, fault, caplog):
    caplog.set_level(logging.DEBUG, logger="assetpatch")
    with client(tmp_path, fault.base + "/_loop/manifest.json") as c:
        with pytest.raises(assetpatch.NetworkError) as e:
            c.update()
    assert "redirect" in e.value.message.lower()
    assert fault.stats()["loop_requests"] == 6, "the request and 5 redirects, not retried"
    assert not retry_lines(caplog)
    assert error_lines(caplog) == [e.value.message]


def test_archive_404_fails_at_once(tmp_path, fault, repos, caplog):
    caplog.set_level(logging.DEBUG, logger="assetpatch")
    fault.control("404")
    with client(tmp_path, fault.url("v2")) as c:
        with pytest.raises(assetpatch.HTTPError) as e:
            c.update()
        assert "404" in e.value.message
        assert c.current_version == 0
    assert len(archive_log(fault)) == 1
    assert not retry_lines(caplog)


def test_429_with_retry_after_is_retried_after_the_delay(tmp_path, fault, repos, caplog):
    caplog.set_level(logging.DEBUG, logger="assetpatch")
    fault.control("429", n=1, times=1)
    with client(tmp_path, fault.url("v2")) as c:
        assert c.update() is True
        assert_serves(c, repos["v2"])
    assert [e["status"] for e in archive_log(fault)] == [429, 200]
    lines = [r.getMessage() for r in retry_lines(caplog)]
    assert len(lines) == 1 and "in 1000 ms" in lines[0], lines


def test_429_without_retry_after_fails_at_once(tmp_path, fault, repos):
    fault.control("429", n=0)
    with client(tmp_path, fault.url("v2")) as c:
        with pytest.raises(assetpatch.HTTPError) as e:
            c.update()
        assert "429" in e.value.message
    assert len(archive_log(fault)) == 1


def test_retry_after_beyond_the_bound_fails_at_once(tmp_path, fault, repos):
    fault.control("429", n=3600)
    with client(tmp_path, fault.url("v2")) as c:
        with pytest.raises(assetpatch.HTTPError) as e:
            c.update()
        assert "retry after 3600 s" in e.value.message
    assert len(archive_log(fault)) == 1


def test_failed_check_logs_its_message_at_error_level(tmp_path, fault, caplog):
    caplog.set_level(logging.DEBUG, logger="assetpatch")
    with client(tmp_path, fault.base + "/_loop/manifest.json") as c:
        with pytest.raises(assetpatch.NetworkError) as e:
            c.check()
    assert error_lines(caplog) == [e.value.message]


def test_a_body_trickling_past_the_stall_timeout_ends_the_update(tmp_path, fault, repos, caplog):
    # One byte every 100 ms beats a 2 s stall timeout for ever; the minimum speed (1 KiB/s over
    # 500 ms) ends each attempt, and the update gives up after its retries, releasing its lock.
    caplog.set_level(logging.DEBUG, logger="assetpatch")
    fault.control("trickle", n=100)
    with client(tmp_path, fault.url("v2"), stall_timeout_ms=2000, low_speed_limit=1024, low_speed_time_ms=500,
                differential="off") as c:
        c.start_update()
        with pytest.raises(assetpatch.NetworkError) as e:
            c.wait(timeout=120)  # TimeoutError, failing the test, if it never ends
    assert "slower than low_speed_limit" in e.value.message
    assert len(retry_lines(caplog)) >= 3
    fault.reset()
    with client(tmp_path, fault.url("v2")) as c:
        assert c.update() is True, "the lock was released"
        assert_serves(c, repos["v2"])
