"""The layout registry: every layout's template exists where the rules look for it, its
figure builder resolves to a function, its caption is a sentence, the stats carry the
sections it reads; every layout a task or the schema allows is registered; an unknown one
fails naming the known ones; and reading a template path imports no matplotlib."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from arbench.layout_names import LAYOUT_NAMES, TASK_LAYOUTS
from arbench.report import paper
from arbench.report.experiment import SECTIONS, experiment_stats
from arbench.report.layouts import LAYOUTS, caption, draw, layout_of, template_path
from arbench.tasks import TASKS
from arbench.tasks.base import Task, register_task

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_every_layout_has_its_template_builder_and_caption(name: str) -> None:
    layout = LAYOUTS[name]
    assert layout.name == name
    assert layout.template_file.is_file()
    assert (ROOT / template_path(name)).resolve() == layout.template_file.resolve()
    assert callable(layout.builder())
    assert caption(name).endswith(".") and "\n" not in caption(name)


def test_every_layout_a_task_or_the_schema_declares_is_registered() -> None:
    declared = {cls.layout for cls in TASKS.values()}
    schema = json.loads((ROOT / "schemas" / "config.schema.json").read_text())
    declared |= set(schema["$defs"]["experiment"]["properties"]["layout"]["enum"])
    assert declared <= set(LAYOUTS), sorted(declared - set(LAYOUTS))


def test_the_leaf_names_the_registered_layouts_and_tasks_declare_only_theirs() -> None:
    assert LAYOUT_NAMES == tuple(LAYOUTS)
    assert "grid" not in TASK_LAYOUTS and {cls.layout for cls in TASKS.values()} <= set(
        TASK_LAYOUTS
    )
    for layout in ("grid", "pie"):
        toy = type("Toy", (Task,), {"name": f"toy_{layout}", "layout": layout})
        with pytest.raises(ValueError, match=f"layout '{layout}' is not a task's"):
            register_task(toy)
        assert toy.name not in TASKS


@pytest.mark.parametrize("call", [layout_of, template_path, caption])
def test_an_unknown_layout_fails_naming_it_and_the_known_ones(call) -> None:
    with pytest.raises(ValueError) as err:
        call("pie")
    message = str(err.value)
    assert "\n" not in message and "'pie'" in message
    assert all(name in message for name in LAYOUTS)
    with pytest.raises(ValueError, match="unknown layout 'pie'"):
        draw({"layout": "pie"}, [])


@pytest.mark.parametrize(
    ("layout", "case"),
    [("bars", "bars"), ("sweep", "sweep"), ("grid", "grid"), ("lockin", "lockin")],
)
def test_the_stats_carry_the_sections_a_layout_reads(layout: str, case: str, request) -> None:
    fx = request.getfixturevalue
    stats = experiment_stats("x", fx(f"{case}_experiment"), fx(f"{case}_evals"), "demo", layout)
    assert stats["layout"] == layout
    assert set(LAYOUTS[layout].sections) <= set(stats)


def test_every_section_a_layout_reads_has_its_builder() -> None:
    read = {section for layout in LAYOUTS.values() for section in layout.sections}
    assert read <= set(SECTIONS), sorted(read - set(SECTIONS))


def test_the_paper_captions_an_experiment_figure_by_its_layout() -> None:
    text = paper.body(
        [],
        ["r/figures/x.pdf"],
        "r",
        "demo",
        {"x": {"title": "X", "layout": "sweep"}},
        paper.load_captions(ROOT / "paper" / "captions.yaml"),
    )
    assert f"\\caption{{X. {caption('sweep')} Scale \\texttt{{demo}}.}}" in text


def test_a_template_path_imports_no_plotting_library() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT / 'src')!r})\n"
        "from arbench.report.layouts import LAYOUTS, template_path\n"
        "[template_path(name) for name in LAYOUTS]\n"
        "print(sorted(m for m in ('matplotlib', 'torch') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
