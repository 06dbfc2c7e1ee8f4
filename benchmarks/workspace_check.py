"""The workspace check on a big repository, for `make bench`: the walks before and after
a run against a host `find` and a host `git status` of the same tree, the memory the
"before" record keeps, and what the check adds to each job of a batch.

    python benchmarks/workspace_check.py /work/bigrepos/files-1000000

The repository is only read: the host `git status` runs with --no-optional-locks, so it
does not refresh the index of a repository other benchmarks share.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox_runner.batch.setup import batch_jobs, prepare_tasks
from sandbox_runner.batch.tasks_file import load_batch_file
from sandbox_runner.runs.workspace_check import RepositoryTrees, take_files
from sandbox_runner.sandbox.host_walk import FileTree

WALK_TO_FIND = 5.0
"""The walk may cost at most this many host `find -printf` of the same tree."""
BYTES_PER_ENTRY = 64
"""What the "before" record may keep per file, directory or link."""
PER_JOB_SECONDS = 0.01
"""What the check may add to each job of a batch over one repository."""
BATCH_TASKS = 16


@dataclass(frozen=True)
class CheckFigure:
    """One measured comparison and its target (the fields of benchmarks/run.py's Figure)."""

    name: str
    ours: str
    baseline: str
    ratio: float | None
    target: str
    met: bool | None


def workspace_check_figures(repository: Path, repeat: int = 1) -> list[CheckFigure]:
    """The figures of the workspace check on `repository` (best of `repeat` runs each)."""
    find = best(lambda: _host(["find", str(repository), "-printf", "%p %s %T@\n"]), repeat)
    status = ["git", "--no-optional-locks", "-C", str(repository), "status", "--porcelain"]
    git = best(lambda: _host(status), repeat)
    trees: list[FileTree] = []
    walk = best(lambda: trees.append(_taken(lambda: take_files(repository, None))), repeat)
    before = trees[-1]
    after = best(lambda: _taken(lambda: take_files(repository, None, when="after the run")), repeat)
    entries = before.entries
    size = f"{entries:,} files, directories and links"
    host = f"find -printf {find:.2f} s; git status {git:.2f} s"
    figures = [
        CheckFigure(
            f"workspace check, walk before the run ({size})",
            f"{walk:.2f} s",
            host,
            walk / find,
            f"<= {WALK_TO_FIND:g}x find",
            walk <= WALK_TO_FIND * find,
        ),
        CheckFigure(
            f"workspace check, walk after the run ({size})",
            f"{after:.2f} s",
            host,
            after / find,
            f"<= {WALK_TO_FIND:g}x find",
            after <= WALK_TO_FIND * find,
        ),
    ]
    kept = retained_bytes(before)
    figures.append(
        CheckFigure(
            "workspace check, memory of the record before the run",
            f"{kept / 1e6:.1f} MB ({kept / max(entries, 1):.0f} bytes per entry)",
            "every entry's record, kept compressed",
            kept / max(entries, 1) / BYTES_PER_ENTRY,
            f"<= {BYTES_PER_ENTRY} bytes per entry",
            kept <= BYTES_PER_ENTRY * entries,
        )
    )
    figures.append(_per_job(repository))
    return figures


def best(action: Callable[[], object], repeat: int) -> float:
    """The shortest of `repeat` runs of action, in seconds."""
    samples = []
    for _ in range(max(repeat, 1)):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return min(samples)


def retained_bytes(tree: FileTree) -> int:
    """What the record keeps in memory: its compressed stream's chunks."""
    return sys.getsizeof(tree.stream) + sum(sys.getsizeof(chunk) for chunk in tree.stream)


def _taken(take: Callable[[], object]) -> FileTree:
    taken = take()
    value = getattr(taken, "value", None)
    if not isinstance(value, FileTree):
        raise RuntimeError(f"the walk did not finish: {getattr(taken, 'note', '')}")
    return value


def _host(command: list[str]) -> None:
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True)


def _per_job(repository: Path) -> CheckFigure:
    """Keying 1 and BATCH_TASKS tasks over the same repository: the walk is shared, so
    a task costs its key and nothing of the check."""
    with tempfile.TemporaryDirectory() as scratch:
        one, many = (_keying(repository, Path(scratch), tasks) for tasks in (1, BATCH_TASKS))
    per_job = max(many - one, 0.0) / (2 * (BATCH_TASKS - 1))
    return CheckFigure(
        f"workspace check in a batch, per job ({BATCH_TASKS} tasks x 2 perspectives, one "
        "repository)",
        f"{per_job * 1000:.1f} ms per job",
        f"1 task {one:.2f} s, {BATCH_TASKS} tasks {many:.2f} s: one walk before, one after",
        per_job / PER_JOB_SECONDS,
        f"<= {PER_JOB_SECONDS * 1000:.0f} ms per job",
        per_job <= PER_JOB_SECONDS,
    )


def _keying(repository: Path, scratch: Path, tasks: int) -> float:
    lines = [f"defaults: {{repo: {repository}, perspectives: [p0, p1]}}", "tasks:"]
    lines += [f"  - {{id: t{n}, requirements: Plan task {n}}}" for n in range(tasks)]
    path = scratch / f"batch-{tasks}.yaml"
    path.write_text("\n".join(lines) + "\n")
    batch = load_batch_file(path)
    prepared = prepare_tasks(batch, batch.tasks, None, lambda _: None)
    started = time.perf_counter()
    trees = RepositoryTrees()
    batch_jobs(prepared, None, trees)
    if trees.get(prepared[0].spec.workspace) is None:
        raise RuntimeError("the batch did not keep the repository's tree")
    return time.perf_counter() - started


def main() -> None:
    for figure in workspace_check_figures(
        Path(sys.argv[1]), repeat=int(sys.argv[2]) if len(sys.argv) > 2 else 1
    ):
        ratio = f"{figure.ratio:.2f}" if figure.ratio is not None else "-"
        verdict = "met" if figure.met else "MISSED"
        print(f"{figure.name}\n  ours {figure.ours} | baseline {figure.baseline}")
        print(f"  ratio {ratio} | target {figure.target} | {verdict}")


if __name__ == "__main__":
    main()
