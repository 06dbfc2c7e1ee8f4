"""A Sandbox for unit tests: the real tool server as a local process, with no container.

It is NOT a security boundary; it lets the agent loop and the policy be tested fast and
without Docker. Container paths (/workspace, /plan) are mapped to temporary directories by
rewriting them in requests and replies.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sandbox_runner import SandboxBase
from sandbox_runner.errors import SandboxError
from sandbox_runner.sandbox.client import ToolServerClient
from sandbox_runner.sandbox.container_options import TOOLSERVER_SOURCE
from sandbox_runner.types import ExecResult, ToolRequest

# /workspace or /plan as a whole path component, wherever it appears in a request.
CONTAINER_ROOT = re.compile(r"(?<![\w/.-])/(workspace|plan)(?![\w.-])")


class LocalSandbox(SandboxBase):
    """Runs the tool server as a child process on the host, for tests only."""

    def __init__(self, workspace: Path, plan_dir: Path | None, *, writable: bool = False) -> None:
        self.workspace = workspace
        self.writable = writable
        """The workspace may be written (a work sandbox); otherwise only /plan."""
        # A probe sandbox (no plan directory) still needs somewhere for the server's /plan.
        self.plan_dir = plan_dir if plan_dir is not None else Path(tempfile.mkdtemp())
        self.requests: list[ToolRequest] = []
        self._process: subprocess.Popen[bytes] | None = None
        self._client: ToolServerClient | None = None

    def start(self) -> None:
        if self._client is not None:
            return
        host_end, server_end = socket.socketpair()
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                str(TOOLSERVER_SOURCE),
                "--workspace",
                str(self.workspace),
                "--plan-dir",
                str(self.plan_dir),
                *(["--writable", str(self.workspace)] if self.writable else []),
            ],
            # Popen takes a file descriptor (int), not the socket object itself.
            stdin=server_end.fileno(),
            stdout=server_end.fileno(),
            stderr=subprocess.DEVNULL,
        )
        server_end.close()
        self._client = ToolServerClient(host_end, multiplexed=False)
        self._client.wait_ready(10)

    def call(self, request: ToolRequest) -> ExecResult:
        if self._client is None:
            raise SandboxError("the sandbox is not running")
        self.requests.append(request)
        local = ToolRequest(request.op, self._to_local(request.args), request.timeout)
        result = self._client.request(local)
        return ExecResult(
            ok=result.ok,
            output=self._to_container(result.output),
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            truncated=result.truncated,
            error=self._to_container(result.error) if result.error else None,
            meta=result.meta,
        )

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def _to_local(self, args: dict[str, Any]) -> dict[str, Any]:
        roots = {"workspace": str(self.workspace), "plan": str(self.plan_dir)}
        text = CONTAINER_ROOT.sub(lambda match: roots[match.group(1)], json.dumps(args))
        result: dict[str, Any] = json.loads(text)
        return result

    def _to_container(self, text: str) -> str:
        return text.replace(str(self.workspace), "/workspace").replace(str(self.plan_dir), "/plan")
