"""The resource model's predictions beside measurements of the real step, on the CPU.

    .venv/bin/python benchmarks/resource_model_check.py lattice_capacity:delta_rule-pairs1024
    .venv/bin/python benchmarks/resource_model_check.py --rows 1 EXPERIMENT:RUN_ARM ...

For each paper-scale run arm: the prediction of one training pass (``--rows`` rows of its
longest row, default 1; `arbench.resources.jobs`) from the stored probes, and a probe taken
at exactly that shape (`arbench.resources.probe.measure`: the peak of every live tensor of a
real step, its FLOPs and operators), with their ratio. A row longer than the probes'
lengths checks the extrapolation; one as long checks the table. One JSON line per run arm.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arbench import config as arbench_config  # noqa: E402
from arbench.plan import Plan  # noqa: E402
from arbench.resources import Shape, jobs, predict, probe_specs  # noqa: E402
from arbench.tasks import build_task  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="EXPERIMENT:RUN_ARM at paper scale")
    ap.add_argument("--rows", type=int, default=1)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from arbench.resources.probe import measure

    plan = Plan(arbench_config.resolve(arbench_config.read_config([ROOT / "config.yaml"], {})))
    for item in args.runs:
        experiment, arm = item.split(":")
        run = plan.run(experiment, arm)
        task = build_task(run.task)
        vocab, positions = task.vocab_size, task.positions()
        tr, ev = jobs.train_shape(run), jobs.eval_shape(run)
        specs = probe_specs(
            run.model, vocab, positions, [tr.length, ev.length], tr.supervised / tr.length
        )
        plan.measure_missing(specs)
        shape = Shape(args.rows, tr.length, tr.supervised)
        p = predict(plan.probes, specs, shape, item)
        t0 = time.perf_counter()
        m = measure(run.model, vocab, positions, tr.length, tr.supervised, rows=args.rows)
        out = {
            "run": item,
            "rows": args.rows,
            "length": tr.length,
            "probe_lengths": sorted({s.length for s in specs}),
            "measure_s": round(time.perf_counter() - t0, 1),
        }
        for field in ("peak_bytes", "eval_peak_bytes", "flops", "ops"):
            out[field] = {
                "predicted": p[field],
                "measured": m[field],
                "ratio": round(p[field] / m[field], 4),
            }
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
