"""`planrun plans` and the progress display, without Docker."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import pytest
from click.testing import CliRunner

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.cli import Services, cli
from sandbox_runner.cli.progress import Progress, wants_live_display
from sandbox_runner.errors import ConfigError
from sandbox_runner.runs.locks import RUN_LOCK, DirectoryLock


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


def event(kind: str, label: str = "simplicity", **fields: Any) -> AgentEvent:
    typical = AgentEvent(
        kind=kind, label=label, turn=2, tool=None, detail="",
        tool_calls=3, tokens=1200, elapsed=1.5,
    )  # fmt: skip
    return replace(typical, **fields)


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


class LiveTable(Protocol):
    def __call__(self, labels: list[str], *events: AgentEvent, stopping: bool = False) -> str: ...


@pytest.fixture
def live_table(monkeypatch: pytest.MonkeyPatch) -> LiveTable:
    """The live display's last frame, as a person at a 200-column terminal sees it at the end."""
    monkeypatch.setenv("COLUMNS", "200")

    def show(labels: list[str], *events: AgentEvent, stopping: bool = False) -> str:
        stream = io.StringIO()
        with Progress(labels, live=True, stream=stream) as progress:
            for happened in events:
                progress(happened)
            if stopping:
                progress.stopping()
        return stream.getvalue()

    return show


def test_live_table_shows_one_row_per_subagent(live_table: LiveTable) -> None:
    shown = live_table(
        ["simplicity", "performance"], event("tool_call", tool="Grep", detail="def main")
    )
    header, *rows = shown.splitlines()
    assert header.split()[:2] == ["perspective", "state"]
    assert [row.split()[:2] for row in rows] == [
        ["simplicity", "running"],
        ["performance", "starting"],
    ]
    assert "Grep def main" in rows[0]


def test_no_live_display_in_a_pipe() -> None:
    assert not wants_live_display(io.StringIO(), json_output=False)


def test_model_text_cannot_inject_markup_or_terminal_escapes(live_table: LiveTable) -> None:
    stream = io.StringIO()
    progress = Progress(["simplicity"], live=False, stream=stream)
    hostile = event(
        "tool_call", tool="Bash", detail="grep '[/]' x \x1b]8;;https://evil\x07\n::error::x"
    )
    progress(hostile)
    logged = stream.getvalue()
    assert "\x1b" not in logged and "\x07" not in logged
    assert logged.count("\n") == 1
    shown = live_table(["simplicity"], hostile)
    assert "[/]" in shown
    assert "\x1b" not in shown and "\x07" not in shown


@pytest.mark.parametrize(
    "report",
    [
        '{"plans": "x"}',
        '{"plans": [1]}',
        '{"plans": [{}]}',
        '{"plans": null}',
        '{"status": ["x"]}',
        '{"requirements": 5}',
        '{"started_at": 5, "exit_code": "x"}',
        "[1, 2]",
        "not json",
    ],
)
def test_plans_list_survives_any_malformed_report(planrun_home: Path, report: str) -> None:
    make_run(planrun_home, "good-oak", "2026-11-01T10:00:00+00:00")
    bad = planrun_home / "plans" / "bad-run"
    bad.mkdir()
    (bad / "report.json").write_text(report)
    for args in (["plans", "list"], ["plans", "list", "--json"]):
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert "good-oak" in result.output and "bad-run" in result.output


def test_plans_list_without_runs_says_where_runs_are_kept(planrun_home: Path) -> None:
    result = CliRunner().invoke(cli, ["plans", "list"])
    assert result.exit_code == 0
    assert f"no runs yet: `planrun plan` keeps them in {planrun_home / 'plans'}" in result.output


def test_runs_written_with_out_are_listed_and_shown(planrun_home: Path, tmp_path: Path) -> None:
    from sandbox_runner.plans.history import remember_run

    elsewhere = make_run(tmp_path, "my-out", "2026-11-02T10:00:00+00:00")
    remember_run(elsewhere)
    listed = CliRunner().invoke(cli, ["plans", "list"])
    assert str(elsewhere) in listed.output
    for name in ("my-out", str(elsewhere)):
        shown = CliRunner().invoke(cli, ["plans", "show", name, "simplicity"])
        assert shown.exit_code == 0 and shown.output == "# The simple plan\n"


def test_browsing_never_prints_terminal_escapes(planrun_home: Path) -> None:
    run = make_run(planrun_home, "old-oak", "2026-11-01T10:00:00+00:00")
    escape = "\x1b]0;owned\x07\x1b[2J"
    report = {
        "started_at": "2026-11-01T10:00:00",
        "status": "ok" + escape,
        "requirements": "Add" + escape,
        "plans": [{"perspective": "p" + escape, "label": "p"}],
    }
    (run / "report.json").write_text(json.dumps(report))
    (run / "report.md").write_text("# Report" + escape + "\n")
    for args in (["plans", "list"], ["plans", "show", "old-oak"]):
        output = CliRunner().invoke(cli, args).output
        assert "\x1b" not in output and "\x07" not in output


def test_agents_list_and_show_print_no_escapes_and_name_an_ignored_model(tmp_path: Path) -> None:
    agents = tmp_path / ".planrun" / "agents"
    agents.mkdir(parents=True)
    escape = "\x1b]0;owned\x07"
    (agents / "plan.md").write_text(f"---\nname: Plan\nmodel: opus\n---\nPrompt{escape}\n")
    (agents / f"bad{escape}.md").write_text("no front matter")
    listed = CliRunner().invoke(cli, ["agents", "list", "--repo", str(tmp_path)])
    shown = CliRunner().invoke(cli, ["agents", "show", "Plan", "--repo", str(tmp_path)])
    for result in (listed, shown):
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.output and "\x07" not in result.output
        assert "the project's opus is ignored: not trusted" in result.output
    assert "bad?]0;owned?.md" in listed.output


def test_help_lists_every_command_with_a_whole_summary() -> None:
    output = CliRunner().invoke(cli, ["--help"], terminal_width=80).output
    commands = output.split("Commands:")[1].split("Examples:")[0].strip().splitlines()
    assert len(commands) == 11  # agents, batch, config, engine, image, mcp, plan, plans, ...
    assert all(not line.rstrip().endswith("...") for line in commands), commands


def test_progress_says_what_it_waits_for_and_labels_retries(live_table: LiveTable) -> None:
    """A hung API was silent, and retry lines had no perspective label."""
    stream = io.StringIO()
    progress = Progress(["simplicity"], live=False, stream=stream)
    retry = "model API: 529 overloaded_error: Overloaded; retrying in 5.0 s (attempt 2 of 7)"
    waiting = event("waiting", detail="waiting for the model, 42 s, attempt 2 of 7")
    progress(event("model_retry", detail=retry))
    progress(waiting)
    assert stream.getvalue().splitlines()[0] == f"[simplicity] turn 2 {retry}"
    shown = live_table(["simplicity"], event("model_retry", detail=retry), waiting)
    assert "waiting for the model, 42 s, attempt 2 of 7" in shown


def test_progress_says_stopping_after_a_signal(live_table: LiveTable) -> None:
    stream = io.StringIO()
    progress = Progress(["simplicity", "speed"], live=False, stream=stream)
    progress(event("finished", label="speed"))
    progress.stopping()
    assert "stopping…" in stream.getvalue()
    shown = live_table(["simplicity", "speed"], event("finished", label="speed"), stopping=True)
    assert shown.count("stopping…") == 1


def test_plans_open_opens_report_html_in_the_browser(planrun_home: Path) -> None:
    run = make_run(planrun_home, "old-oak", "2026-11-01T10:00:00+00:00")
    (run / "report.html").write_text("<!DOCTYPE html>")
    opened: list[str] = []

    def browser(url: str) -> bool:
        opened.append(url)
        return True

    result = CliRunner().invoke(
        cli, ["plans", "open", "old-oak"], obj=Services(open_in_browser=browser)
    )
    assert result.exit_code == 0, result.output
    assert opened == [(run / "report.html").as_uri()]
    assert result.output == f"opened {run / 'report.html'}\n"


def test_plans_open_without_a_browser_prints_the_path(planrun_home: Path) -> None:
    run = make_run(planrun_home, "old-oak", "2026-11-01T10:00:00+00:00")
    (run / "report.html").write_text("<!DOCTYPE html>")
    services = Services(open_in_browser=lambda url: False)
    result = CliRunner().invoke(cli, ["plans", "open", "old-oak"], obj=services)
    assert result.exit_code == 0
    assert result.output == f"no browser to open it in; the report is {run / 'report.html'}\n"


def test_plans_open_of_an_unknown_run_is_a_one_line_usage_error(planrun_home: Path) -> None:
    make_run(planrun_home, "old-oak", "2026-11-01T10:00:00+00:00")
    services = Services(open_in_browser=lambda url: pytest.fail("nothing to open"))
    for name in ("no-such-run", "old-oak"):  # old-oak has no report.html
        result = CliRunner().invoke(cli, ["plans", "open", name], obj=services)
        assert result.exit_code == 2
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert "Traceback" not in result.output
    assert (
        "no run called 'no-such-run'"
        in CliRunner().invoke(cli, ["plans", "open", "no-such-run"]).output
    )


def test_headless_means_no_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    assert Services().open_in_browser("file:///x/report.html") is False


def test_plans_show_renders_markdown_on_a_terminal(planrun_home: Path) -> None:
    run = make_run(planrun_home, "old-oak", "2026-11-01T10:00:00+00:00")
    (run / "simplicity.md").write_text(
        "---\nperspective: simplicity\n---\n\n# The simple plan\n\n## Steps\n\n"
        "- **one** \x1b]0;owned\x07\n- [two](javascript:alert(1))\n"
    )
    services = Services(stdout_is_terminal=lambda: True)
    result = CliRunner().invoke(cli, ["plans", "show", "old-oak", "simplicity"], obj=services)
    assert result.exit_code == 0, result.output
    assert "The simple plan" in result.output and "perspective: simplicity" in result.output
    assert "# The simple plan" not in result.output and "**one**" not in result.output
    assert "\x1b]" not in result.output and "\x07" not in result.output
    plain = CliRunner().invoke(cli, ["plans", "show", "old-oak", "simplicity"])
    assert "## Steps" in plain.output  # not a terminal: the Markdown as it is


def test_plans_list_tells_a_run_being_written_from_one_that_stopped(planrun_home: Path) -> None:
    run = planrun_home / "plans" / "busy-bee"
    run.mkdir(parents=True)
    with DirectoryLock(run, name=RUN_LOCK, what="planrun plan"):
        busy = CliRunner().invoke(cli, ["plans", "list"])
        with pytest.raises(ConfigError, match=r"another planrun plan \(pid"):
            DirectoryLock(run, name=RUN_LOCK, what="planrun plans resume").__enter__()
    assert "busy-bee" in busy.output and "(running)" in busy.output
    stopped = CliRunner().invoke(cli, ["plans", "list"])
    assert "no report: stopped; `planrun plans resume` finishes it" in stopped.output


def test_the_run_s_own_notice_is_a_line_of_its_own_not_a_subagent(live_table: LiveTable) -> None:
    """The seconds after the last plan of a large repository (the workspace check) are
    said, on no subagent's row."""
    checking = event("notice", label="", detail="checking that the repository did not change")
    stream = io.StringIO()
    with Progress(["simplicity"], live=False, stream=stream) as progress:
        progress(checking)
    assert stream.getvalue() == "planrun: checking that the repository did not change\n"
    shown = live_table(["simplicity"], checking)
    assert "planrun: checking that the repository did not change" in shown
    assert shown.count("simplicity") == 1
