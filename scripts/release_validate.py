"""Snakemake glue: validate a whole release with its task's oracle; the report gates training."""

import json
from pathlib import Path

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.io import atomic_write_text
from arbench.run import validate_release
from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)
out = Path(sm.output.report)
report = validate_release(sm.params.task, dict(sm.params.settings), out.parent, log)
atomic_write_text(out, json.dumps(report, indent=1) + "\n")
