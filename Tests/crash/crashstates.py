#!/usr/bin/env python3
"""Crash-state explorer: what a power cut during an update can leave, opened by the library.

For each flow (flows.py: a first install, full, differential and chunked updates, a rollback,
mark_good, an app upgrade, garbage collection, also while another process serves the old
release, a resumed download, the manifest cache over HTTP, a next-open activation, the fetch
of an on-demand group, and a second crash while opening after a first) it
1. snapshots the data directory before the flow and runs the flow in a process whose
   file-system calls under the data directory are recorded (fstrace.so, LD_PRELOAD; a call
   the model does not know fails the run, naming it), with a mark where the call returned;
2. builds, from the snapshot and the trace, the states a crash at each point could leave
   under each file-system model (model.py: "ordered" and "directory"), and keeps the distinct
   ones;
3. opens each state with the library in a fresh process and checks it (verdict.py): every file
   served hashes as published (the bundle too), what the call promised holds once it returned
   (the new release after an update, the mark after mark_good, the old release after a
   rollback), the releases kept before the flow are still on disk, every file hashing as
   published, and an update afterwards serves the newest release;
4. the mutation gate: the trace without each kind of sync the library issued (model.sync_kind)
   must allow a state that fails the check under some model, or the kind is listed in
   NOT_NEEDED with the reason; a kind listed there that is caught, or one neither caught nor
   listed, fails the run.

    crashstates.py [--flows a,b,...] [--sample N] [--mutation-cap N] [--no-mutations]
                   [--seed S] [--work DIR] [--results FILE]
The last line reads "N crash states, M inconsistent[, mutation gate: ...]".
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from explorer import materialize_base, mutate, pick, prepare, recovery_bases, seeded  # noqa: E402
from flows import FLOWS, LIB, ROOT  # noqa: E402
from model import MODELS, UnsupportedCall  # noqa: E402
from report import write_results  # noqa: E402

# Syncs whose removal no model can turn into a wrong state, and why the library issues them.
PARTIAL = ("the record of a partial download (its URL and validator): when it is lost or torn, the partial "
           "archive is not resumed but downloaded again from byte 0, and every archive is checked against its "
           "digest; the sync only keeps a resume possible after a power cut")
NOT_NEEDED = {
    "directory downloads": PARTIAL,
    "fsync downloads/<sha256>.meta.tmp": PARTIAL,
    "directory spare": ("the spare tree's name (the rename that completes it, the rename that takes it): lost, the next "
                        "update finds no spare, or the spare a crash left, which is complete and matches its record (its "
                        "contents are durable before it is named), and builds the release from it or by links"),
    "fsync manifest-cache.tmp": ("the manifest cache only supplies validators for a conditional request; a cache "
                                 "lost or torn is not used (a 200 instead of a 304), and a manifest answered by a 304 "
                                 "is verified like a fetched one"),
}


def explore_flow(t, sample, rng, verbose, counts, failures):
    """Opens the flow's states under each model; returns every model's keys (the baseline the
    mutation gate compares against)."""
    baseline = set()
    for model in MODELS:
        states = t.states(model)
        baseline |= set(states)
        chosen = pick(states, sample, rng)
        bad = t.open(chosen)
        counts[(t.label, model)] = (len(t.ops), len(states), len(chosen), len(bad))
        for why, msg in bad[:3 if not verbose else None]:
            failures.append(f"{t.label} [{model}] {why}: {msg.splitlines()[-1]}")
        print(f"{t.label} [{model}]: {len(t.ops)} operations traced, {len(states)} distinct crash states, "
              f"{len(chosen)} opened, {len(bad)} inconsistent", flush=True)
    return baseline


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flows", default=",".join(FLOWS))
    ap.add_argument("--sample", type=int, default=None, help="open at most this many states per flow and model (random, seeded)")
    ap.add_argument("--mutation-cap", type=int, default=200, help="new states opened per model for each removed sync")
    ap.add_argument("--no-mutations", action="store_true")
    ap.add_argument("--gate-tries", type=int, default=None,
                    help="flows a sync not caught yet is taken out of (default: every flow it occurs in)")
    ap.add_argument("--recovery-bases", type=int, default=6, help="first-crash states a second crash is explored from")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", default=None)
    ap.add_argument("--results", default=None, help="write the results (markdown) here")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    # In memory where there is a tmpfs: thousands of states are written, opened and updated, and
    # what is checked is the library's reading of them, not the disk's speed at fsync.
    scratch = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else os.environ.get("TMPDIR", "/var/tmp")
    base = a.work or tempfile.mkdtemp(prefix="assetpatch-crash.", dir=scratch)
    os.makedirs(base, exist_ok=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", os.path.join(base, "fstrace.so"), os.path.join(HERE, "fstrace.c"), os.path.join(HERE, "fstrace_refused.c"),
                    "-ldl", "-lpthread"], check=True)
    os.environ["ASSETPATCH_LIBRARY"] = LIB
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import assetpatch  # noqa: F401 - the module only; each checking child loads the library
    print(f"seed {a.seed}" + (f", {a.sample} states a flow and model" if a.sample else ", every state"), flush=True)
    started = time.monotonic()
    counts, failures, gate = {}, [], {}
    flows = a.flows.split(",")
    traces = []
    try:
        for name in flows:
            rng = seeded(a.seed, name)
            if name == "crash_during_recovery":
                first = next((t for t, _ in traces if t.name == "full_update"), None) or prepare("full_update", base)
                bases = recovery_bases(first, a.recovery_bases, rng)
                if all(first is not t for t, _ in traces):
                    first.close()
                for n, (_key, state) in enumerate(bases):
                    t = prepare(name, base, data_from=materialize_base(first, state, base))
                    t.label = f"{name} #{n + 1}"
                    baseline = explore_flow(t, a.sample, rng, a.verbose, counts, failures)
                    traces.append((t, baseline))
                continue
            t = prepare(name, base)
            baseline = explore_flow(t, a.sample, rng, a.verbose, counts, failures)
            traces.append((t, baseline))
            if not a.no_mutations:
                for kind in t.sync_kinds():
                    tried = gate.get(kind, {})
                    if tried.get("caught") or (a.gate_tries and len(tried.get("flows", [])) >= a.gate_tries):
                        continue
                    found, new = mutate(t, kind, baseline, rng, a.mutation_cap)
                    entry = gate.setdefault(kind, {"caught": None, "flows": [], "new": 0})
                    entry["flows"].append(name)
                    entry["new"] += new
                    if found:
                        entry["caught"] = (name,) + found
            t.close()
    except UnsupportedCall as e:
        print(f"the trace holds a call the explorer does not model: {e}")
        return 1
    finally:
        for t, _ in traces:
            t.close()
        if not a.work:
            shutil.rmtree(base, ignore_errors=True)
    total = sum(c[2] for c in counts.values())
    bad = sum(c[3] for c in counts.values())
    for line in failures:
        print("  inconsistent: " + line)
    gate_failures = []
    if not a.no_mutations:
        for kind, entry in sorted(gate.items()):
            reason = NOT_NEEDED.get(kind)
            if entry["caught"]:
                flow, model, why, msg = entry["caught"]
                print(f"  sync {kind}: removing it is caught ({flow}, {model}: {msg.splitlines()[-1]})")
                if reason:
                    gate_failures.append(f"{kind} is listed as not needed, yet removing it is caught")
            elif reason:
                print(f"  sync {kind}: not needed ({entry['new']} new states, none wrong): {reason}")
            else:
                print(f"  sync {kind}: removing it is not caught ({entry['new']} new states) and no reason is listed")
                gate_failures.append(f"{kind}: removing it is not caught and no reason is listed")
    if a.results:
        write_results(a.results, counts, gate, NOT_NEEDED, a, time.monotonic() - started, base)
    summary = f"{total} crash states, {bad} inconsistent"
    if not a.no_mutations:
        summary += f", mutation gate: {sum(1 for e in gate.values() if e['caught'])} of {len(gate)} syncs caught, " \
                   f"{len(gate_failures)} unexplained"
    for line in gate_failures:
        print("  mutation gate: " + line)
    print(summary)
    return 1 if bad or gate_failures else 0


if __name__ == "__main__":
    sys.exit(main())
