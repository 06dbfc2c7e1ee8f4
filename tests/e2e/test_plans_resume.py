"""`planrun plans resume`: a failed or killed `planrun plan` run goes on with its
conversations (real containers, the SDK against the fake API), keeping its finished plans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from sandbox_runner.cli import cli
from tests.support.fake_messages_api import FakeMessagesAPI, error, message, tool_use
from tests.support.plan_scripts import PerspectiveScript, label_of, turn_of, writes_plan
from tests.unit.test_plan_loop import VALID_PLAN
from tests.unit.test_synthesis import RECOMMENDED_PLAN

OVERLOADED = error(529, "overloaded_error", "Overloaded", retry_after=0.01)


@pytest.fixture(autouse=True)
def needs_docker(sandbox_image: str) -> None:
    """Every test here runs real sandboxes."""


@pytest.fixture(autouse=True)
def one_retry(api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    """An overloaded API gives up at once (the plans here are meant to fail, then resume)."""
    monkeypatch.setenv("PLANRUN_API_RETRIES", "1")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def first_turns(api: FakeMessagesAPI) -> dict[str, int]:
    """The turn each plan's first request was at (above 0: it went on with a conversation)."""
    turns: dict[str, int] = {}
    for request in api.message_requests:
        turns.setdefault(label_of(request.body), turn_of(request.body))
    return turns


def test_a_plan_the_api_failed_goes_on_with_its_conversation(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    looked = message(tool_use("Glob", {"pattern": "**/*.py"}))
    api.script = PerspectiveScript(
        {"simplicity": writes_plan("simplicity", VALID_PLAN), "security": [looked, OVERLOADED]}
    )
    perspectives = ("--perspective", "simplicity", "--perspective", "security")
    failed = invoke("plan", "Add a flag", "--repo", str(sample_repo), "--out", str(out),
                    *perspectives)  # fmt: skip
    assert failed.exit_code == 1, failed.output
    report = json.loads((out / "report.json").read_text())
    assert [p["resumable"] for p in report["plans"]] == [False, True]

    api.requests.clear()
    api.script = PerspectiveScript(
        {
            "security": writes_plan("security", VALID_PLAN.replace("# Add", "# Guard")),
            "recommended": writes_plan("recommended", RECOMMENDED_PLAN)[1:],
        }
    )
    resumed = invoke("plans", "resume", str(out))
    assert resumed.exit_code == 0, resumed.output
    assert "planrun: security goes on with its conversation" in resumed.output
    assert "planrun: simplicity is kept" in resumed.output
    # simplicity was not asked again; security went on at its second turn.
    assert first_turns(api) == {"security": 1, "recommended": 0}
    report = json.loads((out / "report.json").read_text())
    assert [(p["label"], p["valid"], p["continued"]) for p in report["plans"]] == [
        ("simplicity", True, False),
        ("security", True, True),
    ]
    assert report["recommended"]["valid"] and report["exit_code"] == 0
    kept = out / ".attempts" / "security" / "resumed"
    assert (kept / "security.transcript.jsonl").is_file()
    assert (out / ".attempts" / "report" / "resumed" / "report.json").is_file()
    transcript = (out / "security.transcript.jsonl").read_text()
    assert transcript.startswith((kept / "security.transcript.jsonl").read_text())

    again = invoke("plans", "resume", str(out))
    assert again.exit_code == 0 and "is complete and valid" in again.output


def test_a_run_killed_with_sigkill_is_resumed(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "killed"
    served: list[str] = []

    def slow(body: dict[str, Any]) -> Any:
        served.append(label_of(body))
        time.sleep(0.3)
        return PerspectiveScript({"speed": writes_plan("speed", VALID_PLAN)})(body)

    api.script = slow
    env = dict(os.environ)
    process = subprocess.Popen(
        [sys.executable, "-m", "sandbox_runner", "plan", "Add a flag", "--repo",
         str(sample_repo), "--out", str(out), "--perspective", "speed"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while len(served) < 2 and time.monotonic() < deadline:  # its first answer came back
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    assert not (out / "report.json").exists() and (out / "run.json").is_file()

    api.requests.clear()
    resumed = invoke("plans", "resume", str(out), "--json")
    assert resumed.exit_code == 0, resumed.output
    report = json.loads(resumed.stdout)
    assert report["plans"][0]["valid"] and report["plans"][0]["continued"]
    assert first_turns(api)["speed"] >= 1


def test_resume_refuses_what_it_cannot_resume(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    api.script = PerspectiveScript({"plan": [message(tool_use("LS", {})), OVERLOADED]})
    assert invoke("plan", "x", "--repo", str(sample_repo), "--out", str(out)).exit_code == 1
    (sample_repo / "new.py").write_text("x = 1\n")
    changed = invoke("plans", "resume", str(out))
    assert changed.exit_code == 2
    assert "changed since run out started" in changed.output
    unknown = invoke("plans", "resume", "no-such-run")
    assert unknown.exit_code == 2 and "no run called 'no-such-run'" in unknown.output
    (out / "run.json").unlink()
    (sample_repo / "new.py").unlink()
    old = invoke("plans", "resume", str(out))
    assert old.exit_code == 2 and "holds no run.json" in old.output
    assert "Traceback" not in changed.output + unknown.output + old.output


def test_a_run_killed_during_its_synthesis_is_finished(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path
) -> None:
    out = tmp_path / "synthesis"
    plans = {
        "simplicity": writes_plan("simplicity", VALID_PLAN),
        "security": writes_plan("security", VALID_PLAN.replace("# Add", "# Guard")),
    }
    synthesising = threading.Event()

    def slow_synthesis(body: dict[str, Any]) -> Any:
        if label_of(body) == "recommended":
            synthesising.set()
            time.sleep(30)
        return PerspectiveScript(plans)(body)

    api.script = slow_synthesis
    process = subprocess.Popen(
        [sys.executable, "-m", "sandbox_runner", "plan", "Add a flag", "--repo",
         str(sample_repo), "--out", str(out), "--perspective", "simplicity",
         "--perspective", "security"],
        env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert synthesising.wait(90), process.communicate(timeout=30)[1][-2000:]
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)

    api.requests.clear()
    api.script = PerspectiveScript(
        {"recommended": writes_plan("recommended", RECOMMENDED_PLAN)[1:]}
    )
    resumed = invoke("plans", "resume", str(out))
    assert resumed.exit_code == 0, resumed.output
    assert "finishing the run: it has no report" in resumed.output
    assert set(first_turns(api)) == {"recommended"}  # the plans were not asked again
    report = json.loads((out / "report.json").read_text())
    assert report["recommended"]["valid"] and report["exit_code"] == 0
