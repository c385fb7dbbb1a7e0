"""Outcome events and the data directory's outbox: what an update, the lifecycle and the open
append (read by another process), reading and acknowledging (never read again), the bound and
its drop count, a torn or zeroed tail, the events option, kill -9 while events are appended
and acknowledged; and the publisher's gate over real clients' events."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

import assetpatch
from conftest import CLI, ROOT, make_tree

HERE = os.path.dirname(os.path.abspath(__file__))


def cli(*args, check=True):
    return subprocess.run([CLI, *map(str, args)], check=check, capture_output=True, text=True)


def publish(tmp_path, version, files, *extra, repo="repo"):
    src = tmp_path / f"src{version}"
    make_tree(src, files)
    cli("publish", src, "--repo", tmp_path / repo, "--package", "events", "--version", version, *extra)
    return tmp_path / repo


def outbox_events(data):
    """The pending events as another process sees them (the CLI reads the outbox alone)."""
    out = cli("events", "--data-dir", data).stdout
    return [json.loads(line) for line in out.splitlines()]


def test_an_update_and_the_lifecycle_append_events_another_process_reads(tmp_path):
    repo = publish(tmp_path, 1, {"a.txt": b"one" * 1000, "b.bin": os.urandom(50_000)})
    data = tmp_path / "data"
    url = (repo / "head.json").as_uri()
    live = []
    with assetpatch.Client(data, manifest_url=url, app_version="2.1.0") as c:
        c.on_event(live.append)
        assert c.update() is True
        c.mark_good()
        c.mark_good()  # confirmed once: one event
        with pytest.raises(assetpatch.NotFoundError):
            c.load_plugin("optional")  # a host probing for a plugin the release lacks: no failure of the release
    events = outbox_events(data)
    kinds = [e["event"] for e in events]
    assert kinds == ["check", "download", "install", "activate", "marked_good"], kinds
    assert [e["seq"] for e in events] == [1, 2, 3, 4, 5]
    assert [e["seq"] for e in live] == [1, 2, 3, 4, 5]  # the live callback saw each as appended
    device = events[0]["device"]
    assert len(device) == 16 and int(device, 16) >= 0
    rollout_id = open(data / "rollout-id").read().strip()
    assert rollout_id not in json.dumps(events)  # the id itself is never reported
    for e in events:
        assert (e["package"], e["channel"], e["version"], e["app_version"], e["device"]) == ("events", "stable", 1, "2.1.0", device)
    check, download, install = events[0], events[1], events[2]
    assert (check["result"], check["reason"], check["rollout"]) == ("ok", None, None)
    assert download["result"] == "ok" and download["route"] in ("whole", "differential") and download["resumed"] is False
    assert 50_000 <= int(download["bytes"]) <= os.path.getsize(repo / "archives" / os.listdir(repo / "archives")[0]) + 4096
    assert install["result"] == "ok" and install["apply"] == "immediate"
    # A check finding nothing new, then a host's rollback.
    with assetpatch.Client(data, manifest_url=url) as c:
        assert c.check() is None
        c.rollback()
    tail = outbox_events(data)[5:]
    assert [(e["event"], e.get("result"), e.get("reason")) for e in tail] == [("check", "no_update", "current"), ("rollback", None, None)]
    assert (tail[1]["cause"], tail[1]["version"], tail[1]["to"]) == ("host", 1, 0)
    assert tail[1]["app_version"] == "2.1.0"  # kept from the session that set it


def test_a_crash_loop_rollback_is_appended_by_the_open_that_rolls_back(tmp_path):
    repo = publish(tmp_path, 1, {"a.txt": b"one"})
    data = tmp_path / "data"
    with assetpatch.Client(data, manifest_url=(repo / "head.json").as_uri(), max_failed_launches=1) as c:
        assert c.update() is True
    seen = len(outbox_events(data))
    # The app crashes before it can set anything: the opens alone append.
    for _ in range(2):
        subprocess.run([sys.executable, "-c", f"import assetpatch; assetpatch.Client({str(data)!r}).close()"], check=True,
                       env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "bindings", "python")})
    opens = outbox_events(data)[seen:]
    assert [(e["event"], e.get("launches"), e.get("cause")) for e in opens] == [
        ("launch", 1, None), ("launch", 2, None), ("rollback", None, "crash_loop")], opens
    assert opens[2]["version"] == 1 and opens[2]["to"] == 0 and opens[1]["max_failed_launches"] == 1


def test_read_acknowledge_and_the_cli(tmp_path):
    repo = publish(tmp_path, 1, {"a.txt": b"one"})
    data = tmp_path / "data"
    with assetpatch.Client(data, manifest_url=(repo / "head.json").as_uri()) as c:
        for _ in range(5):
            c.check()
        assert [e["seq"] for e in c.events()] == [1, 2, 3, 4, 5]
        one = len(json.dumps(c.events()[0], separators=(",", ":"))) + 1
        assert [e["seq"] for e in c.events(max_bytes=one)] == [1]  # whole lines only, at least one
        assert [e["seq"] for e in c.events(max_bytes=0)] == [1]
        # The C call at its boundary: a line and its NUL fit exactly; one byte less is ERR_RANGE
        # with the size needed.
        import ctypes
        line = (json.dumps(c.events()[0], separators=(",", ":")) + "\n").encode()
        for cap, rc in ((len(line) + 1, 0), (len(line), assetpatch.Status.ERR_RANGE)):
            buf, n, last = ctypes.create_string_buffer(cap), ctypes.c_size_t(), ctypes.c_uint64()
            assert c._lib.assetpatch_events_read(c._h(), buf, cap, ctypes.byref(n), ctypes.byref(last)) == rc
            assert n.value == len(line) and (rc != 0 or (buf.raw[:n.value] == line and last.value == 1 and buf.raw[n.value] == 0))
        c.ack_events(2)
        assert [e["seq"] for e in c.events()] == [3, 4, 5]
        c.ack_events(1)  # below an earlier acknowledgement: nothing changes
        assert c.events_info() == assetpatch.EventsInfo(3, 3, 5, 2, 0, c.events_info().bytes)
        with pytest.raises(assetpatch.ArgumentError):
            c.ack_events(6)
        # The CLI prints and acknowledges; the client sees it at once (one outbox).
        printed = [json.loads(line)["seq"] for line in cli("events", "--data-dir", data, "--ack").stdout.splitlines()]
        assert printed == [3, 4, 5] and c.events() == [] and cli("events", "--data-dir", data).stdout == ""
        c.check()
        assert [e["seq"] for e in c.events()] == [6]  # numbers go on after an emptied log
    info = json.loads(cli("events", "--data-dir", data, "--info").stdout)
    assert (info["pending"], info["acked_seq"], info["last_seq"]) == (1, 5, 6)


def test_the_bound_drops_the_oldest_and_counts_them(tmp_path):
    repo = publish(tmp_path, 1, {"a.txt": b"one"})
    data = tmp_path / "data"
    with assetpatch.Client(data, manifest_url=(repo / "head.json").as_uri(), events_max_bytes=65536) as c:
        n = 0
        while c.events_info().dropped == 0:
            c.check()
            n += 1
            assert n < 2000
        info = c.events_info()
        assert info.bytes <= 65536 and info.last_seq == n and info.pending + info.dropped == n
        seqs = [e["seq"] for e in c.events(max_bytes=1 << 20)]
        assert seqs == list(range(n - info.pending + 1, n + 1))  # the newest kept, in order
        c.ack_events(n)
        for _ in range(3):
            c.check()
        assert [e["seq"] for e in c.events()] == [n + 1, n + 2, n + 3]


def test_a_torn_or_zeroed_tail_is_cut_and_numbers_go_on(tmp_path):
    repo = publish(tmp_path, 1, {"a.txt": b"one"})
    data = tmp_path / "data"
    url = (repo / "head.json").as_uri()
    with assetpatch.Client(data, manifest_url=url) as c:
        c.check()
        c.check()
    log = data / "events" / "log"
    lines = open(log, "rb").read().splitlines(keepends=True)
    # A power cut: the second line half written, then blocks of zeros the size never covered.
    with open(log, "wb") as f:
        f.write(lines[0] + lines[1][:40] + b"\0" * 5000)
    with assetpatch.Client(data, manifest_url=url) as c:
        assert [e["seq"] for e in c.events()] == [1]
        c.check()
        assert [e["seq"] for e in c.events()] == [1, 2]
    assert b"\0" not in open(log, "rb").read()
    # A line whose bytes changed fails its CRC and is skipped, not misread.
    raw = bytearray(open(log, "rb").read())
    raw[raw.index(b'"check"') + 2] ^= 0x01
    open(log, "wb").write(bytes(raw))
    assert [e["seq"] for e in outbox_events(data)] == [2]


def test_clients_with_different_bounds_share_one_outbox(tmp_path):
    """A client whose bound is small never loses events a larger bound kept, except by its own
    appends (counted); an acknowledgement sheds only acknowledged events."""
    repo = publish(tmp_path, 1, {"a.txt": b"one"})
    data = tmp_path / "data"
    url = (repo / "head.json").as_uri()
    with assetpatch.Client(data, manifest_url=url, events_max_bytes=1 << 20) as big:
        while big.events_info().bytes < 100_000:
            big.check()
        n = big.events_info().last_seq
    with assetpatch.Client(data, manifest_url=url, events_max_bytes=65536) as small:
        assert len(small.events(max_bytes=1 << 20)) == n  # read whole, whatever its own bound
        small.ack_events(1)  # compacts (the log is past a quarter of 64 KiB): acknowledged events only
        assert [e["seq"] for e in small.events(max_bytes=1 << 20)] == list(range(2, n + 1))
        assert small.events_info().dropped == 0
        small.check()  # its own append past its bound drops the oldest, and counts them
        info = small.events_info()
        assert info.dropped > 0 and info.bytes <= 65536 and info.last_seq == n + 1
    assert json.loads(cli("events", "--data-dir", data, "--info").stdout)["dropped"] == info.dropped


def test_a_damaged_or_lost_outbox_never_hands_out_a_number_again(tmp_path):
    repo = publish(tmp_path, 1, {"a.txt": b"one"})
    data = tmp_path / "data"
    url = (repo / "head.json").as_uri()
    with assetpatch.Client(data, manifest_url=url) as c:
        for _ in range(3):
            c.check()
        c.ack_events(2)
        stream = c.events()[0]["stream"]
        assert len(stream) == 16 and all(e["stream"] == stream for e in c.events())
    # Damaged acknowledgement record (numbers past 2^53, the limit every JSON reader keeps exact):
    # every event in the log is read again, numbering goes on, the stream is kept.
    (data / "events" / "acked").write_text('{"acked":2,"last":18446744073709551615,"dropped":0,"stream":"%s"}' % stream)
    with assetpatch.Client(data, manifest_url=url) as c:
        c.check()
        assert [(e["seq"], e["stream"]) for e in c.events()] == [(s, stream) for s in (1, 2, 3, 4)]
    # The outbox lost: numbers start again, under a new stream.
    import shutil
    shutil.rmtree(data / "events")
    with assetpatch.Client(data, manifest_url=url) as c:
        c.check()
        again = c.events()
        assert [e["seq"] for e in again] == [1] and again[0]["stream"] != stream


def test_events_off_is_kept_for_later_opens(tmp_path):
    repo = publish(tmp_path, 1, {"a.txt": b"one"})
    data = tmp_path / "data"
    url = (repo / "head.json").as_uri()
    with assetpatch.Client(data, manifest_url=url, events="0", max_failed_launches=3) as c:
        assert c.update() is True
    with assetpatch.Client(data, manifest_url=url) as c:  # this open's launch: not appended either
        c.check()
        assert c.events() == []
        c.set("events", "1")
        c.check()
        assert [e["event"] for e in c.events()] == ["check"]


KILL_CHILD = r"""
import os, random, sys
sys.path.insert(0, sys.argv[3])
import assetpatch
data, logdir = sys.argv[1], sys.argv[2]
def line(name, text):
    with open(os.path.join(logdir, name), "a") as f:
        f.write(text + "\n"); f.flush(); os.fsync(f.fileno())
with assetpatch.Client(data, manifest_url=sys.argv[4], events_max_bytes=1 << 20) as c:
    c.on_event(lambda e: line("appended", str(e["seq"])))
    rnd = random.Random(os.getpid())
    while True:
        c.check()
        if rnd.random() < 0.3:
            batch = c.events(max_bytes=rnd.randrange(1, 4000))
            for e in batch:
                line("delivered", str(e["seq"]))
            if batch:
                c.ack_events(batch[-1]["seq"])
                line("acked", str(batch[-1]["seq"]))
"""


def test_kill_9_while_events_are_appended_and_acknowledged(tmp_path):
    """After each kill: every event appended is either acknowledged or still pending, an
    acknowledged event is never read again, and no sequence number is given twice."""
    repo = publish(tmp_path, 1, {"a.txt": b"one"})
    data, logs = tmp_path / "data", tmp_path / "logs"
    os.makedirs(logs)
    script = tmp_path / "child.py"
    script.write_text(KILL_CHILD)
    rnd = random.Random(7)
    env = {**os.environ}
    for round_ in range(8):
        child = subprocess.Popen([sys.executable, str(script), str(data), str(logs), os.path.join(ROOT, "bindings", "python"),
                                  (repo / "head.json").as_uri()], env=env)
        # Let it append and acknowledge a while (counted in events, not in time).
        target = len(read_log(logs, "appended")) + rnd.randrange(20, 120)
        while len(read_log(logs, "appended")) < target:
            assert child.poll() is None, "the child died"
            time.sleep(0.005)
        time.sleep(rnd.random() * 0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
        appended = read_log(logs, "appended")
        assert len(appended) == len(set(appended)), "a sequence number was given twice"
        acked = max(read_log(logs, "acked") or [0])
        with assetpatch.Client(data, events="1") as c:
            pending = [e["seq"] for e in c.events(max_bytes=1 << 24)]
            info = c.events_info()
        assert all(s > acked for s in pending), f"read again after acknowledgement (acked {acked})"
        assert info.acked_seq >= acked
        lost = [s for s in appended if s > info.acked_seq and s not in pending]
        assert lost == [], f"appended, never acknowledged, gone: {lost[:10]}"
        assert pending == sorted(pending) and info.dropped == 0
    assert len(read_log(logs, "acked")) >= 4  # the kills landed among acknowledgements too


def read_log(logs, name):
    try:
        return [int(x) for x in open(logs / name).read().split()]
    except FileNotFoundError:
        return []


def head_rollout(repo):
    head = json.load(open(repo / "head.json"))
    if "payload" in head:
        import base64
        head = json.loads(base64.b64decode(head["payload"]))
    return head.get("rollout")


def run_fleet(tmp_path, repo, count, crash, pubkey):
    """`count` clients each update and run the release; those `crash` picks (by the order they
    installed it in: 0, 1, ...) crash before mark_good until an open rolls back. Returns their
    exported events and the devices that activated it."""
    url = (repo / "head.json").as_uri()
    lines, activated = [], 0
    for i in range(count):
        data = tmp_path / "fleet" / str(i)
        with assetpatch.Client(data, manifest_url=url, public_keys=[pubkey], max_failed_launches=1) as c:
            installed = c.update()
            if installed and not crash(activated):
                c.mark_good()
        if installed:
            activated += 1
            if crash(activated - 1):
                for _ in range(2):
                    assetpatch.Client(data).close()
        with assetpatch.Client(data) as c:
            lines += [json.dumps(e) for e in c.events(max_bytes=1 << 20)]
    export = tmp_path / "events.jsonl"
    with open(export, "a") as f:
        f.write("".join(line + "\n" for line in lines))
    return export, activated


def gate_repo(tmp_path, content):
    """A signed release offered to 40%, and a policy: steps 40, 80, 100; 5 devices; 10% crash loops."""
    cli("keygen", "--out", tmp_path / "k.key")
    pub = open(tmp_path / "k.key.pub").read().strip()
    repo = publish(tmp_path, 1, {"a.txt": content}, "--rollout", "40", "--key", tmp_path / "k.key")
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"steps": [40, 80, 100], "min_devices": 5, "max_crash_loop_rate": 0.1}))
    return repo, pub, policy


def test_the_gate_halts_a_crash_looping_release_from_real_clients(tmp_path):
    repo, pub, policy = gate_repo(tmp_path, b"bad")
    export, activated = run_fleet(tmp_path, repo, 40, lambda i: i % 3 == 0, pub)
    assert 5 <= activated < 40  # about 40% took it
    before = open(repo / "head.json", "rb").read()
    held = cli("rollout", "advance", "--repo", repo, "--policy", policy, "--events", tmp_path / "nothing.jsonl", check=False)
    assert held.returncode == 3  # a missing export is a failure, not an empty sample
    (tmp_path / "empty.jsonl").write_text("")
    held = cli("rollout", "advance", "--repo", repo, "--policy", policy, "--events", tmp_path / "empty.jsonl", "--key",
               tmp_path / "k.key", check=False)
    assert held.returncode == 2 and "hold" in held.stdout and open(repo / "head.json", "rb").read() == before
    gate = cli("rollout", "advance", "--repo", repo, "--policy", policy, "--events", export, "--key", tmp_path / "k.key",
               "--json", check=False)
    decision = json.loads(gate.stdout)
    assert gate.returncode == 4 and decision["decision"] == "halt" and decision["to"] == 0, gate.stdout
    assert decision["counts"]["crash_loops"] >= 2 and decision["rates"]["crash_loop_rate"]["crossed"] is True
    assert head_rollout(repo) == {"percent": 0}
    assert cli("verify", repo, "--public-key", pub).returncode == 0  # signed, by the key clients pin
    # A client that checks now is not offered it; one that had it keeps it or rolled back.
    fresh = cli("check", "--data-dir", tmp_path / "fresh", "--url", (repo / "head.json").as_uri(), "--public-key", pub, check=False)
    assert fresh.returncode == 4
    again = cli("rollout", "advance", "--repo", repo, "--policy", policy, "--events", export, check=False)
    assert again.returncode == 0 and "halted" in again.stdout


def test_the_gate_advances_a_healthy_release_step_by_step(tmp_path):
    repo, pub, policy = gate_repo(tmp_path, b"good")
    shares = []
    for _ in range(3):
        export, _ = run_fleet(tmp_path, repo, 40, lambda i: False, pub)  # 40% of 40: 5 or more but once in 10^4
        gate = cli("rollout", "advance", "--repo", repo, "--policy", policy, "--events", export, "--key", tmp_path / "k.key",
                   check=False)
        assert gate.returncode == 0, gate.stdout + gate.stderr
        shares.append(head_rollout(repo))
    assert shares == [{"percent": 80}, None, None]  # 100%: the rollout leaves the manifest
    assert "complete" in gate.stdout


def test_the_gate_run_twice_on_one_export_takes_one_step(tmp_path):
    """An advance needs min_devices settled at the share in force: the 40% wave's devices move
    it to 80%, and the same export run again (a retry, a scheduler) holds there."""
    repo, pub, policy = gate_repo(tmp_path, b"good")
    export, _ = run_fleet(tmp_path, repo, 40, lambda i: False, pub)
    args = ("rollout", "advance", "--repo", repo, "--policy", policy, "--events", export, "--key", tmp_path / "k.key")
    assert cli(*args, check=False).returncode == 0 and head_rollout(repo) == {"percent": 80}
    held = cli(*args, check=False)
    assert held.returncode == 2 and "at 80%" in held.stdout and head_rollout(repo) == {"percent": 80}, held.stdout
