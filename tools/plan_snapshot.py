"""The planned DAG of every scale as a snapshot: each job's rule, wildcards, inputs, outputs,
params, resources and threads, from Snakemake's own dry-run DAG (every job forced).

    python tools/plan_snapshot.py --write   # after a change that means to change the plan
    python tools/plan_snapshot.py --check   # the plan equals the snapshot (exit 1, the diff)

tests/workflow/test_plan_snapshot.py runs the check, so a refactor of the experiment grammar
that changes one job's params fails a test naming the job; a change that means to change the
plan rewrites the snapshot in the same commit, where review sees its diff.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "workflow" / "plan_snapshot.json.gz"
SCALES = ("paper", "study", "demo", "smoke")
VOLATILE = ("_cores", "_nodes", "tmpdir")  # resources Snakemake derives from the machine


def _plain(value: Any) -> Any:
    """A value as JSON can hold it (Snakemake's Namedlists as lists, the rest as text)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def plan(scale: str, root: Path = ROOT) -> list[dict[str, Any]]:
    """Every job Snakemake plans for ``rule all`` at ``scale``, sorted by rule and outputs."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, DAGSettings, ResourceSettings

    with SnakemakeApi() as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=8),
            config_settings=ConfigSettings(config={"scale": scale}),
            snakefile=root / "Snakefile",
            workdir=root,
        )
        dag_api = workflow_api.dag(dag_settings=DAGSettings(forceall=True))
        workflow = dag_api.workflow_api._workflow  # the DAG, without executing a job
        workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)
        workflow._build_dag()
        jobs = [
            {
                "rule": job.rule.name,
                "wildcards": _plain(dict(job.wildcards_dict)),
                "output": sorted(map(str, job.output)),
                "input": sorted(map(str, job.input)),
                "params": _plain(dict(job.params.items())),
                "resources": _plain({k: v for k, v in job.resources.items() if k not in VOLATILE}),
                "threads": job.threads,
            }
            for job in workflow.dag.jobs
        ]
    return sorted(jobs, key=lambda j: (j["rule"], j["output"]))


def differences(old: list[dict[str, Any]], new: list[dict[str, Any]], limit: int = 5) -> list[str]:
    """The jobs only one side plans (by outputs), and those whose settings differ."""
    key = lambda j: (j["rule"], tuple(j["output"]))  # noqa: E731
    # a job without outputs (rule all) is named by its rule alone
    name = lambda k: f"{k[0]} -> {k[1][0]}" if k[1] else k[0]  # noqa: E731
    a, b = {key(j): j for j in old}, {key(j): j for j in new}
    out = [f"only in the snapshot: {name(k)}" for k in a.keys() - b.keys()]
    out += [f"only planned now: {name(k)}" for k in b.keys() - a.keys()]
    for k in a.keys() & b.keys():
        if a[k] != b[k]:
            fields = sorted(f for f in a[k] if a[k][f] != b[k].get(f))
            out.append(f"{name(k)}: {', '.join(fields)} differ")
    return sorted(out)[:limit] + ([f"... {len(out) - limit} more"] if len(out) > limit else [])


def load() -> dict[str, list[dict[str, Any]]]:
    return json.loads(gzip.decompress(SNAPSHOT.read_bytes()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the snapshot")
    parser.add_argument("--check", action="store_true", help="compare with the snapshot")
    args = parser.parse_args(argv)
    now = {scale: plan(scale) for scale in SCALES}
    if args.write:
        data = json.dumps(now, sort_keys=True, separators=(",", ":")).encode()
        SNAPSHOT.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
        print(
            f"wrote {SNAPSHOT.relative_to(ROOT)}: "
            + ", ".join(f"{s} {len(j)} jobs" for s, j in now.items())
        )
        return 0
    old = load()
    bad = {s: differences(old.get(s, []), now[s]) for s in SCALES}
    for scale, lines in bad.items():
        for line in lines:
            print(f"{scale}: {line}")
    return 1 if any(bad.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
