"""The paper-scale runs of an experiment done so far, beside the sources' per-seed results:
Markdown rows for docs/PROTOCOL.md while the full seed counts (what the stats rule needs)
are still running.

    python tools/paper_runs_so_far.py [--experiment paper_mqar] [--root results]

Per arm: each finished seed's held-out and rebound accuracy (its eval JSON), their mean, the
reference set's mean, range and lock-in counts, and the training's wall time per step; per
contrast of the experiment: our difference of means with its exact permutation p where both
arms have seeds, beside the reference's difference. Nothing is typed in.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arbench.config import load  # noqa: E402
from arbench.experiment import RunTable  # noqa: E402
from arbench.plan import Plan  # noqa: E402
from arbench.report.reference import load_set, summarise  # noqa: E402
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
    ref = load_set(ROOT / exp["reference"]["file"], exp["reference"]["set"])
    ours: dict[str, list[float]] = {}
    print(
        "| arm | ours, per seed (rebound) | ours mean (n) | the paper: mean [min, max] (n) "
        "| paper lock-in (threshold / above) | time per step |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for arm in exp["arms"]:
        files = sorted(Path(args.root, "evals", args.experiment, arm).glob("seed*.json"))
        evs = sorted((json.loads(f.read_text()) for f in files), key=lambda e: e["seed"])
        ours[arm] = [e["scores"]["accuracy"] for e in evs]
        seeds = ", ".join(
            f"s{e['seed']} {e['scores']['accuracy']:.3f} "
            f"({e['scores'].get('rebinding_accuracy', float('nan')):.3f})"
            for e in evs
        )
        steps = exp["train"]["steps"]
        ms = ", ".join(f"{_wall_time(args.root, table, e) / steps * 1000:.0f}" for e in evs)
        mean = f"{np.mean(ours[arm]):.3f} ({len(evs)})" if evs else "--"
        paper = lock = "--"
        if ref["arms"].get(arm):
            r = summarise(ref["arms"][arm], exp["lock_in_threshold"], exp.get("lock_in_above"))
            n = r["n"]
            paper = f"{r['mean']:.3f} [{r['min']:.3f}, {r['max']:.3f}] ({n})"
            lock = f"{r['lock_in']}/{n}, {r.get('lock_in_above', '--')}/{n}"
        print(
            f"| `{arm}` | {seeds or 'not run'} | {mean} | {paper} | {lock} | "
            f"{ms + ' ms' if ms else '--'} |"
        )
    print()
    print("| knob | within | a - b | ours (n_a/n_b, p) | the paper |")
    print("| --- | --- | --- | ---: | ---: |")
    for c in exp.get("contrasts", []):
        a, b = c["a"], c["b"]
        ra, rb = ref["arms"].get(a), ref["arms"].get(b)
        paper = (
            f"{np.mean(list(ra.values())) - np.mean(list(rb.values())):+.3f}" if ra and rb else "--"
        )
        mine = "--"
        if ours[a] and ours[b]:
            got = contrast(ours[a], ours[b], rng=np.random.default_rng(0))
            mine = f"{got['diff']:+.3f} ({len(ours[a])}/{len(ours[b])}, p = {got['p']:.3g})"
        print(f"| {c['knob']} | {c.get('within', '')} | `{a}` - `{b}` | {mine} | {paper} |")


if __name__ == "__main__":
    main()
