"""Whether a config value fits the type a setting declares: the hints of a cell's
constructor, a task's settings dataclass or an evaluator, read from the code itself, so an
option of the wrong type fails naming the key and the declared type, before any job runs.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any

from arbench.config.errors import ConfigError

# the fix for a number that arrives as a string: quoted, or a plain 3e-3 read by PyYAML's own
# loader (the workflow reads config files through StrictLoader, which makes it a number)
NUMBER_FIX = "write the number unquoted, e.g. 3.0e-3"


def numeric_string(value: Any) -> bool:
    """Whether ``value`` is a string that reads as a number (a number quoted, or 3e-3)."""
    if not isinstance(value, str):
        return False
    try:
        float(value.replace("_", ""))
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=1024)
def hints(obj: Any) -> dict[str, Any]:
    """The resolved type hints of a function or dataclass (empty when they cannot resolve);
    cached, as every arm of every scale asks again (callers never mutate the result)."""
    try:
        return typing.get_type_hints(obj)
    except Exception:  # a hint naming something unimportable here: no type check
        return {}


def hint_ok(value: Any, hint: Any) -> bool:
    """Whether ``value`` (as YAML gives it) fits the declared type ``hint``; int counts as
    float, bool never counts as a number, a YAML list fits list and tuple hints."""
    if hint is None or hint is type(None):
        return value is None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(hint_ok(value, a) for a in args)
    if origin is typing.Literal:
        return any(type(value) is type(a) and value == a for a in args)
    if origin in (list, tuple, set, frozenset):
        items = args[0] if args and (origin is not tuple or args[-1] is Ellipsis) else Any
        return isinstance(value, list) and all(hint_ok(v, items) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(hint, type) and origin is None:
        return isinstance(value, hint)
    return True  # Any, a TypeVar, a callable: nothing a config value can be checked against


def describe(hint: Any) -> str:
    """A declared type as the error shows it: int, float | None, 'sum' | 'concat'."""
    if hint is None or hint is type(None):
        return "null"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(describe(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if isinstance(hint, type) and origin is None:
        return hint.__name__
    return str(hint).replace("typing.", "")


def check_type(where: str, value: Any, hint: Any, owner: str, name: str = "") -> None:
    """``value`` at key path ``where`` fits the type ``hint`` that ``owner`` declares for its
    setting ``name`` (default: the path's last key); a None hint declares nothing to check."""
    if hint is None or hint_ok(value, hint):
        return
    fix = f" ({NUMBER_FIX})" if numeric_string(value) else ""
    name = name or where.rsplit(".", 1)[-1]
    raise ConfigError(
        f"{where}: {value!r} is not allowed; {owner} takes {name}: {describe(hint)}{fix}"
    )


@functools.lru_cache(maxsize=256)
def option_hints(cls: type) -> dict[str, Any]:
    """The declared types of a cell's constructor options along its MRO, a subclass's over
    its parent's (presets forward **options to a parent's `__init__`)."""
    out: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if "__init__" in vars(klass):
            out.update(hints(klass.__init__))
    out.pop("return", None)
    return out
