"""Interference in a fixed matrix state, without training: additive vs delta-rule writes.

Store n pairs (k_i, v_i), keys uniform on the unit sphere of R^{d_k} and values uniform on
the unit sphere of R^{d_v}, one write per pair into a d_v x d_k state S (S_0 = 0):

* additive (linear attention):  S_t = S_{t-1} + v_t k_t^T
* delta rule, step beta:        S_t = S_{t-1} + beta (v_t - S_{t-1} k_t) k_t^T

and read each pair back with its own key. The retrieval error of pair i after n writes is
||S_n k_i - v_i||^2 (values have unit norm, so it is relative to the value's energy); its
*age* is n - i, the writes that came after it.

Additive writes have a closed form: S_n k_i - v_i = sum_{j != i} v_j (k_j . k_i), and with
independent zero-mean values and E[(k_j . k_i)^2] = 1/d_k, the expected error is
(n - 1)/d_k for every pair, whatever its age. The delta rule has none we use (each write
corrects the newest pair exactly when beta = 1 and disturbs the older ones through the
correlations it leaves), so it is simulated: every draw from the generator passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Rule:
    """A write rule: ``beta`` None is additive, otherwise the delta rule's step."""

    beta: float | None = None

    @property
    def label(self) -> str:
        return "additive" if self.beta is None else f"delta, β = {self.beta:g}"


def additive_error(n: int | np.ndarray, d_k: int) -> np.ndarray:
    """Expected retrieval error of any stored pair after ``n`` additive writes: (n-1)/d_k."""
    return (np.asarray(n, dtype=np.float64) - 1.0) / d_k


def unit_rows(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Rows uniform on the unit sphere (normalised Gaussians), shape ``(..., d)``."""
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def simulate(
    rule: Rule, n_max: int, d_k: int, d_v: int, trials: int, rng: np.random.Generator
) -> np.ndarray:
    """Retrieval errors after every write: ``err[t-1, :, i]`` is pair i's error (i < t)
    after t writes, over ``trials`` independent draws (NaN where i >= t).

    Shape (n_max, trials, n_max); vectorised over trials, one loop over writes.
    """
    keys = unit_rows(rng, (trials, n_max, d_k))
    values = unit_rows(rng, (trials, n_max, d_v))
    state = np.zeros((trials, d_v, d_k))
    err = np.full((n_max, trials, n_max), np.nan)
    for t in range(n_max):
        k, v = keys[:, t], values[:, t]
        if rule.beta is None:
            state += v[:, :, None] * k[:, None, :]
        else:
            residual = v - np.einsum("bvk,bk->bv", state, k)
            state += rule.beta * residual[:, :, None] * k[:, None, :]
        read = np.einsum("bvk,bik->biv", state, keys[:, : t + 1])
        err[t, :, : t + 1] = ((read - values[:, : t + 1]) ** 2).sum(axis=-1)
    return err


@dataclass(frozen=True)
class Curves:
    """Mean error vs number of stored pairs, and vs age at ``age_n`` stored pairs, with the
    standard error of each mean over trials."""

    rule: Rule
    n: np.ndarray
    error_vs_n: np.ndarray
    se_vs_n: np.ndarray
    age: np.ndarray
    error_vs_age: np.ndarray
    se_vs_age: np.ndarray


def curves(
    rule: Rule, ns: list[int], age_n: int, d_k: int, d_v: int, trials: int, seed: int
) -> Curves:
    """One rule's curves, simulated from ``seed`` (a rule's draws never depend on another's).

    Error vs n averages every stored pair; error vs age reads the state after ``age_n``
    writes, age 0 being the newest pair.
    """
    n_max = max(max(ns), age_n)
    err = simulate(rule, n_max, d_k, d_v, trials, np.random.default_rng(seed))
    per_trial = np.array([np.nanmean(err[n - 1, :, :n], axis=1) for n in ns])  # (len(ns), T)
    at = err[age_n - 1, :, :age_n][:, ::-1]  # (T, age): age 0 first
    return Curves(
        rule=rule,
        n=np.asarray(ns),
        error_vs_n=per_trial.mean(axis=1),
        se_vs_n=per_trial.std(axis=1, ddof=1) / np.sqrt(trials),
        age=np.arange(age_n),
        error_vs_age=at.mean(axis=0),
        se_vs_age=at.std(axis=0, ddof=1) / np.sqrt(trials),
    )


def study(
    d_k: int, d_v: int, ns: list[int], betas: list[float], age_n: int, trials: int, seed: int
) -> list[Curves]:
    """Additive writes and the delta rule at each beta, each from its own derived seed."""
    rules = [Rule(None)] + [Rule(float(b)) for b in betas]
    seeds = np.random.SeedSequence(seed).spawn(len(rules))
    return [
        curves(r, ns, age_n, d_k, d_v, trials, int(s.generate_state(1)[0]))
        for r, s in zip(rules, seeds, strict=True)
    ]
