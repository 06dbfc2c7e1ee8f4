"""Sandbox profiles and the provider, in real containers: a work sandbox writes the
workspace as the right user and is otherwise as hardened as a plan sandbox; a provider
stops every sandbox it still runs."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.sandbox.docker_provider import DockerProvider
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.host_paths import sandbox_user
from sandbox_runner.sandbox.spec import Profile, SandboxSpec
from sandbox_runner.types import ExecResult, ToolRequest
from tests.conftest import make_sample_repo

SandboxFactory = Callable[..., DockerSandbox]
# The owner of the work workspace when the tests run as root: not root, not the image's user.
OWNER = 4321


def bash(sandbox: DockerSandbox, command: str) -> ExecResult:
    return sandbox.call(ToolRequest("bash", {"command": command}, timeout=30))


@pytest.fixture
def own_repo(tmp_path: Path) -> Path:
    """A repository with ordinary modes (only its owner may write), owned by the invoking
    user, or by OWNER when the tests run as root (whom the sandbox never runs as)."""
    root = make_sample_repo(tmp_path / "own")
    if os.geteuid() == 0:
        for path in [root, *root.rglob("*")]:
            os.chown(path, OWNER, OWNER)
    return root


def test_a_work_sandbox_writes_the_workspace_as_its_owner(
    make_sandbox: SandboxFactory, own_repo: Path
) -> None:
    with make_sandbox(workspace=own_repo, profile=Profile.WORK) as sandbox:
        result = bash(
            sandbox,
            "echo new > /workspace/new.txt && echo more >> /workspace/src/app.py "
            "&& mkdir /workspace/built && cp /bin/true /tmp/t && /tmp/t && echo ran",
        )
    assert result.exit_code == 0, result.output
    assert "ran" in result.output  # a work sandbox's /tmp runs what a build put there
    uid, gid = sandbox_user(own_repo)
    expected_uid = os.getuid() if os.getuid() != 0 else OWNER
    assert uid == expected_uid
    for written in (own_repo / "new.txt", own_repo / "built"):
        info = written.stat()
        assert (info.st_uid, info.st_gid) == (uid, gid)
    assert (own_repo / "src" / "app.py").read_text().endswith("more\n")


def test_a_work_sandbox_is_otherwise_as_hardened_as_a_plan_sandbox(
    make_sandbox: SandboxFactory, own_repo: Path
) -> None:
    with make_sandbox(workspace=own_repo, profile=Profile.WORK) as sandbox:
        status = bash(
            sandbox, "grep -E '^(Uid|CapEff|CapPrm|NoNewPrivs|Seccomp)' /proc/self/status"
        ).output
        interfaces = bash(sandbox, "ls /sys/class/net").output.split()
        reach = bash(
            sandbox, "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 2)\""
        )
        root_fs = bash(sandbox, "echo x > /etc/new")
        traced = bash(
            sandbox,
            'python3 -c "import ctypes; libc = ctypes.CDLL(None, use_errno=True); '
            'print(libc.ptrace(16, 1, 0, 0), ctypes.get_errno())"',
        )
        environ = bash(sandbox, "cat /proc/self/environ | tr '\\0' '\\n'").output
    pairs = (line.split(":", 1) for line in status.splitlines())
    fields = {key: value.strip() for key, value in pairs}
    assert fields["CapEff"] == fields["CapPrm"] == "0000000000000000"
    assert fields["NoNewPrivs"] == "1"
    assert fields["Seccomp"] == "2"  # a filter
    assert fields["Uid"].split()[0] != "0"
    assert interfaces == ["lo"]
    assert reach.exit_code != 0 and "unreachable" in reach.output.lower()
    assert "Read-only file system" in root_fs.output
    assert traced.output.strip() == "-1 1"  # EPERM from planrun's seccomp profile
    assert "ANTHROPIC" not in environ and "HOME=/root" not in environ


def test_a_work_sandbox_leaves_extra_directories_read_only(
    tmp_path: Path, own_repo: Path, sandbox_image: str, docker_client: Any, test_session: str
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    docs.chmod(0o777)  # only the mount may stop the write
    spec = SandboxSpec.work(own_repo, sandbox_image, (docs,), session=test_session)
    with DockerSandbox(spec, docker_client) as sandbox:
        result = bash(sandbox, "touch /ro/docs/x")
    assert "Read-only file system" in result.output
    assert list(docs.iterdir()) == []


def test_the_provider_stops_every_sandbox_it_still_runs(
    repo: Path, sandbox_image: str, docker_client: Any, test_session: str
) -> None:
    provider = DockerProvider(docker_client)
    label = {"label": f"io.planrun.session={test_session}"}
    first = provider.create(SandboxSpec.probe(repo, sandbox_image, session=test_session))
    second = provider.create(SandboxSpec.probe(repo, sandbox_image, session=test_session))
    finished = provider.create(SandboxSpec.probe(repo, sandbox_image, session=test_session))
    try:
        for sandbox in (first, second, finished):
            sandbox.start()
        finished.stop()
        assert len(provider.live) == 2
        assert len(docker_client.containers.list(all=True, filters=label)) == 2
        assert provider.stop_all() == 2
        assert docker_client.containers.list(all=True, filters=label) == []
        assert len(provider.live) == 0
        assert provider.stop_all() == 0
    finally:
        for sandbox in (first, second, finished):
            sandbox.stop()
