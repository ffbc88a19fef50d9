"""Shared by the workflow tests: a copy of the workflow in a scratch folder, run once at
smoke scale, and a Snakemake runner."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
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


# ------------------------------------------------- the session's smoke run, in the background
# The smoke DAG (about 245 jobs, each a fresh Python) is the suite's largest single cost. So
# when a selected test uses `smoke_run` or `smoke_run_later`, the run starts as soon as
# collection ends, beside the other tests, and the tests that start from it are moved to the
# end. Under pytest-xdist (`make test` runs `-n 2`) one worker starts it, in a folder every
# worker of the run sees, and every worker waits for its exit code there.
SMOKE_ARGS = ("--cores", "2", "--config", "scale=smoke")
SMOKE_TIMEOUT = 1800  # s; guards against a hang, not the budget
# runs the smoke DAG in the workflow copy, leaving its output and then its exit code (written
# whole, then renamed) in the folder above
RUNNER = '"$0" "$@" > ../stdout.txt 2> ../stderr.txt; echo $? > ../rc.part; mv ../rc.part ../rc'


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _smoke_dir(config: pytest.Config) -> Path:
    """The run's one smoke folder: beside the xdist workers' own temporary folders (under
    pytest's base temp, whose last three runs pytest keeps), or in the single process's."""
    base = config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    return (base.parent if _is_worker(config) else base) / "smoke"


def _start(folder: Path) -> None:
    """Copy the workflow into ``folder``/pipeline and start its smoke run there, in its own
    process group (its id in ``pgid``), leaving the exit code in ``rc``."""
    work = copy_workflow(folder / "pipeline")
    proc = subprocess.Popen(
        ["/bin/sh", "-c", RUNNER, SNAKEMAKE, *SMOKE_ARGS],
        cwd=work,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )
    (folder / "pgid").write_text(str(proc.pid))


def _reads_smoke_first(item: pytest.Item) -> bool:
    return "smoke_run" in getattr(item, "fixturenames", ())


def _reads_smoke(item: pytest.Item) -> bool:
    return _reads_smoke_first(item) or "smoke_run_later" in getattr(item, "fixturenames", ())


@pytest.hookimpl(trylast=True)  # after -k/-m deselection
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that start from the smoke run go last (in their order), so it runs meanwhile;
    those that only compare with it at their end (`smoke_run_later`) keep their place."""
    first = [i for i in items if _reads_smoke_first(i)]
    items[:] = [i for i in items if not _reads_smoke_first(i)] + first


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the background smoke run if a selected test reads it; of several xdist workers
    the first to create the shared folder starts it."""
    if session.config.option.collectonly or not any(_reads_smoke(i) for i in session.items):
        return
    folder = _smoke_dir(session.config)
    try:
        folder.mkdir(parents=False)
    except FileExistsError:  # another worker started it
        return
    _start(folder)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """At the end of the whole run (never in a worker, whose neighbours may still read it),
    stop a smoke run still going: an interrupted or failed session."""
    if _is_worker(session.config):
        return
    folder = _smoke_dir(session.config)
    if (folder / "pgid").exists() and not (folder / "rc").exists():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.killpg(int((folder / "pgid").read_text()), signal.SIGKILL)


@pytest.fixture(scope="session")
def smoke_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished smoke-scale run of the whole DAG (its folder): the background one started at
    collection, else one run here."""
    folder = _smoke_dir(request.config)
    if not (folder / "pgid").exists():
        work = copy_workflow(tmp_path_factory.mktemp("pipeline"))
        proc = run_snakemake(*SMOKE_ARGS, cwd=work, quick_exit=False)
        assert proc.returncode == 0, proc.stderr[-5000:]
        return work
    deadline = time.monotonic() + SMOKE_TIMEOUT
    while not (folder / "rc").exists():
        assert time.monotonic() < deadline, f"the smoke run in {folder} took over {SMOKE_TIMEOUT} s"
        time.sleep(1)
    rc = int((folder / "rc").read_text())
    err = folder / "stderr.txt"
    assert rc == 0, f"smoke run in {folder} failed (rc {rc}):\n{err.read_text()[-5000:]}"
    return folder / "pipeline"


@pytest.fixture
def smoke_run_later(request: pytest.FixtureRequest):
    """For a test that does its own work first and compares with the smoke run at its end:
    a call that returns the finished smoke run's folder (waiting for it then)."""
    return lambda: request.getfixturevalue("smoke_run")


@pytest.fixture(scope="session")
def sm():
    """`run_snakemake`, for tests: sm(*args, cwd=..., timeout=...)."""
    return run_snakemake


@pytest.fixture(scope="session")
def workflow_copy():
    """`copy_workflow`, for tests: workflow_copy(dest) -> dest."""
    return copy_workflow
