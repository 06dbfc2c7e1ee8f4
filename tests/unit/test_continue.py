"""Going on with a stopped run's conversation: the transcript read back (and repaired where
a killed run left it unfinished), and a plan run that continues instead of starting over."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.agents.conversation import NOT_RUN, saved_conversation, transcript_lines
from sandbox_runner.errors import SandboxDiedError
from sandbox_runner.limits import RunLimits
from sandbox_runner.model.errors import (
    ContextBudgetError,
    MalformedAnswerError,
    ModelAPIError,
    ModelError,
)
from sandbox_runner.plans.results import PlanResult, PlanStatus
from sandbox_runner.runs.plan_job import EarlierAttempt, PlanJob, run_plan
from sandbox_runner.types import ModelRequest
from tests.support.local_sandbox import LocalSandbox
from tests.support.scripted_model import ScriptedModel, Step, reply, say, use
from tests.unit.test_plan_loop import VALID_PLAN

OVERLOADED = ModelAPIError("the Anthropic API is overloaded", status=529, attempts=5)
DRAFT = "# Add a --verbose flag\n\n## Understanding\nA first draft.\n"


def entry(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, "time": 0, **fields})


def assistant(*blocks: dict[str, Any], tokens: int = 10) -> str:
    usage = {"input_tokens": tokens, "output_tokens": 1}
    return entry("assistant", content=list(blocks), stop_reason="tool_use", usage=usage)


def result_of(block: dict[str, Any], content: str = "ok") -> str:
    return entry(
        "tool_result", call_id=block["id"], name=block["name"], input={}, is_error=False,
        content=content,
    )  # fmt: skip


def test_a_transcript_gives_back_the_conversation_and_its_counters() -> None:
    ls, read = use("LS", {}), use("Read", {"file_path": "a"})
    lines = [
        entry("system", text="the prompt", tools=["LS"], model="claude-x"),
        entry("user", text="the task"),
        assistant(ls, tokens=10),
        result_of(ls),
        entry("user", text="a note"),
        assistant(read, tokens=20),
        result_of(read, "contents"),
    ]
    saved = saved_conversation(lines)
    assert saved.intact and saved.unanswered == []
    assert (saved.system, saved.model) == ("the prompt", "claude-x")
    assert (saved.turns, saved.tool_calls, saved.usage.input_tokens) == (2, 2, 30)
    assert [m["role"] for m in saved.messages] == ["user", "assistant", "user", "assistant", "user"]
    assert saved.messages[2]["content"][1] == {"type": "text", "text": "a note"}
    assert saved.messages[4]["content"][0]["content"] == "contents"


def test_a_run_killed_during_a_call_leaves_a_conversation_that_can_go_on() -> None:
    first, second = use("Read", {"file_path": "a"}), use("Read", {"file_path": "b"})
    lines = [
        entry("system", text="p", model="m"),
        entry("user", text="task"),
        assistant(first, second),
        result_of(first),
        '{"type": "tool_result", "call_id": "tor',  # the kill tore the last line
    ]
    saved = saved_conversation(lines)
    assert saved.intact
    assert [call.id for call in saved.unanswered] == [second["id"]]
    answers = saved.messages[-1]["content"]
    assert [a["tool_use_id"] for a in answers] == [first["id"], second["id"]]
    assert answers[1]["content"] == NOT_RUN and answers[1]["is_error"]
    assert len(saved.lines) == 4


@pytest.mark.parametrize(
    "damage",
    [
        "not json at all",
        entry(
            "tool_result", call_id="toolu_nobody", name="LS", input={}, is_error=False, content="x"
        ),
    ],
)
def test_a_damaged_line_before_the_last_means_it_cannot_go_on(damage: str) -> None:
    ls = use("LS", {})
    lines = [entry("system", text="p", model="m"), entry("user", text="t"), damage]
    lines += [assistant(ls), result_of(ls)]
    assert saved_conversation(lines).damaged == 1
    assert not saved_conversation(lines).intact


def test_a_conversation_without_an_answer_of_the_model_is_nothing_to_go_on_with() -> None:
    assert not saved_conversation([entry("system", text="p"), entry("user", text="t")]).intact
    assert not saved_conversation([]).intact


def test_a_compacted_conversation_goes_on_from_its_summary() -> None:
    ls = use("LS", {})
    lines = [entry("system", text="p", model="m"), entry("user", text="t"), assistant(ls)]
    lines += [result_of(ls), entry("compacted", summary="so far: listed files")]
    saved = saved_conversation(lines)
    assert saved.intact and len(saved.messages) == 1
    assert "so far: listed files" in saved.messages[0]["content"][0]["text"]


class Planner:
    """Runs the job in the sample workspace, each run in an out directory of its own."""

    def __init__(self, workspace: Path, root: Path) -> None:
        self.workspace, self.root, self.runs = workspace, root, 0

    def __call__(
        self,
        steps: list[Step],
        *,
        earlier: EarlierAttempt | None = None,
        job: PlanJob | None = None,
        limits: RunLimits | None = None,
        cancel: threading.Event | None = None,
    ) -> tuple[PlanResult, ScriptedModel]:
        self.runs += 1
        out_dir = self.root / f"run-{self.runs}"
        out_dir.mkdir(parents=True)
        model = ScriptedModel(steps)
        result = run_plan(
            job or PlanJob("Add a --verbose flag"),
            workspace=self.workspace,
            out_dir=out_dir,
            model=model,
            model_id="claude-test",
            sandbox_factory=lambda plan_dir: LocalSandbox(self.workspace, plan_dir),
            limits=limits,
            cancel=cancel,
            earlier=earlier,
        )
        return result, model


@pytest.fixture
def planner(sample_repo: Path, tmp_path: Path) -> Planner:
    return Planner(sample_repo, tmp_path / "runs")


def earlier_of(result: PlanResult) -> EarlierAttempt:
    assert result.transcript is not None
    plan = result.plan_path.read_text() if result.plan_path else None
    return EarlierAttempt(result.transcript.read_text(), plan, result.reason)


def explore_then_fail(failure: Exception) -> list[Step]:
    return [
        reply(use("Read", {"file_path": "src/app.py"})),
        reply(use("Write", {"file_path": "/plan/plan.md", "content": DRAFT})),
        failure,
    ]


def test_a_run_the_api_failed_goes_on_with_its_conversation_and_draft(planner: Planner) -> None:
    first, _ = planner(explore_then_fail(OVERLOADED))
    assert first.status is PlanStatus.FAILED and first.resumable and not first.continued
    edit = {"file_path": "/plan/plan.md", "old_string": DRAFT, "new_string": VALID_PLAN}
    second, model = planner(
        [reply(use("Edit", edit)), reply(say("Done.")), reply(say("Done."))],
        earlier=earlier_of(first),
    )
    assert second.continued and second.valid, second.reason
    # The exploration was not paid for again: the first call carries the whole conversation.
    sent = model.requests[0].messages
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    note = sent[-1]["content"][-1]["text"]
    assert "the Anthropic API is overloaded" in note and "holds what you had written" in note
    assert second.turns == 2 + len(model.requests)  # the two the model answered, then these
    assert second.usage.total > first.usage.total
    assert second.transcript is not None and first.transcript is not None
    old = first.transcript.read_text().splitlines()
    new = second.transcript.read_text().splitlines()
    assert new[: len(old)] == old  # the transcript is the whole conversation


def test_a_call_the_kill_cut_short_is_answered_as_not_run(planner: Planner) -> None:
    first, _ = planner(explore_then_fail(OVERLOADED))
    assert first.transcript is not None
    lines = first.transcript.read_text().splitlines()
    cut = [line for line in lines if json.loads(line)["type"] not in ("tool_result", "result")]
    earlier = EarlierAttempt("\n".join(cut[:-1]), None, "killed")
    _, model = planner([reply(say(VALID_PLAN)), reply(say(VALID_PLAN))], earlier=earlier)
    answers = model.requests[0].messages[-1]["content"]
    assert answers[0]["content"] == NOT_RUN and answers[0]["is_error"]
    assert "You had not written /plan/plan.md yet" in answers[-1]["text"]


def test_a_conversation_held_under_another_prompt_starts_over(planner: Planner) -> None:
    first, _ = planner(explore_then_fail(OVERLOADED))
    second, model = planner(
        [reply(say(VALID_PLAN))], earlier=earlier_of(first), job=PlanJob("Add it", "security")
    )
    assert not second.continued
    assert len(model.requests[0].messages) == 1


def test_a_damaged_transcript_starts_over(planner: Planner) -> None:
    first, _ = planner(explore_then_fail(OVERLOADED))
    earlier = earlier_of(first)
    lines = earlier.transcript.splitlines()
    lines[2] = lines[2][:20]
    damaged = EarlierAttempt("\n".join(lines), earlier.plan, earlier.reason)
    second, model = planner([reply(say(VALID_PLAN))], earlier=damaged)
    assert not second.continued and len(model.requests[0].messages) == 1


@pytest.mark.parametrize(
    ("failure", "resumable"),
    [
        (OVERLOADED, True),
        (ModelAPIError("refused", status=401), True),
        (ModelAPIError("connection reset"), True),
        (SandboxDiedError("the container was killed"), True),
        (ModelAPIError("prompt is too long", status=400), False),
        (ContextBudgetError(300_000, 200_000), False),
        (ModelError("ANTHROPIC_API_KEY is not set"), True),
    ],
)
def test_only_failures_outside_the_conversation_are_resumable(
    planner: Planner, failure: Exception, resumable: bool
) -> None:
    result, _ = planner(explore_then_fail(failure))
    assert result.status is PlanStatus.FAILED
    assert result.resumable is resumable


def test_an_interrupted_run_is_resumable_and_a_limit_is_not(planner: Planner) -> None:
    cancel = threading.Event()

    def stop(request: ModelRequest) -> Any:
        cancel.set()
        return reply(use("LS", {}))

    interrupted, _ = planner([reply(use("LS", {})), stop], cancel=cancel)
    assert interrupted.reason == "interrupted" and interrupted.resumable
    steps: list[Step] = [reply(use("LS", {})) for _ in range(3)]
    steps.append(reply(say("no plan")))
    limited, _ = planner(steps, limits=RunLimits(max_turns=3))
    assert limited.status is PlanStatus.INCOMPLETE and not limited.resumable
    invalid, _ = planner([reply(say("# Plan\n\n## Approach\nthin")), reply(say("# Plan\n\nno"))])
    assert invalid.status is PlanStatus.COMPLETE and not invalid.valid
    assert not invalid.resumable


def test_a_call_whose_input_is_not_an_object_does_not_damage_the_conversation() -> None:
    odd = {"type": "tool_use", "id": "toolu_odd", "name": "Read", "input": "src/app.py"}
    ls = use("LS", {})
    lines = [entry("system", text="p", model="m"), entry("user", text="t"), assistant(odd)]
    lines += [result_of(odd, "input must be an object"), assistant(ls), result_of(ls)]
    saved = saved_conversation(lines)
    assert saved.intact and saved.turns == 2 and len(saved.messages) == 5


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_line_separators_inside_an_entry_do_not_split_it(
    planner: Planner, sample_repo: Path, separator: str
) -> None:
    (sample_repo / "odd.txt").write_text(f"one{separator}two\n")
    first, _ = planner([reply(use("Read", {"file_path": "odd.txt"})), OVERLOADED])
    second, model = planner(
        [reply(say(VALID_PLAN)), reply(say("Done."))], earlier=earlier_of(first)
    )
    assert second.continued
    assert separator in json.dumps(model.requests[0].messages, ensure_ascii=False)


@pytest.mark.parametrize("content", ['"text"', '{"type": "text"}', "[1]"])
def test_an_answer_whose_content_is_not_a_list_of_blocks_is_damage(content: str) -> None:
    ls = use("LS", {})
    odd = '{"type": "assistant", "content": ' + content + "}"
    lines = [entry("system", text="p", model="m"), entry("user", text="t"), odd]
    lines += [assistant(ls), result_of(ls)]
    assert saved_conversation(lines).damaged == 1


def test_usage_read_back_is_never_negative() -> None:
    ls = use("LS", {})
    answer = entry("assistant", content=[ls], usage={"input_tokens": -(10**18)})
    saved = saved_conversation([entry("system", text="p"), entry("user", text="t"), answer])
    assert saved.usage.total == 0


def test_a_model_that_keeps_sending_unreadable_tool_input_is_not_resumable(
    planner: Planner,
) -> None:
    unreadable = MalformedAnswerError("the model kept streaming tool input that is not JSON")
    result, _ = planner(explore_then_fail(unreadable))
    assert result.status is PlanStatus.FAILED and not result.resumable


def test_a_turn_of_too_many_calls_is_rebuilt_as_it_was_sent(planner: Planner) -> None:
    calls = [use("LS", {}) for _ in range(34)]
    first, model = planner([reply(*calls), reply(say(VALID_PLAN)), reply(say("Done."))])
    assert first.transcript is not None
    lines = transcript_lines(first.transcript.read_text())
    sent = model.requests[1].messages
    assert saved_conversation(lines).messages[: len(sent)] == sent
