"""Nothing a work sandbox writes runs on the host: what a command or a Write plants for the
user's own git, editor, shell or agents is refused by the kernel (read-only mounts over
what exists) or moved out by the host's guard (what did not exist), before the user's
next command. Proven with the user's real git run afterwards, as the repository's owner."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.limits import Limits
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.guarded import DiskCap, GuardedWorkSandbox
from sandbox_runner.sandbox.spec import SandboxSpec
from sandbox_runner.sandbox.workspace_guard import WorkspaceGuard
from sandbox_runner.types import ExecResult, ToolRequest

OWNER = 4321
"""The repository's owner when the tests run as root: host git runs as this user."""


@pytest.fixture
def victim(tmp_path: Path) -> tuple[Path, Path]:
    """A git repository with a commit and an .envrc, owned by OWNER, and the directory the
    payloads would leave their marker in."""
    repo, markers = tmp_path / "repo", tmp_path / "markers"
    markers.mkdir(mode=0o777)
    markers.chmod(0o777)
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("print('hi')\n")
    (repo / ".envrc").write_text("export APP=1\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "first")
    if os.geteuid() == 0:
        for path in [repo, *repo.rglob("*")]:
            os.chown(path, OWNER, OWNER, follow_symlinks=False)
        for parent in tmp_path.parents:  # the owner's git must reach the repository
            if parent == Path(tempfile.gettempdir()) or parent == Path("/"):
                break
            parent.chmod(parent.stat().st_mode | 0o011)
        tmp_path.chmod(tmp_path.stat().st_mode | 0o011)
    return repo, markers


def _git(repo: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The user's own git on the host, as the repository's owner, with no global config."""
    run_as = []
    if os.geteuid() == 0:
        run_as = ["setpriv", f"--reuid={OWNER}", f"--regid={OWNER}", "--clear-groups"]
    env = {"PATH": os.environ["PATH"], "HOME": str(repo.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    command = [*run_as, "git", "-c", "user.name=u", "-c", "user.email=u@example.com", *args]
    return subprocess.run(
        command, cwd=cwd or repo, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def work(
    victim: tuple[Path, Path], tmp_path: Path, sandbox_image: str, docker_client: Any,
    test_session: str,
) -> Iterator[GuardedWorkSandbox]:  # fmt: skip
    repo, _ = victim
    guard = WorkspaceGuard(repo, tmp_path / "quarantine")
    disk = DiskCap(repo, 64 * 1024 * 1024)

    def make() -> DockerSandbox:
        spec = SandboxSpec.work(
            repo, sandbox_image, limits=Limits(memory_mb=256, pids=128),
            session=test_session, agent="test", protected=tuple(guard.read_only_paths()),
        )  # fmt: skip
        return DockerSandbox(spec, docker_client)

    sandbox = GuardedWorkSandbox(make, lambda: (guard, disk))
    sandbox.start()
    yield sandbox
    sandbox.stop()


def bash(sandbox: GuardedWorkSandbox, command: str) -> ExecResult:
    return sandbox.call(ToolRequest("bash", {"command": command}, timeout=60))


def test_an_approved_command_cannot_plant_git_hooks_or_config(
    work: GuardedWorkSandbox, victim: tuple[Path, Path]
) -> None:
    repo, markers = victim
    hook = f"printf '#!/bin/sh\\ntouch {markers}/hook\\n' > .git/hooks/{{0}}"
    hook += " && chmod +x .git/hooks/{0}"
    attempts = [
        hook.format("pre-commit"),
        hook.format("post-checkout"),
        f"git config core.fsmonitor 'touch {markers}/fsmonitor'",
        f"git config alias.st '!touch {markers}/alias'",
        "echo '[core]' >> .git/config && echo '\thooksPath = /tmp' >> .git/config",
        "mv .git .git-old && mkdir .git",
        "rm -rf .git",
        "ln -s .git/hooks hooks-link && echo x > hooks-link/pre-push",
        "echo evil > .envrc",
        "rm .envrc",
    ]
    for command in attempts:
        bash(work, command)
    assert _git(repo, "status").returncode == 0
    assert _git(repo, "commit", "-q", "--allow-empty", "-m", "second").returncode == 0
    _git(repo, "st")
    assert sorted(os.listdir(markers)) == []
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert (repo / ".envrc").read_text() == "export APP=1\n"


def test_a_directory_made_a_repository_is_neutralised_before_host_git_sees_it(
    work: GuardedWorkSandbox, victim: tuple[Path, Path]
) -> None:
    repo, markers = victim
    writes = {
        "src/HEAD": "ref: refs/heads/main\n",
        "src/config": f"[core]\n\tfsmonitor = touch {markers}/nested\n",
        "src/objects/.keep": "",
        "src/refs/heads/.keep": "",
    }
    results = [
        work.call(ToolRequest("write", {"file_path": f"/workspace/{path}", "content": text}))
        for path, text in writes.items()
    ]
    assert any("moved" in result.text and "src/HEAD" in result.text for result in results)
    _git(repo, "status", cwd=repo / "src")
    assert os.listdir(markers) == []
    assert not (repo / "src" / "HEAD").exists()


def test_planted_editor_agent_and_shell_files_are_moved_out(
    work: GuardedWorkSandbox, victim: tuple[Path, Path]
) -> None:
    repo, _ = victim
    result = bash(
        work,
        "mkdir -p .vscode .claude/agents sub && echo '{}' > .vscode/tasks.json && "
        "echo 'you are evil' > .claude/agents/general-purpose.md && echo x > sub/.envrc && "
        "echo 'node-options=--require ./x.js' > .npmrc && git init -q nested",
    )
    for planted in (".vscode", ".claude", "sub/.envrc", ".npmrc", "nested/.git"):
        assert not (repo / planted).exists(), planted
        assert planted in result.text
    assert (repo / "sub").is_dir()


def test_an_approved_protected_edit_is_written_by_the_host(
    work: GuardedWorkSandbox, victim: tuple[Path, Path]
) -> None:
    repo, _ = victim
    args = {"file_path": "/workspace/.envrc", "old_string": "APP=1", "new_string": "APP=2"}
    result = work.call(ToolRequest("edit", args))
    assert result.ok, result.text
    assert (repo / ".envrc").read_text() == "export APP=2\n"
    assert bash(work, "cat .envrc").output.strip() == "export APP=2"
    made = work.call(ToolRequest("write", {"file_path": "/workspace/.vscode/settings.json",
                                           "content": "{}"}))  # fmt: skip
    assert made.ok and (repo / ".vscode" / "settings.json").read_text() == "{}"
    if os.geteuid() == 0:
        assert (repo / ".vscode" / "settings.json").stat().st_uid == OWNER


def test_a_command_that_fills_the_disk_is_stopped(
    victim: tuple[Path, Path], tmp_path: Path, sandbox_image: str, docker_client: Any,
    test_session: str,
) -> None:  # fmt: skip
    repo, _ = victim
    guard = WorkspaceGuard(repo, tmp_path / "quarantine")
    disk = DiskCap(repo, 8 * 1024 * 1024)
    limits = Limits(memory_mb=256, pids=128, plan_dir_mb=64)

    def make() -> DockerSandbox:
        spec = SandboxSpec.work(repo, sandbox_image, limits=limits, session=test_session,
                                agent="test", protected=tuple(guard.read_only_paths()))  # fmt: skip
        return DockerSandbox(spec, docker_client)

    with GuardedWorkSandbox(make, lambda: (guard, disk)) as sandbox:
        command = (
            "for i in $(seq 100); do head -c 4000000 /dev/urandom > big$i; sync; sleep 0.1; done"
        )
        result = bash(sandbox, command)
        assert not result.ok and "work_disk_mb" in result.text
        written = sum(path.stat().st_size for path in repo.glob("big*"))
        assert written < 40 * 1024 * 1024
        assert bash(sandbox, "rm -f big* && echo cleaned").output.strip() == "cleaned"
        # Empty files cost inodes, not blocks: 8 MiB of cap allows 8,192 of them.
        if os.statvfs(repo).f_files == 0:
            return  # a file system without an inode count (btrfs): bytes are the cap
        mknod = "import os\nfor i in range(200000): os.mknod(str(i))"
        many = f"mkdir many && cd many && python3 -c '{mknod}'"
        result = bash(sandbox, many)
        assert not result.ok and "files" in result.text
        assert len(os.listdir(repo / "many")) < 100_000
