"""Bad config input is rejected when Snakemake parses the workflow, before any job: one line
naming the key path, the value and what is allowed. A few cases end to end (each Snakemake
start costs seconds); `tests/test_config.py` has every case as a unit test."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory, workflow_copy) -> Path:
    """One scratch copy of the workflow; each test writes its own extra config file."""
    return workflow_copy(tmp_path_factory.mktemp("bad_config"))


def _rejected(proc) -> str:
    """The one line a rejected run names the problem in (it must be exactly one)."""
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    lines = [line for line in out.splitlines() if line.startswith("invalid config: ")]
    assert len(lines) == 1, out[-3000:]
    assert "Building DAG" not in out and "Traceback" not in out, out[-3000:]
    return lines[0].removeprefix("invalid config: ")


def test_a_repeated_key_in_config_yaml_fails_and_runs_no_job(sm, work: Path) -> None:
    # today's trap: a second `delta:` arm silently replaced the first
    original = (work / "config.yaml").read_text()
    arm = "      delta:               &delta {cell: delta_rule, conv: false, decay: false}\n"
    line = original[: original.index(arm)].count("\n") + 1
    bad = original.replace(arm, arm + "      delta: {cell: delta_rule, conv: true, decay: true}\n")
    (work / "config.yaml").write_text(bad)
    try:  # a real run, not a dry run: nothing may start
        proc = sm("--cores", "1", "--config", "scale=smoke", cwd=work, timeout=120)
    finally:
        (work / "config.yaml").write_text(original)
    message = _rejected(proc)
    assert message.startswith(
        f"{work / 'config.yaml'} line {line + 1}: key experiments.factorial.arms.delta is set "
        f"twice (first on line {line})"
    ), message
    assert not (work / "results").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (  # a repeated key in a file given with --configfile
            "experiments:\n  factorial:\n    seeds: 1\n    seeds: 2\n",
            "extra.yaml line 4: key experiments.factorial.seeds is set twice (first on line 3)",
        ),
        (  # an option the arm's cell does not accept: today it failed at train time
            "experiments:\n  factorial:\n    arms:\n      delta: {heads: 3}\n",
            "experiments.factorial.arms.delta: cell 'delta_rule' rejects d_model=32, heads=3",
        ),
        (  # an unknown task option: today a traceback naming no key
            "experiments:\n  factorial:\n    task: {paris: 3}\n",
            "experiments.factorial.task.paris: not a setting of task 'mqar'; allowed: ['answer',",
        ),
        (  # an unknown training option in an arm's own train block
            "experiments:\n  factorial:\n    arms:\n      delta: {train: {lrr: 1.0e-3}}\n",
            "config key experiments.factorial.arms.delta.train.lrr: unknown key; allowed: [",
        ),
    ],
    ids=["repeated-key", "cell-option", "task-option", "arm-train-option"],
)
def test_bad_input_fails_in_one_line_before_any_job(
    sm, work: Path, extra: str, message: str
) -> None:
    (work / "extra.yaml").write_text(extra)
    proc = sm("-n", "--configfile", "extra.yaml", "--config", "scale=smoke", cwd=work)
    got = _rejected(proc)
    assert message in got, got


def test_an_exponent_without_a_dot_is_a_number(sm, work: Path) -> None:
    # PyYAML (and so Snakemake's own loader) reads `lr: 3e-3` as the string '3e-3', which the
    # schema rejects; the workflow reads it as 0.003 (tests/test_config.py checks the float)
    (work / "extra.yaml").write_text("experiments:\n  factorial:\n    train: {lr: 3e-3}\n")
    proc = sm("-n", "--configfile", "extra.yaml", "--config", "scale=smoke", cwd=work)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def test_a_bad_reference_score_fails_the_dry_run_naming_file_set_arm_and_seed(
    sm, work: Path
) -> None:
    # it passed `snakemake -n` and failed in the stats job after every paper_mqar training,
    # with "could not convert string to float: '0.9x'"
    ref = work / "references" / "paper_code_results.yaml"
    original = ref.read_text()
    row = "armed_gdn: {0: 0.978515625, 1: 1.0,"
    ref.write_text(original.replace(row, "armed_gdn: {0: 0.9x, 1: 1.0,", 1))
    try:
        proc = sm("-n", "--config", "scale=paper", cwd=work)
    finally:
        ref.write_text(original)
    assert _rejected(proc).startswith(
        f"experiments.paper_mqar.reference.file: {ref}: set table1_k32, arm armed_gdn (arms), "
        "seed 0: '0.9x' is not a number"
    )
