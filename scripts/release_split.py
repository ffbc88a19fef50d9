"""Snakemake glue: write one (subset, split) of a release with its task's writer."""

from pathlib import Path

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.run import write_release_split
from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)
wc = sm.wildcards
out_dir = Path(sm.output.sidecar).parents[2]  # <release>/stats/<subset>/<split>.json
write_release_split(sm.params.task, dict(sm.params.settings), wc.subset, wc.split, out_dir, log)
