"""Snakemake glue: the oracle re-derives the eval set and a training-stream sample."""

import sys

import _arbench_path  # noqa: F401  (puts src/ on sys.path)
import numpy as np

from arbench.glue import setup
from arbench.io import atomic_write_json
from arbench.tasks import make_task

log = setup(snakemake.log[0], snakemake.threads)
task = make_task(snakemake.params.task)
data = np.load(snakemake.input[0])
report = {"eval_set": {"sequences": int(len(data["tokens"]))}, "train_stream": {}}
problems = task.oracle(data["tokens"].astype(np.int64), data["targets"].astype(np.int64))
report["eval_set"]["problems"] = problems[:20]
for seed in range(snakemake.params.seeds):
    tok, tgt = task.train_batch(seed, 0, snakemake.params.batch)
    found = task.oracle(tok.numpy(), tgt.numpy())
    report["train_stream"][f"seed{seed}"] = {"sequences": int(len(tok)), "problems": found[:20]}
    problems += found
report["valid"] = not problems
if problems:
    log(f"oracle rejected the data: {problems[:5]}")
    sys.exit(1)
atomic_write_json(snakemake.output[0], report)
log("oracle: every target re-derived from the token stream")
