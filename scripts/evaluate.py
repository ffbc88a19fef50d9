"""Snakemake glue: evaluate one trained run with its task's evaluator."""

from pathlib import Path

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.config import eval_options, model_config_dict
from arbench.glue import setup
from arbench.io import atomic_write_json, read_json
from arbench.models import ModelConfig
from arbench.tasks import make_task
from arbench.train.loop import load_trained

log = setup(snakemake.log[0], snakemake.threads)
exp, wc = snakemake.params.experiment, snakemake.wildcards
task = make_task(exp["task"])
model = load_trained(
    Path(snakemake.input.model).parent,
    ModelConfig(**model_config_dict(exp, wc.arm, task.vocab_size)),
)
scores = task.evaluate(
    model, data=snakemake.input.data, examples=exp["eval"]["examples"], **eval_options(exp, wc.arm)
)
final = read_json(snakemake.input.final)
out = {
    "experiment": wc.experiment,
    "arm": wc.arm,
    "seed": int(wc.seed),
    "scores": scores,
    "n_parameters": final["n_parameters"],
    "state_size_per_layer": final["state_size_per_layer"],
    "train_wall_time_s": final["wall_time_s"],
}
atomic_write_json(snakemake.output[0], out)
log(f"{wc.experiment}/{wc.arm} seed {wc.seed}: accuracy {scores['accuracy']:.4f}")
