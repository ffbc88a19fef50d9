"""The paper-scale tables, figures and claims.md from whatever paper-scale evaluations exist
(`make paper-report`): the results folder's where it has a run, else the release of our own
paper-scale runs (references/arbench_paper_runs). Trains nothing; seconds.

    python tools/paper_report.py [--results results] [--release references/arbench_paper_runs]
                                 [--out results/paper_report] [--no-figures]

Writes <out>/claims.md (a header saying how much of the paper DAG is present and where each
number came from, then the claims report), <out>/tables/*.tex, <out>/figures/*.{pdf,png},
<out>/stats/*.json and <out>/runs.json (`arbench.report.partial`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arbench import config as arbench_config  # noqa: E402
from arbench.paper_release import RELEASE_DIR, load_release  # noqa: E402
from arbench.plan import Plan  # noqa: E402
from arbench.report import partial  # noqa: E402


def _shown(path: Path) -> str:
    """A path relative to the repository where it lies inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    """Build the report and print its counts."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(ROOT / "results"), help="paper-scale results root")
    ap.add_argument("--release", default=str(RELEASE_DIR), help="the release folder")
    ap.add_argument("--out", default=str(ROOT / "results" / "paper_report"))
    ap.add_argument("--claims", default=str(ROOT / "claims.yaml"))
    ap.add_argument("--no-figures", action="store_true", help="tables and claims only")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    plan = Plan(arbench_config.load(ROOT / "config.yaml", scale="paper"))
    results = Path(args.results)
    release = Path(args.release)
    has_evals = (results / "evals").is_dir()
    report = partial.build(
        plan,
        results if has_evals else None,
        load_release(release),
        args.out,
        claims_path=args.claims,
        release_dir=_shown(release),
        results_label=_shown(results) + ("" if has_evals else ", which has no evals/"),
        figures=not args.no_figures,
    )
    have, want = report.trainings
    print(
        f"{have} of {want} trainings present ({report.evaluations[0]} of "
        f"{report.evaluations[1]} evaluations: {report.present.count(partial.RESULTS)} from "
        f"{_shown(results)}, {report.present.count(partial.RELEASE)} from {_shown(release)})"
    )
    for kind, counts in report.counts().items():
        words = ", ".join(f"{v} {k}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
        print(f"{kind} claims ({sum(counts.values())}): {words}")
    decided = report.decided_at()
    print(f"trained-model claims decided at n >= {partial.N_DECIDED}: {len(decided)}")
    print(f"wrote {_shown(Path(args.out) / 'claims.md')} in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
