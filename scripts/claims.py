"""Snakemake glue: the claim-by-claim report (claims.md and tables/claims.tex) from
claims.yaml and the stats JSONs the config plans; for one study, the claims it decides."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from pathlib import Path

from arbench.report.claims import counts, write_report

results = write_report(
    sm.input.claims,
    Path(sm.params.root),  # the results root
    sm.params.scale,
    sm.output.md,
    sm.output.tex,
    planned=dict(sm.params.planned),
    md_template=sm.input.md_template,
    tex_template=sm.input.tex_template,
    study=sm.params.get("study"),  # a study's [name, experiments]: its claims only
)
for r in results:
    log(f"{r.claim.id:>40}: {r.verdict}{f' ({r.reason})' if r.reason else ''}")
log(", ".join(f"{k}: {v}" for k, v in counts(results).items()))
