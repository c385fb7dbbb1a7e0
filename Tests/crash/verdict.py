"""Opens a crash state as a fresh process of the app would, and says what is wrong with it."""
import hashlib
import json
import os
import re
import zlib


def sha(data):
    return hashlib.sha256(data).hexdigest()


def file_sha(path):
    with open(path, "rb") as f:
        return sha(f.read())


def outbox(data):
    """The pending events' seqs and the acknowledged seq, read as docs/release-management.md
    describes the outbox (not through the library): whole lines "CRC32HEX JSON" whose CRC holds,
    numbers increasing; events/acked's "acked"."""
    events, acked = outbox_events(data)
    return [e["seq"] for e in events if e["seq"] > acked], acked


def outbox_events(data):
    """Every whole, valid event of the log (acknowledged or not), and the acknowledged seq."""
    acked = 0
    try:
        acked = int(json.load(open(os.path.join(data, "events", "acked")))["acked"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        raw = open(os.path.join(data, "events", "log"), "rb").read()
    except OSError:
        raw = b""
    events = []
    for line in raw.split(b"\n")[:-1]:
        if len(line) > 9 and line[8:9] == b" " and re.fullmatch(rb"[0-9a-f]{8}", line[:8]) and int(line[:8], 16) == zlib.crc32(line[9:]):
            try:
                event = json.loads(line[9:])
                seq = event["seq"]
            except (ValueError, KeyError):
                continue
            if not events or seq > events[-1]["seq"]:
                events.append(event)
    return events, acked


def outbox_problem(data, expected, returned):
    """What is wrong with the outbox of a crash state: `expected` is (the pending seqs before the
    traced call, after it, the acknowledged seq after it). Before the call returned, nothing
    unknown is pending and nothing pending before (and not acknowledged since) is lost; once it
    returned, exactly what the call left is pending (its appends and acknowledgement durable)."""
    before, after, acked_after = expected
    pending, acked = outbox(data)
    if returned:
        if pending != after or acked != acked_after:
            return f"the outbox has events {pending} pending (acknowledged through {acked}) after the call returned, expected {after} (through {acked_after})"
        return None
    unknown = sorted(set(pending) - set(before) - set(after))
    if unknown:
        return f"the outbox has events {unknown} that no run appended"
    lost = [s for s in before if s > acked and s not in pending]
    if lost:
        return f"events {lost}, pending before the call and not acknowledged, are lost"
    return None


def check_state(data, bundle, url, expect, returned, published, options=None, refuse_url=None, events=None, then_url=None):
    """Runs in a forked child that has not loaded the library yet. `published`: each version's
    files by path, as sha256 (version 0: the bundle); `options`: the client's (a pinned key);
    `refuse_url`: a manifest an update must refuse once the call returned (a retired key's);
    `then_url`: a next release that an update after the final one must install exactly (what
    the call left for later updates, such as the spare tree, built on).
    Returns an error message, or None."""
    import assetpatch
    from fnmatch import fnmatchcase

    group = expect.group[0] if expect.group else None
    in_group = (lambda p: fnmatchcase(p, expect.group[1])) if expect.group else (lambda p: False)

    def served(c, group_required=False):
        """The version served, every file of it resolved and hashed against what was published;
        a group's files all resolve, or none does (all not local)."""
        v = c.current_version
        if v not in published:
            return f"serves version {v}, which was never published"
        absent = []
        for path, digest in published[v].items():
            try:
                got = file_sha(c.resolve(path))
            except assetpatch.NotLocalError as e:
                if not in_group(path) or group_required:
                    return f"{path} of version {v} is not local: {e}"
                absent.append(path)
                continue
            except (OSError, assetpatch.AssetPatchError) as e:
                return f"{path} of version {v} does not resolve: {e}"
            if got != digest:
                return f"{path} of version {v} resolves to bytes that are not the published ones"
        whole = [p for p in published[v] if in_group(p)]
        if absent and len(absent) != len(whole):
            return f"group {group} of version {v} is partly on disk: {len(absent)} of {len(whole)} files not local"
        if group and v > 0 and (c.group(group).state == "local") != (not absent):
            return f"group {group} of version {v} is {c.group(group).state}, yet {len(whole) - len(absent)} of its files resolve"
        return v

    def on_disk(version):
        """Whether `version` is listed by the state and all its files hash as published."""
        try:
            state = json.load(open(os.path.join(data, "state.json")))
        except (OSError, ValueError) as e:
            return f"state.json unreadable ({e})"
        refs = [r for r in [state.get("active"), state.get("pending")] + state.get("kept", []) if r]
        ref = next((r for r in refs if r["version"] == version), None)
        if ref is None:
            return f"version {version} is no longer listed (the state has {sorted(r['version'] for r in refs)})"
        files = os.path.join(data, "releases", ref["id"], "files")
        local = group in state.get("groups", {}).get("local", {}).get(ref["id"], [])
        for path, digest in published[version].items():
            if in_group(path) and not local:
                continue
            where = os.path.join(data, "releases", ref["id"], "groups", group) if in_group(path) else files
            try:
                if file_sha(os.path.join(where, path)) != digest:
                    return f"version {version}'s {path} on disk is not the published one"
            except OSError as e:
                return f"version {version}'s {path} is missing on disk ({e.strerror})"
        return None

    allowed = expect.after if returned else expect.before
    when = "after the call returned" if returned else "before the call returned"
    if events:
        problem = outbox_problem(data, events, returned)
        if problem:
            return problem
    seen = max(outbox(data)[0] + [outbox(data)[1]])
    with assetpatch.Client(data, bundle, **(options or {})) as c:
        v = served(c, group_required=returned and expect.group_after)
        if isinstance(v, str):
            return v
        if v not in allowed:
            return f"serves version {v} {when}, expected one of {allowed}"
        info = c.release_info("active")  # the release's record: what plugins and release info read
        if (info.version if info else 0) != v:
            return f"the active release's record says version {info.version if info else None}, not {v}"
        for keep in expect.kept:
            if keep != v:
                problem = on_disk(keep)
                if problem:
                    return f"version {keep}, active or kept before the flow, is lost: {problem}"
        if returned and expect.marked_after and not c.lifecycle.marked_good:
            return f"version {v} is not marked good, though mark_good returned"
        if returned and refuse_url:
            c.set("manifest_url", refuse_url)
            try:
                c.update()
            except assetpatch.AssetPatchError:
                pass
            if c.current_version != v:
                return f"after the call returned, an update to {refuse_url} was accepted (serves version {c.current_version})"
        c.set("manifest_url", url)
        c.update()
        v2 = served(c, group_required=returned and expect.group_after)
        if isinstance(v2, str):
            return "after an update: " + v2
        final = expect.final[v] if isinstance(expect.final, dict) else expect.final
        if v2 != final:
            return f"the update after the crash serves version {v2}, not {final}"
        if then_url:
            c.set("manifest_url", then_url)
            c.update()
            v3 = served(c)
            if isinstance(v3, str):
                return "after an update to the next release: " + v3
            if v3 != max(published):
                return f"the update to the next release serves version {v3}, not {max(published)}"
    later, _ = outbox(data)
    fresh = [s for s in later if s > seen]
    if not fresh or fresh != later[len(later) - len(fresh):]:
        return f"the events appended after the crash are numbered {later} (the crash state's highest was {seen}): a number given again"
    devices = {e.get("device") for e in outbox_events(data)[0]}
    if len(devices) != 1 or None in devices:
        return f"the events carry device ids {sorted(map(str, devices))}: one data directory is one device (its rollout id was lost?)"
    return None


def check_in_child(args):
    """Forks; the child checks the state and reports on a pipe. Returns (pid, read end)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        # The library's own log (warnings about what the state holds) is not the verdict.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        try:
            msg = check_state(*args)
        except BaseException as e:  # noqa: BLE001 - any failure of the library is the finding
            msg = f"{type(e).__name__}: {e}"
        os.write(w, (msg or "").encode()[:4000])
        os._exit(0)
    os.close(w)
    return pid, r


def collect(pid, r):
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    msg = b"".join(chunks).decode()
    if status != 0 and not msg:
        msg = f"the checking process died (status {status})"
    return msg or None
