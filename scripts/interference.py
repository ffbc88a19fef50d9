"""Snakemake glue: the interference study (no training): figure and interactive page."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.report.interference import figure, page, run_study

settings = dict(sm.params.settings)
log(f"interference study at scale={sm.params.scale}: {settings}")
results = run_study(settings)
figure(results, settings, sm.params.scale, [sm.output.pdf, sm.output.png])
page(results, settings, sm.params.scale, sm.output.html)
for c in results:
    log(f"{c.rule.label}: error at n={int(c.n[-1])} is {c.error_vs_n[-1]:.4f}")
log(f"wrote {sm.output.pdf}, {sm.output.png} and {sm.output.html}")
