"""summary.md's table of tasks, the batch's numbers as people read them, the wall time of a
resumed batch, and `planrun batch status`."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from click.testing import CliRunner

from sandbox_runner.batch.task_table import (
    status_table,
    task_rows,
    time_text,
    tokens_text,
    usd_text,
)
from sandbox_runner.cli import cli
from tests.unit.test_batch import FakeWork, run_batch


@pytest.mark.parametrize(
    ("count", "expected"), [(0, "0"), (999, "999"), (1234, "1,234"), (1234567, "1,234,567")]
)
def test_tokens_have_thousands_separators(count: int, expected: str) -> None:
    assert tokens_text(count) == expected


@pytest.mark.parametrize(
    ("cost", "expected"),
    [
        (None, "unknown"),
        (0.0, "$0.00"),
        (0.001, "< $0.01"),
        (0.2803, "$0.28"),
        (1234.5, "$1,234.50"),
    ],
)
def test_costs_are_dollars_with_two_decimals(cost: float | None, expected: str) -> None:
    assert usd_text(cost) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(8.24, "8.2 s"), (185, "3 min 05 s"), (7800, "2 h 10 min"), (-1, "0.0 s")],
)
def test_durations_read_as_people_say_them(seconds: float, expected: str) -> None:
    assert time_text(seconds) == expected


def task_lines(summary_md: str) -> list[list[str]]:
    table = summary_md[summary_md.index("## Tasks") : summary_md.index("## Jobs")]
    rows = [line for line in table.splitlines() if line.startswith("| t")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def test_summary_md_has_one_row_per_task(tmp_path: Path, sample_repo: Path) -> None:
    run_batch(tmp_path, FakeWork())
    out = tmp_path / "out"
    rows = task_lines((out / "summary.md").read_text(encoding="utf-8"))
    assert [row[0] for row in rows] == ["t1", "t2"]
    for task, row in zip(("t1", "t2"), rows, strict=True):
        plans, agreement, recommended, report = row[1:5]
        # The synthesis is a job of its task, not one of its plans.
        assert plans == "2 of 2 valid"
        assert agreement == "3 of 3 files shared; same first file"
        # Two valid plans: the row links the recommended plan merged from them.
        link = re.fullmatch(rf"\[{task}\]\(([^)]+)\)", recommended)
        assert link is not None and unquote(link.group(1)) == f"tasks/{task}/recommended.md"
        assert (out / unquote(link.group(1))).is_file()
        href = re.fullmatch(r"\[report\.html\]\(([^)]+)\)", report)
        assert href is not None and (out / unquote(href.group(1))).is_file()
        assert re.fullmatch(r"[\d,]+", row[5]) and row[6].startswith(("$", "< $"))
    document = json.loads((out / "tasks/t1/report.json").read_text(encoding="utf-8"))
    assert document["synthesis"] == {"state": "ran", "note": "", "agent_override": None}
    assert document["recommended"]["plan_file"] == "recommended.md"
    assert document["recommended"]["sources"] == ["a", "b"]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    jobs = {job["key"]: job["synthesis"] for job in summary["jobs"]}
    assert jobs == {
        "t1/a": False, "t1/b": False, "t1/recommended": True,
        "t2/a": False, "t2/b": False, "t2/recommended": True,
    }  # fmt: skip
    # The task's tokens are its plans' and its synthesis's.
    t1 = [job["tokens"] for job in summary["jobs"] if job["task"] == "t1"]
    assert summary["tasks"][0]["tokens"] == sum(t1) == 45


def test_a_task_with_one_valid_plan_says_why_there_is_no_recommended_plan(
    tmp_path: Path, sample_repo: Path
) -> None:
    run_batch(tmp_path, FakeWork(failing={"b"}))
    rows = task_lines((tmp_path / "out/summary.md").read_text(encoding="utf-8"))
    assert [row[1] for row in rows] == ["1 of 2 valid", "1 of 2 valid"]
    assert rows[0][3] == "none: it needs at least 2 valid plans; 1 of 2 is valid"


def test_the_wall_time_adds_up_every_run(tmp_path: Path, sample_repo: Path) -> None:
    run_batch(tmp_path, FakeWork(failing={"b"}))
    summary = tmp_path / "out/summary.json"
    first = json.loads(summary.read_text(encoding="utf-8"))["totals"]
    assert first["wall_seconds_all_runs"] == first["wall_seconds"]
    run_batch(tmp_path, FakeWork(), retry_failed=True)
    second = json.loads(summary.read_text(encoding="utf-8"))["totals"]
    expected = first["wall_seconds_all_runs"] + second["wall_seconds"]
    assert second["wall_seconds_all_runs"] == pytest.approx(expected, abs=0.002)
    assert "over every run" in (tmp_path / "out/summary.md").read_text(encoding="utf-8")


def test_a_resumed_batch_checks_the_workspace_of_every_task_again(
    tmp_path: Path, sample_repo: Path
) -> None:
    run_batch(tmp_path, FakeWork())
    report = tmp_path / "out/tasks/t1/report.json"
    # As a run that was stopped before its check left it.
    stale = json.loads(report.read_text(encoding="utf-8"))
    report.write_text(json.dumps({**stale, "workspace_check": "none"}), encoding="utf-8")
    again = FakeWork()
    run_batch(tmp_path, again)
    assert again.runs == {}  # nothing ran, yet the report was checked and rewritten
    assert json.loads(report.read_text(encoding="utf-8"))["workspace_check"] == "full"


def test_batch_status_shows_the_table_of_tasks(tmp_path: Path, sample_repo: Path) -> None:
    run_batch(tmp_path, FakeWork(failing={"b"}))
    result = CliRunner().invoke(cli, ["batch", "status", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(line for line in lines if line.strip().startswith("Task"))
    assert re.split(r"\s{2,}", header.strip()) == [
        "Task",
        "Plans",
        "Agreement",
        "Recommended plan",
        "Report",
    ]
    row = next(line for line in lines if line.strip().startswith("t1 "))
    cells = re.split(r"\s{2,}", row.strip())
    assert cells[:2] == ["t1", "1 of 2 valid"]
    assert cells[-1] == "tasks/t1/report.html"
    assert any(line.startswith("Wall time: ") for line in lines)


def test_batch_status_shows_the_recommended_plan_of_each_task(
    tmp_path: Path, sample_repo: Path
) -> None:
    run_batch(tmp_path, FakeWork())
    result = CliRunner().invoke(cli, ["batch", "status", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.strip().startswith("t2 "))
    cells = re.split(r"\s{2,}", row.strip())
    assert cells[1] == "2 of 2 valid"
    assert cells[3:] == ["tasks/t2/recommended.md", "tasks/t2/report.html"]
    assert "Batch b: finished; complete 6" in result.output


def test_status_table_cells_are_one_clipped_line() -> None:
    task = {
        "task": "t\x1b[31m1\nnext",
        "plans": 2,
        "valid": 2,
        "finished": 1,
        "agreement": "",
        "recommended": None,
        "recommended_note": "x" * 200,
        "report": None,
    }
    header, row = status_table([task])
    assert header.startswith("Task")
    assert "\x1b" not in row and "\n" not in row
    assert "2 of 2 valid (1 not finished)" in row and "not yet" in row
    assert "…" in row and len(row) < 200


def long_named_task(name: str) -> dict[str, object]:
    return {
        "task": name,
        "plans": 3,
        "valid": 3,
        "finished": 3,
        "agreement": "3 of 4 files shared; same first file",
        "recommended": f"tasks/{name}/recommended.md",
        "recommended_note": "",
        "report": f"tasks/{name}/report.html",
    }


def test_status_table_narrows_its_path_columns_to_fit_the_terminal() -> None:
    tasks = [long_named_task("migrate-billing-to-ledger"), long_named_task("cache")]
    assert max(len(line) for line in status_table(tasks)) > 118  # it would wrap
    lines = status_table(tasks, width=118)
    assert max(len(line) for line in lines) <= 118
    cells = re.split(r"\s{2,}", lines[1])
    assert cells[0] == "migrate-billing-to-ledger" and cells[1] == "3 of 3 valid"
    assert cells[3].startswith("tasks/migrate-billing") and cells[3].endswith("…")
    assert cells[4].startswith("tasks/migrate-billing") and cells[4].endswith("…")
    assert re.split(r"\s{2,}", lines[0]) == [
        "Task",
        "Plans",
        "Agreement",
        "Recommended plan",
        "Report",
    ]
    # Never narrower than readable: a too narrow terminal wraps rather than lose the paths.
    narrow = status_table(tasks, width=40)
    recommended = re.split(r"\s{2,}", narrow[1])[3]
    assert len(recommended) == 24 and recommended.startswith("tasks/migrate-billing")


def test_batch_status_fits_the_terminal_and_its_json_keeps_every_character(
    tmp_path: Path, sample_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_batch(tmp_path, FakeWork())
    arguments = ["batch", "status", str(tmp_path / "out")]
    monkeypatch.setenv("COLUMNS", "90")
    lines = CliRunner().invoke(cli, arguments).output.splitlines()
    assert max(len(line) for line in lines) <= 90
    assert any(line.strip().startswith("t1 ") and "…" in line for line in lines)
    document = json.loads(CliRunner().invoke(cli, [*arguments, "--json"]).output)
    assert all("…" not in task["agreement"] for task in document["tasks"])
    monkeypatch.delenv("COLUMNS")

    def no_terminal(fd: int = 1) -> os.terminal_size:
        raise OSError("not a terminal")

    monkeypatch.setattr(os, "get_terminal_size", no_terminal)
    # In a pipe, nothing is cut: `planrun batch status DIR | grep PATH` finds whole paths.
    lines = CliRunner().invoke(cli, arguments).output.splitlines()
    assert not any("…" in line for line in lines)
    assert any(line.strip().startswith("t1 ") and "tasks/t1/report.html" in line for line in lines)


@pytest.mark.parametrize(
    ("first_choices", "expected"),
    [
        ({}, "no plan names files: nothing to compare"),
        ({"security": "src/app.py"}, "one plan names files: nothing to compare"),
    ],
)
def test_a_task_with_fewer_than_two_plans_naming_files_says_how_many(
    tmp_path: Path, first_choices: dict[str, str], expected: str
) -> None:
    # As a batch stopped by its budget leaves a task: its report, no valid plan.
    report = tmp_path / "tasks" / "t1" / "report.json"
    report.parent.mkdir(parents=True)
    report.write_text(json.dumps({"critical_files": {"first_choices": first_choices}}))
    job = {"task": "t1", "status": "budget", "tokens": 15, "cost_usd": 0.0001}
    [row] = task_rows(tmp_path, [{**job, "wall_seconds": 1.0}])
    assert row["agreement"] == expected
