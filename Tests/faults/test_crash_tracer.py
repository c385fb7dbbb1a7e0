"""The crash explorer's tracer (Tests/crash/fstrace*.c) against what it must not miss: a file
call it does not model fails the trace, naming the call; an O_APPEND write is logged where it
landed; a write under the traced directory appears with its bytes, and one outside does not."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT

CRASH = os.path.join(ROOT, "Tests", "crash")
sys.path.insert(0, CRASH)
from model import UnsupportedCall, parse  # noqa: E402


@pytest.fixture(scope="module")
def tracer(tmp_path_factory):
    out = tmp_path_factory.mktemp("tracer") / "fstrace.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(out), os.path.join(CRASH, "fstrace.c"),
                    os.path.join(CRASH, "fstrace_refused.c"), "-ldl", "-lpthread"], check=True)
    return str(out)


def traced(tracer, tmp_path, code):
    """Runs `code` (Python; `d` is the traced directory) under the tracer; returns the log."""
    d = tmp_path / "data"
    d.mkdir()
    log = tmp_path / "trace.log"
    env = dict(os.environ, LD_PRELOAD=tracer, ASSETPATCH_FSTRACE=str(log), ASSETPATCH_FSTRACE_ROOT=str(d))
    subprocess.run([sys.executable, "-c", f"import os\nd = {str(d)!r}\n{code}"], env=env, check=True)
    return str(log)


@pytest.mark.parametrize("name,code", [
    ("writev", "fd = os.open(d + '/f', os.O_CREAT | os.O_WRONLY); os.writev(fd, [b'a', b'b'])"),
    ("pwritev2", "fd = os.open(d + '/f', os.O_CREAT | os.O_WRONLY); os.pwritev(fd, [b'a'], 0)"),
    ("copy_file_range", "src = os.open(__file__ if False else '/etc/hostname', os.O_RDONLY); "
                        "fd = os.open(d + '/f', os.O_CREAT | os.O_WRONLY); os.copy_file_range(src, fd, 4)"),
    ("posix_fallocate", "fd = os.open(d + '/f', os.O_CREAT | os.O_WRONLY); os.posix_fallocate(fd, 0, 4096)"),
    ("fcntl(F_DUPFD)", "fd = os.open(d + '/f', os.O_CREAT | os.O_WRONLY); os.dup(fd)"),
    ("symlink", "os.symlink('/etc/hostname', d + '/link')"),
    ("sendfile", "src = os.open('/etc/hostname', os.O_RDONLY); fd = os.open(d + '/f', os.O_CREAT | os.O_WRONLY); "
                 "os.sendfile(fd, src, 0, 4)"),
    ("open(O_TMPFILE)", "os.open(d, os.O_TMPFILE | os.O_WRONLY)"),
    ("mmap(PROT_WRITE, MAP_SHARED)", "import mmap; fd = os.open(d + '/f', os.O_CREAT | os.O_RDWR); os.ftruncate(fd, 4096); "
                                     "mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_WRITE)"),
])
def test_a_call_the_explorer_does_not_model_fails_the_trace_naming_it(tracer, tmp_path, name, code):
    log = traced(tracer, tmp_path, code)
    with pytest.raises(UnsupportedCall):
        parse(log)
    refused = [line.split("\t")[1] for line in open(log).read().splitlines() if line.startswith("unsupported\t")]
    assert name in refused, refused


def test_an_append_write_is_logged_where_it_landed(tracer, tmp_path):
    log = traced(tracer, tmp_path, "fd = os.open(d + '/f', os.O_CREAT | os.O_WRONLY | os.O_APPEND)\n"
                                   "os.write(fd, b'abc'); os.lseek(fd, 0, os.SEEK_SET); os.write(fd, b'de')")
    writes = [o for o in parse(log) if o["op"] == "write"]
    assert [(o["off"], o["data"]) for o in writes] == [(0, b"abc"), (3, b"de")]


def test_only_the_traced_directory_is_logged(tracer, tmp_path):
    outside = tmp_path / "outside"
    log = traced(tracer, tmp_path, f"open({str(outside)!r}, 'wb').write(b'no')\n"
                                   "fd = os.open(d + '/f', os.O_CREAT | os.O_WRONLY); os.write(fd, b'yes'); os.fsync(fd)\n"
                                   "os.rename(d + '/f', d + '/g')")
    ops = parse(log)
    assert [o["op"] for o in ops] == ["create", "write", "fsync", "rename"]
    assert ops[1]["data"] == b"yes" and ops[3]["path2"].endswith("/data/g")
