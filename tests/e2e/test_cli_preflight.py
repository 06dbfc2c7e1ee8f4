"""Failing fast, end to end: a rejected key, an unknown model, no Docker engine or a
misspelt perspective is one line and exit status 2 before anything is claimed or paid
for (`planrun plan`, `planrun batch`, a session in line mode); real Docker, the real SDK
against the fake Messages API answering as the real API does."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sandbox_runner.cli import cli
from tests.support.fake_messages_api import FakeMessagesAPI
from tests.unit.test_plan_loop import VALID_PLAN

GOOD_KEY = "good-key"
MODELS = ["claude-sonnet-4-6", "claude-opus-4-8", "claude-haiku-4-5"]


@pytest.fixture(autouse=True)
def needs_docker(sandbox_image: str) -> None:
    """Every test here has a Docker engine, unless it takes it away."""


@pytest.fixture
def strict_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessagesAPI]:
    """A fake API that knows one key and a few models, as the real one does."""
    with FakeMessagesAPI(api_key=GOOD_KEY, models=MODELS) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", GOOD_KEY)
        yield server


def planrun(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def error_lines(result: Result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("Error: ")]


def nothing_under(directory: Path) -> bool:
    return not directory.exists() or not any(directory.iterdir())


def assert_nothing_claimed(planrun_home: Path, api: FakeMessagesAPI) -> None:
    """No run directory, no batch directory, no run in `plans list`, no paid request."""
    assert nothing_under(planrun_home / "plans") and nothing_under(planrun_home / "batches")
    listed = planrun("plans", "list")
    assert listed.exit_code == 0 and "default" not in listed.output, listed.output
    assert api.message_requests == []


def test_a_rejected_key_is_one_line_and_claims_no_run(
    strict_api: FakeMessagesAPI,
    sample_repo: Path,
    planrun_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "wrong-key")
    result = planrun("plan", "x", "--repo", str(sample_repo))
    assert result.exit_code == 2, result.output
    assert error_lines(result) == [
        f"Error: the API key was rejected (401) by {strict_api.base_url}: check ANTHROPIC_API_KEY"
    ]
    assert "Traceback" not in result.output
    assert_nothing_claimed(planrun_home, strict_api)


def test_an_unknown_model_is_one_line_with_the_model_meant(
    strict_api: FakeMessagesAPI, sample_repo: Path, planrun_home: Path
) -> None:
    result = planrun("plan", "x", "--repo", str(sample_repo), "--model", "claude-sonet-4-6")
    assert result.exit_code == 2, result.output
    assert error_lines(result) == [
        "Error: the model 'claude-sonet-4-6' does not exist (404): did you mean "
        "claude-sonnet-4-6?; set it with --model, or planning_model in the config"
    ]
    assert_nothing_claimed(planrun_home, strict_api)


def test_no_docker_engine_names_the_command_that_starts_one(
    strict_api: FakeMessagesAPI,
    sample_repo: Path,
    planrun_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'dead.sock'}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "wrong-key")
    result = planrun("plan", "x", "--repo", str(sample_repo))
    assert result.exit_code == 2, result.output
    key, engine = error_lines(result)
    assert key.startswith("Error: the API key was rejected (401)")
    assert engine.startswith("Error: no Docker engine (")
    assert engine.endswith("run `planrun engine start` (or set DOCKER_HOST to a running engine)")
    assert "Traceback" not in result.output
    assert_nothing_claimed(planrun_home, strict_api)


def test_a_misspelt_preset_is_a_usage_error_before_anything_is_asked(
    strict_api: FakeMessagesAPI, sample_repo: Path, planrun_home: Path
) -> None:
    (sample_repo / ".planrun").mkdir()
    (sample_repo / ".planrun" / "config.yaml").write_text(
        "perspectives:\n  thorough: [simplicity, security]\n"
    )
    result = planrun("plan", "x", "--repo", str(sample_repo), "--perspective", "thorugh")
    assert result.exit_code == 2, result.output
    assert "did you mean 'thorough'?" in result.output
    assert "custom:thorugh" in result.output
    assert strict_api.requests == [] and strict_api.lookups == []
    assert_nothing_claimed(planrun_home, strict_api)


def test_a_custom_perspective_close_to_a_preset_runs_under_its_own_name(
    api: FakeMessagesAPI, sample_repo: Path, tmp_path: Path
) -> None:
    from tests.support.plan_scripts import PerspectiveScript, writes_plan

    api.script = PerspectiveScript({"defaults": writes_plan("defaults", VALID_PLAN)})
    out = tmp_path / "out"
    args = ["x", "--repo", str(sample_repo), "--out", str(out), "--perspective"]
    assert planrun("plan", *args, "defaults").exit_code == 2  # one letter from 'default'
    result = planrun("plan", *args, "custom:defaults")
    assert result.exit_code == 0, result.output
    assert (out / "defaults.md").is_file()
    assert re.search(r"^Cost: \$0\.\d+ estimated \(\d+ tokens\)$", result.output, re.M)
    assert f"Next: `planrun plans open {out}` opens the report" in result.output


# planrun batch


def write_batch(tmp_path: Path, repo: Path, perspectives: str) -> Path:
    path = tmp_path / "batch.yaml"
    path.write_text(
        f"defaults:\n  repo: {repo}\n  perspectives: [{perspectives}]\n"
        "tasks:\n  - id: alpha\n    requirements: Plan alpha.\n"
    )
    return path


def test_a_batch_with_a_rejected_key_claims_no_batch_directory(
    strict_api: FakeMessagesAPI,
    sample_repo: Path,
    planrun_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "wrong-key")
    result = planrun("batch", str(write_batch(tmp_path, sample_repo, "simplicity")))
    assert result.exit_code == 2, result.output
    assert error_lines(result)[0].startswith("Error: the API key was rejected (401)")
    assert_nothing_claimed(planrun_home, strict_api)


def test_a_batch_task_with_a_misspelt_perspective_stops_before_anything(
    strict_api: FakeMessagesAPI, sample_repo: Path, planrun_home: Path, tmp_path: Path
) -> None:
    (sample_repo / ".planrun").mkdir()
    (sample_repo / ".planrun" / "config.yaml").write_text("perspectives:\n  thorough: [a, b]\n")
    out = tmp_path / "runs"
    result = planrun("batch", str(write_batch(tmp_path, sample_repo, "thorugh")), "--out", str(out))
    assert result.exit_code == 2, result.output
    assert "alpha" in result.output and "did you mean 'thorough'?" in result.output
    assert not out.exists()
    assert strict_api.requests == [] and strict_api.lookups == []


# A session in line mode


def test_a_session_with_a_rejected_key_says_so_before_any_message(
    strict_api: FakeMessagesAPI, tmp_path: Path, planrun_home: Path
) -> None:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("print('hi')\n")
    if os.geteuid() == 0:
        for path in [repo, *repo.rglob("*")]:
            os.chown(path, 4321, 4321)
    env = dict(
        os.environ,
        ANTHROPIC_BASE_URL=strict_api.base_url,
        ANTHROPIC_API_KEY="wrong-key",
        PLANRUN_HOME=str(planrun_home),
    )
    process = subprocess.run(
        [sys.executable, "-m", "sandbox_runner", "--repo", str(repo), "--model", "claude-nope"],
        input="hello\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert process.returncode == 2, process.stderr
    assert process.stdout.splitlines()[0].startswith("session ")  # the greeting comes first
    assert process.stderr.splitlines() == [
        f"Error: the API key was rejected (401) by {strict_api.base_url}: check ANTHROPIC_API_KEY"
    ]
    assert strict_api.message_requests == []


def test_a_batch_stopped_by_ctrl_c_says_the_exact_command_that_resumes_it(
    sample_repo: Path, tmp_path: Path, planrun_home: Path
) -> None:
    from tests.support.plan_scripts import PerspectiveScript, writes_plan

    script = PerspectiveScript(
        {"simplicity": writes_plan("simplicity", VALID_PLAN)}, delays={"simplicity": 3.0}
    )
    batch = write_batch(tmp_path, sample_repo, "simplicity")
    with FakeMessagesAPI(script) as server:
        env = dict(
            os.environ,
            ANTHROPIC_BASE_URL=server.base_url,
            ANTHROPIC_API_KEY="k",
            PLANRUN_HOME=str(planrun_home),
        )
        command = [sys.executable, "-m", "sandbox_runner", "batch", str(batch)]
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 60
        while not server.message_requests and time.monotonic() < deadline:
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 130, stderr
        [name] = [path.name for path in (planrun_home / "batches").iterdir()]
        again = f"planrun batch {batch} --out {planrun_home / 'batches' / name}"
        assert f"planrun: interrupted; go on with `{again}`" in stderr
        # Pasted as it is, it goes on with the same batch (no new directory).
        resumed = subprocess.run(
            [sys.executable, "-m", "sandbox_runner", *again.split()[1:]],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert resumed.returncode == 0, resumed.stderr
    assert re.search(r"^Cost: \$0\.\d+ estimated \(\d+ tokens\)$", resumed.stdout, re.M)
    assert [path.name for path in (planrun_home / "batches").iterdir()] == [name]


def test_a_terminal_session_shows_an_unknown_model_before_the_first_message_goes(
    tmp_path: Path, planrun_home: Path
) -> None:
    from tests.e2e.test_session_line import owned_repo
    from tests.e2e.test_session_terminal import PROMPT, script
    from tests.support.tmux import Tmux

    repo = owned_repo(tmp_path / "repo")
    with FakeMessagesAPI(script, models=MODELS) as server:
        env = dict(os.environ, ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="k")
        env |= {"PLANRUN_HOME": str(planrun_home), "TERM": "xterm-256color", "LANG": "C.UTF-8"}
        # It runs in the repository: this checkout's planrun is found by its path.
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        env.pop("TMUX", None)
        command = [sys.executable, "-m", "sandbox_runner", "--repo", str(repo)]
        with Tmux([*command, "--model", "claude-sonet-4-6"], env=env, cwd=repo) as term:
            term.wait_for(PROMPT)
            term.type("hello")  # typed at once, while the checks run
            term.keys("Enter")
            screen = term.wait_for(r"error: the model 'claude-sonet-4-6' does not exist")
            assert "did you mean claude-sonnet-4-6?; set it with --model or /model" in (
                screen.replace("\n", "")
            )
            term.wait_for(r"(?i)not found")  # the message itself, sent after: a free 404
            term.type("/model claude-sonnet-4-6")
            term.keys("Enter")
            term.type("hello")
            term.keys("Enter")
            term.wait_for("Hello! This is")
        [lookup, *_] = server.lookups
        first_message = server.message_requests[0]
        assert lookup.path == "/v1/models/claude-sonet-4-6" and lookup.at < first_message.at


def test_resuming_with_a_rejected_key_sets_nothing_aside(
    sample_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.fake_messages_api import error

    out = tmp_path / "out"
    with FakeMessagesAPI([error(400, "invalid_request_error", "no")]) as first:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", first.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
        failed = planrun("plan", "x", "--repo", str(sample_repo), "--out", str(out))
    assert failed.exit_code == 1, failed.output
    before = sorted(path.relative_to(out) for path in out.rglob("*"))
    with FakeMessagesAPI(api_key=GOOD_KEY, models=MODELS) as strict:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", strict.base_url)
        resumed = planrun("plans", "resume", str(out))
    assert resumed.exit_code == 2, resumed.output
    assert error_lines(resumed)[0].startswith("Error: the API key was rejected (401)")
    assert sorted(path.relative_to(out) for path in out.rglob("*")) == before
    assert strict.requests == []
