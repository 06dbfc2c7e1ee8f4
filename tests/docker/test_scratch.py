"""A scratch sandbox: commands write a throw-away copy-on-write layer over the repository,
capped by the kernel; the repository on the host never changes, whatever they try, and
nothing of the layer (volumes, holder) outlives the sandbox or a killed planrun."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.errors import ConfigError, SandboxError
from sandbox_runner.limits import Limits
from sandbox_runner.sandbox import docker_sandbox
from sandbox_runner.sandbox.container_options import container_options
from sandbox_runner.sandbox.docker_provider import collect_garbage
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.scratch import SCRATCH_LABEL, path_problem
from sandbox_runner.sandbox.spec import SandboxSpec
from sandbox_runner.types import ExecResult, ToolRequest
from tests.docker.conftest import tree_hash

OWNER = 4321
"""The repository's owner when the tests run as root: the sandbox user maps to it."""


def scratch_repo(root: Path) -> Path:
    """A git repository with a module, its unittest test and a link out of it, owned by a
    regular user."""
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "test_calc.py").write_text(
        "import unittest\nfrom pkg.calc import add\n\n\n"
        "class AddTest(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
    )
    (root / "outside").symlink_to(root.parent)
    git = ["git", "-c", "user.name=u", "-c", "user.email=u@example.com", "-C", str(root)]
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    if os.geteuid() == 0:
        for path in [root, *root.rglob("*")]:
            os.chown(path, OWNER, OWNER, follow_symlinks=False)
    return root


def snapshot(root: Path) -> tuple[str, dict[str, int], str]:
    """The tree's hash, every path's mtime, and `git status` as the host sees them."""
    mtimes = {str(p.relative_to(root)): p.lstat().st_mtime_ns for p in [root, *root.rglob("*")]}
    status = subprocess.run(
        # No optional locks: the host's own `git status` would refresh the index.
        [
            "git",
            "--no-optional-locks",
            "-c",
            "safe.directory=*",
            "-C",
            str(root),
            "status",
            "--porcelain",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return tree_hash(root), mtimes, status


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return scratch_repo(tmp_path / "repo")


@pytest.fixture
def scratch(
    tmp_path: Path, repo: Path, sandbox_image: str, docker_client: Any, test_session: str
) -> Iterator[DockerSandbox]:
    """A started scratch sandbox on the repository with an 8 MiB layer."""
    plan_dir = tmp_path / "plan"
    plan_dir.mkdir()
    limits = Limits(memory_mb=256, pids=128, scratch_mb=8)
    spec = SandboxSpec.plan(
        repo, plan_dir, sandbox_image, limits=limits, session=test_session, scratch=True
    )
    with DockerSandbox(spec, docker_client) as sandbox:
        yield sandbox
    assert scratch_volumes(docker_client, test_session) == []


def scratch_volumes(docker_client: Any, session: str) -> list[str]:
    labels = [SCRATCH_LABEL, f"io.planrun.session={session}"]
    return [volume.name for volume in docker_client.volumes.list(filters={"label": labels})]


def bash(sandbox: DockerSandbox, command: str) -> ExecResult:
    return sandbox.call(ToolRequest("bash", {"command": command}, timeout=60))


def test_tests_builds_and_caches_run_and_the_repository_stays_as_it_was(
    scratch: DockerSandbox, repo: Path
) -> None:
    before = snapshot(repo)
    tested = bash(scratch, "python3 -m unittest -v 2>&1")
    assert tested.exit_code == 0 and "Ran 1 test" in tested.text and "OK" in tested.text
    built = bash(scratch, "mkdir build && echo x > build/out && cat build/out && ls pkg")
    assert built.exit_code == 0 and "x" in built.text and "__pycache__" in built.text
    mine = bash(scratch, "stat -c '%u %a' build build/out pkg/__pycache__")
    uid = OWNER if os.geteuid() == 0 else os.getuid()
    assert mine.text.split("\n") == [f"{uid} 755", f"{uid} 644", f"{uid} 755"]
    changed = bash(scratch, "echo changed >> pkg/calc.py && git status --porcelain")
    assert " M pkg/calc.py" in changed.text and "?? build/" in changed.text
    assert snapshot(repo) == before
    assert not (repo / "build").exists() and not (repo / "pkg" / "__pycache__").exists()


def test_a_writer_that_fills_the_layer_gets_enospc_and_is_told(
    scratch: DockerSandbox, repo: Path
) -> None:
    filled = bash(scratch, "head -c 20M /dev/zero > big")
    assert filled.exit_code != 0
    assert "No space left on device" in filled.text
    assert "the scratch layer is full" in filled.text
    # The layer is in memory, not on the host's disk: the repository holds nothing new.
    assert not (repo / "big").exists()
    freed = bash(scratch, "rm big && echo room > small && cat small")
    assert freed.exit_code == 0 and "room" in freed.text


HOSTILE = [
    "echo '[core]\n\tfsmonitor = touch /tmp/pwned' > .git/config",
    "git config core.hooksPath /tmp",
    "echo pwned > outside/escaped",
    "ln -sf /etc/passwd pkg/calc.py && echo pwned >> pkg/calc.py",
    "mount -t tmpfs none /workspace",
    "mount --bind /tmp /workspace/pkg",
    "cat /proc/self/mountinfo | grep -c upperdir",
    "echo pwned > /workspace/../escaped",
    "rm -rf .git pkg test_calc.py; chmod -R 000 . ; ls -a",
    "echo x > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout",
    "python3 -c \"import os; os.chown('test_calc.py', 0, 0)\"",
]


def test_hostile_commands_cannot_change_the_host_repository(
    scratch: DockerSandbox, repo: Path
) -> None:
    before = snapshot(repo)
    config = bash(scratch, HOSTILE[0])
    assert config.exit_code != 0  # the clean copy of .git/config is mounted read-only
    for command in HOSTILE[1:]:
        bash(scratch, command)
    assert snapshot(repo) == before
    assert not (repo.parent / "escaped").exists()
    assert not (repo / ".git" / "hooks" / "post-checkout").exists()


def test_the_layer_goes_with_the_sandbox_and_an_error_leaves_nothing(
    tmp_path: Path,
    repo: Path,
    sandbox_image: str,
    docker_client: Any,
    test_session: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan_dir = tmp_path / "plan"
    plan_dir.mkdir()
    spec = SandboxSpec.plan(repo, plan_dir, sandbox_image, session=test_session, scratch=True)
    made = []

    def failing_options(*args: Any, **kwargs: Any) -> dict[str, Any]:
        # The layer is made by now: the sandbox's own container is what fails.
        made.extend(scratch_volumes(docker_client, test_session))
        return {**container_options(*args, **kwargs), "image": "planrun-no-such-image:1"}

    monkeypatch.setattr(docker_sandbox, "container_options", failing_options)
    with pytest.raises(SandboxError, match="cannot start the sandbox"):
        DockerSandbox(spec, docker_client).start()
    assert len(made) == 2
    assert scratch_volumes(docker_client, test_session) == []
    monkeypatch.undo()
    root_owned = tmp_path / "root-owned"
    root_owned.mkdir()
    if os.geteuid() == 0:
        problem = path_problem(root_owned)
        assert problem is not None and "belongs to root" in problem
    bad = tmp_path / "a,b"
    bad.mkdir()
    if os.geteuid() == 0:
        os.chown(bad, OWNER, OWNER)
    spec = SandboxSpec.plan(bad, plan_dir, sandbox_image, session=test_session, scratch=True)
    with pytest.raises(ConfigError, match="overlay options"):
        DockerSandbox(spec, docker_client).start()
    assert scratch_volumes(docker_client, test_session) == []


KILLED_PLANRUN = """
import sys, time
from pathlib import Path
import docker
from sandbox_runner.limits import Limits
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.spec import SandboxSpec
repo, plan_dir, image, session = sys.argv[1:5]
spec = SandboxSpec.plan(Path(repo), Path(plan_dir), image, limits=Limits(scratch_mb=8),
                        session=session, scratch=True)
DockerSandbox(spec, docker.from_env()).start()
print("started", flush=True)
time.sleep(600)
"""


def test_what_a_killed_planrun_left_is_removed_by_gc(
    tmp_path: Path, repo: Path, sandbox_image: str, docker_client: Any, test_session: str
) -> None:
    plan_dir = tmp_path / "plan"
    plan_dir.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_PLANRUN, str(repo), str(plan_dir), sandbox_image,
         test_session],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert process.stdout is not None and process.stdout.readline().strip() == "started"
    assert len(scratch_volumes(docker_client, test_session)) == 2
    process.kill()
    process.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and docker_client.containers.list(
        all=True, filters={"label": f"io.planrun.session={test_session}"}
    ):
        time.sleep(0.2)
    # The sandbox and the holder died with their attach connections; the volumes remain.
    assert len(scratch_volumes(docker_client, test_session)) == 2
    removed = collect_garbage(docker_client, session=test_session)
    assert len([name for name in removed if name.startswith("planrun-scratch-")]) == 2
    assert scratch_volumes(docker_client, test_session) == []


# The image's `sh` is its author's code; the holder runs it. Were the layer's directories
# its to make, it could make them links to host directories: dockerd resolves the
# overlay's upperdir on the host, and every write would land there.
LINKING_SH = """#!/bin/bash
if [ -d /layer ]; then
  ln -s {upper} /layer/upper; ln -s {work} /layer/work
  echo ready; exec cat >/dev/null
fi
exec /bin/dash "$@"
"""


def test_an_image_that_links_the_layer_to_host_directories_writes_nothing_there(
    tmp_path: Path, repo: Path, sandbox_image: str, docker_client: Any, test_session: str
) -> None:
    host_upper, host_work = tmp_path / "host-upper", tmp_path / "host-work"
    for directory in (host_upper, host_work):
        directory.mkdir()
        directory.chmod(0o777)
    context = tmp_path / "image"
    context.mkdir()
    (context / "sh").write_text(LINKING_SH.format(upper=host_upper, work=host_work))
    (context / "sh").chmod(0o755)
    (context / "Dockerfile").write_text(f"FROM {sandbox_image}\nCOPY sh /usr/local/bin/sh\n")
    image, _ = docker_client.images.build(path=str(context), network_mode="none", rm=True)
    plan_dir = tmp_path / "plan"
    plan_dir.mkdir()
    limits = Limits(memory_mb=256, pids=128, scratch_mb=8)
    spec = SandboxSpec.plan(
        repo, plan_dir, image.id, limits=limits, session=test_session, scratch=True
    )
    try:
        with DockerSandbox(spec, docker_client) as sandbox:
            wrote = bash(sandbox, "echo pwned > /workspace/escaped && ls /workspace")
            assert wrote.exit_code == 0 and "escaped" in wrote.text
        assert list(host_upper.iterdir()) == [] and not (repo / "escaped").exists()
    finally:
        docker_client.images.remove(image.id, force=True)
