"""Snakemake glue: write one (subset, split) of a release with its task's writer."""

from pathlib import Path

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.run import write_release_split

wc = sm.wildcards
write_release_split(
    sm.params.task, dict(sm.params.settings), wc.subset, wc.split, Path(sm.params.root), log
)
