"""Paper-scale statistics, tables, figures and claims from whatever paper-scale evaluations
exist: part of the DAG, read as the whole DAG's report would read it.

The stats rule needs every planned evaluation of an experiment; a cluster that has run part
of the paper DAG (or this repository's release of our own paper-scale runs,
`arbench.paper_release`) has some. Here each experiment keeps the run arms that have at least
one evaluation, and every other arm is recorded in the experiment's ``skipped`` mapping with
the seeds it has of those planned ("0 of 10 planned seeds present"), as a scale's dropped arm
is (`arbench.config.scales.drop_arms`); the contrasts naming one go with it. A grid arm
present at some of its values keeps those alone (as a sparse grid's arm), each value it
lacks skipped by run-arm name; a tuned grid gives it no best rate until every rate has run.
The statistics are then `arbench.report.experiment.experiment_stats`' own, unchanged, so
every claim is decided on the seeds present under the usual verdict rules (too few seeds:
inconclusive; a skipped arm: not run, with the reason). Each arm's summary gains
``seeds_present``, ``seeds_planned`` and ``seed_sources`` (which seeds came from the results
folder and which from the release).

An evaluation is read from the results root where it exists there, else from the release
(a release record whose run-table identity is not the config's is stale and left out). A row
whose run another experiment trains (`arbench.experiment.RunTable.owner`) and scores alike
(the same task block, held-out count and options: `same_evaluation`) reads that owner's
evaluation where it has none of its own, as its evaluation job would compute the same one.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arbench.config.paths import ROOT
from arbench.experiment import Run, RunTable, restrict_grid, runs_of, value_label
from arbench.io import atomic_write_json, atomic_write_text
from arbench.paper_release import as_evaluation, identity_hash
from arbench.report.experiment import experiment_stats, with_training

RESULTS = "results"  # an evaluation read from the results root
RELEASE = "release"  # one read from the release of our paper-scale runs
# the stats keys of an experiment that describe its setup (task, floors, sizes), not a model
SETUP_KEYS = ("floors", "state_sizes_per_layer", "parameters", "task", "model", "train")
# the verdict vocabulary (docs/RESULTS.md, "Verdicts"): those that decide a claim, and "not run"
DECIDED = ("reproduced", "reproduced (sign only)", "not reproduced")
NOT_RUN = "not run at this scale"
N_DECIDED = 5  # the seeds per arm at which the header counts a decided claim


@dataclass(frozen=True)
class Evaluation:
    """One evaluation present: its eval JSON (or the release record's), and where from."""

    experiment: str
    arm: str  # the run arm
    seed: int
    source: str  # RESULTS or RELEASE
    path: Path
    eval: dict[str, Any] = field(repr=False)


@dataclass
class Present:
    """Every evaluation present, by experiment, with the release records left out as stale
    (path, why) and the evaluations found in both places whose scores differ."""

    evals: dict[str, list[Evaluation]] = field(default_factory=dict)
    stale: list[tuple[Path, str]] = field(default_factory=list)
    disagree: list[tuple[Path, Path]] = field(default_factory=list)
    # (experiment, run arm, seed) read from its owner's evaluation: the same trained run
    # scored on the same held-out set under the same options, so the same evaluation
    shared: dict[tuple[str, str, int], tuple[str, str]] = field(default_factory=dict)

    def count(self, source: str | None = None) -> int:
        """Evaluations present (from ``source`` only, where given)."""
        return sum(source in (None, e.source) for es in self.evals.values() for e in es)


def gather(
    table: RunTable,
    results_root: str | Path | None,
    release: Mapping[tuple[str, str, int], Mapping[str, Any]],
    release_dir: str | Path = "",
) -> Present:
    """The planned evaluations present under ``results_root`` (``evals/<experiment>/<run
    arm>/seed<N>.json``) or, failing that, in ``release`` (records by (experiment, run arm,
    seed), `arbench.paper_release.load_release`), for every row and planned seed of
    ``table``."""
    root = Path(results_root) if results_root is not None else None
    out = Present()
    for name in table.experiments:
        found: list[Evaluation] = []
        for row in table.of(name):
            ident = identity_hash(table, row)
            for seed in range(row.seeds):
                rel_path = Path(release_dir) / name / row.name / f"seed{seed}.json"
                record = release.get((name, row.name, seed))
                if record is not None and record["identity"] != ident:
                    out.stale.append(
                        (rel_path, "trained under other settings than the config plans now")
                    )
                    record = None
                path = root / "evals" / name / row.name / f"seed{seed}.json" if root else None
                if path is not None and path.exists():
                    ev = json.loads(path.read_text())
                    ev = _timed(ev, path, root, table.owner(name, row.name, seed), seed)
                    if record is not None and _scores(ev) != _scores(record):
                        out.disagree.append((path, rel_path))
                    found.append(Evaluation(name, row.name, seed, RESULTS, path, ev))
                elif record is not None:
                    ev = as_evaluation(record)
                    found.append(Evaluation(name, row.name, seed, RELEASE, rel_path, ev))
        out.evals[name] = found
    _fill_shared(table, out)
    return out


def same_evaluation(a: Run, b: Run) -> bool:
    """Whether two rows score a run alike: the same task block (so the same held-out set,
    which is a function of the task settings and the count alone), count and options."""
    return (a.task, a.examples, a.eval_options) == (b.task, b.examples, b.eval_options)


def _fill_shared(table: RunTable, out: Present) -> None:
    """Give each planned (row, seed) with no evaluation of its own the evaluation of the row
    that trains its run (`RunTable.owner`), where both score it alike (`same_evaluation`):
    the evaluation job would compute exactly that one. Recorded in ``out.shared``."""
    have = {(e.experiment, e.arm, e.seed): e for es in out.evals.values() for e in es}
    for name in table.experiments:
        for row in table.of(name):
            for seed in range(row.seeds):
                owner = table.owner(name, row.name, seed)
                if (name, row.name, seed) in have or owner == (name, row.name):
                    continue
                theirs = have.get((*owner, seed))
                if theirs is None or not same_evaluation(row, table.row(*owner)):
                    continue
                ev = {**theirs.eval, "experiment": name, "arm": row.name}
                mine = Evaluation(name, row.name, seed, theirs.source, theirs.path, ev)
                out.evals[name].append(mine)
                out.shared[(name, row.name, seed)] = owner


def _timed(
    ev: dict[str, Any], path: Path, root: Path, owner: tuple[str, str], seed: int
) -> dict[str, Any]:
    """An eval JSON of the results root with its training's wall time, from the final.json
    of the run it scored (trained by ``owner``, `arbench.report.experiment.with_training`);
    an eval JSON written when it embedded the time keeps its own where that file is gone."""
    final = root / "runs" / owner[0] / owner[1] / f"seed{seed}" / "final.json"
    if final.exists():
        return with_training(ev, json.loads(final.read_text()))
    if "train_wall_time_s" in ev:
        return ev
    raise ValueError(f"{path}: no {final}, the training it scored, to give its wall time")


def _scores(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc["scores"], sort_keys=True)


@dataclass(frozen=True)
class ArmPresence:
    """A run arm's seeds present of those planned, and where each came from."""

    run_arm: str
    arm: str
    value: Any
    planned: int
    sources: dict[int, str]  # seed -> RESULTS or RELEASE

    @property
    def present(self) -> int:
        return len(self.sources)

    def text(self) -> str:
        """``3 of 10 planned seeds present``."""
        return f"{self.present} of {self.planned} planned seeds present"


def presence(rows: Sequence[Run], evals: Sequence[Evaluation]) -> list[ArmPresence]:
    """Each row's seeds present (only planned seeds count), in row order."""
    by = {(e.arm, e.seed): e.source for e in evals}
    return [
        ArmPresence(
            row.name,
            row.arm,
            row.value,
            row.seeds,
            {s: by[(row.name, s)] for s in range(row.seeds) if (row.name, s) in by},
        )
        for row in rows
    ]


def partial_block(
    name: str, exp: Mapping[str, Any], evals: Sequence[Evaluation]
) -> tuple[dict[str, Any] | None, list[ArmPresence]]:
    """The experiment block cut to the run arms that have evaluations, and each row's
    presence. A grid value no arm has is dropped from the grid; an arm without an evaluation
    at a remaining value is skipped (``skipped.arms``, with its seeds present of those
    planned), with every contrast naming it (``skipped.contrasts``), unless it has evaluations
    at other values: then it keeps those alone (``grid.arms``) and each value it lacks is
    skipped under its run arm's name. None: nothing present."""
    rows = runs_of(name, exp)
    arms = presence(rows, evals)
    if not any(a.present for a in arms):
        return None, arms
    block = copy.deepcopy(dict(exp))
    skipped = block.setdefault("skipped", {"arms": {}, "contrasts": []})
    skipped.setdefault("arms", {})
    skipped.setdefault("contrasts", [])
    if block.get("grid"):
        have = {value_label(a.value) for a in arms if a.present}
        block["grid"] = restrict_grid(block["grid"], lambda v: value_label(v) in have)
    kept_values = {value_label(v) for v in block["grid"]["values"]} if block.get("grid") else None
    for arm in list(block["arms"]):
        mine = [
            a
            for a in arms
            if a.arm == arm and (kept_values is None or value_label(a.value) in kept_values)
        ]
        if mine and all(a.present for a in mine):
            continue
        have = [a for a in mine if a.present]
        if kept_values is not None and have:
            # present at some grid values: the arm runs there alone, as a sparse grid's arm
            # (``grid.arms``); each value it lacks is skipped by its run arm's name
            block["grid"].setdefault("arms", {})[arm] = [a.value for a in have]
            lacks = [a for a in mine if not a.present]
            skipped["arms"].update({a.run_arm: a.text() for a in lacks})
            skipped["contrasts"] += [
                {**c, "value": a.value, "why": f"{a.run_arm}: {a.text()}"}
                for c in block.get("contrasts") or []
                if arm in (c["a"], c["b"])
                for a in lacks
            ]
            continue
        if kept_values is None:
            why = mine[0].text()
        else:  # (an arm of a grid's ``arms`` may have no value left at all)
            gone = [a for a in (mine or [a for a in arms if a.arm == arm]) if not a.present]
            why = "; ".join(f"{a.run_arm}: {a.text()}" for a in gone)
        skipped["arms"][arm] = why
        del block["arms"][arm]
    contrasts = block.get("contrasts") or []
    gone = set(skipped["arms"])
    skipped["contrasts"] += [c for c in contrasts if c["a"] in gone or c["b"] in gone]
    block["contrasts"] = [c for c in contrasts if c["a"] not in gone and c["b"] not in gone]
    return block, arms


def _untune_incomplete(
    stats: dict[str, Any], block: Mapping[str, Any], arms: Sequence[ArmPresence]
) -> None:
    """A tuned grid's best value of an arm that lacks some of its values is a best over the
    rates that happen to have run, not the tuned one: its best and every best-rate contrast
    naming it go, recorded in ``skipped.contrasts`` with the values it lacks."""
    tuned = (stats.get("grid") or {}).get("tuned")
    if not tuned:
        return
    lacking: dict[str, list[str]] = {}
    for a in arms:
        if a.arm in block["arms"] and not a.present:
            lacking.setdefault(a.arm, []).append(a.run_arm)
    if not lacking:
        return
    for key in ("best", "best_labels"):
        tuned[key] = {arm: v for arm, v in tuned[key].items() if arm not in lacking}
    kept, gone = [], []
    for c in tuned["contrasts_best"]:
        (gone if c["a"] in lacking or c["b"] in lacking else kept).append(c)
    tuned["contrasts_best"] = kept
    for c in gone:
        missing = ", ".join(lacking.get(c["a"], []) + lacking.get(c["b"], []))
        why = f"no tuned best: {missing} not present"
        keep = {k: c[k] for k in ("knob", "within", "a", "b") if k in c}
        stats["skipped"]["contrasts"].append({**keep, "tuned": True, "why": why})


def partial_stats(
    name: str,
    exp: Mapping[str, Any],
    evals: Sequence[Evaluation],
    layout: str,
    *,
    curves: dict[tuple[str, int], list[dict[str, Any]]] | None = None,
    self_tests: dict[str, dict[str, Any]] | None = None,
    reference: dict[str, Any] | None = None,
    scale: str = "paper",
) -> tuple[dict[str, Any] | None, list[ArmPresence]]:
    """An experiment's stats JSON from the evaluations present (`partial_block`, then
    `experiment_stats` unchanged), each arm with its seeds present, planned and their
    sources; None when no evaluation is present."""
    block, arms = partial_block(name, exp, evals)
    if block is None:
        return None, arms
    kept = {r.name for r in runs_of(name, block)}
    used = [e.eval for e in evals if e.arm in kept]
    stats = experiment_stats(
        name, block, used, scale, layout, curves or {}, self_tests or {}, reference
    )
    _untune_incomplete(stats, block, arms)
    by_arm = {a.run_arm: a for a in arms}
    for run_arm, summary in stats["arms"].items():
        a = by_arm[run_arm]
        summary["seeds_present"] = a.present
        summary["seeds_planned"] = a.planned
        summary["seed_sources"] = {str(s): src for s, src in sorted(a.sources.items())}
    stats["partial"] = {
        "seeds_present": sum(a.present for a in arms),
        "seeds_planned": sum(a.planned for a in arms),
        "from_results": sum(src == RESULTS for a in arms for src in a.sources.values()),
        "from_release": sum(src == RELEASE for a in arms for src in a.sources.values()),
    }
    return stats, arms


def claim_kind(claim: Any, experiments: Mapping[str, Any]) -> str:
    """ "trained" for a claim read off a trained model's scores (an experiment's arms,
    contrasts, sweeps), "setup" for a check of the protocol itself (a release's files, a
    floor, a state size, an analysis without training)."""
    if not claim.experiment or claim.experiment not in experiments:
        return "setup"
    paths = [*claim.statistic, *claim.p]
    if all(p.split("/")[0].split("[")[0] in SETUP_KEYS for p in paths):
        return "setup"
    return "trained"


def kind_of(result: Any, experiments: Mapping[str, Any]) -> str:
    """A result's kind of claim: the claims report's own where its results carry one
    (``kind``: "model" or "setup"), so the header counts as its body does, else
    `claim_kind`."""
    kind = getattr(result, "kind", None)
    if kind in ("model", "setup"):
        return "trained" if kind == "model" else "setup"
    return claim_kind(result.claim, experiments)


def min_seeds(n: str | None) -> int | None:
    """The fewest seeds a result's n names (``5 vs 3`` -> 3); None without one."""
    nums = [int(x.replace(",", "")) for x in re.findall(r"\d[\d,]*", n or "")]
    return min(nums) if nums else None


@dataclass
class Report:
    """What `build` wrote and found: presence per experiment, the claims' results and the
    counts its header prints."""

    out: Path
    present: Present
    arms: dict[str, list[ArmPresence]]
    trainings: tuple[int, int]  # (present, planned) distinct trainings
    evaluations: tuple[int, int]
    results: list[Any]
    kinds: dict[str, str]  # claim id -> "trained" or "setup"

    def counts(self) -> dict[str, dict[str, int]]:
        """Verdict counts per kind of claim (trained, setup)."""
        out: dict[str, dict[str, int]] = {"trained": {}, "setup": {}}
        for r in self.results:
            kind = out[self.kinds[r.claim.id]]
            kind[r.verdict] = kind.get(r.verdict, 0) + 1
        return out

    def decided_at(self, n: int = N_DECIDED) -> list[str]:
        """Trained-model claims decided (reproduced or not) on at least ``n`` seeds per arm."""
        return [
            r.claim.id
            for r in self.results
            if self.kinds[r.claim.id] == "trained"
            and r.verdict in DECIDED
            and (min_seeds(r.n) or 0) >= n
        ]


def trainings_present(table: RunTable, present: Present) -> tuple[int, int]:
    """(distinct trainings with an evaluation present, distinct trainings planned)."""
    planned = table.trainings()
    have = {
        (*table.owner(e.experiment, e.arm, e.seed), e.seed)
        for es in present.evals.values()
        for e in es
    }
    return len(set(planned) & have), len(planned)


def build(
    plan: Any,
    results_root: str | Path | None,
    release: Mapping[tuple[str, str, int], Mapping[str, Any]],
    out: str | Path,
    *,
    claims_path: str | Path = ROOT / "claims.yaml",
    release_dir: str | Path = "",
    results_label: str | None = None,
    figures: bool = True,
) -> Report:
    """Write ``out``/stats/<experiment>.json, tables/<experiment>.tex, figures/ (PDF, PNG),
    claims.md, tables/claims.tex and runs.json from the evaluations present, for a paper-scale
    ``plan`` (`arbench.plan.Plan`); stats files that need no training (an analysis, a
    release's files) are copied from ``results_root`` where it has them. ``results_label``
    and ``release_dir`` name the two sources in the header."""
    from arbench.report import claims as C
    from arbench.report.layouts import draw, template_path
    from arbench.report.reference import load_reference
    from arbench.report.tables import render

    out = Path(out)
    root = Path(results_root) if results_root is not None else None
    table: RunTable = plan.table
    present = gather(table, root, release, release_dir)
    arms_of: dict[str, list[ArmPresence]] = {}
    for name, exp in plan.experiments.items():
        evals = present.evals.get(name, [])
        stats_path = out / "stats" / f"{name}.json"
        layout = plan.layout(name)
        ref = exp.get("reference")
        reference = load_reference(ROOT / ref["file"], ref["set"]) if ref else None
        stats, arms_of[name] = partial_stats(
            name,
            exp,
            evals,
            layout,
            curves=_curves(plan, root, evals),
            self_tests=_self_tests(plan, root, name),
            reference=reference,
        )
        for f in (stats_path, out / "tables" / f"{name}.tex", *_figures(out, name)):
            f.unlink(missing_ok=True)  # a report never shows an experiment it no longer has
        if stats is None:
            continue
        atomic_write_json(stats_path, stats)
        tex = render(ROOT / template_path(layout), source=str(stats_path), **stats)
        atomic_write_text(out / "tables" / f"{name}.tex", tex)
        if figures:
            (out / "figures").mkdir(parents=True, exist_ok=True)
            draw(stats, _figures(out, name))
    claims = C.load_claims(claims_path)
    planned = C.planned_stats(claims, plan)
    _copy_untrained(planned, plan, root, out)
    results = C.evaluate(claims, out, plan.scale, planned)
    reasons = {name: _absent_reason(arms) for name, arms in arms_of.items()}
    for r in results:
        for res in (r, r.causal):
            if res is not None and res.verdict == NOT_RUN and res.claim.experiment in reasons:
                if not (out / f"stats/{res.claim.experiment}.json").exists():
                    res.reason = reasons[res.claim.experiment]
    report = Report(
        out=out,
        present=present,
        arms=arms_of,
        trainings=trainings_present(table, present),
        evaluations=(present.count(), sum(len(plan.eval_files(n)) for n in plan.experiments)),
        results=results,
        kinds={r.claim.id: kind_of(r, plan.experiments) for r in results},
    )
    body = C.render_markdown(results, plan.scale, claims=claims)
    atomic_write_text(
        out / "claims.md", header(report, results_label or str(root), release_dir) + "\n" + body
    )
    atomic_write_text(out / "tables" / "claims.tex", C.render_tex(results, plan.scale))
    atomic_write_json(out / "runs.json", runs_json(report))
    return report


def _figures(out: Path, name: str) -> list[Path]:
    return [out / "figures" / f"{name}.{ext}" for ext in ("pdf", "png")]


def _absent_reason(arms: Sequence[ArmPresence]) -> str:
    have = sum(a.present for a in arms)
    want = sum(a.planned for a in arms)
    return f"no paper-scale evaluation present yet ({have} of {want} planned)"


def _curves(
    plan: Any, root: Path | None, evals: Sequence[Evaluation]
) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Each results-folder evaluation's training metric lines, where its run folder has
    them (the release keeps none: its arms draw no curves)."""
    out: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for e in evals:
        if e.source != RESULTS or root is None:
            continue
        owner, arm = plan.table.owner(e.experiment, e.arm, e.seed)
        path = root / "runs" / owner / arm / f"seed{e.seed}" / "metrics.jsonl"
        if path.exists():
            out[(e.arm, e.seed)] = [json.loads(x) for x in path.read_text().splitlines() if x]
    return out


def _self_tests(plan: Any, root: Path | None, name: str) -> dict[str, dict[str, Any]]:
    """Each run arm's data self-tests as its oracle report under the results folder holds
    them ({} where it holds none)."""
    out = {}
    for arm, gate in plan.gates(name).items():
        path = _under(root, plan.root, gate)
        if path is not None and path.exists():
            out[arm] = json.loads(path.read_text()).get("self_tests", {})
    return out


def _under(root: Path | None, plan_root: str, path: str) -> Path | None:
    """A plan path (under the plan's results root) under ``root`` instead."""
    if root is None:
        return None
    rel = path[len(plan_root) + 1 :] if path.startswith(f"{plan_root}/") else path
    return root / rel


def _copy_untrained(
    planned: Mapping[str, str | None], plan: Any, root: Path | None, out: Path
) -> None:
    """Copy into ``out`` the stats files the claims read that no experiment's evaluations
    make (an analysis block's, a release's files), where ``root`` has them."""
    if root is None:
        return
    ours = {f"stats/{name}.json" for name in plan.experiments}
    for rel in {p for p in planned.values() if p and p not in ours}:
        src = root / rel
        if src.exists():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, out / rel)


def header(report: Report, results: str, release_dir: str | Path) -> str:
    """The report's own header (before the claims report): how much of the paper DAG is
    present, where each number came from, the verdict counts per kind of claim, and each
    experiment's arms with their seeds present of those planned."""
    have_t, want_t = report.trainings
    have_e, want_e = report.evaluations
    p = report.present
    counts = report.counts()
    decided = report.decided_at()
    lines = [
        "# Paper-scale report from the runs present",
        "",
        "Generated by `make paper-report` (`tools/paper_report.py`): do not edit. Nothing was",
        "trained; every number below is read from the paper-scale evaluations present.",
        "",
        f"**{have_t:,} of {want_t:,} trainings of the paper DAG present** ({have_e:,} of "
        f"{want_e:,} evaluations): {p.count(RESULTS):,} evaluations from the results folder "
        f"(`{results}`), {p.count(RELEASE):,} from the release "
        f"(`{release_dir}`, used where the results folder lacks a run). Each arm's seeds and "
        "their source: the table below and `runs.json`; each stats JSON's arms carry "
        "`seeds_present`, `seeds_planned` and `seed_sources`.",
        "",
        "Each claim is decided on the seeds present under the usual verdict rules (fewer than "
        "three seeds per arm, or a test that cannot reach p < alpha: inconclusive or too few "
        'seeds); a claim on an arm with no seed present reads "not run", naming the seeds '
        "present of those planned.",
        "",
        "| claims | " + " | ".join((*DECIDED, "inconclusive", NOT_RUN)) + " | other |",
        "| --- | " + " | ".join("---:" for _ in range(len(DECIDED) + 3)) + " |",
    ]
    shown = (*DECIDED, "inconclusive", NOT_RUN)
    for kind, label in (("trained", "trained-model"), ("setup", "setup checks")):
        c = counts[kind]
        other = sum(v for k, v in c.items() if k not in shown)
        cells = " | ".join(str(c.get(k, 0)) for k in shown)
        lines.append(f"| {label} ({sum(c.values())}) | {cells} | {other} |")
    lines += [
        "",
        f"Trained-model claims decided at n >= {N_DECIDED} seeds per arm: {len(decided)}"
        + (f" ({', '.join(f'`{d}`' for d in decided)})" if decided else "")
        + ".",
    ]
    if p.shared:
        owners: dict[tuple[str, str], int] = {}
        for (name, _, _), (owner, _) in p.shared.items():
            owners[(name, owner)] = owners.get((name, owner), 0) + 1
        lines += [
            "",
            f"{len(p.shared)} evaluations are those of shared runs, read from the evaluation "
            "of the experiment that trains the run (the same model, held-out set and options: "
            "the same evaluation; marked `(<owner>'s)` below): "
            + "; ".join(
                f"{n} of `{name}` from `{owner}`" for (name, owner), n in sorted(owners.items())
            )
            + ".",
        ]
    if p.stale:
        lines += [
            "",
            "Release records left out (stale): "
            + "; ".join(f"`{path}`: {why}" for path, why in p.stale)
            + ".",
        ]
    if p.disagree:
        lines += [
            "",
            "**Scores differ between the results folder and the release** (the "
            "results folder's are used): "
            + "; ".join(f"`{a}` vs `{b}`" for a, b in p.disagree)
            + ".",
        ]
    lines += [
        "",
        "## Seeds present per arm",
        "",
        "| experiment | run arm | seeds present / planned | seeds from results "
        "| seeds from release | mean |",
        "| --- | --- | ---: | --- | --- | ---: |",
    ]
    empty = []
    for name, arms in report.arms.items():
        if not any(a.present for a in arms):
            empty.append(f"`{name}` (0 of {sum(a.planned for a in arms):,})")
            continue
        stats = _read_stats(report.out, name)
        for a in arms:
            res = [
                _seed_label(p, name, a.run_arm, s) for s, src in a.sources.items() if src == RESULTS
            ]
            rel = [
                _seed_label(p, name, a.run_arm, s) for s, src in a.sources.items() if src == RELEASE
            ]
            mean = stats.get("arms", {}).get(a.run_arm, {}).get("mean") if stats else None
            lines.append(
                f"| `{name}` | `{a.run_arm}` | {a.present} / {a.planned} | "
                f"{', '.join(res) or '--'} | {', '.join(rel) or '--'} | "
                f"{'--' if mean is None else f'{mean:.3f}'} |"
            )
    if empty:
        lines += ["", "No evaluation present: " + ", ".join(empty) + "."]
    return "\n".join(lines) + "\n"


def _seed_label(present: Present, experiment: str, run_arm: str, seed: int) -> str:
    """``s3``, or ``s3 (`<owner experiment>/<run arm>`'s)`` for a shared run's evaluation."""
    via = present.shared.get((experiment, run_arm, seed))
    return f"s{seed}" if via is None else f"s{seed} (`{via[0]}/{via[1]}`'s)"


def _read_stats(out: Path, name: str) -> dict[str, Any] | None:
    path = out / "stats" / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def runs_json(report: Report) -> dict[str, Any]:
    """The presence as data: totals, and per experiment and run arm each seed's source."""
    return {
        "trainings": {"present": report.trainings[0], "planned": report.trainings[1]},
        "evaluations": {"present": report.evaluations[0], "planned": report.evaluations[1]},
        "from_results": report.present.count(RESULTS),
        "from_release": report.present.count(RELEASE),
        "stale": [str(p) for p, _ in report.present.stale],
        "counts": report.counts(),
        "decided_at_n5": report.decided_at(),
        "experiments": {
            name: {
                a.run_arm: {
                    "planned": a.planned,
                    "present": a.present,
                    "sources": {str(s): src for s, src in sorted(a.sources.items())},
                }
                for a in arms
            }
            for name, arms in report.arms.items()
        },
    }
