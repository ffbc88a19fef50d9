"""Snakemake glue: an experiment's figure, drawn in the layout its statistics name."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.io import read_json
from arbench.report.layouts import draw

stats = read_json(sm.input.stats)
draw(stats, [sm.output.pdf, sm.output.png])
log(f"wrote {sm.output.pdf} and {sm.output.png}")
