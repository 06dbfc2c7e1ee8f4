"""One walk of a workspace for all a run or a batch does as it starts: the workspace
check's tree before the run, and the git guard's seed that every sandbox starts from.

A run's sandbox factory begins the walk (in the background, at a lower priority) as soon
as Docker answers; the workspace check then takes that walk's tree rather than walking
again, once: a later run in the same process walks for itself. The seed goes into a
directory of the walk's own, which each sandbox mounts read-only before the seed is
there: the sandbox starts at once, and its git guard waits for the seed (or for `none`,
when there will be none).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from sandbox_runner.limits import WORKSPACE_WALK_SECONDS
from sandbox_runner.paths import planrun_home
from sandbox_runner.sandbox.host_walk.find import Walk, walk
from sandbox_runner.sandbox.toolserver.arguments import is_within

__all__ = [
    "NO_SEED",
    "SEED_FILE",
    "SharedWalk",
    "begin_walk",
    "claim_walk",
    "prune_seeds",
    "seed_directory",
    "seed_root",
    "write_seed",
]

log = logging.getLogger(__name__)

SEED_FILE = "seed.json"
NO_SEED = "none"
"""Written instead of the seed when there will be none: the guards stop waiting."""
REUSE_SECONDS = 60.0
"""How old a walk may be (from its start) to serve as a seed (checked by each sandbox:
an older one only costs listings)."""
CLAIM_SECONDS = 15.0
"""How old a walk may be to serve as a run's "before" (a run's check comes seconds after
its sandboxes' factory began the walk; what changed since would be reported as changed
during the run)."""

_lock = threading.Lock()
_walks: dict[str, SharedWalk] = {}
_numbers = itertools.count()


@dataclass
class SharedWalk:
    """A walk of one workspace begun in the background, and its seed directory."""

    root: str
    exclude: str | None
    started: float
    future: Future[Walk] = field(default_factory=Future)
    seed_dir: Path | None = None
    seeding: bool = False
    """Whether a seed was asked of it (none is made when the cache is in the workspace)."""
    claimed: bool = False
    """Whether a workspace check took its tree already (no second one takes it)."""


SEED_ROOT = ("cache", "git-seed")
"""Where seed directories are made, below planrun's home."""


def seed_root() -> Path:
    """Where seed directories are made (one per walk; `planrun sandbox gc` prunes them)."""
    return planrun_home().joinpath(*SEED_ROOT)


def begin_walk(
    workspace: Path, exclude: Path | None = None, *, seed: bool = True, claimed: bool = False
) -> SharedWalk:
    """Begin a walk of WORKSPACE (EXCLUDE left out), with a seed directory unless SEED is
    False, and keep it for those that ask for a walk of the same workspace soon after
    (CLAIMED: its tree is taken already, by the check that begins it)."""
    root = os.path.realpath(workspace)
    excluded = None if exclude is None else os.path.realpath(exclude)
    seed_dir = _new_seed_dir(root) if seed else None
    shared = SharedWalk(root, excluded, time.monotonic(), seed_dir=seed_dir, seeding=seed,
                        claimed=claimed)  # fmt: skip
    with _lock:
        _walks[root] = shared
    thread = threading.Thread(target=_run, args=(shared,), name="planrun-walk", daemon=True)
    thread.start()
    return shared


def claim_walk(workspace: Path, exclude: Path | None) -> Future[Walk] | None:
    """The tree of a walk begun lately for this very check (same workspace and exclude,
    not claimed yet), claimed; None: the check walks for itself."""
    root = os.path.realpath(workspace)
    excluded = None if exclude is None else os.path.realpath(exclude)
    with _lock:
        shared = _walks.get(root)
        if shared is None or shared.claimed or shared.exclude != excluded:
            return None
        if _old(shared, CLAIM_SECONDS):
            return None
        shared.claimed = True
        return shared.future


def seed_directory(workspace: Path) -> Path | None:
    """The seed directory of a recent walk of WORKSPACE, beginning one if there is none;
    None when no seed can be made (the planrun home is inside the workspace)."""
    root = os.path.realpath(workspace)
    with _lock:
        shared = _walks.get(root)
    if shared is None or not shared.seeding or _old(shared, REUSE_SECONDS):
        shared = begin_walk(workspace)
    return shared.seed_dir  # None: none can be made, and no walk is begun again for it


def write_seed(workspace: Path, directory: Path) -> Path | None:
    """Walk WORKSPACE now and write its seed into DIRECTORY (made if need be); the seed
    file, or None (and the `none` marker) when the walk cannot vouch for one."""
    from sandbox_runner.sandbox.host_walk.seed import seed_from_walk

    root = os.path.realpath(workspace)
    if _inside(directory, root):
        return None
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o755)  # the sandbox user reads the seed through it
    done = walk(root, seed=True)
    data = seed_from_walk(done.seed, root) if done.seed is not None else None
    return _publish(directory, root, data)


_SEED_DIRECTORY = re.compile(r"[0-9]+-[0-9]+")
"""A seed directory's name: the pid of the planrun that made it, and a number."""
_EARLIER_SEED = re.compile(r"[0-9a-f]+\.json|\.partial-.*", re.DOTALL)
"""The seed files of an earlier planrun, and its writes cut short."""


def prune_seeds(*, everything: bool = False) -> int:
    """Remove the seed directories of planrun processes that are gone (EVERYTHING: of
    every other one too), and the seed files of earlier planruns; how many. Nothing
    else, and nothing through a link (a repository that holds PLANRUN_HOME could make
    the cache lead to the user's own files)."""
    try:
        root = _open_seed_root()
    except OSError:
        return 0
    removed = 0
    try:
        with os.scandir(root) as scan:
            entries = list(scan)
        for entry in entries:
            directory = entry.is_dir(follow_symlinks=False)
            if directory and _SEED_DIRECTORY.fullmatch(entry.name):
                owner = int(entry.name.partition("-")[0])
                if owner == os.getpid() or (not everything and _alive(owner)):
                    continue
                shutil.rmtree(entry.name, ignore_errors=True, dir_fd=root)
            elif not directory and _EARLIER_SEED.fullmatch(entry.name):
                with contextlib.suppress(OSError):
                    os.unlink(entry.name, dir_fd=root)
            else:
                continue
            removed += 1
    finally:
        os.close(root)
    return removed


def _open_seed_root() -> int:
    """The seed root, opened through planrun's home without following a link below it."""
    descriptor = os.open(planrun_home(), os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in SEED_ROOT:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
            inner = os.open(name, flags, dir_fd=descriptor)
            os.close(descriptor)
            descriptor = inner
    except OSError:
        os.close(descriptor)
        raise
    return descriptor


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False  # no process has that pid (now, or ever)
    except PermissionError:
        return True  # another user's process
    return True


def _run(shared: SharedWalk) -> None:
    from sandbox_runner.sandbox.host_walk.seed import seed_from_walk

    data = None
    try:
        done = walk(shared.root, exclude=shared.exclude, time_limit=WORKSPACE_WALK_SECONDS,
                    seed=shared.seed_dir is not None, background=True)  # fmt: skip
        shared.future.set_result(done)
        if done.seed is not None and shared.seed_dir is not None:
            data = seed_from_walk(done.seed, shared.root)
    except BaseException as error:
        if not shared.future.done():
            shared.future.set_exception(error)
        log.debug("the walk of %s failed: %s", shared.root, error)
    finally:
        if shared.seed_dir is not None:
            try:
                _publish(shared.seed_dir, shared.root, data)
            except OSError as error:
                log.debug("no git guard seed for %s: %s", shared.root, error)


def _publish(directory: Path, root: str, data: bytes | None) -> Path | None:
    """Write DATA as DIRECTORY's seed (atomically: a guard reads it whole or not at all),
    or the `none` marker."""
    if _inside(directory, root):  # a link made meanwhile
        return None
    name, content = (SEED_FILE, data) if data is not None else (NO_SEED, b"")
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".partial-")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(content)
        os.chmod(temporary, 0o644)  # the sandbox user reads it
        os.replace(temporary, directory / name)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return directory / name if data is not None else None


def _new_seed_dir(root: str) -> Path | None:
    """A fresh directory for one walk's seed, removed when this process ends; None when
    it would be inside the workspace (a sandbox that writes the workspace could forge
    the seed the others trust) or the cache leads elsewhere through a link."""
    parent = seed_root()
    if _inside(parent, root):
        return None
    name = f"{os.getpid()}-{next(_numbers)}"
    try:
        parent.mkdir(parents=True, exist_ok=True)
        descriptor = _open_seed_root()
    except OSError as error:
        log.debug("no seed directory: %s", error)
        return None
    try:
        shutil.rmtree(name, ignore_errors=True, dir_fd=descriptor)  # a dead process's pid
        os.mkdir(name, 0o755, dir_fd=descriptor)
        os.chmod(name, 0o755, dir_fd=descriptor)  # whatever the umask: the sandbox reads it
    except OSError as error:
        log.debug("no seed directory: %s", error)
        return None
    finally:
        os.close(descriptor)
    directory = parent / name
    if _inside(directory, root):
        return None
    atexit.register(shutil.rmtree, directory, True)
    return directory


def _inside(path: Path, root: str) -> bool:
    return is_within(os.path.realpath(path), root)


def _old(shared: SharedWalk, seconds: float) -> bool:
    return time.monotonic() - shared.started > seconds
