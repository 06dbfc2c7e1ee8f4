"""The sandboxes every conformance test runs against: the local test sandbox (the real tool
server as a host process) and DockerSandbox (marked `docker`: it fails in CI without Docker)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sandbox_runner import Sandbox
from tests.conftest import make_sample_repo
from tests.support.local_sandbox import LocalSandbox


@dataclass
class Sandboxes:
    """Makes sandboxes of one kind on one sample repository; stops them all at teardown."""

    workspace: Path
    """The sample repository, at /workspace inside."""
    plan_dir: Path
    """Where what a sandbox writes to /plan reaches the host."""
    build: Callable[[], Sandbox]
    made: list[Sandbox] = field(default_factory=list)

    def new(self) -> Sandbox:
        """A sandbox, not started."""
        sandbox = self.build()
        self.made.append(sandbox)
        return sandbox


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def sandboxes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sandboxes]:
    workspace = make_sample_repo(tmp_path / "repo")
    plan_dir = tmp_path / "plans"
    plan_dir.mkdir()
    if request.param == "local":
        kind = Sandboxes(workspace, plan_dir, lambda: LocalSandbox(workspace, plan_dir))
    else:
        from sandbox_runner.sandbox.docker_provider import DockerProvider
        from sandbox_runner.sandbox.spec import SandboxSpec

        # Fails (in CI) or skips (locally) here when there is no Docker or no image.
        image: str = request.getfixturevalue("sandbox_image")
        session: str = request.getfixturevalue("test_session")
        provider = DockerProvider(request.getfixturevalue("docker_client"))
        spec = SandboxSpec.plan(workspace, plan_dir, image, session=session, agent="conformance")
        kind = Sandboxes(workspace, plan_dir, lambda: provider.create(spec))
    yield kind
    for sandbox in kind.made:
        sandbox.stop()
