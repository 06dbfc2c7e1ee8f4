"""The agent loop and one-call planning, with a scripted model and the tool server run locally."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.agents.events import AgentEvent, EventSink
from sandbox_runner.limits import RunLimits
from sandbox_runner.model.errors import ModelError
from sandbox_runner.plans.document import split_document
from sandbox_runner.plans.results import PlanResult, PlanStatus
from sandbox_runner.runs.plan_job import PlanJob, run_plan
from sandbox_runner.tools.output import cap_result
from sandbox_runner.types import ModelRequest
from tests.support.local_sandbox import LocalSandbox
from tests.support.scripted_model import ScriptedModel, reply, say, use

VALID_PLAN = """# Add a --verbose flag

## Understanding
The CLI needs a --verbose flag that prints each step.

## Constraints
Keep the public API.

## Assumptions
Python 3.11.

## Approach
Thread a verbose option from the CLI into app.main.

## Detailed Steps
1. Add the option in src/app.py.
2. Log in src/util.py.

## Test Plan
Extend tests/test_app.py.

## Risks
Noisy output.

## Alternatives Considered
An environment variable.

## Rollback and Mitigations
Revert the commit.

## Success Criteria
`app --verbose` prints steps.

## Next Actions
Run `pip install -e .` and the tests.

### Critical Files for Implementation
- src/app.py - the entry point gets the flag
- src/util.py - the logging helper
- tests/test_app.py - the tests of the flag
"""


@pytest.fixture
def workspace(sample_repo: Path) -> Path:
    return sample_repo


class Runner:
    """Runs one plan in the sample workspace; keeps every sandbox it started, for inspection."""

    def __init__(self, workspace: Path, out_dir: Path) -> None:
        self.workspace = workspace
        self.out_dir = out_dir
        self.sandboxes: list[LocalSandbox] = []

    def factory(self, plan_dir: Path | None) -> LocalSandbox:
        sandbox = LocalSandbox(self.workspace, plan_dir)
        self.sandboxes.append(sandbox)
        return sandbox

    def __call__(
        self,
        model: ScriptedModel,
        job: PlanJob | None = None,
        *,
        limits: RunLimits | None = None,
        on_event: EventSink | None = None,
        cancel: threading.Event | None = None,
        allowed_tools: frozenset[str] | None = None,
    ) -> PlanResult:
        self.out_dir.mkdir(exist_ok=True)
        return run_plan(
            job or PlanJob("Add a --verbose flag"),
            workspace=self.workspace,
            out_dir=self.out_dir,
            model=model,
            model_id="claude-test",
            sandbox_factory=self.factory,
            limits=limits,
            on_event=on_event,
            cancel=cancel,
            allowed_tools=allowed_tools,
        )


@pytest.fixture
def plan(workspace: Path, tmp_path: Path) -> Runner:
    return Runner(workspace, tmp_path / "out")


def written(path: Path | None) -> str:
    """The text of a file the run should have written."""
    assert path is not None, "the run wrote no file"
    return path.read_text()


def tool_results(model: ScriptedModel, request_index: int) -> list[dict[str, Any]]:
    return [
        block
        for block in model.requests[request_index].messages[-1]["content"]
        if block.get("type") == "tool_result"
    ]


def test_plan_run_explores_writes_and_validates(plan: Runner, tmp_path: Path) -> None:
    events: list[AgentEvent] = []
    model = ScriptedModel(
        [
            reply(use("Read", {"file_path": "src/app.py"})),
            reply(use("Grep", {"pattern": "def ", "output_mode": "count"})),
            reply(use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})),
            reply(say("The plan is written.")),
        ]
    )
    result = plan(model, on_event=events.append)
    assert result.status is PlanStatus.COMPLETE
    assert result.valid, result.to_dict()
    assert result.check is not None
    assert [f.path for f in result.check.critical_files] == [
        "src/app.py",
        "src/util.py",
        "tests/test_app.py",
    ]
    assert "return 42" in tool_results(model, 1)[0]["content"]
    assert result.turns == 4 and result.tool_calls == 3
    metadata, body = split_document(written(result.plan_path))
    assert result.plan_path == tmp_path / "out" / "plan.md"
    assert metadata["status"] == "complete" and metadata["valid"] is True
    assert metadata["base_commit"] is None  # the sample repository is no git repository
    assert metadata["critical_files"] == ["src/app.py", "src/util.py", "tests/test_app.py"]
    assert body.startswith("# Add a --verbose flag")
    kinds = [event.kind for event in events]
    assert kinds[0] == "turn_started" and kinds[-1] == "finished"
    assert "plan_written" in kinds


def test_transcript_records_every_step(plan: Runner) -> None:
    model = ScriptedModel(
        [
            reply(use("LS", {})),
            reply(use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})),
            reply(say("done")),
        ]
    )
    result = plan(model)
    entries = [json.loads(line) for line in written(result.transcript).splitlines()]
    assert [e["type"] for e in entries] == [
        "system",
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
        "assistant",
        "result",
    ]
    assert "## Plan File Info:" in entries[0]["text"]
    assert entries[-1]["status"] == "complete"


@pytest.mark.parametrize(
    "call, expected",
    [
        (
            use("Write", {"file_path": "src/app.py", "content": "x"}),
            "only allowed on the plan file",
        ),
        (
            use(
                "Edit", {"file_path": "/workspace/README.md", "old_string": "a", "new_string": "b"}
            ),
            "only allowed on the plan file",
        ),
        (use("Task", {"prompt": "go"}), "not available to the Plan agent"),
        (use("NotebookEdit", {}), "not available"),
        (use("Read", {"path": "x"}), "Invalid input for Read"),
        (use("Read", "src/app.py"), "Invalid input for Read"),
        (use("Bash", {"command": "rm -rf src"}), "read-only"),
        (use("Bash", {"command": "echo hi > /workspace/x"}), "read-only"),
        (use("Bash", {"command": "git commit -am x"}), "read-only"),
        (use("Read", {"file_path": "/etc/passwd"}), "outside the directories you may use"),
    ],
)
def test_refused_calls_become_error_results_and_never_run(
    plan: Runner, workspace: Path, call: dict[str, Any], expected: str
) -> None:
    model = ScriptedModel([reply(call), reply(say(VALID_PLAN))])
    before = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()}
    result = plan(model)
    [answer] = tool_results(model, 1)
    assert answer["is_error"] is True
    assert expected in answer["content"]
    assert plan.sandboxes[0].requests == []
    assert {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()} == before
    assert result.status is PlanStatus.COMPLETE


def test_refused_commands_are_kept_as_suggestions(plan: Runner) -> None:
    model = ScriptedModel(
        [
            reply(use("Bash", {"command": "pip install rich"})),
            reply(use("Bash", {"command": "git status"})),
            reply(say(VALID_PLAN)),
        ]
    )
    result = plan(model)
    assert result.suggested_commands == ["pip install rich"]
    ran = tool_results(model, 2)[0]["content"]  # run, not refused: this is no repository
    assert ran.startswith("Exit code 128") and "not a git repository" in ran
    metadata, _ = split_document(written(result.plan_path))
    assert metadata["suggested_commands"] == ["pip install rich"]


def test_final_text_becomes_the_plan_when_no_file_was_written(plan: Runner, tmp_path: Path) -> None:
    result = plan(ScriptedModel([reply(say(VALID_PLAN))]))
    assert result.valid
    assert (tmp_path / "out" / ".sandbox" / "plan" / "plan.md").read_text().startswith("# Add a")
    assert split_document(written(result.plan_path))[1].startswith("# Add a --verbose flag")


def test_invalid_plan_is_sent_back_once_with_its_problems(plan: Runner) -> None:
    broken = VALID_PLAN.replace(
        "- tests/test_app.py - the tests of the flag\n", "- src/missing.py - nope\n"
    )
    model = ScriptedModel(
        [
            reply(use("Write", {"file_path": "/plan/plan.md", "content": broken})),
            reply(say("done")),
            reply(use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})),
            reply(say("fixed")),
        ]
    )
    result = plan(model)
    feedback = model.requests[2].messages[-1]["content"][0]["text"]
    assert "src/missing.py" in feedback
    assert result.valid
    # The round is recorded, so the report can say the plan was fixed after feedback.
    assert any("src/missing.py" in problem for problem in result.validation_feedback)
    assert split_document(written(result.plan_path))[0]["validation_feedback"]


def test_plan_still_invalid_after_feedback_is_reported(plan: Runner) -> None:
    broken = (
        VALID_PLAN.split("## Risks")[0]
        + "### Critical Files for Implementation\n- src/app.py - x\n"
    )
    model = ScriptedModel([reply(say(broken)), reply(say("I cannot do better."))])
    result = plan(model)
    assert result.status is PlanStatus.COMPLETE
    assert not result.valid
    assert result.check is not None
    assert any("Risks" in problem for problem in result.check.problems)
    assert "invalid" in result.reason
    assert split_document(written(result.plan_path))[0]["valid"] is False
    assert any("Risks" in problem for problem in result.validation_feedback)


def test_turn_limit_keeps_the_partial_plan(plan: Runner) -> None:
    model = ScriptedModel(
        [
            reply(use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})),
            reply(use("Read", {"file_path": "README.md"})),
            reply(use("Read", {"file_path": "README.md"})),
        ]
    )
    result = plan(model, limits=RunLimits(max_turns=2))
    assert result.status is PlanStatus.INCOMPLETE
    assert "turn limit of 2" in result.reason
    assert "Add a --verbose flag" in written(result.plan_path)


def test_token_limit_stops_the_run(plan: Runner) -> None:
    model = ScriptedModel([reply(use("LS", {}), tokens=5000), reply(say(VALID_PLAN))])
    result = plan(model, limits=RunLimits(max_total_tokens=1000))
    assert result.status is PlanStatus.INCOMPLETE
    assert "token limit" in result.reason


def test_model_failure_fails_the_run_but_keeps_the_transcript(plan: Runner) -> None:
    model = ScriptedModel(
        [
            reply(use("LS", {})),
            ModelError("the Anthropic API failed (529), gave up after 5 attempts"),
        ]
    )
    result = plan(model)
    assert result.status is PlanStatus.FAILED
    assert "529" in result.reason
    assert result.plan_path is None
    assert written(result.transcript).count('"type": "tool_result"') == 1


def test_context_budget_is_checked_before_the_first_call(plan: Runner) -> None:
    model = ScriptedModel([reply(say(VALID_PLAN))], tokens=250_000)
    result = plan(model)
    assert result.status is PlanStatus.FAILED
    assert "context budget" in result.reason
    assert model.requests == []


def test_tool_errors_go_back_to_the_model(plan: Runner) -> None:
    model = ScriptedModel([reply(use("Read", {"file_path": "nope.py"})), reply(say(VALID_PLAN))])
    result = plan(model)
    [answer] = tool_results(model, 1)
    assert answer["is_error"] is True
    assert "does not exist" in answer["content"]
    assert result.valid


def test_existing_plan_is_never_overwritten(plan: Runner, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "plan.md").write_text("precious")
    with pytest.raises(FileExistsError):
        plan(ScriptedModel([reply(say(VALID_PLAN))]))
    assert (tmp_path / "out" / "plan.md").read_text() == "precious"


def test_perspective_reaches_the_prompt_and_names_the_plan(plan: Runner, tmp_path: Path) -> None:
    model = ScriptedModel([reply(say(VALID_PLAN))])
    result = plan(model, PlanJob("Add a flag", perspective="Performance"))
    assert result.plan_path == tmp_path / "out" / "performance.md"
    assert "performance" in model.requests[0].system.lower()
    assert "/plan/performance.md" in model.requests[0].system


def test_configuration_can_take_tools_away(plan: Runner) -> None:
    model = ScriptedModel([reply(use("Bash", {"command": "ls"})), reply(say(VALID_PLAN))])
    result = plan(model, allowed_tools=frozenset({"Read", "Glob"}))
    offered = [tool.name for tool in model.requests[0].tools]
    assert offered == ["Glob", "Read", "Write", "Edit"]
    [answer] = tool_results(model, 1)
    assert answer["is_error"] and "not available" in answer["content"]
    assert result.valid


def test_a_plan_given_as_text_can_be_corrected_as_text(plan: Runner) -> None:
    broken = VALID_PLAN.replace("## Risks\nNoisy output.\n\n", "")
    model = ScriptedModel(
        [reply(say(broken)), reply(use("Read", {"file_path": "README.md"})), reply(say(VALID_PLAN))]
    )
    result = plan(model)
    assert result.valid
    assert "## Risks" in result.plan_text


def test_a_remark_after_feedback_does_not_replace_the_plan(plan: Runner) -> None:
    broken = VALID_PLAN.replace("## Risks\nNoisy output.\n\n", "")
    result = plan(ScriptedModel([reply(say(broken)), reply(say("Fixed."))]))
    assert not result.valid
    assert result.plan_text.startswith("# Add a --verbose flag")


def test_narration_before_tool_calls_is_not_taken_for_the_plan(plan: Runner) -> None:
    model = ScriptedModel(
        [
            reply(say("Let me look around."), use("LS", {})),
            reply(use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})),
        ]
    )
    model.steps.append(reply())
    result = plan(model)
    assert result.valid
    assert "Let me look around" not in result.plan_text


def test_a_turn_with_too_many_tool_calls_runs_only_the_first_ones(plan: Runner) -> None:
    from sandbox_runner.agents.tool_calls import MAX_CALLS_PER_TURN

    calls = [use("LS", {}) for _ in range(MAX_CALLS_PER_TURN + 3)]
    model = ScriptedModel([reply(*calls), reply(say(VALID_PLAN))])
    result = plan(model)
    answers = tool_results(model, 1)
    assert len(answers) == MAX_CALLS_PER_TURN + 3
    assert [a.get("is_error", False) for a in answers[-3:]] == [True, True, True]
    assert len(plan.sandboxes[0].requests) == MAX_CALLS_PER_TURN
    assert result.valid


def test_tool_timeouts_end_with_the_run_time_limit(plan: Runner) -> None:
    model = ScriptedModel(
        [reply(use("Bash", {"command": "git log", "timeout": 600_000})), reply(say(VALID_PLAN))]
    )
    plan(model, limits=RunLimits(timeout_seconds=30))
    [request] = plan.sandboxes[0].requests
    assert request.timeout is not None and 1 <= request.timeout <= 30


def test_a_sandbox_that_will_not_stop_does_not_lose_the_plan(
    workspace: Path, tmp_path: Path
) -> None:
    from sandbox_runner.errors import SandboxError

    class StubbornSandbox(LocalSandbox):
        def stop(self) -> None:
            super().stop()
            raise SandboxError("cannot remove container abc (daemon restarting)")

    result = run_plan(
        PlanJob("Add a flag"),
        workspace=workspace,
        out_dir=tmp_path / "out",
        model=ScriptedModel([reply(say(VALID_PLAN))]),
        model_id="claude-test",
        sandbox_factory=lambda plan_dir: StubbornSandbox(workspace, plan_dir),
    )
    assert result.valid
    assert result.plan_path == tmp_path / "out" / "plan.md" and result.plan_path.exists()
    assert "cannot remove container" in result.reason


def test_a_huge_tool_result_is_capped_and_says_how_to_narrow(plan: Runner, workspace: Path) -> None:
    """One Grep returned 262 KB into the context (Read here: no ripgrep)."""
    (workspace / "big.log").write_text("".join(f"line {n:06d} {'x' * 90}\n" for n in range(2000)))
    model = ScriptedModel([reply(use("Read", {"file_path": "big.log"})), reply(say(VALID_PLAN))])
    plan(model)
    [answer] = tool_results(model, 1)
    content = answer["content"]
    assert len(content) <= 30_000 + 500
    assert re.search(r"Output too long: [\d,]+ of [\d,]+ characters cut", content)
    assert "offset and limit" in content


def test_every_tool_says_how_to_narrow_a_capped_result() -> None:
    capped = cap_result("Grep", "src/a.py:1:match\n" * 5000)
    assert len(capped) < 30_500 and "head_limit" in capped
    assert cap_result("Grep", "short") == "short"


def test_the_turn_limit_ends_with_a_final_turn_without_tools(plan: Runner) -> None:
    """A model that keeps calling tools spent every turn and left no plan."""
    explore = [reply(use("Read", {"file_path": "README.md"})) for _ in range(5)]
    model = ScriptedModel([*explore, reply(say(VALID_PLAN))])
    result = plan(model, limits=RunLimits(max_turns=6))
    assert [request.tool_choice for request in model.requests] == [None] * 5 + ["none"]
    warned = [request for request in model.requests if "turns left" in json.dumps(request.messages)]
    assert warned and warned[0] is not model.requests[-1]
    final_note = model.requests[-1].messages[-1]["content"][-1]["text"]
    assert "final turn" in final_note and "tools are disabled" in final_note
    assert result.status is PlanStatus.INCOMPLETE
    assert "turn limit of 6" in result.reason and "final turn" in result.reason
    assert "Add a --verbose flag" in written(result.plan_path)
    assert result.check is not None and result.check.ok


def test_tokens_running_low_also_end_with_a_final_turn(plan: Runner) -> None:
    model = ScriptedModel([reply(use("LS", {}), tokens=400), reply(say(VALID_PLAN), tokens=400)])
    result = plan(model, limits=RunLimits(max_total_tokens=1000))
    assert [request.tool_choice for request in model.requests] == [None, "none"]
    assert result.status is PlanStatus.INCOMPLETE and "token limit" in result.reason
    assert result.plan_path is not None


def test_the_time_limit_stops_a_model_call_in_flight(plan: Runner) -> None:
    """`--timeout` did not stop a model call that hangs."""
    released = threading.Event()

    def hangs(request: ModelRequest) -> Any:
        released.wait(60)
        raise ModelError("released")

    events: list[AgentEvent] = []
    started = time.monotonic()
    result = plan(
        ScriptedModel([hangs]), limits=RunLimits(timeout_seconds=2), on_event=events.append
    )
    released.set()
    assert time.monotonic() - started < 6
    assert result.status is PlanStatus.INCOMPLETE
    assert "time limit of 2 s reached while waiting for the model" in result.reason
    waiting = [event.detail for event in events if event.kind == "waiting"]
    assert waiting and waiting[-1].startswith("waiting for the model, 1 s")


def test_a_cancel_stops_a_model_call_in_flight(plan: Runner) -> None:
    cancel = threading.Event()
    released = threading.Event()

    def hangs(request: ModelRequest) -> Any:
        released.wait(60)
        raise ModelError("released")

    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    result = plan(ScriptedModel([hangs]), cancel=cancel)
    released.set()
    assert time.monotonic() - started < 3
    assert result.status is PlanStatus.INCOMPLETE and result.reason == "interrupted"


def test_a_refusal_fails_the_plan_with_what_the_api_said(plan: Runner) -> None:
    refusal = {"type": "refusal", "category": "bio", "explanation": "Dangerous lab methods."}
    model = ScriptedModel(
        [reply(use("LS", {})), reply(say("I"), stop_reason="refusal", stop_details=refusal)]
    )
    result = plan(model)
    assert result.status is PlanStatus.FAILED and not result.resumable
    assert result.reason == (
        "the API stopped the model's answer as a refusal (category bio): Dangerous lab methods."
    )


def test_the_plan_records_the_commit_it_was_written_against(plan: Runner, workspace: Path) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text(commit + "\n")
    result = plan(ScriptedModel([reply(say(VALID_PLAN))]))
    assert split_document(written(result.plan_path))[0]["base_commit"] == commit
