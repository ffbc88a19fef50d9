"""The allocator setting that keeps freed tensor memory in the process (glibc only)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from arbench.cpu_memory import retain_freed_memory

# Allocate, touch and free a 64 MiB tensor repeatedly; print the minor page faults of the
# last 20 rounds. 64 MiB is above glibc's largest dynamic mmap threshold (32 MiB).
_PROBE = """
import resource, sys, torch
if sys.argv[1] == "retain":
    from arbench.cpu_memory import retain_freed_memory
    assert retain_freed_memory()
for _ in range(10):  # glibc settles its heap over the first few rounds
    torch.empty(1 << 24).fill_(1.0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    torch.empty(1 << 24).fill_(1.0)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True
    )
    return int(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt only")
def test_retained_memory_stops_page_faults_on_repeated_large_tensors():
    default, retained = _faults("default"), _faults("retain")
    # 20 fresh 64 MiB blocks are ~330k page faults by default; retained, the heap's pages
    # are reused.
    assert default > 50_000
    assert retained < default / 20


def test_retain_is_idempotent():
    first = retain_freed_memory()
    assert retain_freed_memory() == first
