"""In-container tool server: answers JSON-line tool requests on stdin/stdout, one thread each.

This file is bind-mounted read-only into the sandbox and started there as the main process
(``python3 -I -S toolserver.py --workspace /workspace --plan-dir /plan``), so it uses the
standard library only and never imports from ``sandbox_runner``. The host writes one
request per line, ``{"id", "op", "args", "timeout"}``, and reads one response per line,
``{"id", "ok", "output", "exit_code", "timed_out", "truncated", "error", "meta"}``.

The ops are shaped like the Claude Code tools models are trained on: read, glob, grep, ls,
bash, write, edit, LSP (op lsp: universal-ctags and ripgrep, no language server), plus ping
and stat for the host. Every output is bounded and says when it was cut; every failure is a
one-line message for the model, never a traceback.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import errno
import fnmatch
import heapq
import json
import os
import re
import signal
import stat
import sys
import threading
import time

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Iterator
    from typing import IO, BinaryIO, NoReturn

JsonDict = dict[str, object]

PROTOCOL_VERSION = 1
DEFAULT_TIMEOUT = 120.0
MIN_TIMEOUT = 0.1
MAX_TIMEOUT = 600.0
MAX_OUTPUT_BYTES = 256 * 1024
DEFAULT_MAX_PLAN_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_PLAN_ENTRIES = 10_000
# What the host copies out of the plan directory: files listed per request, and bytes per read.
EXPORT_MAX_FILES = 1000
EXPORT_CHUNK_BYTES = 192 * 1024

READ_DEFAULT_LIMIT = 2000
READ_MAX_LINE_CHARS = 2000
# More than 4 bytes per allowed character: a probe that fills up is always an over-long line.
READ_LINE_PROBE_BYTES = 8192
READ_SKIP_CHUNK = 1 << 20
READ_COUNT_REST_MAX = 8 * 1024 * 1024
BINARY_PROBE_BYTES = 8192

GLOB_MAX_RESULTS = 100
LS_MAX_ENTRIES = 1000
LS_SKIPPED_NAMES = frozenset({"__pycache__"})
GLOB_MAGIC = frozenset("*?[{\\")

BASH_STREAM_LIMIT = 30000
GREP_STDOUT_LIMIT = 16 * 1024 * 1024
GREP_STDERR_LIMIT = 64 * 1024
READER_JOIN_SECONDS = 2.0
TOKEN_KILL_ROUNDS = 5
GREP_MODES = ("files_with_matches", "content", "count")
CONTEXT_FLAGS = (("-C", "--context"), ("-A", "--after-context"), ("-B", "--before-context"))

COMMAND_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ToolError(Exception):
    """A tool failure the model should see: becomes ok=false with a one-line message."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.timed_out = timed_out


class Outcome:
    """What an op produced; the dispatcher turns it into a response line."""

    __slots__ = ("exit_code", "meta", "output", "timed_out", "truncated")

    def __init__(
        self,
        output: str,
        *,
        truncated: bool = False,
        exit_code: int | None = None,
        timed_out: bool = False,
        meta: JsonDict | None = None,
    ) -> None:
        self.output = output
        self.truncated = truncated
        self.exit_code = exit_code
        self.timed_out = timed_out
        self.meta: JsonDict = meta if meta is not None else {}

    def response(self, request_id: object) -> JsonDict:
        return {
            "id": request_id,
            "ok": True,
            "output": self.output,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "truncated": self.truncated,
            "error": None,
            "meta": self.meta,
        }


def failure(request_id: object, message: str, *, timed_out: bool = False) -> JsonDict:
    """Build an ok=false response; the message is folded onto one line for the model."""
    return {
        "id": request_id,
        "ok": False,
        "output": "",
        "exit_code": None,
        "timed_out": timed_out,
        "truncated": False,
        "error": " ".join(message.split("\n")),
        "meta": {},
    }


# ---------------------------------------------------------------------------------------
# Small helpers: display of names, arguments, error messages, output caps


def printable(name: str) -> str:
    """Escape undecodable bytes (surrogateescape) and control characters for one-line display."""
    if name.isprintable():
        return name
    return "".join(char if char.isprintable() else _escape_char(char) for char in name)


def _escape_char(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return repr(char)[1:-1]


def str_arg(args: JsonDict, key: str, *, allow_empty: bool = False) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolError(f"Missing or invalid argument {key!r}: expected a string")
    if not value and not allow_empty:
        raise ToolError(f"Argument {key!r} must not be empty")
    return value


def opt_str_arg(args: JsonDict, key: str) -> str | None:
    value = args.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ToolError(f"Invalid argument {key!r}: expected a string")
    return value


def int_arg(args: JsonDict, key: str, default: int, *, minimum: int = 0) -> int:
    value = args.get(key)
    number: int | None = None
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float | str) and _looks_integral(value):
        number = int(value)
    if number is None or number < minimum:
        raise ToolError(f"Invalid argument {key!r}: expected an integer >= {minimum}")
    return number


def _looks_integral(value: float | str) -> bool:
    if isinstance(value, float):
        return value.is_integer()
    return value.strip().lstrip("-").isdigit()


def bool_arg(args: JsonDict, key: str, default: bool) -> bool:
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ToolError(f"Invalid argument {key!r}: expected true or false")


def clamp_timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return DEFAULT_TIMEOUT
    return min(max(float(value), MIN_TIMEOUT), MAX_TIMEOUT)


def describe_os_error(exc: OSError, path: str) -> str:
    """Turn an OSError into the one-line message a model can act on."""
    shown = printable(path)
    messages = {
        errno.ENOENT: "File does not exist",
        errno.EISDIR: "Path is a directory, not a file",
        errno.EACCES: "Permission denied",
        errno.EPERM: "Permission denied",
        errno.ELOOP: "Too many levels of symbolic links",
        errno.ENOTDIR: "Not a directory (a component of the path is a file)",
        errno.ENAMETOOLONG: "File name too long",
        errno.ENOSPC: "No space left on device",
        errno.EDQUOT: "Disk quota exceeded",
        errno.EROFS: "Read-only file system",
        errno.ENXIO: "Not a regular file",
    }
    prefix = messages.get(exc.errno or 0) or exc.strerror or type(exc).__name__
    return f"{prefix}: {shown}" if shown else prefix


def cap_output(text: str, *, extra_bytes: int = 0) -> tuple[str, bool]:
    """Cut TEXT at a line boundary within MAX_OUTPUT_BYTES and say how much was left out."""
    more = extra_bytes
    data = text.encode("utf-8", "replace")
    if len(data) > MAX_OUTPUT_BYTES:
        cut = data.rfind(b"\n", 0, MAX_OUTPUT_BYTES)
        cut = cut if cut > 0 else MAX_OUTPUT_BYTES
        more += len(data) - cut
        text = data[:cut].decode("utf-8", "ignore")
    if not more:
        return text, False
    return f"{text.rstrip()}\n... [output truncated: {more} more bytes]", True


def human_size(size: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return plural(size, "byte")


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def check_deadline(deadline: float, what: str, timeout: float) -> None:
    if time.monotonic() > deadline:
        raise ToolError(f"{what} timed out after {timeout:g} s", timed_out=True)


def file_type(mode: int) -> str:
    kinds = (
        (stat.S_ISREG, "file"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISLNK, "symlink"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "char_device"),
        (stat.S_ISBLK, "block_device"),
    )
    return next((name for test, name in kinds if test(mode)), "other")


# ---------------------------------------------------------------------------------------
# git: a repository is read, never obeyed


# Git settings for every command, in command-line scope (above the repository's own config).
# They reach every git process a command starts, submodules' included (git keeps the
# GIT_CONFIG_* variables for them): a repository owned by another uid is fine to read, but
# no program that any config names may run, even inside the sandbox.
GIT_SAFE_CONFIG = (
    ("safe.directory", "*"),
    # Tracked files can lay out a directory as a bare repository, with its own config.
    ("safe.bareRepository", "explicit"),
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.sshCommand", "false"),
    ("core.askPass", "false"),
    ("credential.helper", ""),  # the empty value empties the list of helpers
    ("protocol.allow", "never"),  # protocol.<name>.allow beats it: see GIT_ALLOW_PROTOCOL
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("log.showSignature", "false"),
    # `git log --help` would run the repository's man.<viewer>.cmd or browser.<name>.cmd.
    ("help.format", "info"),
    ("core.pager", "cat"),
    # Looking into a submodule's files means a git process there, under that repository's
    # config: by default, git compares submodules by their commit only. Options and
    # submodule.<name>.ignore can still ask for more, so the scan below covers every nested
    # repository; these settings only keep the default narrow.
    ("diff.ignoreSubmodules", "dirty"),
    ("diff.submodule", "short"),
    ("status.submoduleSummary", "false"),
    ("submodule.recurse", "false"),
)
# Stands in for an external diff the repository names. Git passes `path old-file old-hex
# old-mode new-file new-hex new-mode` and takes diff(1)'s status 1 for a crash; an empty
# value is no way out either: git then stops with "external diff died".
GIT_PLAIN_DIFF = (
    'f() { printf "diff --git a/%s b/%s\\n" "$1" "$1"; '
    'diff -u --label "a/$1" --label "b/$1" -- "$2" "$5"; :; }; f'
)
# Empty values switch a filter off (process wins over clean/smudge, and an empty one runs
# nothing); required=false keeps git from failing the file instead.
GIT_FILTER_OFF = (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))
# Files of a worktree that git opens by name, and settings that name a file git opens:
# a FIFO or a device there would block git or feed it without end.
GIT_WORKTREE_FILES = frozenset({".gitignore", ".gitattributes", ".gitmodules", ".mailmap"})
GIT_PATH_SETTINGS = frozenset(
    {
        (b"core", b"excludesfile"),
        (b"core", b"attributesfile"),
        (b"mailmap", b"file"),
        (b"diff", b"orderfile"),
        (b"blame", b"ignorerevsfile"),
    }
)
GIT_CONFIG_MAX_BYTES = 1 << 20
GIT_CONFIG_MAX_FILES = 1024
GIT_INCLUDE_MAX_DEPTH = 10  # git's own limit: deeper, it stops with an error
GIT_SCAN_MAX_ENTRIES = 200_000
GIT_SCAN_MAX_DEPTH = 256
GIT_MAX_REPOSITORIES = 256
GIT_MAX_OVERRIDES = 2048
GIT_MAX_OVERRIDE_BYTES = 256 * 1024
GIT_MAX_NAME_BYTES = 1024
COMMAND_HOME = "/tmp"

Stamp = tuple[int, int, int, int, int, int]


class GitRefusal(Exception):
    """Something git may read cannot be checked, so git must not run; says why."""


class GitGuard:
    """The git variables for commands' environment: GIT_SAFE_CONFIG, plus entries that
    switch off every filter, diff and merge driver that any repository in the workspace
    defines, at any depth.

    ROOTS are read-only mounts: the workspace, which is walked, then the extra directories.
    The result is kept until a directory or file the scan looked at changes.
    """

    def __init__(self, roots: list[str]) -> None:
        self.roots = roots
        self._lock = threading.Lock()
        self._stamps: dict[str, Stamp | None] = {}
        self._env: dict[str, str] | None = None

    def env(self) -> dict[str, str]:
        with self._lock:
            if self._env is None or any(
                stamp_of(path) != stamp for path, stamp in self._stamps.items()
            ):
                self._env = self._scan()
            return self._env

    def _scan(self) -> dict[str, str]:
        scan = GitConfigScan(self.roots)
        try:
            env = git_config_env([*GIT_SAFE_CONFIG, *scan.run()])
        except (GitRefusal, OSError, ValueError, RecursionError) as refusal:
            # A guard that fails says so and keeps git off; it never lets git run unguarded.
            reason = refusal if isinstance(refusal, GitRefusal) else f"the scan failed: {refusal!r}"
            message = f"planrun: git is disabled in this sandbox: {reason}"
            # The invalid key stops every git command with the message; the GIT_DIR that
            # does not exist stops it before it opens the repository's files (a FIFO there
            # would block it) and says the same.
            env = git_config_env([*GIT_SAFE_CONFIG, (message, "")])
            env["GIT_DIR"] = "/" + message
        self._stamps = scan.stamps
        return env


def stamp_of(path: str) -> Stamp | None:
    try:
        return stamp_from(os.stat(path))
    except (OSError, ValueError):
        return None


def stamp_from(info: os.stat_result) -> Stamp:
    return (
        info.st_dev,
        info.st_ino,
        info.st_mode,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
    )


def blocking_kind(path: str, info: os.stat_result) -> str | None:
    """What a file is if opening or reading it could block or never end (a FIFO, a device
    other than /dev/null); None for anything git reads at once or does not read."""
    mode = info.st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISBLK(mode):
        return file_type(mode).replace("_", " ")
    if stat.S_ISCHR(mode) and os.path.realpath(path) != os.devnull:
        return "char device"
    return None


class GitConfigScan:
    """One look at everything git may read in the workspace: it walks the whole tree for
    repositories (nested, submodules or not, or reached by a link), and each repository's
    git directory for its config files (its own, its worktrees', its submodules'), what
    they include, the common directory and alternates they name, and files that block."""

    def __init__(self, roots: list[str]) -> None:
        self.roots = [os.path.realpath(root) for root in roots]
        self.stamps: dict[str, Stamp | None] = {}
        self.variables: dict[tuple[bytes, bytes | None, bytes], None] = {}
        self.submodules: dict[bytes, None] = {}
        self._paths: dict[bytes, None] = {}  # the values of GIT_PATH_SETTINGS
        self._worktrees: dict[str, None] = {}  # where git may run: bases of those values
        self._core_worktrees: dict[str, None] = {}  # what core.worktree settings name
        self._trees: list[str] = []  # the tops of the worktrees walked
        self._depths: dict[str, int] = {}  # the smallest include depth each file was read at
        self._walked: set[str] = set()
        self._repositories = 0
        self._files = 0
        self._entries = 0

    def run(self) -> list[tuple[str, str]]:
        self.tree(self.roots[0])
        self.check_core_worktrees()
        self.check_path_settings()
        return driver_overrides(self.variables, self.submodules)

    def tree(self, top: str) -> None:
        """Walk a worktree without following links, for every repository in it and for
        git's own files (.gitignore, ...) that could block. Git never takes a directory
        laid out as a bare repository for one (safe.bareRepository=explicit)."""
        self._worktrees[top] = None
        self._trees.append(os.path.realpath(top))
        pending = [(top, 0)]
        while pending:
            directory, depth = pending.pop()
            for entry in self.listing(directory, depth):
                if entry.name == ".git":
                    self.dot_git(entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, depth + 1))
                elif entry.is_symlink():
                    self.link_in_tree(entry.path, entry.name)
                elif entry.name in GIT_WORKTREE_FILES:
                    self.worktree_file(entry.path, entry.name)

    def worktree_file(self, path: str, name: str) -> None:
        info = self.stat(path)
        if info is not None:
            self.require_unblocking(path, info)
            if name == ".gitmodules" and stat.S_ISREG(info.st_mode):
                for variable, _ in git_config_variables(self.read(path) or b""):
                    section, subsection, _ = split_variable(variable)
                    if section == b"submodule" and subsection is not None:
                        self.submodules[subsection] = None

    def link_in_tree(self, path: str, name: str) -> None:
        """A symbolic link in a worktree: git enters the directory it leads to when the
        index holds a submodule at its path, so a repository there is scanned like one
        in the tree."""
        info = self.stat(path)
        if (info is None or stat.S_ISDIR(info.st_mode)) and leads_through_proc(path):
            # /proc/self/cwd and the like lead each process somewhere else.
            raise GitRefusal(f"{printable(path)} is a link through /proc")
        if info is None:
            return
        if name in GIT_WORKTREE_FILES:
            self.require_unblocking(path, info)
        real = os.path.realpath(path)
        if not stat.S_ISDIR(info.st_mode) or is_within(real, self.roots[0]):
            return  # the walk reads that directory where it is
        if os.path.lexists(os.path.join(real, ".git")) and real not in self._walked:
            self.require_stable(real)
            self._walked.add(real)
            self.tree(real)

    def dot_git(self, dotgit: str) -> None:
        """A `.git` entry: a git directory, or a file naming one (`gitdir: PATH`)."""
        self.require_stable(dotgit)
        self._worktrees[os.path.dirname(dotgit)] = None
        info = self.stat(dotgit)
        if info is None:
            return
        if stat.S_ISDIR(info.st_mode):
            self.git_dir(dotgit)
            return
        self.require_unblocking(dotgit, info)
        data = self.read(dotgit)
        if data is not None and data.startswith(b"gitdir: "):
            target = os.fsdecode(data[8:].rstrip(b"\r\n"))
            self.git_dir(os.path.join(os.path.dirname(dotgit), target))

    def git_dir(self, gitdir: str) -> None:
        """Every file of a git directory, including links it holds to directories: config
        files where a repository is (a HEAD), and no file that could block."""
        real = os.path.realpath(gitdir)
        if real in self._walked:
            return
        self._walked.add(real)
        self._repositories += 1
        if self._repositories > GIT_MAX_REPOSITORIES:
            raise GitRefusal(f"over {GIT_MAX_REPOSITORIES} repositories to check")
        self.require_stable(gitdir)
        pending = [(gitdir, 0)]
        while pending:
            directory, depth = pending.pop()
            entries = self.listing(directory, depth)
            names = {entry.name for entry in entries}
            if directory == gitdir or "HEAD" in names:
                self.repository(directory, names)
            for entry in entries:
                if entry.name == ".git":
                    self.dot_git(entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    pending.append((entry.path, depth + 1))
                elif entry.name == "alternates" and os.path.basename(directory) == "info":
                    self.alternates(entry.path)
                elif not entry.is_file(follow_symlinks=False):
                    self.git_file(entry, depth, pending)

    def repository(self, gitdir: str, names: set[str]) -> None:
        """The config files of the repository (or linked worktree) whose git directory
        this is, and its common directory."""
        for name in ("config", "config.worktree"):
            if name in names:
                self.config_file(os.path.join(gitdir, name), 0, gitdir)
        if "commondir" in names:
            common = self.read(os.path.join(gitdir, "commondir"))
            if common:
                self.git_dir(os.path.join(gitdir, os.fsdecode(common.rstrip(b"\r\n"))))

    def git_file(self, entry: os.DirEntry[str], depth: int, pending: list[tuple[str, int]]) -> None:
        """An entry of a git directory that is neither a directory nor a regular file."""
        info = self.stat(entry.path) if entry.is_symlink() else entry.stat(follow_symlinks=False)
        if info is None:
            return
        self.require_unblocking(entry.path, info)
        real = os.path.realpath(entry.path)
        if stat.S_ISDIR(info.st_mode) and real not in self._walked:
            # A link to a directory (git-new-workdir links objects, refs, ...): walked too.
            self.require_stable(real)
            self._walked.add(real)
            pending.append((entry.path, depth + 1))

    def alternates(self, path: str) -> None:
        """Object directories that objects/info/alternates names: git reads objects there."""
        objects = os.path.dirname(os.path.dirname(path))
        for line in (self.read(path) or b"").split(b"\n"):  # as git reads it: no stripping
            if line.startswith(b'"'):
                raise GitRefusal(f"{printable(path)} names a directory in C quotes")
            if line and not line.startswith(b"#"):
                self.git_dir(os.path.join(objects, os.fsdecode(line)))

    def listing(self, directory: str, depth: int) -> list[os.DirEntry[str]]:
        if depth > GIT_SCAN_MAX_DEPTH:
            raise GitRefusal(f"{printable(directory)} is over {GIT_SCAN_MAX_DEPTH} deep")
        if self.stat(directory) is None:
            return []
        try:
            with os.scandir(directory) as scan:
                entries = list(scan)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            if isinstance(exc, PermissionError) and not os.access(directory, os.X_OK):
                return []  # git cannot look inside either
            message = describe_os_error(exc, directory)
            raise GitRefusal(f"{message}, and git could look inside") from None
        self._entries += len(entries)
        if self._entries > GIT_SCAN_MAX_ENTRIES:
            raise GitRefusal(f"the repository has over {GIT_SCAN_MAX_ENTRIES} entries to check")
        return entries

    def config_file(self, path: str, depth: int, gitdir: str) -> None:
        """Note the variables of one config file and, recursively, the files it includes.
        GITDIR is the repository's git directory, which relative settings start from."""
        real = os.path.realpath(path)
        if self._depths.get(real, GIT_INCLUDE_MAX_DEPTH + 1) <= depth:
            return
        self._depths[real] = depth
        self.require_stable(path)
        data = self.read(path)
        if data is None:
            return
        for name, value in git_config_variables(data):
            section, subsection, key = split_variable(name)
            if key == b"path" and (section, subsection is None) in INCLUDE_SECTIONS:
                target = include_target(value, path)
                if target is not None and depth < GIT_INCLUDE_MAX_DEPTH:
                    self.config_file(target, depth + 1, gitdir)
                continue
            self.variables[(section, subsection, key)] = None
            if section == b"submodule" and subsection is not None:
                self.submodules[subsection] = None
            elif (section, key) in GIT_PATH_SETTINGS and subsection is None and value:
                self._paths[value] = None
            elif (section, subsection, key) == (b"core", None, b"worktree") and value:
                self._core_worktrees[os.path.join(gitdir, os.fsdecode(value))] = None

    def check_core_worktrees(self) -> None:
        """A worktree elsewhere holds repositories of its own: it must be one walked."""
        for worktree in self._core_worktrees:
            self.require_stable(worktree)
            real = os.path.realpath(worktree)
            if not any(is_within(real, top) for top in self._trees):
                raise GitRefusal(f"core.worktree {printable(worktree)} is outside the workspace")
            self._worktrees[real] = None

    def check_path_settings(self) -> None:
        """The files that path settings name, from wherever git may run."""
        for value in self._paths:
            for base in self._worktrees:
                path = expand_git_path(value, base)
                self.require_stable(path)
                info = self.stat(path)
                if info is not None:
                    self.require_unblocking(path, info)

    def require_unblocking(self, path: str, info: os.stat_result) -> None:
        kind = blocking_kind(path, info)
        if kind is not None:
            raise GitRefusal(f"{printable(path)}, which git could open, is a {kind}")

    def require_stable(self, path: str) -> None:
        """Refuse a file that could change between this look and git's own read of it, or
        that git could see as another file."""
        if leads_through_proc(path):
            raise GitRefusal(f"{printable(path)}, which git would read, leads through /proc")
        real = os.path.realpath(path)
        if any(is_within(real, root) for root in self.roots):
            return
        probe = real
        while True:
            if os.path.lexists(probe) and os.access(probe, os.W_OK):
                raise GitRefusal(f"{printable(path)}, which git would read, is in a writable place")
            parent = os.path.dirname(probe)
            if parent == probe:
                return
            probe = parent

    def stat(self, path: str) -> os.stat_result | None:
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            self.stamps[path] = None
            return None
        self.stamps[path] = stamp_from(info)
        return info

    def read(self, path: str) -> bytes | None:
        """A regular file's bytes; None if it is missing, unreadable or a directory, as git
        then reads nothing there either (or stops)."""
        try:
            # O_NONBLOCK: a FIFO must not hang the server; it is refused below.
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        except (OSError, ValueError):
            self.stat(path)
            return None
        try:
            info = os.fstat(fd)
            self.stamps[path] = stamp_from(info)
            if stat.S_ISDIR(info.st_mode):
                return None
            if not stat.S_ISREG(info.st_mode):
                kind = file_type(info.st_mode).replace("_", " ")
                raise GitRefusal(f"{printable(path)}, which git would read, is a {kind}")
            self._files += 1
            if self._files > GIT_CONFIG_MAX_FILES:
                raise GitRefusal(f"more than {GIT_CONFIG_MAX_FILES} config files to check")
            chunks, size = [], 0
            while size <= GIT_CONFIG_MAX_BYTES and (chunk := os.read(fd, 1 << 16)):
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
        if size > GIT_CONFIG_MAX_BYTES:
            raise GitRefusal(f"{printable(path)} is over {GIT_CONFIG_MAX_BYTES} bytes")
        return b"".join(chunks)


def leads_through_proc(path: str) -> bool:
    """Whether PATH, resolved link by link as the kernel does, passes through /proc, where
    links such as /proc/self/cwd lead each process to a different place."""
    pending = [part for part in reversed(path.split("/")) if part]
    current, links = "/", 0
    while pending:
        part = pending.pop()
        if part == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part) if part != "." else current
        if candidate == "/proc" or candidate.startswith("/proc/"):
            return True
        try:
            target = os.readlink(candidate)
        except (OSError, ValueError):
            current = candidate
            continue
        links += 1
        if links > 40:  # the kernel's limit: git cannot follow it either
            return False
        current = "/" if target.startswith("/") else current
        pending += [part for part in reversed(target.split("/")) if part]
    return False


# (section, has no subsection) of the variables whose `path` git includes: include.path and
# includeIf.<condition>.path (whatever the condition: reading too much is harmless).
INCLUDE_SECTIONS = frozenset({(b"include", True), (b"includeif", False)})


def include_target(value: bytes | None, including: str) -> str | None:
    """The file an include names: relative to the including file's directory."""
    if not value:
        return None
    return expand_git_path(value, os.path.dirname(including))


def expand_git_path(value: bytes, base: str) -> str:
    """A path from a config value, expanded as git does (HOME is the commands' HOME)."""
    path = os.fsdecode(value)
    if path == "~" or path.startswith("~/"):
        path = COMMAND_HOME + path[1:]
    elif path.startswith("~"):
        path = os.path.expanduser(path)
    elif path.startswith("%(prefix)/"):
        path = "/usr/" + path[len("%(prefix)/") :]
    # Without normalising: `..` after a symlink must go where the kernel (and git) goes.
    return os.path.join(base, path)


def split_variable(name: bytes) -> tuple[bytes, bytes | None, bytes]:
    """section, subsection (None if there is none) and key, split as git does."""
    section, _, rest = name.partition(b".")
    subsection, dot, key = rest.rpartition(b".")
    return section, (subsection if dot else None), key


DRIVER_SECTIONS = frozenset({b"filter", b"diff", b"merge"})


def driver_overrides(
    variables: dict[tuple[bytes, bytes | None, bytes], None], submodules: dict[bytes, None]
) -> list[tuple[str, str]]:
    """Entries that switch off what the config defines that runs a program, and keep each
    submodule named anywhere compared by its commit only."""
    entries: dict[str, str] = {}
    for section, name, key in variables:
        if (section, name, key) == (b"diff", None, b"external"):
            entries["diff.external"] = GIT_PLAIN_DIFF
        if section not in DRIVER_SECTIONS or not usable_name(name):
            continue
        prefix = f"{section.decode()}.{os.fsdecode(name or b'')}."
        if section == b"filter":
            entries.update((prefix + setting, value) for setting, value in GIT_FILTER_OFF)
        elif section == b"merge":
            entries[prefix + "driver"] = "true"
        elif key == b"textconv":
            entries.update({prefix + "textconv": "cat", prefix + "cachetextconv": "false"})
        elif key == b"command":
            entries[prefix + "command"] = GIT_PLAIN_DIFF
        if len(entries) > GIT_MAX_OVERRIDES:
            raise GitRefusal(f"it defines over {GIT_MAX_OVERRIDES // 4} drivers")
    for name in submodules:
        if usable_name(name):
            entries[f"submodule.{os.fsdecode(name)}.ignore"] = "dirty"
    size = sum(len(key) + len(value) for key, value in entries.items())
    if len(entries) > GIT_MAX_OVERRIDES or size > GIT_MAX_OVERRIDE_BYTES:
        # Past that, the environment would leave too little room for commands' arguments.
        raise GitRefusal("it names too many drivers and submodules to switch off")
    return list(entries.items())


def usable_name(name: bytes | None) -> bool:
    """Whether git can read a subsection name back (it reads one holding a NUL only up to
    the NUL, so no driver has such a name); one too long to check refuses git."""
    if name is None or b"\0" in name:
        return False
    if len(name) > GIT_MAX_NAME_BYTES:
        raise GitRefusal(f"it names a driver or submodule with over {GIT_MAX_NAME_BYTES} bytes")
    return True


# A port of git's config file parser (config.c, git 2.39): git_parse_source, get_base_var,
# get_extended_base_var, get_value and parse_value, over bytes.
CONFIG_SPACE = frozenset(b" \t\n\r")  # git's isspace
NEWLINE = ord("\n")


class BadConfigLine(Exception):
    """Where git would stop reading a config file with "bad config line"."""


class ConfigSource:
    """git's get_next_char: CR LF reads as LF, and the end of the data as a final LF."""

    __slots__ = ("data", "eof", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.eof = False

    def next(self) -> int:
        if self.pos >= len(self.data):
            self.eof = True
            return NEWLINE
        char = self.data[self.pos]
        self.pos += 1
        if char == 13 and self.data[self.pos : self.pos + 1] == b"\n":
            self.pos += 1
            return NEWLINE
        return char

    def skip_line(self) -> None:
        """Go on after the line holding the last character read."""
        end = self.data.find(b"\n", max(self.pos - 1, 0))
        self.pos = len(self.data) if end < 0 else end + 1


def git_config_variables(data: bytes) -> Iterator[tuple[bytes, bytes | None]]:
    """(name, value) of each variable in a config file, named as git names them.

    Where git would stop with "bad config line" (and refuse to run), this goes on at the
    next line instead, so it finds at least every variable git sees.
    """
    source = ConfigSource(data[3:] if data.startswith(b"\xef\xbb\xbf") else data)
    section, comment = b"", False
    while True:
        char = source.next()
        try:
            if char == NEWLINE:
                if source.eof:
                    return
                comment = False
            elif comment or char in CONFIG_SPACE:
                continue
            elif char in b"#;":
                comment = True
            elif char == ord("["):
                section = config_section(source) + b"."
            elif char < 128 and chr(char).isalpha():
                yield config_entry(source, section + bytes([char]).lower())
            else:
                raise BadConfigLine
        except BadConfigLine:
            source.skip_line()
            comment = False


def is_keychar(char: int) -> bool:
    return char < 128 and (chr(char).isalnum() or char == ord("-"))


def config_section(source: ConfigSource) -> bytes:
    """A section header after its `[`: `[name]`, `[name.sub]` or `[name "sub"]`."""
    name = bytearray()
    while True:
        char = source.next()
        if source.eof:
            raise BadConfigLine
        if char == ord("]"):
            break
        if char in CONFIG_SPACE:
            config_subsection(source, name, char)
            break
        if not (is_keychar(char) or char == ord(".")):
            raise BadConfigLine
        name += bytes([char]).lower()
    if not name:
        raise BadConfigLine
    return bytes(name)


def config_subsection(source: ConfigSource, name: bytearray, char: int) -> None:
    while char in CONFIG_SPACE:
        if char == NEWLINE:
            raise BadConfigLine
        char = source.next()
    if char != ord('"'):
        raise BadConfigLine
    name += b"."
    while (char := source.next()) != ord('"'):
        if char == ord("\\"):
            char = source.next()
        if char == NEWLINE:
            raise BadConfigLine
        name.append(char)
    if source.next() != ord("]"):
        raise BadConfigLine


def config_entry(source: ConfigSource, name: bytes) -> tuple[bytes, bytes | None]:
    key = bytearray(name)
    while True:
        char = source.next()
        if source.eof or not is_keychar(char):
            break
        key += bytes([char]).lower()
    while char in b" \t":
        char = source.next()
    if char == NEWLINE:
        return bytes(key), None
    if char != ord("="):
        raise BadConfigLine
    return bytes(key), config_value(source)


# What each escape in a value stands for; a backslash before a newline joins the lines.
CONFIG_ESCAPES = {
    ord(escape): meaning
    for escape, meaning in (
        ("\n", b""),
        ("t", b"\t"),
        ("b", b"\b"),
        ("n", b"\n"),
        ("\\", b"\\"),
        ('"', b'"'),
    )
}


def config_value(source: ConfigSource) -> bytes:
    value = bytearray()
    quoted, comment, spaces = False, False, 0
    while True:
        char = source.next()
        if char == NEWLINE:
            if quoted:
                raise BadConfigLine
            return bytes(value)
        if comment:
            continue
        if char in CONFIG_SPACE and not quoted:
            spaces += 1 if value else 0
            continue
        if not quoted and char in b";#":
            comment = True
            continue
        value += b" " * spaces
        spaces = 0
        if char == ord("\\"):
            escaped = source.next()
            if escaped not in CONFIG_ESCAPES:
                raise BadConfigLine
            value += CONFIG_ESCAPES[escaped]
        elif char == ord('"'):
            quoted = not quoted
        else:
            value.append(char)


# ---------------------------------------------------------------------------------------
# Subprocesses: bounded capture, process-group and token based cleanup


class BoundedCapture:
    """Drain one pipe in a thread, keeping the first LIMIT bytes and counting the rest."""

    def __init__(self, pipe: IO[bytes], limit: int) -> None:
        self._pipe = pipe
        self._limit = limit
        self._chunks: list[bytes] = []
        self._lock = threading.Lock()
        self.kept = 0
        self.dropped = 0
        self.dropped_lines = 0
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
            with self._lock:
                room = max(0, self._limit - self.kept)
                if room:
                    self._chunks.append(chunk[:room])
                    self.kept += min(room, len(chunk))
                rest = chunk[room:]
                self.dropped += len(rest)
                self.dropped_lines += rest.count(b"\n")

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


def git_config_env(entries: list[tuple[str, str]]) -> dict[str, str]:
    """GIT_CONFIG_* variables carrying ENTRIES (command-line scope, the highest)."""
    env = {"GIT_CONFIG_COUNT": str(len(entries))}
    for index, (key, value) in enumerate(entries):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def command_env(token: str, git_env: dict[str, str]) -> dict[str, str]:
    """A fresh environment: nothing of the server's own environment leaks into commands."""
    return {
        "PATH": COMMAND_PATH,
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
    git_env: dict[str, str] | None = None,
) -> ProcessResult:
    """Run ARGV in its own session with bounded capture; kill everything it left behind.

    GIT_ENV holds the git variables (by default GIT_SAFE_CONFIG's).
    """
    server.warmed_up.wait()  # no command may start before the server is undumpable
    import subprocess  # deferred: see ToolServer.warm_up

    with server.spawn_lock:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=command_env(token or new_token(), git_env or git_config_env(list(GIT_SAFE_CONFIG))),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        server.register(proc, token)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        stdout = BoundedCapture(proc.stdout, limits[0])
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


# ---------------------------------------------------------------------------------------
# read


def op_ping(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    meta: JsonDict = {"workspace": server.workspace, "plan_dir": server.plan_dir}
    if server.warmed_up.is_set():
        meta["dumpable"] = server.dumpable
    return Outcome("pong", meta=meta)


def open_regular_file(path: str) -> BinaryIO:
    """Open PATH for reading, refusing directories, FIFOs and devices before they can block."""
    shown = printable(path)
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise ToolError(f"Path is a directory, not a file: {shown} (use ls to list it)")
    if not stat.S_ISREG(mode):
        raise ToolError(f"Not a regular file ({file_type(mode)}): {shown}")
    # O_NONBLOCK: if the path was swapped for a FIFO since the stat, open must not hang.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolError(f"Not a regular file: {shown}")
    return os.fdopen(fd, "rb", buffering=65536)


def op_read(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    path = server.resolve(str_arg(args, "file_path"))
    offset = max(1, int_arg(args, "offset", 1, minimum=-(2**62)))
    limit = int_arg(args, "limit", READ_DEFAULT_LIMIT, minimum=1)
    deadline = time.monotonic() + timeout
    with open_regular_file(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        head = handle.read(BINARY_PROBE_BYTES)
        if b"\0" in head:
            raise ToolError(f"Cannot read binary file: {printable(path)} ({size} bytes)")
        meta: JsonDict = {"path": path, "size": size, "start_line": offset}
        if not head:
            return Outcome(f"The file exists but is empty: {printable(path)}", meta=meta)
        handle.seek(0)
        lines, next_line, budget_hit = read_numbered_lines(handle, offset, limit, deadline)
        meta["lines"] = len(lines)
        if not lines:
            message = f"The file has only {next_line - 1} lines; offset {offset} is past the end."
            return Outcome(message, meta=meta)
        note = read_tail_note(handle, size, next_line, budget_hit, len(lines) == limit)
        if note:
            lines.append(note)
        return Outcome("\n".join(lines), truncated=bool(note), meta=meta)


def read_numbered_lines(
    handle: BinaryIO, offset: int, limit: int, deadline: float
) -> tuple[list[str], int, bool]:
    """Stream lines in `cat -n` style; return them, the next line number, and whether the
    output budget stopped us. Over-long lines are skipped, never held in memory."""
    lines: list[str] = []
    budget = MAX_OUTPUT_BYTES
    line_no = 0
    while len(lines) < limit:
        raw = handle.readline(READ_LINE_PROBE_BYTES)
        if not raw:
            break
        line_no += 1
        overflow = 0
        if len(raw) == READ_LINE_PROBE_BYTES and not raw.endswith(b"\n"):
            overflow = skip_rest_of_line(handle, deadline)
        if (line_no & 0xFFF == 0 or overflow) and time.monotonic() > deadline:
            raise ToolError("read timed out", timed_out=True)
        if line_no < offset:
            continue
        text = format_line(line_no, raw, overflow)
        budget -= (len(text) if text.isascii() else len(text.encode("utf-8"))) + 1
        if budget < 0:
            return lines, line_no, True
        lines.append(text)
    return lines, line_no + 1, False


def skip_rest_of_line(handle: BinaryIO, deadline: float) -> int:
    """Consume the rest of an over-long line; return how many bytes it still had."""
    skipped = 0
    while True:
        chunk = handle.readline(READ_SKIP_CHUNK)
        if not chunk:
            return skipped
        if chunk.endswith(b"\n"):
            return skipped + len(chunk) - 1
        skipped += len(chunk)
        if time.monotonic() > deadline:
            raise ToolError("read timed out while skipping an over-long line", timed_out=True)


def format_line(number: int, raw: bytes, overflow: int) -> str:
    text = raw.decode("utf-8", "replace")
    if text.endswith("\n"):
        text = text[:-2] if text.endswith("\r\n") else text[:-1]
    if overflow or len(text) > READ_MAX_LINE_CHARS:
        shown = text[:READ_MAX_LINE_CHARS]
        hidden = len(text.encode("utf-8", "replace")) + overflow - len(shown.encode("utf-8"))
        text = f"{shown}... [line truncated: {hidden} more bytes]"
    return f"{number:>6}\t{text}"


def read_tail_note(
    handle: BinaryIO, size: int, next_line: int, budget_hit: bool, limit_hit: bool
) -> str:
    """Say what was not shown: the rest after the output budget or after `limit` lines."""
    if budget_hit:
        return (
            f"... [output truncated at {MAX_OUTPUT_BYTES} bytes; "
            f"use offset={next_line} to continue]"
        )
    first = handle.read(1) if limit_hit else b""
    if not first:
        return ""
    if size - handle.tell() > READ_COUNT_REST_MAX:
        return f"... [more lines follow; use offset={next_line} to continue]"
    rest = first + handle.read()
    count = rest.count(b"\n") + (0 if rest.endswith(b"\n") else 1)
    return f"... [{count} more lines not shown; use offset={next_line}/limit to read them]"


# ---------------------------------------------------------------------------------------
# glob


def glob_to_regex(pattern: str) -> str:
    """Translate a glob with `**`, `*`, `?`, `[...]` and `{a,b}` into a regular expression."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        index += 1
        if char == "*" and pattern.startswith("*", index):
            index += 1
            # `**/` may match no directory at all, so `**/x` also finds a top-level x.
            if pattern.startswith("/", index):
                index += 1
                out.append("(?:.*/)?")
            else:
                out.append(".*")
        elif char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "\\" and index < len(pattern):
            out.append(re.escape(pattern[index]))
            index += 1
        elif char == "[":
            translated, index = _translate_class(pattern, index)
            out.append(translated)
        elif char == "{":
            translated, index = _translate_braces(pattern, index)
            out.append(translated)
        else:
            out.append(re.escape(char))
    return "".join(out)


def _translate_class(pattern: str, start: int) -> tuple[str, int]:
    end = start
    if end < len(pattern) and pattern[end] in "!^":
        end += 1
    if end < len(pattern) and pattern[end] == "]":
        end += 1
    end = pattern.find("]", end)
    if end < 0:
        return re.escape("["), start
    body = pattern[start:end]
    negate = body[:1] in ("!", "^")
    body = body[1:] if negate else body
    escaped = "".join("\\" + char if char in "\\[]^&~|" else char for char in body)
    return ("[^/" + escaped + "]" if negate else "[" + escaped + "]"), end + 1


def _translate_braces(pattern: str, start: int) -> tuple[str, int]:
    depth = 1
    alternatives: list[str] = []
    piece_start = start
    index = start
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                alternatives.append(pattern[piece_start:index])
                translated = "|".join(glob_to_regex(alt) for alt in alternatives)
                return f"(?:{translated})", index + 1
        elif char == "," and depth == 1:
            alternatives.append(pattern[piece_start:index])
            piece_start = index + 1
        index += 1
    return re.escape("{"), start


def split_glob(root: str, pattern: str) -> tuple[str, str]:
    """Move the pattern's leading literal directories into the base directory of the walk."""
    parts = pattern.split("/")
    literal = 0
    while literal < len(parts) and not GLOB_MAGIC.intersection(parts[literal]):
        literal += 1
    if literal == len(parts):
        return os.path.normpath(os.path.join(root, pattern)), ""
    if literal == 0:
        return root, pattern
    prefix = "/".join(parts[:literal]) or "/"
    return os.path.normpath(os.path.join(root, prefix)), "/".join(parts[literal:])


GLOB_MAX_ALTERNATIVES = 256
# Up to this many unbounded wildcards a compiled regular expression is safe (its
# backtracking is at most quadratic in a path); beyond, the linear matcher below is used.
GLOB_REGEX_MAX_STARS = 2
# Glob tokens of the linear matcher.
LITERAL, ANY_CHAR, CHAR_CLASS, STAR, GLOBSTAR, GLOBSTAR_DIRS = range(6)
GlobToken = tuple[int, object]


def expand_braces(pattern: str, limit: int = GLOB_MAX_ALTERNATIVES) -> list[str]:
    """`a{b,c}d` -> [abd, acd], nested too; at most LIMIT patterns."""
    start = _brace_start(pattern)
    if start < 0:
        return [pattern]
    depth, index, pieces, piece_start = 0, start, [], start + 1
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                pieces.append(pattern[piece_start:index])
                break
        elif char == "," and depth == 1:
            pieces.append(pattern[piece_start:index])
            piece_start = index + 1
        index += 1
    else:
        return [pattern]  # unbalanced: the brace is a literal character
    head, tail = pattern[:start], pattern[index + 1 :]
    expanded: list[str] = []
    for piece in pieces:
        for rest in expand_braces(head + piece + tail, limit):
            expanded.append(rest)
            if len(expanded) > limit:
                raise ToolError(f"Glob pattern has more than {limit} brace alternatives")
    return expanded


def _brace_start(pattern: str) -> int:
    index = 0
    while index < len(pattern):
        if pattern[index] == "\\":
            index += 2
            continue
        if pattern[index] == "{":
            return index
        index += 1
    return -1


def glob_tokens(pattern: str) -> list[GlobToken]:
    """A brace-free glob as tokens for the linear matcher; runs of stars collapse."""
    tokens: list[GlobToken] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        index += 1
        if char == "*":
            double = pattern.startswith("*", index)
            while pattern.startswith("*", index):
                index += 1
            if double and pattern.startswith("/", index):
                index += 1
                kind = GLOBSTAR_DIRS
            else:
                kind = GLOBSTAR if double else STAR
            if tokens and tokens[-1][0] in (STAR, GLOBSTAR) and kind != GLOBSTAR_DIRS:
                tokens[-1] = (max(kind, tokens[-1][0]), None)
                continue
            tokens.append((kind, None))
        elif char == "?":
            tokens.append((ANY_CHAR, None))
        elif char == "\\" and index < len(pattern):
            tokens.append((LITERAL, pattern[index]))
            index += 1
        elif char == "[":
            translated, end = _translate_class(pattern, index)
            if end == index:
                tokens.append((LITERAL, "["))
            else:
                tokens.append((CHAR_CLASS, re.compile(translated, re.DOTALL)))
                index = end
        else:
            tokens.append((LITERAL, char))
    return tokens


def tokens_to_regex(tokens: list[GlobToken]) -> str:
    """The regular expression of a token list (at most GLOB_REGEX_MAX_STARS stars)."""
    parts = []
    for kind, value in tokens:
        if kind == LITERAL:
            parts.append(re.escape(str(value)))
        elif kind == ANY_CHAR:
            parts.append("[^/]")
        elif kind == CHAR_CLASS:
            assert isinstance(value, re.Pattern)
            parts.append(f"(?!/){value.pattern}")
        else:
            parts.append({STAR: "[^/]*", GLOBSTAR: ".*", GLOBSTAR_DIRS: "(?:.*/)?"}[kind])
    return "".join(parts)


def _token_step(token: GlobToken, char: str) -> bool:
    kind, value = token
    if kind == LITERAL:
        return char == value
    if kind == ANY_CHAR:
        return char != "/"
    assert isinstance(value, re.Pattern)
    return char != "/" and value.fullmatch(char) is not None


def _closure(states: set[int], tokens: list[GlobToken]) -> set[int]:
    """Add the states reachable without reading a character (a star matching nothing)."""
    stack = list(states)
    while stack:
        state = stack.pop()
        skippable = state < len(tokens) and tokens[state][0] in (STAR, GLOBSTAR, GLOBSTAR_DIRS)
        if skippable and state + 1 not in states:
            states.add(state + 1)
            stack.append(state + 1)
    return states


def linear_match(tokens: list[GlobToken], text: str) -> bool:
    """Whether TEXT matches: a set-of-states simulation, O(len(text) * len(tokens))."""
    states = _closure({0}, tokens)
    for char in text:
        following: set[int] = set()
        for state in states:
            if state == len(tokens):
                continue
            kind = tokens[state][0]
            if kind == STAR:
                if char != "/":
                    following.add(state)
            elif kind == GLOBSTAR:
                following.add(state)
            elif kind == GLOBSTAR_DIRS:
                following.add(state)
                if char == "/":
                    following.add(state + 1)
            elif _token_step(tokens[state], char):
                following.add(state + 1)
        if not following:
            return False
        states = _closure(following, tokens)
    return len(tokens) in states


class GlobMatcher:
    """Matches relative paths against a glob in bounded time, whatever the pattern."""

    def __init__(self, pattern: str) -> None:
        self.regexes: list[re.Pattern[str]] = []
        self.token_lists: list[list[GlobToken]] = []
        for alternative in expand_braces(pattern):
            tokens = glob_tokens(alternative)
            stars = sum(1 for kind, _ in tokens if kind in (STAR, GLOBSTAR, GLOBSTAR_DIRS))
            if stars <= GLOB_REGEX_MAX_STARS:
                # Built from the tokens, where runs of stars are already one: `****x`
                # must not become `.*.*x`, which backtracks without end.
                self.regexes.append(re.compile(tokens_to_regex(tokens), re.DOTALL))
            else:
                self.token_lists.append(tokens)

    def matches(self, path: str) -> bool:
        if any(regex.fullmatch(path) for regex in self.regexes):
            return True
        return any(linear_match(tokens, path) for tokens in self.token_lists)


def op_glob(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    pattern = str_arg(args, "pattern")
    root = server.resolve(opt_str_arg(args, "path") or server.workspace)
    server.require_directory(root)
    base, rest = split_glob(root, pattern)
    if not rest:
        if os.path.lexists(base) and not os.path.isdir(base):
            return Outcome(printable(base), meta={"matches": 1})
        return Outcome("No files found", meta={"matches": 0})
    if not os.path.isdir(base):
        return Outcome("No files found", meta={"matches": 0})
    try:
        matcher = GlobMatcher(rest)
    except re.error as exc:
        raise ToolError(f"Invalid glob pattern {printable(pattern)!r}: {exc}") from None
    max_depth = None if "**" in rest else rest.count("/") + 1
    deadline = time.monotonic() + timeout
    newest, total = walk_glob(base, matcher, max_depth, (deadline, timeout))
    lines = [printable(path) for _, path in newest]
    if not lines:
        return Outcome("No files found", meta={"matches": 0})
    truncated = total > len(lines)
    if truncated:
        lines.append(
            f"[showing {len(lines)} of {total} matches, newest first; "
            "use a more specific pattern or path]"
        )
    return Outcome("\n".join(lines), truncated=truncated, meta={"matches": total})


def walk_glob(
    base: str, matcher: GlobMatcher, max_depth: int | None, limit: tuple[float, float]
) -> tuple[list[tuple[int, str]], int]:
    """Walk BASE (any depth, never through a link); keep the newest matches, count all.

    The deadline is checked for every entry, so a slow pattern ends with the request.
    """
    newest: list[tuple[int, str]] = []
    total = 0
    stack = [("", base)]
    while stack:
        rel_dir, directory = stack.pop()
        check_deadline(limit[0], "glob", limit[1])
        depth = rel_dir.count("/") + 1 if rel_dir else 0
        descend = max_depth is None or depth + 1 < max_depth
        try:
            with os.scandir(directory) as scan:
                entries = list(scan)
        except OSError:
            continue
        for entry in entries:
            check_deadline(limit[0], "glob", limit[1])
            relative = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            # A link to a directory is neither listed nor followed (as os.walk does); a
            # link loop or a dangling link is listed like a file.
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            is_link = entry.is_symlink()
            if is_dir:
                if descend and not is_link and entry.name != ".git":
                    stack.append((relative, entry.path))
                continue
            if not matcher.matches(relative):
                continue
            try:
                mtime = entry.stat(follow_symlinks=False).st_mtime_ns
            except OSError:
                mtime = 0
            total += 1
            if len(newest) < GLOB_MAX_RESULTS:
                heapq.heappush(newest, (mtime, entry.path))
            else:
                heapq.heappushpop(newest, (mtime, entry.path))
    newest.sort(key=lambda item: (-item[0], item[1]))
    return newest, total


# ---------------------------------------------------------------------------------------
# grep


def rg_argv(args: JsonDict, mode: str, pattern: str, root: str) -> list[str]:
    """Build ripgrep's argument list; the pattern goes after -e so a leading '-' is safe."""
    argv = ["rg", "--no-config", "--color", "never", "--hidden"]
    argv += ["--max-columns", "500", "--max-columns-preview"]
    if bool_arg(args, "-i", False):
        argv.append("--ignore-case")
    if bool_arg(args, "multiline", False):
        argv += ["--multiline", "--multiline-dotall"]
    globs = args.get("glob")
    for glob in [globs] if isinstance(globs, str) else globs if isinstance(globs, list) else []:
        if isinstance(glob, str) and glob:
            argv += ["--glob", glob]
    file_type_name = opt_str_arg(args, "type")
    if file_type_name:
        argv += ["--type", file_type_name]
    # Last, so that no user glob can re-include the repository's .git directory.
    argv += ["--glob", "!.git"]
    if mode == "files_with_matches":
        argv.append("--files-with-matches")
    elif mode == "count":
        # No --sort here: it makes rg single-threaded; the lines are sorted afterwards.
        argv += ["--count", "--with-filename"]
    else:
        argv += ["--sort", "path"]
        argv.append("--line-number" if bool_arg(args, "-n", True) else "--no-line-number")
        for key, flag in CONTEXT_FLAGS:
            lines = int_arg(args, key, 0)
            if lines:
                argv += [flag, str(lines)]
    return [*argv, "-e", pattern, "--", root]


def op_grep(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    pattern = str_arg(args, "pattern", allow_empty=True)
    root = server.resolve(opt_str_arg(args, "path") or server.workspace)
    kind = os.stat(root).st_mode
    if not (stat.S_ISDIR(kind) or stat.S_ISREG(kind)):
        # ripgrep would wait on a FIFO for as long as nobody writes to it.
        raise ToolError(f"Not a regular file ({file_type(kind)}): {printable(root)}")
    mode = opt_str_arg(args, "output_mode") or "files_with_matches"
    if mode not in GREP_MODES:
        raise ToolError(f"Invalid output_mode {mode!r}: expected one of {', '.join(GREP_MODES)}")
    head_limit = int_arg(args, "head_limit", 0)
    argv = rg_argv(args, mode, pattern, root)
    try:
        result = run_process(
            server, argv, timeout=timeout, limits=(GREP_STDOUT_LIMIT, GREP_STDERR_LIMIT), cwd="/"
        )
    except FileNotFoundError:
        raise ToolError("ripgrep (rg) is not installed in the sandbox") from None
    if result.timed_out:
        raise ToolError(f"grep timed out after {timeout:g} s", timed_out=True)
    stdout = result.stdout.data()
    errors = result.stderr.data().decode("utf-8", "replace").strip().splitlines()
    code = result.returncode
    meta: JsonDict = {"rg_exit": code}
    if not stdout:
        if code == 1 or (code == 0 and not errors):
            return Outcome("No matches found", exit_code=code, meta=meta)
        raise ToolError("rg: " + " / ".join(line.strip() for line in errors[:6] if line.strip()))
    text, truncated = format_grep(mode, stdout, result.stdout, head_limit)
    if code == 2 and errors:
        text += f"\n[some files could not be searched: {errors[0].strip()}]"
    return Outcome(text, truncated=truncated, exit_code=code, meta=meta)


def format_grep(
    mode: str, stdout: bytes, capture: BoundedCapture, head_limit: int
) -> tuple[str, bool]:
    """Shape rg's output per mode, apply head_limit and the overall output cap."""
    if mode == "files_with_matches":
        paths = sorted_by_mtime([os.fsdecode(line) for line in stdout.splitlines()])
        total = len(paths) + capture.dropped_lines
        lines = [printable(path) for path in paths]
        header = f"Found {plural(total, 'file')}"
        unit = "files"
    else:
        lines = stdout.decode("utf-8", "replace").splitlines()
        total = len(lines) + capture.dropped_lines
        header = ""
        unit = "lines"
        if mode == "count":
            lines.sort()
            counts = [int(line.rpartition(":")[2] or 0) for line in lines if line[-1:].isdigit()]
            header = (
                f"Found {plural(sum(counts), 'matching line')} in {plural(len(counts), 'file')}"
            )
    cut = bool(head_limit) and total > head_limit
    if cut:
        lines = lines[:head_limit]
        lines.append(f"[showing first {head_limit} of {total} {unit} (head_limit)]")
    elif capture.dropped:
        lines.append(f"[rg output exceeded {GREP_STDOUT_LIMIT} bytes; {capture.dropped} dropped]")
    body = "\n".join([header, *lines] if mode == "files_with_matches" else lines)
    if mode == "count":
        body += f"\n\n{header}"
    text, capped = cap_output(body)
    return text, cut or capped or bool(capture.dropped)


def sorted_by_mtime(paths: list[str]) -> list[str]:
    """Newest first, then by path, as Claude Code's Grep lists files."""

    def key(path: str) -> tuple[int, str]:
        try:
            return -os.stat(path).st_mtime_ns, path
        except OSError:
            return 0, path

    return sorted(paths, key=key)


# ---------------------------------------------------------------------------------------
# ls


def op_ls(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    root = server.resolve(opt_str_arg(args, "path") or server.workspace)
    server.require_directory(root)
    raw_ignore = args.get("ignore") or []
    ignore = [raw_ignore] if isinstance(raw_ignore, str) else raw_ignore
    if not isinstance(ignore, list) or not all(isinstance(item, str) for item in ignore):
        raise ToolError("Invalid argument 'ignore': expected a list of glob patterns")
    patterns = [item.rstrip("/") for item in ignore if item.rstrip("/")]
    deadline = time.monotonic() + timeout
    lines, truncated = tree_lines(root, patterns, (deadline, timeout))
    header = f"- {printable(root.rstrip('/'))}/"
    if truncated:
        lines.append(
            f"[listing cut at {LS_MAX_ENTRIES} entries; "
            "pass a deeper path, or use glob/grep to find files]"
        )
    return Outcome("\n".join([header, *lines]), truncated=truncated)


def tree_lines(root: str, ignore: list[str], limit: tuple[float, float]) -> tuple[list[str], bool]:
    """Depth-first listing, sorted by name, with an explicit stack so depth cannot overflow."""
    lines: list[str] = []
    stack: list[tuple[Iterator[os.DirEntry[str]], int, str]] = []
    stack.append((listed_entries(root, "", ignore, lines, 1), 1, ""))
    while stack:
        entries, depth, rel_dir = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        if len(lines) >= LS_MAX_ENTRIES:
            return lines[:LS_MAX_ENTRIES], True
        check_deadline(limit[0], "ls", limit[1])
        indent = "  " * depth
        name = printable(entry.name)
        if entry.is_dir(follow_symlinks=False):
            lines.append(f"{indent}- {name}/")
            rel = f"{rel_dir}{entry.name}/"
            children = listed_entries(entry.path, rel, ignore, lines, depth + 1)
            stack.append((children, depth + 1, rel))
        elif entry.is_symlink():
            lines.append(f"{indent}- {name} -> {printable(safe_readlink(entry.path))}")
        else:
            lines.append(f"{indent}- {name}")
    return lines, False


def listed_entries(
    path: str, rel_dir: str, ignore: list[str], lines: list[str], depth: int
) -> Iterator[os.DirEntry[str]]:
    """The visible entries of one directory; an unreadable one is noted in the listing."""
    try:
        with os.scandir(path) as scan:
            entries = [entry for entry in scan if not ls_skipped(entry.name, rel_dir, ignore)]
    except OSError as exc:
        lines.append(f"{'  ' * depth}[cannot list: {exc.strerror or exc}]")
        return iter(())
    entries.sort(key=lambda entry: entry.name)
    return iter(entries)


def ls_skipped(name: str, rel_dir: str, ignore: list[str]) -> bool:
    if name.startswith(".") or name in LS_SKIPPED_NAMES:
        return True
    rel = rel_dir + name
    return any(
        fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(rel, pattern)
        for pattern in ignore
    )


def safe_readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


# ---------------------------------------------------------------------------------------
# bash


def op_bash(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    command = str_arg(args, "command")
    timeout_ms = args.get("timeout")
    # Claude-Code style args.timeout is in milliseconds and wins over the request's seconds.
    if isinstance(timeout_ms, int | float) and not isinstance(timeout_ms, bool) and timeout_ms > 0:
        timeout = clamp_timeout(timeout_ms / 1000)
    token = new_token()
    oom_kills_before = oom_kill_count()
    try:
        result = run_process(
            server,
            ["/bin/bash", "-c", command],
            timeout=timeout,
            limits=(BASH_STREAM_LIMIT, BASH_STREAM_LIMIT),
            cwd=server.workspace,
            token=token,
            git_env=server.git.env(),
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
    code = result.returncode
    return Outcome(
        text,
        truncated=truncated,
        exit_code=code if code >= 0 else 128 - code,
        timed_out=result.timed_out,
        meta={"token": token, "timeout": timeout},
    )


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


# ---------------------------------------------------------------------------------------
# write and edit: only inside the plan directory, never through a symlink


def writable_root(server: ToolServer, path: str) -> str | None:
    """The writable root PATH lies under: the plan directory, or one given by --writable."""
    for root in (server.plan_dir, *server.writable):
        if path.startswith(root.rstrip("/") + "/"):
            return root
    return None


def plan_target(server: ToolServer, raw: str) -> tuple[str, list[str]]:
    """The path a write may go to, and its components below its writable root."""
    path = server.resolve(raw)
    root = writable_root(server, path)
    if root is None:
        if not server.writable:
            where = f"the plan directory {server.plan_dir}"
        else:
            where = " and ".join([server.plan_dir, *server.writable])
        raise ToolError(f"Write is only allowed in {where}: {printable(path)}")
    parts = path[len(root.rstrip("/")) + 1 :].split("/")
    if ".git" in parts:
        # git would take it for a repository and obey its config; in the workspace, the
        # user's own git on the host would (hooks, filters).
        where = " in the plan directory" if root == server.plan_dir else ""
        raise ToolError(f"Refusing to write a .git path{where}: {printable(path)}")
    return path, parts


def open_in_plan(server: ToolServer, path: str, parts: list[str], *, create: bool) -> int:
    """Open PATH component by component from the plan directory with O_NOFOLLOW.

    Walking with directory descriptors means a symlink swapped in at any level is refused
    rather than followed, whatever happens between our checks.
    """
    dir_fd = open_plan_parent(server, parts, path, create=create)
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(parts[-1], flags | (os.O_CREAT if create else 0), 0o644, dir_fd=dir_fd)
        except OSError as exc:
            raise ToolError(plan_open_error(exc, dir_fd, parts[-1], path)) from None
    finally:
        os.close(dir_fd)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ToolError(f"Not a regular file: {printable(path)}")
    return fd


def open_plan_dir(dir_fd: int, name: str, shown: str, create: bool) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    for attempt in (1, 2):
        try:
            return os.open(name, flags, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create or attempt == 2:
                raise ToolError(f"File does not exist: {printable(shown)}") from None
        except OSError as exc:
            raise ToolError(plan_open_error(exc, dir_fd, name, shown)) from None
        try:
            os.mkdir(name, 0o755, dir_fd=dir_fd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise ToolError(describe_os_error(exc, shown)) from None
    raise ToolError(f"Could not create directory: {printable(shown)}")


def plan_open_error(exc: OSError, dir_fd: int, name: str, shown: str) -> str:
    """Name the symlink when that is why O_NOFOLLOW refused, else describe the error."""
    if exc.errno == errno.ENOENT:
        return f"File does not exist: {printable(shown)}"
    try:
        is_link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        is_link = False
    if is_link:
        return f"Refusing to follow a symbolic link in the plan directory: {printable(shown)}"
    return describe_os_error(exc, shown)


FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def plan_full_message(server: ToolServer, path: str) -> str:
    return (
        f"Plan directory is full: {printable(path)} was not changed (the plan directory "
        f"holds at most {human_size(server.max_plan_bytes)} and "
        f"{server.max_plan_entries} files); write less, or remove files you do not need"
    )


def replace_in_plan(server: ToolServer, path: str, parts: list[str], data: bytes) -> None:
    """Write DATA to a new file beside PATH, then rename it over PATH.

    A write that fails half-way (the plan directory is full) leaves the old plan whole;
    a symlink or FIFO planted at PATH is replaced, never followed or opened.
    """
    in_plan = writable_root(server, path) == server.plan_dir
    if in_plan and len(data) > server.max_plan_bytes:
        raise ToolError(plan_full_message(server, path))
    dir_fd = open_plan_parent(server, parts, path, create=True)
    temporary = f".{parts[-1][:200]}.planrun-{threading.get_ident()}.tmp"
    try:
        try:
            fd = os.open(
                temporary,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=dir_fd,
            )
        except OSError as exc:
            raise ToolError(plan_write_error(server, exc, path)) from None
        try:
            view = memoryview(data)
            position = 0
            while position < len(view):
                position += os.write(fd, view[position:])
        except OSError as exc:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise ToolError(plan_write_error(server, exc, path)) from None
        os.close(fd)
        try:
            refuse_odd_target(dir_fd, parts[-1], path)
            os.rename(temporary, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except ToolError:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise ToolError(plan_write_error(server, exc, path)) from None
    finally:
        os.close(dir_fd)


def refuse_odd_target(dir_fd: int, name: str, path: str) -> None:
    """A symlink, FIFO or directory at the target is an error, not something to replace."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise ToolError(
            f"Refusing to follow a symbolic link in the plan directory: {printable(path)}"
        )
    if not stat.S_ISREG(mode):
        raise ToolError(f"Not a regular file ({file_type(mode)}): {printable(path)}")


def plan_write_error(server: ToolServer, exc: OSError, path: str) -> str:
    if exc.errno in FULL_ERRNOS and writable_root(server, path) == server.plan_dir:
        return plan_full_message(server, path)
    return describe_os_error(exc, path)


def open_plan_parent(server: ToolServer, parts: list[str], path: str, *, create: bool) -> int:
    """The directory that holds PATH, opened component by component with O_NOFOLLOW from
    its writable root."""
    root = writable_root(server, path) or server.plan_dir
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    walked = root.rstrip("/")
    try:
        for part in parts[:-1]:
            walked = f"{walked}/{part}"
            next_fd = open_plan_dir(dir_fd, part, walked, create)
            os.close(dir_fd)
            dir_fd = next_fd
    except BaseException:
        os.close(dir_fd)
        raise
    return dir_fd


def op_write(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    path, parts = plan_target(server, str_arg(args, "file_path"))
    data = str_arg(args, "content", allow_empty=True).encode("utf-8", "replace")
    with server.plan_lock:
        replace_in_plan(server, path, parts, data)
    shown = printable(path)
    return Outcome(f"File written: {shown} ({len(data)} bytes)", meta={"bytes": len(data)})


def read_plan_text(server: ToolServer, fd: int, path: str) -> str:
    size = os.fstat(fd).st_size
    if size > server.max_plan_bytes:
        raise ToolError(f"File is larger than the plan size limit: {printable(path)}")
    chunks: list[bytes] = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"File is not valid UTF-8 text: {printable(path)}") from None


def op_edit(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    path, parts = plan_target(server, str_arg(args, "file_path"))
    old = str_arg(args, "old_string", allow_empty=True)
    new = str_arg(args, "new_string", allow_empty=True)
    replace_all = bool_arg(args, "replace_all", False)
    if not old:
        raise ToolError("old_string must not be empty; use write to create or overwrite a file")
    if old == new:
        raise ToolError("old_string and new_string are identical; nothing to change")
    with server.plan_lock:
        fd = open_in_plan(server, path, parts, create=False)
        try:
            text = read_plan_text(server, fd, path)
        finally:
            os.close(fd)
        count = text.count(old)
        if count == 0:
            raise ToolError(f"old_string not found in file: {printable(path)}")
        if count > 1 and not replace_all:
            raise ToolError(
                f"old_string is not unique in file ({count} occurrences); "
                "give more context or set replace_all"
            )
        data = text.replace(old, new, -1 if replace_all else 1).encode("utf-8", "replace")
        replace_in_plan(server, path, parts, data)
    done = count if replace_all else 1
    message = f"File edited: {printable(path)} ({plural(done, 'replacement')})"
    return Outcome(message, meta={"replacements": done})


# ---------------------------------------------------------------------------------------
# plan_files and plan_read: how the host copies the plan directory (a tmpfs) out


def op_plan_files(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    """The regular files under the plan directory: hex-encoded relative names and sizes.

    Walked with an explicit stack (any depth), never through a symlink; other kinds of
    entries are only counted.
    """
    deadline = time.monotonic() + timeout
    files: list[JsonDict] = []
    skipped = 0
    stack = [b""]
    root = os.fsencode(server.plan_dir)
    while stack and len(files) < EXPORT_MAX_FILES:
        check_deadline(deadline, "plan_files", timeout)
        relative = stack.pop()
        try:
            with os.scandir(os.path.join(root, relative) if relative else root) as scan:
                entries = list(scan)
        except OSError:
            skipped += 1
            continue
        for entry in entries:
            name = os.path.join(relative, entry.name) if relative else entry.name
            if entry.is_dir(follow_symlinks=False):
                stack.append(name)
            elif entry.is_file(follow_symlinks=False):
                files.append(
                    {"path": name.hex(), "size": entry.stat(follow_symlinks=False).st_size}
                )
            else:
                skipped += 1
    listed = files[:EXPORT_MAX_FILES]
    more = bool(stack) or len(files) > EXPORT_MAX_FILES
    meta: JsonDict = {"files": listed, "skipped": skipped, "more": more}
    return Outcome(f"{len(listed)} files", meta=meta)


def op_plan_read(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    """Up to EXPORT_CHUNK_BYTES of one plan-directory file from OFFSET, base64-encoded."""
    raw = str_arg(args, "path")
    offset = int_arg(args, "offset", 0)
    path, parts = plan_target(server, os.path.join(server.plan_dir, raw))
    with server.plan_lock:
        fd = open_in_plan(server, path, parts, create=False)
        try:
            size = os.fstat(fd).st_size
            data = os.pread(fd, EXPORT_CHUNK_BYTES, offset)
        finally:
            os.close(fd)
    eof = offset + len(data) >= size
    meta: JsonDict = {"size": size, "offset": offset, "eof": eof}
    return Outcome(base64.b64encode(data).decode("ascii"), meta=meta)


# ---------------------------------------------------------------------------------------
# stat


def op_stat(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    path = server.resolve(str_arg(args, "path"))
    info = os.lstat(path)
    details: JsonDict = {
        "path": printable(path),
        "type": file_type(info.st_mode),
        "size": info.st_size,
        "mtime": info.st_mtime,
        "mode": oct(stat.S_IMODE(info.st_mode)),
        "uid": info.st_uid,
        "nlink": info.st_nlink,
    }
    if stat.S_ISLNK(info.st_mode):
        details["target"] = printable(safe_readlink(path))
    return Outcome(json.dumps(details, ensure_ascii=False), meta=details)


# ---------------------------------------------------------------------------------------
# lsp: code intelligence without a language server, from universal-ctags and ripgrep

LSP_MAX_CANDIDATE_FILES = 200
LSP_MAX_SYMBOLS = 100
LSP_MAX_REFERENCES = 200
LSP_SOURCE_PREVIEW_CHARS = 200
LSP_CANDIDATE_MAX_FILESIZE = "4M"
# Fixed-size argv; file lists longer than this are cut rather than hitting ARG_MAX.
LSP_MAX_ARGV_BYTES = 1 << 20
LSP_LANGUAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Python", ("py", "pyi")),
    ("JavaScript/TypeScript", ("js", "jsx", "mjs", "cjs", "ts", "tsx", "mts", "cts")),
    ("Go", ("go",)),
    ("Rust", ("rs",)),
    ("Java", ("java",)),
    ("C/C++", ("c", "h", "cc", "cpp", "cxx", "c++", "hh", "hpp", "hxx", "h++", "inl")),
)
# Searched when no file gives the language: the families above plus other languages ctags
# parses, and never prose or data files, whose headings ctags would report as symbols.
LSP_SOURCE_EXTENSIONS = (
    *(extension for _, extensions in LSP_LANGUAGES for extension in extensions),
    *("rb", "php", "cs", "kt", "scala", "lua", "pl", "pm", "sh"),
)
# --options=NONE: option files (./.ctags.d in a repository) could redirect the output.
# --links=no: never read through a symlink; --sort=no: sorting would use a temporary file.
CTAGS_ARGV = (
    "ctags", "--options=NONE", "--links=no", "--sort=no", "--output-format=json",
    "--fields=+nKzSe", "--kinds-C=+p", "--kinds-C++=+p", "-f", "-",
)  # fmt: skip
DECLARATION_KINDS = frozenset({"prototype", "externvar"})
IDENTIFIER = re.compile(r"[\w$]+")
QUALIFIER_SEPARATORS = re.compile(r"::|\.|#")


class Symbol:
    """One definition reported by ctags."""

    __slots__ = ("imported", "kind", "line", "name", "path", "scope", "scope_kind", "signature")

    def __init__(self, tag: JsonDict, name: str, path: str, line: int) -> None:
        self.name = name
        self.path = path
        self.line = line
        self.kind = _tag_text(tag, "kind") or "symbol"
        self.scope = _tag_text(tag, "scope")
        self.scope_kind = _tag_text(tag, "scopeKind")
        self.signature = _tag_text(tag, "signature")
        # ctags tags `import x as y` with a nameref; it names the module, not a definition.
        self.imported = "nameref" in tag

    @classmethod
    def from_tag(cls, tag: object) -> Symbol | None:
        if not isinstance(tag, dict) or tag.get("_type") != "tag":
            return None
        name, path, line = tag.get("name"), tag.get("path"), tag.get("line")
        if not isinstance(name, str) or not isinstance(path, str) or not isinstance(line, int):
            return None
        return cls(tag, name, path, line)

    def scope_depth(self) -> int:
        return len(QUALIFIER_SEPARATORS.split(self.scope)) if self.scope else 0

    def in_scope(self, qualifier: str) -> bool:
        """Whether the symbol's scope ends with QUALIFIER (`Greeter` for `Greeter.greet`)."""
        scope = "." + ".".join(QUALIFIER_SEPARATORS.split(self.scope)).lower()
        return not qualifier or scope.endswith("." + qualifier.lower())


def _tag_text(tag: JsonDict, key: str) -> str:
    value = tag.get(key)
    return value if isinstance(value, str) else ""


def op_lsp(server: ToolServer, args: JsonDict, timeout: float) -> Outcome:
    operation = str_arg(args, "operation")
    handler = LSP_OPERATIONS.get(operation)
    if handler is None:
        known = ", ".join(LSP_OPERATIONS)
        raise ToolError(f"Invalid operation {operation!r}: expected one of {known}")
    return handler(server, args, (time.monotonic() + timeout, timeout))


def lsp_document_symbols(server: ToolServer, args: JsonDict, limit: tuple[float, float]) -> Outcome:
    path = lsp_file(server, str_arg(args, "file_path"))
    symbols = ctags_symbols(server, [path], limit)
    if not symbols:
        shown = workspace_relative(server, path)
        message = f"No symbols found in {shown} (language not recognised?)"
        return Outcome(message, meta={"symbols": 0})
    symbols.sort(key=lambda symbol: symbol.line)
    lines = [
        f"{'  ' * symbol.scope_depth()}{symbol.line}: {symbol.kind} "
        f"{printable(symbol.name)}{printable(symbol.signature)}"
        for symbol in symbols
    ]
    text, truncated = cap_output("\n".join(lines))
    return Outcome(text, truncated=truncated, meta={"symbols": len(symbols)})


def lsp_workspace_symbols(
    server: ToolServer, args: JsonDict, limit: tuple[float, float]
) -> Outcome:
    query = symbol_arg(args)
    if query is None:
        raise ToolError("workspace_symbols needs symbol: the name (or part of it) to look for")
    qualifier, name = split_qualified(query)
    symbols, parsed, mentioning = matching_symbols(server, name, qualifier, limit)
    wanted = name.lower()

    def rank(symbol: Symbol) -> tuple[int, str, int]:
        found = symbol.name.lower()
        closeness = (symbol.name != name) + (found != wanted) + (not found.startswith(wanted))
        return closeness, symbol.path, symbol.line

    symbols.sort(key=rank)
    if not symbols:
        return Outcome(f"No symbols matching {query!r} found in the workspace", meta={"symbols": 0})
    lines = [format_symbol(server, symbol) for symbol in symbols[:LSP_MAX_SYMBOLS]]
    notes = symbol_notes(len(symbols), parsed, mentioning, name)
    text, truncated = cap_output("\n".join(lines + notes))
    meta: JsonDict = {"symbols": len(symbols), "files_parsed": parsed}
    return Outcome(text, truncated=truncated or bool(notes), meta=meta)


def matching_symbols(
    server: ToolServer, name: str, qualifier: str, limit: tuple[float, float]
) -> tuple[list[Symbol], int, int]:
    """Definitions whose name contains NAME in any case; also how many files were parsed and
    how many mention NAME. Files with NAME as a whole word come first, as ctags is the slow
    part and parses at most LSP_MAX_CANDIDATE_FILES."""
    wanted = name.lower()
    files = candidate_files(server, name, LSP_SOURCE_EXTENSIONS, limit, "--word-regexp")
    scanned = files[:LSP_MAX_CANDIDATE_FILES]
    symbols = ctags_symbols(server, scanned, limit)
    found = [symbol for symbol in symbols if wanted in symbol.name.lower()]
    if len(found) < LSP_MAX_SYMBOLS and len(scanned) < LSP_MAX_CANDIDATE_FILES:
        # Only now pay for the case-insensitive substring search, on files not yet parsed.
        seen = set(files)
        more = candidate_files(server, name, LSP_SOURCE_EXTENSIONS, limit, "--ignore-case")
        files += [path for path in more if path not in seen]
        extra = files[len(scanned) : LSP_MAX_CANDIDATE_FILES]
        symbols += ctags_symbols(server, extra, limit)
        scanned += extra
    matching = [
        symbol for symbol in symbols if wanted in symbol.name.lower() and symbol.in_scope(qualifier)
    ]
    return matching, len(scanned), len(files)


def symbol_notes(found: int, parsed: int, mentioning: int, name: str) -> list[str]:
    notes = []
    if found > LSP_MAX_SYMBOLS:
        notes.append(f"[showing {LSP_MAX_SYMBOLS} of {found} symbols; use a more specific name]")
    if mentioning > parsed:
        notes.append(
            f"[parsed {parsed} of the {mentioning} files that mention {name!r}; "
            "results may be incomplete: use Grep to search further]"
        )
    return notes


def lsp_definition(server: ToolServer, args: JsonDict, limit: tuple[float, float]) -> Outcome:
    name, qualifier, origin = lsp_target(server, args, "definition", limit)
    extensions = language_of(origin)[1] if origin else LSP_SOURCE_EXTENSIONS
    mentioning = candidate_files(server, name, extensions, limit, "--word-regexp")
    files = list(dict.fromkeys([origin, *mentioning] if origin else mentioning))
    scanned = files[:LSP_MAX_CANDIDATE_FILES]
    symbols = [
        symbol
        for symbol in ctags_symbols(server, scanned, limit)
        if symbol.name == name and symbol.in_scope(qualifier)
    ]
    symbols.sort(
        key=lambda symbol: (
            symbol.path != origin,
            symbol.kind in DECLARATION_KINDS or symbol.imported,
            symbol.path,
            symbol.line,
        )
    )
    meta: JsonDict = {"symbol": name, "definitions": len(symbols), "files_parsed": len(scanned)}
    if not symbols:
        message = (
            f"No definition found for {name!r} in {plural(len(scanned), 'file')} of the "
            "workspace (it may come from a library, or be a local variable or attribute)"
        )
        return Outcome(message, meta=meta)
    shown = symbols[:LSP_MAX_SYMBOLS]
    previews = source_previews(shown, limit)
    lines = [f"{plural(len(symbols), 'definition')} of {printable(name)!r}:"]
    for symbol in shown:
        lines.append(format_symbol(server, symbol))
        preview = previews.get((symbol.path, symbol.line))
        if preview:
            lines.append(f"    {preview}")
    notes = symbol_notes(len(symbols), len(scanned), len(files), name)
    text, truncated = cap_output("\n".join(lines + notes))
    return Outcome(text, truncated=truncated or bool(notes), meta=meta)


def lsp_references(server: ToolServer, args: JsonDict, limit: tuple[float, float]) -> Outcome:
    name, _qualifier, origin = lsp_target(server, args, "references", limit)
    language, extensions = language_of(origin) if origin else ("", ())
    flags = ("--word-regexp", "--line-number", "--with-filename", "--no-heading", "--null")
    columns = ("--max-columns", "500", "--max-columns-preview")
    argv = lsp_rg_argv(server, name, extensions, *flags, *columns)
    stdout, capture = rg_output(server, argv, limit)
    matches = parse_matches(stdout)
    total = len(matches) + capture.dropped_lines
    where = f" ({language} files)" if language else ""
    meta: JsonDict = {"symbol": name, "references": total}
    if not total:
        return Outcome(f"No references to {name!r} found{where}", meta=meta)
    shown = matches[:LSP_MAX_REFERENCES]
    files = list(dict.fromkeys(path for path, _, _ in shown))
    definitions = {
        (symbol.path, symbol.line)
        for symbol in ctags_symbols(server, files, limit)
        if symbol.name == name
    }
    file_count = len({path for path, _, _ in matches})
    lines = [f"{plural(total, 'reference')} to {name!r} in {plural(file_count, 'file')}{where}:"]
    for path, number, text in shown:
        mark = " (definition)" if (path, number) in definitions else ""
        location = f"{workspace_relative(server, path)}:{number}"
        lines.append(f"{location}: {printable(text.strip())}{mark}")
    if total > len(shown):
        lines.append(
            f"[showing the first {len(shown)} of {total} references, by path; "
            "use Grep with a path or glob to see the rest]"
        )
    text, truncated = cap_output("\n".join(lines))
    return Outcome(text, truncated=truncated or total > len(shown), meta=meta)


def parse_matches(stdout: bytes) -> list[tuple[str, int, str]]:
    """rg's `path NUL line:text` lines as (path, line, text), sorted by path and line."""
    matches: list[tuple[str, int, str]] = []
    for raw in stdout.splitlines():
        path, _, rest = raw.partition(b"\0")
        number, _, text = rest.partition(b":")
        if number.isdigit():
            matches.append((os.fsdecode(path), int(number), text.decode("utf-8", "replace")))
    matches.sort(key=lambda match: (match[0], match[1]))
    return matches


LSP_OPERATIONS: dict[str, Callable[[ToolServer, JsonDict, tuple[float, float]], Outcome]] = {
    "document_symbols": lsp_document_symbols,
    "workspace_symbols": lsp_workspace_symbols,
    "definition": lsp_definition,
    "references": lsp_references,
}


def symbol_arg(args: JsonDict) -> str | None:
    symbol = opt_str_arg(args, "symbol")
    if symbol is None:
        return None
    symbol = symbol.strip()
    if not symbol or any(char.isspace() or char == "\0" for char in symbol):
        raise ToolError(f"Invalid symbol {symbol!r}: expected a single name such as 'parse_args'")
    return symbol


def split_qualified(symbol: str) -> tuple[str, str]:
    """`Greeter.greet` or `Counter::new` → (qualifier, name); the name is what ctags tags."""
    parts = QUALIFIER_SEPARATORS.split(symbol)
    if not parts[-1]:
        raise ToolError(f"Invalid symbol {symbol!r}: it ends with a separator")
    return ".".join(part for part in parts[:-1] if part), parts[-1]


def lsp_target(
    server: ToolServer, args: JsonDict, operation: str, limit: tuple[float, float]
) -> tuple[str, str, str | None]:
    """The name to look up (from symbol, else from file_path:line:character), its qualifier,
    and the file the question was asked from, if any."""
    raw_path = opt_str_arg(args, "file_path")
    origin = lsp_file(server, raw_path) if raw_path else None
    symbol = symbol_arg(args)
    if symbol is not None:
        qualifier, name = split_qualified(symbol)
        return name, qualifier, origin
    line = int_arg(args, "line", 0, minimum=1)
    character = int_arg(args, "character", 0, minimum=1)
    if origin is None or not line or not character:
        raise ToolError(
            f"{operation} needs file_path, line and character (1-based, as shown by Read), "
            "or symbol"
        )
    return identifier_at(server, origin, line, character, limit), "", origin


def identifier_at(
    server: ToolServer, path: str, line: int, character: int, limit: tuple[float, float]
) -> str:
    """The identifier under a 1-based position; a cursor just after one counts as on it."""
    found, lines_read = source_lines(path, {line}, limit)
    shown = workspace_relative(server, path)
    if line not in found:
        raise ToolError(f"Line {line} is out of range: {shown} has {plural(lines_read, 'line')}")
    text = found[line]
    if character > len(text) + 1:
        raise ToolError(
            f"Character {character} is out of range: line {line} of {shown} "
            f"has {plural(len(text), 'character')}"
        )
    index = character - 1
    spans = [match for match in IDENTIFIER.finditer(text) if match.start() <= index <= match.end()]
    inside = [match for match in spans if index < match.end()]
    word = (inside or spans)[0].group() if spans else ""
    if not word or word[0].isdigit():
        near = text[max(0, index - 10) : index + 10].strip()
        raise ToolError(
            f"No identifier at {shown}:{line}:{character} (the text there is {near!r}); "
            "point at a name, or pass symbol"
        )
    return word


def lsp_file(server: ToolServer, raw: str) -> str:
    """The file to parse: regular, and not reached through a symlink leaving the workspace."""
    path = server.resolve(raw)
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise ToolError(f"Path is a directory, not a file: {printable(path)}")
    if not stat.S_ISREG(mode):
        raise ToolError(f"Not a regular file ({file_type(mode)}): {printable(path)}")
    if not os.path.islink(path):
        return path
    real = os.path.realpath(path)
    workspace = os.path.realpath(server.workspace)
    if is_within(path, server.workspace) and not is_within(real, workspace):
        raise ToolError(
            f"Refusing to follow a symbolic link out of the workspace: {printable(path)}"
        )
    return real


def is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def workspace_relative(server: ToolServer, path: str) -> str:
    prefix = server.workspace.rstrip("/") + "/"
    return printable(path[len(prefix) :] if path.startswith(prefix) else path)


def language_of(path: str) -> tuple[str, tuple[str, ...]]:
    """The language family of PATH by extension: its name and all its extensions."""
    base = os.path.basename(path)
    extension = base.rpartition(".")[2].lower() if "." in base.lstrip(".") else ""
    if not extension.replace("+", "").replace("_", "").isalnum():
        return "", ()  # a glob character would garble rg's --type-add
    for language, extensions in LSP_LANGUAGES:
        if extension in extensions:
            return language, extensions
    return (f".{extension}", (extension,)) if extension else ("", ())


def format_symbol(server: ToolServer, symbol: Symbol) -> str:
    scope = f" ({symbol.scope_kind} {symbol.scope})".replace("( ", "(") if symbol.scope else ""
    location = f"{workspace_relative(server, symbol.path)}:{symbol.line}"
    return f"{location}: {symbol.kind} {printable(symbol.name)}{printable(scope)}"


def source_previews(
    symbols: list[Symbol], limit: tuple[float, float]
) -> dict[tuple[str, int], str]:
    """The stripped source line of each symbol, read once per file."""
    wanted: dict[str, set[int]] = {}
    for symbol in symbols:
        wanted.setdefault(symbol.path, set()).add(symbol.line)
    previews: dict[tuple[str, int], str] = {}
    for path, numbers in wanted.items():
        try:
            found, _ = source_lines(path, numbers, limit)
        except (OSError, ToolError) as exc:
            if isinstance(exc, ToolError) and exc.timed_out:
                raise
            continue
        for number, text in found.items():
            stripped = text.strip()
            if len(stripped) > LSP_SOURCE_PREVIEW_CHARS:
                stripped = stripped[:LSP_SOURCE_PREVIEW_CHARS] + " ..."
            previews[(path, number)] = printable(stripped)
    return previews


def source_lines(
    path: str, numbers: set[int], limit: tuple[float, float]
) -> tuple[dict[int, str], int]:
    """The wanted lines of PATH (each cut at READ_LINE_PROBE_BYTES) and how many were read."""
    found: dict[int, str] = {}
    last = max(numbers)
    line_no = 0
    with open_regular_file(path) as handle:
        while line_no < last:
            raw = handle.readline(READ_LINE_PROBE_BYTES)
            if not raw:
                break
            line_no += 1
            if len(raw) == READ_LINE_PROBE_BYTES and not raw.endswith(b"\n"):
                skip_rest_of_line(handle, limit[0])
            if line_no & 0xFFF == 0:
                check_deadline(limit[0], "lsp", limit[1])
            if line_no in numbers:
                found[line_no] = raw.decode("utf-8", "replace").rstrip("\r\n")
    return found, line_no


def lsp_rg_argv(
    server: ToolServer, name: str, extensions: tuple[str, ...], *flags: str
) -> list[str]:
    """A fixed-string ripgrep search for NAME, limited to files with the given extensions."""
    argv = ["rg", "--no-config", "--color", "never", "--hidden", "--fixed-strings", *flags]
    if extensions:
        argv += ["--type-add", f"lsp:*.{{{','.join(extensions)}}}", "--type", "lsp"]
    return [*argv, "--glob", "!.git", "-e", name, "--", server.workspace]


def candidate_files(
    server: ToolServer,
    name: str,
    extensions: tuple[str, ...],
    limit: tuple[float, float],
    *flags: str,
) -> list[str]:
    """Files that mention NAME, sorted: the only ones worth handing to ctags."""
    argv = lsp_rg_argv(
        server,
        name,
        extensions,
        "--files-with-matches",
        "--null",
        "--max-filesize",
        LSP_CANDIDATE_MAX_FILESIZE,
        *flags,
    )
    stdout, _ = rg_output(server, argv, limit)
    return sorted(os.fsdecode(path) for path in stdout.split(b"\0") if path)


def rg_output(
    server: ToolServer, argv: list[str], limit: tuple[float, float]
) -> tuple[bytes, BoundedCapture]:
    result = run_lsp_process(server, argv, limit, "ripgrep (rg)")
    stdout = result.stdout.data()
    if not stdout and result.returncode not in (0, 1):
        errors = result.stderr.data().decode("utf-8", "replace").strip().splitlines()
        raise ToolError("rg: " + " / ".join(line.strip() for line in errors[:6] if line.strip()))
    return stdout, result.stdout


def ctags_symbols(server: ToolServer, paths: list[str], limit: tuple[float, float]) -> list[Symbol]:
    """Parse PATHS with ctags and return their definitions; nothing is written to disk."""
    room = LSP_MAX_ARGV_BYTES
    argv = list(CTAGS_ARGV)
    for path in paths:
        room -= len(os.fsencode(path)) + 1
        if room < 0:
            break
        argv.append(path)
    if len(argv) == len(CTAGS_ARGV):
        return []
    result = run_lsp_process(server, argv, limit, "universal-ctags (ctags)")
    symbols = []
    for raw in result.stdout.data().splitlines():
        try:
            symbol = Symbol.from_tag(json.loads(raw.decode("utf-8", "surrogateescape")))
        except ValueError:
            continue
        if symbol is not None:
            symbols.append(symbol)
    if not symbols and result.returncode != 0:
        errors = result.stderr.data().decode("utf-8", "replace").splitlines()
        problems = [line.strip() for line in errors if line.strip() and "Notice:" not in line]
        raise ToolError("ctags: " + " / ".join(problems[:6] or ["failed"]))
    return symbols


def run_lsp_process(
    server: ToolServer, argv: list[str], limit: tuple[float, float], program: str
) -> ProcessResult:
    check_deadline(limit[0], "lsp", limit[1])
    try:
        result = run_process(
            server,
            argv,
            timeout=max(MIN_TIMEOUT, limit[0] - time.monotonic()),
            limits=(GREP_STDOUT_LIMIT, GREP_STDERR_LIMIT),
            cwd="/",
        )
    except FileNotFoundError:
        raise ToolError(f"{program} is not installed in the sandbox") from None
    if result.timed_out:
        raise ToolError(f"lsp timed out after {limit[1]:g} s", timed_out=True)
    return result


# ---------------------------------------------------------------------------------------
# The server: request lines in, one thread per request, response lines out


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
        self.plan_lock = threading.Lock()
        self._out_lock = threading.Lock()
        self._running_lock = threading.Lock()
        self._running: dict[int, tuple[subprocess.Popen[bytes], str | None]] = {}
        # Held from a child's creation until it is registered, so that reap_orphans never
        # collects the exit status of a command that subprocess is about to wait for.
        self.spawn_lock = threading.Lock()
        self.git = GitGuard([self.workspace, *self.extra_dirs])
        self.warmed_up = threading.Event()
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
            response = handler(self, args, timeout).response(request_id)
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
        # The first scan of a large workspace takes a while: done before a command needs it.
        self.git.env()

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


ORPHAN_REAP_SECONDS = 0.5
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


def help_formatter(prog: str) -> argparse.HelpFormatter:
    # A fixed width keeps argparse from importing shutil (and bz2, lzma) at start-up.
    return argparse.HelpFormatter(prog, width=100)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="planrun in-container tool server", formatter_class=help_formatter
    )
    parser.add_argument("--workspace", default="/workspace")
    parser.add_argument("--plan-dir", default="/plan")
    parser.add_argument("--extra-dir", action="append", default=[])
    parser.add_argument("--max-plan-bytes", type=int, default=DEFAULT_MAX_PLAN_BYTES)
    parser.add_argument("--max-plan-entries", type=int, default=DEFAULT_MAX_PLAN_ENTRIES)
    parser.add_argument("--writable", action="append", default=[])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    options = parse_args(argv)
    os.umask(0o022)
    server = ToolServer(
        options.workspace,
        options.plan_dir,
        options.extra_dir,
        (options.max_plan_bytes, options.max_plan_entries),
        options.writable,
    )
    if os.getpid() == 1:
        # As the container's init: no signal handlers, so that no process inside can stop
        # the server (the kernel drops signals to PID 1 that it does not handle), and
        # orphans are collected here, as an init must.
        # Python handles SIGINT itself (KeyboardInterrupt); give it back to the kernel.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        threading.Thread(target=reap_forever, args=(server,), name="reaper", daemon=True).start()
    else:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda _signum, _frame: server.shutdown())
    server.serve()


def reap_forever(server: ToolServer) -> None:
    while True:
        time.sleep(ORPHAN_REAP_SECONDS)
        reap_orphans(server)


if __name__ == "__main__":
    main()
