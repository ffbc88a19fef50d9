"""A training job cut off at its time limit and submitted again resumes from its checkpoint.

This is how a paper-scale training longer than a partition's limit runs (docs/CLUSTER.md,
"Jobs longer than a partition takes"): each submission asks for at most
`resources.partition_minutes`; SLURM ends a job at its limit with SIGTERM; Snakemake counts
that as a failure and, with `retries` (the SLURM profile sets 2), submits the job again, whose
training resumes from `checkpoint.pt` (not an output, so Snakemake never deletes it). Here
the limit is played by hand on a local run: a smoke training is sent SIGTERM once it has
written a checkpoint, Snakemake retries it in the same invocation, and the model and metrics
equal an uninterrupted run's byte for byte.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
RUN = "results/smoke/runs/factorial/delta_conv/seed0"  # 20 steps, a checkpoint every 2
ARGS = ("--max-jobs-per-timespan", "100/1s", "--cores", "1", "--config", "scale=smoke")
NOT_DETERMINISTIC = {"wall_time_s", "resumed_from_step"}


def _training_jobs(work: Path) -> list[int]:
    """The pids of the training scripts Snakemake runs in ``work`` (its jobs' processes)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if cwd == str(work) and "train.py" in cmd and "snakemake" not in cmd.split("\0")[0]:
            pids.append(int(proc.name))
    return pids


def _stripped(path: Path) -> dict:
    return {k: v for k, v in json.loads(path.read_text()).items() if k not in NOT_DETERMINISTIC}


def test_a_training_cut_off_at_its_limit_resumes_when_submitted_again(
    tmp_path: Path, workflow_copy
) -> None:
    work = workflow_copy(tmp_path / "cut").resolve()
    out = (tmp_path / "cut.out").open("w")
    proc = subprocess.Popen(
        [SNAKEMAKE, f"{RUN}/final.json", *ARGS, "--retries", "1"],
        cwd=work, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=lambda: os.nice(10),
    )  # fmt: skip
    ckpt = work / RUN / "checkpoint.pt"
    try:
        deadline = time.monotonic() + 300
        while not ckpt.exists():
            assert proc.poll() is None, (tmp_path / "cut.out").read_text()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint appeared"
            time.sleep(0.01)
        victims = _training_jobs(work)
        assert victims, "the training job's process was not found"
        for pid in victims:  # what SLURM sends a job at its time limit
            os.kill(pid, signal.SIGTERM)
        assert proc.wait(timeout=600) == 0, (tmp_path / "cut.out").read_text()[-5000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    log = (tmp_path / "cut.out").read_text()
    assert "received signal SIGTERM" in log and "Trying to restart job" in log, log[-3000:]
    assert not (work / RUN / "final.json.tmp").exists()
    final = json.loads((work / RUN / "final.json").read_text())
    assert final["resumed_from_step"] > 0, log[-3000:]  # resumed, not retrained
    assert not ckpt.exists()  # a finished run removes its checkpoint

    whole = workflow_copy(tmp_path / "whole")
    done = subprocess.run(
        [SNAKEMAKE, f"{RUN}/final.json", *ARGS], cwd=whole, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("model.pt", "metrics.jsonl"):
        assert (work / RUN / name).read_bytes() == (whole / RUN / name).read_bytes(), name
    assert _stripped(work / RUN / "final.json") == _stripped(whole / RUN / "final.json")
