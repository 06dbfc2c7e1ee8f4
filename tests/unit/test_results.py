"""A plan result read back from its summary (a ledger line, a plan's front matter)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from sandbox_runner.plans.results import PlanResult, PlanStatus
from tests.unit.test_report import make_result, plan_text


def test_from_dict_gives_back_what_to_dict_summarised(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("x\n")
    text = plan_text(["main.py"])
    result = make_result("security", tmp_path, tmp_path, text=text, reason="why")
    result = replace(result, resumable=True, continued=True)
    summary = json.loads(json.dumps(result.to_dict()))
    assert PlanResult.from_dict(summary, plan_text=result.plan_text, check=result.check) == result


def test_from_dict_reads_edited_data_as_empty_or_failed() -> None:
    edited = {"status": "done", "turns": "7", "tokens": {"input": True}, "plan_path": 3}
    result = PlanResult.from_dict(edited)
    assert result.status is PlanStatus.FAILED and not result.valid
    assert (result.turns, result.usage.total, result.plan_path, result.agent) == (0, 0, None, "")
