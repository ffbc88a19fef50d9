"""The claims report's two renderings: ``claims.md`` and ``tables/claims.tex``, a row per
claim (our values, n, p, the test, the verdict with its reason, the causal-recipe reading
with its own), opened by counts split into claims about trained models and checks of the
setup, the data and the floors."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2

from arbench.report.claims.paths import parse_path
from arbench.report.claims.schema import NEEDS_P, RULES, Claim, ClaimsFile
from arbench.report.claims.values import fmt
from arbench.report.claims.verdicts import NOT_RUN, VERDICTS, Result
from arbench.report.tables import TEMPLATES, environment, fmt_p, latex_escape


def _typed(value: Any) -> str:
    """A value as the claims file types it (the source's side: no added precision)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() and abs(value) >= 100 else f"{value:g}"
    return str(value)


def _signed(claim: Claim) -> bool:
    return claim.rule in NEEDS_P or claim.reduce == "diff"


def row(res: Result) -> dict[str, Any]:
    """The display strings of one result (what both templates print); a claim with a
    causal-recipe reading carries that reading's row as ``causal``."""
    c = res.claim
    if res.verdict == NOT_RUN and not res.values:
        ours = "--"
    elif c.rule == "ordering":
        ours = ", ".join(f"{a} {fmt(v)}" for a, v in zip(res.labels, res.values, strict=True))
    elif c.rule == "rank_correlation":
        each = ", ".join(f"{a} {fmt(v)}" for a, v in zip(res.labels, res.values, strict=True))
        rho = "--" if res.rho is None else f"{res.rho:.2f}"
        ours = f"rho = {rho} over {len(res.labels)} arms ({each})"
    else:
        ours = ", ".join(fmt(v, _signed(c)) for v in res.values)
        if c.rule == "holds":  # name the flag: "chance: yes, no"
            last = parse_path(c.statistic[-1])[-1]
            ours = f"{last.key}: {ours}" if last.kind == "key" else ours
    test = RULES[c.rule]
    if c.rule == "within":
        test = f"within {_typed(c.tolerance)} of {_typed(c.target)}"
    elif c.rule in ("at_least", "at_most"):
        test = f"{'>=' if c.rule == 'at_least' else '<='} {_typed(c.threshold)}"
    elif c.rule == "same_sign_significant":
        test = f"{'positive' if c.sign > 0 else 'negative'}, p < {_typed(c.alpha)}"
    elif c.rule == "not_significant":
        test = f"p >= {_typed(c.alpha)}"
    elif c.rule == "holds":
        test = "all true"
    elif c.rule == "rank_correlation":
        test = f"Spearman rho >= {_typed(c.threshold)} against the source's values"
    elif c.rule == "ordering":
        test = f"{c.order}{'' if c.strict else ' (ties allowed)'}: {' > '.join(c.arms)}"
    if c.reduce:
        test += f" ({c.reduce} of the values)"
    return {
        "id": c.id,
        "claim": c.claim,
        "source": f"{c.source_title}, {c.section}",
        "source_title": c.source_title,
        "section": c.section,
        "source_value": _typed(c.source_value),
        "ours": ours,
        "n": res.n or "--",
        "p": ", ".join(fmt_p(q) for q in res.p) if res.p else "--",
        "verdict": res.verdict,
        "reason": res.reason,
        "note": c.note,
        "test": test,
        "rule": c.rule,
        "where": c.source_name,
        "stats": res.stats_path,
        "refs": res.refs,
        "causal": row(res.causal) if res.causal is not None else None,
        "kind": res.kind,
        "decided_at": res.decided_at,
    }


def counts(results: Sequence[Result]) -> dict[str, int]:
    """Claims per verdict."""
    return {v: sum(r.verdict == v for r in results) for v in VERDICTS}


KINDS = {"model": "claims about trained models", "setup": "checks of setup, data and floors"}


def counts_by_kind(results: Sequence[Result]) -> dict[str, dict[str, int]]:
    """Claims per verdict, apart for claims about trained models and checks of the setup,
    the data and the floors (a definition reproduced is not a result)."""
    return {k: counts([r for r in results if r.kind == k]) for k in KINDS}


def count_line(by_verdict: dict[str, int]) -> str:
    """'3 reproduced, 1 inconclusive' (verdicts with none left out)."""
    parts = [f"{n} {v}" for v, n in by_verdict.items() if n]
    return ", ".join(parts) if parts else "none"


_TEX_TEXT = {
    "<": "$<$",
    ">": "$>$",
    "|": "$|$",
    "§": r"\S{}",
    "≈": r"$\approx$",
    "≤": r"$\leq$",
    "≥": r"$\geq$",
    "×": r"$\times$",
    "→": r"$\rightarrow$",
    "±": r"$\pm$",
    "–": "--",
    "—": "---",
    "−": "-",
    "α": r"$\alpha$",
}


def tex_text(value: Any) -> str:
    """Plain text for LaTeX: the tables' escapes, plus <, >, | and the few non-ASCII signs
    the claims use, which the default fonts would print wrongly or not at all; a long name
    (``delta_conv-pairs16``, a path) may break after its ``_``, ``-`` and ``/``."""
    text = str(value)
    out = []
    for i, ch in enumerate(text):
        out.append(_TEX_TEXT.get(ch, latex_escape(ch)))
        after_letter = (
            i > 0 and text[i - 1].isalnum() and i + 1 < len(text) and text[i + 1].isalnum()
        )
        if ch in "_/" or (ch == "-" and after_letter):
            out.append(r"\allowbreak{}")
    return "".join(out)


def tex_ref(path: str) -> str:
    """A reference to a table or figure: ``\\claimref{kind}{label}{path}`` (the paper
    defines it as a cross-reference, claims.tex alone prints the path); other files by path."""
    m = re.fullmatch(r"(tables|figures)/([^/]+)\.(tex|png|pdf)", path)
    if not m:
        return rf"\texttt{{{tex_text(path)}}}"
    kind, label = ("Table", "tab") if m.group(1) == "tables" else ("Figure", "fig")
    return rf"\claimref{{{kind}}}{{{label}:{m.group(2)}}}{{{tex_text(path)}}}"


def md_text(value: Any) -> str:
    return str(value).replace("|", r"\|").replace("\n", " ")


def _groups(rows: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """Rows in chunks of at most ``size`` (one float each, so a long list breaks across
    pages without packages beyond booktabs), a chunk per source title."""
    out: list[dict[str, Any]] = []
    for title in dict.fromkeys(r["source_title"] for r in rows):
        mine = [r for r in rows if r["source_title"] == title]
        parts = [mine[i : i + size] for i in range(0, len(mine), size)]
        for k, part in enumerate(parts):
            out.append({"title": title, "rows": part, "part": k + 1, "parts": len(parts)})
    return out


def render_markdown(
    results: Sequence[Result],
    scale: str,
    template: str | Path | None = None,
    claims: ClaimsFile | None = None,
    scope: tuple[str, Sequence[str]] | None = None,
    link_base: str = "",
) -> str:
    """claims.md: a summary, then a row per claim (reasons and notes beside the verdict),
    then the sources' statements that are design parameters or untestable. ``scope`` (a
    study's name and experiments) titles a study's report; ``link_base`` leads from where
    the file lies to the results root its tables and figures are under."""
    template = Path(template or TEMPLATES / "claims.md.j2")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template.parent)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["md"] = md_text
    rows = [row(r) for r in results]
    sources = claims.sources if claims else ()
    return env.get_template(template.name).render(
        rows=rows,
        scale=scale,
        counts=counts(results),
        kinds={
            KINDS[k]: (sum(c.values()), count_line(c)) for k, c in counts_by_kind(results).items()
        },
        rules=RULES,
        sources=sources,
        not_claims=claims.not_claims if claims else (),
        scope=scope,
        base="" if link_base in ("", ".") else link_base.rstrip("/") + "/",
    )


def render_tex(
    results: Sequence[Result],
    scale: str,
    template: str | Path | None = None,
    source: str = "claims.yaml",
    rows_per_table: int = 14,
) -> str:
    """tables/claims.tex: the claims as booktabs tables with p{} columns, one float per
    source (split every ``rows_per_table`` rows), compiling with booktabs alone."""
    template = Path(template or TEMPLATES / "claims.tex.j2")
    env = environment(template.parent)
    env.filters["text"] = tex_text
    env.filters["ref"] = tex_ref
    rows = [row(r) for r in results]
    return env.get_template(template.name).render(
        groups=_groups(rows, rows_per_table),
        scale=scale,
        counts=counts(results),
        kinds={
            KINDS[k]: (sum(c.values()), count_line(c)) for k, c in counts_by_kind(results).items()
        },
        source=source,
    )
