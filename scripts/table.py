"""Snakemake glue: render an experiment's LaTeX table from its statistics."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.glue import setup
from arbench.io import atomic_write_text, read_json
from arbench.report.tables import render

log = setup(snakemake.log[0], snakemake.threads)
stats = read_json(snakemake.input.stats)
atomic_write_text(snakemake.output[0], render(snakemake.input.template, **stats))
log(f"wrote {snakemake.output[0]}")
