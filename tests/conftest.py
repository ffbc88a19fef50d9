"""Shared fixtures: tiny configs so tests stay fast on 2 cores; LaTeX for the tests that
compile what the report writes."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------- LaTeX: installed where it can be, never skipped
# silently. As root with apt-get (CI, a fresh container) the first test that compiles LaTeX
# runs `make latex` (Debian's texlive-latex-base, texlive-latex-recommended and latexmk, about
# 20 s), under a lock so that parallel test processes never race dpkg; only where installing
# is impossible does such a test skip, saying why.

MINIMAL = (
    "\\documentclass{article}\\usepackage{booktabs}\\usepackage{graphicx}"
    "\\begin{document}\n%s\n\\end{document}\n"
)
APT_LOCK = Path("/tmp/arbench-tests-apt.lock")  # shared by every test process of this machine


@contextlib.contextmanager
def _apt_lock():
    """Held around an apt-get install: dpkg takes one install at a time and apt-get fails at
    once, not waiting, when another holds it."""
    with APT_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def apt_lock():
    """`_apt_lock`, for a test that installs Debian packages: `with apt_lock(): ...`."""
    return _apt_lock


@functools.cache
def latex_missing() -> str | None:
    """None when pdflatex runs here (installing it first as root with apt-get); otherwise why
    it cannot. A failed install is an error, not a skip."""
    if shutil.which("pdflatex"):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        who = "not root" if os.geteuid() != 0 else "no apt-get"
        return (
            f"no pdflatex, and it cannot be installed here ({who}): LaTeX not compiled "
            "(as root on Debian: make latex)"
        )
    with _apt_lock():  # another test process may be installing it
        if not shutil.which("pdflatex"):
            done = subprocess.run(
                ["make", "-C", str(ROOT), "latex"], capture_output=True, text=True, timeout=1200
            )
            assert shutil.which("pdflatex"), (
                f"make latex failed:\n{(done.stdout + done.stderr)[-3000:]}"
            )
    return None


def _compile_tex(body: str, where: Path, name: str = "doc") -> str:
    """Compile ``body`` in a minimal booktabs document; its log (the output on failure)."""
    doc = where / f"{name}.tex"
    doc.write_text(MINIMAL % body)
    done = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    return (where / f"{name}.log").read_text(errors="replace")


@pytest.fixture
def compile_tex():
    """`_compile_tex(body, where, name)`, for a test that compiles LaTeX: pdflatex installed
    first where it can be (`latex_missing`), the test skipped, saying why, where it cannot."""
    why = latex_missing()
    if why:
        pytest.skip(why)
    return _compile_tex


# ---------------------------------------------- helpers shared by tests/kernels and tests/cells
# Test modules are imported by path (--import-mode=importlib) and cannot import one another, so
# a helper several of them use is a fixture that returns it.


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Frobenius-norm relative error of a against the reference b."""
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def _max_rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest absolute error of a, relative to the largest entry of the reference b."""
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def _assert_close(got: dict[str, torch.Tensor], ref: dict[str, torch.Tensor], tol: float) -> None:
    """Same keys, and each tensor within relative error tol of a nonzero reference."""
    assert got.keys() == ref.keys()
    for name in ref:
        assert ref[name].norm() > 0, f"{name}: reference is all zeros, comparison is vacuous"
        err = _rel_err(got[name], ref[name])
        assert err <= tol, f"{name}: relative error {err:.3g} > {tol:g}"


def _randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Standard normal draws from their own seeded generator (the global RNG is untouched)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _draw(*shape: int, seed: int) -> torch.Tensor:
    """`randn` in float64 with an explicit seed."""
    return _randn(*shape, seed=seed, dtype=torch.float64)


@pytest.fixture
def rel_err():
    return _rel_err


@pytest.fixture
def max_rel_err():
    return _max_rel_err


@pytest.fixture
def assert_close():
    return _assert_close


@pytest.fixture
def randn():
    return _randn


@pytest.fixture
def draw():
    return _draw
