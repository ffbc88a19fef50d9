"""The job runtime: threads pinned, log file written, and a failure's traceback in the log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

JOB = """
import sys
sys.path.insert(0, {src!r})
from arbench.runtime import setup
import torch
log = setup({log!r}, threads=1)
log("working with %d thread(s)" % torch.get_num_threads())
raise KeyError("no such arm: ghost")
"""


def test_a_failed_job_leaves_its_traceback_in_the_log(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "job.log"
    code = JOB.format(src=str(ROOT / "src"), log=str(log))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    text = log.read_text()
    assert "working with 1 thread(s)" in text
    assert "job failed" in text and "Traceback" in text and "no such arm: ghost" in text
    assert text.count("Traceback") == 1 and done.stderr.count("Traceback") == 1
