"""`make demo-<study>`'s rules: one study's claims, and its index over them and the tables and
figures it built."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

SMOKE = "results/smoke"


def test_a_study_index_lists_its_experiments_artifacts(smoke_run: Path, sm) -> None:
    # everything it needs is built by the smoke run: only the claims and index jobs run
    proc = sm(
        f"{SMOKE}/studies/lattice.md", "--cores", "1", "--config", "scale=smoke", cwd=smoke_run
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    index = (smoke_run / SMOKE / "studies/lattice.md").read_text()
    assert "Study `lattice` (scale `smoke`)" in index
    for name in ("lattice_capacity", "lattice_forgetting", "lattice_realtext", "lattice"):
        assert f"[{name}.tex](../tables/{name}.tex)" in index
        assert (smoke_run / SMOKE / f"tables/{name}.tex").exists()
    assert "[lattice_realtext.png](../figures/lattice_realtext.png)" in index
    assert "[the claims this study decides](lattice/claims.md)" in index
    claims = (smoke_run / SMOKE / "studies/lattice/claims.md").read_text()
    assert claims.startswith("# Claim-by-claim reproduction of study `lattice` (scale `smoke`)")
    ids = re.findall(r"^\| `([a-z0-9_]+)` \|", claims, flags=re.M)
    doc = yaml.safe_load((smoke_run / "claims.yaml").read_text())
    study = {"lattice_base", "lattice_capacity", "lattice_forgetting", "lattice_realtext"}
    want = [
        c["id"]
        for c in doc["claims"]
        if c.get("experiment") in study or (c.get("causal") or {}).get("experiment") in study
    ]
    assert ids == want and want, ids  # its claims, no others
    assert "](../../tables/" in claims  # linked back to the results root


def test_an_unknown_study_is_no_target(sm) -> None:
    proc = sm("-n", f"{SMOKE}/studies/nosuch.md", "--config", "scale=smoke")
    assert proc.returncode != 0 and "nosuch" in proc.stderr + proc.stdout
