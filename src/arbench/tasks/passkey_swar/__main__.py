"""CLI: ``python -m arbench.tasks.passkey_swar {generate,stats,validate} ...``.

generate writes one config/split into a dataset folder and refreshes its card and stats;
stats prints the card's table as JSON; validate runs the oracle (exit 1 on any failure).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from arbench.tasks.passkey_swar.card import config_N, stats_rows, stderr_progress
from arbench.tasks.passkey_swar.check import validate
from arbench.tasks.passkey_swar.generator import SPLIT_SEEDS, Params
from arbench.tasks.passkey_swar.release import (
    DEFAULT_EXAMPLES,
    DEFAULT_SHARD_ROWS,
    write_index,
    write_split,
)


def _params(text: str | None) -> Params:
    return Params.from_dict(json.loads(text)) if text else Params()


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run one subcommand; returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m arbench.tasks.passkey_swar", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="write one config/split in the HF layout")
    g.add_argument("--config", required=True, help="n{N}, e.g. n512")
    g.add_argument("--split", required=True, choices=sorted(SPLIT_SEEDS))
    g.add_argument("--examples", type=int, default=None, help="default: the card's count")
    g.add_argument("--out", required=True, type=Path)
    g.add_argument("--shard-rows", type=int, default=DEFAULT_SHARD_ROWS)
    g.add_argument("--params", default=None, help="JSON overriding the card's parameters")
    g.add_argument("--no-index", action="store_true", help="skip README/stats.md refresh")
    s = sub.add_parser("stats", help="print the statistics table as JSON")
    s.add_argument("dir", type=Path)
    s.add_argument("--recompute", action="store_true", help="measure from shards, not sidecars")
    v = sub.add_parser("validate", help="run the oracle over every shard")
    v.add_argument("dir", type=Path)
    v.add_argument("--report", type=Path, default=None, help="also write the report here")
    v.add_argument("--params", default=None)
    a = ap.parse_args(argv)

    if a.cmd == "generate":
        t0 = time.perf_counter()
        p = _params(a.params)
        n = a.examples if a.examples is not None else DEFAULT_EXAMPLES[a.split]
        a.out.mkdir(parents=True, exist_ok=True)
        write_split(
            a.out,
            config_N(a.config),
            a.split,
            n,
            p,
            shard_rows=a.shard_rows,
            progress=stderr_progress,
        )
        if not a.no_index:
            write_index(a.out, p)
        stderr_progress(
            f"wrote {a.config}/{a.split} ({n} examples) in {time.perf_counter() - t0:.1f}s"
        )
        return 0
    if a.cmd == "stats":
        print(json.dumps(stats_rows(a.dir, recompute=a.recompute), indent=1))
        return 0
    report = validate(a.dir, _params(a.params), progress=stderr_progress)
    text = json.dumps(report, indent=1)
    if a.report:
        a.report.write_text(text + "\n")
    print(
        json.dumps({k: report[k] for k in ("ok", "examples_checked", "failed_examples")}),
        file=sys.stderr,
    )
    if not report["ok"]:
        print(text)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
