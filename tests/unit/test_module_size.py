"""No module of planrun grows past 400 lines: a crowded module is split by what it does
(the style guide asks for about 300)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sandbox_runner"
MAX_LINES = 400


def test_every_module_stays_under_the_limit() -> None:
    long = {
        str(path.relative_to(PACKAGE)): count
        for path in PACKAGE.rglob("*.py")
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these modules (lines > {MAX_LINES}): {long}"
