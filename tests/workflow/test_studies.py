"""`make demo-<study>`'s rule: one study's index over the tables and figures it built."""

from __future__ import annotations

from pathlib import Path

SMOKE = "results/smoke"


def test_a_study_index_lists_its_experiments_artifacts(smoke_run: Path, sm) -> None:
    # everything it needs is built by the smoke run: only the index job runs
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


def test_an_unknown_study_is_no_target(sm) -> None:
    proc = sm("-n", f"{SMOKE}/studies/nosuch.md", "--config", "scale=smoke")
    assert proc.returncode != 0 and "nosuch" in proc.stderr + proc.stdout
