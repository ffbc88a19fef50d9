"""Snakemake glue: the index of one study's claims, tables and figures (what it built, and
where)."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.io import atomic_write_text
from arbench.report.studies import study_index

text = study_index(
    sm.wildcards.study,
    sm.params.experiments,
    sm.params.scale,
    list(sm.input.files),
    sm.output[0],
    claims=sm.input.claims,
)
atomic_write_text(sm.output[0], text)
log(f"wrote {sm.output[0]}")
