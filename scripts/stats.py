"""Snakemake glue: per-experiment statistics from every run's evaluation."""

import json
from pathlib import Path

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.io import atomic_write_json, read_json
from arbench.report.experiment import experiment_stats, with_training
from arbench.report.reference import load_reference

p = sm.params
# each evaluation with its training's wall time, which the eval JSON does not hold
evals = [
    with_training(read_json(ev), read_json(final))
    for ev, final in zip(sm.input.evals, sm.input.finals, strict=True)
]
curves = {
    (ev["arm"], ev["seed"]): [json.loads(line) for line in Path(path).read_text().splitlines()]
    for ev, path in zip(evals, sm.input.metrics, strict=True)
}
reports = {path: read_json(path) for path in sm.input.gates}
self_tests = {arm: reports[path].get("self_tests", {}) for arm, path in p.gates.items()}
ref = p.experiment.get("reference")
reference = load_reference(sm.input.reference[0], ref["set"]) if ref else None
stats = experiment_stats(
    sm.wildcards.experiment, p.experiment, evals, p.scale, p.layout, curves, self_tests, reference
)
atomic_write_json(sm.output[0], stats)
for arm, s in stats["arms"].items():
    log(f"{arm:>22}: {s['mean']:.3f} ± {s['sd']:.3f} (n={s['n']})")
