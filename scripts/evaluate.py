"""Snakemake glue: evaluate one trained run with its task's evaluator."""

from pathlib import Path

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.runtime import setup

sm = snakemake
log = setup(sm.log[0], sm.threads)  # first: whatever fails below is logged

from arbench.device import job_device
from arbench.io import atomic_write_json
from arbench.run import evaluate_run

wc, p = sm.wildcards, sm.params
result = evaluate_run(
    Path(sm.input.final).parent,
    p.task,
    data_dir=p.data,
    examples=p.examples,
    options=dict(p.options),
    progress=log,
    device=job_device(sm.resources.get("gpu", 0)),  # the GPU the job was given, if any
)
atomic_write_json(
    sm.output[0], {"experiment": wc.experiment, "arm": wc.arm, "seed": int(wc.seed), **result}
)
log(f"{wc.experiment}/{wc.arm} seed {wc.seed}: accuracy {result['scores']['accuracy']:.4f}")
