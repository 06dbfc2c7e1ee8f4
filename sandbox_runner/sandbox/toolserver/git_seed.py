"""The git guard's seed: a workspace's tree as the host last walked it, which a sandbox
takes as its guard's starting state and checks (a stat per directory) instead of listing
every directory itself.

The seed is only ever an optimisation. A directory is taken from it only where its stamp
(inode, mode, size, mtime and ctime; never a racy one) is the directory's own when the
guard looks, exactly as the guard takes its own earlier look; every other directory is
listed again, and a seed that cannot be read whole is dropped. The host alone writes a
seed, and mounts it read-only: no sandbox makes one another trusts.

Paths are kept relative to the workspace, and device numbers left out (a bind mount may
show another one): the loader gives each directory the device of the workspace as the
sandbox sees it, so a directory on another device (a mount over part of it) is listed.
"""

from __future__ import annotations

import gc
import json
import os
import time

from .git_scan import GIT_SCAN_MAX_ENTRIES
from .git_tree import Directory, WorkspaceTree

SEED_FORMAT = "planrun-git-seed"
SEED_VERSION = 1
# Far above a million-file repository's (a few megabytes): past it, no seed is read.
SEED_MAX_BYTES = 256 * 1024 * 1024

# One directory: [relative path, [ino, mode, size, mtime_ns, ctime_ns], entries,
# subdirectory names, link names, whether it holds `.git`, whether it holds `.gitmodules`,
# whether it is a git directory itself (whatever its name)]. Every field of git_tree's
# Directory but the refusal: a directory refused is left out, and listed in the sandbox.
Row = list[object]


SEED_WAIT_SECONDS = 120.0
"""How long a guard waits for the host's walk (a million files take seconds) before it
walks for itself."""
NO_SEED = "none"
"""The host's word, beside where the seed would be, that none is coming."""


class SeedError(ValueError):
    """A seed that cannot be taken whole; the guard then looks at everything itself."""


def dump_seed(tree: WorkspaceTree) -> bytes:
    """The seed of TREE (refreshed, and not overflowed): its workspace's directories that
    were listed without refusal, on the workspace's device."""
    root = tree.roots[0]
    device = os.lstat(root).st_dev
    rows: list[Row] = []
    for path, record in tree.directories.items():
        relative = relative_path(path, root)
        stamp = record.stamp
        if relative is None or record.refusal is not None or stamp[0] != device or stamp[5] < 0:
            continue
        rows.append(
            [
                relative,
                list(stamp[1:]),
                record.entries,
                [os.path.basename(sub) for sub in record.subdirectories],
                [os.path.basename(link) for link in record.links],
                record.dot_git is not None,
                record.gitmodules is not None,
                record.git_dir is not None,
            ]
        )
    return encode_seed(rows)


def encode_seed(rows: list[Row]) -> bytes:
    """A seed file's bytes: its rows (see Row) under the format's name and version."""
    seed = {"format": SEED_FORMAT, "version": SEED_VERSION, "directories": rows}
    # ASCII escapes: a name that is not UTF-8 (a lone surrogate here) comes back the same.
    return json.dumps(seed, separators=(",", ":")).encode("ascii")


def wait_for_seed(path: str) -> bool:
    """Wait for the host to put the seed at PATH (it writes it whole, with a rename);
    False when it says none is coming, or none came in SEED_WAIT_SECONDS."""
    directory = os.path.dirname(path)
    if not os.access(directory, os.R_OK | os.X_OK):
        return False  # nothing could be read there
    marker = os.path.join(directory, NO_SEED)
    deadline = time.monotonic() + SEED_WAIT_SECONDS
    pause = 0.01
    while not os.path.exists(path):
        if os.path.exists(marker) or time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
    return True


def load_seed(tree: WorkspaceTree, path: str) -> int:
    """Give TREE (never looked at yet) the directories of the seed at PATH; how many.

    Raises:
        SeedError: the seed is missing, too large or malformed; TREE is then unchanged.
        OSError: the workspace cannot be stat'ed.
    """
    try:
        with open(path, "rb") as file:
            data = file.read(SEED_MAX_BYTES + 1)
    except OSError as error:
        raise SeedError(f"cannot read the seed: {error}") from None
    if len(data) > SEED_MAX_BYTES:
        raise SeedError("the seed is too large")
    # Tens of thousands of lists and records, all kept: the collector's passes over them
    # would add half the load's time, and they hold no cycle.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return take_seed(tree, data)
    finally:
        if collecting:
            gc.enable()


def take_seed(tree: WorkspaceTree, data: bytes) -> int:
    """load_seed's work on the seed's bytes."""
    try:
        seed = json.loads(data)
    except (ValueError, RecursionError) as error:
        raise SeedError(f"the seed is not JSON: {error}") from None
    if not isinstance(seed, dict) or seed.get("format") != SEED_FORMAT:
        raise SeedError("not a git guard seed")
    if seed.get("version") != SEED_VERSION:
        raise SeedError(f"seed version {seed.get('version')!r}, not {SEED_VERSION}")
    rows = seed.get("directories")
    if not isinstance(rows, list):
        raise SeedError("the seed lists no directories")
    root = tree.roots[0]
    device = os.lstat(root).st_dev
    directories = {}
    for row in rows:
        directory, record = seeded_directory(row, root, device)
        directories[directory] = record
    entries = sum(record.entries for record in directories.values())
    if entries > GIT_SCAN_MAX_ENTRIES:
        raise SeedError("the seed holds too many entries")
    tree.directories.update(directories)
    tree.entries += entries
    return len(directories)


def seeded_directory(row: object, root: str, device: int) -> tuple[str, Directory]:
    """One row of a seed as the directory record that the guard's own look would make.
    (Checked with built-ins and no call per name: a million-file tree has 50,000 rows.)"""
    if type(row) is not list or len(row) != 8:
        raise SeedError("a seed row is not a directory")
    relative, numbers, entries, subdirectories, links, dot_git, gitmodules, git_dir = row
    if type(relative) is not str or type(numbers) is not list or len(numbers) != 5:
        raise SeedError("a seed row has no path or stamp")
    ino, mode, size, mtime, ctime = numbers
    if not (type(ino) is type(mode) is type(size) is type(mtime) is type(ctime) is int):
        raise SeedError("a seed row has a stamp that is no stamp")
    if type(entries) is not int or min(ino, mode, size, mtime, ctime, entries) < 0:
        raise SeedError("a seed row has a stamp that is no stamp")
    if not (type(dot_git) is type(gitmodules) is type(git_dir) is bool):
        raise SeedError("a seed row has no git entries")
    if relative:
        require_relative(relative)
        directory = root_prefix(root) + relative
    else:
        directory = root
    record = Directory((device, ino, mode, size, mtime, ctime))
    record.entries = entries
    prefix = directory + "/" if relative else root_prefix(root)
    record.subdirectories = [prefix + name for name in require_names(subdirectories)]
    record.links = [prefix + name for name in require_names(links)]
    record.dot_git = prefix + ".git" if dot_git else None
    record.gitmodules = prefix + ".gitmodules" if gitmodules else None
    record.git_dir = directory if git_dir else None
    return directory, record


NOT_NAMES = frozenset({"", ".", ".."})


def require_relative(relative: str) -> None:
    """RELATIVE as a path of entries' names below the workspace: no `.`, `..`, empty name
    or NUL, and no leading `/`."""
    wrapped = f"/{relative}/"
    if "//" in wrapped or "/./" in wrapped or "/../" in wrapped or "\0" in relative:
        raise SeedError("the seed holds a name that is no entry's name")


def require_names(value: object) -> list[str]:
    """VALUE as a list of single entries' names: never a path, `.`, `..` or one holding
    a NUL."""
    if type(value) is not list:
        raise SeedError("a seed row has no list of names")
    try:
        joined = "".join(value)
    except TypeError:
        raise SeedError("a seed row has no list of names") from None
    if "/" in joined or "\0" in joined or not NOT_NAMES.isdisjoint(value):
        raise SeedError("the seed holds a name that is no entry's name")
    return value


def root_prefix(root: str) -> str:
    """What a path under ROOT starts with."""
    return root.rstrip("/") + "/"


def relative_path(path: str, root: str) -> str | None:
    """PATH relative to ROOT ('' for ROOT itself); None for a path outside it."""
    if path == root:
        return ""
    prefix = root_prefix(root)
    return path[len(prefix) :] if path.startswith(prefix) else None
