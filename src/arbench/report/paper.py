"""The paper's body: every generated table and figure of one scale, in a LaTeX file that the
frame ``paper/main.tex`` inputs, and the compilation of both into ``paper.pdf``.

Which tables and figures exist comes from the config (`Plan.targets`), so a new experiment
appears in the paper without an edit here: the claims table first, then each experiment's
table and figure in config order (one page each), then the remaining tables (cells, floors)
and figures (benchmark, interference, score variance). Tables carry their own captions; a
figure's caption says what it shows (the experiment's title and its layout's caption sentence,
`arbench.report.layouts`, or ``paper/captions.yaml`` for the figures outside experiments) and
at which scale.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from arbench import strict_yaml
from arbench.report.claims import tex_text
from arbench.report.layouts import caption as layout_caption
from arbench.report.tables import latex_escape

CLAIMS_TABLE = "tables/claims.tex"


def paper_files(targets: Sequence[str]) -> dict[str, list[str]]:
    """What the paper shows, from the targets of `rule all`: every table, and every figure
    once (its PDF where one is built, else its PNG)."""
    tables = [t for t in targets if t.endswith(".tex")]
    stems = dict.fromkeys(t.rsplit(".", 1)[0] for t in targets if t.endswith((".pdf", ".png")))
    figures = [s + (".pdf" if f"{s}.pdf" in targets else ".png") for s in stems]
    return {"tables": tables, "figures": figures}


def load_captions(path: str | Path) -> dict[str, Any]:
    """``figures`` (a figure's path under the results root, without its extension -> its
    caption) and ``titles`` (a table's or figure's path outside the experiments -> its name in
    the contents); an experiment's figure is captioned by its layout (`layout_caption`)."""
    doc = strict_yaml.load(path) or {}  # a repeated key or a syntax error names the line
    return {k: doc.get(k, {}) for k in ("figures", "titles")}


def _rel(path: str, root: str) -> str:
    """A target's path relative to the results root."""
    return str(PurePosixPath(path).relative_to(root))


def _label(rel: str) -> str:
    """The label a table or figure file carries: tab:<stem> (the templates' own) or fig:<stem>."""
    path = PurePosixPath(rel)
    if path.suffix == ".tex":
        return f"tab:{path.stem}"
    # figures/<name> is the experiment's (the claims table refers to it as fig:<name>)
    return (
        f"fig:{path.stem}"
        if path.parent.name == "figures"
        else f"fig:{path.parent.name}-{path.stem}"
    )


def contents(
    tables: Sequence[str],
    figures: Sequence[str],
    experiments: Mapping[str, Mapping[str, str]],
    titles: Mapping[str, str] | None = None,
) -> str:
    """A short list of what the paper holds, each entry with its table and figure numbers;
    a file outside the experiments by its entry in ``titles`` (its path without extension)."""
    titles = titles or {}
    rows = []
    if CLAIMS_TABLE in tables:
        rows.append(("The claims of the sources, one by one", [CLAIMS_TABLE]))
    for name, exp in experiments.items():
        mine = [t for t in tables if t == f"tables/{name}.tex"]
        mine += [f for f in figures if f.startswith("figures/") and PurePosixPath(f).stem == name]
        if mine:
            rows.append((exp["title"], mine))
    shown = {f for _, files in rows for f in files}
    for rel in [*tables, *figures]:
        if rel not in shown:
            key = str(PurePosixPath(rel).with_suffix(""))
            rows.append((titles.get(key, PurePosixPath(rel).stem.replace("_", " ")), [rel]))
    items = []
    for title, files in rows:
        refs = ", ".join(
            f"{'Table' if f.endswith('.tex') else 'Figure'}~\\ref{{{_label(f)}}}" for f in files
        )
        items.append(f"\\item {tex_text(title)}: {refs}\n")
    return (
        "\\section*{Contents}\n{\\small\n\\begin{itemize}\n" + "".join(items) + "\\end{itemize}}\n"
    )


def bookmark(title: str, anchor: str) -> str:
    """A PDF bookmark (hyperref) where a section starts, without a heading on the page: the
    tables and figures carry their own captions, and a heading before a float would print
    below it once LaTeX moves the float to the top of the page."""
    return f"\\pdfbookmark[1]{{{latex_escape(title)}}}{{{anchor}}}\n"


def figure_tex(path: str, label: str, caption: str) -> str:
    """One figure float: the file (relative to the paper folder) scaled to the text block."""
    return (
        "\\begin{figure}[tbp]\n\\centering\n"
        f"\\includegraphics[width=\\linewidth,height=0.5\\textheight,keepaspectratio]{{{path}}}\n"
        f"\\caption{{{caption}}}\n\\label{{{label}}}\n\\end{{figure}}\n"
    )


def body(
    tables: Sequence[str],
    figures: Sequence[str],
    root: str,
    scale: str,
    experiments: Mapping[str, Mapping[str, str]],
    captions: Mapping[str, Any],
) -> str:
    """body.tex for ``tables`` and ``figures`` (paths under ``root``, as the plan names them;
    the body sits in ``<root>/paper/`` and reaches them as ``../<path>``). ``experiments``:
    name -> {title, layout}, in config order."""
    tables = [_rel(t, root) for t in tables]
    figures = [_rel(f, root) for f in figures]
    scale_tex = f"\\texttt{{{tex_text(scale)}}}"
    out = [
        f"% generated by arbench for scale {scale} -- do not edit\n",
        f"\\arbenchtitle{{{tex_text(scale)}}}\n",
    ]
    used: set[str] = set()

    def add_table(rel: str) -> None:
        out.append(f"\\input{{../{rel}}}\n")
        used.add(rel)

    def add_figure(rel: str, caption: str) -> None:
        out.append(figure_tex(f"../{rel}", _label(rel), caption))
        used.add(rel)

    out.append(contents(tables, figures, experiments, captions.get("titles", {})))
    if CLAIMS_TABLE in tables:
        out.append(bookmark("Claims", "claims"))
        add_table(CLAIMS_TABLE)
        out.append("\\clearpage\n")
    for name, exp in experiments.items():
        mine_t = [t for t in tables if t == f"tables/{name}.tex"]
        mine_f = [
            f
            for f in figures
            if PurePosixPath(f).parent.name == "figures" and PurePosixPath(f).stem == name
        ]
        if not mine_t and not mine_f:
            continue
        out.append(bookmark(exp["title"], f"exp:{name}"))
        for t in mine_t:
            add_table(t)
        for f in mine_f:
            what = layout_caption(exp["layout"])
            caption = f"{tex_text(exp['title'])}. {tex_text(what)} Scale {scale_tex}."
            add_figure(f, " ".join(caption.split()))
        out.append("\\clearpage\n")
    rest_t = [t for t in tables if t not in used]
    rest_f = [f for f in figures if f not in used]
    if rest_t or rest_f:
        out.append(bookmark("The cell zoo, floors and analyses", "rest"))
    for t in rest_t:
        add_table(t)
    if rest_t:
        out.append("\\clearpage\n")
    for f in rest_f:
        key = str(PurePosixPath(f).with_suffix(""))
        text = captions.get("figures", {}).get(key, f"{key}.")
        add_figure(f, f"{tex_text(' '.join(str(text).split()))} Scale {scale_tex}.")
    return "".join(out)


def compile_pdf(
    frame: str | Path,
    body_path: str | Path,
    pdf: str | Path,
    log: Callable[[str], None] = print,
    timeout: int = 600,
) -> float:
    """Compile the frame (copied beside the body as main.tex) into ``pdf`` with latexmk
    when it is installed, else pdflatex twice (the second pass resolves the references);
    return the seconds it took. RuntimeError with the log's tail when LaTeX fails."""
    work = Path(body_path).parent
    shutil.copyfile(frame, work / "main.tex")
    if shutil.which("latexmk"):
        runs = [["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "main.tex"]]
    elif shutil.which("pdflatex"):
        runs = [["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "main.tex"]] * 2
    else:
        raise RuntimeError(
            "neither latexmk nor pdflatex is installed: the paper needs LaTeX "
            "(Debian: apt-get install texlive-latex-base texlive-latex-recommended latexmk)"
        )
    start = time.perf_counter()
    for cmd in runs:
        done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed:\n{done.stdout[-4000:]}")
        log(f"{' '.join(cmd)}: ok")
    seconds = time.perf_counter() - start
    built = work / "main.pdf"
    tmp = Path(pdf).with_suffix(".pdf.tmp")
    shutil.copyfile(built, tmp)
    tmp.replace(pdf)
    return seconds
