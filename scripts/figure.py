"""Snakemake glue: an experiment's figure, in the layout its task declares."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.io import read_json
from arbench.report.figures import FIGURES

stats = read_json(sm.input.stats)
FIGURES[stats["layout"]](stats, [sm.output.pdf, sm.output.png])
log(f"wrote {sm.output.pdf} and {sm.output.png}")
