"""A batch of 16 tasks on a generated monorepo, the model scripted: planrun's time per job,
everything a local `planrun batch` does included (the batch file read, the tree's
fingerprint, `git status` before and after in throwaway sandboxes, one container per job,
the ledger, the reports)."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.monorepo_run import (
    SESSION,
    ModelClock,
    check_git_worked,
    host_look,
    host_tools,
    sandbox_factory,
)

TASKS = 16
PARALLEL = 8


@dataclass(frozen=True)
class BatchSample:
    """One measured batch: wall time, its model calls' time, the host's look, and what the
    host takes for one job's own tool work (its whole-tree Grep and `git status`)."""

    wall: float
    model: float
    baseline: float
    host_tools: float = 0.0

    @property
    def per_job(self) -> float:
        """planrun's seconds per job: the wall time less the model's and less the host's
        time for the same tool work of every job (run one after another), over the jobs
        (as a plan run's figure, benchmarks/monorepo_run.py)."""
        return (self.wall - self.model - TASKS * self.host_tools) / TASKS


def _batch_file(scratch: Path, repository: Path) -> Path:
    # Plan jobs only, as batch.py counts them: no task's synthesis.
    defaults = f"{{repo: {repository}, perspectives: [p0], overrides: {{synthesis: false}}}}"
    lines = [f"defaults: {defaults}", "tasks:"]
    lines += [f"  - {{id: t{n}, requirements: Plan task {n}}}" for n in range(TASKS)]
    path = scratch / "batch.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_batch(repository: Path, scratch: Path, client: Any, image: str) -> BatchSample:
    """One batch of TASKS one-perspective tasks on REPOSITORY, at --parallel PARALLEL."""
    from sandbox_runner.batch.driver import BatchDriver
    from sandbox_runner.batch.engines import local_work_for
    from sandbox_runner.batch.setup import batch_jobs, decide_all, prepare_tasks
    from sandbox_runner.batch.tasks_file import load_batch_file
    from sandbox_runner.runs.executor import ThreadExecutor
    from sandbox_runner.runs.git_probe import git_in_sandbox

    sandboxes = sandbox_factory(repository, client, SESSION)
    scratch.mkdir(parents=True)
    out = scratch / "batch-out"
    out.mkdir()
    clock = ModelClock()
    baseline = host_look(repository)
    start = time.perf_counter()
    batch = load_batch_file(_batch_file(scratch, repository))
    prepared = prepare_tasks(batch, batch.tasks, PARALLEL, lambda _: None)
    jobs = decide_all(batch_jobs(prepared, out), out)
    executor = ThreadExecutor(PARALLEL)
    work = local_work_for(lambda _: sandboxes, out / ".scratch", executor.cancelled)

    def work_for(job: Any) -> Any:
        unit = work(job)
        assert isinstance(unit, functools.partial)
        model = clock(job.payload.label)
        return functools.partial(unit, model=lambda _: model)

    git_for = lambda _: git_in_sandbox(sandboxes)  # noqa: E731
    outcome = BatchDriver("bench", out, jobs, executor, work_for, git_for=git_for).run()
    wall = time.perf_counter() - start
    if outcome.exit_code != 0:
        reasons = {job["reason"] for job in outcome.summary["jobs"] if job["reason"]}
        raise RuntimeError(f"the batch failed: {outcome.summary['counts']} {reasons}")
    transcripts = sorted(out.rglob("p0.transcript.jsonl"))
    if len(transcripts) != TASKS:
        raise RuntimeError(f"the batch left {len(transcripts)} transcripts, not {TASKS}")
    for transcript in transcripts:
        check_git_worked(transcript)
    return BatchSample(wall, clock.seconds, baseline, host_tools(repository))


def batch_figures(
    repositories: dict[int, Path], scratch: Path, client: Any, image: str, Figure: Any
) -> list[Any]:
    """The batch on the smallest repository (the reference) and on the largest, each
    held to: per job <= the reference's per job + 2 host looks at its tree over the jobs
    (the whole batch may grow with the tree by two looks, as one run may)."""
    reference = min(repositories)
    sizes = sorted({reference, max(repositories)})
    samples: dict[int, BatchSample] = {}
    figures = []
    for size in sizes:
        name = f"batch of {TASKS} tasks on a monorepo of {size:,} files, --parallel {PARALLEL}"
        try:
            sample = run_batch(repositories[size], scratch / f"batch-{size}", client, image)
        except Exception as error:
            figures.append(Figure(name, f"failed: {type(error).__name__}: {error}", "-",
                                  None, "-", False))  # fmt: skip
            continue
        samples[size] = sample
        ours = (
            f"{sample.per_job:.2f} s per job ({sample.wall:.1f} s in all, model "
            f"{sample.model * 1e3:.0f} ms, the same Grep and git status on the host "
            f"{sample.host_tools:.2f} s per job)"
        )
        look = f"host git status + find of the tree: {sample.baseline:.2f} s"
        if size == reference:
            figures.append(Figure(name, ours, look, None, "reference for the larger tree", True))
            continue
        if reference not in samples:
            figures.append(Figure(name, ours, look, None, "needs the reference", None))
            continue
        allowed = samples[reference].per_job + 2 * sample.baseline / TASKS
        figures.append(
            Figure(
                name,
                ours,
                f"{look}; {samples[reference].per_job:.2f} s per job at {reference:,} files",
                sample.per_job / allowed,
                f"<= {allowed:.2f} s per job ({reference:,}-file per job + 2 looks / {TASKS})",
                sample.per_job <= allowed,
            )
        )
    return figures
