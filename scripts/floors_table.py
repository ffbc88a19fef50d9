"""Snakemake glue: the floors table, every floor from its task's own calculator."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.io import atomic_write_json, atomic_write_text
from arbench.report.chance import CHANCE_FACTOR, NO_BINDING_FACTOR, TEST_RULE
from arbench.report.floors import floor_rows
from arbench.report.tables import render

rows = floor_rows(list(sm.params.blocks))
context = {
    "rows": rows,
    "scale": sm.params.scale,
    "chance_factor": CHANCE_FACTOR,
    "no_binding_factor": NO_BINDING_FACTOR,
    "chance_rule": TEST_RULE,
}
atomic_write_json(sm.output.json, context)
atomic_write_text(sm.output.tex, render(sm.input.template, source=sm.output.json, **context))
log(f"wrote {len(rows)} rows to {sm.output.tex}")
