"""The server: request lines in, one thread per request (or inline), response lines out."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import threading
import time

from .arguments import clamp_timeout, describe_os_error, printable
from .git_guard import GitGuard
from .ops.bash import op_bash
from .ops.export import op_plan_files, op_plan_read
from .ops.glob import op_glob
from .ops.grep import op_grep
from .ops.ls import op_ls
from .ops.lsp import op_lsp
from .ops.read import op_read
from .ops.stat import op_ping, op_stat
from .ops.write import op_edit, op_write
from .processes import kill_command
from .protocol import PROTOCOL_VERSION, JsonDict, Outcome, ToolError, failure

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from typing import NoReturn


# The plan directory's capacity when the command line gives none (the host always does).
DEFAULT_MAX_PLAN_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_PLAN_ENTRIES = 10_000

# Quick, bounded operations run on the reading thread: starting a thread per request
# would cost more than the operation itself (a small read is about 0.1 ms).
INLINE_OPS = frozenset({"ping", "stat", "read"})


class ToolServer:
    """Holds the configuration and the running commands, and answers request lines."""

    def __init__(
        self,
        workspace: str,
        plan_dir: str,
        extra_dirs: list[str],
        plan_limits: tuple[int, int],
        writable: list[str] | None = None,
        *,
        guard_dirs: list[str] | None = None,
    ) -> None:
        self.workspace = os.path.normpath(os.path.abspath(workspace))
        self.plan_dir = os.path.normpath(os.path.abspath(plan_dir))
        self.writable = [os.path.normpath(os.path.abspath(path)) for path in writable or []]
        """Roots Write and Edit may change besides the plan directory (a work sandbox's
        /workspace)."""
        self.extra_dirs = [os.path.normpath(os.path.abspath(path)) for path in extra_dirs]
        self.max_plan_bytes, self.max_plan_entries = plan_limits
        # A JSON-escaped write may be several times its content; anything far beyond is junk.
        self.max_request_bytes = 6 * self.max_plan_bytes + (1 << 20)
        self.write_lock = threading.Lock()
        self._out_lock = threading.Lock()
        self._running_lock = threading.Lock()
        self._running: dict[int, tuple[subprocess.Popen[bytes], str | None]] = {}
        # Held from a child's creation until it is registered, so that reap_orphans never
        # collects the exit status of a command that subprocess is about to wait for.
        self.spawn_lock = threading.Lock()
        # Git may run in any directory a command can reach: the read-only mounts, and every
        # writable place a command can lay a repository out in (its drivers would run in
        # the next command), each walked by the guard.
        places = [*self.extra_dirs, self.plan_dir, *self.writable, *(guard_dirs or [])]
        normal = [os.path.normpath(os.path.abspath(path)) for path in places]
        self.git = GitGuard(list(dict.fromkeys([self.workspace, *normal])))
        self.warmed_up = threading.Event()
        self.scratch_layer = False
        """Whether the workspace is a scratch run's size-capped copy-on-write layer."""
        self.dumpable: int | None = None

    def resolve(self, raw: str) -> str:
        if "\0" in raw:
            raise ToolError("Path contains a NUL character")
        return os.path.normpath(os.path.join(self.workspace, raw))

    def require_directory(self, path: str) -> None:
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            raise ToolError(f"Directory does not exist: {printable(path)}") from None
        if not stat.S_ISDIR(mode):
            raise ToolError(f"Path is not a directory: {printable(path)}")

    def register(self, proc: subprocess.Popen[bytes], token: str | None) -> None:
        with self._running_lock:
            self._running[proc.pid] = (proc, token)

    def tracked_pids(self) -> set[int]:
        """The pids of the commands running now (subprocess waits for these itself)."""
        with self._running_lock:
            return set(self._running)

    def unregister(self, proc: subprocess.Popen[bytes]) -> None:
        with self._running_lock:
            self._running.pop(proc.pid, None)

    def send(self, payload: JsonDict) -> None:
        # backslashreplace only matters for a stray lone surrogate; the JSON stays valid.
        data = (json.dumps(payload, ensure_ascii=False) + "\n").encode("utf-8", "backslashreplace")
        with self._out_lock:
            try:
                sys.stdout.buffer.write(data)
                sys.stdout.buffer.flush()
            except (OSError, ValueError):
                # The host is gone: nobody can read results, so stop everything.
                self.shutdown(locked=True)

    def handle_line(self, line: bytes) -> None:
        started = time.perf_counter()
        try:
            request = json.loads(line)
        except Exception as exc:
            self.send(failure(None, f"Invalid request: not valid JSON ({exc})"))
            return
        if not isinstance(request, dict):
            self.send(failure(None, "Invalid request: expected a JSON object"))
            return
        request_id = request.get("id")
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            request_id = None
        op = request.get("op")
        handler = OPS.get(op) if isinstance(op, str) else None
        args = request.get("args")
        args = {} if args is None else args
        if handler is None:
            self.send(failure(request_id, f"Unknown op: {op!r} (known: {', '.join(OPS)})"))
        elif not isinstance(args, dict):
            self.send(failure(request_id, "Invalid request: args must be a JSON object"))
        else:
            job = (request_id, handler, args, clamp_timeout(request.get("timeout")), started)
            if op in INLINE_OPS:
                self.run_request(*job)
                return
            try:
                threading.Thread(target=self.run_request, args=job, daemon=True).start()
            except RuntimeError as exc:
                self.send(failure(request_id, f"Server busy: cannot start a thread ({exc})"))

    def run_request(
        self,
        request_id: object,
        handler: Callable[[ToolServer, JsonDict, float], Outcome],
        args: JsonDict,
        timeout: float,
        started: float,
    ) -> None:
        try:
            if handler in WRITING_OPS:
                with self.git.writing():
                    outcome = handler(self, args, timeout)
            else:
                outcome = handler(self, args, timeout)
            response = outcome.response(request_id)
        except ToolError as exc:
            response = failure(request_id, exc.message, timed_out=exc.timed_out)
        except OSError as exc:
            filename = exc.filename if isinstance(exc.filename, str) else ""
            response = failure(request_id, describe_os_error(exc, filename))
        except Exception as exc:
            import traceback

            traceback.print_exc(file=sys.stderr)
            response = failure(request_id, f"Internal error: {type(exc).__name__}: {exc}")
        meta = response["meta"]
        if isinstance(meta, dict):
            meta["server_ms"] = round((time.perf_counter() - started) * 1000, 3)
        self.send(response)

    def serve(self) -> NoReturn:
        self.send({"event": "ready", "pid": os.getpid(), "protocol": PROTOCOL_VERSION})
        threading.Thread(target=self.warm_up, daemon=True).start()
        stdin = sys.stdin.buffer
        while line := stdin.readline(self.max_request_bytes):
            if len(line) >= self.max_request_bytes and not line.endswith(b"\n"):
                while (rest := stdin.readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass
                self.send(failure(None, f"Request too long (over {self.max_request_bytes} bytes)"))
            elif line.strip():
                self.handle_line(line)
        self.shutdown()

    def warm_up(self) -> None:
        """After the ready line, so time-to-ready stays low: what commands need first."""
        try:
            self.dumpable = make_undumpable()
            __import__("subprocess")
        finally:
            self.warmed_up.set()
        # The first look at a large workspace takes a while: begun before a command needs it.
        self.git.start()

    def shutdown(self, *, locked: bool = False) -> NoReturn:
        """Kill every running command (whole process groups and token holders), then exit."""
        with self._running_lock:
            running = list(self._running.values())
        for proc, token in running:
            kill_command(proc, token)
        # Hold the output lock so no response line is cut off half-written.
        if locked or self._out_lock.acquire(timeout=1.0):
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.buffer.flush()
        os._exit(0)


OPS: dict[str, Callable[[ToolServer, JsonDict, float], Outcome]] = {
    "ping": op_ping,
    "read": op_read,
    "glob": op_glob,
    "grep": op_grep,
    "ls": op_ls,
    "bash": op_bash,
    "write": op_write,
    "edit": op_edit,
    "stat": op_stat,
    "lsp": op_lsp,
    "plan_files": op_plan_files,
    "plan_read": op_plan_read,
}


# What may change the workspace besides commands (op_bash counts its own command): the
# git guard looks at the tree again after each.
WRITING_OPS = (op_write, op_edit)

PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4


def make_undumpable() -> int | None:
    """Clear this process's dumpable flag; return it as the kernel then reports it.

    A process of the same uid (any command) could otherwise open /proc/<our pid>/fd/1 and
    write forged responses. Commands get the flag back when they exec, as they should.
    None where prctl cannot be called.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        return int(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))
    except (ImportError, OSError, AttributeError):
        return None
