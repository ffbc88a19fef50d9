"""Snakemake glue: bar-and-dot figure of an experiment."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.glue import setup
from arbench.io import read_json
from arbench.report.figures import bars_with_seeds

log = setup(snakemake.log[0], snakemake.threads)
bars_with_seeds(read_json(snakemake.input.stats), [snakemake.output.pdf, snakemake.output.png])
log(f"wrote {snakemake.output.pdf} and {snakemake.output.png}")
