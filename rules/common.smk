# Shared setup: resolve the config (schema + scale + semantic checks) before any job is
# planned, and name every path the rules produce. Paper-scale results live under results/,
# every other scale's under results/<scale>/ (arbench.plan), so scales never overwrite each
# other. What a rule needs to know about a task (its data kind, its report layout) comes from
# the task's own declaration, never from its name.
import re
import sys
from pathlib import Path

# the library lives in src/ (job scripts find it through scripts/_arbench_path.py)
sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from arbench import config as arbench_config  # noqa: E402
from arbench import resources as arbench_resources  # noqa: E402
from arbench.plan import Plan  # noqa: E402

# Snakemake reads config files with a plain YAML loader (a repeated key silently replaces the
# first; 3e-3 stays a string), so the config is read again strictly, in Snakemake's order:
# the Snakefile's configfile (unless --replace-workflow-config), each --configfile, --config.
_settings = workflow.config_settings
_cli_files = [Path(f).resolve() for f in workflow.overwrite_configfiles]
_own_files = [
    Path(f).resolve()
    for f in workflow.configfiles
    if Path(f).resolve() not in _cli_files
    and not (_settings.replace_workflow_config and _settings.overwrite_config)
]
try:
    CFG = arbench_config.resolve(
        arbench_config.read_config(
            [*_own_files, *_cli_files], dict(_settings.config), expected=config
        )
    )
except arbench_config.ConfigError as err:
    raise WorkflowError(f"invalid config: {err}") from None

PLAN = Plan(CFG)
R = PLAN.root  # results (paper) or results/<scale>
SCALE = PLAN.scale
EXPERIMENTS = PLAN.experiments
THREADS = CFG["threads_per_run"]

# Paper-scale jobs are sized by the resource model (arbench.resources): every training and
# evaluation is predicted on the declared device now, and one that cannot fit stops planning
# with one line naming it (make paper-plan prints the whole plan).
if PLAN.models_resources:
    try:
        PLAN.check_resources()
    except arbench_resources.ResourceError as err:
        raise WorkflowError(f"invalid plan: {err}") from None
GPUS = 1 if PLAN.models_resources and PLAN.device().gpu else 0
GPU_MODEL = (PLAN.device().slurm_gpu_model or "") if GPUS else ""


def job_resource(kind, key):
    """A resource callable: ``key`` of a {experiment}/{arm} job's `Plan.job_resources` at
    its attempt (a retried job asks for more time, up to the partition limit)."""

    def resource(wc, attempt):
        return PLAN.job_resources(kind, wc.experiment, wc.arm, attempt)[key]

    return resource


def one_of(names):
    """A wildcard regex matching exactly these names (and nothing when there are none)."""
    return "|".join(map(re.escape, names)) if names else "(?!)"


wildcard_constraints:
    experiment=one_of(EXPERIMENTS),
    arm=one_of(PLAN.run_arms()),  # the run table's names: the rule lives in experiment.py
    seed=r"\d+",
