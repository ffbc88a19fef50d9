"""Every generated LaTeX file compiles: each table template rendered from small synthetic
stats, the claims table, the tables a run left under results/*/tables/, and the paper (its
frame paper/main.tex around a generated body). Each table is compiled inside a minimal
document that loads booktabs and nothing else. pdflatex is installed first where it can be
(as root with apt-get: tests/conftest.py `compile_tex`); elsewhere the tests skip, saying why."""

from __future__ import annotations

from pathlib import Path

import pytest

from arbench.report import claims as C
from arbench.report import paper
from arbench.report.experiment import experiment_stats
from arbench.report.layouts import layout_of
from arbench.report.tables import render

ROOT = Path(__file__).resolve().parents[2]
RESULT_TABLES = sorted(ROOT.glob("results/**/tables/*.tex"))


def _layouts(request: pytest.FixtureRequest) -> dict[str, str]:
    """Each experiment template rendered from the report tests' synthetic stats."""
    fx = request.getfixturevalue
    cases = {
        "bars": experiment_stats("x", fx("bars_experiment"), fx("bars_evals"), "demo", "bars"),
        "sweep": experiment_stats("x", fx("sweep_experiment"), fx("sweep_evals"), "demo", "sweep"),
        "grid": experiment_stats("g", fx("grid_experiment"), fx("grid_evals"), "demo", "grid"),
        "tuned": experiment_stats("t", fx("tuned_experiment"), fx("tuned_evals"), "demo", "grid"),
        "lockin": experiment_stats(
            "l", fx("lockin_experiment"), fx("lockin_evals"), "demo", "lockin", fx("lockin_curves")
        ),
    }
    template = {"tuned": "grid"}
    return {
        name: render(layout_of(template.get(name, name)).template_file, source="s.json", **stats)
        for name, stats in cases.items()
    }


def _claims_tex(refs: tuple[str, ...] = ("tables/attention_reference.tex",)) -> str:
    """The claims table of synthetic results: every verdict, escapes, references."""
    doc = {
        "sources": ["the paper summary"],
        "claims": [
            {
                "id": f"c{i}",
                "claim": "Convolution & decay: 50% of the_gain > noise, ~1/n; §4.3 #1",
                "source": {"title": "the paper summary", "section": "§4.3"},
                "source_value": "0.592 vs 0.653, p = 0.88",
                "experiment": "toy",
                "statistic": "m",
                "rule": "at_least",
                "threshold": 0.5,
                "note": "a note with a_b",
            }
            for i in range(20)
        ],
    }
    cf = C.parse_claims(doc)
    results = []
    for i, c in enumerate(cf.claims):
        verdict = (C.REPRODUCED, C.NOT_REPRODUCED, C.NOT_RUN)[i % 3]
        results.append(
            C.Result(
                c,
                verdict,
                values=[0.5 + i / 100] if verdict != C.NOT_RUN else [],
                p=[0.0036],
                n="10 vs 10",
                reason="arm mamba2_fused not run: no CUDA" if verdict == C.NOT_RUN else "",
                refs=list(refs),
            )
        )
    return C.render_tex(results, "demo")


def test_every_table_template_compiles(request, tmp_path: Path, compile_tex) -> None:
    for name, tex in _layouts(request).items():
        compile_tex(tex, tmp_path, name)


def test_the_claims_table_compiles_and_fits_the_page(tmp_path: Path, compile_tex) -> None:
    log = compile_tex(_claims_tex(("tables/attention_reference.tex", "figures/a_b.png")), tmp_path)
    assert "Overfull \\hbox" not in log, "the claims table is wider than the page"


@pytest.mark.skipif(
    not RESULT_TABLES,
    reason="no tables under results/*/tables/ (no run in this checkout; the smoke run's "
    "tables compile in tests/workflow/test_pipeline.py)",
)
@pytest.mark.parametrize(
    "path", RESULT_TABLES, ids=[str(p.relative_to(ROOT)) for p in RESULT_TABLES]
)
def test_a_generated_table_compiles(path: Path, tmp_path: Path, compile_tex) -> None:
    compile_tex(path.read_text(), tmp_path)


def test_the_paper_compiles_from_a_generated_body(request, tmp_path: Path, compile_tex) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    root = tmp_path / "results" / "demo"
    (root / "tables").mkdir(parents=True)
    (root / "figures").mkdir()
    (root / "paper").mkdir()
    layouts = _layouts(request)
    tables = []
    for name, tex in layouts.items():
        # the templates label by experiment: give each its own name, as distinct experiments
        tex = tex.replace("{tab:x}", f"{{tab:{name}}}").replace("{tab:g}", f"{{tab:{name}}}")
        tex = tex.replace("{tab:t}", f"{{tab:{name}}}").replace("{tab:l}", f"{{tab:{name}}}")
        (root / "tables" / f"{name}.tex").write_text(tex)
        tables.append(f"results/demo/tables/{name}.tex")
    refs = ("tables/bars.tex", "figures/bars.pdf", "figures/score_variance.png")
    (root / "tables" / "claims.tex").write_text(_claims_tex(refs))
    tables.append("results/demo/tables/claims.tex")
    figures = []
    for name in ("bars", "score_variance"):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot([0, 1], [0, 1])
        fig.savefig(root / "figures" / f"{name}.pdf")
        plt.close(fig)
        figures.append(f"results/demo/figures/{name}.pdf")
    experiments = {
        name: {"title": f"Experiment {name} & co", "layout": {"tuned": "grid"}.get(name, name)}
        for name in layouts
    }
    captions = paper.load_captions(ROOT / "paper" / "captions.yaml")
    body = paper.body(tables, figures, "results/demo", "demo", experiments, captions)
    assert body.index("tables/claims.tex") < body.index("tables/bars.tex")  # claims first
    assert "Scale \\texttt{demo}" in body and "\\label{fig:bars}" in body
    assert "Figure~\\ref{fig:score_variance}" in body  # in the contents
    (root / "paper" / "body.tex").write_text(body)
    pdf = root / "paper.pdf"
    seconds = paper.compile_pdf(ROOT / "paper" / "main.tex", root / "paper" / "body.tex", pdf)
    assert pdf.stat().st_size > 10_000 and seconds < 300
    log = (root / "paper" / "main.log").read_text(errors="replace")
    assert "There were undefined references" not in log  # the claims' table/figure refs resolve


def test_paper_files_prefer_pdf_figures() -> None:
    targets = [
        "r/tables/a.tex",
        "r/figures/a.pdf",
        "r/figures/a.png",
        "r/bench/cells.json",
        "r/bench/cells.png",
        "r/figures/i.html",
    ]
    files = paper.paper_files(targets)
    assert files == {
        "tables": ["r/tables/a.tex"],
        "figures": ["r/figures/a.pdf", "r/bench/cells.png"],
    }
