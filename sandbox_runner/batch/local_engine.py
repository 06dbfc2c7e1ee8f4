"""The local engine of a batch: jobs on threads of this machine, sandboxes from its Docker."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from pathlib import Path

from sandbox_runner.agents.events import AgentEvent
from sandbox_runner.batch.driver import WorkFor
from sandbox_runner.batch.job import JobOutcome, run_job
from sandbox_runner.batch.setup import BatchJob
from sandbox_runner.runs.plan_job import SandboxFactory

SandboxesFor = Callable[[BatchJob], SandboxFactory]
"""The sandbox factory of a job's task (its workspace and settings)."""
AgentEvents = Callable[[str, AgentEvent], None]
"""Receives a running job's agent events, with the job's key."""


def local_work_for(
    sandboxes_for: SandboxesFor,
    scratch_root: Path,
    cancel: threading.Event,
    on_agent_event: AgentEvents | None = None,
) -> WorkFor:
    """Each job runs run_job() in this process, with its task's registry and sandboxes."""

    def work_for(job: BatchJob) -> Callable[[], JobOutcome]:
        events = functools.partial(on_agent_event, job.key) if on_agent_event else None
        return functools.partial(
            run_job,
            job.payload,
            sandbox_factory=sandboxes_for(job),
            scratch_root=scratch_root,
            registry=job.task.prepared.registry,
            on_event=events,
            cancel=cancel,
        )

    return work_for
