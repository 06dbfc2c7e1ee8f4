"""The engines a batch's jobs run on, each set up for the jobs to run: this machine (jobs on
its threads, sandboxes from its Docker) or a Ray cluster (ray_engine, ray_nodes)."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.batch.driver import WorkFor
from sandbox_runner.batch.job import JobOutcome, run_job
from sandbox_runner.batch.setup import BatchJob
from sandbox_runner.config import LoadedSettings
from sandbox_runner.errors import ConfigError
from sandbox_runner.runs.executor import Executor, ThreadExecutor
from sandbox_runner.runs.plan_job import SandboxFactory
from sandbox_runner.runs.prepare import Warn
from sandbox_runner.runs.workspace import GitStatusRunner

RAY_HINT = "the Ray engine needs Ray: pip install 'planrun[ray]'"
SandboxesFor = Callable[[BatchJob], SandboxFactory]
"""The sandbox factory of a job's task (its workspace and settings)."""
AgentEvents = Callable[[str, AgentEvent], None]
"""Receives a running job's agent events, with the job's key."""
GitFor = Callable[[Path], GitStatusRunner | None]
"""How `git status` of a repository is taken (None: the check compares files only)."""


class BatchHost(Protocol):
    """What a batch needs of the machine that drives it (the CLI's services)."""

    @property
    def docker(self) -> Callable[[], Any]: ...

    @property
    def progress(self) -> Callable[[str], None]: ...

    def sandbox_factory(
        self, workspace: Path, loaded: LoadedSettings
    ) -> Callable[[str], SandboxFactory]: ...

    def stop_sandboxes(self) -> None: ...


@dataclass(frozen=True)
class Engine:
    """Where the jobs run: the executor, each job's work, how `git status` is taken."""

    executor: Executor
    work_for: WorkFor
    git_for: GitFor
    remote_slots: int | None = None
    """Jobs at once on other machines, which charge their own copy of the budget (the
    driver gives each a share: batch.budget_gate); None: they run in this process."""


def local_engine(
    host: BatchHost,
    batch: str,
    to_run: list[BatchJob],
    scratch_root: Path,
    parallel: int,
    on_agent_event: AgentEvents | None = None,
) -> Engine:
    """Jobs on threads of this machine; `git status` of each repository taken in a
    throwaway sandbox of a task of that repository.

    Raises:
        PlanrunError: no Docker, no image, or a workspace the sandbox user cannot read.
    """
    from sandbox_runner.runs.git_probe import git_in_sandbox
    from sandbox_runner.sandbox.docker_provider import collect_garbage

    executor = ThreadExecutor(parallel)
    # Containers of an earlier driver of this batch that died (SIGKILL, a crash).
    collect_garbage(host.docker(), session=f"batch-{batch}")
    factories = {}
    for job in to_run:
        task_id = job.payload.task_id
        if task_id not in factories:
            # Docker, the image and the workspace's readability are checked before any job.
            task = job.task
            factories[task_id] = host.sandbox_factory(task.spec.workspace, task.settings)(
                f"batch-{batch}"
            )
    probes = {job.payload.workspace: factories[job.payload.task_id] for job in to_run}
    work_for = local_work_for(
        lambda job: factories[job.payload.task_id],
        scratch_root,
        executor.cancelled,
        on_agent_event,
    )

    def git_for(workspace: Path) -> GitStatusRunner | None:
        factory = probes.get(workspace)
        return None if factory is None else git_in_sandbox(factory)

    return Engine(executor, work_for, git_for)


def local_work_for(
    sandboxes_for: SandboxesFor,
    scratch_root: Path,
    cancel: threading.Event,
    on_agent_event: AgentEvents | None = None,
) -> WorkFor:
    """Each job runs run_job() in this process, with its task's sandboxes."""

    def work_for(job: BatchJob) -> Callable[[], JobOutcome]:
        events = functools.partial(on_agent_event, job.key) if on_agent_event else None
        return functools.partial(
            run_job,
            job.payload,
            sandbox_factory=sandboxes_for(job),
            scratch_root=scratch_root,
            on_event=events,
            cancel=cancel,
        )

    return work_for


def ray_engine(
    host: BatchHost,
    batch: str,
    to_run: list[BatchJob],
    out_dir: Path,
    address: str | None,
    parallel: int,
    warn: Warn,
    disconnect: contextlib.ExitStack,
) -> Engine:
    """Connect, ship the repositories of the jobs to run, prepare the nodes (only those that
    pass run jobs); with nothing to run (every job done or skipped), no cluster is needed.
    The cluster is disconnected when `disconnect` closes.

    Raises:
        ConfigError: no connection, a repository that cannot be shipped, no node ready.
    """
    from sandbox_runner.batch.ray_engine import RayEngine

    if not to_run:
        return Engine(ThreadExecutor(parallel), _nothing_to_run, _no_git)
    engine = RayEngine.connect(address, host.progress)
    disconnect.callback(engine.close)
    # A repository that cannot be packed stops the batch in seconds, before the nodes are
    # prepared (an image can take minutes to ship or build); finished ones are not packed.
    work_for = engine.work_for(batch, to_run, out_dir)
    engine.prepare(batch, to_run, host.docker, host.progress, warn)
    # Under a budget, only the jobs that can run at once hold a share of it.
    slots = max(1, min(parallel, engine.slots))
    return Engine(engine.executor(parallel), work_for, _no_git, remote_slots=slots)


def _no_git(workspace: Path) -> GitStatusRunner | None:
    """The Ray engine's driver may have no Docker: its repositories' files are compared."""
    return None


def _nothing_to_run(job: BatchJob) -> Callable[[], JobOutcome]:
    raise AssertionError(f"{job.key} is not to run")


def require_ray() -> None:
    """Check that Ray is installed (the `planrun[ray]` extra).

    Raises:
        ConfigError: it is not.
    """
    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError(RAY_HINT) from None


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """While Ray is connected, whatever is written to stdout goes to stderr.

    Ray's driver prints cluster events (such as "Raylet is terminated") to stdout from a
    thread of its own; stdout must carry only planrun's output (`--json` stays parseable).
    """
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
