"""Snakemake glue: write a release's card, vocabulary and statistics from its splits."""

from pathlib import Path

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.run import write_release_index

write_release_index(sm.params.task, dict(sm.params.settings), Path(sm.params.root), log)
