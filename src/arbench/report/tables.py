"""LaTeX tables rendered from jinja2 templates with LaTeX-safe delimiters."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jinja2

from arbench.report.layouts import TEMPLATES

_ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\^{}",
    "<": r"\textless{}",  # OT1 text fonts set a bare < and > as inverted marks
    ">": r"\textgreater{}",
}


def latex_escape(value: Any) -> str:
    """Escape LaTeX special characters in a plain-text value."""
    return "".join(_ESCAPES.get(ch, ch) for ch in str(value))


def curriculum_label(value: dict[str, Any] | None) -> str:
    """A train block's curriculum in words: its ramp ("linear curriculum"), "full-range" for a
    linear ramp that starts at the full gap (the paper's "uniform": every gap from step 0),
    "no curriculum" for none."""
    if value is None:
        return "no curriculum"
    ramp = value.get("ramp", "linear")
    if ramp == "linear" and value.get("start", 0.0) >= 1.0:
        ramp = "full-range"
    return f"{ramp} curriculum"


def fmt_cell(value: Any) -> str:
    """Table cell for an arm's knob: booleans as yes/no, a block the arm changes (its
    ``model``, ``task`` or ``train``) as key=value pairs (a curriculum in words), the rest
    escaped."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(
            curriculum_label(v) if k == "curriculum" else f"{latex_escape(k)}={fmt_cell(v)}"
            for k, v in value.items()
        )
    return latex_escape(value)


def fmt_p(p: float) -> str:
    """p-values: three significant digits, with a floor shown as an inequality."""
    return "<0.0001" if p < 1e-4 else f"{p:.3g}" if p < 0.01 else f"{p:.3f}"


def state_label(x: float) -> str:
    """A state size for a table: $2^{k}$ when it is a power of two, else 3 significant
    figures (an interpolated crossing)."""
    k = math.log2(x) if x > 0 else float("nan")
    if abs(k - round(k)) < 1e-9:
        return f"$2^{{{int(round(k))}}}$"
    return f"{x:,.3g}" if x < 1000 else f"{x:,.0f}"


def token_label(n: float) -> str:
    """A token count for a column head: 4{,}096 up to 99,999, then 256k, 4.2M, 10M."""
    n = int(n)
    if n < 100_000:
        return f"{n:,}".replace(",", "{,}")
    if n < 1_000_000:
        return f"{n / 1e3:.0f}k"
    return f"{n / 1e6:.3g}M"


def environment(directory: str | Path = TEMPLATES) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(directory)),
        block_start_string="((*",
        block_end_string="*))",
        variable_start_string="(((",
        variable_end_string=")))",
        comment_start_string="((#",
        comment_end_string="#))",
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.filters["tex"] = latex_escape
    env.filters["p"] = fmt_p
    env.filters["knob"] = fmt_cell
    env.filters["thousands"] = lambda n: f"{int(n):,}"
    env.filters["tokens"] = token_label
    env.filters["state"] = state_label
    return env


def render(template: str | Path, **context: Any) -> str:
    """Render ``template`` (a path) with ``context``."""
    template = Path(template)
    return environment(template.parent).get_template(template.name).render(**context)
