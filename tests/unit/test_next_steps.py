"""What a run or a batch says when it ends: its cost, and the command to paste next."""

from __future__ import annotations

import shlex
from pathlib import Path

from sandbox_runner.cli.next_steps import batch_command, cost_line, export_hint


def test_a_reports_totals_read_as_dollars_and_tokens() -> None:
    totals = {"tokens": {"total": 82_680}, "cost_usd": 0.2131, "cost_complete": True}
    assert cost_line(totals) == "Cost: $0.21 estimated (82,680 tokens)"


def test_a_small_cost_keeps_its_digits_and_an_unpriced_model_is_said() -> None:
    assert cost_line({"tokens": 45, "cost_usd": 0.000315}) == "Cost: $0.0003 estimated (45 tokens)"
    partial = {"tokens": {"total": 10}, "cost_usd": 1.5, "cost_complete": False}
    assert cost_line(partial) == "Cost: $1.50 estimated (10 tokens, some models without a price)"
    assert cost_line({"tokens": 10, "cost_usd": None}) == "Cost: unknown at list price (10 tokens)"


def test_nothing_counted_says_nothing() -> None:
    assert cost_line(None) is None
    assert cost_line({"tokens": {"total": 0}, "cost_usd": 0.0}) is None


def test_the_batch_command_can_be_pasted_whatever_the_paths_hold(tmp_path: Path) -> None:
    file, out = tmp_path / "my tasks.yaml", tmp_path / "runs; rm -rf ~"
    command = batch_command(file, out, engine="ray", only="^api-")
    assert shlex.split(command) == [
        "planrun", "batch", str(file), "--out", str(out), "--engine", "ray", "--only", "^api-",
    ]  # fmt: skip
    assert batch_command(file, out) == shlex.join(
        ["planrun", "batch", str(file), "--out", str(out)]
    )


def test_a_finished_batch_names_the_export_of_its_first_task_with_a_valid_recommended_plan(
    tmp_path: Path,
) -> None:
    out = tmp_path / "q1; rm -rf ~"
    rows = [
        {"task": "none", "recommended": None, "recommended_note": "fewer than two valid plans"},
        {"task": "bad", "recommended": "tasks/bad/recommended.md", "recommended_note": "invalid"},
        {"task": "due-dates", "recommended": "tasks/due-dates/recommended.md"},
    ]
    hint = export_hint({"out_dir": str(out), "tasks": rows}, tmp_path / "batches")
    assert hint is not None and hint.startswith("Next: `")
    words = ["planrun", "plans", "export", str(out / "tasks" / "due-dates"), "--for", "claude"]
    assert shlex.split(hint.split("`")[1]) == words
    # A batch where `planrun plans` finds it is named as `planrun plans` names it.
    hint = export_hint({"out_dir": str(out), "tasks": rows}, tmp_path) or ""
    assert shlex.split(hint.split("`")[1])[3] == "batch:q1; rm -rf ~/due-dates"
    assert export_hint({"out_dir": str(out), "tasks": rows[:2]}, tmp_path) is None
