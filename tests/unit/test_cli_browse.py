"""`planrun plans` and the progress display, without Docker."""

from __future__ import annotations

import io
import json
from pathlib import Path

from click.testing import CliRunner

from sandbox_runner.agents.results import AgentEvent
from sandbox_runner.cli import cli
from sandbox_runner.cli.progress import Progress, wants_live_display


def make_run(home: Path, name: str, started: str, status: str = "ok") -> Path:
    run = home / "plans" / name
    run.mkdir(parents=True)
    report = {
        "run": name,
        "started_at": started,
        "status": status,
        "exit_code": 0,
        "requirements": "Add a flag\nwith details",
        "plans": [{"perspective": "simplicity", "label": "simplicity"}],
    }
    (run / "report.json").write_text(json.dumps(report))
    (run / "report.md").write_text(f"# Plan report: {name}\n")
    (run / "simplicity.md").write_text("# The simple plan\n")
    return run


def test_plans_list_newest_first(planrun_home: Path) -> None:
    make_run(planrun_home, "old-oak", "2026-11-01T10:00:00+00:00")
    make_run(planrun_home, "new-fern", "2026-11-20T10:00:00+00:00", status="plan_failed")
    (planrun_home / "plans" / "cut-short").mkdir()
    result = CliRunner().invoke(cli, ["plans", "list"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert (
        lines[0].startswith("new-fern") and "plan_failed" in lines[0] and "[simplicity]" in lines[0]
    )
    assert lines[1].startswith("old-oak") and "Add a flag" in lines[1]
    assert "cut-short" in lines[2] and "no report" in lines[2]


def test_plans_show_report_and_plan(planrun_home: Path) -> None:
    make_run(planrun_home, "old-oak", "2026-11-01T10:00:00+00:00")
    runner = CliRunner()
    assert runner.invoke(cli, ["plans", "show", "old-oak"]).output == "# Plan report: old-oak\n"
    assert (
        runner.invoke(cli, ["plans", "show", "old-oak", "simplicity"]).output
        == "# The simple plan\n"
    )


def test_plans_show_unknown_names_say_what_exists(planrun_home: Path) -> None:
    make_run(planrun_home, "old-oak", "2026-11-01T10:00:00+00:00")
    runner = CliRunner()
    missing_run = runner.invoke(cli, ["plans", "show", "nope"])
    assert missing_run.exit_code == 2 and "old-oak" in missing_run.output
    missing_plan = runner.invoke(cli, ["plans", "show", "old-oak", "speed"])
    assert missing_plan.exit_code == 2 and "simplicity" in missing_plan.output
    traversal = runner.invoke(cli, ["plans", "show", "../plans"])
    assert traversal.exit_code == 2


def test_plans_show_refuses_a_symlinked_plan(planrun_home: Path, tmp_path: Path) -> None:
    run = make_run(planrun_home, "old-oak", "2026-11-01T10:00:00+00:00")
    secret = tmp_path / "secret"
    secret.write_text("do not show")
    (run / "evil.md").symlink_to(secret)
    result = CliRunner().invoke(cli, ["plans", "show", "old-oak", "evil"])
    assert result.exit_code == 2
    assert "do not show" not in result.output


def event(kind: str, label: str = "simplicity", **fields: object) -> AgentEvent:
    values: dict[str, object] = {
        "kind": kind, "label": label, "turn": 2, "tool": None, "detail": "",
        "tool_calls": 3, "tokens": 1200, "elapsed": 1.5,
    }  # fmt: skip
    values.update(fields)
    return AgentEvent(**values)  # type: ignore[arg-type]


def test_plain_progress_logs_tool_calls_and_endings() -> None:
    stream = io.StringIO()
    progress = Progress(["simplicity"], live=False, stream=stream)
    with progress:
        progress(event("turn_started"))
        progress(event("tool_call", tool="Read", detail="src/app.py"))
        progress(event("finished", detail=""))
        progress(event("failed", label="speed", detail="sandbox died: OOM-killed"))
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[simplicity] turn 2 Read src/app.py"
    assert lines[1].startswith("[simplicity] finished (3 tool calls, 1200 tokens")
    assert lines[2].startswith("[speed] FAILED: sandbox died: OOM-killed")


def test_live_table_shows_one_row_per_subagent() -> None:
    progress = Progress(["simplicity", "performance"], live=False, stream=io.StringIO())
    progress(event("tool_call", tool="Grep", detail="def main"))
    table = progress._table()
    assert table.row_count == 2


def test_no_live_display_in_a_pipe() -> None:
    assert not wants_live_display(io.StringIO(), json_output=False)


def test_model_text_cannot_inject_markup_or_terminal_escapes() -> None:
    from rich.console import Console

    stream = io.StringIO()
    progress = Progress(["simplicity"], live=False, stream=stream)
    progress(
        event("tool_call", tool="Bash", detail="grep '[/]' x \x1b]8;;https://evil\x07\n::error::x")
    )
    logged = stream.getvalue()
    assert "\x1b" not in logged and "\x07" not in logged
    assert logged.count("\n") == 1
    rendered = io.StringIO()
    Console(file=rendered, width=200).print(progress._table())
    assert "[/]" in rendered.getvalue()


def test_progress_says_what_it_waits_for_and_labels_retries() -> None:
    """Issue 10 item 4: a hung API was silent, and retry lines had no perspective label."""
    from rich.console import Console

    stream = io.StringIO()
    progress = Progress(["simplicity"], live=False, stream=stream)
    retry = "model API: 529 overloaded_error: Overloaded; retrying in 5.0 s (attempt 2 of 7)"
    progress(event("model_retry", detail=retry))
    progress(event("waiting", detail="waiting for the model, 42 s, attempt 2 of 7"))
    assert stream.getvalue().splitlines()[0] == f"[simplicity] turn 2 {retry}"
    rendered = io.StringIO()
    Console(file=rendered, width=200).print(progress._table())
    assert "waiting for the model, 42 s, attempt 2 of 7" in rendered.getvalue()


def test_progress_says_stopping_after_a_signal() -> None:
    from rich.console import Console

    stream = io.StringIO()
    progress = Progress(["simplicity", "speed"], live=False, stream=stream)
    progress(event("finished", label="speed"))
    progress.stopping()
    assert "stopping…" in stream.getvalue()
    rendered = io.StringIO()
    Console(file=rendered, width=200).print(progress._table())
    assert rendered.getvalue().count("stopping…") == 1
