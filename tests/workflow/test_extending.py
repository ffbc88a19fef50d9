"""docs/EXTENDING.md's worked examples work as written: its new cell and new task, each one
file dropped into the library, and its config-only experiment, run through the DAG."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "EXTENDING.md").read_text()


def _block(lang: str, needle: str) -> str:
    return next(b for b in re.findall(rf"```{lang}\n(.*?)```", DOC, re.S) if needle in b)


def test_the_worked_examples_run_as_documented(sm, workflow_copy, tmp_path: Path) -> None:
    work = workflow_copy(tmp_path / "work")
    (work / "src/arbench/cells/decayed_additive.py").write_text(_block("python", "@register("))
    (work / "src/arbench/tasks/membership.py").write_text(_block("python", "@register_task"))
    cfg = yaml.safe_load((work / "config.yaml").read_text())
    new = yaml.safe_load(_block("yaml", "experiments:"))["experiments"]
    cfg["experiments"].update(new)
    (name,) = new
    cfg["experiments"]["membership"] = {
        **new[name],
        "title": "Membership",
        # model.cell_options reach every arm's cell; the factorial's q/k bias is not an
        # option of the new cell (the config check says so, naming the cell)
        "model": {**new[name]["model"], "cell_options": {}},
        "task": {"name": "membership", "length": 32, "n_symbols": 16},
        "arms": {"dadd": {"cell": "decayed_additive", "heads": 2}, "delta": {"cell": "delta_rule"}},
        "contrasts": [{"knob": "cell", "a": "dadd", "b": "delta"}],
    }
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    targets = [f"results/smoke/tables/{e}.tex" for e in (name, "membership")]
    proc = sm(
        "--cores",
        "2",
        *targets,
        "results/smoke/tables/cells.tex",
        "--config",
        "scale=smoke",
        cwd=work,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    table = (work / targets[1]).read_text()
    assert r"\texttt{dadd} & decayed\_additive & 2" in table
    assert r"\texttt{decayed\_additive}" in (work / "results/smoke/tables/cells.tex").read_text()
    assert "$K=16$" in (work / targets[0]).read_text()
