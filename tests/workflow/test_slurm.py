"""SLURM as a tested path (profiles/slurm): the sbatch call the executor plugin builds for a
paper-scale training job, the evaluation runtimes the rules ask for, and a real run of one
smoke experiment's training chain on a single-node SLURM (tools/local_slurm.py) that must
equal a local run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arbench import config
from arbench.plan import Plan

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
TOOL = ROOT / "tools" / "local_slurm.py"
# one training chain, its stats and table: the smoke lattice_forgetting block has one run.
# Its held-out set and oracle check are built locally first (script jobs like the others; each
# sbatch job costs about 13 s of scheduling and of the two Snakemake starts inside it), so the
# cluster runs the training and the evaluation
CHAIN = "lattice_forgetting"
TABLE = f"results/smoke/tables/{CHAIN}.tex"
QUEUED = ("train", "evaluate")  # the rules sbatch runs here
PASSKEY = "results/tables/passkey_swar.tex"  # paper scale
SMOKE = ("--config", "scale=smoke")
# the one field of an eval record that is a measurement, not a result
WALL = re.compile(rb'("train_wall_time_s": )[-0-9.e+]+')

FAKE_SBATCH = """#!/bin/sh
# records the sbatch call the plugin makes, one argument per line, and refuses it
printf '%s\\n' "$@" > "{record}"
echo "fake sbatch: recorded" >&2
exit 1
"""
FAKE_SINFO = "#!/bin/sh\nprintf 'PARTITION\\nlocal*\\n'\n"
FAIL = "#!/bin/sh\nexit 1\n"


def snakemake(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 600):
    """A snakemake run, without the workflow profile's 10 s exit wait (conftest.QUICK_EXIT)."""
    return subprocess.run(
        [SNAKEMAKE, "--max-jobs-per-timespan", "100/1s", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )


def fake_slurm(bin_dir: Path, record: Path) -> dict[str, str]:
    """A PATH whose SLURM commands are stand-ins: sbatch records its arguments and fails,
    sinfo names one default partition, the rest fail at once (no cluster is asked)."""
    bin_dir.mkdir(parents=True)
    scripts = {"sbatch": FAKE_SBATCH.format(record=record), "sinfo": FAKE_SINFO}
    for name in ("sacct", "squeue", "scontrol", "sacctmgr", "sshare", "scancel"):
        scripts[name] = FAIL
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_paper_training_job_asks_slurm_for_a_gpu(tmp_path: Path, workflow_copy) -> None:
    """The plugin's own sbatch call for one paper-scale training job: --gpus=1,
    --cpus-per-gpu, the resource model's runtime and memory."""
    work = workflow_copy(tmp_path / "wf")
    plan = Plan(config.load(work / "config.yaml"))
    arm = "delta_conv"
    target = f"{plan.run_dir('factorial', arm, 0)}/final.json"
    gate = work / plan.gate("factorial", arm)  # the only input: training is the one job
    gate.parent.mkdir(parents=True)
    gate.write_text("{}")
    record = tmp_path / "sbatch.args"
    env = fake_slurm(tmp_path / "bin", record)
    args = ("--profile", "profiles/slurm", "--allowed-rules", "train", "--retries", "0", target)
    # the refused submission ends the run at the first status check, not the profile's 20 s
    args = ("--slurm-init-seconds-before-status-checks", "1", *args)
    proc = snakemake(*args, cwd=work, env=env, timeout=300)
    assert record.exists(), proc.stderr[-3000:]
    call = record.read_text().splitlines()
    assert proc.returncode != 0 and "fake sbatch: recorded" in proc.stderr
    assert "--gpus=1" in call, call
    assert f"--cpus-per-gpu={config.load(work / 'config.yaml')['threads_per_run']}" in call
    assert not any(a.startswith("--cpus-per-task") for a in call), call
    assert call[call.index("-t") + 1] == str(plan.train_minutes("factorial", arm))
    asked = plan.job_resources("train", "factorial", arm)  # the resource model's
    assert call[call.index("--mem") + 1] == str(asked["mem_mb"])
    assert any(a.startswith("rule_train_wildcards_") for a in call), call


@pytest.mark.parametrize(
    ("experiment", "arm"), [("lattice_base", "gated_deltanet"), ("kvbench_long", "hybrid_square")]
)
def test_paper_evaluation_job_asks_slurm_for_a_gpu(
    tmp_path: Path, workflow_copy, experiment: str, arm: str
) -> None:
    """The plugin's own sbatch call for a paper-scale evaluation sized for the GPU (a lattice
    arm's, about 24 GiB; the long-context sweep's, about 32 GiB): --gpus=1 and
    --cpus-per-gpu as training asks, the resource model's minutes and its host memory beside
    the GPU (more than the 2 GB every evaluation asked for before)."""
    work = workflow_copy(tmp_path / "wf")
    plan = Plan(config.load(work / "config.yaml"))
    run_dir = plan.run_dir(experiment, arm, 0)
    inputs = [f"{run_dir}/model.pt", f"{run_dir}/final.json", *plan.eval_inputs(experiment, arm)]
    for name in inputs:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text("{}")  # stand-ins: the job is refused before it reads them
    record = tmp_path / "sbatch.args"
    env = fake_slurm(tmp_path / "bin", record)
    target = f"{plan.root}/evals/{experiment}/{arm}/seed0.json"
    args = ("--profile", "profiles/slurm", "--allowed-rules", "evaluate", "--retries", "0")
    args = ("--slurm-init-seconds-before-status-checks", "1", *args, target)
    proc = snakemake(*args, cwd=work, env=env, timeout=300)
    assert record.exists(), proc.stderr[-3000:]
    call = record.read_text().splitlines()
    assert "--gpus=1" in call, call
    assert f"--cpus-per-gpu={config.load(work / 'config.yaml')['threads_per_run']}" in call
    asked = plan.job_resources("evaluate", experiment, arm)
    assert asked["gpu"] == 1 and asked["mem_mb"] > 4000
    assert call[call.index("-t") + 1] == str(asked["runtime"])
    assert call[call.index("--mem") + 1] == str(asked["mem_mb"])
    assert any(a.startswith("rule_evaluate_wildcards_") for a in call), call


def test_evaluation_runtime_follows_its_tokens() -> None:
    """Below paper scale an evaluation asks for 10 minutes plus its tokens at
    `EVAL_TOKENS_PER_S`; at paper scale for the resource model's prediction on the declared
    device (the passkey sweep to 16,384 writes reads more than twice the tokens of an arm
    capped at 4,096); and the evaluate rule asks the scheduler for exactly these minutes."""
    from arbench.plan import EVAL_TOKENS_PER_S

    study = Plan(config.load(scale="study"))
    for arm in ("multihead_decay", "attention_2layer"):
        tokens = study.eval_tokens("passkey_swar", arm)
        assert study.eval_minutes("passkey_swar", arm) == 10 + int(tokens / EVAL_TOKENS_PER_S / 60)
    plan = Plan(config.load())
    assert plan.eval_tokens("passkey_swar", "multihead_decay") > 10**8
    assert plan.eval_tokens("passkey_swar", "multihead_decay") > 2 * plan.eval_tokens(
        "passkey_swar", "attention_2layer"
    )
    sweep = plan.eval_minutes("passkey_swar", "multihead_decay")
    capped = plan.eval_minutes("passkey_swar", "attention_2layer")
    for arm, minutes in (("multihead_decay", sweep), ("attention_2layer", capped)):
        assert minutes == plan.resource_estimate("evaluate", "passkey_swar", arm).runtime_minutes
    proc = snakemake("-n", "--forceall", "--profile", "profiles/slurm", PASSKEY, cwd=ROOT)
    dry = r"rule evaluate:\n(?:    .*\n)*?    wildcards: experiment=passkey_swar, arm={}, seed=0\n"
    for arm, minutes in (("multihead_decay", sweep), ("attention_2layer", capped)):
        job = re.search(dry.format(arm) + r"    resources: .*runtime=(\d+)", proc.stdout)
        assert job and int(job.group(1)) == minutes, (arm, proc.stdout[-2000:])


# --------------------------------------------------------------------------- a real cluster


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "a local SLURM needs root"
    if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
        return "no SLURM installed and no apt-get to install it"
    conf = Path("/etc/slurm/slurm.conf")
    if conf.exists() and "tools/local_slurm.py" not in conf.read_text().splitlines()[0]:
        return f"{conf} belongs to another SLURM; the test never replaces it"
    return None


def tool(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def local_slurm(apt_lock):
    """A running single-node SLURM, torn down afterwards (left as found when it was
    already up); the teardown is checked to leave no daemon, conf or state behind."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    if tool("status").returncode == 0:
        yield "already up"
        return
    with apt_lock():  # `install` runs apt-get where SLURM is missing
        proc = tool("install")
    assert proc.returncode == 0, proc.stderr
    state = Path(os.environ.get("ARBENCH_SLURM_STATE", "/var/lib/arbench-slurm"))
    try:
        proc = tool("up", timeout=120)
        assert proc.returncode == 0, proc.stderr
        pids = json.loads((state / "pids.json").read_text())["pids"]
        yield proc.stdout
    finally:
        down = tool("down")
        assert down.returncode == 0, down.stderr
    assert not state.exists() and not Path("/etc/slurm/slurm.conf").exists()
    for name, pid in pids.items():
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or ") Z " in stat.read_text(), f"{name} pid {pid} still runs"


def _same(a: Path, b: Path) -> bool:
    """Byte-for-byte equal, the training wall time in an eval record aside."""
    return WALL.sub(rb"\1_", a.read_bytes()) == WALL.sub(rb"\1_", b.read_bytes())


def test_a_smoke_training_chain_on_slurm_equals_a_local_run(
    local_slurm, smoke_run_later, tmp_path: Path, workflow_copy
) -> None:
    """One smoke experiment's table through --profile profiles/slurm on a real single-node
    SLURM, its held-out data built locally first: every training and evaluation is an sbatch
    job, stats and table run locally, and the table, the eval records it reads and the
    models equal the local run's."""
    work = workflow_copy(tmp_path / "wf")
    data = snakemake("--cores", "2", TABLE, "--until", "validate_stream", *SMOKE, cwd=work)
    assert data.returncode == 0, data.stderr[-3000:]
    said = data.stdout + data.stderr
    assert "rule validate_stream:" in said and "rule train:" not in said, said[-3000:]
    start = time.monotonic()
    proc = snakemake(
        *("--profile", "profiles/slurm", "--slurm-init-seconds-before-status-checks", "2"),
        *(TABLE, *SMOKE),
        cwd=work,
    )
    wall = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr[-5000:]
    submitted = re.findall(r"submitted with SLURM jobid (\d+)", proc.stderr)
    planned = Plan(config.load(work / "config.yaml", scale="smoke"))
    runs = len(planned.eval_files(CHAIN))
    # the base runs the experiment's runs warm-start from (train.warm_start), trained first
    bases = {
        model
        for run in planned.table.of(CHAIN)
        for seed in range(run.seeds)
        for model in planned.warm_start_model(CHAIN, run.name, seed)
    }
    # the job table Snakemake printed: one training and one evaluation per run (and one
    # training per base), each of them submitted, and nothing else but the local stats and table
    table = proc.stderr.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", table, flags=re.M))
    assert set(jobs) - {"total"} == {*QUEUED, "stats", "table"}, jobs
    assert int(jobs["evaluate"]) == runs >= 1, jobs
    assert int(jobs["train"]) == runs + len(bases), jobs
    assert len(submitted) == sum(int(jobs[r]) for r in QUEUED), proc.stderr[-3000:]
    assert re.search(r"localrule stats:", proc.stderr) and re.search(
        r"localrule table:", proc.stderr
    )
    print(f"slurm smoke {CHAIN}: {len(submitted)} sbatch jobs, {wall:.0f} s wall")
    smoke_run = smoke_run_later()

    assert (work / TABLE).read_bytes() == (smoke_run / TABLE).read_bytes()
    for path in planned.eval_files(CHAIN):
        assert _same(work / path, smoke_run / path), path
    for path in [*planned.run_files(CHAIN, "model.pt"), *sorted(bases)]:
        assert (work / path).read_bytes() == (smoke_run / path).read_bytes(), path


def test_tool_refuses_a_foreign_slurm_conf(tmp_path: Path) -> None:
    """`up` never overwrites a slurm.conf it did not write (checked on a copy of the tool
    pointed at a scratch conf, so the machine's /etc is never touched)."""
    if os.geteuid() != 0:
        pytest.skip("the tool's commands need root")
    conf = tmp_path / "etc" / "slurm.conf"
    conf.parent.mkdir()
    conf.write_text("ClusterName=site\n")
    code = TOOL.read_text().replace('Path("/etc/slurm/slurm.conf")', f'Path("{conf}")')
    copy = tmp_path / "local_slurm.py"
    copy.write_text(code)
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in ("munged", "munge", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel"):
        (fake / name).write_text(FAIL)
        (fake / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    state = tmp_path / "state"
    cmd = [sys.executable, str(copy), "up", "--state", str(state)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and f"{conf} exists and is not ours" in proc.stderr
    assert conf.read_text() == "ClusterName=site\n" and not state.exists()
