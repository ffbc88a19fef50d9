"""Shared by the workflow tests: a copy of the workflow in a scratch folder, run once at
smoke scale, and a Snakemake runner."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SNAKEMAKE = str(BIN / "snakemake")
COPY = [
    "Snakefile",
    "config.yaml",
    "claims.yaml",
    "references",  # the sources' per-seed results an experiment's table sets beside its own
    "paper",
    "rules",
    "scripts",
    "schemas",
    "profiles",
    "envs",
    "src",
    "docs",
    "tools",  # tools/corpus.py: the corpus rule (rules/corpus.smk) runs it
]


# Snakemake's scheduler re-plans on a threading.Timer of its rate limiter's timespan, and that
# timer is not a daemon thread: a finished `snakemake` lives on until it fires. With the
# workflow profile's 100/10s (profiles/default/config.yaml) every real run ends up to 10 s
# after its last job, which the tests' many short runs would pay each time; they use
# Snakemake's own default timespan instead (the session's smoke run keeps the profile's).
QUICK_EXIT = ("--max-jobs-per-timespan", "100/1s")


def run_snakemake(
    *args: str, cwd: Path = ROOT, timeout: int = 1800, quick_exit: bool = True
) -> subprocess.CompletedProcess:
    """Run this environment's snakemake with ``args`` in ``cwd`` (with `QUICK_EXIT` unless
    ``quick_exit`` is false). The timeout guards against a hang, not the budget: beside a demo
    run the smoke DAG went past 900 s."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [SNAKEMAKE, *(QUICK_EXIT if quick_exit else ()), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


SMOKE = "results/smoke"  # where a --config scale=smoke run writes


def copy_workflow(dest: Path) -> Path:
    """The files a run needs, copied to ``dest`` (no results, no .snakemake)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in COPY:
        src = ROOT / name
        ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished smoke-scale run of the whole DAG (its folder)."""
    work = copy_workflow(tmp_path_factory.mktemp("pipeline"))
    proc = run_snakemake("--cores", "2", "--config", "scale=smoke", cwd=work, quick_exit=False)
    assert proc.returncode == 0, proc.stderr[-5000:]
    return work


@pytest.fixture(scope="session")
def sm():
    """`run_snakemake`, for tests: sm(*args, cwd=..., timeout=...)."""
    return run_snakemake


@pytest.fixture(scope="session")
def workflow_copy():
    """`copy_workflow`, for tests: workflow_copy(dest) -> dest."""
    return copy_workflow
