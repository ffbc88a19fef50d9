"""The key-value benchmark's summary: exact match per variant and context length, the
per-index cross-entropy curves, and the long-context evaluator's throughput and memory.

Every number comes from the evaluation JSONs of the runs (`KVBenchTask.evaluate`); the
summary only averages over seeds and orders things: lengths ascending, variants in the
config's order, and each variant's rank at the largest length every variant reached.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from arbench.experiment import Run

RATE_KEYS = ("tokens", "length", "tokens_per_s", "peak_mib", "peak_above_start_mib", "seconds")


def _n(config: str) -> int:
    return int(config.lstrip("n"))


def mean_curve(curves: list[list[float | None]]) -> list[float | None]:
    """Mean over seeds of per-index curves (None where no seed has a value)."""
    arr = np.array([[np.nan if v is None else v for v in c] for c in curves], dtype=float)
    with warnings.catch_warnings():  # an index no seed has: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(arr, axis=0)
    return [None if np.isnan(v) else float(v) for v in mean]


def _cell(values: list[float]) -> dict[str, Any]:
    """Mean, sd and count over seeds, and every seed's value (seed order): no seed is
    picked, each is reported."""
    return {
        "mean": float(np.mean(values)),
        "sd": float(np.std(values)),
        "n": len(values),
        "values": [float(v) for v in values],
    }


def summary(
    rows: Sequence[Run],
    evals: list[dict[str, Any]],
    curves: dict[tuple[str, int], list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Per arm and number of keys: exact match (mean, sd, n and each seed's value) and,
    where the sweep scored mutant and plain sequences apart, the same per kind ("kinds":
    arm -> config -> kind); the evaluator's
    tokens/s and peak memory; per arm the mean per-index CE; each arm's rank (1 = best) at
    the largest n every arm was evaluated at; and the memory growth of each arm's sweep
    (peak at the largest length over peak at the smallest, beside the length ratio). The
    training length is the largest load any run's metric lines record (an accuracy-gated
    schedule climbs as far as training lets it), else the task's own n. ``rows``: the
    experiment's rows (`arbench.experiment.runs_of`): its run arms, in config order, and the
    task each trains on (the first's gives the training length and entry width)."""
    from arbench.tasks.base import config_of
    from arbench.tasks.kvbench import KVConfig

    cfg = config_of(KVConfig, rows[0].task)
    by_arm: dict[str, list[dict[str, Any]]] = {}
    for ev in evals:
        by_arm.setdefault(ev["arm"], []).append(ev)
    arms = [row.name for row in rows if row.name in by_arm]
    configs: list[str] = []
    table: dict[str, dict[str, dict[str, float]]] = {}
    kinds: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    rates: dict[str, dict[str, dict[str, float]]] = {}
    per_index: dict[str, dict[str, Any]] = {}
    for arm in arms:
        runs = sorted(by_arm[arm], key=lambda e: e["seed"])
        cells: dict[str, list[float]] = {}
        by_kind: dict[str, dict[str, list[float]]] = {}
        for ev in runs:
            for config, row in ev["scores"].get("per_config", {}).items():
                cells.setdefault(config, []).append(float(row["accuracy"]))
                for kind, scored in row.get("kinds", {}).items():
                    by_kind.setdefault(config, {}).setdefault(kind, []).append(
                        float(scored["accuracy"])
                    )
                rate = rates.setdefault(arm, {}).setdefault(config, {})
                for key in RATE_KEYS:  # the largest over seeds: what a scheduler must allow
                    if key in row:
                        rate[key] = max(float(row[key]), rate.get(key, 0.0))
                if config not in configs:
                    configs.append(config)
        table[arm] = {c: _cell(v) for c, v in cells.items()}
        if by_kind:
            kinds[arm] = {c: {k: _cell(v) for k, v in ks.items()} for c, ks in by_kind.items()}
        indexed = [ev["scores"]["per_index"] for ev in runs if "per_index" in ev["scores"]]
        if indexed:
            per_index[arm] = {
                "entries": indexed[0]["entries"],
                "first": mean_curve([p["first"] for p in indexed]),
                "second": mean_curve([p["second"] for p in indexed]),
            }
    configs.sort(key=_n)
    lengths = {c: max(r[c]["length"] for r in rates.values() if c in r) for c in configs}
    loads = [ln["load"] for lines in (curves or {}).values() for ln in lines if "load" in ln]
    trained_n = max(loads, default=cfg.n)
    trained = replace(cfg, n=trained_n)
    common = [c for c in configs if all(c in table[a] for a in arms)]
    ranked_at = common[-1] if common else None
    ranks: dict[str, float] = {}
    if ranked_at is not None:
        values = np.array([table[a][ranked_at]["mean"] for a in arms])
        order = (-values).argsort(kind="stable")
        raw = np.empty(len(arms))
        raw[order] = np.arange(1, len(arms) + 1)
        for v in np.unique(values):  # ties share their mean rank
            raw[values == v] = raw[values == v].mean()
        ranks = {a: float(r) for a, r in zip(arms, raw, strict=True)}
    growth = {}
    for arm, by_config in rates.items():
        sized = sorted((c for c in by_config if "peak_mib" in by_config[c]), key=_n)
        if len(sized) >= 2:
            lo, hi = by_config[sized[0]], by_config[sized[-1]]
            growth[arm] = {
                "from": sized[0],
                "to": sized[-1],
                "length_ratio": hi["length"] / lo["length"],
                "memory_ratio": hi["peak_mib"] / lo["peak_mib"],
            }
    return {
        "configs": configs,
        "arms": arms,
        "table": table,
        "kinds": kinds,
        "rates": rates,
        "per_index": per_index,
        "ranked_at": ranked_at,
        "ranks": ranks,
        "memory_growth": growth,
        "lengths": lengths,
        "train_n": trained.n,
        "train_length": trained.length,
        "entry_len": cfg.entry_len,
        "seeds": max((len(by_arm[a]) for a in arms), default=0),
    }


def spearman(ours: dict[str, float], theirs: dict[str, float]) -> float | None:
    """Spearman's rank correlation of two scores over the names both give (average ranks
    for ties); None with fewer than three names or no spread."""
    names = sorted(set(ours) & set(theirs))
    if len(names) < 3:
        return None

    def ranks(values: np.ndarray) -> np.ndarray:
        order = values.argsort(kind="stable")
        r = np.empty(len(values))
        r[order] = np.arange(len(values), dtype=float)
        for v in np.unique(values):
            r[values == v] = r[values == v].mean()
        return r

    a = ranks(np.array([ours[n] for n in names], dtype=float))
    b = ranks(np.array([theirs[n] for n in names], dtype=float))
    if a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])
