"""The documentation names what exists: every repository path the README and the docs name
(in backticks, in code blocks or as a link) is there, every link's anchor is a heading, every
`arbench.` name resolves, every module and rule file is on the architecture map, and the
README stays short and opens with its two commands."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    "README.md",
    "docs/ARCHITECTURE.md",
    "docs/EXTENDING.md",
    "docs/RESULTS.md",
    "docs/CLUSTER.md",
    "docs/PROTOCOL.md",
    "docs/NOTEBOOK.md",
]
# what a repository path starts with: a top-level folder, or one of the top-level files
ROOT_DIRS = (
    "src",
    "rules",
    "scripts",
    "tests",
    "docs",
    "benchmarks",
    "tools",
    "profiles",
    "paper",
    "envs",
    "schemas",
)
ROOT_FILES = (
    "Snakefile",
    "Makefile",
    "config.yaml",
    "claims.yaml",
    "pyproject.toml",
    "requirements.lock",
)
# files docs/EXTENDING.md's worked examples tell the reader to create (they are examples, and
# tests/workflow/test_extending.py writes them into a copy of the repository)
EXAMPLE_FILES = {
    "src/arbench/cells/decayed_additive.py",
    "tests/cells/test_decayed_additive.py",
    "src/arbench/tasks/membership.py",
    "tests/tasks/test_membership.py",
}
# files of the paper's own repository (GitHub JIBSIL/dualgoose) that docs/PROTOCOL.md cites by
# path with their commit: not paths of this repository
PAPER_CODE_FILES = {
    "scripts/dg_c9_harden.py",
    "scripts/long_retrieval_probe.py",
    "scripts/mqar_probe.py",
    "scripts/state_tracking_probe.py",
}
# modules the docs describe that arrive with the same change as these docs (the run table,
# the config split, the report layouts, the training hooks): named here so that a failure
# says why, never skipped
ADDED_WITH_THE_DOCS = {
    "src/arbench/experiment.py",
    "src/arbench/config/__init__.py",
    "src/arbench/config/loading.py",
    "src/arbench/config/scales.py",
    "src/arbench/config/validation.py",
    "src/arbench/config/errors.py",
    "src/arbench/report/layouts.py",
    "src/arbench/train/hooks.py",
}
README_MAX_LINES = 180

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_INLINE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_TOKEN = re.compile(r"[\w./*{}<>,-]+")
_DOTTED = re.compile(r"\barbench(?:\.\w+)+")


def _text(doc: str) -> str:
    return (ROOT / doc).read_text()


def _code(text: str) -> list[str]:
    """The doc's code: every fenced block, and every inline code span outside them."""
    blocks = _FENCE.findall(text)
    return blocks + _INLINE.findall(_FENCE.sub("", text))


def _is_repo_path(token: str) -> bool:
    return token in ROOT_FILES or token.split("/")[0] in ROOT_DIRS and "/" in token


def named_paths(doc: str) -> set[str]:
    """Repository paths a doc names in code, relative to the repository root; patterns with
    ``{`` or ``<`` are skipped, and so is everything under results/ (the pipeline's output),
    which no path here starts with."""
    found = set()
    for code in _code(_text(doc)):
        for token in _TOKEN.findall(code):
            token = token.rstrip(".,")
            if "{" in token or "<" in token or not _is_repo_path(token):
                continue
            found.add(token)
    return found


def links(doc: str) -> list[tuple[str, str]]:
    """(file, anchor) of every link to a file of the repository, the file relative to the
    repository root ('' for an anchor into the doc itself)."""
    out = []
    for target in _LINK.findall(_FENCE.sub("", _text(doc))):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        rel = (ROOT / doc).parent / file if file else ROOT / doc
        out.append((rel.resolve().relative_to(ROOT).as_posix(), anchor))
    return out


def slugs(doc: str) -> set[str]:
    """The anchors GitHub gives a markdown file's headings."""
    heads = re.findall(r"^#{1,6} +(.+?) *$", _FENCE.sub("", _text(doc)), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


def _exists(path: str) -> bool:
    if "*" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).exists()


@pytest.mark.parametrize("doc", DOCS)
def test_every_named_path_exists(doc: str) -> None:
    named = named_paths(doc) - EXAMPLE_FILES - PAPER_CODE_FILES
    missing = sorted(p for p in named if not _exists(p))
    added = [p for p in missing if p in ADDED_WITH_THE_DOCS]
    assert not missing, f"{doc} names paths that do not exist: {missing}" + (
        f" ({added}: modules that arrive with these docs)" if added else ""
    )


@pytest.mark.parametrize("doc", DOCS)
def test_every_link_leads_somewhere(doc: str) -> None:
    for file, anchor in links(doc):
        assert (ROOT / file).exists(), f"{doc}: link to {file}, which does not exist"
        if anchor and file.endswith(".md"):
            assert anchor in slugs(file), f"{doc}: link to {file}#{anchor}: no such heading"


@pytest.mark.parametrize("doc", DOCS)
def test_every_arbench_name_resolves(doc: str) -> None:
    """`arbench.x.y` in code is an importable module, or an attribute of one."""
    for code in _code(_text(doc)):
        for name in sorted(set(_DOTTED.findall(code))):
            parts = name.split(".")
            for cut in range(len(parts), 0, -1):
                try:
                    obj = importlib.import_module(".".join(parts[:cut]))
                except ImportError:
                    continue
                for attr in parts[cut:]:
                    assert hasattr(obj, attr), f"{doc}: {name}: no {attr!r} in {obj!r}"
                    obj = getattr(obj, attr)
                break
            else:
                raise AssertionError(f"{doc}: {name} is not importable")


def test_the_architecture_map_names_every_module_and_rule_file() -> None:
    text = _text("docs/ARCHITECTURE.md")
    modules = [p for p in (ROOT / "src/arbench").rglob("*.py") if p.name != "__init__.py"]
    files = modules + sorted((ROOT / "rules").glob("*.smk"))
    absent = sorted(
        p.relative_to(ROOT).as_posix()
        for p in files
        if not re.search(rf"(?<![\w.]){re.escape(p.name)}\b", text)
    )
    assert not absent, f"docs/ARCHITECTURE.md does not name {absent}"


def test_every_file_on_the_architecture_map_exists() -> None:
    """The map (the first code block of docs/ARCHITECTURE.md) names files by their base name
    under their folder; each one is a file of the repository."""
    tree = _FENCE.findall(_text("docs/ARCHITECTURE.md"))[0]
    names = set(re.findall(r"(?<![\w./-])(\w+\.(?:py|smk|j2|yaml))\b", tree))
    have = {p.name for p in ROOT.rglob("*") if ".venv" not in p.parts and ".git" not in p.parts}
    missing = sorted(names - have)
    added = [m for m in missing if any(p.endswith("/" + m) for p in ADDED_WITH_THE_DOCS)]
    assert not missing, f"the map names files that do not exist: {missing}" + (
        f" ({added}: modules that arrive with these docs)" if added else ""
    )


# classes the docs name members of as `Class.member`
CLASSES = {
    "Plan": "arbench.plan",
    "RunTable": "arbench.experiment",
    "Run": "arbench.experiment",
    "Release": "arbench.tasks.base",
    "Task": "arbench.tasks.base",
    "SequenceMixer": "arbench.cells.base",
    "Layout": "arbench.report.layouts",
}


def _has_member(cls: type, name: str) -> bool:
    annotated = {k for klass in cls.__mro__ for k in getattr(klass, "__annotations__", {})}
    fields = getattr(cls, "__dataclass_fields__", {})
    return hasattr(cls, name) or name in annotated or name in fields


@pytest.mark.parametrize("doc", DOCS)
def test_every_named_class_member_exists(doc: str) -> None:
    pattern = re.compile(rf"(?<![\w.])({'|'.join(CLASSES)})\.(\w+)")
    for code in _code(_text(doc)):
        for cls_name, member in pattern.findall(code):
            cls = getattr(importlib.import_module(CLASSES[cls_name]), cls_name)
            assert _has_member(cls, member), f"{doc}: {cls_name}.{member} does not exist"


def test_the_readme_opens_with_the_two_commands_and_stays_short() -> None:
    lines = _text("README.md").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    body = [line for line in lines[1:] if line.strip()]
    assert lines[0].startswith("# ") and body[0].startswith("```") and body[3] == "```"
    commands = [line.split("#")[0].strip() for line in body[1:3]]
    assert commands == ["make demo", "make test"]


def test_every_study_and_experiment_is_catalogued() -> None:
    cfg = yaml.safe_load(_text("config.yaml"))
    readme, results = _text("README.md"), _text("docs/RESULTS.md")
    for study in cfg.get("studies") or {}:
        assert f"(docs/RESULTS.md#{study})" in readme, f"README.md has no row for {study}"
        assert study in slugs("docs/RESULTS.md"), f"docs/RESULTS.md has no section {study}"
    for name in cfg["experiments"]:
        assert f"`{name}`" in results, f"docs/RESULTS.md does not describe {name}"
