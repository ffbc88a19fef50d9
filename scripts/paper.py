"""Snakemake glue: the paper's body (every table and figure the config builds) and its
compilation with the frame paper/main.tex into paper.pdf."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from pathlib import Path

from arbench.io import atomic_write_text
from arbench.report.paper import body, compile_pdf, load_captions

text = body(
    list(sm.input.tables),
    list(sm.input.figures),
    str(Path(sm.output.pdf).parent),  # the results root
    sm.params.scale,
    dict(sm.params.experiments),
    load_captions(sm.input.captions),
)
atomic_write_text(sm.output.body, text)
log(f"wrote {sm.output.body}: {len(sm.input.tables)} tables, {len(sm.input.figures)} figures")
seconds = compile_pdf(sm.input.frame, sm.output.body, sm.output.pdf, log=log)
log(f"compiled {sm.output.pdf} in {seconds:.1f} s")
