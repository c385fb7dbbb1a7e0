#!/usr/bin/env python3
"""The crash model against the kernel: a flow runs on a real file system in a loop-mounted
image and is stopped (SIGSTOP) right after its N-th file-system call under the data directory;
the image is copied there without any sync (what the device had received: a power cut), the
copy repaired as a boot would (e2fsck for ext4; xfs and btrfs replay their logs when mounted),
mounted, and opened by the library with the explorer's check (verdict.py).

    realfs.py [--fs ext4,xfs,btrfs] [--flows full_update,...] [--points N] [--work DIR]
Needs root and loop devices; a file system whose tools are missing is skipped with a line
saying why. The last line reads "N crash points on real file systems, M inconsistent".
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from flows import (FLOWS, LIB, ROOT, driver_args, driver_env, publish, publish_options, published_files, release_files, repositories,
                   run_step, write_tree)  # noqa: E402
from verdict import check_in_child, collect  # noqa: E402

SIZES = {"ext4": 64 << 20, "xfs": 320 << 20, "btrfs": 256 << 20}
MKFS = {"ext4": ["mkfs.ext4", "-q", "-F"], "xfs": ["mkfs.xfs", "-q", "-f"], "btrfs": ["mkfs.btrfs", "-q", "-f"]}
MOUNT_OPTIONS = {"ext4": [], "xfs": ["-o", "nouuid"], "btrfs": []}


def sh(*cmd, check=True):
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


class Mounted:
    """An image attached to a loop device and mounted; detached again on exit."""

    def __init__(self, image, fs, point):
        self.image, self.fs, self.point = image, fs, point

    def __enter__(self):
        if self.fs == "btrfs":
            sh("btrfs", "device", "scan", "--forget", check=False)
        self.dev = sh("losetup", "-f", "--show", self.image).stdout.strip()
        os.makedirs(self.point, exist_ok=True)
        try:
            sh("mount", *MOUNT_OPTIONS[self.fs], self.dev, self.point)
        except subprocess.CalledProcessError:
            sh("losetup", "-d", self.dev, check=False)
            raise
        return self

    def __exit__(self, *exc):
        sh("umount", self.point, check=False)
        sh("losetup", "-d", self.dev, check=False)


def unavailable(fs):
    tool = MKFS[fs][0]
    if shutil.which(tool) is None:
        return f"{tool} is not installed"
    if os.geteuid() != 0:
        return "needs root (losetup, mount)"
    probe = tempfile.NamedTemporaryFile(dir="/var/tmp", delete=False)
    probe.close()
    try:
        os.truncate(probe.name, 1 << 20)
        r = sh("losetup", "-f", "--show", probe.name, check=False)
        if r.returncode != 0:
            return f"no loop device ({r.stderr.strip()})"
        sh("losetup", "-d", r.stdout.strip(), check=False)
    finally:
        os.unlink(probe.name)
    return None


def run_to(work, mnt, flow, stop, base_url=None, no_sync=False):
    """Runs the flow's traced call with the data directory on the mount, stopped after its
    `stop`-th call there (or to its end when stop is None). Returns (pid or None, lines logged,
    whether the call had returned)."""
    log = os.path.join(work, "stop.log")
    if os.path.exists(log):
        os.unlink(log)
    env = driver_env(work, trace=log)
    env["ASSETPATCH_FSTRACE_ROOT"] = os.path.join(mnt, "data")
    if stop is not None:
        env["ASSETPATCH_FSTRACE_STOP"] = str(stop)
    if no_sync:
        env["ASSETPATCH_FSTRACE_NOSYNC"] = "1"
    step, opts = FLOWS[flow].traced
    p = subprocess.Popen(driver_args(work, step, opts, base_url, data=os.path.join(mnt, "data")), env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status = os.waitpid(p.pid, os.WUNTRACED)
    lines = open(log).read().splitlines() if os.path.exists(log) else []
    returned = "mark\treturned" in lines
    if os.WIFSTOPPED(status):
        return p, len([x for x in lines if not x.startswith("mark\t")]), returned
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{flow}: the traced call failed: {p.stderr.read()[-2000:]}")
    return None, len([x for x in lines if not x.startswith("mark\t")]), returned


def check_fs(fs, flows, points, base, no_sync=False):
    work_root = os.path.join(base, fs)
    shutil.rmtree(work_root, ignore_errors=True)
    os.makedirs(work_root)
    results = []
    for flow in flows:
        work = os.path.join(work_root, flow)
        os.makedirs(work)
        shutil.copy(os.path.join(base, "fstrace.so"), os.path.join(work, "fstrace.so"))
        published = published_files(flow)
        chunking = publish_options(flow)
        for repo, v in repositories(flow):
            publish(os.path.join(work, repo), v, release_files(v, flow), chunking)
        write_tree(os.path.join(work, "bundle"), release_files(0, flow))
        base_img, img, crash_img = (os.path.join(work, n) for n in ("base.img", "work.img", "crash.img"))
        mnt, crash_mnt = os.path.join(work, "mnt"), os.path.join(work, "crash-mnt")
        # The image before the flow: prepared through the file system, then made clean.
        with open(base_img, "wb") as f:
            f.truncate(SIZES[fs])
        sh(*MKFS[fs], base_img)
        with Mounted(base_img, fs, mnt):
            os.makedirs(os.path.join(mnt, "data"))
            for step, opts in FLOWS[flow].prep:
                run_step(work, step, opts, data=os.path.join(mnt, "data"))
            sh("sync", "-f", mnt)
        # Once to its end: how many calls the flow makes there.
        shutil.copyfile(base_img, img)
        with Mounted(img, fs, mnt):
            _, total, _ = run_to(work, mnt, flow, None)
        # Points spread over the calls, and the end: the call returned and the process exited,
        # what it promised (made durable) must be on the device.
        chosen = sorted({max(1, round(total * (i + 1) / points)) for i in range(points - 1)}) + [None]
        for stop in chosen:
            shutil.copyfile(base_img, img)
            with Mounted(img, fs, mnt):
                proc, _, returned = run_to(work, mnt, flow, stop, no_sync=no_sync)
                # What the device holds now, nothing synced: the power cut.
                shutil.copyfile(img, crash_img)
                if proc:
                    os.kill(proc.pid, signal.SIGKILL)
                    os.waitpid(proc.pid, 0)
            if fs == "ext4":
                r = sh("e2fsck", "-fy", crash_img, check=False)
                if r.returncode >= 4:
                    results.append((flow, stop, returned, f"e2fsck could not repair the image: {r.stdout[-500:]}"))
                    continue
            with Mounted(crash_img, fs, crash_mnt):
                args = (os.path.join(crash_mnt, "data"), os.path.join(work, "bundle"),
                        "file://" + os.path.join(work, "repo2", "head.json"), FLOWS[flow].expect, returned, published)
                msg = collect(*check_in_child(args))
            results.append((flow, stop, returned, msg))
            where = f"stopped after call {stop} of {total}" if stop else "after the call returned and the process exited"
            print(f"  {fs} {flow}: {where}{' (returned)' if returned and stop else ''}: "
                  f"{msg.splitlines()[-1] if msg else 'consistent'}", flush=True)
        for p in (base_img, img, crash_img):
            os.unlink(p)
    return results


def write_section(path, a, rows):
    if a.self_test:
        title = "## Real file systems, self-test: every fsync under the data directory made a no-op"
        text = ("The same check with a library that makes nothing durable: it must find inconsistent states "
                "(a release or a mark lost after the call returned), or the check could not tell.")
    else:
        title = "## Real file systems: flows stopped mid-way, the disk image copied unsynced"
        text = (f"Each flow on a loop-mounted image, stopped (SIGSTOP) after {a.points - 1} points spread over its "
                "file-system calls and once after it returned; the image copied without a sync (what the device "
                "had), repaired as a boot would (e2fsck; xfs and btrfs replay their logs on mount), mounted and "
                "checked as the explorer checks a state (Tests/crash/realfs.py).")
    out = [title, "", text, "", "| file system | flows | crash points | inconsistent |", "|---|---|---|---|"] + rows + [""]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fs", default="ext4,xfs,btrfs")
    ap.add_argument("--flows", default="full_update,differential_update,mark_good,spare_tree")
    ap.add_argument("--points", type=int, default=8)
    ap.add_argument("--work", default=None)
    ap.add_argument("--results", default=None, help="write a markdown section here")
    ap.add_argument("--self-test", action="store_true",
                    help="with every fsync under the data directory turned into a no-op: must find an inconsistent state")
    a = ap.parse_args()
    base = a.work or tempfile.mkdtemp(prefix="assetpatch-realfs.", dir="/var/tmp")
    os.makedirs(base, exist_ok=True)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", os.path.join(base, "fstrace.so"), os.path.join(HERE, "fstrace.c"), os.path.join(HERE, "fstrace_refused.c"),
                    "-ldl", "-lpthread"], check=True)
    os.environ["ASSETPATCH_LIBRARY"] = LIB
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    import assetpatch  # noqa: F401 - the module only; each checking child loads the library
    total = bad = 0
    rows = []
    try:
        for fs in a.fs.split(","):
            why = unavailable(fs)
            if why:
                print(f"{fs}: skipped: {why}")
                rows.append(f"| {fs} | skipped: {why} | | |")
                continue
            results = check_fs(fs, a.flows.split(","), a.points, base, no_sync=a.self_test)
            n_bad = sum(1 for r in results if r[3])
            print(f"{fs}: {len(results)} crash points, {n_bad} inconsistent", flush=True)
            rows.append(f"| {fs} | {', '.join(a.flows.split(','))} | {len(results)} | {n_bad} |")
            total += len(results)
            bad += n_bad
    finally:
        if not a.work:
            shutil.rmtree(base, ignore_errors=True)
    if a.results:
        write_section(a.results, a, rows)
    if a.self_test:
        print(f"self-test, no fsync: {total} crash points on real file systems, {bad} inconsistent "
              f"({'the check can fail' if bad else 'NOT caught: the check cannot tell a library that syncs nothing'})")
        return 0 if bad else 1
    print(f"{total} crash points on real file systems, {bad} inconsistent")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
