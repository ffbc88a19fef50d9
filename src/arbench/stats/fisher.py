"""Fisher's exact test for 2x2 lock-in tables, computed from the hypergeometric law."""

from __future__ import annotations

import math
from fractions import Fraction

__all__ = ["fisher_exact_one_sided", "fisher_exact_two_sided"]

# Tables whose probability is within this relative margin of the observed one count as
# "as extreme" (the conventional tolerance, as in R and scipy).
_REL_TOL = Fraction(1, 10_000_000)


def fisher_exact_two_sided(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided Fisher exact p for k1 of n1 vs k2 of n2 successes.

    Sums hypergeometric probabilities of all tables with the observed margins that are no
    more likely than the observed table; computed in exact integer arithmetic.
    """
    for name, v in (("k1", k1), ("n1", n1), ("k2", k2), ("n2", n2)):
        if int(v) != v or v < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
    k1, n1, k2, n2 = int(k1), int(n1), int(k2), int(n2)
    if k1 > n1 or k2 > n2:
        raise ValueError("successes cannot exceed trials")
    if n1 == 0 or n2 == 0:
        return 1.0

    n = n1 + n2
    k = k1 + k2
    lo, hi = max(0, k - n2), min(k, n1)

    # Unnormalised hypergeometric weights: P(X = x) = C(k, x) C(n - k, n1 - x) / C(n, n1).
    def weight(x: int) -> int:
        return math.comb(k, x) * math.comb(n - k, n1 - x)

    observed = weight(k1)
    cutoff = observed * (1 + _REL_TOL)
    tail = sum(w for w in (weight(x) for x in range(lo, hi + 1)) if w <= cutoff)
    return float(min(Fraction(tail, math.comb(n, n1)), Fraction(1)))


def fisher_exact_one_sided(k1: int, n1: int, k2: int, n2: int) -> float:
    """One-sided Fisher exact p that group 1's success rate exceeds group 2's: P(X >= k1)
    under the hypergeometric law with the observed margins. Our tables report the two-sided
    p; this one exists to set a published one-sided p beside it (6/6 vs 0/6: 1/924)."""
    for name, v in (("k1", k1), ("n1", n1), ("k2", k2), ("n2", n2)):
        if int(v) != v or v < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
    if k1 > n1 or k2 > n2:
        raise ValueError("successes cannot exceed trials")
    n, k = n1 + n2, k1 + k2
    hi = min(k, n1)
    tail = sum(math.comb(k, x) * math.comb(n - k, n1 - x) for x in range(k1, hi + 1))
    return float(Fraction(tail, math.comb(n, n1)))
