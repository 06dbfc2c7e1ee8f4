"""bash: one command with a timeout, its output capped, and its OOM kills reported."""

from __future__ import annotations

import os

from ..arguments import clamp_timeout, describe_os_error, str_arg
from ..processes import ProcessResult, new_token, run_process, shell
from ..protocol import JsonDict, Outcome, ToolError

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..server import ToolServer


# What is kept of each of stdout and stderr (the host's cap on a tool result).
BASH_STREAM_LIMIT = 30000


def op_bash(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    command = str_arg(args, "command")
    timeout_ms = args.get("timeout")
    # Claude-Code style args.timeout is in milliseconds and wins over the request's seconds.
    if isinstance(timeout_ms, int | float) and not isinstance(timeout_ms, bool) and timeout_ms > 0:
        timeout = clamp_timeout(timeout_ms / 1000)
    token = new_token()
    oom_kills_before = oom_kill_count()
    git_env = server.git.env()
    try:
        with server.git.writing():
            result = run_process(
                server,
                [shell(), "-c", command],
                timeout=timeout,
                limits=(BASH_STREAM_LIMIT, BASH_STREAM_LIMIT),
                cwd=server.workspace,
                token=token,
                git_env=git_env,
            )
    except OSError as exc:
        where = exc.filename if isinstance(exc.filename, str) else ""
        raise ToolError(f"Could not start the command: {describe_os_error(exc, where)}") from None
    text, truncated = bash_output(result, timeout)
    if oom_kill_count() > oom_kills_before:
        text += (
            "\n[a process was killed by the kernel: out of memory "
            "(the sandbox's memory limit was reached)]"
        )
    if server.scratch_layer and layer_full(server.workspace):
        text += (
            "\n[the scratch layer is full: writes to the repository fail with 'No space left "
            "on device' (the kernel caps it at scratch_mb); remove what the command wrote]"
        )
    code = result.returncode
    return Outcome(
        text,
        truncated=truncated,
        exit_code=code if code >= 0 else 128 - code,
        timed_out=result.timed_out,
        meta={"token": token, "timeout": timeout},
    )


FULL_LAYER_BYTES = 256 * 1024


def layer_full(workspace: str) -> bool:
    """Whether the scratch layer under the workspace has no room left, in bytes or files."""
    try:
        usage = os.statvfs(workspace)
    except OSError:
        return False
    total = usage.f_blocks * usage.f_frsize
    # A write that failed for want of room leaves less than a page or so.
    room = min(FULL_LAYER_BYTES, total // 16)
    return usage.f_bavail * usage.f_frsize < room or (usage.f_files > 0 and usage.f_favail == 0)


OOM_COUNTER_FILES = (
    ("/sys/fs/cgroup/memory.events", "oom_kill"),  # cgroup v2
    ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),  # cgroup v1
)


def oom_kill_count() -> int:
    """How many processes the kernel's OOM killer has killed in this container so far."""
    for path, key in OOM_COUNTER_FILES:
        try:
            with open(path, encoding="ascii") as handle:
                for line in handle:
                    name, _, value = line.partition(" ")
                    if name == key:
                        return int(value)
        except (OSError, ValueError):
            continue
    return 0


def bash_output(result: ProcessResult, timeout: float) -> tuple[str, bool]:
    """stdout, then stderr under its own heading, each with a note if it was cut."""
    pieces: list[str] = []
    stdout = result.stdout.data().decode("utf-8", "replace").rstrip("\n")
    if stdout:
        pieces.append(stdout)
    if result.stdout.dropped:
        pieces.append(f"... [stdout truncated: {result.stdout.dropped} more bytes]")
    stderr = result.stderr.data().decode("utf-8", "replace").rstrip("\n")
    if stderr or result.stderr.dropped:
        pieces += ["[stderr]", stderr] if stderr else ["[stderr]"]
    if result.stderr.dropped:
        pieces.append(f"... [stderr truncated: {result.stderr.dropped} more bytes]")
    if result.timed_out:
        pieces.append(f"[command timed out after {timeout:g} s and was killed]")
    return "\n".join(pieces), bool(result.stdout.dropped or result.stderr.dropped)
