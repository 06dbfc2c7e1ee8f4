"""`planrun batch` end to end: real containers, the SDK against the fake API, SIGKILL, resume,
and each task's recommended plan."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sandbox_runner.cli import cli
from tests.support.fake_messages_api import FakeMessagesAPI, Scripted
from tests.support.plan_scripts import PerspectiveScript, label_of, turn_of, writes_plan
from tests.unit.test_plan_loop import VALID_PLAN
from tests.unit.test_synthesis import RECOMMENDED_PLAN

TASKS = ("alpha", "beta", "gamma")
PERSPECTIVES = ("simplicity", "security")
TASK_MARK = re.compile(r"TASK-([a-z]+)")
ALL_JOBS = {f"{task}/{label}" for task in TASKS for label in (*PERSPECTIVES, "recommended")}
"""Every job of the batch: each task's plans and its synthesis."""


@pytest.fixture(autouse=True)
def needs_docker(sandbox_image: str) -> None:
    """Every test here runs real sandboxes."""


class CountingScript:
    """Answers every job its short conversation, slowly, and counts requests per job."""

    def __init__(self, delay: float) -> None:
        self.inner = PerspectiveScript(
            {
                **{label: writes_plan(label, VALID_PLAN) for label in PERSPECTIVES},
                "recommended": writes_plan("recommended", RECOMMENDED_PLAN),
            },
            delays=dict.fromkeys(PERSPECTIVES, delay),
        )
        self.requests: Counter[str] = Counter()
        self.first_turns: dict[str, int] = {}
        """The turn of each job's first request (above 0: it went on with a conversation)."""
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Scripted:
        with self.lock:
            key = job_key(body)
            self.requests[key] += 1
            self.first_turns.setdefault(key, turn_of(body))
        return self.inner(body)


def job_key(body: dict[str, Any]) -> str:
    """The batch job a request belongs to: `<task>/<perspective>`."""
    match = TASK_MARK.search(json.dumps(body.get("messages", [])[:1]))
    return f"{match.group(1) if match else '?'}/{label_of(body)}"


def batch_file(tmp_path: Path, repo: Path) -> Path:
    tasks = "".join(f"  - id: {task}\n    requirements: Plan TASK-{task}.\n" for task in TASKS)
    path = tmp_path / "batch.yaml"
    path.write_text(f"defaults:\n  repo: {repo}\n  perspectives: [{', '.join(PERSPECTIVES)}]\n")
    path.write_text(path.read_text() + "tasks:\n" + tasks)
    return path


def start_batch(server: FakeMessagesAPI, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="k")
    return subprocess.Popen(
        [sys.executable, "-m", "sandbox_runner", "batch", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def ledger_keys(out: Path) -> list[str]:
    path = out / "results.jsonl"
    if not path.exists():
        return []
    keys = []
    for line in path.read_text().splitlines():
        try:
            keys.append(json.loads(line)["key"])
        except (ValueError, KeyError):
            continue
    return keys


def test_a_batch_killed_with_sigkill_resumes_without_redoing_finished_jobs(
    sample_repo: Path, tmp_path: Path, docker_client: Any
) -> None:
    # A git repository: the batch compares its `git status` (taken in a sandbox) too.
    subprocess.run(["git", "init", "-q", str(sample_repo)], check=True)
    batch = batch_file(tmp_path, sample_repo)
    out = tmp_path / "out"
    args = (str(batch), "--out", str(out), "--parallel", "2")
    first = CountingScript(delay=0.6)
    with FakeMessagesAPI(first) as server:
        process = start_batch(server, *args)
        deadline = time.monotonic() + 120
        # Killed once two jobs finished and another has had an answer of the model.
        while time.monotonic() < deadline and not (
            len(ledger_keys(out)) >= 2
            and any(n >= 2 and k not in ledger_keys(out) for k, n in list(first.requests.items()))
        ):
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=30)
    finished_before = set(ledger_keys(out))
    assert 2 <= len(finished_before) < len(ALL_JOBS)
    cut_short = {k for k, n in first.requests.items() if n >= 2 and k not in finished_before}
    assert cut_short, first.requests

    second = CountingScript(delay=0.0)
    with FakeMessagesAPI(second) as server:
        process = start_batch(server, *args, "--json")
        stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    summary = json.loads(stdout)
    assert summary["counts"] == {"complete": len(ALL_JOBS)}  # each task's synthesis too
    assert {job["attempts"] for job in summary["jobs"]} == {1}
    # No job that had finished asked the model anything again.
    assert not finished_before & set(second.requests), second.requests
    assert set(second.requests) | finished_before == ALL_JOBS
    # A job cut short went on with its conversation: its exploration was not paid again.
    for key in cut_short:
        assert second.first_turns[key] >= 1, (key, second.first_turns)
    ledger = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    continued = {record["key"] for record in ledger if record["result"].get("continued")}
    assert cut_short <= continued, continued
    for task in TASKS:
        report = json.loads((out / "tasks" / task / "report.json").read_text())
        assert [plan["status"] for plan in report["plans"]] == ["complete", "complete"]
        assert report["recommended"]["valid"], report["recommended"]
        assert report["workspace_check"] == "full" and report["workspace_unchanged"], report
    leftovers = docker_client.containers.list(
        all=True, filters={"label": f"io.planrun.session=batch-{out.name}"}
    )
    assert leftovers == []

    # A third run does nothing at all.
    third = CountingScript(delay=0.0)
    with FakeMessagesAPI(third) as server:
        process = start_batch(server, *args)
        _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert sum(third.requests.values()) == 0


def test_each_task_of_a_local_batch_gets_its_recommended_plan(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path
) -> None:
    api.script = PerspectiveScript(
        {
            **{label: writes_plan(label, VALID_PLAN) for label in PERSPECTIVES},
            "recommended": writes_plan("recommended", RECOMMENDED_PLAN),
        }
    )
    tasks = "".join(f"  - id: {task}\n    requirements: Plan TASK-{task}.\n" for task in TASKS[:2])
    batch = tmp_path / "batch.yaml"
    batch.write_text(
        f"defaults:\n  repo: {sample_repo}\n  perspectives: [{', '.join(PERSPECTIVES)}]\n"
        f"tasks:\n{tasks}"
    )
    out = tmp_path / "out"
    (sample_repo / "secret.txt").write_text("not for the sandbox user")
    (sample_repo / "secret.txt").chmod(0)
    arguments = ["batch", str(batch), "--out", str(out), "--parallel", "2"]
    result = CliRunner().invoke(cli, arguments, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "4 plan job(s) to run, and up to 2 syntheses" in result.stderr
    # The two tasks share the repository: its unreadable file is said once.
    assert result.stderr.count("not readable by the sandbox user") == 1, result.stderr
    syntheses = [
        request.body
        for request in api.message_requests
        if "/plan/recommended.md" in json.dumps(request.body["system"])
    ]
    for task in TASKS[:2]:
        directory = out / "tasks" / task
        assert (directory / "recommended.md").read_text().startswith("---\nid: ")
        report = json.loads((directory / "report.json").read_text())
        recommended = report["recommended"]
        assert recommended["valid"] and recommended["plan_file"] == "recommended.md"
        assert recommended["sources"] == list(PERSPECTIVES)
        assert "## Recommended plan" in (directory / "report.md").read_text()
        # Each task's synthesis was given that task's requirements and both its plans.
        first = next(body for body in syntheses if f"TASK-{task}" in json.dumps(body["messages"]))
        assert json.dumps(first["messages"][0]).count("<plan perspective=") == 2
    summary = (out / "summary.md").read_text()
    for task in TASKS[:2]:
        row = next(line for line in summary.splitlines() if line.startswith(f"| {task} |"))
        assert "| 2 of 2 valid |" in row and f"[{task}](tasks/{task}/recommended.md)" in row
        assert f"| [{task}/recommended](tasks/{task}/recommended.md) | complete | 1 |" in summary
    status = CliRunner().invoke(cli, ["batch", "status", str(out)], env={"COLUMNS": "200"})
    assert "tasks/alpha/recommended.md" in status.output
    assert "complete 6" in status.output
    # Run again: nothing is asked of the model, the synthesis included.
    asked = len(api.message_requests)
    again = CliRunner().invoke(cli, arguments, catch_exceptions=False)
    assert again.exit_code == 0, again.output
    assert len(api.message_requests) == asked
