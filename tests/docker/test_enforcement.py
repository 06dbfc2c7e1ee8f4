"""The operating system enforces the sandbox: proven from inside real containers."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox_runner.limits import Limits
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.types import ExecResult, ToolRequest
from tests.docker.conftest import tree_hash

SandboxFactory = Callable[..., DockerSandbox]


def bash(sandbox: DockerSandbox, command: str, timeout: float = 30) -> ExecResult:
    return sandbox.call(ToolRequest("bash", {"command": command}, timeout=timeout))


WRITES_TO_WORKSPACE = [
    "touch /workspace/new.txt",
    "echo pwned > /workspace/README.md",
    "echo more >> /workspace/src/app.py",
    "rm /workspace/README.md",
    "rm -rf /workspace/src",
    "mv /workspace/README.md /workspace/README.old",
    "chmod 777 /workspace/README.md",
    "ln /workspace/README.md /workspace/hard",
    "ln -s /etc/passwd /workspace/soft",
    "mkdir /workspace/newdir",
    "truncate -s 0 /workspace/src/app.py",
    "cp /workspace/README.md /workspace/copy.md",
    "git -C /workspace init",
]


@pytest.mark.parametrize("command", WRITES_TO_WORKSPACE)
def test_workspace_is_read_only(make_sandbox: SandboxFactory, repo: Path, command: str) -> None:
    before = tree_hash(repo)
    with make_sandbox() as sandbox:
        result = bash(sandbox, command)
    assert result.exit_code != 0
    assert "Read-only file system" in result.output
    assert tree_hash(repo) == before


def test_plan_dir_is_writable_and_plans_belong_to_the_user(make_sandbox: SandboxFactory) -> None:
    sandbox = make_sandbox()
    with sandbox:
        result = bash(
            sandbox,
            "echo '# plan' > /plan/plan.md && mkdir /plan/sub && echo n > /plan/sub/note.md "
            "&& cat /plan/plan.md",
        )
        assert result.exit_code == 0, result.output
        assert result.output.strip() == "# plan"
    # /plan is a tmpfs: what it held is copied out when the sandbox stops.
    assert sandbox.spec.plan_dir is not None
    plan = sandbox.spec.plan_dir / "plan.md"
    assert plan.read_text() == "# plan\n"
    assert plan.stat().st_uid == os.getuid()
    assert (sandbox.spec.plan_dir / "sub" / "note.md").stat().st_uid == os.getuid()


@pytest.mark.parametrize(
    "path",
    [
        "/new",
        "/etc/new",
        "/usr/bin/new",
        "/opt/planrun/toolserver/__main__.py",
        "/opt/planrun/toolserver/new.py",
    ],
)
def test_root_filesystem_is_read_only(make_sandbox: SandboxFactory, path: str) -> None:
    with make_sandbox() as sandbox:
        result = bash(sandbox, f"echo x > {path}")
    assert result.exit_code != 0
    assert "Read-only file system" in result.output


def test_tmp_is_writable_but_not_executable(make_sandbox: SandboxFactory) -> None:
    with make_sandbox() as sandbox:
        result = bash(sandbox, "cp /bin/true /tmp/t && echo copied && /tmp/t")
    assert "copied" in result.output
    assert result.exit_code == 126
    assert "Permission denied" in result.output


def test_no_network_interface_but_loopback(make_sandbox: SandboxFactory) -> None:
    with make_sandbox() as sandbox:
        interfaces = bash(sandbox, "ls /sys/class/net").output.split()
        reach = bash(
            sandbox, "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 2)\""
        )
    assert interfaces == ["lo"]
    assert reach.exit_code != 0
    assert "unreachable" in reach.output.lower()


def test_no_capabilities_and_not_root(make_sandbox: SandboxFactory) -> None:
    with make_sandbox() as sandbox:
        status = bash(
            sandbox, "grep -E '^(Uid|Gid|CapEff|CapPrm|CapAmb|NoNewPrivs)' /proc/self/status"
        ).output
    fields = dict(line.split(":", 1) for line in status.splitlines())
    assert fields["CapEff"].strip() == "0000000000000000"
    assert fields["CapPrm"].strip() == "0000000000000000"
    assert fields["NoNewPrivs"].strip() == "1"
    assert fields["Uid"].split()[0] != "0"
    assert fields["Gid"].split()[0] != "0"


def test_no_secrets_and_no_docker_socket(
    make_sandbox: SandboxFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-never-inside")
    with make_sandbox() as sandbox:
        environ = bash(sandbox, "cat /proc/1/environ /proc/self/environ | tr '\\0' '\\n'").output
        sockets = bash(
            sandbox,
            "ls -la /var/run/docker.sock /run/docker.sock 2>&1; find / -name '*.sock' 2>/dev/null",
        )
    assert "sk-ant" not in environ
    assert "ANTHROPIC" not in environ
    assert "No such file" in sockets.output
    assert ".sock" not in sockets.output.replace("docker.sock'", "").replace("docker.sock:", "")


def test_symlink_out_of_the_workspace_reveals_nothing(
    make_sandbox: SandboxFactory, repo: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host-secret-7f3a\n")
    (repo / "leak").symlink_to(secret)
    (repo / "leak_dir").symlink_to(tmp_path)
    (repo / "passwd").symlink_to("/etc/passwd")
    with make_sandbox() as sandbox:
        by_bash = bash(
            sandbox, "cat /workspace/leak; ls /workspace/leak_dir/; cat /workspace/passwd"
        )
        by_read = sandbox.call(ToolRequest("read", {"file_path": "/workspace/leak"}))
    assert "host-secret-7f3a" not in by_bash.output
    assert "secret.txt" not in by_bash.output
    assert "host-secret-7f3a" not in by_read.text
    assert not by_read.ok
    # /etc/passwd resolves inside the container, to the image's own file, not the host's.
    host_users = {line.split(":")[0] for line in Path("/etc/passwd").read_text().splitlines()}
    container_users = {line.split(":")[0] for line in by_bash.output.splitlines() if ":" in line}
    assert "planrun" in container_users
    assert not (host_users - container_users) or container_users != host_users


def test_pids_limit_stops_a_fork_bomb(make_sandbox: SandboxFactory) -> None:
    bomb = (
        'python3 -c "\n'
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    while n < 2000:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(300); os._exit(0)\n"
        "        n += 1\n"
        "except OSError as error:\n"
        "    print('fork refused after', n, error)\n"
        '"'
    )
    with make_sandbox(Limits(memory_mb=256, pids=64)) as sandbox:
        result = bash(sandbox, bomb, timeout=60)
        after = bash(sandbox, "echo alive; ls /proc | grep -cE '^[0-9]+$'")
    assert "fork refused after" in result.output
    assert int(result.output.split("fork refused after")[1].split()[0]) < 64
    assert after.output.startswith("alive")
    assert int(after.output.split()[1]) < 10


def test_memory_limit_kills_a_hog_and_says_so(make_sandbox: SandboxFactory) -> None:
    with make_sandbox(Limits(memory_mb=96, pids=64)) as sandbox:
        result = bash(sandbox, "python3 -c \"data = b'x' * (400 * 1024 * 1024); print(len(data))\"")
        alive = bash(sandbox, "echo still here")
    assert result.exit_code == 137
    assert "out of memory" in result.output.lower()
    assert alive.output.strip() == "still here"


def test_timed_out_command_leaves_no_process_behind(make_sandbox: SandboxFactory) -> None:
    with make_sandbox() as sandbox:
        result = bash(sandbox, "sleep 600 & setsid sleep 700 & sleep 800", timeout=1)
        left = bash(sandbox, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    assert result.timed_out
    assert "sleep" not in left.output


def test_background_process_of_a_finished_command_is_reaped(make_sandbox: SandboxFactory) -> None:
    with make_sandbox() as sandbox:
        bash(sandbox, "nohup sleep 900 >/dev/null 2>&1 &")
        left = bash(sandbox, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    assert "sleep 900" not in left.output


def test_git_works_on_a_read_only_repository_owned_by_another_user(
    make_sandbox: SandboxFactory, repo: Path
) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
        check=True,
    )
    before = tree_hash(repo)
    with make_sandbox() as sandbox:
        status = bash(sandbox, "git status --short && git log --oneline")
        diff = bash(sandbox, "git diff HEAD && git show --stat HEAD && git log -p -1")
    assert status.exit_code == 0, status.output
    assert "init" in status.output
    assert diff.exit_code == 0, diff.output
    assert "src/app.py" in diff.output and "+    return 42" in diff.output
    assert tree_hash(repo) == before


def test_commands_can_neither_stop_nor_impersonate_the_tool_server(
    make_sandbox: SandboxFactory,
) -> None:
    with make_sandbox() as sandbox:
        signals = bash(sandbox, "kill -TERM 1; kill -INT 1; kill -HUP 1; kill -KILL 1; echo sent")
        alive = sandbox.call(ToolRequest("ping"))
        pipes = bash(
            sandbox,
            'ls /proc/1/fd 2>&1; echo \'{"id": 99, "ok": true}\' > /proc/1/fd/1 2>&1; '
            "head -c1 /proc/1/fd/0 2>&1; echo done",
        )
        after = sandbox.call(ToolRequest("ping"))
    assert "sent" in signals.output
    assert alive.output == "pong" and after.output == "pong"
    assert pipes.output.count("Permission denied") >= 3, pipes.output


def test_orphans_are_reaped(make_sandbox: SandboxFactory) -> None:
    with make_sandbox() as sandbox:
        bash(sandbox, "for i in 1 2 3 4 5; do (sleep 0.1 &) ; done; sleep 0.3")
        zombies = bash(sandbox, "grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l")
    assert zombies.output.strip() == "0"
