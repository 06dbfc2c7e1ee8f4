"""One batch job on a worker: run one plan in a scratch directory, whose files the driver
commits (a job on another machine sends them back as values). Workers never write the
batch's output directory."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from sandbox_runner import Model
from sandbox_runner.agents.events import EventSink
from sandbox_runner.batch.resume import ATTEMPT_KEY, FINGERPRINT_KEY
from sandbox_runner.errors import PlanrunError
from sandbox_runner.limits import RunLimits
from sandbox_runner.plans.files import write_new
from sandbox_runner.plans.results import PlanResult, PlanStatus
from sandbox_runner.runs.plan_job import (
    EarlierAttempt,
    PlanJob,
    SandboxFactory,
    failed_result,
    run_plan,
)
from sandbox_runner.safe_io import UnsafeFileError, read_untrusted_bytes
from sandbox_runner.spend import Spend
from sandbox_runner.web_grant import WebGrant

SCRATCH_IDENTITY = "job.json"
"""Names the job whose files a scratch directory holds."""
NOT_STARTED = "not started: "
"""How the reason of a job the budget kept from starting begins."""
MAX_RETURNED_BYTES = 64 * 1024 * 1024
"""A plan or transcript larger than this is not sent back (a transcript is a log, not a plan)."""


@dataclass(frozen=True)
class JobPayload:
    """What a worker needs to run one job; no secrets (the API key is the node's own)."""

    key: str
    task_id: str
    job: PlanJob
    workspace: Path
    model_id: str
    limits: RunLimits = field(default_factory=RunLimits)
    allowed_tools: frozenset[str] | None = None
    web: WebGrant = field(default_factory=WebGrant)
    """The hosts the web tools may reach (the batch's grant)."""
    api_timeout: float | None = None
    api_retries: int | None = None
    fingerprint: str = ""
    """The job's fingerprint (kept beside its scratch, so a later run knows whose it is)."""
    attempt: int = 1
    """Which attempt of the job this is; with the fingerprint, in its plan's front matter."""
    earlier: EarlierAttempt | None = None
    """An attempt that stopped, whose conversation this one goes on with when it can."""

    @property
    def label(self) -> str:
        return self.job.label


@dataclass
class JobOutcome:
    """What a job produced: the result, and its plan file and transcript, either in its
    scratch directory on this machine or as values sent back from another."""

    key: str
    result: PlanResult
    document: str | None
    """The plan file's text, sent back (None: none, or it is in `scratch`)."""
    transcript: str
    """The transcript's text, sent back ("": none, or it is in `scratch`)."""
    node: str = ""
    started_at: str = ""
    finished_at: str = ""
    scratch: Path | None = None
    """The job's scratch directory, whose files the driver commits as they are (a job on
    this machine); None when they come as values."""


def default_model(payload: JobPayload) -> Model:
    """The API model of a job; the key comes from this machine's environment or config."""
    from sandbox_runner.model import create_model

    return create_model(
        payload.model_id,
        key=payload.label,
        timeout=payload.api_timeout,
        max_retries=payload.api_retries,
    )


def run_job(
    payload: JobPayload,
    *,
    sandbox_factory: SandboxFactory,
    scratch_root: Path,
    model: Callable[[JobPayload], Model] = default_model,
    on_event: EventSink | None = None,
    cancel: threading.Event | None = None,
) -> JobOutcome:
    """Run one job in `<scratch_root>/<unique>/`: its plan (whose front matter names the
    job's fingerprint and attempt) and transcript stay there for the driver to commit.

    An interrupted job leaves its scratch (and `job.json`, naming it) for the next run of
    the batch, which goes on with its conversation. Never raises for a failing plan: the
    outcome carries a failed result instead.
    """
    started = _now()
    if (skipped := not_started(payload)) is not None:
        return skipped
    scratch = scratch_root / f"{payload.task_id}.{payload.label}.{uuid.uuid4().hex[:8]}"
    scratch.mkdir(parents=True)
    job = payload.job
    identity = {"key": payload.key, "label": job.label, "fingerprint": payload.fingerprint}
    write_new(scratch / SCRATCH_IDENTITY, json.dumps(identity))
    try:
        result = run_plan(
            job,
            workspace=payload.workspace,
            out_dir=scratch,
            model=model(payload),
            model_id=payload.model_id,
            sandbox_factory=sandbox_factory,
            limits=payload.limits,
            on_event=on_event,
            cancel=cancel,
            allowed_tools=payload.allowed_tools,
            web=payload.web,
            earlier=payload.earlier,
            front_matter={FINGERPRINT_KEY: payload.fingerprint, ATTEMPT_KEY: payload.attempt},
        )
    except (PlanrunError, OSError) as error:
        result = failed_result(job, payload.model_id, str(error))
    except Exception as error:
        result = failed_result(job, payload.model_id, f"internal error: {type(error).__name__}")
    node = socket.gethostname()
    return JobOutcome(payload.key, result, None, "", node, started, _now(), scratch)


def not_started(payload: JobPayload) -> JobOutcome | None:
    """The outcome of a job the spent budget keeps from starting (no sandbox, no call; a
    resume with a higher budget runs it), or None when it may start."""
    spend = payload.limits.spend
    if spend is None or not spend.exhausted():
        return None
    return budget_outcome(payload, spend)


def budget_outcome(payload: JobPayload, spend: Spend) -> JobOutcome:
    """The outcome of a job the budget SPEND kept from starting: no sandbox, no call; status
    budget, resumable (a run of the batch with a higher budget runs it)."""
    skipped = failed_result(payload.job, payload.model_id, f"{NOT_STARTED}{spend.reason()}")
    result = replace(skipped, status=PlanStatus.BUDGET, resumable=True)
    now = _now()
    return JobOutcome(payload.key, result, None, "", socket.gethostname(), now, now)


def sent_back(outcome: JobOutcome) -> JobOutcome:
    """The outcome of a job on another machine: its files read into values (one larger
    than MAX_RETURNED_BYTES is not sent back), its scratch removed."""
    scratch, label = outcome.scratch, outcome.result.label
    if scratch is None:
        return outcome
    try:
        document = _read(scratch / f"{label}.md")
        transcript = _read(scratch / f"{label}.transcript.jsonl") or ""
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result = replace(outcome.result, plan_path=None, transcript=None)
    return replace(outcome, result=result, document=document, transcript=transcript, scratch=None)


def _read(path: Path) -> str | None:
    try:
        data = read_untrusted_bytes(path, MAX_RETURNED_BYTES, follow_symlinks=False)
    except (UnsafeFileError, OSError):
        return None
    return None if data is None else data.decode("utf-8", errors="replace")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
