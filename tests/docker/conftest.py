"""Fixtures for the tests that run real sandbox containers."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.limits import Limits
from sandbox_runner.paths import WORKSPACE_MOUNT
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.spec import Mount, Profile, SandboxSpec
from tests.conftest import make_sample_repo

pytestmark = pytest.mark.docker


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/docker/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.docker)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small repository with a few files and a subdirectory."""
    root = make_sample_repo(tmp_path / "repo")
    # World-writable on purpose: only the read-only mount, not file modes, may stop writes.
    for path in [root, *root.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
    return root


def tree_hash(root: Path) -> str:
    """A hash of every path, mode, link target and content under root."""
    hasher = hashlib.sha256()
    for directory, subdirs, files in sorted(os.walk(root)):
        subdirs.sort()
        for name in sorted(subdirs + files):
            path = Path(directory, name)
            info = path.lstat()
            hasher.update(f"{path.relative_to(root)}\0{info.st_mode}\0{info.st_nlink}\0".encode())
            if path.is_symlink():
                hasher.update(os.readlink(path).encode())
            elif path.is_file():
                hasher.update(path.read_bytes())
    return hasher.hexdigest()


@pytest.fixture
def make_sandbox(
    tmp_path: Path, repo: Path, sandbox_image: str, docker_client: Any, test_session: str
) -> Iterator[Callable[..., DockerSandbox]]:
    """Build (not start) sandboxes on the test's repository, removed at teardown."""
    made: list[DockerSandbox] = []

    def factory(
        limits: Limits | None = None,
        workspace: Path | None = None,
        profile: Profile = Profile.PLAN,
        **extra: Any,
    ) -> DockerSandbox:
        """A plan sandbox by default; plan_dir=None makes a probe, profile=WORK a work one."""
        plan_dir = tmp_path / f"plans-{len(made)}"
        plan_dir.mkdir()
        extra.setdefault("plan_dir", plan_dir)
        if extra["plan_dir"] is None and profile is Profile.PLAN:
            profile = Profile.PROBE
        if profile is not Profile.PLAN:
            extra["plan_dir"] = None
        spec = SandboxSpec(
            mounts=(Mount(workspace or repo, WORKSPACE_MOUNT, profile is Profile.WORK),),
            image=sandbox_image,
            profile=profile,
            limits=limits or Limits(memory_mb=256, pids=128),
            session=test_session,
            agent="test",
            **extra,
        )
        sandbox = DockerSandbox(spec, docker_client)
        made.append(sandbox)
        return sandbox

    yield factory
    for sandbox in made:
        sandbox.stop()
