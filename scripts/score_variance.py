"""Snakemake glue: the score-variance study (no training) and its figure."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.analysis.score_variance import study
from arbench.io import atomic_write_json
from arbench.report.score_variance import figure

result = study(dict(sm.params.settings))
atomic_write_json(sm.output.json, result)
figure(result, sm.params.scale, [sm.output.pdf, sm.output.png])
for setting in ("independent", "dependent"):
    for name, points in result[setting].items():
        log(f"{setting} {name}: {points[0][0]:.4f} at n={result['n'][0]} -> {points[-1][0]:.4f}")
log(f"wrote {sm.output.pdf}, {sm.output.png} and {sm.output.json}")
