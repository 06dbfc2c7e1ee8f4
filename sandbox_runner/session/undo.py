"""/undo: the files the agent changed in its last turns put back as they were before them.

Only those files are touched; files it created are removed, files it removed come back.
Nothing is written unless every one of them is still as the agent left it (a change of
the user's since is never overwritten), and a protected file (one that host tools run or
agents obey) is left alone: those change only through an approved edit.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from sandbox_runner.errors import ConfigError
from sandbox_runner.paths import WORKSPACE_MOUNT
from sandbox_runner.protected import workspace_protection
from sandbox_runner.session.checkpoints import Checkpoint, Checkpoints
from sandbox_runner.session.restore_io import current_entry, put, remove
from sandbox_runner.session.shadow_git import Entry

MAX_LISTED = 8


@dataclass(frozen=True)
class Restore:
    """One file to put back: as it was (None: it did not exist) and as the agent left it."""

    path: str
    target: Entry | None
    left: Entry | None


def undo(checkpoints: Checkpoints, count: int) -> list[str]:
    """Undo the last COUNT turns that changed files; what was done, line by line.

    Raises:
        ConfigError: nothing to undo, a turn too large to undo, or a file changed since
            (then nothing at all is written).
    """
    if checkpoints.off is not None:
        raise ConfigError(f"/undo cannot work in this session: {checkpoints.off}")
    turns = checkpoints.turns[-count:] if count > 0 else []
    if not turns:
        raise ConfigError("nothing to undo: no turn of this session changed a file")
    if len(turns) < count:
        raise ConfigError(f"only {len(turns)} turn(s) with changes can be undone")
    for turn in turns:
        if turn.too_large:
            raise ConfigError(
                f"turn {turn.turn} changed {_listed(turn.too_large)}, too large to be kept "
                "in a checkpoint; /undo cannot take it back (undo it by hand)"
            )
    restores = _restores(checkpoints, turns)
    protected = [r.path for r in restores if workspace_protection(f"{WORKSPACE_MOUNT}/{r.path}")]
    restores = [r for r in restores if r.path not in protected]
    workspace = checkpoints.workspace
    changed = [r.path for r in restores if current_entry(workspace, r.path) != r.left]
    if changed:
        raise ConfigError(
            f"/undo refused: {_listed(changed)} changed since the agent's turn (yours?); "
            "nothing was restored. Undo by hand, or ask the agent."
        )
    done: dict[str, list[str]] = {"restored": [], "removed": [], "recreated": []}
    # Removals first: a link the agent put where a directory was goes before the files
    # that come back beneath it.
    for restore in sorted(restores, key=lambda r: (r.target is not None, r.path)):
        if restore.target is None:
            remove(workspace, restore.path)
            done["removed"].append(restore.path)
        else:
            put(workspace, restore.path, restore.target, checkpoints.git.blob(restore.target.blob))
            done["recreated" if restore.left is None else "restored"].append(restore.path)
    checkpoints.drop(len(turns))
    numbers = ", ".join(str(turn.turn) for turn in turns)
    lines = [f"undid turn{'s' if len(turns) > 1 else ''} {numbers}:"]
    lines += [f"  {what}: {_listed(paths)}" for what, paths in done.items() if paths]
    if protected:
        lines.append(f"  left as they are (protected): {_listed(protected)}")
    return lines


def _restores(checkpoints: Checkpoints, turns: list[Checkpoint]) -> list[Restore]:
    """Each path the turns changed: as before the first of them that changed it, and as
    after the last. A path the user changed between two of the turns is refused."""
    git = checkpoints.git
    paths = sorted({path for turn in turns for path in turn.paths})
    trees: dict[str, dict[str, Entry]] = {}

    def entry(tree: str, path: str) -> Entry | None:
        if tree not in trees:
            trees[tree] = git.entries(tree, paths)
        return trees[tree].get(path)

    restores, between = [], []
    for path in paths:
        touching = [turn for turn in turns if path in turn.paths]
        for earlier, later in itertools.pairwise(touching):
            if entry(earlier.after, path) != entry(later.before, path):
                between.append(path)
        target, left = entry(touching[0].before, path), entry(touching[-1].after, path)
        restores.append(Restore(path, target, left))
    if between:
        raise ConfigError(
            f"/undo refused: {_listed(between)} changed between the agent's turns; nothing "
            "was restored. Undo fewer turns."
        )
    return restores


def _listed(paths: list[str]) -> str:
    shown = ", ".join(paths[:MAX_LISTED])
    return shown + (f" and {len(paths) - MAX_LISTED} more" if len(paths) > MAX_LISTED else "")
