"""Monorepo figures for `make bench`: a plan run and a batch on generated git repositories of
1,000, 100,000 and 1,000,000 small Python files, the model scripted (no LLM), each held to
the host's own look at the same tree (`git status --porcelain` and `find -printf`),
measured in the same run.

    python benchmarks/monorepo_bench.py [--quick | --sizes 1000,100000]

runs these figures alone; `--quick` (as `make bench-quick`) takes the 1,000-file tree only,
`--sizes` the sizes named (the smallest is the reference the others are held to).
The repositories are made once under build/monorepos (minutes for a million files), or
used as they are from the directory PLANRUN_BENCH_MONOREPOS names.

The figures of the git guard (benchmarks/guard.py), the workspace check and the tools are
taken on the largest repository by modules of their own (see LARGEST_TREE_FIGURES).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.monorepo import bench_root, ensure_repository, is_complete
from benchmarks.monorepo_run import RunSample, measure_size

SIZES = (1_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000,)
TARGET_LOOKS = 2.0
"""A run's overhead may grow with its tree by at most this many host looks at the tree."""


def say(line: str) -> None:
    print(f"bench: {line}", file=sys.stderr, flush=True)


def monorepos(sizes: tuple[int, ...], progress: Callable[[str], None] = say) -> dict[int, Path]:
    """The complete repository of each size that can be had: made where that is allowed
    (build/monorepos), else only found (a shared directory)."""
    root, may_make = bench_root()
    found = {}
    for size in sizes:
        if may_make:
            found[size] = ensure_repository(size, root, progress)
        elif is_complete(root / f"files-{size}"):
            found[size] = root / f"files-{size}"
        else:
            progress(f"not measured: {root / f'files-{size}'} is missing or not complete")
    return found


def run_figures(
    repositories: dict[int, Path],
    scratch: Path,
    client: Any,
    image: str,
    Figure: Any,
    medians: dict[int, tuple[float, float]] | None = None,
) -> list[Any]:
    """One plan run per size. The smallest tree is the reference; a larger one is held to:
    what planrun adds <= TARGET_LOOKS host looks at its tree + the reference's figure.
    MEDIANS, when given, gets each size's (median added, median host look)."""
    reference = min(repositories)
    medians = {} if medians is None else medians
    figures = []
    for size in sorted(repositories):
        name = f"plan run on a monorepo of {size:,} files (Glob, Grep, 2 git, Read, Write)"
        try:
            samples = measure_size(repositories[size], scratch, client, image, size)
        except Exception as error:
            figures.append(Figure(name, f"failed: {type(error).__name__}: {error}", "-",
                                  None, "-", False))  # fmt: skip
            continue
        added, look = medians[size] = summary(samples)
        tools = statistics.median(sample.host_tools for sample in samples)
        total = statistics.median(sample.overhead for sample in samples)
        ours = (
            f"planrun adds p50 {added:.2f} s: everything but the model p50 {total:.2f} s, less "
            f"{tools:.2f} s that the same Grep and git status take on the host "
            f"({describe(samples)})"
        )
        baseline = f"host git status --porcelain + find -printf: p50 {look:.2f} s"
        if size == reference:
            figures.append(Figure(name, ours, baseline, None, "reference for larger trees", True))
            continue
        if reference not in medians:
            figures.append(Figure(name, ours, baseline, None, "needs the reference", None))
            continue
        allowed = TARGET_LOOKS * look + medians[reference][0]
        figures.append(
            Figure(
                name,
                ours,
                f"{baseline}; added at {reference:,} files {medians[reference][0]:.2f} s",
                added / allowed,
                f"<= {allowed:.2f} s (2 looks + the {reference:,}-file figure)",
                added <= allowed,
            )
        )
    return figures


FIRST_CALL_SECONDS = 5.0
"""A real model's first answer to a planning prompt takes seconds: what planrun starts
beside it (the walk of the tree, `git status`, the guard's first look) can finish meanwhile."""


def thinking_model_figure(
    repositories: dict[int, Path],
    scratch: Path,
    client: Any,
    image: str,
    Figure: Any,
    reference_added: float,
) -> Any:
    """The largest tree's plan run again, with a first answer that takes FIRST_CALL_SECONDS."""
    from benchmarks.monorepo_run import host_look, host_tools, plan_run

    size = max(repositories)
    repository = repositories[size]
    look = host_look(repository)
    out = scratch / f"thinking-{size}"
    sample = plan_run(repository, out, client, image, look, FIRST_CALL_SECONDS)
    sample = replace(sample, host_tools=host_tools(repository))
    allowed = TARGET_LOOKS * look + reference_added
    name = (
        f"plan run on a monorepo of {size:,} files, the model's first answer taking "
        f"{FIRST_CALL_SECONDS:.0f} s"
    )
    ours = (
        f"planrun adds {sample.added:.2f} s (all but the model {sample.overhead:.2f} s, host "
        f"Grep + status {sample.host_tools:.2f} s; {describe([sample])})"
    )
    baseline = f"host git status --porcelain + find -printf: {look:.2f} s"
    target = f"<= {allowed:.2f} s (2 looks + the smallest tree's figure)"
    return Figure(name, ours, baseline, sample.added / allowed, target, sample.added <= allowed)


def summary(samples: list[RunSample]) -> tuple[float, float]:
    """(median of what planrun adds, median host look) of a size's runs."""
    added = [sample.added for sample in samples]
    return statistics.median(added), statistics.median(s.baseline for s in samples)


def describe(samples: list[RunSample]) -> str:
    """Every run's wall time, the model's largest share, and where the median run's time went."""
    walls = ", ".join(f"{sample.wall:.2f}" for sample in samples)
    model = max(sample.model for sample in samples)
    middle = sorted(samples, key=lambda sample: sample.overhead)[len(samples) // 2]
    steps = ", ".join(f"{label} {seconds:.2f}" for label, seconds in middle.steps)
    return f"walls {walls} s; model at most {model * 1e3:.0f} ms; median run, s: {steps}"


SCALE_FROM = 100_000
"""The size from which a figure held to the host's own time (a ratio) is held to its
target: on a smaller tree a request's fixed cost (milliseconds) decides the ratio."""


def at_scale(figure: Any, size: int, Figure: Any) -> Any:
    """FIGURE as measured on a tree of SIZE files: not held to a ratio below SCALE_FROM."""
    name = f"{figure.name}, {size:,} files"
    if size >= SCALE_FROM or figure.ratio is None:
        return Figure(name, figure.ours, figure.baseline, figure.ratio, figure.target, figure.met)
    target = f"{figure.target}, held from {SCALE_FROM:,} files"
    return Figure(name, figure.ours, figure.baseline, figure.ratio, target, None)


def git_guard_figures(repositories: dict[int, Path], Figure: Any) -> list[Any]:
    """The sandbox's git guard on the largest repository: what it adds before each git
    command against the command, its looks at the tree against `git status`, and a batch's
    sandboxes sharing the host's first look against each walking it."""
    from benchmarks.guard import GIT_GUARD_TARGET, guard_figures

    size = max(repositories)
    figures = []
    for figure in guard_figures(repositories[size]):
        per_command = figure.name.startswith("git guard before")
        target = f"<= {GIT_GUARD_TARGET:.0%} of the command" if per_command else "<= git status"
        figure = Figure(figure.name, figure.ours, figure.baseline, figure.ratio, target,
                        figure.met)  # fmt: skip
        figures.append(at_scale(figure, size, Figure))
    from benchmarks.guard_share import SEEDED_TARGET, guard_share_figures

    for figure in guard_share_figures(repositories[size]):
        target = f"<= {SEEDED_TARGET:.0%} of walking everything"
        figure = Figure(figure.name, figure.ours, figure.baseline, figure.ratio, target,
                        figure.met)  # fmt: skip
        figures.append(at_scale(figure, size, Figure))
    return figures


def not_measured(Figure: Any, name: str, why: str) -> Any:
    say(f"not measured: {why}")
    return Figure(name, f"not measured: {why}", "-", None, "-", None)


def largest_tree_figures(repositories: dict[int, Path], Figure: Any) -> list[Any]:
    """The workspace check's and the tools' figures on the largest repository."""
    from benchmarks.tools_scale import tool_figures
    from benchmarks.workspace_check import workspace_check_figures

    size = max(repositories)
    figures = [
        Figure(f"{f.name}, {size:,} files", f.ours, f.baseline, f.ratio, f.target, f.met)
        for f in workspace_check_figures(repositories[size])
    ]
    for figure in tool_figures({size: repositories[size]}, Figure):
        if str(figure.baseline).startswith("host"):  # held to the host's ripgrep
            figure = at_scale(replace(figure, name=figure.name.rsplit(", ", 1)[0]), size, Figure)
        figures.append(figure)
    return figures


def monorepo_figures(
    sizes: tuple[int, ...], scratch: Path, client: Any, image: str, Figure: Any
) -> list[Any]:
    """Every monorepo figure at SIZES (the first one is the reference, always included)."""
    from benchmarks.monorepo_batch import batch_figures

    repositories = monorepos(sizes)
    figures = [
        not_measured(Figure, f"monorepo of {size:,} files", f"files-{size} missing")
        for size in sizes
        if size not in repositories
    ]
    if sizes[0] not in repositories:
        return figures
    medians: dict[int, tuple[float, float]] = {}
    figures += run_figures(repositories, scratch, client, image, Figure, medians)
    if len(repositories) > 1 and min(repositories) in medians:
        reference = medians[min(repositories)][0]
        figures.append(
            thinking_model_figure(repositories, scratch, client, image, Figure, reference)
        )
    figures += batch_figures(repositories, scratch, client, image, Figure)
    try:
        figures += git_guard_figures(repositories, Figure)
    except Exception as error:
        failure = f"failed: {type(error).__name__}: {error}"
        figures.append(Figure("git guard", failure, "-", None, "-", False))
    return figures + largest_tree_figures(repositories, Figure)


def chosen_sizes(arguments: list[str]) -> tuple[int, ...]:
    """The sizes the command line asks for: --quick, --sizes N,N,..., or all of SIZES."""
    if "--quick" in arguments:
        return QUICK_SIZES
    if "--sizes" in arguments:
        listed = arguments[arguments.index("--sizes") + 1 :][:1]
        if not listed:
            raise SystemExit("--sizes needs a list of file counts, such as 1000,100000")
        try:
            return tuple(sorted({int(size) for size in listed[0].split(",")}))
        except ValueError:
            raise SystemExit(
                f"--sizes takes file counts, such as 1000,100000: {listed[0]}"
            ) from None
    return SIZES


def main(arguments: list[str]) -> int:
    from benchmarks.run import Figure, report
    from sandbox_runner.sandbox.docker_engine import connect
    from sandbox_runner.sandbox.image import require_image

    sizes = chosen_sizes(arguments)
    client = connect()
    image = require_image(client)
    with tempfile.TemporaryDirectory() as scratch:
        return report(monorepo_figures(sizes, Path(scratch), client, image, Figure))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
