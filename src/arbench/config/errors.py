"""The one error a config problem raises."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config problem, in one line naming the key path, the value and what is allowed."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))
