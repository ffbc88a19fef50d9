"""The learning-rate schedule: linear warmup, then cosine to the floor."""

from __future__ import annotations

import pytest

from arbench.train.schedule import lr_at


def test_schedule_shape() -> None:
    lrs = [lr_at(s, lr=1.0, warmup=10, total=100, min_ratio=0.1) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert max(lrs) == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:], strict=False))
    assert lrs[-1] == pytest.approx(0.1, abs=1e-3)
