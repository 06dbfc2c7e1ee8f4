"""The one Docker sandbox factory of plan runs and sessions: every container made to the
settings (image, extra directories, limits), labelled with its session and agent, and
Docker asked nothing before the first one (a fake Docker client at the outermost edge)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sandbox_runner.cli import Services
from sandbox_runner.config import load_settings
from sandbox_runner.errors import ImageMissingError
from sandbox_runner.sandbox.derived_image import RUNTIME_PYTHON, derived_tag
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.guarded import GuardedWorkSandbox
from sandbox_runner.sandbox.spec import Profile, SandboxSpec
from sandbox_runner.session.edit_watch import EditWatch
from sandbox_runner.session.sandboxes import DockerSessionSandboxes
from tests.unit.test_image import FakeDocker, image_id

DERIVED = derived_tag(image_id("my/sandbox:1"))


def spec_of(sandbox: object) -> SandboxSpec:
    assert isinstance(sandbox, DockerSandbox)
    return sandbox.spec


@pytest.fixture
def workspace(tmp_path: Path, planrun_home: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    docs = tmp_path / "docs"
    docs.mkdir()
    (planrun_home / "config.yaml").write_text(
        f"image: my/sandbox:1\nmemory_mb: 512\nextra_dirs: [{docs}]\n"
    )
    return root


def test_runs_and_sessions_get_containers_made_to_the_settings(
    workspace: Path, tmp_path: Path
) -> None:
    services = Services(docker=lambda: FakeDocker("my/sandbox:1", DERIVED))
    loaded = load_settings(workspace)
    run = services.sandbox_factory(workspace, loaded)("run-1")
    session = DockerSessionSandboxes(
        services.sandboxes(workspace, loaded), "s-1", tmp_path / "t", disk_cap_mb=1024
    )
    watched = session.work()
    assert isinstance(watched, EditWatch)  # each edit's diff told, around the guard
    work = watched.inner
    assert isinstance(work, GuardedWorkSandbox)
    made = {
        "probe": spec_of(run(None)),
        "perspective": spec_of(run(tmp_path / "perspective")),
        "plan-session": spec_of(session.plan(tmp_path / "staging")),
        "task": spec_of(session.read_only()),
        "work-session": spec_of(work.make()),
    }
    for spec in made.values():
        assert spec.image == DERIVED and spec.limits.memory_mb == 512
        assert spec.python == RUNTIME_PYTHON and not spec.network
        assert [mount.source for mount in spec.mounts] == [workspace, tmp_path / "docs"]
    assert {name: spec.profile for name, spec in made.items()} == {
        "probe": Profile.PROBE,
        "perspective": Profile.PLAN,
        "plan-session": Profile.PLAN,
        "task": Profile.PLAN,
        "work-session": Profile.WORK,
    }
    assert {name: (spec.session, spec.agent) for name, spec in made.items()} == {
        "probe": ("run-1", "git-status"),
        "perspective": ("run-1", "perspective"),
        "plan-session": ("s-1", "plan-session"),
        "task": ("s-1", "task"),
        "work-session": ("s-1", "work-session"),
    }
    assert made["task"].plan_dir is not None
    assert made["task"].plan_dir.parent == tmp_path / "t"


def test_docker_is_asked_at_the_first_sandbox_and_a_missing_image_names_its_setting(
    workspace: Path, planrun_home: Path, tmp_path: Path
) -> None:
    asked: list[bool] = []

    def docker() -> FakeDocker:
        asked.append(True)
        return FakeDocker("planrun-sandbox:other")

    services = Services(docker=docker)
    sandboxes = services.sandboxes(workspace, load_settings(workspace))
    assert asked == []  # a session's prompt is drawn before this
    with pytest.raises(ImageMissingError, match=f"set by {planrun_home / 'config.yaml'}"):
        sandboxes.work(session="s-1", agent="work-session")
    assert asked == [True]
    with pytest.raises(ImageMissingError):
        services.sandbox_factory(workspace, load_settings(workspace))  # checked at once


def test_only_the_work_sandbox_gets_the_network_the_user_granted(
    workspace: Path, tmp_path: Path
) -> None:
    services = Services(docker=lambda: FakeDocker("my/sandbox:1", DERIVED))
    loaded = load_settings(workspace, env={"PLANRUN_WORK_NETWORK": "true"})
    session = DockerSessionSandboxes(
        services.sandboxes(workspace, loaded), "s-1", tmp_path / "t", disk_cap_mb=1024
    )
    watched = session.work()
    assert isinstance(watched, EditWatch)
    work = watched.inner
    assert isinstance(work, GuardedWorkSandbox)
    assert spec_of(work.make()).network
    assert not spec_of(session.plan(tmp_path / "staging")).network
    assert not spec_of(session.read_only()).network


def test_a_run_s_sandboxes_share_one_walk_of_the_workspace(
    workspace: Path, planrun_home: Path, tmp_path: Path
) -> None:
    (workspace / "src" / "pkg").mkdir(parents=True)
    time.sleep(0.15)  # a directory changed within GIT_RACY_NS is left out of the seed
    services = Services(docker=lambda: FakeDocker("my/sandbox:1", DERIVED))
    loaded = load_settings(workspace)
    run = services.sandbox_factory(workspace, loaded)("run-1")
    seeds = {spec_of(run(plan_dir)).git_seed for plan_dir in (None, tmp_path / "a", tmp_path / "b")}
    assert len(seeds) == 1
    seed = seeds.pop()
    assert seed is not None and seed.parent == planrun_home / "cache" / "git-seed"
    made = seed / "seed.json"  # mounted before it is there: the guard waits for it
    deadline = time.monotonic() + 30
    while not made.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert b'"src/pkg"' in made.read_bytes()
    # A session's sandboxes, never checked as a run's are, walk for themselves.
    session = DockerSessionSandboxes(
        services.sandboxes(workspace, loaded), "s-1", tmp_path / "t", disk_cap_mb=1024
    )
    assert spec_of(session.plan(tmp_path / "staging")).git_seed is None


def test_a_workspace_the_sandbox_user_cannot_fully_read_is_warned_of_once(
    workspace: Path,
) -> None:
    (workspace / "readable.txt").write_text("x")
    secret = workspace / "secret.txt"
    secret.write_text("x")
    secret.chmod(0)
    said: list[str] = []
    services = Services(docker=lambda: FakeDocker("my/sandbox:1", DERIVED), progress=said.append)
    for run in ("batch-1", "batch-1"):  # two tasks of a batch on the same repository
        services.sandbox_factory(workspace, load_settings(workspace))(run)
    assert len(said) == 1 and "secret.txt" in said[0] and said[0].startswith("warning: ")
