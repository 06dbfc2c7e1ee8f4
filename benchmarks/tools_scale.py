"""Glob, Grep, LS and LSP on generated monorepos (benchmarks/monorepo.py), in a sandbox
container of the sandbox image, as a plan's tool calls run them.

    python benchmarks/tools_scale.py /work/bigrepos/files-1000000

prints one line per figure. `make bench` calls `tool_figures` with its repositories.
Each figure is the wall time of one request, from the host sending it to the reply, the
first of its kind in a fresh tool server (so LSP's is a first query: nothing indexed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.monorepo import file_path

FIRST_PAGE_TARGET_S = 1.0
"""Glob's first page, however large the tree."""
COMMON_GREP_TARGET_S = 2.0
"""Grep for a string in every file: it stops after GREP_MAX_LINES."""
LS_TARGET_S = 0.5
GREP_WALK_RATIO = 1.5
"""A search that must read the whole tree, against ripgrep alone on the host."""
LSP_WALK_RATIO = 2.0
"""LSP's definition of a symbol alone: one ripgrep walk, then ctags on the files it found
(asked from a file, it reads that file's directory first: held to FIRST_PAGE_TARGET_S)."""

REQUEST_TIMEOUT_S = 300.0
FigureT = TypeVar("FigureT")


@dataclass
class ToolTiming:
    """One request's wall time and the line of its answer that says what it is: a cap's
    note when there is one, else the last line."""

    name: str
    seconds: float
    ok: bool
    summary: str


def tool_figures(repositories: Mapping[int, Path], Figure: Callable[..., FigureT]) -> list[FigureT]:
    """The figures of each repository, largest last, as Figure(name, ours, baseline,
    ratio, target, met)."""
    figures: list[FigureT] = []
    for size in sorted(repositories):
        figures += figures_of(repositories[size], size, Figure)
    return figures


def figures_of(repository: Path, size: int, Figure: Callable[..., FigureT]) -> list[FigureT]:
    # The host's walk before and after the sandbox's, so that neither pays a colder cache.
    before = host_rg_seconds(repository, rare_pattern(size))
    timings = {timing.name: timing for timing in measure_tools(repository, size)}
    after = host_rg_seconds(repository, rare_pattern(size))
    walk = None if before is None or after is None else min(before, after)
    figures = []
    for name, target in (
        ("Glob **/* (first page)", FIRST_PAGE_TARGET_S),
        ("Glob **/f07.py", FIRST_PAGE_TARGET_S),
        ("Grep, a string in every file", COMMON_GREP_TARGET_S),
        ("LS of the root", LS_TARGET_S),
        ("LS of a leaf directory", LS_TARGET_S),
        ("LSP definition asked from a file, first query", FIRST_PAGE_TARGET_S),
    ):
        timing = timings[name]
        row = (f"{name}, {size:,} files", shown(timing), "-", timing.seconds / target)
        figures.append(Figure(*row, f"<= {target:g} s", timing.ok and timing.seconds <= target))
    for name, ratio_target in (
        ("Grep, a string in one file", GREP_WALK_RATIO),
        ("LSP definition of a symbol alone (whole repository)", LSP_WALK_RATIO),
    ):
        timing = timings[name]
        if walk is None:
            label = f"{name}, {size:,} files"
            figures.append(Figure(label, shown(timing), "no rg on the host", None,
                                  f"<= {ratio_target:g}x", None))  # fmt: skip
            continue
        ratio = timing.seconds / walk
        row = (f"{name}, {size:,} files", shown(timing), f"host `rg -l`: {walk:.2f} s", ratio)
        figures.append(Figure(*row, f"<= {ratio_target:g}x", timing.ok and ratio <= ratio_target))
    return figures


def shown(timing: ToolTiming) -> str:
    answer = timing.summary if len(timing.summary) <= 90 else timing.summary[:87] + "..."
    return f"{timing.seconds:.2f} s ({answer})" if timing.ok else f"failed: {answer}"


def rare_pattern(size: int) -> str:
    """A name defined in one file, late in path order, so no search can stop early."""
    return rf"value_{size * 7 // 10}\b"


def measure_tools(repository: Path, size: int) -> list[ToolTiming]:
    """Time each tool once, in a fresh tool server over REPOSITORY (mounted read-only)."""
    from sandbox_runner.sandbox.docker_engine import connect
    from sandbox_runner.sandbox.image import require_image
    from tests.support.toolserver_process import ServerProcess

    image = require_image(connect())
    index = size * 7 // 10
    target = file_path(index)
    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("Glob **/* (first page)", "glob", {"pattern": "**/*"}),
        ("Glob **/f07.py", "glob", {"pattern": "**/f07.py"}),
        ("Grep, a string in one file", "grep", {"pattern": rare_pattern(size)}),
        ("Grep, a string in every file", "grep", {"pattern": "return"}),
        ("LS of the root", "ls", {}),
        ("LS of a leaf directory", "ls", {"path": os.path.dirname(target)}),
        ("LSP definition asked from a file, first query", "lsp",
         {"operation": "definition", "file_path": target, "line": 4, "character": 5}),
        ("LSP definition of a symbol alone (whole repository)", "lsp",
         {"operation": "definition", "symbol": f"value_{index}"}),
    ]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="planrun-bench-tools-") as plan_dir:
        server = ServerProcess(repository, Path(plan_dir), image=image)
        try:
            server.ok("ping")
            return [timed(server, *request) for request in requests]
        finally:
            server.remove()


def timed(server: Any, name: str, op: str, args: dict[str, Any]) -> ToolTiming:
    started = time.perf_counter()
    # The server answers by the request's timeout (a timed-out search says so).
    response = server.wait_for(server.send(op, args, REQUEST_TIMEOUT_S), REQUEST_TIMEOUT_S + 30)
    seconds = time.perf_counter() - started
    text = str(response["output"] if response["ok"] else response["error"])
    lines = text.splitlines() or [""]
    notes = [line for line in lines if line.startswith("[")]
    return ToolTiming(name, seconds, bool(response["ok"]), (notes or lines)[-1])


def host_rg_seconds(repository: Path, pattern: str) -> float | None:
    """ripgrep alone on the host, listing the files that match: the walk's floor."""
    if shutil.which("rg") is None:
        return None
    argv = ["rg", "--no-config", "--hidden", "-l", "--glob", "!.git", "-e", pattern]
    started = time.perf_counter()
    subprocess.run([*argv, str(repository)], capture_output=True)
    return time.perf_counter() - started


if __name__ == "__main__":
    tree = Path(sys.argv[1])
    count = int(tree.name.rpartition("-")[2])
    for row in tool_figures({count: tree}, lambda *fields: fields):
        name, ours, baseline, ratio, target, met = row
        ratio_text = "-" if ratio is None else f"{ratio:.2f}"
        print(f"{name}: {ours} | {baseline} | ratio {ratio_text} | target {target} | met {met}")
