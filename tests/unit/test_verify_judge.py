"""`planrun verify --judge` run for real but without Docker: the real anthropic SDK against
the fake Messages API (or a scripted model), the judge's tools in the real tool server run
as a local process (LocalSandbox), on a real git repository."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sandbox_runner import Sandbox
from sandbox_runner.cli import cli
from sandbox_runner.cli.services import Services
from sandbox_runner.config import LoadedSettings, load_settings
from sandbox_runner.model.errors import ModelError
from sandbox_runner.verify.change_diff import change_diff
from sandbox_runner.verify.changes import read_change
from sandbox_runner.verify.judge_run import JudgeResult
from sandbox_runner.verify.judging import PreparedJudge, judge_change
from sandbox_runner.verify.plan_refs import plan_refs
from tests.support.fake_messages_api import (
    FakeMessagesAPI,
    Scripted,
    message,
    text,
    tool_use,
    usage,
)
from tests.support.git_run import git
from tests.support.judge_repo import (
    ALL_DONE,
    HALF_DONE,
    VERDICT_PATH,
    half_done_repo,
    verdicts,
)
from tests.support.local_sandbox import LocalSandbox
from tests.support.scripted_model import ScriptedModel, reply, say, use

INVALID = verdicts((1, "complete", "src/app.py:1"), (2, "not done", "nothing logs"))


class LocalServices(Services):
    """The CLI's services, with the judge's sandbox a local tool server instead of Docker."""

    def sandbox_factory(
        self, workspace: Path, loaded: LoadedSettings
    ) -> Callable[[str], Callable[[Path | None], Sandbox]]:
        return lambda session: lambda plan_dir: LocalSandbox(workspace, plan_dir)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        yield server


@pytest.fixture
def repo_and_plan(tmp_path: Path) -> tuple[Path, Path]:
    return half_done_repo(tmp_path)


def writes(content: str) -> list[Scripted]:
    return [message(tool_use("Write", {"file_path": VERDICT_PATH, "content": content})),
            message(text("Judged."))]  # fmt: skip


def verify(repo: Path, plan: Path, *flags: str, services: Services | None = None) -> Result:
    args = ["verify", str(plan), "--repo", str(repo), "--judge", *flags]
    return CliRunner().invoke(cli, args, obj=services or LocalServices(), catch_exceptions=False)


def test_a_judged_run_prints_the_model_verdicts_and_only_strict_fails_on_them(
    api: FakeMessagesAPI, repo_and_plan: tuple[Path, Path]
) -> None:
    repo, plan = repo_and_plan
    api.script = writes(HALF_DONE)
    advisory = verify(repo, plan)
    assert advisory.exit_code == 0, advisory.output
    lines = advisory.stdout.splitlines()
    assert lines[0].startswith("the change follows the plan")  # the checks pass...
    assert lines[1].startswith("judge: these verdicts come from a model, not from the checks")
    assert "(model claude-sonnet-4-6; $0.0" in lines[1]
    assert lines[2] == "judge: step 1: done: src/app.py:1 adds the verbose argument"
    assert lines[3] == "judge: step 2: not done: src/util.py only gained a comment: nothing logs"
    assert "advisory: without --strict" in lines[4]
    assert "judging 2 step(s) with claude-sonnet-4-6 in a sandbox" in advisory.stderr
    # ...and the judge saw the steps and the diff.
    task = api.message_requests[0].body["messages"][0]["content"][0]["text"]
    assert "Log each step with src/util.py." in task and "+# logs each step" in task
    api.add(*writes(HALF_DONE))
    strict = verify(repo, plan, "--strict", "--json")
    assert strict.exit_code == 1, strict.output
    document = json.loads(strict.stdout)
    assert document["reasons"] == []  # the drift is the judge's alone
    assert (document["verdict"], document["exit_code"]) == ("drift", 1)
    judge = document["judge"]
    assert judge["source"] == "model" and judge["status"] == "judged" and judge["drift"]
    assert [step["verdict"] for step in judge["steps"]] == ["done", "not done"]
    assert judge["steps"][1]["text"] == "Log each step with src/util.py."
    assert judge["model"] == "claude-sonnet-4-6" and judge["cost_usd"] > 0
    assert judge["tokens"]["input"] == 20 and judge["turns"] == 2
    assert Path(judge["transcript"]).is_file()


def test_an_invalid_verdict_file_gets_one_retry_with_the_problem(
    api: FakeMessagesAPI, repo_and_plan: tuple[Path, Path]
) -> None:
    repo, plan = repo_and_plan
    api.script = [*writes(INVALID), *writes(ALL_DONE)]
    result = verify(repo, plan, "--strict", "--json")
    assert result.exit_code == 0, result.output
    judge = json.loads(result.stdout)["judge"]
    assert judge["status"] == "judged" and judge["retried"] is True
    assert judge["counts"] == {"done": 1, "partly": 1, "not done": 0}
    feedback = json.dumps(api.message_requests[2].body["messages"][-1])
    assert "does not follow the schema" in feedback
    assert "steps[0].verdict must be one of" in feedback


def test_an_invalid_file_twice_leaves_the_verdict_unavailable_and_the_exit_to_the_checks(
    api: FakeMessagesAPI, repo_and_plan: tuple[Path, Path]
) -> None:
    repo, plan = repo_and_plan
    api.script = [*writes(INVALID), message(text("It is fine as it is."))]
    result = verify(repo, plan, "--strict")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    lines = result.stdout.splitlines()
    assert lines[1].startswith("judge: unavailable (model claude-sonnet-4-6;")
    assert "the verdict file is invalid after one retry: steps[0].verdict" in lines[1]
    assert lines[2] == "judge: the exit status comes from the checks above alone"
    assert len(api.message_requests) == 3


def test_max_cost_usd_stops_the_judge_and_its_verdict_is_unavailable(
    api: FakeMessagesAPI, repo_and_plan: tuple[Path, Path]
) -> None:
    repo, plan = repo_and_plan
    costly = usage(input_tokens=1_000_000)  # $3.00 at the list price of claude-sonnet-4-6
    api.script = [message(tool_use("Glob", {"pattern": "**"}), usage=costly), *writes(HALF_DONE)]
    result = verify(repo, plan, "--max-cost-usd", "1", "--strict")
    assert result.exit_code == 0, result.output
    assert "cost budget of $1.00 reached ($3.00 spent)" in result.stdout.splitlines()[1]
    assert len(api.message_requests) == 1


def test_without_docker_the_judge_is_one_line_and_exit_2_before_anything_runs(
    api: FakeMessagesAPI,
    repo_and_plan: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo, plan = repo_and_plan
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'dead.sock'}")
    result = verify(repo, plan, services=Services())
    assert result.exit_code == 2, result.output
    assert result.stdout == ""  # not even the checks' findings: the command was wrong
    errors = result.stderr.splitlines()
    assert len(errors) == 1 and errors[0].startswith("Error: no Docker engine (")
    assert errors[0].endswith("run `planrun engine start` (or set DOCKER_HOST to a running engine)")
    assert api.message_requests == []


@pytest.mark.parametrize(
    ("flags", "env", "error"),
    [
        (["--judge"], {"ANTHROPIC_API_KEY": None}, "but ANTHROPIC_API_KEY is not: export the key"),
        (["--judge", "--model", "claude-sonet-4-6"], {}, "did you mean claude-sonnet-4-6?"),
        (["--max-cost-usd", "1"], {}, "Error: --model and --max-cost-usd are the judge's"),
    ],
)
def test_usage_errors_of_the_judge_exit_2_in_one_line(
    repo_and_plan: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    flags: list[str],
    env: dict[str, str | None],
    error: str,
) -> None:
    repo, plan = repo_and_plan
    with FakeMessagesAPI(models=["claude-sonnet-4-6"]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        for name, value in env.items():
            if value is None:
                monkeypatch.delenv(name)
        args = ["verify", str(plan), "--repo", str(repo), *flags]
        result = CliRunner().invoke(cli, args, obj=LocalServices(), catch_exceptions=False)
        assert server.message_requests == []
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1
    assert error in result.stderr


def test_a_plan_without_steps_asks_no_model(
    repo_and_plan: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, plan = repo_and_plan
    plan.write_text("# Verbose\n\nChange src/app.py and src/util.py.\n")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = verify(repo, plan, "--strict", services=Services())
    assert result.exit_code == 0, result.output
    assert "judge: unavailable" in result.stdout
    assert "the plan has no Detailed Steps to judge" in result.stdout


def judged(repo: Path, plan: Path, model: ScriptedModel, max_turns: int = 40) -> JudgeResult:
    refs = plan_refs(plan.read_text(), repo)
    change = read_change(repo, None, refs.base_commit)
    settings = load_settings(repo, flags={"max_turns": max_turns})
    prepared = PreparedJudge("claude-test", settings, lambda _: lambda d: LocalSandbox(repo, d))
    return judge_change(prepared, repo, refs, change, change.files, model=model)


def test_the_judge_can_read_the_repository_but_write_only_its_verdict_file(
    repo_and_plan: tuple[Path, Path],
) -> None:
    repo, plan = repo_and_plan
    model = ScriptedModel(
        [
            reply(use("Read", {"file_path": "/workspace/src/util.py"})),
            reply(use("Write", {"file_path": "/workspace/src/util.py", "content": "pwned"})),
            reply(use("Write", {"file_path": VERDICT_PATH, "content": HALF_DONE})),
            reply(say("Judged.")),
        ]
    )
    result = judged(repo, plan, model)
    assert result.available and [v.verdict for v in result.verdicts] == ["done", "not done"]
    assert "# logs each step" in (repo / "src" / "util.py").read_text()
    refused = json.dumps(model.requests[2].messages[-1])
    assert "only allowed on the plan file /plan/verdicts.json" in refused


def test_a_judge_whose_model_fails_is_unavailable_never_a_crash(
    repo_and_plan: tuple[Path, Path],
) -> None:
    repo, plan = repo_and_plan
    model = ScriptedModel(
        [reply(use("Glob", {"pattern": "**/*.py"})), ModelError("the API went away")]
    )
    result = judged(repo, plan, model)
    assert not result.available
    assert result.reason.startswith("the judge stopped: the API went away")


def test_out_of_turns_the_judge_answers_in_a_final_turn_without_tools(
    repo_and_plan: tuple[Path, Path],
) -> None:
    repo, plan = repo_and_plan
    model = ScriptedModel(
        [reply(use("Glob", {"pattern": "**/*.py"})), reply(say(f"```json\n{HALF_DONE}\n```"))]
    )
    result = judged(repo, plan, model, max_turns=2)
    assert result.available and result.turns == 2
    assert [verdict.verdict for verdict in result.verdicts] == ["done", "not done"]
    assert model.requests[1].tool_choice == "none"


def test_the_judge_diff_runs_no_program_the_repository_configures(
    repo_and_plan: tuple[Path, Path], tmp_path: Path
) -> None:
    repo, _plan = repo_and_plan
    marker = tmp_path / "marker"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\necho converted\n")
    hook.chmod(0o755)
    for key, value in (
        ("diff.external", str(hook)),
        ("diff.evil.command", str(hook)),
        ("diff.evil.textconv", str(hook)),
        ("core.fsmonitor", str(hook)),
        ("core.pager", str(hook)),
    ):
        git(repo, "config", key, value)
    (repo / ".gitattributes").write_text("* diff=evil\n")
    change = read_change(repo, None, None)
    diff = change_diff(repo, change, change.files)
    assert "+def main(verbose=False):" in diff.text and "converted" not in diff.text
    assert diff.untracked == (".gitattributes",) and not diff.cut
    assert not marker.exists()
