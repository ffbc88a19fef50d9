# Shared setup: resolve the config (schema + scale + semantic checks) before any
# job is planned, and name every path the rules produce.
import sys
from pathlib import Path

# the library lives in src/ (job scripts find it through scripts/_arbench_path.py)
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from arbench import config as arbench_config  # noqa: E402

try:
    CFG = arbench_config.resolve(config)
except arbench_config.ConfigError as err:
    raise WorkflowError(f"invalid config: {err}") from None

SCALE = CFG["scale"]
EXPERIMENTS = CFG["experiments"]
THREADS = CFG["threads_per_run"]


wildcard_constraints:
    experiment="|".join(EXPERIMENTS),
    arm="[a-z0-9_]+",
    seed=r"\d+",


def run_paths(experiment, name):
    """One file per (arm, seed) of an experiment, e.g. every final.json."""
    exp = EXPERIMENTS[experiment]
    return [
        f"results/runs/{experiment}/{arm}/seed{seed}/{name}"
        for arm in exp["arms"]
        for seed in range(exp["seeds"])
    ]


def eval_paths(experiment):
    exp = EXPERIMENTS[experiment]
    return [
        f"results/evals/{experiment}/{arm}/seed{seed}.json"
        for arm in exp["arms"]
        for seed in range(exp["seeds"])
    ]


def all_targets():
    out = [
        "results/tables/cells.tex",
        "results/bench/cells.json",
        "results/bench/cells.png",
    ]
    for name in EXPERIMENTS:
        out += [
            f"results/tables/{name}.tex",
            f"results/figures/{name}.pdf",
            f"results/figures/{name}.png",
        ]
    return out


def task_name(experiment):
    return EXPERIMENTS[experiment]["task"]["name"]


def oracle_report(wildcards):
    """The validation report that must exist before an experiment's runs may train."""
    if task_name(wildcards.experiment) == "passkey_swar":
        return "results/datasets/passkey_swar/oracle_report.json"
    return f"results/datasets/{wildcards.experiment}/oracle.json"


def eval_data(wildcards):
    """What evaluation reads besides the model: the held-out set, or the validated release."""
    if task_name(wildcards.experiment) == "passkey_swar":
        return "results/datasets/passkey_swar/oracle_report.json"
    return f"results/datasets/{wildcards.experiment}/eval.npz"


def table_template(wildcards):
    name = (
        "sweep_table"
        if task_name(wildcards.experiment) == "passkey_swar"
        else "experiment_table"
    )
    return f"src/arbench/report/templates/{name}.tex.j2"


def train_runtime(wildcards):
    """Minutes to ask a scheduler for: generous for the CPU, far more than a GPU needs."""
    steps = EXPERIMENTS[wildcards.experiment]["train"]["steps"]
    return max(10, steps // 20)
