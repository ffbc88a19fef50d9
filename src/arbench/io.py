"""Atomic file writes (a failed job never leaves a partial output behind), JSON reads, and
the sha256 of a file's bytes.

The temporary file is created with mode 0666 masked by the process umask (0644 under the usual
022), like any file `open` creates: `tempfile.mkstemp` would make every output 0600, unreadable
to the group that shares a results folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to a temp file beside ``path`` and rename it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _create_temp(path: Path) -> tuple[int, str]:
    """A new, exclusively created temp file beside ``path`` whose mode honours the umask."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def atomic_write_text(path: str | Path, text: str) -> None:
    """`atomic_write_bytes` of UTF-8 text."""
    atomic_write_bytes(path, text.encode())


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """`atomic_write_text` of indented, key-sorted JSON (stable bytes for the same object)."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def read_json(path: str | Path) -> Any:
    """The JSON document at ``path``."""
    with open(path) as f:
        return json.load(f)


def sha256_file(path: str | Path) -> str:
    """The sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
