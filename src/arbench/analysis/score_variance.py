"""Why squared attention scores: the variance of an attention output against context length.

With scores x_i and values z_i, the output o = sum_i softmax(f(x))_i z_i. For independent
standard normal scores and values, Var(o_j) = E[sum_i alpha_i^2], the expected collision
probability of the attention weights (`independent`). Three score maps:

* raw, f(x) = x: the weights spread out and the variance dilutes like 1/n;
* squared, f(x) = x^2: E[e^{x^2}] is infinite, and the variance stays of order one as n grows;
* cubed, f(x) = x^3: the weights go one-hot and the variance tends to 1.

`dependent` relaxes the independence: one query q and n keys k_i in R^d, all standard normal,
scores s_i = q . k_i / sqrt(d), and the keys read out as the values (v_i = k_i, so a value is
correlated with its own weight); the raw variant then levels off near 1/d instead of 1/n,
because the weighted mean of the keys leans towards q. Every draw comes from the generator
passed in.
"""

from __future__ import annotations

from typing import Any

import numpy as np

POWERS = {"raw": 1, "squared": 2, "cubed": 3}


def _weights(scores: np.ndarray, power: int) -> np.ndarray:
    f = scores**power
    f = f - f.max(axis=-1, keepdims=True)
    w = np.exp(f)
    return w / w.sum(axis=-1, keepdims=True)


def independent(n: int, power: int, trials: int, rng: np.random.Generator) -> tuple[float, float]:
    """Mean and standard error over trials of Var(o_j) = sum_i alpha_i^2 (i.i.d. normal
    scores); the exact variance of an output component given the weights."""
    x = rng.standard_normal((trials, n))
    collision = (_weights(x, power) ** 2).sum(axis=-1)
    return float(collision.mean()), float(collision.std(ddof=1) / np.sqrt(trials))


def dependent(
    n: int, power: int, d: int, trials: int, rng: np.random.Generator
) -> tuple[float, float]:
    """Mean and standard error of the empirical output variance with shared-query scores:
    per trial, one query and n keys read out as the values, the variance of o's components."""
    out = np.empty(trials)
    for t in range(trials):
        q = rng.standard_normal(d)
        k = rng.standard_normal((n, d))
        o = _weights(k @ q / np.sqrt(d), power) @ k
        out[t] = o.var()
    return float(out.mean()), float(out.std(ddof=1) / np.sqrt(trials))


def study(settings: dict[str, Any]) -> dict[str, Any]:
    """Both settings' curves for every score map at every n (each curve from its own seed)."""
    allowed = ("n", "trials", "dependent_trials", "d", "seed")
    unknown = sorted(set(settings) - set(allowed))
    if unknown:
        raise ValueError(f"score_variance: unknown key {unknown[0]!r}; allowed: {list(allowed)}")
    ns = [int(n) for n in settings["n"]]
    seeds = iter(np.random.SeedSequence(int(settings["seed"])).spawn(2 * len(POWERS)))
    out: dict[str, Any] = {"n": ns, "d": int(settings["d"]), "independent": {}, "dependent": {}}
    for name, p in POWERS.items():
        rng = np.random.default_rng(next(seeds))
        out["independent"][name] = [independent(n, p, int(settings["trials"]), rng) for n in ns]
        rng = np.random.default_rng(next(seeds))
        out["dependent"][name] = [
            dependent(n, p, int(settings["d"]), int(settings["dependent_trials"]), rng) for n in ns
        ]
    return out
