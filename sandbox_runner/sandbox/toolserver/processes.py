"""Commands: a fresh environment, bounded capture, and nothing left running after them."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable
    from typing import IO

    from .server import ToolServer


READER_JOIN_SECONDS = 2.0
TOKEN_KILL_ROUNDS = 5
COMMAND_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Commands' HOME, the shared /tmp; git expands a `~` in a config path to it.
COMMAND_HOME = "/tmp"
# In an image derived from the user's: planrun's runtime (bash, rg, ctags, git), searched
# after the image's own PATH, and the environment the image declares (its ENV).
RUNTIME_TOOLS = "/opt/planrun/runtime/tools"
IMAGE_ENV_FILE = "/opt/planrun/image-env.json"
# What an image's environment does not hand to commands: git's variables (the git guard
# sets those), shells' start-up files, and a preload that planrun's own tools would load.
# Where the repository, plans, extra directories and commands' files are: never searched.
UNTRUSTED_ROOTS = ("/workspace", "/plan", "/ro", "/tmp")
IMAGE_ENV_DROPPED = ("GIT_", "PLANRUN_", "BASH_ENV=", "ENV=", "LD_PRELOAD=", "LD_AUDIT=")


# Keep this many records ending with this separator; a byte more ends the command (a
# search with more matches than can be shown).
RecordStop = tuple[int, bytes, "Callable[[], None]"]


class BoundedCapture:
    """Drain one pipe in a thread, keeping the first LIMIT bytes and counting the rest."""

    def __init__(self, pipe: IO[bytes], limit: int, stop: RecordStop | None = None) -> None:
        self._pipe = pipe
        self._limit = limit
        self._chunks: list[bytes] = []
        self._lock = threading.Lock()
        self.kept = 0
        self.dropped = 0
        self.dropped_lines = 0
        self._stop = stop
        self._records = 0
        self.stopped = False  # at the stop's record count, and the command ended
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        fd = self._pipe.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            if self._stop is not None:
                chunk = self._count_records(chunk, self._stop)
            with self._lock:
                room = max(0, self._limit - self.kept)
                if room:
                    self._chunks.append(chunk[:room])
                    self.kept += min(room, len(chunk))
                rest = chunk[room:]
                self.dropped += len(rest)
                self.dropped_lines += rest.count(b"\n")
            if self.stopped:
                return

    def _count_records(self, chunk: bytes, stop: RecordStop) -> bytes:
        """CHUNK up to the stop's last wanted record; a byte past it ends the command."""
        count, separator, end_command = stop
        if self._records >= count:
            self.stopped = True
            end_command()
            return b""
        found = chunk.count(separator)
        if self._records + found < count:
            self._records += found
            return chunk
        cut = -1
        for _ in range(count - self._records):
            cut = chunk.index(separator, cut + 1)
        self._records = count
        if cut + 1 < len(chunk):
            self.stopped = True
            end_command()
        return chunk[: cut + 1]

    def finish(self, timeout: float) -> None:
        """Wait for EOF; a pipe still held open by an escaped process is left to its thread."""
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._pipe.close()

    def data(self) -> bytes:
        with self._lock:
            return b"".join(self._chunks)


class ProcessResult:
    """The captured streams and exit status of one finished or killed command."""

    __slots__ = ("returncode", "stderr", "stdout", "timed_out")

    def __init__(
        self, stdout: BoundedCapture, stderr: BoundedCapture, returncode: int, timed_out: bool
    ) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.returncode = returncode
        self.timed_out = timed_out


def image_env(path: str = IMAGE_ENV_FILE) -> dict[str, str]:
    """The environment a derived image's base declares (its toolchain's PATH, GOPATH, ...),
    recorded when planrun built the image; empty in planrun's own image."""
    try:
        with open(path, encoding="utf-8") as file:
            entries = json.load(file)
    except (OSError, ValueError):
        return {}
    env = {}
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, str) and "=" in entry and not entry.startswith(IMAGE_ENV_DROPPED):
            name, _, value = entry.partition("=")
            env[name] = value
    return env


IMAGE_ENV = image_env()


def command_search_path(image: dict[str, str] = IMAGE_ENV, runtime: str = RUNTIME_TOOLS) -> str:
    """Commands' PATH: the image's, then planrun's runtime when the image has one.

    Only the image's own directories: an entry that is relative (`.`, empty) or lies in
    the repository, /plan, /ro or /tmp is dropped, or a planted `rg`, `git` or `ls` would
    run in place of the image's (Grep, plan mode's read-only commands)."""
    entries = [
        entry
        for entry in (image.get("PATH") or COMMAND_PATH).split(":")
        if entry.startswith("/") and not _in_sandbox_mounts(os.path.normpath(entry))
    ]
    if os.path.isdir(runtime):
        entries.append(runtime)
    return ":".join(entries) or COMMAND_PATH


def _in_sandbox_mounts(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in UNTRUSTED_ROOTS)


def shell(runtime: str = RUNTIME_TOOLS) -> str:
    """The bash that runs Bash commands: the image's, else planrun's runtime's."""
    if os.access("/bin/bash", os.X_OK) or not os.access(f"{runtime}/bash", os.X_OK):
        return "/bin/bash"
    return f"{runtime}/bash"


def command_env(token: str, git_env: dict[str, str]) -> dict[str, str]:
    """A fresh environment: nothing of the server's own environment leaks into commands,
    only what the image declares (a derived image's base) and planrun's own settings."""
    return {
        **IMAGE_ENV,
        "PATH": command_search_path(),
        "HOME": COMMAND_HOME,
        "LANG": "C.UTF-8",
        "TMPDIR": "/tmp",
        "GIT_OPTIONAL_LOCKS": "0",
        # Set, even empty, it allows no transport at all, whatever protocol.<name>.allow
        # says: a partial clone's lazy fetch would run remote.<name>.uploadpack.
        "GIT_ALLOW_PROTOCOL": "",
        "GIT_CONFIG_GLOBAL": "/dev/null",  # HOME is the shared /tmp
        # Nor are git's default attributes and ignore files there ($HOME/.config/git/).
        "XDG_CONFIG_HOME": "/dev/null",
        **git_env,
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "TERM": "dumb",
        "PLANRUN_CMD": token,
    }


def new_token() -> str:
    return f"{os.getpid()}-{os.urandom(8).hex()}"


def kill_token_holders(token: str) -> int:
    """SIGKILL every process whose initial environment carries TOKEN.

    This catches what the process group misses: `setsid`, double forks, daemons.
    """
    marker = b"PLANRUN_CMD=" + token.encode() + b"\0"
    own_pid = os.getpid()
    killed_total = 0
    for _ in range(TOKEN_KILL_ROUNDS):
        killed = 0
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == own_pid:
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as environ:
                    found = marker in environ.read()
                if found:
                    os.kill(int(name), signal.SIGKILL)
                    killed += 1
            except OSError:
                continue
        if not killed:
            break
        killed_total += killed
    return killed_total


def kill_command(proc: subprocess.Popen[bytes], token: str | None) -> None:
    """Kill the command's whole process group, then anything else carrying its token."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    if token:
        kill_token_holders(token)


STRAY_SWEEP_ROUNDS = 20


def sweep_strays(server: ToolServer) -> int:
    """As the container's init, SIGKILL every process that no running command owns.

    A finished command's processes are gone whatever they did to hide: a process that
    left its session (setsid), cleared its environment (env -i) or double-forked is
    re-parented to PID 1, and everything not descended from a command still running is
    killed. Only PID 1 sees the whole container this way; elsewhere (a test harness)
    the token and the process group have to do.
    """
    if os.getpid() != 1:
        return 0
    killed = 0
    with server.spawn_lock:  # a command being started is not yet registered
        for _ in range(STRAY_SWEEP_ROUNDS):
            strays = stray_pids(server.tracked_pids())
            for pid in strays:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            killed += len(strays)
            if not strays:
                break
    return killed


def stray_pids(running: set[int]) -> list[int]:
    """Live processes that are neither PID 1 nor under a running command.

    A zombie whose other threads still run (its main thread left alone with SYS_exit)
    counts as live: /proc shows the group's leader as Z, but a signal to it reaches them.
    """
    parents: dict[int, int] = {}
    live: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or name == "1":
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat_file:
                fields = stat_file.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        pid = int(name)
        parents[pid] = int(fields[1])
        if fields[0] != b"Z" or has_live_threads(pid):
            live.add(pid)
    owned = set(running)
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in owned and pid not in owned:
                owned.add(pid)
                changed = True
    return sorted(live - owned)


def has_live_threads(pid: int) -> bool:
    """Whether a zombie thread-group leader still has running threads."""
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def reap_orphans(server: ToolServer, *, settle: bool = False) -> int:
    """As the container's init (PID 1), collect the orphans that died; return how many.

    Processes whose parent exits are re-parented to PID 1 and stay zombies (counting
    against the pids limit) until PID 1 waits for them. Commands subprocess still tracks
    are left alone. With settle, keep at it briefly while killed orphans finish dying.
    """
    if os.getpid() != 1:
        return 0
    reaped = 0
    for _ in range(25 if settle else 1):
        found = _reap_zombie_orphans(server)
        reaped += found
        if not found:
            break
        time.sleep(0.02)
    return reaped


def _reap_zombie_orphans(server: ToolServer) -> int:
    reaped = 0
    with server.spawn_lock:
        tracked = server.tracked_pids()
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in tracked or name == "1":
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as stat_file:
                    stat = stat_file.read()
            except OSError:
                continue
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) >= 2 and fields[0] == b"Z" and fields[1] == b"1":
                with contextlib.suppress(ChildProcessError):
                    # 0 while other threads of the group still run: not reaped yet.
                    if os.waitpid(int(name), os.WNOHANG)[0] != 0:
                        reaped += 1
    return reaped


def run_process(
    server: ToolServer,
    argv: list[str],
    *,
    timeout: float,
    limits: tuple[int, int],
    cwd: str,
    token: str | None = None,
    git_env: dict[str, str],
    stop_after: tuple[int, bytes] | None = None,
) -> ProcessResult:
    """Run ARGV in its own session with bounded capture; kill everything it left behind.

    GIT_ENV holds the git variables (git_guard's SAFE_GIT_ENV, or its GitGuard's).
    STOP_AFTER (a count and a separator) ends the command as soon as its output holds
    more records than that; the result's stdout then says it `stopped`.
    """
    server.warmed_up.wait()  # no command may start before the server is undumpable
    import subprocess  # deferred: see ToolServer.warm_up

    with server.spawn_lock:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=command_env(token or new_token(), git_env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        server.register(proc, token)
    try:
        assert proc.stdout is not None and proc.stderr is not None

        def end_command() -> None:
            if proc.returncode is None:  # once reaped, its pid may be another's by now
                kill_command(proc, token)

        stop = None if stop_after is None else (*stop_after, end_command)
        stdout = BoundedCapture(proc.stdout, limits[0], stop)
        stderr = BoundedCapture(proc.stderr, limits[1])
        timed_out = False
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
    finally:
        kill_command(proc, token)
        proc.wait()
        server.unregister(proc)
        sweep_strays(server)
        reap_orphans(server, settle=True)
    join_until = time.monotonic() + READER_JOIN_SECONDS
    for capture in (stdout, stderr):
        capture.finish(max(0.0, join_until - time.monotonic()))
    return ProcessResult(stdout, stderr, proc.returncode, timed_out)
