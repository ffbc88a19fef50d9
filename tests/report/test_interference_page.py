"""The interactive interference page: rendered by the pipeline's code, then opened in
headless Chromium (Debian's `chromium-headless-shell` or `chromium`, `make browser`), where
its in-browser simulation must agree with the closed form and with the Python simulation.
As root with apt-get (CI) the test installs Debian's `chromium-headless-shell` first
(`make browser`); elsewhere without a browser it is skipped, saying so."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from arbench.analysis.interference import Rule, curves
from arbench.report.interference import page, run_study

ROOT = Path(__file__).resolve().parents[2]
BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser")
SETTINGS = dict(d_k=16, d_v=16, n=[1, 2, 4, 8, 16, 32], betas=[0.5], age_n=16, trials=20, seed=0)


def _find() -> str | None:
    return next((p for name in BROWSERS if (p := shutil.which(name))), None)


def _browser() -> str:
    """A headless browser; as root with apt-get (CI), `make browser` installs Debian's."""
    if (path := _find()) is None and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["make", "-C", str(ROOT), "browser"], capture_output=True, timeout=600)
        path = _find()
    if path is None:
        pytest.skip(f"no headless browser ({', '.join(BROWSERS)}) installed: run `make browser`")
    return path


def _headless(browser: str, *args: str) -> str:
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--virtual-time-budget=20000",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("page") / "interference.html"
    page(run_study(SETTINGS), SETTINGS, "test", out)
    return out


def test_page_is_self_contained(rendered: Path) -> None:
    html = rendered.read_text()
    assert "<script src" not in html and "http://" not in html and "https://" not in html
    assert '"label": "delta, \\u03b2 = 0.5"' in html or "delta, β = 0.5" in html


def _readout(browser: str, page_path: Path, query: str) -> dict[str, float]:
    dom = _headless(browser, "--dump-dom", f"{page_path.as_uri()}?{query}")
    tag = re.search(r"<output id=\"readout\"([^>]*)>", dom)
    assert tag, "the page rendered no readout"
    fields = dict(re.findall(r'data-([a-z_]+)="([^"]*)"', tag.group(1)))
    assert fields.get("ready") == "1", "the page's script did not finish"
    return {k: float(v) for k, v in fields.items()}


def test_browser_simulation_agrees_with_closed_form_and_python(rendered: Path) -> None:
    browser = _browser()
    got = _readout(browser, rendered, "n=32&d=16&beta=0.5&trials=300&seed=7")
    assert got["additive_closed"] == pytest.approx(31 / 16)
    assert abs(got["additive_sim"] - 31 / 16) < 5 * got["additive_se"]
    ref = curves(Rule(0.5), [32], age_n=32, d_k=16, d_v=16, trials=2000, seed=5)
    se = np.hypot(got["delta_se"], ref.se_vs_n[0])
    assert abs(got["delta_sim"] - ref.error_vs_n[0]) < 5 * se
    # the sliders' parameters reach the simulation: beta = 1 stores the newest pair exactly
    exact = _readout(browser, rendered, "n=8&d=16&beta=1&trials=20&seed=1")
    assert exact["delta_newest"] < 1e-12 and exact["beta"] == 1.0


def test_screenshot_is_saved_under_results_figures(rendered: Path) -> None:
    browser = _browser()
    shot = ROOT / "results" / "figures" / "interference_page.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    _headless(browser, f"--screenshot={shot}", "--window-size=1150,800", rendered.as_uri())
    assert shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
