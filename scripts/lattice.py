"""Snakemake glue: the lattice-memory table and figure from its three studies' statistics."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.io import atomic_write_text, read_json
from arbench.report.lattice import KINDS, figure, render_table, summary

report = summary({kind: read_json(sm.input[kind]) for kind in KINDS}, sm.params.arm)
atomic_write_text(sm.output.tex, render_table(report, sm.input.template))
figure(report, [sm.output.pdf, sm.output.png])
largest = report["lattice_largest"]
log(
    f"lattice: largest P at >= {report['target']}: {largest}, "
    f"{report['lattice_seconds_per_step']:.3g} s/step"
)
log(f"wrote {sm.output.tex}, {sm.output.pdf} and {sm.output.png}")
