"""The guards' looks: the work session's after each tool call, against a host `find` of
the same tree (the cheapest whole-tree look a shell gives); and the sandbox's git guard on
a big generated repository, against the git commands it guards (`guard_figures`).

    python benchmarks/guard.py /path/to/files-1000000
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.monorepo import file_path
from sandbox_runner.sandbox.toolserver.git_guard import GitGuard
from sandbox_runner.sandbox.toolserver.processes import command_env
from sandbox_runner.sandbox.workspace_guard import WorkspaceGuard

DIRECTORIES = 5_000
FILES_PER_DIRECTORY = 10
TARGET_RATIO = 1.0
"""The look after a call must cost no more than one `find -type d` of the tree."""


def make_tree(root: Path) -> None:
    for number in range(DIRECTORIES):
        directory = root / f"pkg{number // 100}" / f"mod{number}"
        directory.mkdir(parents=True)
        for file in range(FILES_PER_DIRECTORY):
            (directory / f"f{file}.py").write_text("x = 1\n")
    (root / ".git").mkdir()


def median_seconds(run: Callable[[], object], times: int = 7) -> float:
    samples = []
    for _ in range(times):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def bench_guard() -> tuple[str, str, float, bool]:
    """(ours, baseline, ratio, met) for one look of the guard after a call."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch, "repo")
        make_tree(root)
        guard = WorkspaceGuard(root, Path(scratch, "quarantine"))
        (root / "pkg3" / "mod300" / "new.py").write_text("y = 2\n")  # a call changed a little
        ours = median_seconds(guard.check)
        find = ["find", str(root), "-type", "d"]
        baseline = median_seconds(lambda: subprocess.run(find, capture_output=True, check=True))
    ratio = ours / baseline
    files = DIRECTORIES * FILES_PER_DIRECTORY
    return (
        f"{ours * 1000:.0f} ms per look ({files:,} files, {DIRECTORIES:,} directories)",
        f"find -type d {baseline * 1000:.0f} ms",
        ratio,
        ratio <= TARGET_RATIO,
    )


class GuardFigure(NamedTuple):
    """One figure of the sandbox's git guard on a big repository."""

    name: str
    ours: str
    baseline: str
    ratio: float
    met: bool
    """Whether the figure meets its target (GIT_GUARD_TARGET, or the tree look's)."""


GIT_GUARD_TARGET = 0.10
"""What the guard may add before a git command, as a share of the command's time."""
GIT_COMMANDS = (
    ("git log -5", ["log", "-5"]),
    ("git blame", ["blame", file_path(1)]),
    ("git diff HEAD~3 --stat", ["diff", "HEAD~3", "--stat"]),
    ("git status", ["status"]),
)


def guard_figures(repository: Path) -> list[GuardFigure]:
    """The tool server's git guard on REPOSITORY (a benchmarks/monorepo.py repository,
    such as one of 1,000,000 files), run in this process as the tool server runs it.

    Returns, in order: the first look (the walk when the sandbox starts, caches warm)
    against one `git status` (target: no slower than it); for each of `git log -5`,
    `git blame <file>`, `git diff HEAD~3 --stat` and `git status`, what the guard adds
    before the command against the command itself (target: at most GIT_GUARD_TARGET of
    it); and the look at the tree after a command,
    which runs in the background while the model thinks, against `git status` (target:
    no slower than it).
    """
    guarded_git(GitGuard([str(repository)]), repository, ["status"])  # warms the caches
    guard = GitGuard([str(repository)])
    start = time.perf_counter()
    guard.env()
    first = time.perf_counter() - start
    tree = guard.tree_size()
    command_times = {
        label: median_seconds(partial(guarded_git, guard, repository, argv), times=5)
        for label, argv in GIT_COMMANDS
    }
    status = command_times["git status"]
    figures = [
        GuardFigure(
            "git guard, first look",
            f"{first:.2f} s ({tree[0]:,} directories, {tree[1]:,} entries)",
            f"git status {status:.2f} s",
            first / status,
            first <= status,
        )
    ]
    before = median_seconds(guard.env, times=51)
    for label, command in command_times.items():
        ratio = before / command
        figures.append(
            GuardFigure(
                f"git guard before {label}",
                f"{before * 1e6:.0f} µs",
                f"{label} {command * 1e3:.1f} ms",
                ratio,
                ratio <= GIT_GUARD_TARGET,
            )
        )
    after = median_seconds(guard.look_at_tree, times=5)
    figures.append(
        GuardFigure(
            "git guard, tree look after a command (background)",
            f"{after * 1e3:.0f} ms",
            f"git status {status * 1e3:.0f} ms",
            after / status,
            after <= status,
        )
    )
    return figures


def guarded_git(guard: GitGuard, repository: Path, argv: list[str]) -> None:
    """ARGV run by git as a command in the sandbox runs it (the guard's environment)."""
    env = command_env("bench", guard.env())
    subprocess.run(["git", *argv], cwd=repository, env=env, capture_output=True, check=True)


if __name__ == "__main__":
    for figure in guard_figures(Path(sys.argv[1])):
        verdict = "ok" if figure.met else "MISSED"
        print(f"{figure.name}: {figure.ours} vs {figure.baseline} = {figure.ratio:.3f} {verdict}")
