"""The work session's guard: its look after each tool call, against a host `find` of the
same tree (the cheapest whole-tree look a shell gives)."""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

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
