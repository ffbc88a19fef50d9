"""The config's ``releases`` blocks: each checked against its release task's own schema and
checks (`check_release`), then merged into the task block of every experiment that names it
(`merge_releases`), so a release's data settings have one source.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema

from arbench.config.errors import ConfigError
from arbench.config.validation import schema_error


def check_release(name: str, block: dict[str, Any]) -> None:
    """A release block names a release task and fits that task's own schema."""
    from arbench.tasks import task_class

    where = f"releases.{name}"
    try:
        cls = task_class(block["task"])
    except KeyError as e:
        raise ConfigError(f"{where}.task: {e.args[0]}") from None
    if cls.release is None:
        raise ConfigError(f"{where}.task: {cls.name!r} has no release (its data is {cls.data!r})")
    schema_errors = list(jsonschema.Draft202012Validator(cls.release.schema).iter_errors(block))
    err = schema_error(schema_errors, where)
    if err:
        raise err
    try:
        cls.release.check(block)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{where}: {e}") from None


def merge_releases(cfg: dict[str, Any]) -> None:
    """Give every release task's block the settings it takes from its release, in place.

    The release block is the one source of a release's data settings (its params, the configs
    it holds); an experiment block only names it. Setting one of those keys in both places is
    an error, so the two can never disagree.
    """
    from arbench.tasks import task_class

    releases = cfg.get("releases", {})
    for name, exp in cfg["experiments"].items():
        task = exp["task"]
        where = f"experiments.{name}.task"
        try:
            cls = task_class(task["name"])
        except KeyError as e:
            raise ConfigError(f"{where}.name: {e.args[0]}") from None
        if cls.data != "release":
            continue
        release = task.get("release")
        if release not in releases:
            raise ConfigError(
                f"{where}.release: {release!r} is not a release; known: {sorted(releases)}"
            )
        if releases[release]["task"] != cls.name:
            raise ConfigError(
                f"{where}.release: {release!r} is a {releases[release]['task']!r} release"
            )
        for key in cls.release_keys:
            if key in task:
                raise ConfigError(
                    f"{where}.{key}: set it in releases.{release}.{key} (its one source)"
                )
            task[key] = copy.deepcopy(releases[release][key])
