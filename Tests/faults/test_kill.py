"""The kill -9 harness at its default size (50 kills, seeded) as a test, 30 kills of
differential updates, 30 of chunked ones and 40 of group fetches; --soak runs it longer."""
import os
import subprocess
import sys


def test_kill_harness_finds_no_inconsistency_and_little_waste():
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "killharness.py"), "--kills", "50", "--seed", "1"],
                       capture_output=True, text=True, timeout=600)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "consistency failures: 0" in r.stdout


def test_kill_harness_differential_updates_never_refetch_a_verified_file():
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "killharness.py"), "--kills", "30", "--seed", "2",
                        "--differential", "--rate", "1000000"], capture_output=True, text=True, timeout=600)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "consistency failures: 0" in r.stdout


def test_kill_harness_chunked_updates_never_refetch_a_verified_chunk():
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "killharness.py"), "--kills", "30", "--seed", "3",
                        "--chunked", "--rate", "500000"], capture_output=True, text=True, timeout=600)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "consistency failures: 0" in r.stdout


def test_kill_harness_group_fetches_resume_and_never_resolve_a_partial_group():
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "killharness.py"), "--groups", "--kills", "40",
                        "--seed", "4"], capture_output=True, text=True, timeout=600)
    print(r.stdout)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "consistency failures: 0" in r.stdout
