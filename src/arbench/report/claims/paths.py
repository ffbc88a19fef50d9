"""Statistic paths: how a claim names a value inside a stats JSON, and why a path found
nothing (a reason of this scale's plan, or a wrong path).

Paths are ``/``-separated keys (``contrasts[a=delta_conv,b=delta]/diff``,
``arms/delta-pairs32/mean``, ``independent/raw[-1][0]``). A segment may carry selectors:
``[i]`` indexes a list, ``[*]`` (or a bare ``*`` segment) takes every element of a list or
value of a mapping, and ``[k=v,...]`` takes every element (or mapping value) whose fields
equal those values (YAML-parsed: ``value=32`` matches 32, ``value=null`` None). A path that
fans out yields several values; each `Found` keeps the mappings it went through, so a rule
can read the seeds, the test and the flags of the arm or contrast behind a value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

SEGMENT = re.compile(r"^([^\[\]]*)((?:\[[^\[\]]*\])*)$")
SELECTOR = re.compile(r"\[([^\[\]]*)\]")


@dataclass(frozen=True)
class Step:
    """One step of a statistic path: ``key`` (a mapping key or list index), ``all`` (every
    element), or ``match`` (every element whose fields equal ``fields``)."""

    kind: str
    key: str | int | None = None
    fields: tuple[tuple[str, Any], ...] = ()
    text: str = ""


def parse_path(text: str) -> list[Step]:
    """The steps of a statistic path (see the module docstring); ValueError when malformed."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty path")
    steps: list[Step] = []
    for segment in text.split("/"):
        m = SEGMENT.match(segment)
        if not m or (not m.group(1) and not m.group(2)):
            raise ValueError(f"malformed segment {segment!r} in {text!r}")
        name, selectors = m.group(1), m.group(2)
        if name == "*":
            steps.append(Step("all", text=segment))
        elif name:
            steps.append(Step("key", key=name, text=name))
        for sel in SELECTOR.findall(selectors):
            sel = sel.strip()
            if sel == "*":
                steps.append(Step("all", text=f"[{sel}]"))
            elif re.fullmatch(r"-?\d+", sel):
                steps.append(Step("key", key=int(sel), text=f"[{sel}]"))
            else:
                pairs = []
                for part in sel.split(","):
                    k, eq, v = part.partition("=")
                    if not eq or not k.strip():
                        raise ValueError(f"selector [{sel}] in {text!r}: expected k=v,...")
                    pairs.append((k.strip(), yaml.safe_load(v.strip()) if v.strip() else ""))
                steps.append(Step("match", fields=tuple(pairs), text=f"[{sel}]"))
    return steps


class Missing(LookupError):
    """A path step that found nothing: the step and the node it was applied to."""

    def __init__(self, step: Step, node: Any) -> None:
        super().__init__(step.text)
        self.step = step
        self.node = node


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
    return a == b or (a is not None and b is not None and str(a) == str(b))


def _children(node: Any) -> list[Any]:
    if isinstance(node, Mapping):
        return list(node.values())
    if isinstance(node, list):
        return list(node)
    return []


@dataclass
class Found:
    """One value a path reached, with the mappings it went through (for its n)."""

    value: Any
    trail: list[Mapping[str, Any]]


def resolve(stats: Any, text: str) -> tuple[list[Found], bool]:
    """Every value ``text`` reaches in ``stats`` and whether the path fans out; `Missing`
    when a step finds nothing."""
    frontier = [Found(stats, [])]
    fans = False
    for step in parse_path(text):
        nxt: list[Found] = []
        for f in frontier:
            node, trail = f.value, f.trail + ([f.value] if isinstance(f.value, Mapping) else [])
            if step.kind == "key":
                if isinstance(node, Mapping) and step.key in node:
                    nxt.append(Found(node[step.key], trail))
                elif (
                    isinstance(node, list)
                    and isinstance(step.key, int)
                    and -len(node) <= step.key < len(node)
                ):
                    nxt.append(Found(node[step.key], trail))
                else:
                    raise Missing(step, node)
            else:
                fans = True
                kids = _children(node)
                if step.kind == "match":
                    kids = [
                        k
                        for k in kids
                        if isinstance(k, Mapping)
                        and all(name in k and _equal(k[name], v) for name, v in step.fields)
                    ]
                if not kids:
                    raise Missing(step, node)
                nxt += [Found(k, trail) for k in kids]
        frontier = nxt
    return frontier, fans


def n_of(found: Found) -> str | None:
    """The sample size of a value: ``n_a vs n_b`` or ``n`` of the innermost mapping on its
    path that has them (an arm's seeds, a contrast's two arms, a sweep cell's seeds)."""
    for node in reversed(found.trail + ([found.value] if isinstance(found.value, dict) else [])):
        if isinstance(node.get("n_a"), int) and isinstance(node.get("n_b"), int):
            return f"{node['n_a']} vs {node['n_b']}"
        if isinstance(node.get("n"), int) and not isinstance(node.get("n"), bool):
            return str(node["n"])
    return None


# ------------------------------------------------------------------ scale reasons


def _grid_labels(stats: Mapping[str, Any]) -> tuple[str, list[Any], list[str]] | None:
    grid = stats.get("grid")
    if not isinstance(grid, Mapping) or "values" not in grid:
        return None
    return grid.get("leaf", ""), list(grid["values"]), [str(v) for v in grid.get("labels", [])]


def _grid_label_of(
    stats: Mapping[str, Any], run_arm: str, values: list[Any], labels: list[str]
) -> str | None:
    """The grid value's label a run arm's name carries, as the stats' own run arms name
    theirs: each summary's ``arm`` and ``value`` fields give the text its name puts between
    the arm and the value's label (``-pairs``), and ``run_arm`` split at its last such text
    gives the label (``delta-pairs64``: ``64``), so no pattern here re-spells the naming
    rule (`arbench.experiment.run_arm_name`). None: no summary has a grid value, or
    ``run_arm`` has no summary's form."""
    arms = stats.get("arms")
    for name, entry in (arms if isinstance(arms, Mapping) else {}).items():
        if not isinstance(entry, Mapping) or not isinstance(entry.get("arm"), str):
            continue
        arm, value = entry["arm"], entry.get("value")
        at = next((i for i, v in enumerate(values) if value is not None and _equal(v, value)), None)
        if at is None or at >= len(labels):
            continue
        between = name[len(arm) : len(name) - len(labels[at])]
        if not between or name != f"{arm}{between}{labels[at]}":
            continue
        head, found, tail = run_arm.rpartition(between)
        if found and head and tail:
            return tail
    return None


def scale_reason(stats: Mapping[str, Any], missing: Missing) -> str | None:
    """Why a path found nothing, when the reason is this scale's plan: an arm or contrast
    the stats list as skipped, a grid value not in this scale's grid, or an evaluation
    length this scale does not evaluate. None: the path itself is wrong."""
    step = missing.step
    skipped = stats.get("skipped") or {}
    skipped_arms: Mapping[str, str] = skipped.get("arms") or {}
    names: list[str] = []
    if step.kind == "key" and isinstance(step.key, str):
        names.append(step.key)
    names += [str(v) for _, v in step.fields]
    for arm, why in skipped_arms.items():
        if any(n == arm or n.startswith(f"{arm}-") for n in names):
            return f"arm {arm} not run: {why}"
    if step.kind == "match":
        fields = dict(step.fields)
        entries = skipped.get("contrasts") or []
        if "value" not in fields:  # a path over every value (a tuned best): its own entry first
            entries = sorted(entries, key=lambda c: "value" in c)
        for c in entries:
            keys = ("a", "b", "value") if "value" in c else ("a", "b")
            if all(_equal(c.get(k), v) for k, v in fields.items() if k in keys):
                if fields.keys() & {"a", "b"}:
                    at = f" at {c['value']}" if "value" in c else ""
                    why = c.get("why", "arm skipped")
                    return f"contrast {c.get('a')} - {c.get('b')}{at} not run ({why})"
    grid = _grid_labels(stats)
    if grid is not None:
        leaf, values, labels = grid
        for k, v in step.fields:
            if k in ("value", "value_a", "value_b") and not any(_equal(v, g) for g in values):
                return f"{leaf} = {v} not in this scale's grid ({', '.join(labels)})"
        if step.kind == "key" and isinstance(step.key, str):
            label = _grid_label_of(stats, step.key, values, labels)
            if label is not None and label not in labels:
                return f"{leaf} = {label} not in this scale's grid ({', '.join(labels)})"
    if step.kind == "key" and isinstance(step.key, str) and re.fullmatch(r"n\d+", step.key):
        for block in stats.values():
            if isinstance(block, Mapping) and isinstance(block.get("configs"), list):
                if step.key not in block["configs"]:
                    return f"{step.key} not evaluated at this scale"
                return f"{step.key} not evaluated for this arm (beyond its evaluation limit)"
    return None


def flag(found: Found, key: str) -> Any:
    """``key`` of the innermost mapping on a value's path that has it (None: none has)."""
    for node in reversed(found.trail):
        if key in node:
            return node[key]
    return None


def seeds_of(found: Found) -> int | None:
    """The seeds behind a value: the smaller of a contrast's n_a and n_b, or an arm's n, of
    the innermost mapping on its path that has them (None: not a per-seed statistic)."""
    for node in reversed(found.trail + ([found.value] if isinstance(found.value, dict) else [])):
        if isinstance(node.get("n_a"), int) and isinstance(node.get("n_b"), int):
            return min(node["n_a"], node["n_b"])
        if isinstance(node.get("n"), int) and not isinstance(node.get("n"), bool):
            return node["n"]
    return None


def tested_node(found: Found) -> Mapping[str, Any] | None:
    """The mapping of the test behind a p on this path: the innermost with n_a and n_b (a
    contrast, or its lock-in block)."""
    for node in reversed(found.trail):
        if isinstance(node.get("n_a"), int) and isinstance(node.get("n_b"), int):
            return node
    return None
