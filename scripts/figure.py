"""Snakemake glue: an experiment's figure (bars per arm, or accuracy vs length per type)."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.glue import setup
from arbench.io import read_json
from arbench.report.figures import bars_with_seeds, sweep_by_type

log = setup(snakemake.log[0], snakemake.threads)
stats = read_json(snakemake.input.stats)
draw = sweep_by_type if "sweep" in stats else bars_with_seeds
draw(stats, [snakemake.output.pdf, snakemake.output.png])
log(f"wrote {snakemake.output.pdf} and {snakemake.output.png}")
