"""Sandboxes on users' own toolchain images: a busybox image with no libc, python or bash,
a Node image and a Go image (built offline once, tests/support/toolchain_images.py), each
with planrun's runtime added, and still hardened exactly like planrun's own."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner import Sandbox
from sandbox_runner.config import load_settings
from sandbox_runner.errors import ImageError
from sandbox_runner.limits import Limits
from sandbox_runner.sandbox.container_options import container_options
from sandbox_runner.sandbox.derived_image import RUNTIME_PYTHON, derive, derived_tag
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.factory import DockerSandboxes
from sandbox_runner.sandbox.spec import SandboxSpec
from sandbox_runner.types import ExecResult, ToolRequest
from tests.support import toolchain_images

LIMITS = Limits(memory_mb=512, pids=256)
OWNER = 1000
Made = Callable[..., DockerSandbox]


@pytest.fixture(scope="module")
def busybox(docker_client: Any, sandbox_image: str) -> str:
    return toolchain_images.busybox_image(docker_client)


@pytest.fixture(scope="module")
def derived_busybox(docker_client: Any, busybox: str) -> str:
    return derive(docker_client, busybox, "test")


@pytest.fixture(scope="module")
def derived_node(docker_client: Any, sandbox_image: str) -> str:
    return derive(docker_client, toolchain_images.node_image(docker_client), "test")


@pytest.fixture(scope="module")
def derived_go(docker_client: Any, sandbox_image: str) -> str:
    return derive(docker_client, toolchain_images.go_image(docker_client), "test")


@pytest.fixture
def make(tmp_path: Path, docker_client: Any, test_session: str) -> Iterator[Made]:
    """Sandboxes on a derived image: a plan one by default, a work one with work=True."""
    made: list[DockerSandbox] = []

    def factory(image: str, workspace: Path, *, work: bool = False) -> DockerSandbox:
        common = {"session": test_session, "agent": "test", "python": RUNTIME_PYTHON}
        if work:
            spec = SandboxSpec.work(workspace, image, limits=LIMITS, **common)  # type: ignore[arg-type]
        else:
            plan_dir = tmp_path / f"plan-{len(made)}"
            plan_dir.mkdir()
            spec = SandboxSpec.plan(workspace, plan_dir, image, limits=LIMITS, **common)  # type: ignore[arg-type]
        sandbox = DockerSandbox(spec, docker_client)
        made.append(sandbox)
        return sandbox

    yield factory
    for sandbox in made:
        sandbox.stop()


def bash(sandbox: Sandbox, command: str, timeout: float = 120) -> ExecResult:
    return sandbox.call(ToolRequest("bash", {"command": command}, timeout=timeout))


def world_writable(root: Path) -> Path:
    """ROOT writable by anyone, and owned by a regular user when the tests run as root (a
    work sandbox never runs as root)."""
    for path in [root, *root.rglob("*")]:
        path.chmod(0o777 if path.is_dir() else 0o666)
        if os.geteuid() == 0:
            os.chown(path, OWNER, OWNER)
    return root


def git_repo(root: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "-C", str(root), *identity, "commit", "-qm", "first"], check=True)
    return world_writable(root)


def test_a_plan_sandbox_on_busybox_reads_searches_lists_and_runs_commands(
    make: Made, derived_busybox: str, tmp_path: Path, docker_client: Any, busybox: str
) -> None:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src/app.js").write_text("function greet() {\n  return 'hello';\n}\n")
    (repo / "README.md").write_text("# busybox app\n")
    git_repo(repo)
    # The base has no python, no bash and no libc: nothing of planrun's could run there.
    wanted = "-name 'python*' -o -name bash -o -name 'libc.so*' -o -name 'ld-*'"
    found_there = docker_client.containers.run(
        busybox, ["sh", "-c", f"find / -xdev {wanted}"], remove=True, network_mode="none"
    )
    assert found_there == b""
    with make(derived_busybox, repo) as sandbox:
        read = sandbox.call(ToolRequest("read", {"file_path": "/workspace/src/app.js"}))
        found = sandbox.call(ToolRequest("grep", {"pattern": "greet", "output_mode": "content"}))
        globbed = sandbox.call(ToolRequest("glob", {"pattern": "**/*.js"}))
        listed = sandbox.call(ToolRequest("ls", {"path": "/workspace"}))
        ls = bash(sandbox, "ls /workspace/src && echo $BASH_VERSION && command -v ls")
        log = bash(sandbox, "git log --oneline")
        symbols = sandbox.call(
            ToolRequest("lsp", {"operation": "document_symbols", "file_path": "src/app.js"})
        )
        written = bash(sandbox, "echo x > /workspace/new")
    assert read.ok and "return 'hello'" in read.output
    assert found.ok and "src/app.js" in found.output and "greet" in found.output
    assert globbed.ok and "src/app.js" in globbed.output
    assert listed.ok and "README.md" in listed.output
    assert ls.exit_code == 0, ls.output
    # The image's own ls (busybox), run by planrun's bash since the image has none.
    assert ls.output.splitlines()[0] == "app.js" and ls.output.splitlines()[2] == "/bin/ls"
    assert log.exit_code == 0 and log.output.strip().endswith("first"), log.output
    assert symbols.ok and "greet" in symbols.output, symbols.error  # planrun's ctags
    assert written.exit_code != 0 and "Read-only file system" in written.output


def test_a_work_sandbox_on_node_runs_node_test_and_reports_a_failure(
    make: Made, derived_node: str, tmp_path: Path
) -> None:
    repo = tmp_path / "node-app"
    repo.mkdir()
    (repo / "sum.js").write_text("module.exports = (a, b) => a - b;\n")
    (repo / "sum.test.js").write_text(
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "const sum = require('./sum');\ntest('adds', () => assert.strictEqual(sum(2, 3), 5));\n"
    )
    world_writable(repo)
    with make(derived_node, repo, work=True) as sandbox:
        no_python = bash(sandbox, "command -v python3 || echo none")
        failing = bash(sandbox, "node --test")
        bash(sandbox, "sed -i 's/a - b/a + b/' sum.js")
        passing = bash(sandbox, "node --test")
    assert no_python.output.strip() == "none"
    assert failing.exit_code == 1 and "not ok" in failing.output, failing.output
    assert passing.exit_code == 0 and "# fail 0" in passing.output, passing.output


def test_a_work_sandbox_on_go_runs_go_test(make: Made, derived_go: str, tmp_path: Path) -> None:
    repo = tmp_path / "go-app"
    repo.mkdir()
    (repo / "go.mod").write_text("module example.com/app\n\ngo 1.19\n")
    (repo / "sum.go").write_text("package app\n\nfunc Sum(a, b int) int { return a + b }\n")
    (repo / "sum_test.go").write_text(
        'package app\n\nimport "testing"\n\n'
        'func TestSum(t *testing.T) {\n\tif Sum(2, 3) != 5 {\n\t\tt.Fatal("sum")\n\t}\n}\n'
    )
    world_writable(repo)
    with make(derived_go, repo, work=True) as sandbox:
        result = bash(sandbox, "go env GOCACHE CGO_ENABLED && go test ./...", timeout=300)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    # The image's ENV (CGO_ENABLED=0) reaches commands; the cache lives in /tmp.
    assert lines[0].startswith("/tmp/") and lines[1] == "0"
    assert "ok  \texample.com/app" in result.output


def test_the_derived_tag_is_stable_and_follows_the_base(
    docker_client: Any, busybox: str, derived_busybox: str
) -> None:
    assert derive(docker_client, busybox, "test") == derived_busybox  # reused, not rebuilt
    changed, _ = docker_client.images.build(
        fileobj=_dockerfile(f"FROM {busybox}\nLABEL changed=yes\n"), rm=True, network_mode="none"
    )
    other = derive(docker_client, changed.id, "test")
    # Removing the derived image prunes its untagged base as well.
    docker_client.images.remove(other)
    assert other != derived_busybox and other == derived_tag(changed.id)


def _dockerfile(text: str) -> Any:
    import io

    return io.BytesIO(text.encode())


def test_a_derived_sandbox_is_hardened_like_planrun_s_own(
    make: Made, derived_busybox: str, sandbox_image: str, tmp_path: Path, docker_client: Any
) -> None:
    (tmp_path / "repo").mkdir()
    repo = world_writable(tmp_path / "repo")
    sandbox = make(derived_busybox, repo)
    ours = SandboxSpec.plan(repo, tmp_path / "p", sandbox_image, limits=LIMITS)
    with sandbox:
        assert sandbox.container_id is not None
        host = docker_client.containers.get(sandbox.container_id).attrs["HostConfig"]
        whoami = bash(sandbox, "id -u; cat /proc/self/status | grep -E '^(CapEff|NoNewPrivs)'")
    expected = container_options(ours, user=(0, 0))
    assert host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"]
    assert host["NetworkMode"] == "none" and host["Privileged"] is False
    assert "no-new-privileges:true" in host["SecurityOpt"]
    assert any(option.startswith("seccomp=") for option in host["SecurityOpt"])
    assert host["PidsLimit"] == expected["pids_limit"]
    assert host["Memory"] == LIMITS.memory_mb * 1024 * 1024
    assert whoami.output.splitlines()[0] != "0"
    assert "CapEff:\t0000000000000000" in whoami.output and "NoNewPrivs:\t1" in whoami.output


def test_a_trusted_devcontainer_dockerfile_is_built_without_network(
    tmp_path: Path, docker_client: Any, busybox: str, planrun_home: Path, test_session: str
) -> None:
    from sandbox_runner.sandbox.docker_provider import DockerProvider

    repo = tmp_path / "repo"
    (repo / ".devcontainer").mkdir(parents=True)
    (repo / ".devcontainer/Dockerfile").write_text(
        f"FROM {busybox}\nENV MARKER=from-devcontainer\n"
    )
    (repo / ".devcontainer/devcontainer.json").write_text(
        '// the team\'s toolchain\n{\n  "build": {"dockerfile": "Dockerfile", /* here */},\n}\n'
    )
    world_writable(repo)
    (planrun_home / "config.yaml").write_text(f"trusted_projects: [{repo}]\n")
    provider = DockerProvider(docker_client)
    sandboxes = DockerSandboxes(lambda: provider, repo, load_settings(repo), lambda _: None)
    with sandboxes.work(session=test_session, agent="test") as sandbox:
        marker = bash(sandbox, "echo $MARKER")
    assert marker.output.strip() == "from-devcontainer"
    (repo / ".devcontainer/Dockerfile").write_text(
        f"FROM {busybox}\nRUN wget -q -O /tmp/x http://deb.debian.org/\n"
    )
    offline = DockerSandboxes(lambda: provider, repo, load_settings(repo), lambda _: None)
    with pytest.raises(ImageError, match=r"without network\): .*wget"):
        offline.check()
    untrusted_home = json.dumps([])  # no trusted_projects: the devcontainer is not read
    (planrun_home / "config.yaml").write_text(f"trusted_projects: {untrusted_home}\n")
    assert (
        DockerSandboxes(lambda: provider, repo, load_settings(repo))
        .check()
        .startswith("planrun-sandbox:")
    )


def test_git_on_a_derived_image_still_obeys_no_repository_config(
    make: Made, derived_busybox: str, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a\n")
    git_repo(repo)
    with (repo / ".git/config").open("a") as config:
        config.write('[core]\n\tfsmonitor = "touch /tmp/pwned; false"\n')
        config.write('[alias]\n\tlg = "!touch /tmp/aliased"\n')
    with make(derived_busybox, repo) as sandbox:
        status = bash(sandbox, "git status --short && git log --format=%s; git lg; ls /tmp")
    # git ran (the commit is there), and neither the fsmonitor nor the alias did.
    assert status.output.splitlines()[0] == "first", status.output
    assert "pwned" not in status.output and "aliased" not in status.output, status.output


def test_a_path_into_the_repository_is_not_searched(
    make: Made, docker_client: Any, busybox: str, tmp_path: Path
) -> None:
    """An image whose PATH starts in /workspace: a planted `ls` and `rg` do not run."""
    planted, _ = docker_client.images.build(
        fileobj=_dockerfile(f"FROM {busybox}\nENV PATH=/workspace/bin:.:/bin\n"),
        rm=True,
        network_mode="none",
    )
    repo = tmp_path / "repo"
    (repo / "bin").mkdir(parents=True)
    for name in ("ls", "rg"):
        (repo / "bin" / name).write_text("#!/bin/sh\necho planted\n")
        (repo / "bin" / name).chmod(0o755)
    (repo / "ls").write_text("#!/bin/sh\necho planted\n")
    world_writable(repo)
    for name in ("ls", "rg"):
        (repo / "bin" / name).chmod(0o777)
    (repo / "ls").chmod(0o777)
    derived = derive(docker_client, planted.id, "test")
    try:
        with make(derived, repo) as sandbox:
            listed = bash(sandbox, "ls /workspace; echo $PATH")
            found = sandbox.call(ToolRequest("grep", {"pattern": "planted"}))
    finally:
        docker_client.images.remove(derived)
    assert "planted" not in listed.output.splitlines()[0]
    assert listed.output.splitlines()[-1] == "/bin:/opt/planrun/runtime/tools"
    assert found.ok and "bin/ls" in found.output, found.output
