"""Snakemake glue: render an experiment's LaTeX table from its statistics."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.io import atomic_write_text, read_json
from arbench.report.tables import render

stats = read_json(sm.input.stats)
atomic_write_text(sm.output[0], render(sm.input.template, source=sm.input.stats, **stats))
log(f"wrote {sm.output[0]}")
