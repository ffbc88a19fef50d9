"""Minimum detectable effects of the two exact tests the claims use, at a given n: the
smallest difference a "no difference" verdict could have seen (80 % power, two-sided alpha),
so a null result on too few seeds reads as inconclusive rather than as evidence of no effect.

Fisher's test of lock-in counts: power is exact (a sum over both binomials of the tables the
test rejects). The permutation test of means: power under a location shift of arm a, the
per-seed noise resampled from both arms' residuals, each simulated pair tested with the same
exact permutation test (every relabeling up to ``MAX_EXACT_RELABELINGS``, a fixed Monte
Carlo set beyond); the simulations share their draws across shifts, so power rises with the
shift and bisection finds it."""

from __future__ import annotations

import itertools
import math

import numpy as np

from arbench.stats.fisher import fisher_exact_two_sided
from arbench.stats.permutation import _REL_TOL, _mean_diffs

__all__ = ["fisher_mde", "fisher_power", "permutation_mde", "permutation_power"]

MAX_EXACT_RELABELINGS = 20_000
MC_RELABELINGS = 4_000
_CHUNK_ELEMENTS = 4_000_000


def fisher_power(n_a: int, n_b: int, rate_a: float, rate_b: float, alpha: float = 0.05) -> float:
    """Exact power of the two-sided Fisher test of k_a of n_a against k_b of n_b when the
    true lock-in rates are ``rate_a`` and ``rate_b``."""
    reject = _fisher_rejects(n_a, n_b, alpha)
    pa = _binom(n_a, rate_a)
    pb = _binom(n_b, rate_b)
    return float(pa @ reject @ pb)


def fisher_mde(
    n_a: int, n_b: int, base_rate: float, alpha: float = 0.05, power: float = 0.8
) -> float | None:
    """The smallest difference of lock-in rates, centred on ``base_rate`` (kept inside
    [0, 1]), that the two-sided Fisher test detects with ``power``; None when even 0 vs 1
    is not detected that often (too few seeds)."""
    reject = _fisher_rejects(n_a, n_b, alpha)
    for step in range(1, 201):
        delta = step / 200
        low = min(max(base_rate - delta / 2, 0.0), 1.0 - delta)
        got = _binom(n_a, low + delta) @ reject @ _binom(n_b, low)
        if got >= power:
            return delta
    return None


def permutation_power(
    a: object,
    b: object,
    shift: float,
    alpha: float = 0.05,
    n_sim: int = 200,
    rng: np.random.Generator | None = None,
) -> float:
    """Power of the two-sided permutation test of means when arm a sits ``shift`` above arm
    b, the seeds' noise resampled from the residuals of ``a`` and ``b``."""
    sims = _Simulations(a, b, n_sim, np.random.default_rng(0) if rng is None else rng)
    return sims.power(shift, alpha)


def permutation_mde(
    a: object,
    b: object,
    alpha: float = 0.05,
    power: float = 0.8,
    n_sim: int = 200,
    rng: np.random.Generator | None = None,
    largest: float = 1.0,
    resolution: float = 0.005,
) -> float | None:
    """The smallest shift of arm a (up to ``largest``, to ``resolution``) that the
    permutation test of means detects with ``power`` at these arms' sizes and noise; None
    when even ``largest`` is not detected that often (too few seeds)."""
    sims = _Simulations(a, b, n_sim, np.random.default_rng(0) if rng is None else rng)
    if sims.power(largest, alpha) < power:
        return None
    low, high = 0.0, largest
    while high - low > resolution:
        mid = (low + high) / 2
        low, high = (low, mid) if sims.power(mid, alpha) >= power else (mid, high)
    return round(high, 6)


class _Simulations:
    """Simulated arm pairs with fixed noise draws and a fixed relabeling set, so power at
    each shift is read off the same draws."""

    def __init__(self, a: object, b: object, n_sim: int, rng: np.random.Generator) -> None:
        xa = np.asarray(a, dtype=float).ravel()
        xb = np.asarray(b, dtype=float).ravel()
        if xa.size == 0 or xb.size == 0:
            raise ValueError("both arms need at least one score")
        if n_sim < 1:
            raise ValueError("n_sim must be >= 1")
        self.n_a, self.n_b = xa.size, xb.size
        residuals = np.concatenate([xa - xa.mean(), xb - xb.mean()])
        n = self.n_a + self.n_b
        self.noise = residuals[rng.integers(0, n, size=(n_sim, n))]
        self.members, self.exact = _relabelings(n, self.n_a, rng)

    def samples(self, shift: float) -> np.ndarray:
        """The simulated pairs at this shift, arm a's seeds first in each row."""
        pooled = self.noise.copy()
        pooled[:, : self.n_a] += shift
        return pooled

    def pvalues(self, shift: float) -> np.ndarray:
        """Each simulated pair's two-sided permutation p at this shift."""
        r = self.members.shape[0]
        block = max(1, _CHUNK_ELEMENTS // (r * self.n_a))
        out = []
        samples = self.samples(shift)
        for start in range(0, samples.shape[0], block):
            pooled = samples[start : start + block]
            total = pooled.sum(axis=1, keepdims=True)
            sums = pooled[:, self.members].sum(axis=2)  # (simulations, relabelings)
            diffs = np.abs(_mean_diffs(sums, total, self.n_a, self.n_b))
            own = pooled[:, : self.n_a].sum(axis=1)  # the observed labeling, same formula
            observed = np.abs(_mean_diffs(own, total[:, 0], self.n_a, self.n_b))
            rounding = 64 * pooled.shape[1] * np.finfo(float).eps * np.abs(pooled).max(axis=1)
            threshold = observed - np.maximum(_REL_TOL * observed, rounding)
            count = (diffs >= threshold[:, None]).sum(axis=1)
            out.append(count / r if self.exact else (count + 1) / (r + 1))
        return np.concatenate(out)

    def power(self, shift: float, alpha: float) -> float:
        """The share of simulated pairs whose test gives p < alpha at this shift."""
        return float(np.mean(self.pvalues(shift) < alpha))


def _relabelings(n: int, n_a: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Group-a members of every relabeling when there are at most MAX_EXACT_RELABELINGS
    (exact), else of MC_RELABELINGS random ones with the observed labeling first."""
    if math.comb(n, n_a) <= MAX_EXACT_RELABELINGS:
        return np.array(list(itertools.combinations(range(n), n_a)), dtype=np.intp), True
    draws = np.argsort(rng.random((MC_RELABELINGS, n)), axis=1)[:, :n_a]
    return np.sort(draws, axis=1).astype(np.intp), False


def _binom(n: int, rate: float) -> np.ndarray:
    k = np.arange(n + 1)
    coef = np.array([math.comb(n, int(i)) for i in k], dtype=float)
    return coef * rate**k * (1.0 - rate) ** (n - k)


def _fisher_rejects(n_a: int, n_b: int, alpha: float) -> np.ndarray:
    out = np.zeros((n_a + 1, n_b + 1))
    for ka, kb in itertools.product(range(n_a + 1), range(n_b + 1)):
        out[ka, kb] = fisher_exact_two_sided(ka, n_a, kb, n_b) < alpha
    return out
