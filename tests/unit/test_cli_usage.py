"""`planrun plan` usage errors: one line, exit 2, before Docker is touched or a run
directory is claimed. No Docker here: the injected engine fails the test if called."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from sandbox_runner.cli import Services, cli


def no_docker() -> Any:
    pytest.fail("Docker was contacted before the usage error was found")


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)


@pytest.fixture
def repo(sample_repo: Path) -> Path:
    return sample_repo


def plan(*args: str, input: str | None = None) -> Result:
    services = Services(docker=no_docker)
    return CliRunner().invoke(cli, ["plan", *args], obj=services, input=input)


def assert_usage_error(result: Result, planrun_home: Path, *parts: str) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    error_lines = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(error_lines) == 1, result.output
    for part in parts:
        assert part in error_lines[0], error_lines[0]
    runs = planrun_home / "plans"
    assert not runs.exists() or not any(runs.iterdir())
    return error_lines[0]


def cassettes(tmp_path: Path, *names: str) -> Path:
    directory = tmp_path / "cassettes"
    directory.mkdir(exist_ok=True)
    for name in names:
        (directory / f"{name}.jsonl").write_text('{"cassette": 1}\n')
    return directory


def test_replay_with_record(repo: Path, tmp_path: Path, planrun_home: Path) -> None:
    replay = cassettes(tmp_path, "default")
    result = plan(
        "x", "--repo", str(repo), "--replay", str(replay), "--record", str(tmp_path / "r")
    )
    assert_usage_error(result, planrun_home, "--replay and --record cannot be used together")


def test_record_onto_a_file(repo: Path, tmp_path: Path, planrun_home: Path) -> None:
    target = tmp_path / "file.jsonl"
    target.write_text("")
    result = plan("x", "--repo", str(repo), "--record", str(target))
    assert_usage_error(result, planrun_home, f"--record {target} is not a directory")


def test_record_refuses_a_directory_holding_cassettes(
    repo: Path, tmp_path: Path, planrun_home: Path
) -> None:
    earlier = cassettes(tmp_path, "security")
    result = plan("x", "--repo", str(repo), "--record", str(earlier))
    assert_usage_error(result, planrun_home, "already holds cassettes", "never overwrites")
    assert (earlier / "security.jsonl").read_text() == '{"cassette": 1}\n'


def test_a_cassette_directory_without_a_perspective_names_its_file(
    repo: Path, tmp_path: Path, planrun_home: Path
) -> None:
    replay = cassettes(tmp_path, "simplicity")
    args = ["--perspective", "simplicity", "--perspective", "security"]
    result = plan("x", "--repo", str(repo), "--replay", str(replay), *args)
    line = assert_usage_error(result, planrun_home, "security.jsonl", "default.jsonl")
    assert "simplicity.jsonl" not in line


def test_base_url_without_a_key(
    repo: Path, planrun_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    result = plan("x", "--repo", str(repo))
    assert_usage_error(
        result, planrun_home, "ANTHROPIC_BASE_URL is set but ANTHROPIC_API_KEY is not"
    )


@pytest.mark.parametrize(
    ("args", "parts"),
    [
        (["--template", "missing.md"], ["--template: plan template missing.md does not exist"]),
        (["--repo", ""], ["the workspace path is empty"]),
        (["--model", ""], ["flag --model: key 'planning_model' must be a non-empty string"]),
        (["--timeout", "inf"], ["at least 1 (a finite number), got inf"]),
        (["--perspective", "a\nb"], ["--perspective", "contains a line break"]),
        (["--perspective", "\x1b]0;owned\x07"], ["contains control or invisible characters"]),
        (["--perspective", "x" * 100], ["the limit is 64"]),
        (
            ["--context", "nope.md"],
            ["context file nope.md does not exist", "read from the repository"],
        ),
    ],
)
def test_smaller_usage_errors(
    repo: Path, planrun_home: Path, args: list[str], parts: list[str]
) -> None:
    base = [] if "--repo" in args else ["--repo", str(repo)]
    line = assert_usage_error(plan("x", *base, *args), planrun_home, *parts)
    assert "\x1b" not in line and "\x07" not in line


def test_a_preset_cannot_expand_past_max_plans(repo: Path, planrun_home: Path) -> None:
    names = ", ".join(f"p{number}" for number in range(16))
    (repo / ".planrun").mkdir()
    (repo / ".planrun" / "config.yaml").write_text(f"perspectives:\n  all: [{names}]\n")
    result = plan("x", "--repo", str(repo), "--perspective", "all")
    assert_usage_error(result, planrun_home, "16 plans asked for", "max_plans is 8")


def test_requirements_file_dash_reads_standard_input(repo: Path, planrun_home: Path) -> None:
    # Stops at the first check after the requirements: the missing cassette.
    result = plan("-f", "-", "--repo", str(repo), "--replay", "/nonexistent", input="From stdin\n")
    assert_usage_error(result, planrun_home, "--replay /nonexistent does not exist")


def test_config_show_reports_an_ignored_project_model(repo: Path) -> None:
    (repo / ".planrun").mkdir()
    (repo / ".planrun" / "config.yaml").write_text("model: opus\n")
    result = CliRunner().invoke(cli, ["config", "show", "--repo", str(repo), "--json"])
    assert result.exit_code == 0
    assert "asks for model 'opus'; ignored" in result.stderr
    assert json.loads(result.stdout)["settings"]["model"] == "claude-sonnet-4-6"


def test_a_synthesis_agent_that_can_write_is_refused_unless_the_synthesis_is_off(
    repo: Path, planrun_home: Path
) -> None:
    # The user's own file: a repository's file cannot change a built-in's tools at all.
    agents = planrun_home / "agents"
    agents.mkdir(parents=True)
    (agents / "synthesis.md").write_text("---\nname: Synthesis\ntools: Read, Write\n---\nMerge.\n")
    result = plan("x", "--repo", str(repo), "--perspective", "a", "--perspective", "b")
    assert_usage_error(result, planrun_home, "Synthesis", "Write")

    class Reached(Exception):
        """Docker is asked for: every check before it passed."""

    def docker() -> Any:
        raise Reached

    args = ["plan", "x", "--repo", str(repo), "--no-synthesis", "--perspective", "a"]
    result = CliRunner().invoke(cli, args, obj=Services(docker=docker))
    assert isinstance(result.exception, Reached), result.output


def test_a_finished_run_says_the_command_to_run_next(tmp_path: Path) -> None:
    from sandbox_runner.cli.plan_cmd import next_step
    from sandbox_runner.plans.history import run_name, runs_dir
    from sandbox_runner.plans.report_view import Report

    assert run_name(runs_dir() / "brave-comet") == "brave-comet"
    assert run_name(tmp_path / "my plans") == f"'{tmp_path / 'my plans'}'"

    def report(exit_code: int, valid: bool, status: str = "complete", reason: str = "") -> Report:
        plan = {"label": "a", "perspective": "a", "status": status, "valid": valid,
                "reason": reason, "plan_file": "a.md"}  # fmt: skip
        return Report({"exit_code": exit_code, "plans": [plan]}, {}, tmp_path)

    assert "planrun plans open brave-comet" in next_step(report(0, True), "brave-comet")
    assert "planrun plans resume brave-comet" in next_step(report(1, False), "brave-comet")
    run_cap = report(1, False, "budget", "cost budget of $2.00 reached ($2.01 spent)")
    plan_cap = report(1, False, "budget", "cost budget of $0.50 per plan reached ($0.51 spent)")
    assert "`planrun plans resume brave-comet --max-cost-usd USD`" in next_step(
        run_cap, "brave-comet"
    )
    assert "--max-cost-usd-per-plan USD" in next_step(plan_cap, "brave-comet")


def test_a_progress_line_naming_what_a_repository_wrote_reaches_the_terminal_inert(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # An approved .mcp.json server's args, a devcontainer's Dockerfile name, an image's
    # VOLUME: a repository's words, which must not set the title or the clipboard.
    Services().progress("starting MCP server git (run \x1b]52;c;ZXZpbA==\x07 \x1b[2J)")
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert err.startswith("planrun: starting MCP server git (run ")
