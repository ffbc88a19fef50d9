"""Statistics for per-seed results: permutation tests, Fisher lock-in tests, bootstrap CIs."""

from arbench.stats.bootstrap import bootstrap_ci, bootstrap_diff_ci
from arbench.stats.fisher import fisher_exact_one_sided, fisher_exact_two_sided
from arbench.stats.intervals import diff_interval, rate_diff_interval
from arbench.stats.lockin import compare_lock_in, lock_in
from arbench.stats.permutation import PermutationResult, permutation_test
from arbench.stats.summary import contrast, describe

__all__ = [
    "PermutationResult",
    "bootstrap_ci",
    "bootstrap_diff_ci",
    "compare_lock_in",
    "contrast",
    "describe",
    "diff_interval",
    "fisher_exact_one_sided",
    "fisher_exact_two_sided",
    "lock_in",
    "permutation_test",
    "rate_diff_interval",
]
