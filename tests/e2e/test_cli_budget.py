"""Cost budgets end to end: `planrun plan` against the fake Messages API, real sandboxes."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from sandbox_runner.cli import cli
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use
from tests.support.plan_scripts import PerspectiveScript, writes_plan
from tests.unit.test_plan_loop import VALID_PLAN
from tests.unit.test_synthesis import RECOMMENDED_PLAN

ONE_TURN_USD = 10 * 3e-6 + 5 * 15e-6
"""The fake API's default usage (10 tokens in, 5 out) at the default model's list price."""


def plan(*args: str) -> Result:
    return CliRunner().invoke(cli, ["plan", *args], catch_exceptions=False)


def test_a_budget_smaller_than_one_turn_stops_the_plan_and_writes_the_report(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path, sandbox_image: str
) -> None:
    api.script = PerspectiveScript(
        {
            "security": [
                message(
                    tool_use("Write", {"file_path": "/plan/security.md", "content": VALID_PLAN})
                ),
                message(tool_use("Read", {"file_path": "src/app.py"})),
                message(text("done")),
            ]
        }
    )
    out = tmp_path / "out"
    budget = f"{ONE_TURN_USD / 2:.6f}"
    result = plan(
        "Add a flag", "--repo", str(sample_repo), "--perspective", "security",
        "--out", str(out), "--max-cost-usd", budget,
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert len(api.message_requests) == 1
    assert "goes on with the plans the cost budget stopped" in result.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "budget" and report["exit_code"] == 1
    assert report["budget"] == {
        "max_cost_usd": float(budget), "max_cost_usd_per_plan": None, "reached": True,
    }  # fmt: skip
    [entry] = report["plans"]
    assert entry["status"] == "budget" and entry["resumable"]
    assert entry["reason"].startswith(f"cost budget of ${float(budget):.4f} reached")
    assert "--verbose" in (out / "security.md").read_text()
    assert "💸 budget: the cost budget stopped the run" in (out / "report.md").read_text()
    assert "reached (the plans it stopped have status budget)" in (out / "report.html").read_text()


def test_dry_run_estimates_and_starts_nothing(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = ["Add a flag", "--repo", str(sample_repo), "--out", str(out), "--dry-run"]
    args += ["--perspective", "security", "--perspective", "simplicity", "--max-cost-usd", "2"]
    args += ["--max-cost-usd-per-plan", "0.5"]
    result = plan(*args)
    assert result.exit_code == 0, result.output
    assert "nothing was started and nothing was paid" in result.stdout
    assert "plan security: security; agent Plan, model claude-sonnet-4-6" in result.stdout
    assert "budget: $2.00 per run, $0.50 per plan" in result.stdout
    assert "estimate, every turn: ~" in result.stdout
    estimate = json.loads(plan(*args, "--json").stdout)
    first, second = estimate["plans"]
    assert second["label"] == "simplicity" and second["perspective"] == "simplicity"
    assert first["prompt_tokens"] > 1000 and first["max_turns"] == 40
    assert estimate["totals"]["one_turn"]["cost_usd"] > 0
    assert estimate["sandboxes"] == 2 and estimate["synthesis"] is True
    assert estimate["max_cost_usd"] == 2.0 and estimate["max_cost_usd_per_plan"] == 0.5
    assert api.message_requests == [] and not out.exists()


def test_a_batch_budget_skips_later_jobs_and_a_higher_one_resumes_them(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path, sandbox_image: str
) -> None:
    labels = ("simplicity", "security")
    api.script = PerspectiveScript(
        {
            **{label: writes_plan(label, VALID_PLAN) for label in labels},
            "recommended": writes_plan("recommended", RECOMMENDED_PLAN),
        }
    )
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        f"defaults:\n  repo: {sample_repo}\n  perspectives: [{', '.join(labels)}]\n"
        "tasks:\n  - id: alpha\n    requirements: Plan alpha.\n"
    )
    out = tmp_path / "out"
    command = ["batch", str(batch), "--out", str(out), "--parallel", "1", "--json"]
    first = CliRunner().invoke(cli, [*command, "--max-cost-usd", f"{ONE_TURN_USD / 2:.6f}"])
    assert first.exit_code == 1, first.output
    jobs = {job["key"]: job for job in json.loads(first.stdout)["jobs"]}
    assert {key: job["status"] for key, job in jobs.items()} == {
        "alpha/simplicity": "budget",
        "alpha/security": "budget",
    }
    assert jobs["alpha/security"]["reason"].startswith("not started: cost budget of")
    assert json.loads(first.stdout)["counts"] == {"budget": 2}
    assert len(api.message_requests) == 1  # the first job's first turn, nothing after it
    ledger = (out / "results.jsonl").read_text()

    # The same budget again: the batch has spent it, so nothing starts and nothing is added.
    again = CliRunner().invoke(cli, [*command, "--max-cost-usd", f"{ONE_TURN_USD / 2:.6f}"])
    assert again.exit_code == 2, again.output
    assert again.stderr.startswith("Error: batch out has spent $0.0001 already")
    assert "a higher --max-cost-usd" in again.stderr and again.stderr.count("\n") == 1
    assert (out / "results.jsonl").read_text() == ledger and len(api.message_requests) == 1

    second = CliRunner().invoke(cli, [*command, "--max-cost-usd", "10"])
    assert second.exit_code == 0, second.output
    statuses = {job["key"]: job["status"] for job in json.loads(second.stdout)["jobs"]}
    assert set(statuses.values()) == {"complete"} and "alpha/recommended" in statuses
    # The stopped job went on with its conversation (2 more turns), the other ran all 3,
    # then the task's synthesis its 3.
    assert len(api.message_requests) == 1 + 2 + 3 + 3


def test_a_budget_spent_by_the_plans_skips_the_synthesis(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path, sandbox_image: str
) -> None:
    labels = ("simplicity", "security")
    api.script = PerspectiveScript({label: writes_plan(label, VALID_PLAN) for label in labels})
    out = tmp_path / "out"
    arguments = ["x", "--repo", str(sample_repo), "--out", str(out), "--json"]
    arguments += ["--perspective", "simplicity", "--perspective", "security"]
    # Six turns (three a plan) pass: the sixth starts below the budget and ends above it.
    result = plan(*arguments, "--max-cost-usd", f"{ONE_TURN_USD * 5.5:.6f}")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [entry["status"] for entry in report["plans"]] == ["complete", "complete"]
    assert report["synthesis"]["state"] == "skipped"
    assert report["synthesis"]["note"].startswith("not started: cost budget of")
    assert len(api.message_requests) == 6 and report["budget"]["reached"] is False


def test_a_run_stopped_by_its_budget_is_resumed_with_a_higher_one(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path, sandbox_image: str
) -> None:
    api.script = PerspectiveScript({"security": writes_plan("security", VALID_PLAN)})
    out = tmp_path / "out"
    first = plan(
        "Add a flag", "--repo", str(sample_repo), "--perspective", "security",
        "--out", str(out), "--max-cost-usd", f"{ONE_TURN_USD / 2:.6f}",
    )  # fmt: skip
    assert first.exit_code == 1 and len(api.message_requests) == 1, first.output
    assert f"planrun plans resume {out} --max-cost-usd USD" in first.stdout
    spent = json.loads((out / "report.json").read_text())["totals"]["cost_usd"]
    assert spent == round(ONE_TURN_USD, 6)

    def resume(*flags: str) -> Result:
        arguments = ["plans", "resume", str(out), *flags, "--json"]
        return CliRunner().invoke(cli, arguments, catch_exceptions=False)

    # Its recorded budget, or a new one below what it spent: nothing starts.
    for flags in ((), ("--max-cost-usd", f"{ONE_TURN_USD / 2:.6f}")):
        refused = resume(*flags)
        assert refused.exit_code == 2, refused.output
        assert refused.stderr.startswith(f"Error: run {out} has spent $0.0001 already")
        assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert len(api.message_requests) == 1 and not (out / ".attempts").exists()

    # Half a turn more: what it spent counts, so one more call, and the budget stops it.
    tight = resume("--max-cost-usd", f"{ONE_TURN_USD * 1.5:.8f}")
    assert tight.exit_code == 1, tight.output
    assert len(api.message_requests) == 2
    [entry] = json.loads(tight.stdout)["plans"]
    assert entry["status"] == "budget" and entry["continued"]

    # Enough: it goes on with its conversation to the end, under the budget it was given,
    # which run.json keeps for a later resume.
    done = resume("--max-cost-usd", "10")
    assert done.exit_code == 0, done.output
    assert len(api.message_requests) == 3  # its third and last turn
    report = json.loads(done.stdout)
    assert report["status"] == "ok" and report["budget"]["max_cost_usd"] == 10.0
    assert json.loads((out / "run.json").read_text())["request"]["overrides"] == {
        "max_cost_usd": 10.0
    }
