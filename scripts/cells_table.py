"""Snakemake glue: render the cell-zoo table at a reference arm's state/parameter budget."""

import _arbench_path  # noqa: F401  (puts src/ on sys.path)

from arbench.config import model_config_dict
from arbench.glue import setup
from arbench.io import atomic_write_json, atomic_write_text
from arbench.models import ModelConfig, build_model
from arbench.report.cells_table import cell_rows
from arbench.report.tables import render
from arbench.tasks import make_task

log = setup(snakemake.log[0], snakemake.threads)
exp, arm = snakemake.params.experiment, snakemake.params.arm
vocab = make_task(exp["task"]).vocab_size
reference = build_model(ModelConfig(**model_config_dict(exp, arm, vocab)), 0)
backbone = {k: exp["model"][k] for k in ("d_model", "layers", "mlp_ratio") if k in exp["model"]}
context = {
    "rows": None,
    "vocab_size": vocab,
    "state_per_layer": reference.state_size_per_layer(),
    "parameters": reference.n_parameters(),
    "backbone": backbone,
    "reference": f"{snakemake.params.name}/{arm}",
}
context["rows"] = cell_rows(vocab, context["state_per_layer"], context["parameters"], **backbone)
atomic_write_json(snakemake.output.json, context)
atomic_write_text(snakemake.output.tex, render(snakemake.input.template, **context))
log(f"{len(context['rows'])} cells -> {snakemake.output.tex}")
