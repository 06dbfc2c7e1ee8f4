"""The tool server in a real container of the sandbox image, with a tiny JSON-lines client.

The server runs where it runs for users: the image's python3, ripgrep, universal-ctags
and git, with the sandbox's hardening (read-only root and workspace, no network, no
capabilities, no-new-privileges). The workspace and the plan directory are mounted at
their host paths, so a test can name a file by the same path inside and outside.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sandbox_runner.sandbox.container_options import MANAGED_LABEL, TOOLSERVER_SOURCE
from sandbox_runner.sandbox.host_paths import sandbox_user
from sandbox_runner.sandbox.spec import TOOLSERVER_MOUNT

NOBODY = 65534
TEST_LABEL = "io.planrun.session=toolserver-tests"

Response = dict[str, Any]


class ServerProcess:
    """A tool server running in its own sandbox container, spoken to over `docker run -i`."""

    def __init__(
        self,
        workspace: Path,
        plan_dir: Path,
        *extra: str,
        image: str,
        user: int | None = None,
        visible: Iterable[Path] = (),
        writable: Iterable[Path] = (),
        plan_kib: int = 64 * 1024,
        plan_entries: int = 10_000,
    ) -> None:
        uid, gid = (user, user) if user is not None else sandbox_user()
        writable = tuple(writable)
        for directory in writable:
            os.chown(directory, uid, gid)
        self.name = f"planrun-test-{uuid.uuid4().hex[:12]}"
        argv = ["docker", "run", "-i", "--rm", "--name", self.name, "--label", MANAGED_LABEL]
        argv += ["--label", TEST_LABEL, "--user", f"{uid}:{gid}", "--read-only"]
        argv += ["--network", "none", "--cap-drop", "ALL"]
        argv += ["--security-opt", "no-new-privileges:true", "--pids-limit", "256"]
        argv += ["--memory", "1g", "--memory-swap", "1g", "--log-driver", "none"]
        argv += ["--tmpfs", "/tmp:rw,noexec,nosuid,nodev,size=64m,mode=1777"]
        # Given to the server only: a command must never see it.
        argv += ["--env", "LEAK_CHECK=server-secret", "--workdir", str(workspace)]
        for directory in visible:  # mounted first: the mounts below may lie inside
            directory.chmod(0o755)  # a test's directory is private to its owner
            argv += _mount(directory, read_only=True)
        argv += _mount(workspace, read_only=True)
        # The plan directory is what it is for users: a tmpfs the kernel caps.
        plan_options = f"size={plan_kib}k,nr_inodes={plan_entries},mode=0700,uid={uid},gid={gid}"
        argv += ["--tmpfs", f"{plan_dir}:rw,noexec,nosuid,nodev,{plan_options}"]
        argv += _mount(TOOLSERVER_SOURCE, read_only=True, target=TOOLSERVER_MOUNT)
        for directory in writable:
            argv += _mount(directory, read_only=False)
        argv += [image, "python3", "-I", "-S", TOOLSERVER_MOUNT]
        argv += ["--workspace", str(workspace), "--plan-dir", str(plan_dir)]
        argv += ["--guard-dir", "/tmp"]  # as container_options gives it
        argv += ["--max-plan-bytes", str(plan_kib * 1024), "--max-plan-entries", str(plan_entries)]
        argv += extra
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin
        self._stdout = self.proc.stdout
        first = self._stdout.readline()
        if not first:
            stderr = self.proc.stderr.read().decode() if self.proc.stderr else ""
            raise AssertionError(f"the tool server container did not start: {stderr.strip()}")
        self.ready: Response = json.loads(first)
        self.arrivals: list[Response] = []
        self.arrival_order: list[object] = []
        self._next_id = 0
        self._cond = threading.Condition()
        threading.Thread(target=self._read_responses, daemon=True).start()

    @property
    def pid(self) -> int:
        """The server's process id inside its container (1: it is the container's init)."""
        return int(self.ready["pid"])

    def host_pid(self) -> int:
        """The server's process id as the host sees it."""
        inspect = ["docker", "inspect", "--format", "{{.State.Pid}}", self.name]
        return int(subprocess.run(inspect, capture_output=True, text=True, check=True).stdout)

    def _read_responses(self) -> None:
        for line in self._stdout:
            message = json.loads(line.decode("utf-8"))
            with self._cond:
                self.arrivals.append(message)
                self.arrival_order.append(message.get("id"))
                self._cond.notify_all()

    def send_line(self, line: bytes) -> None:
        self._stdin.write(line + b"\n")
        self._stdin.flush()

    def send(
        self, op: str, args: dict[str, Any] | None = None, timeout: float | None = None
    ) -> str:
        self._next_id += 1
        request_id = f"r{self._next_id}"
        request = {"id": request_id, "op": op, "args": args or {}, "timeout": timeout}
        self.send_line(json.dumps(request).encode())
        return request_id

    def wait_for(self, request_id: object, wait: float = 30.0) -> Response:
        deadline = time.monotonic() + wait
        with self._cond:
            while True:
                for message in self.arrivals:
                    if message.get("id") == request_id and "ok" in message:
                        self.arrivals.remove(message)
                        return message
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"no response for {request_id!r}"
                self._cond.wait(remaining)

    def call(
        self, op: str, args: dict[str, Any] | None = None, timeout: float | None = None
    ) -> Response:
        return self.wait_for(self.send(op, args, timeout))

    def ok(self, op: str, args: dict[str, Any] | None = None, timeout: float | None = None) -> str:
        response = self.call(op, args, timeout)
        assert response["ok"], response
        return str(response["output"])

    def error(self, op: str, args: dict[str, Any] | None = None) -> str:
        response = self.call(op, args)
        assert not response["ok"], response
        assert response["output"] == ""
        assert "\n" not in response["error"]
        return str(response["error"])

    def cat(self, path: Path) -> str:
        """A file's content as the sandbox sees it (the plan directory is not on the host)."""
        response = self.call("bash", {"command": f"cat '{path}'"})
        assert response["ok"] and response["exit_code"] == 0, response
        return str(response["output"])

    def peak_memory_kib(self) -> int:
        status = Path(f"/proc/{self.host_pid()}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
        return int(line.split()[1])

    def close(self) -> int:
        """End the server by closing its input; return its exit status."""
        try:
            self._stdin.close()
            return self.proc.wait(15)
        finally:
            self.remove()

    def remove(self) -> None:
        """Make sure the container is gone, whatever state the test left it in."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        subprocess.run(["docker", "rm", "-f", self.name], capture_output=True)


def _mount(source: Path, *, read_only: bool, target: str | None = None) -> list[str]:
    spec = f"type=bind,source={source},target={target or source}"
    return ["--mount", spec + (",readonly" if read_only else "")]


def leftover_containers() -> list[str]:
    """Names of test tool-server containers still present."""
    listing = ["docker", "ps", "-a", "--filter", f"label={TEST_LABEL}", "--format", "{{.Names}}"]
    return subprocess.run(listing, capture_output=True, text=True).stdout.split()
