"""Snakemake glue: validate a whole release with its task's oracle; the report gates training.

The job's only output is the report. It is also written to the job's ``report`` log whatever
the outcome, since Snakemake deletes a failed job's outputs but keeps its logs.
"""

from pathlib import Path

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.io import atomic_write_json
from arbench.run import validate_release

out = Path(sm.output.report)
report = validate_release(
    sm.params.task, dict(sm.params.settings), out.parent, log, report_copy=sm.log.report
)
atomic_write_json(out, report)
