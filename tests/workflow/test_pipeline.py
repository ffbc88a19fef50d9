"""The DAG end to end: paper-scale dry run, smoke-scale real run, report, profiles, lints."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SMOKE = "results/smoke"


def test_paper_dry_run_plans_every_training_job(sm) -> None:
    # --forceall: plan every job even where a working checkout already holds some outputs
    proc = sm("-n", "--forceall", "--cores", "8", "results/tables/factorial.tex")
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout, flags=re.M))
    assert int(counts["train"]) >= 80
    assert int(counts["evaluate"]) == int(counts["train"])


# rules no scale's `rule all` plans: make paper (LaTeX) and make demo-<study> (the study scale)
OPT_IN = {"paper", "study", "study_claims"}


def test_the_smoke_dag_runs_every_rule_and_path_in_few_jobs(sm) -> None:
    """The smoke scale exists to run every rule and code path, not every arm (config.yaml
    scales.smoke cuts arms and grid values): its forced dry run plans jobs of every rule of
    `rule all` (`OPT_IN` are asked for by name, never by `all`), its experiments cover every
    report layout, task, model family and cell of the paper scale (`drop_arms` never cuts a
    cell's last arm), and its training and evaluation stay within the test budget (`make
    test` within 12 minutes on 2 cores)."""
    from arbench import config
    from arbench.plan import Plan

    rules = sm("--list-rules", "--config", "scale=smoke")
    proc = sm("-n", "--forceall", "--cores", "2", "--config", "scale=smoke")
    assert rules.returncode == proc.returncode == 0, proc.stderr[-3000:]
    counts = {r: int(n) for r, n in re.findall(r"^(\w+)\s+(\d+)$", proc.stdout, flags=re.M)}
    assert set(rules.stdout.split()) - OPT_IN == set(counts) - {"total"}, counts
    # 59 trainings, 75 evaluations, 308 jobs on a machine without mamba_ssm (its fused arms
    # skipped): issue 47's paper_wall_lengths adds 1 training (the attention control at L = 64;
    # its armed arm is paper_wall's end_only run), 2 evaluations and 8 jobs (its held-out set,
    # its oracle, stats, table and figure), about 12 core-seconds of jobs (2026-12-07); 58, 73 and
    # 300 before it: paper_ksweep, paper_lr_sweep, paper_hardened and paper_mamba2_session add
    # 1 training (paper_lr_sweep's gated_deltanet at 3e-3; the rest are paper_mqar's runs, evaluated
    # again under their own experiment), 5 evaluations and 25 jobs; 57, 67 and 273 before them:
    # lattice_base, the warm start, adds 2, 2 and 9; 55, 65 and 264 before it, with paper_wall's and
    # paper_collision's 5, 5 and 22 and paper_s5's 1, 1 and 7; 72, 85 and 286 before `drop_arms`
    # (the paper recipe's reference cells had added 3, 3 and 11, Table 1's claim arms 5, 5 and 10),
    # 84, 96 and 312 before the first cut
    assert counts["train"] <= 59 and counts["evaluate"] <= 75 and counts["total"] <= 308, counts

    def shape(scale: str) -> dict[str, set[str]]:
        plan = Plan(config.load(ROOT / "config.yaml", scale=scale))
        exps = plan.experiments
        return {
            "layouts": {plan.layout(e) for e in exps},
            "tasks": {exps[e]["task"]["name"] for e in exps},
            "families": {exps[e]["model"].get("family", "lm") for e in exps},
            "cells": {a.get("cell") for e in exps.values() for a in e["arms"].values()},
        }

    assert shape("smoke") == shape("paper")


def test_bad_config_fails_before_any_job(sm) -> None:
    proc = sm("-n", "--cores", "1", "--config", "scale=huge")
    assert proc.returncode != 0
    assert "scale" in proc.stderr + proc.stdout


def test_smoke_pipeline_builds_table_and_figure(smoke_run: Path) -> None:
    tex = (smoke_run / SMOKE / "tables/factorial.tex").read_text()
    stats = json.loads((smoke_run / SMOKE / "stats/factorial.json").read_text())
    assert len(stats["arms"]) == 8
    for arm, s in stats["arms"].items():
        assert f"\\texttt{{{arm.replace('_', chr(92) + '_')}}}" in tex
        assert s["n"] == 1 and 0.0 <= s["mean"] <= 1.0
    assert stats["state_sizes_per_layer"] == [1024]  # matched state across every arm
    assert "scale \\texttt{smoke}" in tex and "$K=32$" in tex
    assert len(stats["contrasts"]) == 8
    for ext in ("pdf", "png"):
        assert (smoke_run / SMOKE / f"figures/factorial.{ext}").stat().st_size > 1000
    oracle = json.loads((smoke_run / SMOKE / "datasets/factorial/oracle.json").read_text())
    assert oracle["valid"] is True
    final = json.loads(
        (smoke_run / SMOKE / "runs/factorial/delta_conv/seed0/final.json").read_text()
    )
    assert final["threads"] == 1 and final["versions"]["torch"].startswith("2.13")


def test_smoke_pipeline_builds_the_other_artifacts(smoke_run: Path) -> None:
    cells = (smoke_run / SMOKE / "tables/cells.tex").read_text()
    assert "\\texttt{delta\\_rule}" in cells and "\\texttt{mamba2}" in cells
    sweep = json.loads((smoke_run / SMOKE / "stats/passkey_swar.json").read_text())
    # every arm the smoke scale keeps is swept; the ones it drops are listed as skipped
    from arbench import config

    planned = config.load(smoke_run / "config.yaml", scale="smoke")["experiments"]
    assert set(sweep["sweep"]["arms"]) == set(planned["passkey_swar"]["arms"])
    assert {"single_scalar_decay", "additive_single_decay"} <= set(sweep["sweep"]["arms"])
    dropped = set(sweep["skipped"]["arms"])
    assert dropped == {"multihead_decay", "additive_multihead_decay", "attention_2layer"}, sweep
    assert "ar_expired_stale" in sweep["sweep"]["types"]
    report = json.loads(
        (smoke_run / SMOKE / "datasets/passkey_swar/oracle_report.json").read_text()
    )
    assert report["failed_examples"] == 0
    assert (smoke_run / SMOKE / "tables/passkey_swar.tex").stat().st_size > 500
    assert (smoke_run / SMOKE / "figures/passkey_swar.png").stat().st_size > 1000


def test_every_table_the_smoke_run_writes_compiles(
    smoke_run: Path, tmp_path: Path, compile_tex
) -> None:
    """Each table the run generated, compiled in a minimal booktabs document (as
    tests/report/test_latex.py compiles a checkout's own results/, where it has any): the
    generated LaTeX itself, not only the templates, compiles on every test run."""
    from arbench import config
    from arbench.plan import Plan

    plan = Plan(config.load(smoke_run / "config.yaml", scale="smoke"))
    planned = sorted(t for t in plan.targets() if t.startswith(f"{SMOKE}/tables/"))
    written = sorted(
        str(p.relative_to(smoke_run)) for p in (smoke_run / SMOKE).glob("tables/*.tex")
    )
    assert written == planned and len(planned) >= 20, written
    for rel in written:
        compile_tex((smoke_run / rel).read_text(), tmp_path, Path(rel).stem)


def test_lints_are_clean(sm) -> None:
    lint = sm("--lint")
    assert "lints for" not in (lint.stdout + lint.stderr).lower(), lint.stdout[-3000:]
    fmt = subprocess.run(
        [str(BIN / "snakefmt"), "--check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert fmt.returncode == 0, fmt.stderr[-3000:]
    ruff = subprocess.run(
        [str(BIN / "ruff"), "check", "src", "tests", "scripts", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert ruff.returncode == 0, ruff.stdout[-3000:]


def test_report_collects_flagged_tables_and_figures(smoke_run: Path, sm) -> None:
    proc = sm("--report", "report.html", "--config", "scale=smoke", cwd=smoke_run)
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (smoke_run / "report.html").read_text(errors="replace")
    for name in ("factorial.tex", "factorial.png", "passkey_swar.tex", "cells.tex", "cells.json"):
        assert name in html, name


def test_slurm_profile_plans_the_paper_dag(sm) -> None:
    proc = sm("-n", "--forceall", "--profile", "profiles/slurm", "results/tables/factorial.tex")
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout, flags=re.M))
    assert int(counts["train"]) >= 80
    assert re.search(r"resources: .*gpu=1", proc.stdout), "paper-scale training asks for a GPU"
