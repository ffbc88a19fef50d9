"""The paper-scale plan per study: jobs, device-hours and the largest job's memory.

    python tools/paper_plan.py            # the table (make paper-plan); exit 1 if a job
                                          # needs more memory than its device has, or
                                          # more time than a partition can give it
    python tools/paper_plan.py --probe    # measure the probes the table lacks and store them
                                          # in src/arbench/resources/probes.json
    python tools/paper_plan.py --jobs     # one line per job besides the table

Every figure is the resource model's (`arbench.resources`): peak device memory from probes of
each job's model, time on the config's declared device (``resources:``), as the job is
expected to run (a load schedule that stops early at ``resources.expected_steps``), with the
upper bound beside it (``bound-h``). A training shared by several experiments is counted once,
under the study of the experiment that owns it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arbench import config as arbench_config  # noqa: E402
from arbench.plan import Plan  # noqa: E402
from arbench.resources import ProbeSpec, ResourceError, check  # noqa: E402

GiB = 2**30


def study_of(plan: Plan) -> dict[str, str]:
    """Each experiment's study (the config's ``studies:``; "other" for none)."""
    out = {name: "other" for name in plan.experiments}
    for study, names in plan.studies.items():
        for name in names:
            out.setdefault(name, study)
            out[name] = study
    return out


def table(plan: Plan) -> tuple[list[str], list[str]]:
    """The per-study lines and the problems (jobs over their device's memory, or that no
    partition of `Plan.partition_minutes` can serve: `arbench.resources.check`)."""
    device = plan.device()
    limit = plan.partition_minutes
    studies = study_of(plan)
    rows: dict[str, dict] = defaultdict(
        lambda: {"train": 0, "evaluate": 0, "hours": 0.0, "bound": 0.0, "peak": 0.0, "job": ""}
    )
    problems, bounded, chained, longest = [], [], [], None
    for est in plan.resource_estimates():
        kind, name = est.job.split(" ", 1)
        row = rows[studies[name.split("/")[0]]]
        row[kind] += 1
        row["hours"] += est.seconds / 3600
        row["bound"] += est.upper_seconds / 3600
        if est.device_bytes > row["peak"]:
            row["peak"], row["job"] = est.device_bytes, est.job
        if est.bound_seconds is not None:
            bounded.append(est)
        if est.submissions(limit) > 1:
            chained.append(est)
        if longest is None or est.request_minutes(limit) > longest.request_minutes(limit):
            longest = est
        try:
            check(est, device, limit)
        except ResourceError as err:
            problems.append(str(err))
    lines = [
        f"paper-scale plan on {device.name} ({device.memory_gib:g} GiB; "
        f"{device.tflops:g} TFLOP/s x {device.utilisation:g}, "
        f"{device.op_overhead_us:g} us per operator); partition limit {limit:,} minutes",
        f"{'study':<14} {'trainings':>9} {'evals':>6} {'device-h':>9} {'bound-h':>9} "
        f"{'largest GiB':>11}  largest job",
    ]
    total = {"train": 0, "evaluate": 0, "hours": 0.0, "bound": 0.0}
    for study in sorted(rows):
        r = rows[study]
        lines.append(
            f"{study:<14} {r['train']:>9,} {r['evaluate']:>6,} {r['hours']:>9.1f} "
            f"{r['bound']:>9.1f} {r['peak'] / GiB:>11.1f}  {r['job']}"
        )
        for k in total:
            total[k] += r[k]
    lines.append(
        f"{'all':<14} {total['train']:>9,} {total['evaluate']:>6,} {total['hours']:>9.1f} "
        f"{total['bound']:>9.1f}"
    )
    lines.append(
        "device-h: as the jobs are expected to run; bound-h: with every load schedule that "
        "stops early run to its train.steps at its last rung"
    )
    for est in bounded:
        exp = est.job.split(" ", 1)[1].split("/")[0]
        lines.append(
            f"  {est.job}: {est.seconds / 3600:,.1f} h at the {plan.expected_steps(exp):,} steps "
            f"it is expected to stop after (resources.expected_steps); bound "
            f"{est.bound_seconds / 3600:,.1f} h ({est.bound_minutes:,} minutes)"
        )
    for est in chained:
        lines.append(
            f"  chained: {est.job}, {est.runtime_minutes:,} minutes in "
            f"{est.submissions(limit)} submissions of at most {limit:,}"
        )
    if longest is not None:
        lines.append(
            f"longest submission: {longest.request_minutes(limit):,} minutes ({longest.job})"
        )
    return lines, problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", action="store_true", help="measure and store missing probes")
    ap.add_argument("--jobs", action="store_true", help="print every job's prediction")
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    args = ap.parse_args()
    cfg = arbench_config.resolve(arbench_config.read_config([Path(args.config)], {}))
    plan = Plan(cfg)
    t0 = time.perf_counter()
    if args.probe:
        from arbench.resources import jobs

        specs = {
            s.key: s
            for exp in plan.experiments
            for run in plan.table.of(exp)
            for s in jobs.specs(run)
        }
        missing = plan.probes.missing(specs.values())
        print(f"{len(specs)} probes planned, {len(missing)} missing", flush=True)

        def progress(i: int, total: int, spec: ProbeSpec) -> None:
            name = spec.model.get("cell") or spec.model.get("family")
            print(f"  {i}/{total}: {name} at {spec.rows} x {spec.length} tokens", flush=True)
            if i % 10 == 0:
                plan.probes.save()  # an interrupted run keeps what it measured

        plan.measure_missing(missing, progress)
        stale = set(plan.probes.rows) - set(specs)
        for key in stale:  # probes of models or shapes the config no longer plans
            del plan.probes.rows[key]
        plan.probes.save()
        print(
            f"stored in {plan.probes.path}, {len(stale)} stale ones dropped "
            f"({time.perf_counter() - t0:.0f} s)"
        )
        return 0
    lines, problems = table(plan)
    if args.jobs:
        for est in plan.resource_estimates():
            print(
                f"{est.job}: {est.device_bytes / GiB:,.2f} GiB, {est.seconds / 3600:,.2f} h, "
                f"{est.shape.rows} x {est.shape.length:,}, asks {est.mem_mb:,} MB host, "
                f"{est.request_minutes(plan.partition_minutes):,} min"
            )
    print("\n".join(lines))
    if plan.measured_probes:
        print(
            f"note: measured {plan.measured_probes} probes missing from the table "
            "(make paper-plan-probes stores them)"
        )
    for p in problems:
        print(f"cannot run: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
