"""The claims report on the session's smoke run (the `smoke_run` fixture): the rule wrote
claims.md and tables/claims.tex, and every claim of claims.yaml evaluates on the smoke stats
(a value, or "not run at this scale" with its reason; a statistic path that is simply wrong
would fail here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from arbench import config
from arbench.plan import Plan
from arbench.report import claims as C

SMOKE = "results/smoke"


def test_the_smoke_run_writes_the_claims_report(smoke_run: Path) -> None:
    if not (smoke_run / "claims.yaml").exists():
        pytest.skip("the workflow copy has no claims.yaml (tests/workflow/conftest.py COPY)")
    md = (smoke_run / SMOKE / "claims.md").read_text()
    tex = (smoke_run / SMOKE / "tables/claims.tex").read_text()
    cf = C.load_claims(smoke_run / "claims.yaml")
    assert all(f"| `{c.id}` |" in md for c in cf.claims)
    assert "(scale `smoke`)" in md and r"\label{tab:claims}" in tex
    plan = Plan(config.resolve(config.read_config([smoke_run / "config.yaml"], {"scale": "smoke"})))
    results = C.evaluate(cf, smoke_run / SMOKE, "smoke", C.planned_stats(cf, plan))
    assert any(r.values for r in results)
    assert all(r.reason for r in results if r.verdict == C.NOT_RUN)
