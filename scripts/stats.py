"""Snakemake glue: per-experiment statistics from every run's evaluation."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.glue import setup
from arbench.io import atomic_write_json, read_json
from arbench.report.experiment import experiment_stats

log = setup(snakemake.log[0], snakemake.threads)
evals = [read_json(p) for p in snakemake.input.evals]
stats = experiment_stats(
    snakemake.params.name, snakemake.params.experiment, evals, snakemake.params.scale
)
atomic_write_json(snakemake.output[0], stats)
for arm, s in stats["arms"].items():
    log(f"{arm:>22}: {s['mean']:.3f} ± {s['sd']:.3f} (n={s['n']})")
