"""The sources' per-seed results beside ours (arbench.report.reference): loading a set,
its summaries, the contrasts' source differences, and the bars table and figure that show
them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from arbench import strict_yaml
from arbench.report.experiment import experiment_stats
from arbench.report.figures import bars_with_seeds
from arbench.report.reference import ReferenceFileError, check_reference, load_set, summarise
from arbench.report.tables import TEMPLATES, render

ROOT = Path(__file__).resolve().parents[2]
SET = {
    "description": "a toy set",
    "folder": "results/probe",
    "file": "{arm}_seed{seed}.json",
    "field": "eval_accuracy",
    "arms": {"armed": {0: 0.99, 1: 0.97, 2: 0.5}, "plain": {0: 0.2, 1: 0.85}},
}


@pytest.fixture
def reference_file(tmp_path: Path) -> Path:
    path = tmp_path / "ref.yaml"
    doc = {"repository": "owner/repo", "commit": "a" * 40, "sets": {"toy": SET}}
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_set_carries_the_files_provenance(reference_file: Path) -> None:
    entry = load_set(reference_file, "toy")
    assert entry["repository"] == "owner/repo" and entry["commit"] == "a" * 40
    assert entry["name"] == "toy" and entry["arms"]["plain"] == {0: 0.2, 1: 0.85}
    with pytest.raises(KeyError, match=r"no set 'toi'; sets: \['toy'\]"):
        load_set(reference_file, "toi")


def test_summary_mean_range_and_both_lock_in_counts() -> None:
    s = summarise({"2": 0.5, "0": 0.99, "1": 0.9}, lock_in=0.9, above=0.8)
    assert s["seeds"] == [0, 1, 2] and s["scores"] == [0.99, 0.9, 0.5]
    assert s["mean"] == pytest.approx(0.7966666) and (s["min"], s["max"]) == (0.5, 0.99)
    assert (s["lock_in"], s["lock_in_above"], s["n"]) == (2, 2, 3)
    assert "lock_in_above" not in summarise({0: 0.85}, lock_in=0.9, above=None)


def test_stats_table_and_figure_show_the_source_beside_ours(
    bars_experiment, bars_evals, reference_file: Path, tmp_path: Path
) -> None:
    exp = {**bars_experiment, "lock_in_above": 0.8}
    stats = experiment_stats(
        "x", exp, bars_evals, "paper", "bars", reference=load_set(reference_file, "toy")
    )
    armed, plain = stats["arms"]["armed"], stats["arms"]["plain"]
    assert armed["reference"]["n"] == 3 and armed["reference"]["lock_in"] == 2
    assert plain["reference"]["lock_in_above"] == 1
    assert armed["lock_in_above"] == sum(s > 0.8 for s in armed["scores"])
    (c,) = stats["contrasts"]
    assert c["reference_diff"] == pytest.approx((0.99 + 0.97 + 0.5) / 3 - (0.2 + 0.85) / 2)
    tex = render(TEMPLATES / "bars.tex.j2", source="s.json", **stats)
    assert "paper [range]" in tex and "paper $\\Delta$" in tex
    assert f"${armed['reference']['mean']:.3f}$ {{\\scriptsize [0.500, 0.990]}}" in tex
    assert f"${c['reference_diff']:+.3f}$" in tex
    assert "owner/repo" in tex and "\\texttt{aaaaaaaa}" in tex
    assert "after the comma: seeds scoring $> 0.8$" in tex
    assert ", ".join(str(round(s, 3)) for s in armed["scores"]) in tex  # every seed of ours
    # without a reference the table has none of it
    bare = render(
        TEMPLATES / "bars.tex.j2",
        source="s.json",
        **experiment_stats("x", bars_experiment, bars_evals, "demo", "bars"),
    )
    assert "paper [range]" not in bare and "Paper:" not in bare and "after the comma" not in bare
    out = tmp_path / "fig.png"
    bars_with_seeds(stats, [out])
    assert out.stat().st_size > 1000


def test_the_table_with_a_reference_compiles(
    bars_experiment, bars_evals, reference_file: Path, compile_tex, tmp_path: Path
) -> None:
    stats = experiment_stats(
        "x", bars_experiment, bars_evals, "paper", "bars", reference=load_set(reference_file, "toy")
    )
    compile_tex(render(TEMPLATES / "bars.tex.j2", source="s.json", **stats), tmp_path, "ref")


def test_an_arm_on_its_own_task_gets_no_reference(
    bars_experiment, bars_evals, reference_file: Path
) -> None:
    """The set is the experiment's task's: an arm with a task block of its own (the demo's
    K = 8 arms) is shown without it, and so is any contrast it is in."""
    arms = {
        **bars_experiment["arms"],
        "plain": {"cell": "delta_rule", "conv": False, "task": {"pairs": 2}},
    }
    stats = experiment_stats(
        "x",
        {**bars_experiment, "arms": arms},
        bars_evals,
        "paper",
        "bars",
        reference=load_set(reference_file, "toy"),
    )
    assert "reference" in stats["arms"]["armed"] and "reference" not in stats["arms"]["plain"]
    assert "reference_diff" not in stats["contrasts"][0]
    tex = render(TEMPLATES / "bars.tex.j2", source="s.json", **stats)
    assert tex.index("texttt{armed}") < tex.index("texttt{plain}")  # the config's order


def test_an_arm_on_the_task_the_set_declares_for_it_gets_the_reference(
    bars_experiment, bars_evals, reference_file: Path
) -> None:
    """A set that records an arm's own task setting (``task_by_arm``: the paper's dense arms
    ask 4 queries) annotates that arm when its task block is exactly that, and not otherwise."""
    arms = {
        **bars_experiment["arms"],
        "plain": {"cell": "delta_rule", "conv": False, "task": {"pairs": 2}},
    }
    declared = {**load_set(reference_file, "toy"), "task_by_arm": {"plain": {"pairs": 2}}}
    stats = experiment_stats(
        "x", {**bars_experiment, "arms": arms}, bars_evals, "paper", "bars", reference=declared
    )
    assert "reference" in stats["arms"]["plain"] and "reference_diff" in stats["contrasts"][0]
    other = {**declared, "task_by_arm": {"plain": {"pairs": 3}}}
    stats = experiment_stats(
        "x", {**bars_experiment, "arms": arms}, bars_evals, "paper", "bars", reference=other
    )
    assert "reference" not in stats["arms"]["plain"]


def test_a_set_naming_run_arms_gives_each_grid_value_its_own_seeds(
    grid_experiment, grid_evals
) -> None:
    """A set keyed by run arm (``armed-pairs4``: the paper's S5 depths) annotates each grid
    value with its own seeds, and each contrast at that value with their difference; a
    value the set lacks gets none."""
    per_value = {
        **SET,
        "arms": {
            "armed-pairs2": {0: 1.0, 1: 0.9},
            "plain-pairs2": {0: 0.3, 1: 0.1},
            "armed-pairs4": {0: 0.5, 1: 0.6},
        },
    }
    stats = experiment_stats("g", grid_experiment, grid_evals, "paper", "grid", reference=per_value)
    arms = stats["arms"]
    assert arms["armed-pairs2"]["reference"]["mean"] == pytest.approx(0.95)
    assert arms["armed-pairs4"]["reference"]["mean"] == pytest.approx(0.55)
    assert "reference" not in arms["plain-pairs4"]
    by_value = {c["value"]: c for c in stats["contrasts"]}
    assert by_value[2]["reference_diff"] == pytest.approx(0.95 - 0.2)
    assert "reference_diff" not in by_value[4]


# ------------------------------------------------------------------ a bad reference file

_ROW = "      armed: {0: 0.99, 1: 0.97, 2: 0.5}\n"
_FILE = (
    "repository: owner/repo\nsets:\n  toy:\n    field: eval_accuracy\n    arms:\n"
    + _ROW
    + "      plain: {0: 0.2, 1: 0.85}\n    rebind:\n      armed: {0: 0.03, 1: 0.04}\n"
)


def _written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ref.yaml"
    path.write_text(text)
    return path


def test_a_seed_listed_twice_fails_naming_the_file_line_and_key(tmp_path: Path) -> None:
    # PyYAML kept the later 0.1 and moved the set's mean without a word
    path = _written(tmp_path, _FILE.replace(_ROW, "      armed: {0: 0.99, 1: 0.97, 0: 0.1}\n"))
    with pytest.raises(ReferenceFileError) as err:
        load_set(path, "toy")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path} line 6: key sets.toy.arms.armed.0 is set twice")


def test_a_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = _written(tmp_path, _FILE.replace(_ROW, "      armed: {0: 0.99, 1: [0.97}\n"))
    with pytest.raises(ReferenceFileError) as err:
        load_set(path, "toy")
    message = str(err.value)
    assert "\n" not in message and "<unicode string>" not in message
    assert message.startswith(f"{path} line 6, column ") and "not valid YAML" in message


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        ("{0: 0.9x, 1: 0.97}", "set toy, arm armed (arms), seed 0: '0.9x' is not a number"),
        (
            "{0: 0.99, 1: 1.5}",
            "set toy, arm armed (arms), seed 1: 1.5 is not an accuracy in [0, 1]",
        ),
        ("{0: 0.99, 1: .nan}", "set toy, arm armed (arms), seed 1: nan is not an accuracy"),
        ("{0: true}", "set toy, arm armed (arms), seed 0: True is not a number"),
        ("{0: null}", "set toy, arm armed (arms), seed 0: None is not a number"),
        ("{seed0: 0.9}", "set toy, arm armed (arms), seed 'seed0': a seed is a whole number"),
        ("{-1: 0.9}", "set toy, arm armed (arms), seed -1: a seed is a whole number >= 0"),
        ("0.9", "set toy, arm armed (arms): expected a mapping of seed -> score, got 0.9"),
    ],
)
def test_a_bad_score_fails_naming_the_file_set_arm_and_seed(
    tmp_path: Path, row: str, needle: str
) -> None:
    path = _written(tmp_path, _FILE.replace(_ROW, f"      armed: {row}\n"))
    with pytest.raises(ReferenceFileError) as err:
        load_set(path, "toy")
    assert "\n" not in str(err.value) and str(err.value).startswith(f"{path}: {needle}")


def test_the_rebinding_scores_are_checked_too(tmp_path: Path) -> None:
    path = _written(tmp_path, _FILE.replace("{0: 0.03, 1: 0.04}", "{0: 0.03, 1: 4%}"))
    with pytest.raises(ReferenceFileError, match=r"set toy, arm armed \(rebind\), seed 1: '4%'"):
        load_set(path, "toy")
    assert load_set(_written(tmp_path, _FILE), "toy")["rebind"] == {"armed": {0: 0.03, 1: 0.04}}


def test_the_papers_reference_file_is_valid() -> None:
    path = ROOT / "references" / "paper_code_results.yaml"
    assert check_reference(strict_yaml.load(path), str(path))["sets"]
