"""Every YAML file the project reads as input, read one way: strictly (`load`).

PyYAML's own loader keeps the later of two equal keys in a mapping without a word (a seed
listed twice in a reference set changes the published mean; a claim's ``source_value`` given
twice silently takes the second), reports a syntax error "in <unicode string>" over several
lines, and reads ``3e-3`` as a string (YAML 1.1). `load` reads through `StrictLoader`, which
reads YAML 1.2's floats as numbers, and fails in one line naming the file and the line: on a
key repeated within one mapping (with its key path and the line of the first), and on a
syntax error (with the column and what the parser expected).

The error raised is the caller's (``error``): the config's `ConfigError`, the claims file's
`ClaimError`, a reference file's `ReferenceFileError`; by default `StrictYAMLError`. This
module imports nothing of the project, so every job can read its YAML through it cheaply.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

# YAML 1.2's floats that YAML 1.1 (PyYAML) reads as strings: an exponent without a dot
# (3e-3, 1E+5) or with a dot but an unsigned exponent (1.0e5)
_FLOAT_12 = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


class StrictYAMLError(ValueError):
    """A YAML input problem, in one line naming the file and the line."""


class StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, reading YAML 1.2 floats such as ``3e-3`` as numbers. Use it
    through `load`, which also rejects a key repeated within one mapping."""


StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))


def _check_duplicates(
    node: yaml.Node, source: str, where: str, seen: set[int], error: Callable[[str], Exception]
) -> None:
    """Raise ``error`` on a key set twice in one mapping of the composed YAML ``node`` (merge
    keys ``<<`` aside: a key after a merge overrides the merged one on purpose)."""
    if id(node) in seen:  # an alias: checked where its anchor is
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first: dict[str, tuple[int, int]] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                _check_duplicates(value_node, source, where, seen, error)
                continue
            key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "<key>"
            here = f"{where}.{key}" if where else key
            line, column = key_node.start_mark.line + 1, key_node.start_mark.column + 1
            if key in first:
                was, was_column = first[key]
                on = str(was)
                if was == line:  # both in one flow mapping: the columns tell them apart
                    on = f"{was}, column {was_column}; again at column {column}"
                raise error(
                    f"{source} line {line}: key {here} is set twice (first on line {on}); a "
                    "key may appear once per mapping (the later one would silently replace "
                    "the earlier)"
                )
            first[key] = (line, column)
            _check_duplicates(value_node, source, here, seen, error)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check_duplicates(item, source, f"{where}[{i}]", seen, error)


def syntax_message(source: str, err: yaml.YAMLError) -> str:
    """PyYAML's error as one line naming ``source``, the line and column, what the parser
    found and what it was inside (``while parsing a flow sequence from line 3``)."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None)
    if mark is None or problem is None:  # not a marked error (a reader error): its own words
        text = " ".join(str(err).split()).replace('"<unicode string>"', source)
        return f"{source}: not valid YAML: {text}"
    where = f"{source} line {mark.line + 1}, column {mark.column + 1}"
    context, context_mark = getattr(err, "context", None), getattr(err, "context_mark", None)
    inside = ""
    if context:
        inside = f" ({context}" + (
            f" from line {context_mark.line + 1})" if context_mark is not None else ")"
        )
    return f"{where}: not valid YAML: {' '.join(problem.split())}{inside}"


def load(
    path: str | Path,
    error: Callable[[str], Exception] = StrictYAMLError,
    name: str | None = None,
) -> Any:
    """The YAML document in ``path``, read through `StrictLoader`; a repeated key or a syntax
    error raises ``error`` with one line naming ``name`` (default: the path) and the line."""
    source = str(path) if name is None else name
    loader = StrictLoader(Path(path).read_text())
    loader.name = source  # marks (and any message PyYAML builds) name the file
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_duplicates(node, source, "", set(), error)
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        raise error(syntax_message(source, e)) from None
    finally:
        loader.dispose()
