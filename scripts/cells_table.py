"""Snakemake glue: render the cell-zoo table at a reference arm's state/parameter budget."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.io import atomic_write_json, atomic_write_text
from arbench.report.cells_table import zoo_context
from arbench.report.tables import render

ref = sm.params.reference
context = zoo_context(ref["task"], ref["model"], sm.params.name)
atomic_write_json(sm.output.json, context)
atomic_write_text(sm.output.tex, render(sm.input.template, **context))
log(f"{len(context['rows'])} cells -> {sm.output.tex}")
