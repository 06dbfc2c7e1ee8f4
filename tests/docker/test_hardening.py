"""Issue-8 hardening, attacked from inside real containers: the plan directory's kernel
cap, processes that try to outlive their command, sandboxes whose planrun is killed,
deep trees, tool-server denial of service, and the kernel surface."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sandbox_runner.limits import Limits
from sandbox_runner.runs.workspace import tree_fingerprint
from sandbox_runner.sandbox.docker_provider import collect_garbage
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.types import ExecResult, ToolRequest

SandboxFactory = Callable[..., DockerSandbox]


def bash(sandbox: DockerSandbox, command: str, timeout: float = 30) -> ExecResult:
    return sandbox.call(ToolRequest("bash", {"command": command}, timeout=timeout))


def processes(sandbox: DockerSandbox) -> str:
    """Command lines of every process in the container, as a later command sees them."""
    return bash(sandbox, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '").output


# ----------------------------------------------------------------- 2. the plan directory


def test_the_kernel_caps_the_plan_directory_in_bytes_and_entries(
    make_sandbox: SandboxFactory,
) -> None:
    with make_sandbox(Limits(memory_mb=256, pids=128, plan_dir_mb=4, plan_dir_entries=50)) as box:
        # Each file is under the per-file limit (RLIMIT_FSIZE); together they are not.
        big = bash(box, "head -c 3M /dev/zero > /plan/one; head -c 3M /dev/zero > /plan/two")
        many = bash(box, "for n in $(seq 200); do : > /plan/f$n || exit 7; done")
        count = bash(box, "ls /plan | wc -l")
    assert "No space left on device" in big.output
    assert many.exit_code == 7 and "No space left on device" in many.output
    assert int(count.output.strip()) < 50


def test_nothing_in_the_plan_directory_can_be_executed(make_sandbox: SandboxFactory) -> None:
    with make_sandbox() as sandbox:
        result = bash(sandbox, "cp /bin/true /plan/t && chmod +x /plan/t && /plan/t")
        options = bash(sandbox, "grep ' /plan ' /proc/self/mounts")
    assert "Permission denied" in result.output
    assert {"noexec", "nosuid", "nodev"} <= set(options.output.split()[3].split(","))


def test_a_plan_survives_its_container(make_sandbox: SandboxFactory, docker_client: Any) -> None:
    """Every write is copied to the host at once: a container killed after it keeps it."""
    sandbox = make_sandbox()
    sandbox.start()
    write = {"file_path": "/plan/plan.md", "content": "# Plan\n\nkept\n"}
    assert sandbox.call(ToolRequest("write", write)).ok
    assert sandbox.spec.plan_dir is not None
    assert (sandbox.spec.plan_dir / "plan.md").read_text() == "# Plan\n\nkept\n"
    docker_client.containers.get(sandbox.container_id).kill()
    sandbox.stop()
    assert (sandbox.spec.plan_dir / "plan.md").read_text() == "# Plan\n\nkept\n"


def test_only_regular_files_with_sane_names_are_copied_out(make_sandbox: SandboxFactory) -> None:
    sandbox = make_sandbox()
    with sandbox:
        bash(
            sandbox,
            "cd /plan && echo ok > plan.md && ln -s /etc/passwd link.md && mkfifo pipe "
            "&& mkdir -p deep && echo d > deep/x.md && printf x > \"$(printf 'odd\\033]0;t')\"",
        )
    assert sandbox.spec.plan_dir is not None
    copied = sorted(
        str(p.relative_to(sandbox.spec.plan_dir)) for p in sandbox.spec.plan_dir.rglob("*")
    )
    assert copied == ["deep", "deep/x.md", "plan.md"]
    assert sandbox.left_out == ["a file with an unusable name"]


def test_git_status_probe_has_no_plan_directory_on_the_host(
    make_sandbox: SandboxFactory,
) -> None:
    with make_sandbox(plan_dir=None) as probe:
        result = bash(probe, "head -c 5M /dev/zero > /plan/x; df -k /plan | tail -1")
    assert "No space left on device" in result.output
    assert probe.spec.plan_dir is None


# ------------------------------------------------------- 3. processes outlive their command


@pytest.mark.parametrize(
    "escape",
    [
        "env -i setsid sh -c 'sleep 901' </dev/null >/dev/null 2>&1 &",
        "(env -i sh -c 'sleep 902 &' &) ; sleep 0.2",
        "setsid -f env -i sleep 903 >/dev/null 2>&1",
        "nohup env -i sh -c 'while :; do sleep 904; done' >/dev/null 2>&1 &",
    ],
)
def test_no_process_outlives_its_command(make_sandbox: SandboxFactory, escape: str) -> None:
    with make_sandbox() as sandbox:
        assert bash(sandbox, escape).ok
        left = processes(sandbox)
    assert "sleep 90" not in left


ZOMBIE_LEADER = """
import ctypes, os, threading, time
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
def beat():
    while True:
        with open("/tmp/alive", "w") as out:
            out.write(str(time.time()))
        time.sleep(0.2)
threading.Thread(target=beat).start()
time.sleep(0.3)
ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: the main thread alone; the group lives on
"""


def test_a_process_whose_leader_looks_dead_is_killed_too(
    make_sandbox: SandboxFactory, repo: Path
) -> None:
    """/proc shows the group leader as a zombie while its other thread keeps running."""
    (repo / "zl.py").write_text(ZOMBIE_LEADER)
    with make_sandbox() as sandbox:
        bash(sandbox, "python3 /workspace/zl.py; sleep 0.6")
        first = bash(sandbox, "cat /tmp/alive").output
        time.sleep(1.0)
        second = bash(sandbox, "cat /tmp/alive; grep -l Z /proc/[0-9]*/stat 2>/dev/null")
    assert second.output.splitlines()[0] == first.strip()  # nothing writes any more


def test_a_running_command_keeps_its_own_processes(make_sandbox: SandboxFactory) -> None:
    """Sweeping strays after one command never touches another that is still running."""
    with make_sandbox() as sandbox, ThreadPoolExecutor(1) as pool:
        slow = pool.submit(bash, sandbox, "sleep 2 & wait; echo survived")
        time.sleep(0.5)
        bash(sandbox, "env -i setsid sleep 905 >/dev/null 2>&1 &")
        assert slow.result(30).output.strip() == "survived"
        assert "sleep 905" not in processes(sandbox)


def test_commands_cannot_trace_each_other(make_sandbox: SandboxFactory) -> None:
    with make_sandbox() as sandbox:
        result = bash(
            sandbox,
            'python3 -c "import ctypes; libc = ctypes.CDLL(None, use_errno=True); '
            'print(libc.ptrace(16, 1, 0, 0), ctypes.get_errno())"',
        )
    assert result.output.strip() == "-1 1"  # EPERM, from the seccomp profile


# --------------------------------------------------------- 4. containers outlive planrun


HOLDER = """
import sys, time
from pathlib import Path
from sandbox_runner.sandbox.docker_sandbox import DockerSandbox
from sandbox_runner.sandbox.docker_engine import connect
from sandbox_runner.sandbox.spec import SandboxSpec
from sandbox_runner.types import ToolRequest
workspace, plan_dir, image, session = sys.argv[1:]
spec = SandboxSpec.plan(Path(workspace), Path(plan_dir), image, session=session)
sandbox = DockerSandbox(spec, connect())
sandbox.start()
print("started", flush=True)
sandbox.call(ToolRequest("bash", {"command": "yes > /dev/null"}, timeout=600))
"""


def test_a_sandbox_whose_planrun_was_killed_removes_itself(
    repo: Path, tmp_path: Path, sandbox_image: str, docker_client: Any, test_session: str
) -> None:
    plans = tmp_path / "plans"
    plans.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(repo), str(plans), sandbox_image, test_session],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "started"
    label = {"label": f"io.planrun.session={test_session}"}
    assert docker_client.containers.list(filters=label)
    time.sleep(0.5)  # the busy command is running
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    killed_at = time.monotonic()
    while docker_client.containers.list(all=True, filters=label):
        assert time.monotonic() - killed_at < 15, "the orphaned sandbox is still there"
        time.sleep(0.1)


def test_gc_leaves_the_containers_of_other_hosts_alone(
    make_sandbox: SandboxFactory, docker_client: Any
) -> None:
    sandbox = make_sandbox()
    sandbox.start()
    container = docker_client.containers.get(sandbox.container_id)
    elsewhere = dict(container.labels, **{"io.planrun.host": "another-host"})
    other = docker_client.containers.create(container.image.id, command=["true"], labels=elsewhere)
    try:
        removed = collect_garbage(docker_client)
        assert other.short_id not in removed
        assert container.short_id not in removed  # its owner (this process) is alive
        # (`everything=True` is not tried here: it would remove other runs' sandboxes.)
    finally:
        sandbox.stop()
        other.remove(force=True)


# ---------------------------------------------------------------------- 5. deep trees


def make_deep_tree(root: Path, depth: int) -> Path:
    """DEPTH nested directories under root, made without any recursion."""
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(os.open("leaf.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    return root


@pytest.fixture
def deep_repo(repo: Path) -> Iterator[Path]:
    top = repo / "d"
    yield make_deep_tree(repo, 1100)
    # Python's own rmtree (pytest's clean-up) recurses, and would fail on this tree.
    subprocess.run(["rm", "-rf", str(top)], check=True)


def test_deep_trees_are_walked_on_the_host_and_in_the_sandbox(
    make_sandbox: SandboxFactory, deep_repo: Path
) -> None:
    repo = deep_repo
    before = tree_fingerprint(repo)
    with make_sandbox() as sandbox:
        found = sandbox.call(ToolRequest("glob", {"pattern": "**/leaf.py"}, timeout=60))
        listing = sandbox.call(ToolRequest("ls", {}, timeout=60))
        deep_plan = bash(
            sandbox,
            "cd /plan && for n in $(seq 300); do mkdir d && cd d || exit 1; done; echo x > p.md",
        )
    assert found.ok and found.output.endswith("/d/leaf.py"), found
    assert listing.ok
    assert deep_plan.exit_code == 0
    assert tree_fingerprint(repo) == before


# ------------------------------------------------------------ 6. tool-server denial of service


def test_a_backtracking_glob_ends_quickly(make_sandbox: SandboxFactory, repo: Path) -> None:
    (repo / ("a" * 200)).write_text("x")
    with make_sandbox() as sandbox:
        started = time.monotonic()
        result = sandbox.call(ToolRequest("glob", {"pattern": "*a" * 20 + "*b"}, timeout=20))
    assert result.ok and result.output == "No files found"
    assert time.monotonic() - started < 5


def test_grep_on_a_fifo_is_refused_at_once(make_sandbox: SandboxFactory, repo: Path) -> None:
    os.mkfifo(repo / "pipe")
    with make_sandbox() as sandbox:
        started = time.monotonic()
        direct = sandbox.call(ToolRequest("grep", {"pattern": "x", "path": "pipe"}, timeout=30))
        walked = sandbox.call(ToolRequest("grep", {"pattern": "demo"}, timeout=30))
    assert not direct.ok and direct.error == "Not a regular file (fifo): /workspace/pipe"
    assert walked.ok and "README.md" in walked.output
    assert time.monotonic() - started < 10


# ----------------------------------------------------------- 7. kernel surface and leaks


def test_the_kernel_surface_is_small(make_sandbox: SandboxFactory) -> None:
    probe = """
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
for family in (socket.AF_VSOCK, socket.AF_ALG, socket.AF_PACKET, 17):
    try:
        kind = socket.SOCK_SEQPACKET if family == socket.AF_ALG else socket.SOCK_DGRAM
        socket.socket(family, kind)
        print(family, "open")
    except OSError as error:
        print(family, error.errno)
print("io_uring", libc.syscall(425, 1, 0), ctypes.get_errno())
print("userfaultfd", libc.syscall(323, 0), ctypes.get_errno())
print("process_vm_readv", libc.syscall(310, 1, 0, 0, 0, 0, 0), ctypes.get_errno())
print("unshare", libc.unshare(0x10000000), ctypes.get_errno())
for protocol in (0, 9):  # NETLINK_ROUTE is fine, NETLINK_AUDIT is not
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, protocol).close()
        print("netlink", protocol, "open")
    except OSError as error:
        print("netlink", protocol, error.errno)
try:
    os.memfd_create("x")
    print("memfd open")
except OSError as error:
    print("memfd", error.errno)
socket.socket(socket.AF_UNIX).close(); socket.socket(socket.AF_INET).close()
print("inet ok")
"""
    with make_sandbox() as sandbox:
        result = bash(sandbox, f"python3 -c '{probe}'")
        shm = bash(sandbox, "ls /dev/shm /dev/mqueue")
        resolver = bash(sandbox, "cat /etc/resolv.conf")
    lines = result.output.splitlines()
    assert lines[:4] == ["40 1", "38 1", "17 1", "17 1"], result.output
    assert lines[4:] == ["io_uring -1 1", "userfaultfd -1 1", "process_vm_readv -1 1",
                         "unshare -1 1", "netlink 0 open", "netlink 9 1", "memfd 1",
                         "inet ok"]  # fmt: skip
    assert shm.exit_code != 0 and "No such file or directory" in shm.output
    assert "nameserver" not in resolver.output


def test_tool_output_is_not_logged_by_docker(
    make_sandbox: SandboxFactory, docker_client: Any
) -> None:
    with make_sandbox() as sandbox:
        bash(sandbox, "echo secret-output")
        container = docker_client.containers.get(sandbox.container_id)
        assert container.attrs["HostConfig"]["LogConfig"]["Type"] == "none"
        assert container.attrs["HostConfig"]["IpcMode"] == "none"
        assert container.attrs["Config"]["StdinOnce"] is True


def test_a_plan_already_in_the_plan_directory_is_there_inside(
    make_sandbox: SandboxFactory,
) -> None:
    """A plan file from earlier (a session coming back) is seeded into /plan."""
    sandbox = make_sandbox()
    assert sandbox.spec.plan_dir is not None
    (sandbox.spec.plan_dir / "plan.md").write_text("# Plan\n\nold step\n")
    with sandbox:
        edit = {"file_path": "/plan/plan.md", "old_string": "old", "new_string": "new"}
        assert sandbox.call(ToolRequest("edit", edit)).ok
    assert (sandbox.spec.plan_dir / "plan.md").read_text() == "# Plan\n\nnew step\n"


def test_a_plan_directory_the_host_cannot_mirror_never_breaks_a_call(
    make_sandbox: SandboxFactory,
) -> None:
    """Names too long for the host's temporary file, a file turned into a directory: the
    write still answers, and what could not be copied is said, not silently dropped."""
    sandbox = make_sandbox()
    long_name = "n" * 250
    with sandbox:
        assert sandbox.call(
            ToolRequest("write", {"file_path": f"/plan/{long_name}", "content": "x"})
        ).ok
        assert sandbox.call(ToolRequest("write", {"file_path": "/plan/a", "content": "x"})).ok
        bash(sandbox, "rm /plan/a && mkdir /plan/a && echo b > /plan/a/b")
        assert sandbox.call(ToolRequest("write", {"file_path": "/plan/c", "content": "c"})).ok
    assert sandbox.spec.plan_dir is not None
    assert (sandbox.spec.plan_dir / long_name).read_text() == "x"
    assert (sandbox.spec.plan_dir / "c").read_text() == "c"
    assert any(line.startswith("a/b:") for line in sandbox.left_out), sandbox.left_out
