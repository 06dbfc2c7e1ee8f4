"""Git in commands: a repository is read, never obeyed (settings that switch off its programs)."""

from __future__ import annotations

import contextlib
import os
import threading
import time

from .git_look import GitLook
from .git_scan import GitRefusal
from .git_seed import SeedError, load_seed, wait_for_seed

# mypy treats any name TYPE_CHECKING as true; a plain constant spares importing typing.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

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
    ("protocol.allow", "never"),  # protocol.<name>.allow beats it: see command_env
    ("gpg.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.x509.program", "false"),
    ("log.showSignature", "false"),
    # `git log --help` would run the repository's man.<viewer>.cmd or browser.<name>.cmd.
    ("help.format", "info"),
    ("core.pager", "cat"),
    # A command has no terminal to edit in: `git commit --amend`, `git tag -a` and
    # `git rebase -i` take the text as it is (GIT_EDITOR, the command's own, still wins).
    ("core.editor", "true"),
    ("sequence.editor", "true"),
    # ssh signing runs it for a key before any signing program.
    ("gpg.ssh.defaultKeyCommand", "false"),
    # Looking into a submodule's files means a git process there, under that repository's
    # config: by default, git compares submodules by their commit only. Options and
    # submodule.<name>.ignore can still ask for more, so the scan (git_scan) covers every nested
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
# What the overrides may hold: past that, the environment would leave too little room for
# commands' arguments.
GIT_MAX_OVERRIDES = 2048
GIT_MAX_OVERRIDE_BYTES = 256 * 1024
GIT_MAX_NAME_BYTES = 1024
# A tree of at most this many directories is looked at before every command (a few ms):
# nothing that appears in it, whoever makes it, escapes the next command.
GIT_TREE_INLINE_DIRECTORIES = 4096
# A larger tree is looked at after each command and write, and while no command comes,
# every few seconds (for what the host changes), at most this share of one CPU.
GIT_TREE_IDLE_SECONDS = 2.0
GIT_TREE_IDLE_SHARE = 0.04


class GitGuard:
    """The git variables for commands' environment: GIT_SAFE_CONFIG, plus entries that
    switch off every filter, diff and merge driver that any repository in the workspace
    defines, at any depth.

    ROOTS are read-only mounts: the workspace, which is walked, then the extra directories.
    The first look starts in the background (`start`); the first command waits for it.
    Then before each command, the repositories found are looked at again (the git tier: a
    few stats per repository). The tree (for a repository or `.gitmodules` that appeared)
    is looked at again before each command too while it is small; a larger one in the
    background after each command or write (`writing`) and every few seconds while idle,
    and a command waits for a look still under way. While another command runs, which
    could write at any moment, a command looks at the tree itself first.
    """

    def __init__(self, roots: list[str], seed: str | None = None) -> None:
        self.roots = roots
        self.seed = seed
        """A seed file (git_seed) the first look starts from, checking it, if any."""
        self.first_look: tuple[float, int] | None = None
        """The first look's seconds (not counting the wait for the seed), and how many
        directories it took from the seed."""
        self.seed_wait = 0.0
        """How long the first look waited for the host's seed."""
        self._lock = threading.Lock()  # the look and the environment
        self._writers_lock = threading.Lock()
        self._writers = 0
        self._written = 0  # counts what may have written: ended writers, and overlaps
        self._looked = -1  # the count when the last look at the tree began
        self._look: GitLook | None = None
        self._env: dict[str, str] | None = None
        self._wake = threading.Event()
        self._worker: threading.Thread | None = None
        self._inline = False  # whether each command looks at the tree itself
        self._idle: float | None = None  # how long the worker waits before it looks

    def start(self) -> None:
        """Begin the first look at the workspace in the background."""
        with self._writers_lock:
            if self._worker is None:
                worker = threading.Thread(target=self._work, daemon=True)
                try:
                    worker.start()
                except RuntimeError:
                    return  # no thread to spare: the next command looks itself
                self._worker = worker
        self._wake.set()

    def env(self) -> dict[str, str]:
        with self._writers_lock:
            if self._writers or self._inline:
                self._written += 1
            wanted = self._written
        with self._lock:
            self._tree_tier(wanted)
            try:
                if self._look is not None and self._look.git_tier():
                    self._env = None
            except (OSError, ValueError, RecursionError) as error:
                self._look = None  # looked at from scratch next time
                self._env = refused_env(f"the scan failed: {error!r}")
            if self._env is None:
                self._env = self._combine()
            return self._env

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Around what may write the workspace (a command, Write, Edit): the tree is
        looked at again when it ends."""
        with self._writers_lock:
            self._writers += 1
        try:
            yield
        finally:
            with self._writers_lock:
                self._writers -= 1
                self._written += 1
            self.start()

    def tree_size(self) -> tuple[int, int]:
        """The directories and entries of the trees last looked at."""
        with self._lock:
            tree = self._look.tree if self._look is not None else None
            return (len(tree.directories), tree.entries) if tree is not None else (0, 0)

    def look_at_tree(self) -> None:
        """Look at the tree again now, as after a command (the background's work)."""
        with self._writers_lock:
            self._written += 1
            wanted = self._written
        with self._lock:
            self._tree_tier(wanted)

    def _work(self) -> None:
        while True:
            woken = self._wake.wait(self._idle)
            self._wake.clear()
            if not woken:  # idle: the host may have changed the tree
                self.look_at_tree()
                continue
            with self._writers_lock:
                wanted = self._written
            with self._lock:
                self._tree_tier(wanted)

    def _tree_tier(self, wanted: int) -> None:
        """Look at the tree again unless a look began after WANTED writes (lock held)."""
        if self._look is not None and self._looked >= wanted:
            return
        self._looked = wanted
        started = time.monotonic()
        try:
            seeded = 0
            if self._look is None:
                self._look = GitLook(self.roots)
                seeded = self._load_seed(self._look)
            if self._look.tree_tier():
                self._env = None
        except (OSError, ValueError, RecursionError) as error:
            self._look = None  # looked at from scratch next time
            self._env = refused_env(f"the scan failed: {error!r}")
            return
        self._inline = len(self._look.tree.directories) <= GIT_TREE_INLINE_DIRECTORIES
        took = time.monotonic() - started - self.seed_wait
        self.first_look = self.first_look or (took, seeded)
        self._idle = (
            None if self._inline else max(GIT_TREE_IDLE_SECONDS, took / GIT_TREE_IDLE_SHARE)
        )

    def _load_seed(self, look: GitLook) -> int:
        """Start LOOK from the seed, once; a seed that cannot be read is dropped."""
        seed, self.seed = self.seed, None
        if seed is None:
            return 0
        waiting = time.monotonic()
        arrived = wait_for_seed(seed)
        self.seed_wait = time.monotonic() - waiting
        if not arrived:
            return 0
        try:
            return load_seed(look.tree, seed)
        except (SeedError, OSError):
            return 0

    def _combine(self) -> dict[str, str]:
        if self._look is None:
            return self._env or refused_env("the scan failed")
        try:
            variables, submodules = self._look.combine()
            overrides = driver_overrides(variables, submodules)
            return git_config_env([*GIT_SAFE_CONFIG, *overrides])
        except (GitRefusal, OSError, ValueError, RecursionError) as refusal:
            reason = refusal if isinstance(refusal, GitRefusal) else f"the scan failed: {refusal!r}"
            return refused_env(str(reason))


def refused_env(reason: str) -> dict[str, str]:
    """Variables that stop every git command with REASON: a guard that fails says so and
    keeps git off; it never lets git run unguarded."""
    message = f"planrun: git is disabled in this sandbox: {reason}"
    # The invalid key stops every git command with the message; the GIT_DIR that does not
    # exist stops it before it opens the repository's files (a FIFO there would block it)
    # and says the same.
    env = git_config_env([*GIT_SAFE_CONFIG, (message, "")])
    env["GIT_DIR"] = "/" + message
    return env


DRIVER_SECTIONS = frozenset({b"filter", b"diff", b"merge"})
# Other sections whose <name>.<setting> names a program (difftool and mergetool, web and
# man viewers, trailer commands), and what takes its place.
PROGRAM_SECTIONS = {
    b"difftool": (("cmd", "false"), ("path", "false")),
    b"mergetool": (("cmd", "false"), ("path", "false")),
    b"browser": (("cmd", "false"), ("path", "false")),
    b"man": (("cmd", "false"), ("path", "false")),
    b"trailer": (("command", "false"), ("cmd", "false")),
}


def driver_overrides(
    variables: dict[tuple[bytes, bytes | None, bytes], None], submodules: dict[bytes, None]
) -> list[tuple[str, str]]:
    """Entries that switch off what the config defines that runs a program, and keep each
    submodule named anywhere compared by its commit only."""
    entries: dict[str, str] = {}
    for section, name, key in variables:
        if (section, name, key) == (b"diff", None, b"external"):
            entries["diff.external"] = GIT_PLAIN_DIFF
        if section in DRIVER_SECTIONS and usable_name(name):
            prefix = f"{section.decode()}.{os.fsdecode(name or b'')}."
            if section == b"filter":
                entries.update((prefix + setting, value) for setting, value in GIT_FILTER_OFF)
            elif section == b"merge":
                entries[prefix + "driver"] = "true"
            elif key == b"textconv":
                entries.update({prefix + "textconv": "cat", prefix + "cachetextconv": "false"})
            elif key == b"command":
                entries[prefix + "command"] = GIT_PLAIN_DIFF
        else:
            entries.update(tool_overrides(section, name, key))
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


def tool_overrides(section: bytes, name: bytes | None, key: bytes) -> list[tuple[str, str]]:
    """Entries that switch off a program that one variable names outside the drivers."""
    if section == b"alias":
        # An alias runs a shell (`!`) or a git command that runs a tool: an empty one stops
        # git with "empty alias". Git finds one by its whole name, in any case.
        alias = key if name is None else name + b"." + key
        return [(f"alias.{os.fsdecode(alias)}", "")] if usable_name(alias) else []
    if not usable_name(name):
        return []
    prefix = f"{section.decode()}.{os.fsdecode(name or b'')}."
    if (section, key) == (b"submodule", b"update"):
        # `!command` runs at `git submodule update`; the other modes are git's own.
        return [(prefix + "update", "checkout")]
    return [(prefix + setting, value) for setting, value in PROGRAM_SECTIONS.get(section, ())]


def usable_name(name: bytes | None) -> bool:
    """Whether git can read a subsection name back (it reads one holding a NUL only up to
    the NUL, so no driver has such a name); one too long to check refuses git."""
    if name is None or b"\0" in name:
        return False
    if len(name) > GIT_MAX_NAME_BYTES:
        raise GitRefusal(f"it names a driver or submodule with over {GIT_MAX_NAME_BYTES} bytes")
    return True


def git_config_env(entries: list[tuple[str, str]]) -> dict[str, str]:
    """GIT_CONFIG_* variables carrying ENTRIES (command-line scope, the highest)."""
    env = {"GIT_CONFIG_COUNT": str(len(entries))}
    for index, (key, value) in enumerate(entries):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


# The git variables of a command that runs no repository's own git (ripgrep, ctags).
SAFE_GIT_ENV = git_config_env(list(GIT_SAFE_CONFIG))
