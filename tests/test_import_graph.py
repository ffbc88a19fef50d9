"""The library's import graph (`src/arbench`, every import statement: at the top, inside a
function, under ``TYPE_CHECKING``): no cycle between modules, and no package importing one
of a higher layer. `LAYERS` is where the layers are written down (docs/ARCHITECTURE.md
points here): a package may import its own modules and those of lower layers only."""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# lowest first: each line a layer, the packages (or top-level modules) of `arbench` in it
LAYERS: tuple[tuple[str, ...], ...] = (
    ("arbench", "io", "strict_yaml", "mismatch", "device", "cpu_memory", "batch", "stats"),
    ("layout_names", "experiment"),  # the layout names; the grammar and its naming rule
    ("references", "runtime", "kernels", "analysis", "settings"),
    ("cells",),
    ("models",),
    ("evaluate",),
    ("tasks",),
    ("train", "frontier_arms"),
    ("bench", "resources", "run"),
    ("config",),
    ("paper_release",),
    ("report",),
    ("plan",),
)
# the same inside a package, for the packages split along their seams: each line a layer of
# the package's modules, lowest first; a module may import modules of lower layers only
PACKAGE_LAYERS: dict[str, tuple[tuple[str, ...], ...]] = {
    "train": (
        ("hooks", "schedule", "adamw"),  # the hook interface, the lr schedule, the optimiser
        ("curriculum", "load_schedule", "spread"),  # the features, each a hook
        ("settings", "run_files"),  # the train block; a run's identity and files
        ("step",),  # one optimiser step
        ("loop",),  # the loop
    ),
}


def module_names(src: Path = SRC) -> dict[str, Path]:
    """Dotted name -> file of every module of the `arbench` package under ``src``."""
    out = {}
    for path in sorted((src / "arbench").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the `arbench` modules it imports (an imported name that is a module counts
    as that module; any other name as the module it comes from)."""

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                targets = [f"{source}.{a.name}" for a in node.names] or [source]
                targets = [t if t in modules else source for t in targets]
            for target in targets:
                if target.split(".")[0] == "arbench":
                    found = owner(target)
                    if found and found != name:
                        graph[name].add(found)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _unit(module: str) -> str:
    """The layered unit a module belongs to: its top-level package or module of `arbench`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def upward_imports(
    graph: Mapping[str, set[str]],
    layers: tuple[tuple[str, ...], ...] = LAYERS,
    unit_of: Callable[[str], str] = _unit,
) -> list[str]:
    """Each import of a unit (``unit_of`` a module) from a unit of the same or a higher layer
    (other than itself), as "a.b -> c.d (layer i imports layer j)"; a unit missing from
    ``layers`` is one too."""
    level = {unit: i for i, layer in enumerate(layers) for unit in layer}
    out = []
    for module in sorted(graph):
        unit = unit_of(module)
        if unit not in level:
            out.append(f"{module}: {unit} is in no layer")
            continue
        for target in sorted(graph[module]):
            other = unit_of(target)
            if other != unit and level.get(other, len(layers)) >= level[unit]:
                out.append(
                    f"{module} -> {target} (layer {level[unit]} imports "
                    f"layer {level.get(other, '?')})"
                )
    return out


def test_no_module_imports_itself_through_others() -> None:
    assert cycles(import_graph(module_names())) == []


def test_no_package_imports_one_of_its_layer_or_above() -> None:
    assert upward_imports(import_graph(module_names())) == []


def test_every_layered_unit_exists() -> None:
    units = {_unit(m) for m in module_names()}
    listed = [u for layer in LAYERS for u in layer]
    assert len(listed) == len(set(listed)), "a unit listed in two layers"
    assert set(listed) == units


def _inside(graph: Mapping[str, set[str]], package: str) -> dict[str, set[str]]:
    """The imports between the modules of ``package`` (the package itself left out)."""
    prefix = f"arbench.{package}."
    return {
        m: {t for t in targets if t.startswith(prefix)}
        for m, targets in graph.items()
        if m.startswith(prefix)
    }


@pytest.mark.parametrize("package", sorted(PACKAGE_LAYERS))
def test_no_module_of_a_split_package_imports_one_of_its_layer_or_above(package: str) -> None:
    inside = _inside(import_graph(module_names()), package)
    layers = PACKAGE_LAYERS[package]
    listed = [m for layer in layers for m in layer]
    assert len(listed) == len(set(listed)), "a module listed in two layers"
    assert set(listed) == {m.rpartition(".")[2] for m in inside}
    assert upward_imports(inside, layers, lambda m: m.rpartition(".")[2]) == []


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """A toy `arbench` with a cycle through a type-checking import and an upward import."""
    pkg = tmp_path / "arbench"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("from arbench.low.b import thing\n")
    (pkg / "low" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from arbench.low import a\n"
    )
    (pkg / "low" / "c.py").write_text("def f():\n    from ..high import g\n")
    (pkg / "high.py").write_text("from arbench.low import a\n")
    return tmp_path


def test_the_checks_find_a_hidden_cycle_and_an_upward_import(toy: Path) -> None:
    graph = import_graph(module_names(toy))
    assert graph["arbench.low.b"] == {"arbench.low.a"}  # the type-checking import counts
    assert graph["arbench.low.c"] == {"arbench.high"}  # a relative import inside a function
    assert cycles(graph) == [["arbench.low.a", "arbench.low.b"]]
    layers = (("arbench",), ("low",), ("high",))
    assert upward_imports(graph, layers) == [
        "arbench.low.c -> arbench.high (layer 1 imports layer 2)"
    ]
    assert upward_imports(graph, (("arbench",), ("low",))) == [
        "arbench.high: high is in no layer",
        "arbench.low.c -> arbench.high (layer 1 imports layer ?)",
    ]
