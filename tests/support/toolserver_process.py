"""The tool server as a local subprocess, with a tiny JSON-lines client, for its tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

TOOLSERVER = Path(__file__).resolve().parents[2] / "sandbox_runner" / "sandbox" / "toolserver.py"
NOBODY = 65534

Response = dict[str, Any]


class ServerProcess:
    """A running tool server and a tiny JSON-lines client for it."""

    def __init__(
        self,
        workspace: Path,
        plan_dir: Path,
        *extra: str,
        python: str = sys.executable,
        user: int | None = None,
    ) -> None:
        argv = [python, "-I", "-S", str(TOOLSERVER), "--workspace", str(workspace)]
        argv += ["--plan-dir", str(plan_dir), *extra]
        env = {**os.environ, "LEAK_CHECK": "server-secret"}
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, user=user, group=user
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin
        self._stdout = self.proc.stdout
        self.ready: Response = json.loads(self._stdout.readline())
        self.arrivals: list[Response] = []
        self.arrival_order: list[object] = []
        self._next_id = 0
        self._cond = threading.Condition()
        threading.Thread(target=self._read_responses, daemon=True).start()

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

    def peak_memory_kib(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
        return int(line.split()[1])

    def close(self) -> int:
        self._stdin.close()
        return self.proc.wait(10)


def nobody_python() -> str | None:
    """An interpreter (3.11+) that the unprivileged uid can run, or None."""
    check = "import sys; assert sys.version_info >= (3, 11)"
    for candidate in (sys.executable, shutil.which("python3.11"), "/usr/bin/python3"):
        if candidate is None:
            continue
        try:
            result = subprocess.run(
                [candidate, "-I", "-S", "-c", check], user=NOBODY, group=NOBODY, capture_output=True
            )
        except OSError:
            continue
        if result.returncode == 0:
            return candidate
    return None
