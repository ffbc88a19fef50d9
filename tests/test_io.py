"""Atomic writes: outputs get the usual file mode (the umask's), and a failed write leaves the
previous file and no temporary behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from arbench.io import atomic_write_bytes, atomic_write_json, atomic_write_text, read_json


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask, expected", [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_outputs_honour_the_umask(tmp_path: Path, umask: int, expected: int) -> None:
    old = os.umask(umask)
    try:
        atomic_write_bytes(tmp_path / "model.pt", b"weights")
        atomic_write_text(tmp_path / "tables" / "factorial.tex", "\\begin{table}")
        atomic_write_json(tmp_path / "final.json", {"b": 1, "a": [2]})
        # what a plain open() makes under the same umask, for comparison
        (tmp_path / "plain.txt").write_text("x")
    finally:
        os.umask(old)
    for name in ("model.pt", "tables/factorial.tex", "final.json"):
        assert _mode(tmp_path / name) == expected == _mode(tmp_path / "plain.txt"), name
    assert read_json(tmp_path / "final.json") == {"a": [2], "b": 1}
    assert (tmp_path / "final.json").read_text() == '{\n  "a": [\n    2\n  ],\n  "b": 1\n}\n'


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    out = tmp_path / "eval.json"
    atomic_write_text(out, "old")
    with pytest.raises(TypeError):
        atomic_write_bytes(out, object())  # type: ignore[arg-type]
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.json"]
