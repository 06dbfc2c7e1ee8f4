"""Cost budgets: the shared Spend, a plan stopped at its next model call, the settings."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from pyfakefs.fake_filesystem import FakeFilesystem

from sandbox_runner.config import load_settings
from sandbox_runner.errors import ConfigError
from sandbox_runner.limits import RunLimits
from sandbox_runner.plans.pricing import estimate_cost
from sandbox_runner.plans.results import PlanResult, PlanStatus
from sandbox_runner.runs.multi import EXIT_PLAN_FAILED, exit_code
from sandbox_runner.runs.plan_job import PlanJob, run_plan
from sandbox_runner.spend import Spend, usd
from sandbox_runner.types import Usage
from tests.support.local_sandbox import LocalSandbox
from tests.support.scripted_model import ScriptedModel, reply, say, use
from tests.unit.test_plan_loop import VALID_PLAN

PRICED_MODEL = "claude-sonnet-4-6"
ONE_TURN = estimate_cost(PRICED_MODEL, Usage(input_tokens=100, output_tokens=25))
"""What one scripted reply (100 tokens in, 25 out) costs at list price."""


def test_spend_charges_priced_calls_and_says_when_it_is_spent() -> None:
    spend = Spend(0.001)
    spend.charge(ONE_TURN)
    assert spend.spent == ONE_TURN
    assert not spend.exhausted() and spend.left() == pytest.approx(0.001 - (ONE_TURN or 0))
    spend.charge(estimate_cost(PRICED_MODEL, Usage(1000, 250)))
    assert spend.exhausted() and spend.left() == 0.0
    assert spend.reason().startswith("cost budget of $0.0010 reached ($0.0")


def test_an_unpriced_model_is_counted_but_never_stopped() -> None:
    spend = Spend(0.000001)
    spend.charge(estimate_cost("scripted", Usage(10**6, 10**6)))
    assert spend.unpriced_calls == 1 and spend.spent == 0.0 and not spend.exhausted()


def test_usd_reads_as_money() -> None:
    assert usd(0.00676) == "$0.0068" and usd(1234.5) == "$1,234.50" and usd(0.5) == "$0.50"


def _run(workspace: Path, out_dir: Path, model: ScriptedModel, limits: RunLimits) -> PlanResult:
    out_dir.mkdir(exist_ok=True)
    return run_plan(
        PlanJob("Add a --verbose flag"),
        workspace=workspace,
        out_dir=out_dir,
        model=model,
        model_id=PRICED_MODEL,
        sandbox_factory=lambda plan_dir: LocalSandbox(workspace, plan_dir),
        limits=limits,
    )


def _writes_then_reads() -> ScriptedModel:
    return ScriptedModel(
        [
            reply(use("Write", {"file_path": "/plan/plan.md", "content": VALID_PLAN})),
            reply(use("Read", {"file_path": "README.md"})),
            reply(say("done")),
        ]
    )


def test_a_budget_smaller_than_one_turn_stops_after_it_and_keeps_the_plan(
    sample_repo: Path, tmp_path: Path
) -> None:
    spend = Spend(0.0005)
    model = _writes_then_reads()
    result = _run(sample_repo, tmp_path / "out", model, RunLimits(spend=spend))
    assert len(model.requests) == 1
    assert result.status is PlanStatus.BUDGET and result.resumable
    assert result.reason.startswith("cost budget of $0.0005 reached")
    assert result.plan_path is not None and "--verbose" in result.plan_path.read_text()
    assert spend.spent == ONE_TURN
    assert exit_code([result], "") == EXIT_PLAN_FAILED


def test_the_per_plan_cap_stops_one_plan(sample_repo: Path, tmp_path: Path) -> None:
    model = _writes_then_reads()
    limits = RunLimits(max_cost_usd=0.001, spend=Spend(None))
    result = _run(sample_repo, tmp_path / "out", model, limits)
    assert len(model.requests) == 2  # 0.000675 after one turn, 0.00135 after two
    assert result.status is PlanStatus.BUDGET
    assert "cost budget of $0.0010 per plan reached" in result.reason


def test_a_spent_shared_budget_starts_no_further_call(sample_repo: Path, tmp_path: Path) -> None:
    spend = Spend(0.0005, spent_before=0.0005)
    model = _writes_then_reads()
    result = _run(sample_repo, tmp_path / "out", model, RunLimits(spend=spend))
    assert model.requests == [] and result.status is PlanStatus.BUDGET


# The settings: a project file may set or lower a cap, never raise or remove it

REPO = Path("/repo")
HOME = Path("/home/dev/.planrun")
PROJECT_YAML = REPO / ".planrun" / "config.yaml"


def _load_error() -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(REPO, env={}, home=HOME)
    return str(caught.value)


def test_a_project_file_cannot_raise_the_budget(fs: FakeFilesystem) -> None:
    fs.create_file(HOME / "config.yaml", contents="max_cost_usd: 2\n")
    fs.create_file(PROJECT_YAML, contents="max_cost_usd: 50\n")
    assert _load_error() == (
        f"{PROJECT_YAML}: key 'max_cost_usd' is 50.0, but a project config may only lower "
        f"'max_cost_usd' (at most 2.0 from the user config {HOME / 'config.yaml'})"
    )


def test_a_project_file_cannot_remove_the_budget(fs: FakeFilesystem) -> None:
    fs.create_file(HOME / "config.yaml", contents="max_cost_usd_per_plan: 1\n")
    fs.create_file(PROJECT_YAML, contents="max_cost_usd_per_plan: null\n")
    assert "may only lower 'max_cost_usd_per_plan'" in _load_error()


def test_a_project_file_may_set_and_lower_a_budget(fs: FakeFilesystem) -> None:
    fs.create_file(HOME / "config.yaml", contents="max_cost_usd: 2\n")
    fs.create_file(PROJECT_YAML, contents="max_cost_usd: 0.5\nmax_cost_usd_per_plan: 0.2\n")
    loaded = load_settings(REPO, env={}, home=HOME)
    limits = loaded.run_limits()
    assert limits.max_cost_usd == 0.2
    assert limits.spend is not None and limits.spend.max_usd == 0.5


def test_the_environment_and_flags_set_the_budget(fs: FakeFilesystem) -> None:
    fs.create_dir(REPO)
    env = {"PLANRUN_MAX_COST_USD": "3.5"}
    assert load_settings(REPO, env=env, home=HOME).settings.max_cost_usd == 3.5
    flags = {"max_cost_usd": 1.25}
    assert load_settings(REPO, env=env, flags=flags, home=HOME).settings.max_cost_usd == 1.25
    fs.create_file(HOME / "config.yaml", contents="max_cost_usd: -1\n")
    assert "must be an amount in US dollars above 0" in _load_error()


def test_a_budget_shipped_to_another_process_keeps_what_was_spent() -> None:
    spend = Spend(1.0, spent_before=0.25)
    copy = pickle.loads(pickle.dumps(spend))
    copy.charge(0.5)
    assert copy.spent == 0.75 and spend.spent == 0.25  # a copy: the driver counts it later
    spend.at_least(0.75)
    assert spend.left() == 0.25
