"""tools/claims_diff.py reads the verdict column of rendered reports and lists each claim
whose verdict changed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from arbench.report import claims as C

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("claims_diff", ROOT / "tools" / "claims_diff.py")
claims_diff = importlib.util.module_from_spec(spec)
spec.loader.exec_module(claims_diff)


def _report(tmp_path: Path, name: str, mean: float) -> Path:
    doc = {
        "sources": ["the paper summary"],
        "claims": [
            {
                "id": "high",
                "claim": "c | with a pipe",
                "source": {"title": "the paper summary", "section": "1"},
                "source_value": 0.5,
                "experiment": "toy",
                "statistic": "arms/x/mean",
                "rule": "at_least",
            }
        ],
    }
    claims = C.parse_claims(doc)
    stats = {"arms": {"x": {"mean": mean, "n": 5}}}
    results = [C.evaluate_claim(c, stats, "test") for c in claims.claims]
    path = tmp_path / f"{name}.md"
    path.write_text(C.render_markdown(results, "test", claims=claims))
    return path


def test_a_changed_verdict_is_listed(tmp_path: Path, capsys) -> None:
    old, new = _report(tmp_path, "old", 0.9), _report(tmp_path, "new", 0.1)
    assert claims_diff.read_rows(old) == {"high": ("reproduced", "")}
    assert claims_diff.main([str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "1 of 1 claims changed verdict" in out and "high: reproduced -> not reproduced" in out
    claims_diff.main([str(old), str(old)])
    assert "0 of 1 claims changed verdict" in capsys.readouterr().out
