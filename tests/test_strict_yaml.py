"""The one YAML reader (arbench.strict_yaml): a repeated key or a syntax error fails in one
line naming the file, line and key, through every reader of a YAML input, and nothing in the
project reads YAML another way."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from arbench import config, strict_yaml
from arbench.report.claims import ClaimError, load_claims
from arbench.report.paper import load_captions
from arbench.report.reference import ReferenceFileError, load_set

ROOT = Path(__file__).resolve().parents[1]


def test_a_repeated_key_names_the_file_its_line_and_its_key_path(tmp_path: Path) -> None:
    path = tmp_path / "in.yaml"
    path.write_text("a:\n  b: 1\n  c:\n    - {d: 1}\n  b: 2\n")
    with pytest.raises(strict_yaml.StrictYAMLError) as err:
        strict_yaml.load(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path} line 5: key a.b is set twice (first on line 2)")
    # in a flow mapping both are on one line: the columns tell them apart
    path.write_text("sets:\n  s:\n    arms:\n      x: {0: 0.9, 1: 0.8, 0: 0.1}\n")
    with pytest.raises(strict_yaml.StrictYAMLError) as err:
        strict_yaml.load(path)
    assert str(err.value).startswith(
        f"{path} line 4: key sets.s.arms.x.0 is set twice (first on line 4, column 11; "
        "again at column 27)"
    )


def test_a_syntax_error_names_the_file_and_line_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "in.yaml"
    path.write_text("a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(strict_yaml.StrictYAMLError) as err:
        strict_yaml.load(path)
    message = str(err.value)
    assert "\n" not in message and "<unicode string>" not in message
    assert re.match(rf"{re.escape(str(path))} line 3, column 2: not valid YAML: ", message)
    assert "(while parsing a flow sequence from line 2)" in message


def test_the_error_is_the_readers_own_and_the_name_its_choice(tmp_path: Path) -> None:
    path = tmp_path / "in.yaml"
    path.write_text("a: 1\na: 2\n")
    with pytest.raises(ClaimError, match=r"^in\.yaml line 2: key a is set twice"):
        strict_yaml.load(path, ClaimError, name="in.yaml")
    path.write_text("")
    assert strict_yaml.load(path) is None
    path.write_text("lr: 3e-3\nbase: &b {x: 1}\nover: {<<: *b, x: 2}\n")  # a merge overrides
    assert strict_yaml.load(path) == {"lr": 0.003, "base": {"x": 1}, "over": {"x": 2}}


def _reference(path: Path) -> Any:
    return load_set(path, "s")


# every reader of a YAML input, and the error it raises
READERS: list[tuple[str, Callable[[Path], Any], type[Exception]]] = [
    ("config", config.load_yaml, config.ConfigError),
    ("config.load", config.load, config.ConfigError),
    ("claims", load_claims, ClaimError),
    ("reference", _reference, ReferenceFileError),
    ("captions", load_captions, strict_yaml.StrictYAMLError),
]


@pytest.mark.parametrize(("what", "read", "error"), READERS, ids=[r[0] for r in READERS])
def test_every_yaml_input_fails_on_a_repeated_key(
    what: str, read: Callable[[Path], Any], error: type[Exception], tmp_path: Path
) -> None:
    path = tmp_path / f"{what}.yaml"
    path.write_text("sets:\n  s:\n    arms: {x: {0: 0.5}}\n    arms: {x: {0: 0.9}}\n")
    with pytest.raises(error) as err:
        read(path)
    message = str(err.value)
    assert "\n" not in message
    assert f"{path.name} line 4: key sets.s.arms is set twice (first on line 3)" in message


# YAML read another way, each with its reason: nothing else may call PyYAML's loaders
ALLOWED = {
    # a --config value re-read as one YAML scalar, with the strict loader
    "src/arbench/config/loading.py": "yaml.load(value, StrictLoader)",
    # a claim path's selector value ([k=v]): one scalar of a string, not a file
    "src/arbench/report/claims/paths.py": "yaml.safe_load(v.strip())",
}
_READS = re.compile(r"\byaml\.(?:safe_load|load|full_load|unsafe_load|load_all|safe_load_all)\b")


def test_no_yaml_input_is_read_around_the_strict_loader() -> None:
    files = [ROOT / "Snakefile"]
    for folder in ("src", "rules", "scripts", "tools"):
        files += sorted((ROOT / folder).rglob("*.py")) + sorted((ROOT / folder).rglob("*.smk"))
    found = []
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        for line in path.read_text().splitlines():
            allowed = ALLOWED.get(rel)
            if (_READS.search(line) or "CSafeLoader" in line) and not (allowed and allowed in line):
                found.append(f"{rel}: {line.strip()}")
    assert not found, f"YAML read around arbench.strict_yaml: {found}"
