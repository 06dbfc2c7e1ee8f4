"""The host's walk of a workspace: one GNU find over the tree that gives the workspace
check its before/after record (tree.py) and the git guard its seed (seed.py), shared by
everything a run or batch starts with (shared.py)."""

from __future__ import annotations

import os

from sandbox_runner.sandbox.host_walk.find import walk
from sandbox_runner.sandbox.host_walk.legacy import legacy_fingerprint
from sandbox_runner.sandbox.host_walk.tree import DIGEST_PREFIX, FileTree, PathChange, TreeChanges

__all__ = [
    "FileTree",
    "PathChange",
    "TreeChanges",
    "legacy_fingerprint",
    "same_tree",
    "tree_fingerprint",
]


def tree_fingerprint(
    workspace: os.PathLike[str] | str,
    *,
    exclude: os.PathLike[str] | str | None = None,
    time_limit: float | None = None,
) -> str | None:
    """A digest of every path, type, permissions, size, mtime and link target under the
    workspace (.git included: a write there is a change too); None when the walk takes
    longer than TIME_LIMIT seconds."""
    tree = walk(workspace, exclude=exclude, time_limit=time_limit).tree
    return tree.digest if tree.complete else None


def same_tree(
    workspace: os.PathLike[str] | str,
    recorded: str,
    *,
    exclude: os.PathLike[str] | str | None = None,
) -> bool:
    """Whether the workspace is still the tree whose digest was RECORDED (by this planrun,
    or by an earlier one, whose digest is made the earlier way)."""
    if not recorded.startswith(DIGEST_PREFIX):
        return legacy_fingerprint(workspace, exclude=exclude) == recorded
    return tree_fingerprint(workspace, exclude=exclude) == recorded
