"""A session's cost budget: it stops a turn with a clear line, and /cost shows it and
each Task subagent's usage (a scripted model, local sandboxes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_runner.agents.registry import Registry
from sandbox_runner.limits import RunLimits
from sandbox_runner.plans.pricing import estimate_cost
from sandbox_runner.session.commands import Commands
from sandbox_runner.session.interactive import session_limits
from sandbox_runner.session.session import Session
from sandbox_runner.session.state import SessionStore
from sandbox_runner.spend import Spend, usd
from sandbox_runner.types import Usage
from tests.support.scripted_model import reply, say, use
from tests.unit.test_session import FakeUI, LocalSandboxes, Models

ONE_TURN = estimate_cost("claude-sonnet-4-6", Usage(input_tokens=1000, output_tokens=250)) or 0.0
"""A scripted reply of 1,000 tokens at Sonnet's list price: $0.00675."""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('hi')\n")
    return root


def budgeted(workspace: Path, tmp_path: Path, models: Models, ui: FakeUI, usd: float) -> Session:
    store, state = SessionStore.create(workspace, "claude-sonnet-4-6")
    return Session(
        store,
        state,
        workspace=workspace,
        registry=Registry.load(workspace),
        sandboxes=LocalSandboxes(workspace, tmp_path),
        model=models,
        ui=ui,
        limits=RunLimits(max_turns=20, spend=Spend(usd)),
    )


@pytest.fixture
def models() -> Models:
    return Models({})


@pytest.fixture
def ui() -> FakeUI:
    return FakeUI()


@pytest.fixture
def session(workspace: Path, tmp_path: Path, models: Models, ui: FakeUI) -> Iterator[Session]:
    made = budgeted(workspace, tmp_path, models, ui, ONE_TURN / 2)
    yield made
    made.close()


def test_the_budget_stops_a_turn_with_a_clear_line(
    session: Session, models: Models, ui: FakeUI
) -> None:
    read = use("Read", {"file_path": "src/app.py"})
    models.scripts["work"] = [reply(read, tokens=1000), reply(say("It prints hi."), tokens=1000)]
    session.send("what does the app do?")
    assert len(models.made["work"].requests) == 1
    assert ui.shown[-1] == (
        f"stopped: cost budget of {usd(ONE_TURN / 2)} reached ({usd(ONE_TURN)} spent); /cost "
        "shows it; resume with a higher --max-cost-usd (or max_cost_usd) to go on"
    )
    lines = Commands(session).run("/cost").lines
    assert lines[-1] == f"budget: ${ONE_TURN:.4f} of ${ONE_TURN / 2:.4f} used, $0.0000 left"


def test_cost_has_a_line_per_task_subagent(
    workspace: Path, tmp_path: Path, models: Models, ui: FakeUI
) -> None:
    task = {"description": "d", "prompt": "find main", "subagent_type": "Explore"}
    models.scripts["work"] = [reply(use("Task", task), tokens=1000), reply(say("Done."))]
    models.scripts["task"] = [reply(say("main is in src/app.py."), tokens=400)]
    session = budgeted(workspace, tmp_path, models, ui, 1.0)
    try:
        session.send("find main")
        lines = Commands(session).run("/cost").lines
    finally:
        session.close()
    [subagent] = [line for line in lines if " work/task-" in line]
    assert "Explore: 400 input, 100 output" in subagent
    spent = session.limits.spend.spent if session.limits.spend else 0.0
    assert lines[-1] == f"budget: ${spent:.4f} of $1.0000 used, ${1.0 - spent:.4f} left"


def test_a_resumed_session_counts_what_it_cost_before(workspace: Path) -> None:
    class Loaded:
        def run_limits(self) -> RunLimits:
            return RunLimits(spend=Spend(1.0))

    _, state = SessionStore.create(workspace, "claude-sonnet-4-6")
    state.cost_usd = 0.4
    limits = session_limits(Loaded(), state)  # type: ignore[arg-type]
    assert limits.spend is not None and limits.spend.left() == pytest.approx(0.6)
