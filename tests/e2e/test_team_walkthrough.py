"""docs/teams.md, followed literally: its backlog and its commands, run as a user runs them
(the `planrun` CLI as a subprocess in a small git repository, real sandboxes, the fake
Messages API answering every perspective and each task's synthesis)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import make_sample_repo
from tests.e2e.test_cli_budget import ONE_TURN_USD
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use
from tests.support.git_run import GIT_ENV, git
from tests.support.plan_scripts import PerspectiveScript, writes_plan
from tests.unit.test_plan_loop import VALID_PLAN
from tests.unit.test_synthesis import RECOMMENDED_PLAN

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "teams.md"
TASKS = ("due-dates", "rate-limit")
"""The page's first two tasks, each planned from its two default perspectives."""
BATCH = "planrun batch backlog.yaml --out ~/.planrun/batches/q1 --max-cost-usd 25"
DRAFT = VALID_PLAN.split("## Risks")[0]
"""A first draft without its last sections: invalid, so validation sends it feedback."""


def page_script() -> PerspectiveScript:
    """simplicity writes its plan; security writes a draft, is told what it lacks and fixes
    it (a second validation round); each task's synthesis writes the recommended plan."""
    security = [
        message(tool_use("Glob", {"pattern": "**/*.py"})),
        message(tool_use("Write", {"file_path": "/plan/security.md", "content": DRAFT})),
        message(text("The plan is in /plan/security.md.")),
        message(tool_use("Write", {"file_path": "/plan/security.md", "content": VALID_PLAN})),
        message(text("Fixed: the plan is in /plan/security.md.")),
    ]
    return PerspectiveScript(
        {
            "simplicity": writes_plan("simplicity", VALID_PLAN),
            "security": security,
            "recommended": writes_plan("recommended", RECOMMENDED_PLAN),
        }
    )


def page_commands() -> list[str]:
    """Every line of the page's `sh` blocks, its comment cut off."""
    blocks = re.findall(r"```sh\n(.*?)```", PAGE.read_text(), re.DOTALL)
    lines = (line.split("  #")[0].strip() for block in blocks for line in block.splitlines())
    return [line for line in lines if line]


def command(line: str) -> list[str]:
    """LINE as words, once the page is seen to hold it as written."""
    assert line in page_commands(), f"docs/teams.md no longer says `{line}`"
    return shlex.split(line)


@dataclass
class Team:
    """A repository with the page's backlog, and how to run planrun in it."""

    repo: Path
    env: dict[str, str]

    @property
    def batch(self) -> Path:
        """The page's batch directory, `~/.planrun/batches/q1`."""
        return Path(self.env["HOME"]) / ".planrun" / "batches" / "q1"

    def run(self, words: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """WORDS (`planrun ...` or another program) in the repository, a leading `~/` of
        a word expanded as a shell does."""
        words = [self.env["HOME"] + word[1:] if word.startswith("~/") else word for word in words]
        program = [sys.executable, "-m", "sandbox_runner"] if words[0] == "planrun" else []
        done = subprocess.run(
            [*program, *(words[1:] if program else words)],
            cwd=self.repo, env=self.env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        return done


def make_team(root: Path, api: FakeMessagesAPI) -> Team:
    """The page's step 1 in a small git repository: its backlog cut to two tasks, and the
    issue its first task reads. Its user's home is ROOT/home (no PLANRUN_HOME)."""
    repo = make_sample_repo(root / "repo")
    backlog = yaml.safe_load(re.findall(r"```yaml\n(.*?)```", PAGE.read_text(), re.DOTALL)[0])
    backlog["tasks"] = [task for task in backlog["tasks"] if task["id"] in TASKS]
    assert [task["id"] for task in backlog["tasks"]] == list(TASKS)
    assert backlog["defaults"]["perspectives"] == ["simplicity", "security"]
    (repo / "backlog.yaml").write_text(yaml.safe_dump(backlog, sort_keys=False))
    issue = repo / backlog["tasks"][0]["requirements_file"]
    issue.parent.mkdir(parents=True)
    issue.write_text("Let each to-do item have a due date.\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "start")
    env = {key: value for key, value in os.environ.items() if key != "PLANRUN_HOME"}
    env |= {
        "HOME": str(root / "home"),
        "PYTHONPATH": str(ROOT),
        "ANTHROPIC_BASE_URL": api.base_url,
        "ANTHROPIC_API_KEY": "test-key",
        "CLAUDE_CONFIG_DIR": str(root / "claude-home"),
        **GIT_ENV,
    }
    return Team(repo, env)


@dataclass
class Planned:
    """The page's step 2, run once: its dry run, then its batch."""

    team: Team
    dry_run: subprocess.CompletedProcess[str]
    dry_run_requests: int
    batch: subprocess.CompletedProcess[str]

    @property
    def out(self) -> Path:
        """The batch directory."""
        return self.team.batch


@pytest.fixture(scope="module")
def planned(
    tmp_path_factory: pytest.TempPathFactory, sandbox_image: str, docker_client: Any
) -> Iterator[Planned]:
    with FakeMessagesAPI(page_script()) as api:
        team = make_team(tmp_path_factory.mktemp("team"), api)
        dry_run = team.run(command(f"{BATCH} --dry-run"))
        asked = len(api.message_requests)
        assert not team.batch.exists()
        batch = team.run(command(BATCH))
        leftovers = docker_client.containers.list(
            all=True, filters={"label": "io.planrun.session=batch-q1"}
        )
        assert leftovers == []
        yield Planned(team, dry_run, asked, batch)


def test_the_dry_run_lists_every_job_with_an_estimate_and_pays_nothing(planned: Planned) -> None:
    assert planned.dry_run.returncode == 0, planned.dry_run.stderr
    for task in TASKS:
        for label in ("simplicity", "security", "recommended"):
            assert re.search(
                rf"^run +{task}/{label} +\(~[\d,]+ prompt tokens", planned.dry_run.stdout, re.M
            )
    assert "6 of 6 job(s) would run" in planned.dry_run.stderr
    assert re.search(r"Estimate: one turn of each job ~[\d,]+ tokens, \$", planned.dry_run.stderr)
    assert planned.dry_run_requests == 0


def test_the_batch_writes_one_recommended_plan_per_task_and_names_the_next_step(
    planned: Planned,
) -> None:
    assert planned.batch.returncode == 0, planned.batch.stdout + planned.batch.stderr
    lines = planned.batch.stdout.splitlines()
    assert "Batch q1: complete 6" in lines
    for task in TASKS:
        plan = (planned.out / "tasks" / task / "recommended.md").read_text()
        assert plan.startswith("---\nid: ") and "# Add a --verbose flag (recommended)" in plan
    # The last line hands the first task's plan on, as step 4 does.
    export = "planrun plans export batch:q1/due-dates --for claude"
    assert lines[-1] == f"Next: `{export}` hands its recommended plan to a coding agent"
    assert git(planned.team.repo, "status", "--porcelain") == ""  # the repository is as it was
    # `planrun plans list` lists each task by the name the page's step 4 uses.
    listed = planned.team.run(["planrun", "plans", "list"])
    for task in TASKS:
        assert f"batch:q1/{task}" in listed.stdout, listed.stdout
    shown = planned.team.run(["planrun", "plans", "show", "batch:q1/due-dates"])
    assert shown.returncode == 0 and "Add a --verbose flag (recommended)" in shown.stdout


def test_batch_status_shows_one_row_per_task_with_its_recommended_plan(planned: Planned) -> None:
    status = planned.team.run(command("planrun batch status ~/.planrun/batches/q1"))
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith("Batch q1: finished; complete 6\n")
    header = next(line for line in status.stdout.splitlines() if "Recommended plan" in line)
    assert header.split() == ["Task", "Plans", "Agreement", "Recommended", "plan", "Report"]
    for task in TASKS:
        [row] = [line for line in status.stdout.splitlines() if line.split()[:1] == [task]]
        assert "2 of 2 valid" in row and "3 of 3 files shared; same first file" in row
        assert f"tasks/{task}/recommended.md" in row and f"tasks/{task}/report.html" in row
    # summary.md holds the same table, with links.
    summary = (planned.out / "summary.md").read_text()
    for task in TASKS:
        row = next(line for line in summary.splitlines() if line.startswith(f"| {task} |"))
        assert f"[{task}](tasks/{task}/recommended.md)" in row
        assert f"[report.html](tasks/{task}/report.html)" in row


def test_each_report_compares_the_perspectives_and_shows_the_validation_rounds(
    planned: Planned,
) -> None:
    for task in TASKS:
        html = (planned.out / "tasks" / task / "report.html").read_text()
        assert '<span class="badge ok">ok: every plan is valid</span></h1>' in html
        assert 'id="recommended"' in html and "Add a --verbose flag (recommended)" in html
        compare = html[html.index('id="compare"') : html.index('id="plans"')]
        for section in ("approach", "detailed-steps", "risks", "critical-files"):
            assert f'id="compare-{section}"' in compare
        assert re.search(r'<a class="file" href="[^"]*src/app\.py[^"]*"', html)
        rounds = html[html.index('id="validation"') :]
        rounds = rounds[: rounds.index("</section>")]
        assert re.search(r"security</td><td[^>]*>2</td>", rounds), rounds
        assert "fixed after validation feedback" in rounds
        for label in ("simplicity", "security", "recommended"):
            assert f'href="{label}.transcript.jsonl"' in html


def test_a_plan_exported_for_claude_is_a_kickoff_file_and_a_command(planned: Planned) -> None:
    task = planned.out / "tasks" / "due-dates"
    done = planned.team.run(command("planrun plans export batch:q1/due-dates --for claude"))
    assert done.returncode == 0, done.stderr
    kickoff = task / "exports" / "recommended.claude.md"
    first, said, run = done.stdout.splitlines()
    assert first.startswith(f"wrote {kickoff} (") and first.endswith(" for claude")
    assert said == "run it with:"
    assert shlex.split(run)[:4] == ["cd", str(planned.team.repo), "&&", "claude"]
    assert run.endswith(f" < {kickoff}")
    assert "## Detailed Steps" in kickoff.read_text()
    [recorded] = json.loads((task / "recommended.meta.json").read_text())["exports"]
    assert recorded["for"] == "claude" and recorded["out"] == str(kickoff)


def test_a_change_is_held_to_the_plan_merged_on_main(planned: Planned) -> None:
    repo, team = planned.team.repo, planned.team
    # Approve: copy the recommended plan into the repository and merge it.
    (repo / "plans").mkdir()
    cp = "cp ~/.planrun/batches/q1/tasks/due-dates/recommended.md plans/due-dates.md"
    assert f"(`{cp}`, then a pull request)" in PAGE.read_text().replace("\n", " ")
    team.run(shlex.split(cp))
    git(repo, "add", "plans")
    git(repo, "commit", "-qm", "Plan due dates")
    git(repo, "update-ref", "refs/remotes/origin/main", "HEAD")  # as if pushed and merged
    git(repo, "switch", "-qc", "due-dates")
    # A change that follows the plan: the files it names, committed and not.
    for name in ("src/app.py", "src/util.py"):
        (repo / name).write_text((repo / name).read_text() + "VERBOSE = False\n")
    git(repo, "commit", "-qam", "Add the flag")
    (repo / "tests/test_app.py").write_text("def test_verbose():\n    assert True\n")
    verify = command("planrun verify plans/due-dates.md --base origin/main")
    follows = team.run(verify)
    assert follows.returncode == 0, follows.stdout + follows.stderr
    assert "the change follows the plan plans/due-dates.md" in follows.stdout
    assert "3 file(s) changed; 0 drift" in follows.stdout
    # The CI workflow's stricter check passes too: every critical file and step is done.
    assert team.run([*verify, "--strict"]).returncode == 0
    # A file the plan never names: exit 1, that file named (and nothing of the batch).
    (repo / "src/extra.py").write_text("x = 1\n")
    drifts = team.run(verify)
    assert drifts.returncode == 1, drifts.stdout + drifts.stderr
    assert "drift: src/extra.py: changed, but the plan never names it" in drifts.stdout
    assert "batches/" not in drifts.stdout


def test_a_budget_smaller_than_one_turn_stops_the_batch_and_a_larger_one_completes_it(
    tmp_path: Path, sandbox_image: str
) -> None:
    with FakeMessagesAPI(page_script()) as api:
        team = make_team(tmp_path, api)
        tiny = [*command(BATCH)[:-1], f"{ONE_TURN_USD / 2:.6f}"]
        stopped = team.run(tiny)
        assert stopped.returncode == 1, stopped.stdout + stopped.stderr
        summary = json.loads((team.batch / "summary.json").read_text())
        assert {job["status"] for job in summary["jobs"]} == {"budget"}
        for row in summary["tasks"]:
            assert row["recommended"] is None and row["valid"] == 0
        hint = stopped.stdout.splitlines()[-1]
        assert hint.startswith(f"Next: `planrun batch backlog.yaml --out {team.batch} ")
        assert hint.endswith(" --max-cost-usd USD` with a higher budget runs the jobs it stopped")
        # The same command with a larger budget goes on where it stopped.
        done = team.run(command(BATCH))
        assert done.returncode == 0, done.stdout + done.stderr
        summary = json.loads((team.batch / "summary.json").read_text())
        assert summary["counts"] == {"complete": 6}
        for task in TASKS:
            assert (team.batch / "tasks" / task / "recommended.md").is_file()
