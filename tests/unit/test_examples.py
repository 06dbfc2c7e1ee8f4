"""The shipped examples stay in step with the command line."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import yaml
from click.testing import CliRunner

from sandbox_runner.cli import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_github_workflow_plans_with_real_options_and_uploads_the_report() -> None:
    workflow = yaml.safe_load((EXAMPLES / "github-actions" / "plan-from-issue.yml").read_text())
    steps = workflow["jobs"]["plan"]["steps"]
    plan_step = next(step for step in steps if step.get("id") == "plan")
    command = plan_step["run"]
    assert "planrun plan" in command and "--json" in command
    help_text = CliRunner().invoke(cli, ["plan", "--help"]).output
    for option in ("-f", "--repo", "--perspective", "--out", "--json"):
        assert option in command
        assert option in help_text
    upload = next(step for step in steps if "upload-artifact" in step.get("uses", ""))
    assert upload["if"] == "always()"
    assert "ANTHROPIC_API_KEY" in plan_step["env"]
    # The job's token never sits in .git/config, where a sandbox could read it.
    checkout = next(step for step in steps if step.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["persist-credentials"] is False


def test_verify_workflow_finds_the_linked_plan_and_uses_real_options() -> None:
    workflow = yaml.safe_load((EXAMPLES / "github-actions" / "verify-plan.yml").read_text())
    steps = workflow["jobs"]["verify"]["steps"]
    find = next(step for step in steps if step.get("id") == "plan")
    bodies = {
        "Due dates.\r\n\r\nplan: docs/plans/due.md\r\n": "docs/plans/due.md",
        "  plan: `plans/x.md`\nplan: second.md\n": "plans/x.md",
        "no plan here; $(touch /tmp/pwned)\n": "",
        "plan: a.md; rm -rf /\n": "",
    }
    for body, expected in bodies.items():
        output = Path(tempfile.mkstemp()[1])
        env = {"PR_BODY": body, "GITHUB_OUTPUT": str(output), "PATH": "/usr/bin:/bin"}
        subprocess.run(["bash", "-e", "-c", find["run"]], env=env, check=True)
        assert output.read_text() == f"path={expected}\n", body
        output.unlink()
    verify_step = next(step for step in steps if "planrun verify" in step.get("run", ""))
    help_text = CliRunner().invoke(cli, ["verify", "--help"]).output
    for option in ("--base", "--strict"):
        assert option in verify_step["run"] and option in help_text
    checkout = next(step for step in steps if step.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0


def test_demo_cassettes_play_in_order() -> None:
    from sandbox_runner.model.replay import load_cassette

    for name in ("simplicity", "performance", "recommended"):
        responses = load_cassette(EXAMPLES / "cassettes" / "due-dates" / f"{name}.jsonl")
        assert responses[-1]["stop_reason"] == "end_turn"
        writes = [
            block
            for response in responses
            for block in response["content"]
            if block.get("type") == "tool_use" and block["name"] == "Write"
        ]
        assert [w["input"]["file_path"] for w in writes] == [f"/plan/{name}.md"]


def test_the_demo_recommended_plan_is_valid_and_says_where_each_decision_came_from() -> None:
    from sandbox_runner.agents.synthesis import synthesis_sections
    from sandbox_runner.model.replay import load_cassette
    from sandbox_runner.plans.validate import extract_section, validate_plan

    responses = load_cassette(EXAMPLES / "cassettes" / "due-dates" / "recommended.jsonl")
    plan = next(
        block["input"]["content"]
        for response in responses
        for block in response["content"]
        if block.get("type") == "tool_use" and block["name"] == "Write"
    )
    check = validate_plan(
        plan, sections=list(synthesis_sections(None)), workspace=EXAMPLES / "demo-repo"
    )
    assert check.ok, check.problems
    decisions = (extract_section(plan, "Decisions") or "").splitlines()
    assert decisions and all(
        "simplicity" in line or "performance" in line for line in decisions if line.strip()
    )
    assert "performance" in (extract_section(plan, "Conflicts") or "")
