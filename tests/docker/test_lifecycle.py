"""Containers are always removed, and failures reach the user as one clear line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.errors import ImageMissingError, SandboxError
from sandbox_runner.sandbox.container_options import container_options
from sandbox_runner.sandbox.docker_provider import collect_garbage
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.spec import SandboxSpec
from sandbox_runner.types import ToolRequest
from tests.conftest import unavailable

SandboxFactory = Callable[..., DockerSandbox]


def containers_of(docker_client: Any, session: str) -> list[Any]:
    containers: list[Any] = docker_client.containers.list(
        all=True, filters={"label": f"io.planrun.session={session}"}
    )
    return containers


def test_container_is_removed_after_normal_exit(
    make_sandbox: SandboxFactory, docker_client: Any, test_session: str
) -> None:
    with make_sandbox() as sandbox:
        assert sandbox.call(ToolRequest("ping")).output == "pong"
        assert len(containers_of(docker_client, test_session)) == 1
    assert containers_of(docker_client, test_session) == []


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_container_is_removed_after_an_exception(
    make_sandbox: SandboxFactory, docker_client: Any, test_session: str, error: BaseException
) -> None:
    with pytest.raises(type(error)), make_sandbox():
        raise error
    assert containers_of(docker_client, test_session) == []


def test_missing_image_names_the_build_command(
    tmp_path: Path, repo: Path, docker_client: Any, test_session: str
) -> None:
    spec = SandboxSpec.plan(repo, tmp_path, "planrun-sandbox:missing", session=test_session)
    with pytest.raises(ImageMissingError, match="planrun image build"):
        DockerSandbox(spec, docker_client).start()
    assert containers_of(docker_client, test_session) == []


def test_tool_server_that_cannot_start_is_reported(
    make_sandbox: SandboxFactory,
    docker_client: Any,
    test_session: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: Any, **kwargs: Any) -> dict[str, Any]:
        options = container_options(*args, **kwargs)
        options["command"] = ["python3", "-c", "import sys; sys.exit(3)"]
        return options

    # Replaced where DockerSandbox looks it up, which is its own module's namespace.
    monkeypatch.setattr("sandbox_runner.sandbox.docker_sandbox.container_options", broken)
    with pytest.raises(SandboxError, match="exited with code 3"):
        make_sandbox().start()
    assert containers_of(docker_client, test_session) == []


def test_container_killed_from_outside_is_reported(
    make_sandbox: SandboxFactory, docker_client: Any
) -> None:
    with make_sandbox() as sandbox:
        docker_client.containers.get(sandbox.container_id).kill()
        with pytest.raises(SandboxError, match="sandbox died: the container exited with code 137"):
            sandbox.call(ToolRequest("bash", {"command": "sleep 5"}))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_cli_removes_its_container_on_signal(
    repo: Path, tmp_path: Path, docker_client: Any, sandbox_image: str, signum: int
) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sandbox_runner",
            "sandbox",
            "run",
            "--repo",
            str(repo),
            "--plan-dir",
            str(tmp_path / "plans"),
            "--",
            "sleep",
            "300",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def owned() -> list[Any]:
        managed = docker_client.containers.list(all=True, filters={"label": "io.planrun.managed=1"})
        return [c for c in managed if c.labels.get("io.planrun.pid") == str(process.pid)]

    deadline = time.monotonic() + 30
    while not owned() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert owned(), "the sandbox never started"
    time.sleep(0.5)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode in (130, 128 + signum)
    assert "Traceback" not in stderr
    assert owned() == []


def test_gc_removes_containers_of_dead_processes(
    make_sandbox: SandboxFactory, docker_client: Any, test_session: str
) -> None:
    sandbox = make_sandbox()
    sandbox.start()
    container = docker_client.containers.get(sandbox.container_id)
    # A container whose owner is gone: same labels but a pid that does not exist.
    labels = dict(container.labels, **{"io.planrun.pid": "999999999"})
    orphan = docker_client.containers.create(container.image.id, command=["true"], labels=labels)
    removed = collect_garbage(docker_client)
    assert orphan.short_id in removed
    assert container.short_id not in removed
    sandbox.stop()


def test_the_next_planrun_takes_away_what_a_killed_one_left(
    make_sandbox: SandboxFactory, docker_client: Any, repo: Path, test_session: str
) -> None:
    """A container whose program ignores the end of its input (an MCP server's) outlives
    a `kill -9` of its planrun: the next planrun's first sandbox removes it."""
    from sandbox_runner.config import load_settings
    from sandbox_runner.sandbox.docker_provider import DockerProvider
    from sandbox_runner.sandbox.factory import DockerSandboxes

    sandbox = make_sandbox()
    sandbox.start()
    container = docker_client.containers.get(sandbox.container_id)
    labels = dict(container.labels, **{"io.planrun.pid": "999999999"})
    orphan = docker_client.containers.run(
        container.image.id, command=["sleep", "600"], labels=labels, detach=True
    )
    provider = DockerProvider(docker_client)
    next_run = DockerSandboxes(lambda: provider, repo, load_settings(repo), lambda _: None)
    with next_run.probe(session=test_session):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and orphan.id in {
            c.id for c in docker_client.containers.list(all=True)
        }:
            time.sleep(0.2)
    running = {c.id for c in docker_client.containers.list(all=True)}
    assert orphan.id not in running
    assert container.id in running  # a live planrun's sandbox stays
    sandbox.stop()


def test_sandbox_run_cli_passes_output_and_exit_code(
    repo: Path, tmp_path: Path, sandbox_image: str
) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandbox_runner",
            "sandbox",
            "run",
            "--repo",
            str(repo),
            "--plan-dir",
            str(tmp_path / "p"),
            "--",
            "cat README.md; exit 7",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 7
    assert result.stdout == "# demo app\n"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--repo", "/nonexistent/repo"], "workspace /nonexistent/repo does not exist"),
        (["--repo", "/etc/hostname"], "is not a directory"),
        (["--plan-dir", "/proc/planrun-cannot"], "cannot create plan directory"),
    ],
)
def test_bad_paths_give_one_line_errors(
    repo: Path, args: list[str], message: str, docker_client: Any, sandbox_image: str
) -> None:
    command = [
        sys.executable,
        "-m",
        "sandbox_runner",
        "sandbox",
        "run",
        "--repo",
        str(repo),
        *args,
        "--",
        "true",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_no_docker_gives_one_line_error(repo: Path, tmp_path: Path) -> None:
    env = dict(os.environ, DOCKER_HOST=f"unix://{tmp_path}/no-such.sock")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sandbox_runner",
            "sandbox",
            "run",
            "--repo",
            str(repo),
            "--",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 2
    assert "Docker is not available" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_filesystem_mounted_below_the_workspace_is_refused(
    make_sandbox: SandboxFactory, repo: Path, docker_client: Any, test_session: str
) -> None:
    from sandbox_runner.errors import WorkspaceError
    from sandbox_runner.sandbox.docker_sandbox import supports_recursive_read_only

    if os.geteuid() != 0:
        unavailable("mounting a tmpfs below the workspace needs root")
    below = repo / "cache"
    below.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(below)], check=True)
    try:
        sandbox = make_sandbox()
        if supports_recursive_read_only(docker_client):
            with sandbox:
                result = sandbox.call(ToolRequest("bash", {"command": "touch /workspace/cache/x"}))
            assert "Read-only file system" in result.output
        else:
            with pytest.raises(WorkspaceError, match="mounted below it"):
                sandbox.start()
        assert containers_of(docker_client, test_session) == []
    finally:
        subprocess.run(["umount", str(below)], check=True)


def test_engine_start_and_image_status_report_what_is_there(sandbox_image: str) -> None:
    from click.testing import CliRunner

    from sandbox_runner.cli import cli

    runner = CliRunner()
    engine = runner.invoke(cli, ["engine", "start"])
    assert engine.exit_code == 0 and "is ready" in engine.output
    status = runner.invoke(cli, ["image", "status"])
    assert status.exit_code == 0
    assert f"{sandbox_image}  present" in status.output
    build = runner.invoke(cli, ["image", "build"])
    assert build.exit_code == 0 and build.output.strip().endswith(sandbox_image)
