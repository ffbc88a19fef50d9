"""The paper-scale runs of an experiment done so far, beside the sources' per-seed results:
Markdown rows for docs/PROTOCOL.md while the full seed counts (what the stats rule needs)
are still running.

    python tools/paper_runs_so_far.py [--experiment paper_mqar] [--root results]

Per run arm (the run table's rows: an arm at each grid value, with its own train settings):
each finished seed's held-out and rebound accuracy (its eval JSON), their mean, the reference
set's mean, range and lock-in counts, and the training's wall time per step; per contrast of
the experiment, at each grid value both arms run at: our difference of means with its exact
permutation p where both arms have seeds, beside the reference's difference. Nothing is typed
in.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arbench.config import load  # noqa: E402
from arbench.experiment import Run, RunTable  # noqa: E402
from arbench.plan import Plan  # noqa: E402
from arbench.report.reference import load_reference, summarise  # noqa: E402
from arbench.stats import contrast  # noqa: E402


def _wall_time(root: str, table: RunTable, ev: dict) -> float:
    """The training wall time of the run an evaluation scored: its final.json's (an eval JSON
    holds none), or the eval's own where it was written when it embedded it."""
    owner, arm = table.owner(ev["experiment"], ev["arm"], ev["seed"])
    final = Path(root, "runs", owner, arm, f"seed{ev['seed']}", "final.json")
    if final.exists() or "train_wall_time_s" not in ev:
        return float(json.loads(final.read_text())["wall_time_s"])
    return float(ev["train_wall_time_s"])


def main(argv: list[str] | None = None) -> None:
    """Print the arm table and the contrast table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", default="paper_mqar")
    ap.add_argument("--root", default=str(ROOT / "results"))
    args = ap.parse_args(argv)
    cfg = load(ROOT / "config.yaml")
    exp, table = cfg["experiments"][args.experiment], Plan(cfg).table
    rows = table.of(args.experiment)
    ref = load_reference(ROOT / exp["reference"]["file"], exp["reference"]["set"])
    ours: dict[str, list[float]] = {}
    print(
        "| arm | ours, per seed (rebound) | ours mean (n) | the paper: mean [min, max] (n) "
        "| paper lock-in (threshold / above) | time per step |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for row in rows:
        files = sorted(Path(args.root, "evals", args.experiment, row.name).glob("seed*.json"))
        evs = sorted((json.loads(f.read_text()) for f in files), key=lambda e: e["seed"])
        ours[row.name] = [e["scores"]["accuracy"] for e in evs]
        seeds = ", ".join(
            f"s{e['seed']} {e['scores']['accuracy']:.3f} "
            f"({e['scores'].get('rebinding_accuracy', float('nan')):.3f})"
            for e in evs
        )
        steps = row.train["steps"]  # the row's own (an arm or a grid's ``with`` may set it)
        ms = ", ".join(f"{_wall_time(args.root, table, e) / steps * 1000:.0f}" for e in evs)
        mean = f"{np.mean(ours[row.name]):.3f} ({len(evs)})" if evs else "--"
        paper = lock = "--"
        theirs = _reference_arm(ref, row)
        if theirs:
            r = summarise(theirs, exp["lock_in_threshold"], exp.get("lock_in_above"))
            n = r["n"]
            paper = f"{r['mean']:.3f} [{r['min']:.3f}, {r['max']:.3f}] ({n})"
            lock = f"{r['lock_in']}/{n}, {r.get('lock_in_above', '--')}/{n}"
        print(
            f"| `{row.name}` | {seeds or 'not run'} | {mean} | {paper} | {lock} | "
            f"{ms + ' ms' if ms else '--'} |"
        )
    print()
    print("| knob | within | a - b | ours (n_a/n_b, p) | the paper |")
    print("| --- | --- | --- | ---: | ---: |")
    point = {(row.arm, row.value): row for row in rows}
    values = list(dict.fromkeys(row.value for row in rows))  # the grid's, or [None]
    for c in exp.get("contrasts", []):
        for value in values:
            if (c["a"], value) not in point or (c["b"], value) not in point:
                continue  # a grid's ``arms`` may run an arm at some values only
            row_a, row_b = point[(c["a"], value)], point[(c["b"], value)]
            ra, rb = _reference_arm(ref, row_a), _reference_arm(ref, row_b)
            paper = (
                f"{np.mean(list(ra.values())) - np.mean(list(rb.values())):+.3f}"
                if ra and rb
                else "--"
            )
            mine = "--"
            a, b = ours[row_a.name], ours[row_b.name]
            if a and b:
                got = contrast(a, b, rng=np.random.default_rng(0))
                mine = f"{got['diff']:+.3f} ({len(a)}/{len(b)}, p = {got['p']:.3g})"
            print(
                f"| {c['knob']} | {c.get('within', '')} | `{row_a.name}` - `{row_b.name}` "
                f"| {mine} | {paper} |"
            )


def _reference_arm(ref: dict[str, Any], row: Run) -> dict[Any, float] | None:
    """The reference set's seeds for a row: its run arm's (a set may give each grid value its
    own), else its arm's (`arbench.report.reference`)."""
    return ref["arms"].get(row.name) or ref["arms"].get(row.arm)


if __name__ == "__main__":
    main()
