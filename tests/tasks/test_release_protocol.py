"""The `Release` protocol in `arbench.tasks.base` is the one statement of the release contract:
it names every member the workflow and the config call, and `PasskeySwarRelease` provides
each of them with the protocol's parameters."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from arbench.tasks.base import Release
from arbench.tasks.passkey_swar.release import PasskeySwarRelease
from arbench.tasks.passkey_swar.task import PasskeySwarTask

ROOT = Path(__file__).resolve().parents[2]

# the code that drives a release: the plan, the run layer, the config checks, the glue scripts
CALLERS = [
    ROOT / "src/arbench/plan.py",
    ROOT / "src/arbench/run.py",
    *sorted((ROOT / "src/arbench").glob("config*.py")),
    *sorted((ROOT / "src/arbench/config").glob("*.py")),
    *sorted((ROOT / "scripts").glob("release_*.py")),
]
# how those files reach a release object: a `writer` or `release` variable, the plan's and the
# run layer's `_release(...)` (the plan's returns (release, settings)), and the plan's
# `_release_layout("<attribute>")`
ACCESS = [
    re.compile(r"\bwriter\.(\w+)"),
    re.compile(r"\brelease\.(\w+)"),
    re.compile(r"\b_release\([^()]*\)(?:\[0\])?\.(\w+)"),
    re.compile(r"getattr\(self\._release\([^()]*\)\[0\], (\w+)\)"),
    re.compile(r"_release_layout\(\"(\w+)\"\)"),
]


def protocol_members() -> dict[str, str]:
    """Every member `Release` declares: name -> "attribute" or "method"."""
    members = {name: "attribute" for name in Release.__annotations__}
    for name, value in vars(Release).items():
        if inspect.isfunction(value) and not name.startswith("_"):
            members[name] = "method"
    return members


def used_members() -> dict[str, set[str]]:
    """Every member of a release object the callers use: name -> the files using it."""
    used: dict[str, set[str]] = {}
    for path in CALLERS:
        text = path.read_text()
        for pattern in ACCESS:
            for name in pattern.findall(text):
                if name != "attr":  # the getattr pattern's variable, resolved by the last one
                    used.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    return used


def test_the_protocol_names_every_member_its_callers_use() -> None:
    used = used_members()
    # the scan finds the plan's, the run layer's and the config's uses (a guard on the regexes)
    assert {"splits", "write_split", "validate", "schema", "check", "split_files"} <= set(used)
    missing = {
        name: sorted(files) for name, files in used.items() if name not in protocol_members()
    }
    assert not missing, f"callers use members the Release protocol does not declare: {missing}"


def test_every_member_is_typed_and_documented() -> None:
    source = inspect.getsource(Release)
    for name, kind in protocol_members().items():
        if kind == "method":
            method = vars(Release)[name]
            assert method.__doc__ and "\n" not in method.__doc__.strip(), name
            hints = inspect.signature(method)
            assert hints.return_annotation is not inspect.Signature.empty, name
            for param in list(hints.parameters.values())[1:]:
                assert param.annotation is not inspect.Parameter.empty, (name, param.name)
        else:  # an attribute's docstring is the string literal right after its annotation
            assert re.search(rf"\n    {name}: [^\n]+\n    \"\"\"", source), name


def test_passkey_swar_release_provides_every_member() -> None:
    release = PasskeySwarTask.release
    assert isinstance(release, PasskeySwarRelease)
    assert isinstance(release, Release)  # runtime_checkable: every member is present
    for name, kind in protocol_members().items():
        assert hasattr(release, name), name
        value = getattr(release, name)
        if kind == "attribute":
            assert not callable(value), name
            continue
        assert callable(value), name
        want = list(inspect.signature(vars(Release)[name]).parameters)[1:]
        have = list(inspect.signature(value).parameters)
        assert have == want, f"{name}: parameters {have}, the protocol's {want}"
    assert isinstance(release.split_files, tuple) and isinstance(release.index_files, tuple)
    assert isinstance(release.schema, dict)


def test_an_object_missing_a_member_is_not_a_release() -> None:
    class Partial:
        schema: dict = {}
        split_files = ()
        index_files = ()

        def splits(self, settings):
            return []

    assert not isinstance(Partial(), Release)
