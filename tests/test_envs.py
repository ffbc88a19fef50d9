"""The conda environments of the rules: each lists every package its rules' scripts import,
pinned as requirements.lock pins it.

Which packages a rule needs is read two ways. Statically: the third-party imports (at any
depth, inside functions too) of every library module its script can reach, counting a
package that discovers its modules (`pkgutil`) as importing all of them; an import guarded
by ``except ImportError`` is optional. Dynamically: a fresh interpreter per environment
imports the modules its rules' scripts import while a meta-path finder refuses every
installed third-party package that is neither listed in the environment nor a dependency of
one listed (pip installs those), so a missing package fails the way it would in the env.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"


# ------------------------------------------------------------------ what the workflow says


def rules() -> dict[str, dict[str, Path | None]]:
    """rule name -> its `conda:` env file and `script:` file, from rules/*.smk."""
    found: dict[str, dict[str, Path | None]] = {}
    for smk in sorted((ROOT / "rules").glob("*.smk")):
        text = smk.read_text()
        for m in re.finditer(r"^rule (\w+):\n(.*?)(?=^\S|\Z)", text, flags=re.M | re.S):
            body = m.group(2)
            env = re.search(r"^\s+conda:\s*\n\s+\"([^\"]+)\"", body, flags=re.M)
            script = re.search(r"^\s+script:\s*\n\s+\"([^\"]+)\"", body, flags=re.M)
            found[m.group(1)] = {
                "env": (smk.parent / env.group(1)).resolve() if env else None,
                "script": (smk.parent / script.group(1)).resolve() if script else None,
            }
    return found


def env_packages(env: Path) -> dict[str, str]:
    """canonical pip name -> pinned version, from an env file's pip list."""
    doc = yaml.safe_load(env.read_text())
    pins: dict[str, str] = {}
    for dep in doc["dependencies"]:
        if isinstance(dep, dict):
            for line in dep.get("pip", []):
                req = Requirement(line)
                spec = str(req.specifier)
                assert spec.startswith("==") and "," not in spec, (
                    f"{env.name}: {line} is not pinned"
                )
                pins[canonicalize_name(req.name)] = spec[2:]
    return pins


def lock_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


SCRIPT_RULES = {name: r for name, r in rules().items() if r["script"] is not None}
ENVS = sorted({r["env"] for r in SCRIPT_RULES.values() if r["env"] is not None})


# ------------------------------------------------------------------ what the code imports


@cache
def import_names() -> dict[str, set[str]]:
    """Top-level import name -> the canonical names of the installed distributions giving it."""
    return {
        top: {canonicalize_name(d) for d in dists}
        for top, dists in metadata.packages_distributions().items()
    }


def _optional(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Inside a ``try`` whose handlers catch ImportError (an optional dependency)."""
    while node in parents:
        node, child = parents[node], node
        if isinstance(node, ast.Try) and child in node.body:
            for h in node.handlers:
                names = {getattr(n, "id", "") for n in ast.walk(h.type)} if h.type else {""}
                if names & {"ImportError", "ModuleNotFoundError", "Exception", ""}:
                    return True
    return False


def _module_file(name: str) -> Path | None:
    base = SRC.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _imports(path: Path, module: str) -> tuple[set[str], set[str]]:
    """(arbench modules, third-party top-level names) that a file imports, at any depth."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    ours: set[str] = set()
    theirs: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom) or _optional(node, parents):
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for t in targets:
            top = t.split(".")[0]
            if top == "arbench":
                if _module_file(t):
                    ours.add(t)
            elif top and top not in sys.stdlib_module_names and top != "_arbench_path":
                theirs.add(top)
    if "pkgutil.iter_modules" in path.read_text():  # discovers (imports) its package's modules
        folder = path.parent
        for f in folder.rglob("*.py"):
            rel = f.relative_to(SRC).with_suffix("")
            ours.add(".".join(p for p in rel.parts if p != "__init__"))
    return ours, theirs


def reachable(script: Path) -> dict[str, set[str]]:
    """Third-party top-level name -> the library modules (or the script) importing it, over
    every module the script can reach."""
    start_ours, start_theirs = _imports(script, "__main__")
    needs = {top: {script.name} for top in start_theirs}
    seen: set[str] = set()
    todo = list(start_ours)
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        parts = mod.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # parent packages run first
        ours, theirs = _imports(_module_file(mod), mod)
        todo += sorted(ours - seen)
        for top in theirs:
            needs.setdefault(top, set()).add(mod)
    return needs


def script_modules(script: Path) -> list[str]:
    """The modules a script imports by name (the library and third-party ones)."""
    mods = []
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.Import):
            mods += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            mods.append(node.module)
    return [m for m in mods if m.split(".")[0] not in (*sys.stdlib_module_names, "_arbench_path")]


# ------------------------------------------------------------------ the tests


def test_every_script_rule_names_an_env_file_that_exists() -> None:
    assert SCRIPT_RULES, "no rule with a script found under rules/"
    for name, r in SCRIPT_RULES.items():
        assert r["env"] is not None, f"rule {name}: no conda: environment"
        assert r["env"].exists(), f"rule {name}: {r['env']} does not exist"
        assert r["script"].exists(), f"rule {name}: {r['script']} does not exist"


@pytest.mark.parametrize("env", ENVS, ids=[e.name for e in ENVS])
def test_pins_equal_the_lock(env: Path) -> None:
    lock = lock_pins()
    for name, version in env_packages(env).items():
        assert name in lock, f"envs/{env.name}: {name} is not in requirements.lock"
        assert version == lock[name], (
            f"envs/{env.name}: {name}=={version}, requirements.lock has {lock[name]}"
        )


@pytest.mark.parametrize("rule", sorted(SCRIPT_RULES))
def test_the_env_lists_every_package_the_rule_imports(rule: str) -> None:
    env, script = SCRIPT_RULES[rule]["env"], SCRIPT_RULES[rule]["script"]
    listed = set(env_packages(env))
    missing = []
    for top, where in sorted(reachable(script).items()):
        dists = import_names().get(top, {canonicalize_name(top)})
        if not dists & listed:
            missing.append(f"{'/'.join(sorted(dists))} (import {top}: {', '.join(sorted(where))})")
    assert not missing, f"rule {rule} (envs/{env.name}) is missing " + "; ".join(missing)


def _requirement_closure(names: set[str]) -> set[str]:
    """The distributions pip installs for ``names``: them and their non-extra requirements."""
    done: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in done:
            continue
        done.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return done


BLOCKED_IMPORTS = """
import importlib, json, sys
sys.path.insert(0, {scripts!r})
ALLOWED, INSTALLED = set(json.loads({allowed!r})), set(json.loads({installed!r}))

class OnlyTheEnv:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in INSTALLED and top not in ALLOWED:
            raise ModuleNotFoundError(f"No module named {{top!r}} (not in the env)", name=top)
        return None

sys.meta_path.insert(0, OnlyTheEnv())
import _arbench_path
failed = {{}}
for rule, modules in json.loads({modules!r}).items():
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as err:
            failed.setdefault(rule, []).append(f"{{module}}: {{err}}")
print(json.dumps(failed))
"""


@pytest.mark.parametrize("env", ENVS, ids=[e.name for e in ENVS])
def test_the_rules_modules_import_with_only_the_envs_packages(env: Path) -> None:
    allowed_dists = _requirement_closure(set(env_packages(env)))
    names = import_names()
    installed = {top for top in names if top != "arbench" and top not in sys.stdlib_module_names}
    allowed = {top for top, dists in names.items() if dists & allowed_dists}
    modules = {
        rule: script_modules(r["script"]) for rule, r in SCRIPT_RULES.items() if r["env"] == env
    }
    code = BLOCKED_IMPORTS.format(
        scripts=str(ROOT / "scripts"),
        allowed=json.dumps(sorted(allowed)),
        installed=json.dumps(sorted(installed)),
        modules=json.dumps(modules),
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failed, "\n".join(
        f"rule {rule} (envs/{env.name}): {'; '.join(errs)}" for rule, errs in failed.items()
    )
