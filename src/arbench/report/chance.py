"""Whether an arm is off chance: its held-out accuracy above the task's strongest floor that
reads no binding by more than sampling noise, tested, not read off a factor.

The test is one-sided binomial over the arm's held-out answers, pooled over its seeds:
k correct of n scored answers against the rate ``floor`` of the best strategy that binds
nothing (the value marginal, the best no-binding guess, a copy-only answer: whichever is
highest), at ``CHANCE_ALPHA``. Answers within one sequence share a model and a table, so
the binomial's noise is a lower bound; the alpha is set low for that. An evaluation that
does not count its answers falls back to the old threshold (``CHANCE_FACTOR`` x the value
floor, or ``NO_BINDING_FACTOR`` x the no-binding floor) and says so (``rule``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CHANCE_ALPHA = 1e-3
CHANCE_FACTOR = 10.0
NO_BINDING_FACTOR = 1.5
# the floors of guessers that skip the task's computation (bind nothing, compose nothing)
NO_TASK_FLOORS = ("value_marginal", "best_no_binding", "uniform_pair_no_binding", "copy_only")

TEST_RULE = (
    "not above the strongest no-binding floor by a one-sided binomial test over the pooled "
    f"held-out answers at alpha {CHANCE_ALPHA:g}"
)
THRESHOLD_RULE = (
    f"below {CHANCE_FACTOR:g}x the value floor or {NO_BINDING_FACTOR:g}x the best no-binding "
    "floor (evaluations that do not count their answers)"
)


def strongest_floor(floors: Mapping[str, float]) -> float:
    """The highest accuracy a strategy reaches without the task's computation."""
    return max((float(floors[k]) for k in NO_TASK_FLOORS if floors.get(k) is not None), default=0.0)


def threshold(floors: Mapping[str, float], factor: float = CHANCE_FACTOR) -> float:
    """The fallback's accuracy below which a mean is chance (no answer counts known)."""
    no_binding = max((float(floors[k]) for k in NO_TASK_FLOORS[1:] if k in floors), default=0.0)
    return max(factor * float(floors.get("value_marginal", 0.0)), NO_BINDING_FACTOR * no_binding)


def off_chance(
    runs: Sequence[Mapping[str, Any]],
    floors: Mapping[str, float],
    alpha: float = CHANCE_ALPHA,
    factor: float = CHANCE_FACTOR,
    key: str = "accuracy",
) -> dict[str, Any]:
    """Each seed's scores (``accuracy``, ``correct``, ``supervised``) tested together:
    {off_chance, p, floor, rule, correct, answers}; ``rule`` "binomial" or "threshold"."""
    floor = strongest_floor(floors)
    counted = runs and all(
        isinstance(r.get("correct"), int) and isinstance(r.get("supervised"), int) for r in runs
    )
    if key == "accuracy" and counted:
        k = sum(int(r["correct"]) for r in runs)
        n = sum(int(r["supervised"]) for r in runs)
        from scipy.stats import binom  # here: scipy.stats costs every Snakemake start ~0.6 s

        p = float(binom.sf(k - 1, n, floor)) if n else 1.0
        return {
            "off_chance": bool(n and p < alpha),
            "p": p,
            "floor": floor,
            "rule": "binomial",
            "correct": k,
            "answers": n,
        }
    scores = [float(r[key]) for r in runs]
    mean = sum(scores) / len(scores) if scores else float("nan")
    below = threshold(floors, factor)
    return {
        "off_chance": bool(mean >= below),
        "p": None,
        "floor": floor,
        "rule": "threshold",
        "threshold": below,
    }
