"""Faults: a workflow killed with SIGKILL (Snakemake alone, or with its jobs) is finished by the
rerun the README documents, to results identical to an uninterrupted run's; a failing job's
log holds its traceback.

The killed workflow builds one small table, the decay experiment's: two trainings (the
factorial's runs, which decay shares) with their held-out sets, oracle checks, evaluations,
stats and table. Compared with the session's uninterrupted smoke run: the table, the held-out
sets and oracle reports, every run's model.pt and metrics.jsonl, and the evaluations byte for
byte; final.json and the statistics field by field without the fields that are timings or say
how the run got there (`NOT_DETERMINISTIC`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SMOKE = "results/smoke"
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
EXPERIMENT = "decay"  # two runs, both the factorial's (a shared run's folder is its owner's)
TARGET = f"{SMOKE}/tables/{EXPERIMENT}.tex"
ARGS = ("--cores", "2", TARGET, "--config", "scale=smoke")
NOT_DETERMINISTIC = {"wall_time_s", "train_wall_time_s", "resumed_from_step"}
COMPARED = ("runs", "evals", "stats", "tables", "datasets")


def _start(work: Path) -> subprocess.Popen:
    """Snakemake in its own process group (so the test can kill it with its jobs), niced so
    that this test's polling is not starved by the jobs it waits for."""
    out = (work / "killed_run.out").open("w")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [SNAKEMAKE, *ARGS], cwd=work, stdout=out, stderr=subprocess.STDOUT, env=env,
        start_new_session=True, preexec_fn=lambda: os.nice(10),
    )  # fmt: skip


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for_a_checkpoint(work: Path, proc: subprocess.Popen, timeout: float = 240) -> Path:
    """Poll until a training job is mid-run: it has written a checkpoint and at most two of
    its four metric lines (smoke runs log every 5 of 20 steps), so it is far from done."""
    runs = work / SMOKE / "runs"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for ckpt in runs.glob("*/*/seed*/checkpoint.pt") if runs.exists() else []:
            try:
                if len((ckpt.parent / "metrics.jsonl").read_text().splitlines()) <= 2:
                    return ckpt
            except FileNotFoundError:  # the run finished meanwhile
                continue
        assert proc.poll() is None, (work / "killed_run.out").read_text()[-3000:]
        time.sleep(0.01)
    raise AssertionError("no training checkpoint appeared")


def _snakemake(work: Path, *args: str) -> subprocess.CompletedProcess:
    """A run to completion, without the profile's 10 s exit wait (conftest.QUICK_EXIT)."""
    cmd = [SNAKEMAKE, "--max-jobs-per-timespan", "100/1s", *args]
    return subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=900)


def _strip(obj):
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in NOT_DETERMINISTIC}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _assert_same_results(rerun: Path, reference: Path) -> None:
    """Every result file of the rerun equals the uninterrupted run's, and every result of
    the experiment in the uninterrupted run is there."""
    files = sorted(
        p.relative_to(rerun) for name in COMPARED for p in (rerun / name).rglob("*") if p.is_file()
    )
    assert any(str(f).startswith("runs/") for f in files)
    for rel in files:
        ours, theirs = rerun / rel, reference / rel
        assert theirs.exists(), f"{rel}: not in the uninterrupted run"
        if rel.suffix == ".json" and rel.parts[0] != "evals":  # an eval holds no timing
            assert _strip(json.loads(ours.read_text())) == _strip(json.loads(theirs.read_text())), (
                rel
            )
        else:
            assert ours.read_bytes() == theirs.read_bytes(), rel
    evals = [p.relative_to(reference) for p in (reference / "evals" / EXPERIMENT).rglob("*.json")]
    assert len(evals) >= 2, evals  # the chain trains more than one run
    for rel in [Path(f"tables/{EXPERIMENT}.tex"), Path(f"stats/{EXPERIMENT}.json"), *evals]:
        assert rel in files, f"{rel}: missing after the rerun"
    assert not [p for p in rerun.rglob("checkpoint.pt")], "a finished run left its checkpoint"
    assert not [p for p in rerun.rglob("*.tmp")], "a temporary file was left behind"


@pytest.mark.parametrize("victims", ["snakemake", "snakemake and its jobs"])
def test_a_killed_workflow_reruns_to_identical_results(
    tmp_path: Path, smoke_run_later, workflow_copy, victims: str
) -> None:
    work = workflow_copy(tmp_path / "work")
    proc = _start(work)
    pgid = proc.pid
    try:
        ckpt = _wait_for_a_checkpoint(work, proc)
        if victims == "snakemake":
            os.kill(proc.pid, signal.SIGKILL)  # its running jobs live on, orphaned
            proc.wait()
        else:
            os.killpg(pgid, signal.SIGKILL)
            proc.wait()
            deadline = time.monotonic() + 30
            while _group_alive(pgid) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _group_alive(pgid)
            assert ckpt.exists()  # the killed training's checkpoint, for the rerun to resume
        # the rerun the README documents: the same command, which fails naming --unlock (the
        # killed Snakemake left its lock); then --unlock and the same command again
        first = _snakemake(work, *ARGS)
        said = first.stdout + first.stderr
        assert first.returncode != 0 and "--unlock" in said and "locked" in said, said[-3000:]
        unlock = _snakemake(work, "--unlock", *ARGS)
        assert unlock.returncode == 0, unlock.stderr[-3000:]
        done = _snakemake(work, *ARGS)
        assert done.returncode == 0, done.stderr[-5000:]
        # orphaned jobs of a killed Snakemake finish on their own; wait so none outlives the test
        deadline = time.monotonic() + 120
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        if _group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)
    _assert_same_results(work / SMOKE, smoke_run_later() / SMOKE)
    if victims != "snakemake":  # the killed run was resumed, not retrained
        resumed = [
            json.loads(p.read_text())["resumed_from_step"]
            for p in (work / SMOKE / "runs").rglob("final.json")
        ]
        assert max(resumed) > 0, resumed


def test_a_failing_job_logs_its_traceback(tmp_path: Path, workflow_copy) -> None:
    """A real `script:` job (a subprocess of Snakemake) whose library import fails: the
    exception, with its traceback, is in the rule's log file."""
    work = workflow_copy(tmp_path / "work")
    floors = work / "src" / "arbench" / "report" / "floors.py"
    floors.write_text(floors.read_text() + '\nraise RuntimeError("injected failure")\n')
    done = _snakemake(work, "--cores", "1", f"{SMOKE}/tables/floors.tex", "--config", "scale=smoke")
    assert done.returncode != 0
    log = (work / SMOKE / "logs" / "tables" / "floors.log").read_text()
    assert "job failed" in log and "Traceback" in log and "injected failure" in log, log
    assert "report/floors.py" in log
