"""The explorer's results as markdown (scripts/crashstates.sh writes bench/CRASHSTATES.md)."""
import datetime

from model import MODELS


def write_results(path, counts, gate, not_needed, args, seconds, work):
    """`work`: the scratch directory, named "…" in the messages quoted."""
    out = ["# Crash states: what power cuts during updates leave, opened by the library", ""]
    out.append("Written by `bash scripts/crashstates.sh` (Tests/crash/crashstates.py"
               + (f" --sample {args.sample}" if args.sample else ", every state")
               + f", seed {args.seed}) on {datetime.date.today().isoformat()}, in {seconds / 60:.1f} minutes. "
               "The models, the flows and the checks are described in Tests/crash/model.py, flows.py and verdict.py. "
               "A trace differs from run to run (threads, timing), so the counts do too; every state of every "
               "trace is opened.")
    out.append("")
    for model in MODELS:
        rows = [(flow, c) for (flow, m), c in counts.items() if m == model]
        total = [sum(c[i] for _, c in rows) for i in range(4)]
        out.append(f"## Model \"{model}\"")
        out.append("")
        out.append({"ordered": "Name operations persist in the order they were made (ext4 data=ordered and "
                               "journaling file systems that commit metadata in order); lost or torn writes leave zeros.",
                    "directory": "Each directory's name operations are ordered only among themselves (btrfs-like, ext4 "
                                 "fast_commit); lost or torn writes may leave garbage."}[model])
        out.append("")
        out.append("| flow | operations traced | distinct crash states | opened | inconsistent |")
        out.append("|---|---|---|---|---|")
        for flow, (ops, states, opened, bad) in rows:
            out.append(f"| {flow} | {ops} | {states:,} | {opened:,} | {bad} |")
        out.append(f"| **all** | | {total[1]:,} | {total[2]:,} | **{total[3]}** |")
        out.append("")
    if gate:
        out.append("## Mutation gate: each kind of sync taken out of the trace")
        out.append("")
        out.append("Every sync of the kind removed from the flow's trace (as if the library had not issued it): "
                   "the new crash states that allows, opened until one fails the check.")
        out.append("")
        out.append("| sync (what it makes durable) | flows it occurs in | new states | caught by |")
        out.append("|---|---|---|---|")
        for kind, e in sorted(gate.items()):
            if e["caught"]:
                flow, model, _why, msg = e["caught"]
                verdict = f"{flow}, \"{model}\": {msg.splitlines()[-1].replace(work, '…')}"
            else:
                verdict = "not caught: " + not_needed.get(kind, "no reason listed")
            out.append(f"| `{kind}` | {', '.join(sorted(set(e['flows'])))} | {e['new']:,} | {verdict.replace('|', '/')} |")
        out.append("")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
