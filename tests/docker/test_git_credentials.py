"""No sandbox reads a credential from the repository's git config files: the token that
actions/checkout leaves in `.git/config` (and a submodule's in `.git/modules/*/config`)
is not in what a plan, probe or work sandbox sees there."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.limits import Limits
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.spec import Profile, SandboxSpec
from sandbox_runner.types import ToolRequest

TOKEN = "ghs_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
HEADER = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()


@pytest.fixture
def checked_out(repo: Path) -> Path:
    """The repository as actions/checkout leaves it, with a submodule checked out too."""
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    extraheader = f"AUTHORIZATION: basic {HEADER}"
    subprocess.run(
        ["git", "-C", str(repo), "config", "http.https://github.com/.extraheader", extraheader],
        check=True,
    )
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin",
         f"https://x-access-token:{TOKEN}@github.com/o/r.git"],
        check=True,
    )  # fmt: skip
    module = repo / ".git" / "modules" / "lib"
    module.mkdir(parents=True)
    (module / "HEAD").write_text("ref: refs/heads/main\n")
    (module / "config").write_text(
        f'[core]\n\tbare = false\n[http "https://github.com/"]\n\textraheader = {extraheader}\n'
    )
    return repo


def _spec(profile: Profile, repo: Path, image: str, plans: Path, session: str) -> SandboxSpec:
    limits = Limits(memory_mb=256, pids=128)
    if profile is Profile.PLAN:
        return SandboxSpec.plan(repo, plans, image, limits=limits, session=session)
    if profile is Profile.PROBE:
        return SandboxSpec.probe(repo, image, limits=limits, session=session)
    return SandboxSpec.work(repo, image, limits=limits, session=session, protected=(".git",))


@pytest.mark.parametrize("profile", [Profile.PLAN, Profile.PROBE, Profile.WORK])
def test_no_sandbox_reads_the_checkout_token(
    checked_out: Path, tmp_path: Path, sandbox_image: str, docker_client: Any,
    test_session: str, profile: Profile,
) -> None:  # fmt: skip
    if os.geteuid() == 0:  # a work sandbox never runs as root: the repository is a user's
        for path in [checked_out, *checked_out.rglob("*")]:
            os.chown(path, 4321, 4321, follow_symlinks=False)
    spec = _spec(profile, checked_out, sandbox_image, tmp_path / "plans", test_session)
    (tmp_path / "plans").mkdir()
    with DockerSandbox(spec, docker_client) as sandbox:
        for name in (".git/config", ".git/modules/lib/config"):
            result = sandbox.call(ToolRequest("read", {"file_path": f"/workspace/{name}"}))
            assert result.ok, result.text
            assert TOKEN not in result.output and HEADER not in result.output
        remote = sandbox.call(
            ToolRequest("bash", {"command": "cat .git/config; git remote -v"}, timeout=30)
        )
        assert "github.com/o/r.git" in remote.output
        assert TOKEN not in remote.output and HEADER not in remote.output
    assert TOKEN in (checked_out / ".git" / "config").read_text()  # the host's copy is untouched
