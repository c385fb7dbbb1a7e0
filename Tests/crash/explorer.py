"""One flow explored: its data directory prepared, its call traced, the crash states of the
trace under each model opened (each distinct state once), and the same for the trace without
each kind of sync (the mutation gate)."""
import hashlib
import os
import random
import shutil
import sys

from flows import (FLOWS, ROOT, publish, publish_options, publish_signed, published_files, release_files, repositories, run_step,
                   start_server, write_tree)
from model import MODELS, State, crash_states, parse, resolve, sync_kind, without_syncs, SYNC_OPS
from verdict import check_in_child, collect, outbox


class Traced:
    """A flow's trace and what the checks need: the state before it, the URL an update after a
    crash uses, the published files, and the verdicts of states opened so far (by key)."""

    def __init__(self, name, work, before, ops, url, published, server=None):
        self.name, self.work, self.before, self.ops = name, work, before, ops
        self.label = name
        self.options = {}  # the client's options (the pinned key of a signed flow)
        self.refuse_url = None  # a manifest that must be refused once the call returned
        self.then_url = None  # a next release an update after the crash state's must install
        self.url, self.published, self.server = url, published, server
        self.data = os.path.join(work, "data")
        self.verdicts = {}  # (state key, returned) -> message or None
        # The outbox before the call and after it: (pending before, pending after, acked after).
        self.events = None

    def states(self, model, ops=None):
        return crash_states(self.before, self.ops if ops is None else ops, model, seed=len(self.name))

    def open(self, entries, jobs=2, stop_at_first=False):
        """Opens (state, why) entries keyed (key, returned) not judged yet; returns
        [(why, message)] for the inconsistent ones among `entries`."""
        expect = FLOWS[self.name].expect
        bad = []
        running = []

        def finish(item):
            (pid, r), d, k, why = item
            msg = collect(pid, r)
            shutil.rmtree(d, ignore_errors=True)
            self.verdicts[k] = msg
            if msg:
                bad.append((why, msg))

        for n, (k, (state, why)) in enumerate(entries):
            if k in self.verdicts:
                if self.verdicts[k]:
                    bad.append((why, self.verdicts[k]))
                continue
            if stop_at_first and bad:
                break
            d = os.path.join(self.work, f"state-{n}")
            shutil.rmtree(d, ignore_errors=True)
            state.materialize(d)
            args = (d, os.path.join(self.work, "bundle"), self.url, expect, k[1], self.published, self.options, self.refuse_url,
                    self.events, self.then_url)
            running.append((check_in_child(args), d, k, why))
            if len(running) >= jobs:
                finish(running.pop(0))
        for item in running:
            finish(item)
        return bad

    def sync_kinds(self):
        return sorted({sync_kind(o, self.data) for o in self.ops if o["op"] in SYNC_OPS})

    def close(self):
        if self.server:
            self.server.__exit__(None, None, None)
            self.server = None


def prepare(name, base, data_from=None):
    """Publishes the flow's two releases, prepares its data directory and traces its call."""
    flow = FLOWS[name]
    work = os.path.join(base, name if data_from is None else name + "-" + hashlib.sha256(data_from.encode()).hexdigest()[:8])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    shutil.copy(os.path.join(base, "fstrace.so"), os.path.join(work, "fstrace.so"))
    chunking = publish_options(name)
    published = published_files(name)
    options = {}
    if flow.signed:
        options = publish_signed(work, name, chunking, flow.signed)
    else:
        for repo, v in repositories(name):
            publish(os.path.join(work, repo), v, release_files(v, name), chunking)
    write_tree(os.path.join(work, "bundle"), release_files(0, name))
    data = os.path.join(work, "data")
    if data_from:
        shutil.copytree(data_from, data, symlinks=True)
    else:
        os.makedirs(data)
    trace = os.path.join(work, "trace.log")
    server = serving = None
    if flow.http:
        sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))
        from nginxctl import Nginx
        os.makedirs(os.path.join(work, "nginx"))
        server = Nginx(work, os.path.join(work, "nginx"))
        server.__enter__()
    try:
        base_url = server.url("").rstrip("/") if server else None
        for step, opts in flow.prep:
            if step == "serve":
                serving = start_server(work, options)
            else:
                run_step(work, step, {**options, **opts}, base_url=base_url)
        if name == "resumed_download":
            cut_partial(data)
        before = State.snapshot(data)
        events_before = outbox(data)[0]
        run_step(work, flow.traced[0], {**options, **flow.traced[1]}, trace=trace, base_url=base_url)
        events_after = outbox(data)
    except BaseException:
        if server:
            server.__exit__(None, None, None)
        raise
    finally:
        if serving:
            serving.communicate("")
    url = (base_url or "file://" + work) + "/repo2/head.json"
    t = Traced(name, work, before, resolve(before.root, before.paths, parse(trace)), url, published, server)
    t.options = options
    t.events = (events_before, events_after[0], events_after[1])
    if flow.expect.refuses_after:
        t.refuse_url = (base_url or "file://" + work) + f"/{flow.expect.refuses_after}/head.json"
    if flow.then:
        t.then_url = (base_url or "file://" + work) + "/next/head.json"
    return t


def cut_partial(data):
    """The cancelled update may have got further than the cancel over loopback: its partial
    archive is cut to 40% and what it extracted dropped, so the traced update resumes with a
    Range request for the rest."""
    downloads = os.path.join(data, "downloads")
    parts = [os.path.join(downloads, p) for p in os.listdir(downloads) if p.endswith(".part")]
    if not parts or not os.path.getsize(parts[0]):
        raise RuntimeError("the cancelled update left no partial archive to resume")
    os.truncate(parts[0], os.path.getsize(parts[0]) * 2 // 5)
    for p in os.listdir(downloads):
        if p.endswith(".files"):
            shutil.rmtree(os.path.join(downloads, p))


def pick(states, sample, rng):
    items = sorted(states.items(), key=lambda kv: (kv[0][1], kv[1][1]))
    if sample is None or sample >= len(items):
        return items
    return rng.sample(items, sample)


def likely_first(states, cap, rng):
    """At most `cap` states, those a missing sync most likely breaks first: after the call
    returned (its promise must hold), then the strict power cuts (only what was durable)."""
    items = list(states.items())
    rng.shuffle(items)
    items.sort(key=lambda kv: (not kv[0][1], "only durable" not in kv[1][1]))
    return items[:cap]


def mutate(t, kind, baseline, rng, cap):
    """The trace without every sync of `kind`: the new crash states it allows (those no model
    allows with the sync) opened, at most `cap` a model, until one is inconsistent. Returns
    (model, why, message) of the first, or None, and how many new states there were."""
    ops = without_syncs(t.ops, t.data, kind)
    new_total = 0
    for model in MODELS:
        states = t.states(model, ops)
        new = {k: v for k, v in states.items() if k not in baseline}
        new_total += len(new)
        chosen = likely_first(new, cap, rng)
        bad = t.open(chosen, stop_at_first=True)
        if bad:
            return (model, bad[0][0], bad[0][1]), new_total
    return None, new_total


def recovery_bases(t, count, rng):
    """Crash states of a flow worth a second crash: those where opening has work to do (a
    staging directory, a release the state does not name, a temporary file)."""
    states = t.states("ordered")
    busy = []
    for (key, returned), (state, why) in states.items():
        if returned:
            continue  # the first call had promised its outcome: a recovery must keep it, checked apart
        rel = [p[len(t.data):] for p in state.reachable_paths()]
        if any(p.startswith("/staging/") or ".tmp." in p for p in rel):
            busy.append((key, state))
    busy.sort()
    return rng.sample(busy, min(count, len(busy)))


def materialize_base(t, state, base):
    d = os.path.join(base, f"recovery-base-{state.key() & 0xffffffff:08x}")
    shutil.rmtree(d, ignore_errors=True)
    state.materialize(d)
    return d


def seeded(seed, name):
    return random.Random(f"{seed}:{name}")
