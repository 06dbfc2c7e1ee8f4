"""The git guard's seed in a real sandbox: the host's walk, mounted read-only, saves the
sandbox's guard its listings (the device numbers of the bind mount notwithstanding), and a
tampered or broken seed lets no repository's program run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sandbox_runner.sandbox.guard_seed import write_seed
from sandbox_runner.types import ToolRequest
from tests.docker.test_hostile_git import (
    DISABLED,
    LAYOUTS,
    SandboxFactory,
    bash,
    build_layout,
    live_markers,
)

GIT_COMMANDS = ("git status", "git diff", "git -C sub status", "git -C sub diff")


def seed_of(repo: Path, directory: Path) -> Path:
    time.sleep(0.15)  # past GIT_RACY_NS: the seed holds every directory
    seed = write_seed(repo, directory)
    assert seed is not None
    return seed


def seeded_directories(sandbox: object) -> object:
    from sandbox_runner.sandbox.docker_sandbox import DockerSandbox

    assert isinstance(sandbox, DockerSandbox)
    return sandbox.call(ToolRequest("ping", {})).meta.get("git_seeded_directories")


def test_a_seeded_sandbox_guards_git_from_the_host_s_walk(
    make_sandbox: SandboxFactory, repo: Path, tmp_path: Path
) -> None:
    build_layout(repo, LAYOUTS[0])
    seed = seed_of(repo, tmp_path / "seeds")
    rows = len(json.loads(seed.read_bytes())["directories"])
    sandbox = make_sandbox(git_seed=seed.parent)
    with sandbox:
        for command in GIT_COMMANDS:
            result = bash(sandbox, command)
            assert result.ok and DISABLED not in result.output, (command, result.output)
        assert live_markers(sandbox) == []
        assert seeded_directories(sandbox) == rows
        for path in ("/opt/planrun/git-seed/seed.json", "/opt/planrun/git-seed/new"):
            written = bash(sandbox, f"echo '{{}}' > {path}")
            assert written.exit_code != 0 and "Read-only file system" in written.output
    assert len(json.loads(seed.read_bytes())["directories"]) == rows


@pytest.mark.parametrize("tampering", ["no repository, forged stamps", "not a seed"])
def test_a_tampered_seed_is_harmless(
    make_sandbox: SandboxFactory, repo: Path, tmp_path: Path, tampering: str
) -> None:
    build_layout(repo, LAYOUTS[0])
    seed = seed_of(repo, tmp_path / "seeds")
    data = json.loads(seed.read_bytes())
    if tampering == "not a seed":
        seed.write_text("[1, 2")
    else:
        data["directories"] = [
            [relative, [*numbers[:4], 1], entries, [], [], False, False, False]
            for relative, numbers, entries, *_ in data["directories"]
        ]
        seed.write_text(json.dumps(data))
    sandbox = make_sandbox(git_seed=seed.parent)
    with sandbox:
        for command in GIT_COMMANDS:
            result = bash(sandbox, command)
            assert result.ok and DISABLED not in result.output, (command, result.output)
            assert live_markers(sandbox) == [], command
